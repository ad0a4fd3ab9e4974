"""The benchmark's helpers (bench/benchlib.py): medians, ratios, verdicts, trace counting, tables, CPU pinning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT as REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "bench"))

import benchlib as bl


def test_median_of_odd_and_even_samples() -> None:
    assert bl.median([3.0, 1.0, 2.0]) == 2.0
    assert bl.median([4.0, 1.0, 2.0, 3.0]) == 2.5


def test_median_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="empty"):
        bl.median([])


def test_ratio_and_its_reference() -> None:
    assert bl.ratio(1.3, 1.0) == pytest.approx(1.3)
    with pytest.raises(ValueError, match="positive"):
        bl.ratio(1.0, 0.0)


def test_verdict_at_the_limit() -> None:
    assert bl.verdict(1.3, 1.3) == bl.MET
    assert bl.verdict(1.31, 1.3) == bl.MISSED
    assert bl.verdict(1.0, 1.0, strict=True) == bl.MISSED
    assert bl.verdict(0.99, 1.0, strict=True) == bl.MET
    assert bl.verdict(5.0, None) == bl.INFO


def test_formatting() -> None:
    assert bl.fmt_seconds(0.0874) == "87 ms"
    assert bl.fmt_seconds(1.2344) == "1234 ms"
    assert bl.fmt_seconds(42.07) == "42.1 s"
    assert bl.fmt_kib(42188) == "41.2 MiB"


def _trace(*entries: dict[str, object]) -> list[str]:
    return [json.dumps(e) for e in entries] + ["", "not json"]


def test_busy_time_counts_concurrent_calls_once() -> None:
    lines = _trace(
        {"argv": ["get"], "ms": 100, "start": 10.0, "pid": 1},  # 10.0 - 10.1
        {"argv": ["get"], "ms": 150, "start": 10.05, "pid": 1},  # 10.05 - 10.2, overlaps
        {"argv": ["get"], "ms": 20, "start": 10.06, "pid": 1},  # inside the previous one
        {"argv": ["create"], "ms": 100, "start": 11.0, "pid": 1},  # 11.0 - 11.1
        {"argv": ["old"], "ms": 30, "pid": 1},  # no start: counted in full
    )
    assert bl.kubectl_busy_seconds(lines) == pytest.approx(0.2 + 0.1 + 0.03)


def test_text_table_aligns_columns() -> None:
    rows = [
        bl.Row("submit", "kubectl tao submit", "700 ms", "300 ms", "2.33x", "<= 1.3x", bl.MISSED),
        bl.Row("status", "calls", "1", target="1", result=bl.MET),
    ]
    lines = bl.text_table(rows).splitlines()
    assert lines[0].split() == ["area", "measurement", "median", "reference", "ratio", "target", "result"]
    assert set(lines[1]) <= {"-", " "}
    assert lines[2].index("700 ms") == lines[3].index("1") == lines[0].index("median")
    assert lines[2].endswith("MISSED") and lines[3].endswith("MET")


def test_text_table_of_plain_cells() -> None:
    text = bl.text_table([["submit", "4"], ["status", "1"]], ["verb", "calls"])
    assert text.splitlines() == ["verb    calls", "------  -----", "submit  4", "status  1"]


def test_markdown_table_bolds_misses_and_escapes_pipes() -> None:
    rows = [bl.Row("list", "a | b", "1 ms", target="<= 1.5x", result=bl.MISSED)]
    lines = bl.markdown_table(rows).splitlines()
    assert lines[0] == "| area | measurement | median | reference | ratio | target | result |"
    assert lines[1] == "|---|---|---|---|---|---|---|"
    assert lines[2] == "| list | a \\| b | 1 ms |  |  | <= 1.5x | **MISSED** |"


def test_summary_counts_targets() -> None:
    rows = [bl.Row("a", "x", "1", result=bl.MET), bl.Row("a", "y", "1", result=bl.MISSED), bl.Row("a", "z", "1")]
    assert bl.summary(rows) == (1, 1)


def test_replace_section_keeps_the_text_around_the_markers() -> None:
    doc = "# Benchmarks\nintro\n<!-- b -->\nold table\n<!-- e -->\n## Analysis\nhand-written\n"
    out = bl.replace_section(doc, "new table\n", "<!-- b -->", "<!-- e -->")
    assert out == "# Benchmarks\nintro\n<!-- b -->\nnew table\n<!-- e -->\n## Analysis\nhand-written\n"


def test_replace_section_appends_when_the_markers_are_missing() -> None:
    assert bl.replace_section("# B", "t", "<b>", "<e>") == "# B\n<b>\nt\n<e>\n"
    assert bl.replace_section("", "t", "<b>", "<e>") == "<b>\nt\n<e>\n"


def test_callgrinds_instruction_count_is_read_from_its_summary() -> None:
    stderr = (
        "==4711== Callgrind, a call-graph generating cache profiler\n==4711== Events    : Ir\n"
        "==4711== Collected : 190345678\n"
    )
    assert bl.collected_instructions(stderr) == 190_345_678
    assert bl.collected_instructions("error: no job record x\n") is None
    assert bl.collected_instructions("the program printed Collected : 12\n") is None


def test_the_redaction_phase_needs_no_cluster_and_its_lines_end_with_a_token() -> None:
    """bench/run.py --only redaction: lines of the asked size whose last word the redactor must find."""
    import importlib.util

    from kubectl_tao.core.redact import REDACTED, redact_log_line

    spec = importlib.util.spec_from_file_location("bench_run", REPO_ROOT / "bench" / "run.py")
    assert spec and spec.loader
    bench_run = importlib.util.module_from_spec(spec)
    sys.modules["bench_run"] = bench_run  # its dataclasses look their module up
    try:
        spec.loader.exec_module(bench_run)
    finally:
        del sys.modules["bench_run"]
    assert "redaction" in bench_run.PHASES
    local = set(bench_run.LOCAL_PHASES)
    assert local == {"redaction"}
    assert set(bench_run.OWN_CLUSTER_PHASES) == {"capacity"}  # its own API servers: the running cluster not needed
    lines = bench_run.redaction_lines(3000)
    assert len(lines) == 3 and all(len(line) == 3000 for line in lines.values())
    assert all(redact_log_line(line).endswith(REDACTED) for line in lines.values())
    # a family of job-text readers per cause, each tried on adversarial lines of the asked size, its own
    # literal start repeated among them
    from kubectl_tao.core import causes

    families = bench_run.pattern_families()
    assert {f"causes: {cause.name}" for cause in causes.CAUSES} <= set(families)
    store = families["causes: StoreTimeout"]
    adversarial = bench_run.adversarial_lines(store, 1024)
    assert all(len(line) == 1024 for line in adversarial) and "9" * 1024 in adversarial
    assert any(line.startswith("DistStoreError: Timed out after DistStoreError") for line in adversarial)


def test_server_apart_pins_the_cluster_and_the_client_to_different_cpus_and_restores_them(tmp_path: Path) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    server = subprocess.Popen(["sleep", "30"])
    try:
        (tmp_path / "sleep.pid").write_text(f"{server.pid}\n")
        (tmp_path / "gone.pid").write_text("999999999\n")  # a process that is gone: left out
        with bl.server_apart(tmp_path, True) as where:
            if len(cpus) > 1:
                assert os.sched_getaffinity(server.pid) == {cpus[0]}
                assert os.sched_getaffinity(0) == set(cpus[1:])
                assert where.startswith(f"API server on CPU {cpus[0]}, client on CPU {cpus[1]}")
            else:
                assert where == "server and client on the one CPU"
        assert os.sched_getaffinity(0) == set(cpus) == os.sched_getaffinity(server.pid)
        with bl.server_apart(tmp_path, False) as where:
            assert os.sched_getaffinity(server.pid) == set(cpus)
            assert "sharing" in where or "one CPU" in where
    finally:
        server.kill()
        server.wait()
