"""'Did you mean' for a mistyped verb or flag: the close candidates, the closest first."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def edit_distance(a: str, b: str) -> int:
    """Edits from A to B: insertions, deletions, substitutions and swaps of two neighbours (`imgae` -> `image`
    is one)."""
    before: list[int] = []
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            current[j] = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                current[j] = min(current[j], before[j - 2] + 1)
        before, row = row, current
    return row[len(b)]


def closest(word: str, candidates: Iterable[str], limit: int = 3) -> list[str]:
    """The candidates close to WORD (difflib's test, as click makes it), the fewest edits first; ties keep
    difflib's order (the most similar first)."""
    close = difflib.get_close_matches(word, list(dict.fromkeys(candidates)), n=limit)
    return sorted(close, key=lambda candidate: edit_distance(word, candidate))


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """' Did you mean X?' or ' Did you mean X, Y or Z?' (each quoted), '' when nothing is close."""
    found = [repr(candidate) for candidate in closest(word, candidates)]
    if not found:
        return ""
    listed = found[0] if len(found) == 1 else ", ".join(found[:-1]) + " or " + found[-1]
    return f" Did you mean {listed}?"
