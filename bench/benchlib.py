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
from typing import Any

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


def seconds_before(lines: Iterable[str], verb: str) -> float | None:
    """In a trace, the seconds from the first kubectl call's start to the start of the first call of VERB (e.g.
    `exec`): what a verb does before it can make that call. None when the trace has no such call (or no start)."""
    first: float | None = None
    found: float | None = None
    for line in lines:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(entry, dict) or "start" not in entry:
            continue
        start = float(entry["start"])
        first = start if first is None else min(first, start)
        argv = entry.get("argv") or []
        if verb in argv and (found is None or start < found):
            found = start
    return None if first is None or found is None else found - first


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


# ----------------------------------------------------------------------------------------------- results file
#
# `bench/run.py --markdown BENCHMARKS.md` keeps the latest completed run of each phase in BENCHMARKS.json (the
# Markdown file's name with .json) and writes the "Current figures" of BENCHMARKS.md from that file alone: every
# figure there is a row some run of bench/run.py printed, shown with the exact command that printed it.

RESULTS_VERSION = 1
PHASE_FIELDS = {"command": str, "started": str, "commit": str, "seconds": (int, float), "facts": list, "rows": list,
                "tables": list, "notes": list}


def results_path(markdown: Path) -> Path:
    """The results file kept next to a Markdown file: BENCHMARKS.md -> BENCHMARKS.json."""
    return markdown.with_suffix(".json")


def _is_cells(value: object, width: int | None = None) -> bool:
    return (isinstance(value, list) and all(isinstance(c, str) for c in value)
            and (width is None or len(value) == width))


def _phase_problem(record: object) -> str | None:
    if not isinstance(record, dict):
        return "is not an object"
    for key, kind in PHASE_FIELDS.items():
        if not isinstance(record.get(key), kind) or isinstance(record.get(key), bool):
            return f"has no {key} of the right type"
    if not all(_is_cells(fact, 2) for fact in record["facts"]):
        return "has facts that are not [name, value] pairs of text"
    if not all(_is_cells(row, len(HEADERS)) for row in record["rows"]):
        return f"has rows that are not {len(HEADERS)} cells of text"
    if not all(isinstance(note, str) for note in record["notes"]):
        return "has notes that are not text"
    for table in record["tables"]:
        if not (isinstance(table, dict) and isinstance(table.get("caption"), str) and _is_cells(table.get("headers"))
                and isinstance(table.get("rows"), list)
                and all(_is_cells(row, len(table["headers"])) for row in table["rows"])):
            return "has a table without a caption, headers and rows of as many cells"
    return None


def empty_results() -> dict[str, object]:
    return {"version": RESULTS_VERSION, "phases": {}}


def read_results(text: str, name: str) -> dict[str, Any]:
    """The results file's content, checked; ValueError naming NAME and what is wrong in one line."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict) or data.get("version") != RESULTS_VERSION or not isinstance(data.get("phases"), dict):
        raise ValueError(f"{name}: not a bench results file of version {RESULTS_VERSION} "
                         '({"version": 1, "phases": {...}})')
    for key, record in data["phases"].items():
        problem = _phase_problem(record)
        if problem:
            raise ValueError(f"{name}: phase {key!r} {problem}")
    return data


def merge_results(results: dict[str, Any], phases: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """RESULTS with each phase of PHASES replaced by its new record (the others kept as they were)."""
    return {"version": RESULTS_VERSION, "phases": {**results["phases"], **phases}}


def _order(key: str, order: Sequence[str]) -> tuple[int, str]:
    base = key.split()[0]
    return (order.index(base) if base in order else len(order), key)


def _figure(cells: Sequence[str]) -> str:
    _, _, value, reference, ratio, _, _ = cells
    if not ratio:
        return f"{value} ({reference})" if reference else value
    if ratio.startswith("fit "):  # the bare reads' row: the ratio is fit's, against the value
        return f"{value} ({ratio}, {reference})"
    return f"{value} vs {reference} = {ratio}" if reference else f"{value} = {ratio}"


def _when(record: dict[str, Any]) -> str:
    return record["started"].replace("T", " ").removesuffix("Z")[:16] + " UTC"


def _load(record: dict[str, Any]) -> str:
    facts = dict(record["facts"])
    start, end = facts.get("load average at phase start", "?"), facts.get("load average at phase end", "?")
    return f"load {start.split(' / ')[0]}-{end.split(' / ')[0]}"


def dump_results(results: dict[str, Any]) -> str:
    """The results file's text: indented, with each list of plain values (a row, a fact) on one line, so a
    run's change reads as a diff of rows."""

    def text(value: Any, depth: int) -> str:
        pad, inner = " " * depth, " " * (depth + 1)
        if isinstance(value, dict) and value:
            items = [f"{inner}{json.dumps(k)}: {text(v, depth + 1)}" for k, v in value.items()]
            return "{\n" + ",\n".join(items) + f"\n{pad}}}"
        if isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
            return "[\n" + ",\n".join(f"{inner}{text(v, depth + 1)}" for v in value) + f"\n{pad}]"
        return json.dumps(value, ensure_ascii=False)

    return text(results, 0) + "\n"


def current_figures(results: dict[str, Any], order: Sequence[str], source: str = "BENCHMARKS.json") -> str:
    """The generated "Current figures" of BENCHMARKS.md: every target row of the latest run of each phase, with
    the command and the run it comes from, then each phase's full table, facts and notes. SOURCE names the
    results file they were read from."""
    phases = sorted(results["phases"].items(), key=lambda item: _order(item[0], order))
    targets = [(key, record, row) for key, record in phases for row in record["rows"] if row[6] in (MET, MISSED)]
    met = sum(1 for *_, row in targets if row[6] == MET)
    out = [
        f"Written by `bench/run.py --markdown` from `{source}`, which keeps the latest completed "
        "run of each phase (a run replaces only the phases it ran). Each figure names the command that measured it; "
        "runs on a loaded machine show it in their load average (2 cores here: a loaded run's times are longer, "
        "its ratios within one run hold better).",
        "",
        f"Targets: {met} met, {len(targets) - met} missed, in {len(phases)} recorded phase(s).",
        "",
    ]
    if targets:
        out.append(markdown_table(
            [[key, row[1].strip(), _figure(row), row[5], row[6], f"`{record['command']}`, {_when(record)}, "
              f"{_load(record)}"] for key, record, row in targets],
            ["phase", "target", "latest", "limit", "result", "measured by"]))
        out.append("")
    missing = [name for name in order if not any(key.split()[0] == name for key, _ in phases)]
    if missing:
        out += [f"No recorded run yet: {', '.join(missing)} (`bench/run.py --only PHASES --markdown FILE` records "
                "the phases it runs).", ""]
    for key, record in phases:
        out += [f"### {key}", "",
                f"`{record['command']}`, {_when(record)}, commit {record['commit']}, "
                f"{record['seconds']:.0f} s for this phase.", ""]
        out += [f"- {name}: {value}" for name, value in record["facts"]]
        out.append("")
        if record["rows"]:
            out += [markdown_table(record["rows"]), ""]
        for table in record["tables"]:
            out += [table["caption"], "", markdown_table(table["rows"], table["headers"]), ""]
        out += [f"- {note}" for note in record["notes"]]
        if record["notes"]:
            out.append("")
    return "\n".join(out).rstrip() + "\n"


# ------------------------------------------------------------------------------------- measurement conditions
# The "idle" row says whether the 1-min load average was below a bound. With the local cluster up, its own control
# loops keep a 2-core machine near a load of 1, so the row says "no" whatever else ran: it also gives who used the
# CPU while the phase was timed, read from /proc (the parsers here; bench/run.py reads the files).


def stat_jiffies(text: str) -> tuple[int, int]:
    """/proc/stat's first line (every CPU together) -> (all jiffies, idle + iowait jiffies)."""
    fields = text.split("\n", 1)[0].split()
    if not fields or fields[0] != "cpu":
        raise ValueError("not /proc/stat: its first line is not the `cpu` line")
    values = [int(x) for x in fields[1:]]
    # user nice system idle iowait irq softirq steal (guest and guest_nice are counted in user and nice already)
    return sum(values[:8]), values[3] + values[4]


def proc_stat(text: str) -> tuple[int, int, int]:
    """/proc/PID/stat -> (parent pid, start time in clock ticks since boot, user + system clock ticks). The
    command name (field 2) is in parentheses and may hold spaces and parentheses: fields are counted after the
    last ')'."""
    rest = text[text.rindex(")") + 2:].split()
    # rest[0] is field 3 (state): ppid is field 4, utime 14, stime 15, starttime 22
    return int(rest[1]), int(rest[19]), int(rest[11]) + int(rest[12])


def descendants(parents: dict[int, int], roots: Iterable[int]) -> set[int]:
    """ROOTS (those that are in PARENTS: pid -> parent pid) and every process below them."""
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    found: set[int] = set()
    todo = [pid for pid in roots if pid in parents]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


@dataclass(frozen=True)
class CpuSample:
    """What the machine's CPU had done by one moment: jiffies of every CPU and of them idle, the clock ticks
    since boot, the cluster's processes (pid -> (start time, user + system ticks)), this process's CPU seconds
    with its reaped children's (what it ran: the plugin, kubectl), and the 1-min load average."""

    total: int
    idle: int
    uptime_ticks: int
    cluster: dict[int, tuple[int, int]]
    own_seconds: float
    load: float


def cluster_ticks(before: CpuSample, after: CpuSample) -> int:
    """Ticks the cluster's processes used between the samples: those alive at both, and those started since the
    first (whole). A process that ended in between is not counted (it is in `other`)."""
    used = 0
    for pid, (started, ticks) in after.cluster.items():
        if pid in before.cluster and before.cluster[pid][0] == started:
            used += ticks - before.cluster[pid][1]
        elif started >= before.uptime_ticks:
            used += ticks
    return used


def conditions(before: CpuSample, after: CpuSample, *, ticks_per_second: int, cores: int) -> str:
    """Who used the CPU between the samples, as shares of the whole machine (every core): busy, of which the
    cluster's processes, this benchmark with what it ran, and the rest (other work on the machine)."""
    total = after.total - before.total
    if total <= 0:
        return f"load {before.load:.2f}/{after.load:.2f}"
    busy = total - (after.idle - before.idle)
    cluster = min(cluster_ticks(before, after), busy)
    own = min(round((after.own_seconds - before.own_seconds) * ticks_per_second), busy - cluster)
    other = max(busy - cluster - own, 0)

    def pct(part: int) -> str:
        return f"{100 * part / total:.0f}%"

    return (f"load {before.load:.2f}/{after.load:.2f}; CPU busy {pct(busy)} of {cores} cores: cluster {pct(cluster)}, "
            f"bench and what it ran {pct(own)}, other {pct(other)}")
