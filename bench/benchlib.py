"""Pure helpers of the benchmark (bench/run.py): medians, ratios, verdicts, trace counting, tables.

Nothing here starts a process or talks to a cluster (server_apart only moves processes between CPUs), so it
is unit-tested (tests/unit/test_bench.py).
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

MET = "MET"
MISSED = "MISSED"
INFO = "-"


def median(values: Sequence[float]) -> float:
    """The median; an empty sample is an error (a measurement that never ran must not pass)."""
    if not values:
        raise ValueError("median of an empty sample")
    return float(statistics.median(values))


def ratio(value: float, reference: float) -> float:
    """value / reference; a reference of 0 (or less) cannot be a baseline."""
    if reference <= 0:
        raise ValueError(f"reference must be positive, got {reference}")
    return value / reference


def verdict(value: float | None, limit: float | None, *, strict: bool = False) -> str:
    """MET when value <= limit (value < limit with strict), MISSED otherwise, '-' without a target."""
    if limit is None or value is None:
        return INFO
    ok = value < limit if strict else value <= limit
    return MET if ok else MISSED


def fmt_seconds(seconds: float) -> str:
    """Wall time for a table: milliseconds below 10 s ("87 ms", "1234 ms"), seconds above ("42.1 s")."""
    if seconds < 10:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.1f} s"


def fmt_kib(kib: float) -> str:
    """Max RSS as reported by getrusage/time (KiB) -> "41.2 MiB"."""
    return f"{kib / 1024:.1f} MiB"


def kubectl_busy_seconds(lines: Iterable[str]) -> float:
    """Wall time during which at least one traced kubectl call ran (the union of their intervals), so calls
    run at once count once. Lines without a "start" field (an older trace) count their full duration."""
    spans: list[tuple[float, float]] = []
    loose = 0.0
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(entry, dict):
            continue
        seconds = float(entry.get("ms", 0)) / 1000
        if "start" in entry:
            start = float(entry["start"])
            spans.append((start, start + seconds))
        else:
            loose += seconds
    total = 0.0
    end = float("-inf")
    for start, stop in sorted(spans):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total + loose


@dataclass(frozen=True)
class Row:
    """One line of the result table."""

    section: str
    name: str
    value: str  # the measured median (formatted)
    reference: str = ""  # what it is compared with (formatted), if anything
    ratio: str = ""  # value / reference (formatted), if any
    target: str = ""  # e.g. "<= 1.3x", "< 1 s", "== 1"
    result: str = INFO  # MET / MISSED / -

    def cells(self) -> list[str]:
        return [self.section, self.name, self.value, self.reference, self.ratio, self.target, self.result]


HEADERS = ["area", "measurement", "median", "reference", "ratio", "target", "result"]


def _grid(rows: Sequence[Row] | Sequence[Sequence[str]]) -> list[list[str]]:
    return [row.cells() if isinstance(row, Row) else [str(c) for c in row] for row in rows]


def text_table(rows: Sequence[Row] | Sequence[Sequence[str]], headers: Sequence[str] = HEADERS) -> str:
    """A plain aligned table for the terminal (Rows, or plain lists of cells with matching headers)."""
    grid = [list(headers), *_grid(rows)]
    widths = [max(len(line[i]) for line in grid) for i in range(len(headers))]
    out = []
    for index, line in enumerate(grid):
        out.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip())
        if index == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|") if text else ""


def markdown_table(rows: Sequence[Row] | Sequence[Sequence[str]], headers: Sequence[str] = HEADERS) -> str:
    """A GitHub-flavoured Markdown table; a MISSED cell is made bold so it stands out."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for cells in _grid(rows):
        shown = [f"**{MISSED}**" if c == MISSED else _md_cell(c) for c in cells]
        lines.append("| " + " | ".join(shown) + " |")
    return "\n".join(lines)


def replace_section(document: str, section: str, begin: str, end: str) -> str:
    """Put `section` between the `begin` and `end` marker lines of `document` (keeping what is outside
    them, e.g. hand-written analysis); a document without both markers gets them appended."""
    head, found_begin, rest = document.partition(begin)
    _, found_end, tail = rest.partition(end)
    if not (found_begin and found_end):
        sep = "" if not document or document.endswith("\n") else "\n"
        return f"{document}{sep}{begin}\n{section.strip()}\n{end}\n"
    return f"{head}{begin}\n{section.strip()}\n{end}{tail}"


def summary(rows: Sequence[Row]) -> tuple[int, int]:
    """(targets met, targets missed)."""
    met = sum(1 for r in rows if r.result == MET)
    missed = sum(1 for r in rows if r.result == MISSED)
    return met, missed


def collected_instructions(stderr: str) -> int | None:
    """The instruction count in callgrind's summary (`==PID== Collected : N`), or None when there is none."""
    for line in stderr.splitlines():
        head, sep, count = line.rpartition("Collected :")
        if sep and head.startswith("==") and count.strip().isdigit():
            return int(count.strip())
    return None


@contextmanager
def server_apart(pids: Path, apart: bool) -> Iterator[str]:
    """With APART, a cluster's processes (their PIDS/*.pid files) get the first CPU and this process, so
    every client command it starts, the others: in a real cluster the API server has machines of its own, and
    on a 2-core machine serving 160 MB of pods takes it more than one core, so the client's own cost would be
    measured together with the server starving for CPU. Yields where things ran, for the row."""
    cpus = sorted(os.sched_getaffinity(0))
    if not apart or len(cpus) < 2:
        yield "server and client sharing all CPUs" if len(cpus) > 1 else "server and client on the one CPU"
        return
    pinned: list[int] = []
    for pidfile in sorted(pids.glob("*.pid")):
        try:
            pid = int(pidfile.read_text().strip())
            for tid in os.listdir(f"/proc/{pid}/task"):
                os.sched_setaffinity(int(tid), {cpus[0]})
            pinned.append(pid)
        except (OSError, ValueError):
            continue  # a process that is gone, or a thread that ended meanwhile
    os.sched_setaffinity(0, set(cpus[1:]))
    try:
        yield f"API server on CPU {cpus[0]}, client on CPU {cpus[1]}" + ("" if len(cpus) == 2 else f"-{cpus[-1]}")
    finally:
        os.sched_setaffinity(0, set(cpus))
        for pid in pinned:
            for tid in os.listdir(f"/proc/{pid}/task") if os.path.isdir(f"/proc/{pid}/task") else []:
                try:
                    os.sched_setaffinity(int(tid), set(cpus))
                except OSError:
                    continue
