"""No test asserts that something took less than so many seconds.

Such a bound flakes on a loaded machine and measures nothing a user can rely on: a test waits for the event it
is about (with a generous timeout that only stops a hang), and speed is measured by bench/run.py and printed.
"""

from __future__ import annotations

import ast

from support import ROOT

CLOCKS = {"monotonic", "perf_counter", "time", "monotonic_ns", "perf_counter_ns", "time_ns"}


def _reads_a_clock(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr in CLOCKS
            and isinstance(sub.func.value, ast.Name)
            and sub.func.value.id == "time"
        ):
            return True
        if isinstance(sub, ast.Name) and sub.id in ("elapsed", "took", "duration"):
            return True
    return False


def _upper_bounds(text: str, label: str) -> list[str]:
    tree = ast.parse(text)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        for compare in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            sides = [compare.left, *compare.comparators]
            for k, op in enumerate(compare.ops):
                low, high = sides[k], sides[k + 1]
                if (isinstance(op, ast.Lt | ast.LtE) and _reads_a_clock(low)) or (
                    isinstance(op, ast.Gt | ast.GtE) and _reads_a_clock(high)
                ):
                    found.append(f"{label}:{node.lineno}")
    return found


def test_the_finder_sees_an_elapsed_time_bound() -> None:
    sample = (
        "import time\nstart = time.monotonic()\nassert time.monotonic() - start < 15\n"
        "elapsed = 3\nassert 60 > elapsed\nassert time.monotonic() - start >= 1.0\nassert len([]) < 15\n"
    )
    assert _upper_bounds(sample, "sample.py") == ["sample.py:3", "sample.py:5"]


def test_no_test_bounds_how_long_something_took() -> None:
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        offenders += _upper_bounds(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert offenders == []
