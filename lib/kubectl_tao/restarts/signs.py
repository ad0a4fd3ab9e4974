"""The sign rows of the restart decision: what a failed rank printed, as the gang entrypoint matches it.

Derived from diagnosis/causes.py's table (one row per cause and class, its signs as one POSIX ERE that `grep -E`
matches) and rendered into the pod as TAO_RETRY_SIGNS (``signs_text``), beside table.py's exit codes. The class a
failed rank's output shows decides over its exit code in the entrypoint: ERR_PROGRAM is final (a device-side
assert fails again though it ends in SIGABRT), ERR_INFRA restarts (an NCCL system error is worth a retry though
Python exits 1). ``output_cause`` picks the row as the entrypoint does, for the tests that hold the rows against
the failure corpus (docs/restarts.md).
"""

from __future__ import annotations

import re

from kubectl_tao.core import ere
from kubectl_tao.core.valueclass import Value, record
from kubectl_tao.diagnosis import causes

TAIL_LINES = 400  # the entrypoint reads this many last lines of the failed attempt's output
RANK_PREFIX_ERE = r"^(\[rank[0-9]+\]: ?)?"  # torch's `[rankN]: ` before a line, which causes.py drops first
# Signs that say a peer went away (tier FOLLOWER): the rank that printed them waits longer before it ends the
# attempt, so that the peer's own failure (it may be final) decides.
FOLLOWER = causes.FOLLOWER


@record(frozen=True)
class SignRow(Value):
    """One cause's signs of one class, as the entrypoint matches them: ``ere`` finds a line that one of
    ``patterns`` (causes.py's own) finds, after causes.py's `[rankN]: ` prefix is dropped."""

    err_class: str
    tier: str
    cause: str
    ere: str
    patterns: tuple[re.Pattern[str], ...]

    def line(self) -> str:
        return f"{self.err_class} {self.tier} {self.cause} {self.ere}"


def _sign_ere(pattern: re.Pattern[str]) -> str | None:
    text = ere.to_ere(pattern.pattern, pattern.flags)
    if text is None:
        return None
    return RANK_PREFIX_ERE + text[1:] if text.startswith("^") else text


GENERIC = causes.GENERIC
NOT_AN_ERROR = "ChildFailedError"  # torchrun's closing banner: never the catch-all's line (causes._NOT_AN_ERROR)


def sign_rows() -> list[SignRow]:
    """The signs the entrypoint matches, in the order a rank's own output is judged in causes.py (tier:
    primary, killed, timeout, generic, follower; then the table's order): the first row that finds a line
    decides. One row per run of a cause's signs of one class, every sign that ERE says exactly (the others:
    ``untranslated_signs``). The catch-all ProgramError (tier generic: an exception the table does not name)
    only counts on a line that no other row finds and that is not torchrun's ChildFailedError banner, as in
    causes.py, where a line belongs to the first cause of the table that finds it."""
    rows: list[SignRow] = []
    for cause in sorted(causes.CAUSES, key=lambda c: causes.RANK_ORDER[c.tier]):
        run: list[tuple[str, re.Pattern[str]]] = []
        run_class = ""
        for sign in cause.signs:
            text = _sign_ere(sign.pattern)
            if text is None:
                continue
            klass = sign.err_class or cause.err_class
            if run and klass != run_class:
                rows.append(_row(run_class, cause, run))
                run = []
            run_class = klass
            run.append((text, sign.pattern))
        if run:
            rows.append(_row(run_class, cause, run))
    return rows


def _row(klass: str, cause: causes.Cause, run: list[tuple[str, re.Pattern[str]]]) -> SignRow:
    text = run[0][0] if len(run) == 1 else "|".join(f"({text})" for text, _ in run)
    return SignRow(klass, cause.tier, cause.name, text, tuple(pattern for _, pattern in run))


def untranslated_signs() -> list[tuple[str, str]]:
    """(cause, pattern) of the signs ERE cannot say exactly: causes.py still reads them (`explain`); the
    entrypoint does not."""
    return [
        (cause.name, sign.pattern.pattern)
        for cause in causes.CAUSES
        for sign in cause.signs
        if _sign_ere(sign.pattern) is None
    ]


def signs_text() -> str:
    """TAO_RETRY_SIGNS: one row a line, ``CLASS TIER CAUSE ERE``."""
    return "\n".join(row.line() for row in sign_rows())


def output_cause(text: str) -> SignRow | None:
    """The row the entrypoint picks for a failed attempt's output TEXT: the first row (``sign_rows`` order)
    whose signs find one of its last TAIL_LINES lines (NUL bytes dropped), each read as causes.py reads it
    (``causes.matched_lines``: cut to causes.LINE_CHARS bytes, colours removed), `[rankN]: ` dropped (the
    generic row: among the lines no other row finds)."""
    lines = causes.matched_lines(text.replace("\0", ""))
    if lines and lines[-1] == "":
        lines.pop()
    tail = [causes.RANK_PREFIX.sub("", line, count=1) for line in lines[-TAIL_LINES:]]
    rows = sign_rows()
    specific = [pattern for row in rows if row.tier != GENERIC for pattern in row.patterns]
    unnamed = [line for line in tail if NOT_AN_ERROR not in line and not any(p.search(line) for p in specific)]
    for row in rows:
        if any(pattern.search(line) for line in (unnamed if row.tier == GENERIC else tail) for pattern in row.patterns):
            return row
    return None
