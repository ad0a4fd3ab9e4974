"""The benchmark's helpers (bench/benchlib.py): medians, ratios, verdicts, trace counting, tables, CPU pinning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def _load_bench_run() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_run", REPO_ROOT / "bench" / "run.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_run"] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules["bench_run"]
    return module


def test_the_redaction_phase_needs_no_cluster_and_its_lines_end_with_a_token() -> None:
    """bench/run.py --only redaction: lines of the asked size whose last word the redactor must find."""
    from kubectl_tao.core.redact import REDACTED, redact_log_line

    bench_run = _load_bench_run()
    assert "redaction" in bench_run.PHASES
    local = set(bench_run.LOCAL_PHASES)
    assert local == {"redaction", "progress"}
    assert set(bench_run.OWN_CLUSTER_PHASES) == {"capacity"}  # its own API servers: the running cluster not needed
    lines = bench_run.redaction_lines(3000)
    assert len(lines) == 5 and all(len(line) == 3000 for line in lines.values())
    assert all(redact_log_line(line).endswith(REDACTED) for line in lines.values())
    # a family of job-text readers per cause, each tried on adversarial lines of the asked size, its own
    # literal start repeated among them
    from kubectl_tao.diagnosis import causes

    families = bench_run.pattern_families()
    assert {f"causes: {cause.name}" for cause in causes.CAUSES} <= set(families)
    store = families["causes: StoreTimeout"]
    adversarial = bench_run.adversarial_lines(store, 1024)
    assert all(len(line) == 1024 for line in adversarial) and "9" * 1024 in adversarial
    assert any(line.startswith("DistStoreError: Timed out after DistStoreError") for line in adversarial)
    # the redactor's patterns in families of their own, each read as the redactor reads it; a token's prefix
    # after a guard (`(?<![A-Za-z0-9])(nvapi-...)`) is the start its lines repeat
    tokens = families["redact: token formats"]
    assert len(tokens) > 50 and "redact: redact_log_line" in families
    assert any(line.startswith("nvapi-nvapi-") for line in bench_run.adversarial_lines(tokens, 1024))
    placeholders = families["redact: names and placeholders"]
    assert any(getattr(reader, "__name__", "") == "fullmatch" for reader in placeholders)  # never searched


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


# ------------------------------------------------------------------ the results file and BENCHMARKS.md


def _phase(command: str, *rows: list[str], started: str = "2026-12-06T16:40:00Z") -> dict[str, object]:
    return {
        "command": command,
        "started": started,
        "commit": "0123456789ab",
        "seconds": 12.3,
        "facts": [["cores", "2"], ["load average at phase start", "4.10 / 3.00 / 2.00"],
                  ["load average at phase end", "5.20 / 3.10 / 2.00"]],
        "rows": [list(r) for r in rows],
        "tables": [],
        "notes": ["a note of the run"],
    }


def test_the_results_file_sits_next_to_the_markdown_file() -> None:
    assert bl.results_path(Path("BENCHMARKS.md")) == Path("BENCHMARKS.json")


def test_a_run_replaces_only_the_phases_it_ran() -> None:
    old = {"version": 1, "phases": {"startup": _phase("bench/run.py --only startup"),
                                    "status": _phase("bench/run.py --only status")}}
    new = bl.merge_results(old, {"status": _phase("bench/run.py --only status --repeat 3")})
    assert new["phases"]["startup"]["command"] == "bench/run.py --only startup"
    assert new["phases"]["status"]["command"] == "bench/run.py --only status --repeat 3"


def test_the_results_file_reads_back_what_it_wrote() -> None:
    results = {"version": 1, "phases": {"progress": _phase("bench/run.py --only progress", ["progress", "a", "1 ms",
                                                                                            "", "", "", "-"])}}
    text = bl.dump_results(results)
    assert bl.read_results(text, "B.json") == results
    assert '    ["progress", "a", "1 ms", "", "", "", "-"]' in text.splitlines()  # a row is one line of a diff


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", "B.json: not JSON"),
        ('{"version": 2, "phases": {}}', "B.json: not a bench results file of version 1"),
        ('{"version": 1, "phases": {"x": []}}', "B.json: phase 'x' is not an object"),
        (json.dumps({"version": 1, "phases": {"x": {**_phase("c"), "command": 3}}}),
         "B.json: phase 'x' has no command of the right type"),
        (json.dumps({"version": 1, "phases": {"x": _phase("c", ["only", "three", "cells"])}}),
         "B.json: phase 'x' has rows that are not 7 cells of text"),
    ],
)
def test_a_results_file_that_is_not_one_is_named_in_one_line(text: str, problem: str) -> None:
    with pytest.raises(ValueError) as caught:
        bl.read_results(text, "B.json")
    assert str(caught.value).startswith(problem) and "\n" not in str(caught.value)


def test_current_figures_name_the_command_of_every_target_and_the_phases_not_recorded() -> None:
    results = {"version": 1, "phases": {
        "status": _phase("bench/run.py --only startup,status --repeat 3 --markdown BENCHMARKS.md",
                         ["status", "kubectl tao status JOB", "398 ms", "152 ms kubectl get job", "2.62x", "<= 2x",
                          "MISSED"],
                         ["status", "  the same against kubectl get job run with GOGC=off", "398 ms", "120 ms",
                          "3.32x", "", "-"]),
        "redaction": _phase("bench/run.py --only redaction --repeat 3 --markdown BENCHMARKS.md",
                            ["redaction", "readers over 6 hostile texts", "2502 ms", "", "", "< 5 s", "MET"],
                            started="2026-12-06T16:20:09Z"),
    }}
    text = bl.current_figures(results, ("startup", "status", "redaction", "capacity"))
    lines = text.splitlines()
    assert "Targets: 1 met, 1 missed, in 2 recorded phase(s)." in lines
    targets = [line for line in lines if line.startswith("| ") and "`bench/run.py" in line]
    assert targets == [
        "| status | kubectl tao status JOB | 398 ms vs 152 ms kubectl get job = 2.62x | <= 2x | **MISSED** | "
        "`bench/run.py --only startup,status --repeat 3 --markdown BENCHMARKS.md`, 2026-12-06 16:40 UTC, "
        "load 4.10-5.20 |",
        "| redaction | readers over 6 hostile texts | 2502 ms | < 5 s | MET | "
        "`bench/run.py --only redaction --repeat 3 --markdown BENCHMARKS.md`, 2026-12-06 16:20 UTC, load 4.10-5.20 |",
    ]  # the rows without a target appear only in their phase's own table
    assert lines.index("### status") < lines.index("### redaction")  # in the bench's phase order
    assert "| status | kubectl tao status JOB | 398 ms | 152 ms kubectl get job | 2.62x | <= 2x | **MISSED** |" in lines
    assert "`bench/run.py --only redaction --repeat 3 --markdown BENCHMARKS.md`, 2026-12-06 16:20 UTC, commit " \
           "0123456789ab, 12 s for this phase." in lines
    assert next(line for line in lines if line.startswith("No recorded run yet:")).startswith(
        "No recorded run yet: startup, capacity (")


def test_a_run_with_markdown_records_its_phases_and_rewrites_only_the_generated_part(tmp_path: Path) -> None:
    bench_run = _load_bench_run()
    doc = tmp_path / "B.md"
    doc.write_text(f"# B\n\n## Current figures\n\n{bench_run.MARK_BEGIN}\nold\n{bench_run.MARK_END}\n\n"
                   "## History\n\nhand-written, 2026-12-04\n")
    assert bench_run.main(["--only", "progress", "--repeat", "1", "--markdown", str(doc)]) == 0
    results = bl.read_results((tmp_path / "B.json").read_text(), "B.json")
    assert list(results["phases"]) == ["progress"]
    record = results["phases"]["progress"]
    assert record["command"] == f"bench/run.py --only progress --repeat 1 --markdown {doc}"
    assert [row[1] for row in record["rows"]][:2] == ["status.json tail, 64 KiB", "status.json tail, 640 KiB"]
    text = doc.read_text()
    assert text.startswith("# B\n\n## Current figures\n\n")
    assert text.endswith("## History\n\nhand-written, 2026-12-04\n")
    assert "\nold\n" not in text and f"`{record['command']}`" in text
    # --regenerate writes the same figures from the results file alone
    doc.write_text(f"# B\n{bench_run.MARK_BEGIN}\nold\n{bench_run.MARK_END}\n")
    assert bench_run.main(["--markdown", str(doc), "--regenerate"]) == 0
    assert f"`{record['command']}`" in doc.read_text()


def test_a_broken_results_file_stops_the_bench_before_it_measures(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    bench_run = _load_bench_run()
    (tmp_path / "B.json").write_text('{"version": 1, "phases": {"x": 1}}')
    with pytest.raises(SystemExit) as stopped:
        bench_run.main(["--only", "progress", "--markdown", str(tmp_path / "B.md")])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"bench: {tmp_path / 'B.json'}: phase 'x' is not an object; restore it from git or "
                                "delete it (the next run with --markdown starts it anew)"]
    assert not (tmp_path / "B.md").exists()


def test_a_target_row_shows_its_reference_beside_the_figure() -> None:
    rows = [
        ["start-up", "heavy imports at `--help`", "none", "imports 146 ms", "", "none", "MET"],
        ["capacity", "  bare kubectl get --raw reads", "2300 ms", "2972 ms", "fit = 1.29x", "<= 1.3x", "MET"],
    ]
    results = {"version": 1, "phases": {"startup": _phase("bench/run.py --only startup", *rows)}}
    cells = [line.split(" | ")[2] for line in bl.current_figures(results, ("startup",)).splitlines()
             if line.endswith("load 4.10-5.20 |")]
    assert cells == ["none (imports 146 ms)", "2300 ms (fit = 1.29x, 2972 ms)"]


# ------------------------------------------------------------------ the progress-status and top phases


@pytest.fixture(scope="module")
def bench_run() -> object:
    return _load_bench_run()


def test_the_progress_status_and_top_phases_are_phases_that_need_the_cluster(bench_run: object) -> None:
    phases = bench_run.PHASES  # type: ignore[attr-defined]
    assert {"progress-status", "top"} <= set(phases)
    assert not {"progress-status", "top"} & set(bench_run.LOCAL_PHASES)  # type: ignore[attr-defined]
    assert not {"progress-status", "top"} & set(bench_run.OWN_CLUSTER_PHASES)  # type: ignore[attr-defined]


def test_the_tao_shaped_rank_writes_a_status_json_the_progress_reader_reads(bench_run: object, tmp_path: Path) -> None:
    """The busybox rank of progress-status: 40 of 80 epochs while it runs, TAO's last line once told to end."""
    from kubectl_tao.progress.model import RUNNING, SUCCEEDED
    from kubectl_tao.progress.statusjson import read_status_json

    program = bench_run.TAO_SHAPED_RANK  # type: ignore[attr-defined]
    status = tmp_path / "train" / "status.json"
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "bench-done").touch()  # told to end at once: the whole file, its last line included
    env = {"PATH": os.environ["PATH"], "TAO_RESULTS_ROOT": str(tmp_path)}
    done = subprocess.run(["sh", "-c", program], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "status.json written\n"
    lines = status.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1 + 2 * 40 + 1
    assert all(isinstance(json.loads(line), dict) for line in lines)
    running = read_status_json("\n".join(lines[:-1]) + "\n")
    assert running is not None and running.state == RUNNING
    assert (running.epoch, running.max_epoch) == (40, 80)  # Lightning's 0-based epoch 39 of max_epoch 79
    assert running.eta_seconds == round((79 - 39) * 313 + 0.7)  # "3:28:40.700000", whole seconds
    assert running.kpi == {"val_mAP": 0.3771, "val_mAP50": 0.5902, "val_loss": 8.113, "train_loss": 0.412}
    ended = read_status_json(status.read_bytes())
    assert ended is not None and ended.state == SUCCEEDED


def test_the_top_job_holds_eight_ranks_of_one_gpu_on_the_real_nodes_and_their_nvidia_smi_reads(
    bench_run: object, tmp_path: Path
) -> None:
    from kubectl_tao.progress.gpuuse import NVIDIA_SMI_QUERY, parse_nvidia_smi

    job = bench_run.top_job("bench-top-x", "ns", "busybox:local")  # type: ignore[attr-defined]
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 8, 8)
    pod = spec["template"]["spec"]
    assert pod["nodeSelector"] == {"kubectl-tao.io/real-node": "true"}
    assert "affinity" not in pod  # several ranks a node
    (container,) = pod["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert bench_run.NVIDIA_SMI_STANDIN in container["command"][-1]  # type: ignore[attr-defined]
    standin = tmp_path / "nvidia-smi"
    standin.write_text(bench_run.NVIDIA_SMI_STANDIN)  # type: ignore[attr-defined]
    standin.chmod(0o755)
    read = {}
    for rank in ("0", "3"):
        out = subprocess.run([str(standin), *NVIDIA_SMI_QUERY[1:]], env={"JOB_COMPLETION_INDEX": rank},
                             capture_output=True, text=True, timeout=30, check=True).stdout
        gpus, problem = parse_nvidia_smi(out)
        assert problem is None and len(gpus) == 1
        read[rank] = gpus[0]
    assert (read["0"].utilization, read["0"].memory_used_mib, read["0"].memory_total_mib) == (87.0, 40213, 81559)
    assert (read["3"].utilization, read["3"].memory_used_mib) == (0.0, 3)
    refused = subprocess.run([str(standin), "--query-gpu=bogus"], capture_output=True, text=True, timeout=30,
                             check=False)
    assert refused.returncode == 2 and refused.stdout == 'Field "--query-gpu=bogus" is not a valid field to query.\n'


def test_seconds_before_a_verb_runs_from_the_first_calls_start_to_that_verbs_first_start() -> None:
    trace = [
        json.dumps({"argv": ["get", "jobs,pods", "-o", "json"], "start": 100.0, "ms": 120}),
        json.dumps({"argv": ["get", "services", "-A"], "start": 100.01, "ms": 90}),
        json.dumps({"argv": ["exec", "p1", "--", "nvidia-smi"], "start": 100.35, "ms": 300}),
        json.dumps({"argv": ["exec", "p0", "--", "nvidia-smi"], "start": 100.3, "ms": 310}),
        "not json",
    ]
    assert bl.seconds_before(trace, "exec") == pytest.approx(0.3)
    assert bl.seconds_before(trace, "logs") is None  # no such call
    assert bl.seconds_before([json.dumps({"argv": ["exec"], "ms": 5})], "exec") is None  # an older trace: no start


def test_the_workflow_phase_creates_bare_what_workflow_render_prints(
    cli: Any, tmp_path: Path, tao_env: Path
) -> None:
    """bench/run.py --only workflow: its 5-step file is a valid workflow, and the bare creates it times against
    `workflow run` are the rendered objects, in the run's order (the RBAC, then each step, the last first), moved
    into the bare namespace."""
    bench_run = _load_bench_run()
    path = tmp_path / "five.yaml"
    path.write_text(bench_run.five_step_workflow(bench_run.IMAGE))
    code, out, err = cli("workflow", "render", str(path), "-o", "json")
    assert code == 0, err
    rendered = json.loads(out)
    payloads = [json.loads(text)["items"] for text in bench_run.bare_workflow_creates(rendered, "bare")]
    assert len(payloads) == 6
    assert [o["kind"] for o in payloads[0]] == ["ServiceAccount", "Role", "RoleBinding"] * 4
    steps = [next(o for o in items if o["kind"] == "Job")["metadata"]["labels"][bench_run.WORKFLOW_STEP_LABEL]
             for items in payloads[1:]]
    assert steps == ["export", "retrain", "prune", "evaluate", "train"]
    assert sum(len(items) for items in payloads) == len(rendered["items"])
    assert all("namespace" not in o["metadata"] for items in payloads for o in items)
    assert {s["namespace"] for o in payloads[0] for s in o.get("subjects") or []} == {"bare"}
    release = tmp_path / "release.yaml"
    release.write_text(bench_run.release_workflow("kubectl-tao.local/torch:1"))
    code, out, err = cli("workflow", "render", str(release), "-o", "json")
    assert code == 0, err
    assert "step-end" in out


STAT = "cpu  100 5 50 800 20 3 2 0 7 0\ncpu0 50 2 25 400 10 1 1 0 0 0\nintr 1\n"


def test_stat_jiffies_sums_the_cpu_line_without_counting_guest_time_twice() -> None:
    assert bl.stat_jiffies(STAT) == (980, 820)
    with pytest.raises(ValueError, match="cpu"):
        bl.stat_jiffies("intr 1\n")


def test_proc_stat_reads_parent_start_and_cpu_ticks_past_a_command_name_with_parentheses() -> None:
    fields = ["S", "41", *["0"] * 9, "30", "12", *["0"] * 6, "5000", "0"]  # fields 3.. of /proc/PID/stat
    assert bl.proc_stat("77 (kube (api) server) " + " ".join(fields)) == (41, 5000, 42)


def test_descendants_follow_children_of_the_roots_only() -> None:
    parents = {1: 0, 10: 1, 11: 10, 12: 11, 20: 1, 21: 20}
    assert bl.descendants(parents, [10, 99]) == {10, 11, 12}


def _sample(total: int, idle: int, uptime: int, cluster: dict[int, tuple[int, int]], own: float,
            load: float) -> bl.CpuSample:
    return bl.CpuSample(total, idle, uptime, cluster, own, load)


def test_conditions_split_the_busy_cpu_between_the_cluster_the_bench_and_the_rest() -> None:
    before = _sample(1000, 600, 5000, {7: (100, 50), 8: (200, 10), 9: (300, 5)}, 1.0, 1.1)
    # 1000 jiffies pass, 400 idle: 600 busy. pid 7 used 100; pid 8 ended; pid 9 is a new process under an old
    # pid (another start time, before the first sample: not counted); pid 10 started since (its 50 counted).
    after = _sample(2000, 1000, 5500, {7: (100, 150), 9: (4000, 30), 10: (5200, 50)}, 3.0, 1.4)
    assert bl.cluster_ticks(before, after) == 150
    text = bl.conditions(before, after, ticks_per_second=100, cores=2)
    assert text == "load 1.10/1.40; CPU busy 60% of 2 cores: cluster 15%, bench and what it ran 20%, other 25%"


def test_conditions_without_time_passing_give_the_load_alone() -> None:
    same = _sample(1000, 600, 5000, {}, 1.0, 0.5)
    assert bl.conditions(same, same, ticks_per_second=100, cores=2) == "load 0.50/0.50"
