"""The regular expressions that read text from a job or the cluster cannot backtrack without bound.

A repetition inside an unbounded repetition (``(a+)+``, ``(\\w+\\s?)*``) can make the engine try exponentially
many ways to split one long line: a hostile or merely odd log line would hang `explain` or `status`. These tests
read every pattern's parsed form, so they say the same on an idle machine as on a loaded one; how long the
readers take on hostile text is measured by bench/run.py (`--only redaction`)."""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path

# the parser's public names moved into re's private modules in 3.11; nothing here changes a pattern
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

import pytest

import kubectl_tao
from kubectl_tao.core import causes, nccldebug
from kubectl_tao.core.valueclass import Value

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


def _repetitions(parsed: Any) -> Iterator[Any]:
    for op, av in parsed:
        if op in _REPEATS and av[1] > 1:
            yield av[2]
        for child in _children(op, av):
            yield from _repetitions(child)


def nested_repetition(parsed: Any) -> bool:
    """Whether a repetition that can match more than once sits inside one without an upper bound, with nothing
    that splits the turns: a turn is fixed when it must hold a literal character the inner run cannot consume
    (`(?:\\.[a-z]+)*` is safe: each turn starts at a dot, and `[a-z]+` takes no dot)."""
    for op, av in parsed:
        if op in _REPEATS and av[1] == sre.MAXREPEAT:
            body = av[2]
            marks = _delimiters(body)
            for inner in _repetitions(body):
                if not any(not may_consume(inner, mark) for mark in marks):
                    return True
        if any(nested_repetition(child) for child in _children(op, av)):
            return True
    return False


def _patterns_in(value: Any, seen: set[int], depth: int = 0) -> Iterator[re.Pattern[str]]:
    if id(value) in seen or depth > 6:
        return
    seen.add(id(value))
    if isinstance(value, re.Pattern):
        yield value
    elif isinstance(value, (tuple, list, frozenset, set)):
        for item in value:
            yield from _patterns_in(item, seen, depth + 1)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _patterns_in(item, seen, depth + 1)
    elif isinstance(value, Value):  # every record class of the package (causes' Cause and Sign among them)
        for item in value.as_dict().values():
            yield from _patterns_in(item, seen, depth + 1)


def module_patterns() -> dict[str, re.Pattern[str]]:
    """Every compiled pattern a kubectl_tao module holds at its top level (directly or in its tables)."""
    found: dict[str, re.Pattern[str]] = {}
    for info in pkgutil.walk_packages(kubectl_tao.__path__, "kubectl_tao."):
        module = importlib.import_module(info.name)
        seen: set[int] = set()
        for name, value in vars(module).items():
            if getattr(value, "__module__", info.name) != info.name and isinstance(value, type):
                continue
            for pattern in _patterns_in(value, seen):
                found.setdefault(f"{info.name}.{name}: {pattern.pattern[:80]}", pattern)
    return found


def test_the_shape_check_finds_nested_repetition() -> None:
    def bad(p: str) -> bool:
        return nested_repetition(sre_parse.parse(p))

    assert bad(r"(a+)+b") and bad(r"(\w+\s?)*$") and bad(r"(?:x|y{2,})*z") and bad(r"(?=(a*)*)")
    assert not bad(r"(\d+)/(\d+) clients joined") and not bad(r"(?:ab){1,3}+") and not bad(r"[^`]{1,300}")
    assert not bad(r"(?:\[[\d,]+\], )*x")  # the inner run is bounded by the brackets: once per outer turn


def test_no_module_pattern_nests_an_unbounded_repetition() -> None:
    patterns = module_patterns()
    assert len(patterns) > 50  # the walk reached the modules' tables, not only their names
    assert any(where.startswith("kubectl_tao.progress.") for where in patterns)  # the feature packages too
    found = {id(p) for p in patterns.values()}
    assert all(id(sign.pattern) in found for cause in causes.CAUSES for sign in cause.signs)  # inside records too
    nested = [where for where, p in patterns.items() if nested_repetition(sre_parse.parse(p.pattern, p.flags))]
    assert nested == []


def test_the_patterns_causes_builds_while_reading_are_not_nested(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    real = causes._rx

    def recording(pattern: str, flags: int = 0) -> re.Pattern[str]:
        built.append(pattern)
        return real(pattern, flags)

    monkeypatch.setattr(causes, "_rx", recording)
    for log in sorted(FAILURES.glob("*.log")):
        causes.classify_log(log.read_text(encoding="utf-8", errors="replace"))
    assert len(set(built)) >= 5
    assert [p for p in set(built) if nested_repetition(sre_parse.parse(p))] == []


def test_a_line_is_read_on_its_first_characters_only() -> None:
    """What keeps the remaining per-line work (a search that restarts at each character) linear in the text."""
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    found = causes.classify_log(oom)
    assert found is not None and found.cause == "CudaOOM"
    cut = causes.classify_log("x" * causes.LINE_CHARS + oom)
    assert cut is None or cut.cause != "CudaOOM"
    ib = "n NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>"
    assert nccldebug.read(ib).ib_devices == ["[0]mlx5_0:1/IB"]
    assert nccldebug.read("n NCCL INFO " + " " * 2000 + ib).ib_devices == []
