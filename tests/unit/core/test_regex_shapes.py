"""The regular expressions that read text from a job or the cluster cannot backtrack without bound.

A repetition inside an unbounded repetition (``(a+)+``, ``(\\w+\\s?)*``) can make the engine try exponentially
many ways to split one long line: a hostile or merely odd log line would hang `explain` or `status`. These tests
read every pattern's parsed form, so they say the same on an idle machine as on a loaded one; how long the
readers take on hostile text is measured by bench/run.py (`--only redaction`).

Two shapes are checked: a repetition nested in an unbounded one (exponential), and a run a search reads again
from many of its start positions (quadratic in the line: `(\\d+)/` over a line of digits)."""

from __future__ import annotations

import functools
import importlib
import itertools
import pkgutil
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

# the parser's public names moved into re's private modules in 3.11; nothing here changes a pattern
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

import pytest

import kubectl_tao
from kubectl_tao.core import names, redact
from kubectl_tao.core.redact import _Lazy
from kubectl_tao.core.valueclass import Value
from kubectl_tao.diagnosis import causes, nccldebug

_REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT}
FAILURES = Path(__file__).resolve().parents[2] / "fixtures" / "failures"


def _children(op: Any, av: Any) -> Iterator[Any]:
    if op in _REPEATS:
        yield av[2]
    elif op is sre.SUBPATTERN:
        yield av[3]
    elif op is sre.BRANCH:
        yield from av[1]
    elif op in (sre.ASSERT, sre.ASSERT_NOT):
        yield av[1]
    elif op is sre.ATOMIC_GROUP:
        yield av
    elif op is sre.GROUPREF_EXISTS:
        yield from (p for p in av[1:] if p is not None)


_CATEGORIES = {
    sre.CATEGORY_DIGIT: str.isdigit,
    sre.CATEGORY_NOT_DIGIT: lambda c: not c.isdigit(),
    sre.CATEGORY_SPACE: str.isspace,
    sre.CATEGORY_NOT_SPACE: lambda c: not c.isspace(),
    sre.CATEGORY_WORD: lambda c: c.isalnum() or c == "_",
    sre.CATEGORY_NOT_WORD: lambda c: not (c.isalnum() or c == "_"),
}


def _in_set(items: Any, code: int) -> bool:
    hit, negate = False, False
    for op, av in items:
        if op is sre.NEGATE:
            negate = True
        elif op is sre.LITERAL:
            hit = hit or av == code
        elif op is sre.RANGE:
            hit = hit or av[0] <= code <= av[1]
        elif op is sre.CATEGORY:
            hit = hit or _CATEGORIES.get(av, lambda c: True)(chr(code))
        else:
            return True  # a set item not read here: assume it may match
    return hit != negate


def may_consume(parsed: Any, code: int) -> bool:
    """Whether PARSED can consume the character CODE anywhere (conservatively True when unsure)."""
    for op, av in parsed:
        if op is sre.LITERAL and av == code:
            return True
        if (op is sre.NOT_LITERAL and av != code) or op is sre.ANY:
            return True
        if op is sre.IN and _in_set(av, code):
            return True
        if op in (sre.GROUPREF, sre.GROUPREF_IGNORE, sre.LITERAL_IGNORE, sre.IN_IGNORE):
            return True
        if any(may_consume(child, code) for child in _children(op, av)):
            return True
    return False


def _delimiters(body: Any) -> set[int]:
    """The literal characters every match of BODY holds (its top-level literals, through plain groups)."""
    out: set[int] = set()
    for op, av in body:
        if op is sre.LITERAL:
            out.add(av)
        elif op is sre.SUBPATTERN:
            out |= _delimiters(av[3])
        elif op in _REPEATS and av[0] >= 1:
            out |= _delimiters(av[2])
    return out


def _marks(body: Any) -> list[frozenset[int]]:
    """The characters each required single-character item of BODY can be, one set per item (a literal: one
    character; a class: its sample characters), through plain groups: every match of BODY holds one of each."""
    out: list[frozenset[int]] = []
    for op, av in body:
        char = _required_char(op, av)
        if char is not None:
            out.append(char)
        elif op is sre.SUBPATTERN:
            out += _marks(av[3])
        elif op in _REPEATS and av[0] >= 1:
            out += _marks(av[2])
    return out


def _always(op: Any, av: Any) -> bool:
    """Whether the item always matches where it is tried (it may match nothing: an optional repetition)."""
    if op in _REPEATS:
        return av[0] == 0
    if op is sre.SUBPATTERN:
        return all(_always(o, a) for o, a in av[3])
    return False


def _ended(items: Any) -> list[Any]:
    """The repetitions of ITEMS (one sequence) whose extent is fixed by where they start: a required character
    they cannot take comes right after them (`\\([^)]*\\)`: the run ends at the first ')', and nowhere else)."""
    items = list(items)
    out = []
    for (op, av), (next_op, next_av) in itertools.pairwise(items):
        after = _required_char(next_op, next_av)
        if op in _REPEATS and after is not None and not after & _eats(av[2]):
            out.append(av[2])
    return out


def _repetitions(parsed: Any) -> Iterator[Any]:
    fixed = {id(body) for body in _ended(parsed)}
    for op, av in parsed:
        if op in _REPEATS and av[1] > 1 and id(av[2]) not in fixed:
            yield av[2]
        for child in _children(op, av):
            yield from _repetitions(child)


def nested_repetition(parsed: Any, *, final: bool = False) -> bool:
    """Whether a repetition that can match more than once sits inside one without an upper bound, with nothing
    that splits the turns: a turn is fixed when it must hold a character the inner run cannot consume
    (`(?:\\.[a-z]+)*` is safe: each turn starts at a dot, and `[a-z]+` takes no dot; `(?:[a-z]+[-_])*` too: each turn
    ends at a '-' or '_'); an inner run adds no way to split when a required character it cannot take comes right
    after it (`(?:\\$\\([^)]*\\)|.)+`: the run ends at the first ')'). FINAL: a match may end where the pattern
    ends (search, match, finditer; not fullmatch): an unbounded repetition after which nothing can fail is never
    backtracked into, its turns never split again."""
    items = list(parsed)
    for i, (op, av) in enumerate(items):
        last = final and all(_always(o, a) for o, a in items[i + 1 :])
        if op in _REPEATS and av[1] == sre.MAXREPEAT and not last:
            body = av[2]
            marks = [frozenset({c}) for c in _delimiters(body)] + _marks(body)
            for inner in _repetitions(body):
                if not any(not (mark & _eats(inner)) for mark in marks):
                    return True
        inner_final = last and (op not in _REPEATS or av[0] <= 1)
        if any(nested_repetition(child, final=inner_final) for child in _children(op, av)):
            return True
    return False


# ------------------------------------------------------------------------------ one start, one pass
# A search tries the pattern at every position of the line; a run (a repetition that may take more than RUN
# characters) entered from many of those positions, over the same characters, makes the work quadratic:
# `(\d+)/` on a line of digits takes every digit run from every digit. A run is safe when what comes before it
# fixes where it starts: a character between an earlier run and it that one of the two cannot take (`: \[[\d,]+`
# starts at a bracket its digits cannot take), two runs that take no character in common, or a guard that
# lets it start only where its characters start (`\b\w+`, `(?<!\d)\d+`).

RUN = 64  # a repetition that may take more characters than this is a run
# the characters a class is tried on: ASCII, and a few others (no-break space, letters, digits and spaces of other
# scripts, the replacement character, an emoji)
SAMPLE = (*range(128), 0xA0, 0xE9, 0x660, 0x2003, 0x4E2D, 0xFFFD, 0x1F600)
_WORD_CHARS = frozenset(c for c in SAMPLE if chr(c).isalnum() or chr(c) == "_")
_ANY = frozenset(SAMPLE)


def _eats(parsed: Any) -> frozenset[int]:
    return frozenset(c for c in SAMPLE if may_consume(parsed, c))


@dataclass
class _Run:
    key: int
    what: str
    eats: frozenset[int]  # the sample characters it can take
    # what stands between it and the point reached, one list per way there: the characters each required
    # single-character item on that way can be (a literal: one)
    since: list[list[frozenset[int]]] = field(default_factory=lambda: [[]])
    marks: tuple[frozenset[int], ...] = ()  # what each of its turns holds: one of each set (see _marks)


def _required_char(op: Any, av: Any) -> frozenset[int] | None:
    if op is sre.LITERAL:
        return frozenset({av})
    if op in (sre.IN, sre.NOT_LITERAL, sre.ANY):
        return _eats([(op, av)])
    return None


def _starts(items: Any) -> tuple[frozenset[int], bool]:
    """The sample characters a match of ITEMS can start with, and whether it may match nothing."""
    out: frozenset[int] = frozenset()
    for op, av in items:
        char = _required_char(op, av)
        if char is not None:
            return out | char, False
        if op is sre.SUBPATTERN:
            first, empty = _starts(av[3])
        elif op is sre.BRANCH:
            parts = [_starts(alternative) for alternative in av[1]]
            first, empty = frozenset().union(*(f for f, _ in parts)), any(e for _, e in parts)
        elif op in _REPEATS:
            first, empty = _starts(av[2])
            empty = empty or av[0] == 0
        elif op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
            continue  # takes no character
        else:
            return _ANY, False  # not read here: anything
        out |= first
        if not empty:
            return out, False
    return out, True


def _char_items(items: Any) -> list[tuple[frozenset[int], int, int]] | None:
    """ITEMS as (characters, fewest, most) when each is one character or a repetition of one, else None."""
    out = []
    for op, av in items:
        char = _required_char(op, av)
        if char is not None:
            out.append((char, 1, 1))
            continue
        inner = list(av[2]) if op in _REPEATS else []
        char = _required_char(*inner[0]) if len(inner) == 1 else None
        if char is None:
            return None
        out.append((char, av[0], av[1]))
    return out


def _reads_pair(turn: list[tuple[frozenset[int], int, int]], first: int, second: int) -> bool:
    """Whether repeated turns of TURN (see _char_items) can read FIRST then SECOND: within one item, from an item to
    the next one that is not skipped, or from a turn's end to the next turn's start."""
    n = len(turn)
    for i, (chars, _, most) in enumerate(turn):
        if first not in chars:
            continue
        if most > 1 and second in chars:
            return True
        for step in range(1, 2 * n + 1):  # the items after it, into the next turn
            nxt, fewest, _ = turn[(i + step) % n]
            if second in nxt:
                return True
            if fewest >= 1:
                break
    return False


def _refuses_pair(body: Any, first: int, second: int) -> bool:
    """Whether a repetition of BODY can never read FIRST followed by SECOND: each turn takes one character, and a
    turn that takes FIRST forbids SECOND after it (`(?:[^)$]|\\$(?!\\())*` never reads `$(`)."""
    items = list(body)
    chars = _char_items(items)
    if chars is not None:  # a turn of single characters and runs of them: `(?:[a-z0-9]+-)*` never reads `--`
        return not _reads_pair(chars, first, second)
    alternatives = items[0][1][1] if len(items) == 1 and items[0][0] is sre.BRANCH else [items]
    for alternative in alternatives:
        turn = list(alternative)
        char = _required_char(*turn[0]) if turn else None
        if char is None or len(turn) > 2:
            return False
        if first not in char:
            continue
        if len(turn) == 1:
            return False
        op, av = turn[1]
        if not (op is sre.ASSERT_NOT and av[0] == 1 and second in _eats(av[1]) and len(list(av[1])) == 1):
            return False
    return True


def _last_chars(items: Any, groups: dict[int, Any]) -> tuple[frozenset[int], bool]:
    """The sample characters a match of ITEMS can end with, and whether it may match nothing (see _starts)."""
    out: frozenset[int] = frozenset()
    for op, av in reversed(list(items)):
        char = _required_char(op, av)
        if char is not None:
            return out | char, False
        if op is sre.SUBPATTERN:
            last, empty = _last_chars(av[3], groups)
        elif op is sre.BRANCH:
            parts = [_last_chars(alternative, groups) for alternative in av[1]]
            last, empty = frozenset().union(*(f for f, _ in parts)), any(e for _, e in parts)
        elif op in _REPEATS:
            last, empty = _last_chars(av[2], groups)
            empty = empty or av[0] == 0
        elif op is sre.GROUPREF and av in groups:
            last, empty = _last_chars(groups[av], groups)
        elif op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
            continue  # takes no character
        else:
            return _ANY, False  # not read here: anything
        out |= last
        if not empty:
            return out, False
    return out, True


KINDS = 4  # a group of one character out of at most this many is walked once per character (see _Opener.fences)


def _bound(items: Any, group: int, code: int) -> list[Any]:
    """ITEMS with each backreference to GROUP read as the character CODE the group holds."""
    out = []
    for op, av in items:
        if op is sre.GROUPREF and av == group:
            out.append((sre.LITERAL, code))
        elif op is sre.SUBPATTERN:
            out.append((op, (*av[:3], _bound(av[3], group, code))))
        elif op is sre.BRANCH:
            out.append((op, (av[0], [_bound(alternative, group, code) for alternative in av[1]])))
        elif op in _REPEATS:
            out.append((op, (av[0], av[1], _bound(av[2], group, code))))
        elif op in (sre.ASSERT, sre.ASSERT_NOT):
            out.append((op, (av[0], _bound(av[1], group, code))))
        else:
            out.append((op, av))
    return out


def _escapes(body: Any, code: int) -> frozenset[int] | None:
    """The characters that stand right before CODE wherever a repetition of BODY reads it, when each turn is
    one character or a character and the one after it (`[^'\\\n]|\\.`: a quote only after a backslash); None
    when a turn may read CODE first, after a character taken in the turn before (`[^\\\n]|\\.` reads `x'`), or
    when a turn is not read here. A negative lookahead of one character before a class takes it out of the class
    (`(?!')[^\\\n]`)."""
    items = list(body)
    alternatives = items[0][1][1] if len(items) == 1 and items[0][0] is sre.BRANCH else [items]
    out: frozenset[int] = frozenset()
    for alternative in alternatives:
        turn = list(alternative)
        if len(turn) >= 2 and turn[0][0] is sre.ASSERT_NOT and turn[0][1][0] == 1:  # (?!x)C: C without x
            refused = _char_items(turn[0][1][1])
            char = _required_char(*turn[1])
            if refused is None or len(refused) != 1 or refused[0][1:] != (1, 1) or char is None:
                return None
            turn = [(sre.IN, [(sre.LITERAL, c) for c in sorted(char - refused[0][0])]), *turn[2:]]
        chars = [_required_char(op, av) for op, av in turn]
        if not chars or len(chars) > 2 or None in chars:
            return None
        if code in chars[0]:  # read first in its turn: anything may stand before it
            return None
        if len(chars) == 2 and code in chars[1]:
            out |= chars[0]
    return out


def _apart(a: _Run, b_eats: frozenset[int], b_turn: frozenset[int], b_first: frozenset[int] = _ANY) -> bool:
    """Whether run B, entered after run A, starts where A's run lets it start once: they take no character in
    common (or A takes no character B starts with: B starts where A stops), or on every way from A to B a
    character stands that one of them cannot take, or each turn of B holds a character A cannot take, or each
    turn of A one B cannot take (B read from each of A's turn ends reads within one turn)."""
    if not a.eats & b_eats or not a.eats & b_first or b_turn - a.eats:
        return True
    if any(not mark & b_eats for mark in a.marks):  # B, started at a turn's end, stops in the next turn
        return True
    return all(any(not item & a.eats or not item & b_eats for item in way) for way in a.since)


@dataclass(frozen=True)
class _Opener:
    """One character a run is entered right after (a quote), the group that holds it if any (`(['"])`), and the
    characters that can stand right before it in a match."""

    chars: frozenset[int]
    group: int | None
    before: frozenset[int]

    def fences(self, body: Any) -> bool:
        """Whether a run of BODY entered right after this character is entered again only past where it stops:
        the run reads the character only right after an escape (`\\'`), and no escape stands before the
        character in a match. Another entry's opening character inside the run would stand after no escape, so
        the run cannot read it: it stops there. A group's character is bound in the run (`(?!\\3)`) one kind at
        a time: runs of different kinds may overlap, so at most KINDS do."""
        if self.group is not None and len(self.chars) > KINDS:
            return False
        for code in self.chars:
            turn = _bound(body, self.group, code) if self.group is not None else body
            escapes = _escapes(turn, code)
            if escapes is None or escapes & self.before:
                return False
        return True


class _Walk:
    def __init__(self, multiline: bool = False) -> None:
        self.found: list[str] = []
        self.keys = 0
        self.multiline = multiline
        self.dotall = False
        self.groups: dict[int, Any] = {}  # what each group holds, for a backreference to it
        # a leading lookbehind's refused characters, the characters a match starts with, and how many characters
        # that could start one the walk has passed (see seq)
        self.sticky: frozenset[int] | None = None
        self.first: frozenset[int] = _ANY
        self.region = 0
        self.counting = True
        self.state: Any = None

    def start_guard(self, alternative: Any) -> frozenset[int] | None:
        """The characters that cannot stand before where ALTERNATIVE, one zero-width item, lets a match go on
        (`^`: any, or any but a line break; `(?<![x])`: x; `(?<=[x])`: any but x), or None."""
        items = list(alternative)
        if len(items) != 1:
            return None
        op, av = items[0]
        if op is sre.AT and av is sre.AT_BEGINNING:
            return _ANY - {ord("\n")} if self.multiline else _ANY
        if op is sre.AT and av is sre.AT_BEGINNING_STRING:
            return _ANY
        if op in (sre.ASSERT, sre.ASSERT_NOT) and av[0] == -1 and len(list(av[1])) == 1:
            char = _required_char(*next(iter(av[1])))
            if char is not None:
                return char if op is sre.ASSERT_NOT else _ANY - char
        return None

    def run(self, what: str, eats: frozenset[int], marks: tuple[frozenset[int], ...] = ()) -> _Run:
        self.keys += 1
        return _Run(self.keys, what, eats, marks=marks)

    def seq(
        self, items: Any, runs: list[_Run], guard: frozenset[int] | None = None, final: bool = False,
        pair: tuple[int, int] | None = None, ends: bool = False, opener: _Opener | None = None,
        stood: frozenset[int] = _ANY,
    ) -> list[_Run]:
        """Walk ITEMS after RUNS; GUARD: the characters that cannot stand before the next item (a lookbehind or
        a word boundary just passed); FINAL: nothing after ITEMS can fail (the match may end there); PAIR: the
        last two literal characters passed, when nothing since took the first; ENDS: what follows ITEMS
        matches at the end of the text; OPENER: the one character passed right before ITEMS (see _Opener);
        STOOD: the characters that can stand right before ITEMS in a match (any at its start)."""
        items = list(items)
        for i, (op, av) in enumerate(items):
            if i:  # what stands right before this item, and the one character passed right before it
                tail, empty = _last_chars(items[:i], self.groups)
                stood_here = tail | stood if empty else tail
                opener = self.opener_of(items[i - 1], items[: i - 1], stood)
            else:
                stood_here = stood
            last = final and all(_always(o, a) for o, a in items[i + 1 :])
            char = _required_char(op, av)
            next_guard = None
            if char is not None:
                runs = [replace(r, since=[[*way, char] for way in r.since]) for r in runs]
            elif op is sre.SUBPATTERN:
                if av[0] is not None:
                    self.groups[av[0]] = av[3]
                runs = self.seq(av[3], runs, guard, last, pair, ends and _ends(items[i + 1 :]), opener, stood_here)
            elif op is sre.GROUPREF:  # what the group holds: each of its required characters
                for char in _marks(self.groups.get(av, [])):
                    runs = [replace(r, since=[[*way, char] for way in r.since]) for r in runs]
            elif op is sre.BRANCH and (starts := [self.start_guard(alt) for alt in av[1]]) and None not in starts:
                next_guard = frozenset.intersection(*(g for g in starts if g is not None))  # `(?:^|(?<=[;|]))`
            elif op is sre.BRANCH:
                merged: dict[int, _Run] = {}
                region, regions = self.region, [self.region]  # the places a match could start, counted per way
                for alternative in av[1]:
                    self.region = region
                    way = self.seq(alternative, runs, guard, last, pair, ends and _ends(items[i + 1 :]), opener,
                                   stood_here)
                    regions.append(self.region)
                    for r in way:
                        if r.key in merged:
                            merged[r.key].since += r.since
                        else:
                            merged[r.key] = replace(r, since=list(r.since))
                runs = list(merged.values())
                self.region = max(regions)
            elif op in _REPEATS:
                # after two characters it never reads in a row, with nothing since that takes the first: the run's
                # starts read apart (a second start's pair would be inside the first's run)
                fixed = pair is not None and _refuses_pair(av[2], *pair)
                reaches_end = self.dotall and list(av[2]) == [(sre.ANY, None)] and ends and _ends(items[i + 1 :])
                # every character of the run is one the pattern's leading lookbehind refuses, and few places before
                # it can start a match: a second start is refused inside the run, or is one of those few
                sticky = self.sticky is not None and self.region <= RUN and _eats(av[2]) <= self.sticky
                held = _ANY if fixed else self.sticky if sticky else guard
                runs = self.repeat(av, runs, held, last or reaches_end, opener)
            elif op is sre.AT and av is sre.AT_BOUNDARY:
                next_guard = _WORD_CHARS
            elif op is sre.AT and av is sre.AT_BEGINNING and self.multiline:
                next_guard = _ANY - {ord("\n")}  # a line's start: only a line break stands before it
            elif op is sre.ASSERT_NOT and av[0] == -1:
                next_guard = _eats(av[1])
            elif op in (sre.ASSERT, sre.ASSERT_NOT):
                ahead = av[0] != -1
                counting, self.counting = self.counting, False
                self.seq(av[1], runs, guard if ahead else None)
                self.counting = counting
                next_guard = guard if ahead else None  # a lookahead takes no character: the guard still holds
            if next_guard is None and guard is not None and _keeps(guard, op, av):
                next_guard = guard
            guard = next_guard
            zero_width = op in (sre.SUBPATTERN, sre.BRANCH, sre.AT, sre.ASSERT, sre.ASSERT_NOT)  # (or walked inside)
            if self.counting and not zero_width and _eats([(op, av)]) & self.first:  # a second match could start
                self.region += sre_parse.SubPattern(self.state, [(op, av)]).getwidth()[1]
            before = _required_char(*items[i - 1]) if i else None
            if char is not None and before is not None and len(char) == len(before) == 1:
                pair = (min(before), min(char))
            elif pair is not None and may_consume([(op, av)], pair[0]):
                pair = None
        return runs

    def opener_of(self, item: Any, before: Any, stood: frozenset[int]) -> _Opener | None:
        """ITEM as an _Opener when it is one character (a group of one too); BEFORE: the items ahead of it in its
        sequence, STOOD: the characters that can stand before that sequence."""
        op, av = item
        group = None
        if op is sre.SUBPATTERN and av[0] is not None and len(list(av[3])) == 1:
            group, (op, av) = av[0], next(iter(av[3]))
        chars = _required_char(op, av)
        if chars is None:
            return None
        last, empty = _last_chars(before, self.groups)
        return _Opener(chars, group, last | stood if empty else last)

    def repeat(
        self, av: Any, runs: list[_Run], guard: frozenset[int] | None, final: bool = False,
        opener: _Opener | None = None,
    ) -> list[_Run]:
        low, high, body = av
        if high > RUN and not final:  # a final run ends the match: a search never reads it again
            eats = _eats(body)
            turn = frozenset(_delimiters(body))
            first, _ = _starts(body)
            guarded = guard is not None and eats <= guard and (guard is not _WORD_CHARS or low >= 1)
            if not guarded and not (opener is not None and opener.fences(body)):
                self.found += [f"{a.what}, then {_shown(body)}" for a in runs if not _apart(a, eats, turn, first)]
        # one turn: the runs inside it, checked against the earlier ones
        # a guarded run's every character is refused before a start: no other start reads inside it
        inner_guard = guard if high <= RUN or (high > RUN and guard is not None and _eats(body) <= guard
                                               and guard is not _WORD_CHARS) else None
        counting, self.counting = self.counting, False  # the repetition's whole width is counted where it stands
        after = self.seq(body, runs, inner_guard, final and low <= 1)
        self.counting = counting
        if low >= 1:
            out = after  # what a turn requires stands between the earlier runs and the next
        else:
            known = {r.key for r in runs}
            out = [*runs, *(r for r in after if r.key not in known)]
        return [*out, self.run(_shown(body), _eats(body), tuple(_marks(body)))] if high > RUN else out


def _ends(items: Any) -> bool:
    """Whether ITEMS match at the end of the text: each may match nothing, is an end (`$`, `\\Z`), or has such an
    alternative (`(?:-----END|\\Z)`)."""
    for op, av in items:
        if _always(op, av) or (op is sre.AT and av in (sre.AT_END, sre.AT_END_STRING)):
            continue
        if op is sre.SUBPATTERN and _ends(av[3]):
            continue
        if op is sre.BRANCH and any(_ends(alternative) for alternative in av[1]):
            continue
        return False
    return True


def _keeps(guard: frozenset[int], op: Any, av: Any) -> bool:
    """Whether a guard (GUARD: the characters that cannot stand before a match's start) still fixes where a later
    run starts after the item OP AV: every character the item takes is one of GUARD, so a second start inside
    what it took is refused by the guard (`(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]+`; after `\\b`: a required
    word character only)."""
    if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
        return False
    if guard is _WORD_CHARS and _required_char(op, av) is None:
        return False
    return _eats([(op, av)]) <= guard


def _shown(parsed: Any) -> str:
    return str(parsed)[:60]


def search_runs(pattern: str, flags: int = 0, *, anchored: bool = False, final: bool = True) -> list[str]:
    """The pairs of runs of PATTERN that make one search superlinear in the line (a search starts at every
    position, as a run of its own; ANCHORED: one start, as fullmatch and match make), or []. FINAL: a match may
    end where the pattern ends (not so for fullmatch, which then requires the end of the text)."""
    parsed = sre_parse.parse(pattern, flags)
    items = list(parsed)
    at_start = bool(items) and items[0][0] is sre.AT and items[0][1] in (sre.AT_BEGINNING, sre.AT_BEGINNING_STRING)
    multiline = bool(parsed.state.flags & re.MULTILINE)  # (?m) written in the pattern too
    walk = _Walk(multiline)
    walk.dotall = bool(parsed.state.flags & re.DOTALL)
    walk.state = parsed.state
    if items and items[0][0] is sre.ASSERT_NOT and items[0][1][0] == -1:
        walk.sticky = _eats(items[0][1][1])
        first, empty = _starts(items[1:])
        walk.first = first if first and not empty else _ANY  # a match of no character (a lookahead) starts anywhere
    one_start = anchored or (at_start and not multiline)
    starts = [] if one_start else [walk.run("a search from every position", _ANY)]
    walk.seq(parsed, starts, None, final, None, True)
    return walk.found


def _patterns_in(value: Any, seen: set[int], depth: int = 0, *, lazy: bool = False) -> Iterator[re.Pattern[str]]:
    if id(value) in seen or depth > 6:
        return
    seen.add(id(value))
    if isinstance(value, re.Pattern):
        yield value
    elif lazy and isinstance(value, _Lazy):  # compiled here from its arguments: the module's own copy stays uncompiled
        yield re.compile(*value._args)
    elif isinstance(value, (tuple, list, frozenset, set)):
        for item in value:
            yield from _patterns_in(item, seen, depth + 1, lazy=lazy)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _patterns_in(item, seen, depth + 1, lazy=lazy)
    elif isinstance(value, Value):  # every record class of the package (causes' Cause and Sign among them)
        for item in value.as_dict().values():
            yield from _patterns_in(item, seen, depth + 1, lazy=lazy)


def module_patterns(*, lazy: bool = False) -> dict[str, re.Pattern[str]]:
    """Every compiled pattern a kubectl_tao module holds at its top level (directly or in its tables); LAZY: the
    redactor's lazily compiled ones (core/redact.py's _Lazy) too."""
    found: dict[str, re.Pattern[str]] = {}
    for info in pkgutil.walk_packages(kubectl_tao.__path__, "kubectl_tao."):
        module = importlib.import_module(info.name)
        seen: set[int] = set()
        for name, value in vars(module).items():
            if getattr(value, "__module__", info.name) != info.name and isinstance(value, type):
                continue
            for pattern in _patterns_in(value, seen, lazy=lazy):
                found.setdefault(f"{info.name}.{name}: {pattern.pattern[:80]}", pattern)
    return found


PACKAGE = Path(kubectl_tao.__file__).resolve().parent


@functools.cache
def _sources() -> tuple[str, ...]:
    return tuple(source.read_text(encoding="utf-8") for source in sorted(PACKAGE.rglob("*.py")))


def _uses(name: str) -> set[str]:
    """How the package uses a module-level pattern NAME: the methods called on it (``fullmatch``, ``search``,
    ...), and "value" where it is passed on as a value (to a function, into a table)."""
    used: set[str] = set()
    mention = re.compile(rf"\b{re.escape(name)}\b(\.\w+)?")
    for text in _sources():
        if name not in text:
            continue
        for line in text.splitlines():
            code = line.split("#", 1)[0]
            if re.match(rf"\s*{re.escape(name)}\s*(?::[^=]*)?=[^=]", code) or re.match(r"\s*(from|import)\b", code):
                continue  # its definition, an import
            if re.fullmatch(rf"\s*{re.escape(name)},?\s*", code):  # a line of an import's parenthesized names
                continue
            for m in mention.finditer(code):
                used.add(m.group(1)[1:] if m.group(1) else "value")
    return used


def one_start(where: str) -> bool:
    """Whether the pattern named by WHERE (``module.NAME: ...``) is only ever tried from one position (its every
    use a ``fullmatch`` or ``match``)."""
    name = where.split(":", 1)[0].rsplit(".", 1)[1]
    used = _uses(name)
    return bool(used) and used <= {"fullmatch", "match"}


def ways(where: str) -> list[tuple[bool, bool]]:
    """The ways the pattern named by WHERE is tried, as (anchored, final) for search_runs: from every position
    where it is searched (a match may end where the pattern ends); from one where it is only matched, or may be
    (passed on as a value, it may be fullmatched: then the end of the text follows the pattern)."""
    name = where.split(":", 1)[0].rsplit(".", 1)[1]
    used = _uses(name)
    if one_start(where):
        return [(True, "fullmatch" not in used)]
    return [(False, True), *([(True, False)] if used & {"fullmatch", "value"} or not used else [])]


def may_end_anywhere(where: str) -> bool:
    """Whether every use of the pattern named by WHERE lets a match end where the pattern ends (no fullmatch)."""
    used = _uses(where.split(":", 1)[0].rsplit(".", 1)[1])
    return bool(used) and not used & {"fullmatch", "value"}


def test_the_shape_check_finds_nested_repetition() -> None:
    def bad(p: str) -> bool:
        return nested_repetition(sre_parse.parse(p))

    assert bad(r"(a+)+b") and bad(r"(\w+\s?)*$") and bad(r"(?:x|y{2,})*z") and bad(r"(?=(a*)*)")
    assert not bad(r"(\d+)/(\d+) clients joined") and not bad(r"(?:ab){1,3}+") and not bad(r"[^`]{1,300}")
    assert not bad(r"(?:\[[\d,]+\], )*x")  # the inner run is bounded by the brackets: once per outer turn


def test_the_shape_check_knows_what_splits_turns_and_where_nothing_is_backtracked() -> None:
    def bad(p: str, *, final: bool = False) -> bool:
        return nested_repetition(sre_parse.parse(p), final=final)

    # a class every turn holds, that the inner run cannot take, splits the turns as a literal does
    assert not bad(r"--(?:[a-z0-9]+[-_])*token") and bad(r"--(?:[a-z0-9]+[-_]?)*token")
    # a run a required character it cannot take ends has one extent per start: `$(...)` read once per turn
    assert not bad(r"(?:\$\([^)]*\)|[^\s])+x") and bad(r"(?:\$\([^)]*\)?|[^\s])+x")
    # the last repetition of a search (nothing after it can fail) is never backtracked into; fullmatch is not so
    assert not bad(r"(a+)+", final=True) and bad(r"(a+)+") and bad(r"(a+)+$", final=True)
    assert not bad(r"x(?:\w+\s?)*(?:y)?", final=True) and bad(r"x(?:\w+\s?)*(?!y)", final=True)


def test_the_shape_check_knows_a_guard_held_through_a_prefix_and_a_run_that_ends_the_match() -> None:
    def bad(p: str, **how: bool) -> bool:
        return bool(search_runs(p, **how))

    # a lookbehind holds through a prefix of characters it refuses: a second start inside the token is refused
    assert not bad(r"(?<![A-Za-z0-9_-])(eyJ[A-Za-z0-9_-]{8,}\.x)") and bad(r"(eyJ[A-Za-z0-9_-]{8,}\.x)")
    assert bad(r"(?<![A-Za-z0-9])(eyJ[A-Za-z0-9_-]{8,}\.x)")  # '_' and '-' pass the guard: starts inside
    assert not bad(r"(?<![\w-])ab(?=[a-z]*y)[a-z]+x") and bad(r"ab(?=[a-z]*y)[a-z]+x")  # through a lookahead too
    assert not bad(r"\bab\w+x") and bad(r"\bab[\w-]+x")
    # a line start (multi-line) is a guard: only a line break stands before it
    assert not bad(r"(?m)^[ \t]*x") and bad(r"(?m)[ \t]*x") and not bad(r"^[ \t]*x")
    # a run that ends the match is never read again by a search: the match takes what it read
    assert not bad(r"nvapi-[A-Za-z0-9_-]{20,}") and bad(r"nvapi-[A-Za-z0-9_-]{20,}(?![A-Za-z0-9])")
    assert not bad(r"x[^\n]*(?:y)?") and bad(r"x[^\n]*y")
    # a run right after two characters it never reads in a row (`$(` in a shell word) starts once per pair
    assert not bad(r"\$\((?:[^)$\n]|\$(?!\())*\)") and bad(r"\$\((?:[^)\n]|\$)*\)")
    # a run that starts with no character the run before it takes starts where that one stops
    assert not bad(r"\s+(?:\$\([^)]*\)|[^\s])+x", anchored=True) and bad(r"\s+(?:\$\([^)]*\)|[^x])+x", anchored=True)
    # ... also when the turn is a sequence (`--` is never read by `(?:[a-z0-9]+-)*`), or the pair stands earlier with
    # nothing since that takes its first character
    assert not bad(r"--(?:[a-z0-9]+-)*x") and bad(r"--(?:[a-z0-9-]+-)*x") and bad(r"--(?:[a-z0-9]+-+)*x")
    assert not bad(r"\$\{[a-z]*:?[-=]((?:[^}$]|\$(?!\{))*)\}") and bad(r"\$\{.?((?:[^}$]|\$(?!\{))*)\}")
    # a run that takes every character, before what matches at the end of the text, always ends the match
    assert not bad(r"(?s)BEGIN.*?(?:END|\Z)") and bad(r"(?s)BEGIN.*?END") and bad(r"BEGIN.*?(?:END|\Z)")
    # a leading lookbehind refuses a second start inside a run of characters it refuses, whatever stands between,
    # when few places before the run could start a match (here at most 60 quotes; then 80)
    assert not bad(r"(?<![a-z])'?[a-z]+:") and bad(r"'?[a-z]+:") and not bad(r"(?<![a-z])'{0,60}[a-z]+:")
    assert bad(r"(?<![a-z])'{0,40}\"{0,40}[a-z]+:") and bad(r"(?<![a-z])'?[a-z-]+:")
    # a backreference holds what its group holds: `"` between a run of blanks and a run that takes no `"`
    assert not bad(r'(")\s*\1[^"]*x', anchored=True) and bad(r'(.)\s*\1[^"]*x', anchored=True)
    # alternatives that are each a guard guard together: a command's start after `;` or `|`, or the text's start
    assert not bad(r"(?:^|(?<=[;|]))[ \t]*echo") and bad(r"(?:^|(?<=[ ;|]))[ \t]*echo") and bad(r"(?:^|x)[ \t]*echo")
    # under fullmatch the end of the text follows the pattern: the last run can fail and be tried again
    assert not bad(r"\w+\w+", anchored=True) and bad(r"\w+\w+", anchored=True, final=False)


def test_no_module_pattern_nests_an_unbounded_repetition() -> None:
    lazy = [v for v in vars(redact).values() if isinstance(v, _Lazy)]
    compiled = [rx._compiled for rx in lazy]
    patterns = module_patterns(lazy=True)
    assert [rx._compiled for rx in lazy] == compiled  # walked from their arguments, none compiled in the module
    assert len(patterns) > 50  # the walk reached the modules' tables, not only their names
    assert any(where.startswith("kubectl_tao.progress.") for where in patterns)  # the feature packages too
    found = {id(p) for p in patterns.values()}
    assert all(id(sign.pattern) in found for cause in causes.CAUSES for sign in cause.signs)  # inside records too
    assert len([w for w in patterns if w.startswith("kubectl_tao.core.redact.")]) > 100  # the redactor's too
    assert any(where.startswith("kubectl_tao.core.redact._TOKEN_RULES: ") for where in patterns)  # in tables too
    nested = [
        where
        for where, p in patterns.items()
        if nested_repetition(sre_parse.parse(p.pattern, p.flags), final=may_end_anywhere(where))
    ]
    assert nested == []


def test_the_shape_check_finds_a_run_a_search_reads_again_from_every_position() -> None:
    def bad(p: str, **how: bool) -> bool:
        return bool(search_runs(p, **how))

    # the two readers found quadratic: a line of 4,096 digits or word characters read from each of its characters
    assert bad(r"(\d+)/(\d+) clients joined") and bad(r"(\w+): block: \[[\d,]+\], thread: \[[\d,]+\]")
    assert bad(r"NCCL error in: .*, internal error")  # every `NCCL error in: ` of a line reads the rest of it
    assert bad(r"^.*x.*y") and bad(r"nccl\w*Error") and bad(r"^\s*(\d+)\s+(.*?)\s*$", anchored=True)
    assert bad(r"Read error \[[^\]]+\]:") and bad(r"\$+(?=\()")
    # what fixes where a run starts: a guard, a character it cannot take, another run it shares nothing with
    assert not bad(r"\b(\d+)/(\d+) clients joined") and not bad(r"(?<!\d)(\d+)/")
    assert not bad(r"NCCL error in: \S+, internal error") and not bad(r"Assertion `[^`]*` failed\.$")
    assert not bad(r"^.*x[^x]*y") and not bad(r"\S\s+\S") and not bad(r"\x1b\[[0-?]*[ -/]*[@-~]")
    assert not bad(r"Read error \[[^\]\[]+\]:") and not bad(r"Assertion `([^`]{1,300})` failed")
    assert not bad(r"HfHubHTTPError: \D{0,40}40[13]")
    # one start (fullmatch, match): only runs after runs count
    assert not bad(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?", anchored=True) and bad(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?")


def test_the_shape_check_knows_a_quoted_run_that_reads_its_quote_only_after_an_escape() -> None:
    def bad(p: str, **how: bool) -> bool:
        return bool(search_runs(p, **how))

    # a run that reads its opening quote only after a backslash, entered after a character that is no backslash: a
    # second start's quote inside it would stand after no backslash, so the first run stops there
    assert not bad(r":\s*'((?:[^'\\\n]|\\.)*)'x") and not bad(r":\s*'((?:[^'\n]|\\.)*)'x")
    assert bad(r"'((?:[^'\\\n]|\\.)*)'x")  # the quote opens the match: an escaped `\'` may open a second one
    assert bad(r"[\\:]\s*'((?:[^'\\\n]|\\.)*)'x")  # a backslash may stand before the quote
    assert bad(r":\s*'((?:[^\\\n]|\\.)*)'x")  # the run reads a quote after any character
    # a group of one quote out of a few, the run bound to it (`(?!\1)`): walked one kind at a time
    assert not bad(r":\s*(['\"])((?:(?!\1)[^\\\n]|\\.)*)\1x") and bad(r":\s*(['\"])((?:[^\\\n]|\\.)*)\1x")
    assert bad(r"=?(['\"])((?:(?!\1)[^\\\n]|\\.)*)\1x") and not bad(r"=(['\"])((?:(?!\1)[^\\\n]|\\.)*)\1x")
    assert bad(r":\s*([a-e])((?:(?!\1)[^\\\n]|\\.)*)\1x")  # runs of more kinds than KINDS may overlap


def test_the_shape_check_counts_the_places_a_match_could_start_along_each_way() -> None:
    def bad(p: str, **how: bool) -> bool:
        return bool(search_runs(p, **how))

    # the places an alternative passed are not before the next one: each is counted from the leading lookbehind
    assert not bad(r"(?<![\w-])-H=?(?:\"[a-z-]+\"|[A-Za-z][\w-]*)\s*:")
    assert bad(r"(?<![\w])-H=?(?:\"[a-z-]+\"|[A-Za-z][\w-]*)\s*:")  # '-' passes the guard: starts inside the name
    assert bad(r"(?<![\w-])-H=?(?:\"[a-z-]+\"|-{0,70}[A-Za-z][\w-]*)\s*:")  # within one way they still count


def test_no_module_pattern_lets_a_search_read_a_line_more_than_once_per_run() -> None:
    patterns = module_patterns(lazy=True)
    starts = {where: one_start(where) for where in patterns}
    assert starts["kubectl_tao.core.names.DNS_LABEL_RE: " + names.DNS_LABEL_RE.pattern[:80]]  # fullmatch only
    assert not any(starts[w] for w in patterns if w.startswith("kubectl_tao.diagnosis.causes.CAUSES"))  # searched
    assert ways("kubectl_tao.core.redact._TOKEN_RULES: x") == [(False, True), (True, False)]  # finditer, fullmatch
    superlinear = {
        where: found
        for where, p in patterns.items()
        for anchored, final in ways(where)
        if (found := search_runs(p.pattern, p.flags, anchored=anchored, final=final))
    }
    assert superlinear == {}


def test_causes_compiles_its_patterns_once_where_the_walk_sees_them(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    real = causes._rx

    def recording(pattern: str, flags: int = 0) -> re.Pattern[str]:
        built.append(pattern)
        return real(pattern, flags)

    monkeypatch.setattr(causes, "_rx", recording)
    read = [causes.cause_in_log(log.read_text(encoding="utf-8", errors="replace")) for log in FAILURES.glob("*.log")]
    assert sum(1 for d in read if d is not None and d.facts) > 10  # the fact readers ran
    assert built == []


def test_a_line_is_read_on_its_first_characters_only() -> None:
    """What keeps the remaining per-line work (a search that restarts at each character) linear in the text."""
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    found = causes.cause_in_log(oom)
    assert found is not None and found.cause == "CudaOOM"
    cut = causes.cause_in_log("x" * causes.LINE_CHARS + oom)
    assert cut is None or cut.cause != "CudaOOM"
    ib = "n NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>"
    assert nccldebug.read(ib).ib_devices == ["[0]mlx5_0:1/IB"]
    assert nccldebug.read("n NCCL INFO " + " " * 2000 + ib).ib_devices == []
