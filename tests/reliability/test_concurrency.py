"""Many writers at once: 50 `kubectl tao submit` processes against the cluster, 50 cancels, and 50
processes marking one record while another process keeps reading it."""

from __future__ import annotations

import json
import multiprocessing
import os
import queue
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from support.cluster import STAY_RUNNING, Cluster, Tao, kubectl
from support.fake_kubectl import open_kubernetes_record

from kubectl_tao.store.records import RecordStore, schema_errors
from kubectl_tao.store.transitions import TERMINAL_STATES

from .helpers import TAO, check_record, names_of, objects, owned_by, record_ids, transition_problems, wait_gone

N = 50
PROCESS_TIMEOUT_S = 240


def _start(tao: Tao, args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [TAO, *args], env=tao.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(procs: list[subprocess.Popen[str]]) -> list[tuple[int, str, str]]:
    deadline = time.monotonic() + PROCESS_TIMEOUT_S
    out = []
    for proc in procs:
        try:
            stdout, stderr = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for other in procs:
                other.kill()
            raise
        out.append((proc.returncode, stdout, stderr))
    return out


@pytest.mark.timeout(PROCESS_TIMEOUT_S * 2 + 120)
def test_50_concurrent_submits_give_50_intact_records_and_pinned_jobs(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    tao = Tao(cluster, namespace, tmp_path / "state")
    env_file = tmp_path / "creds.env"
    env_file.write_text("HF_TOKEN=hf_ConcurrencyToken0123456789abcdefgh\n", encoding="utf-8")
    procs = []
    for i in range(N):
        args = [
            "submit", "--image", "busybox:1.36", "--command", f"echo {i}", "--gpus", "0",
            "--storage-tier", "C", "--s3-output", "s3://tao-results/concurrency",
            "--network-arch", "conc", "--action", f"a{i % 5}", "--annotation", f"{STAY_RUNNING}=true",
        ]  # fmt: skip
        if i % 2:
            args += ["--env-file", str(env_file)]  # half of them create a credential Secret too
        procs.append(_start(tao, args))
    results = _finish(procs)
    failed = [(rc, err.strip()[-300:]) for rc, _out, err in results if rc != 0]
    assert not failed, f"{len(failed)} of {N} submits failed: {failed[:3]}"
    ids = [out.strip().splitlines()[-1] for _rc, out, _err in results]
    assert len(set(ids)) == N, "two submits got the same record id"
    assert record_ids(tao.state_dir) == sorted(ids), "records lost or extra"

    jobs = {j["metadata"]["name"]: j for j in objects(namespace, kinds="jobs")}
    secrets = {s["metadata"]["name"]: s for s in objects(namespace, kinds="secrets")}
    assert len(jobs) == N and len(secrets) == N // 2
    for record_id in ids:
        record, extra = check_record(tao.state_dir, record_id)
        assert record["transitions"][-1]["state"] == "RUNNING" and record["terminal_state"] is None
        name = extra["job_name"]
        assert record["backend_ref"] == f"{namespace}/{name}"
        job = jobs[name]
        assert job["metadata"]["uid"] == extra["job_uid"], f"{record_id}: the record pins another UID"
        assert job["metadata"]["annotations"]["kubectl-tao.io/record-id"] == record_id
        for secret_name in extra.get("secret_names") or []:
            assert owned_by(secrets[secret_name], extra["job_uid"]), f"Secret {secret_name} is not owned by its Job"

    # 50 cancels at once: every record CANCELED, nothing left in the namespace.
    cancels = _finish([_start(tao, ["cancel", record_id, "--no-wait"]) for record_id in ids])
    failed = [(rc, err.strip()[-300:]) for rc, _out, err in cancels if rc != 0]
    assert not failed, f"{len(failed)} of {N} cancels failed: {failed[:3]}"
    for record_id in ids:
        record, _extra = check_record(tao.state_dir, record_id)
        assert record["terminal_state"] == "CANCELED"
    wait_gone(namespace, timeout=120)
    assert names_of(objects(namespace)) == []
    assert kubectl("get", "jobs", "-o", "name", ns=namespace).stdout.strip() == ""


# ------------------------------------------------------------------ one record, 50 writers


def _mark(state_dir: str, record_id: str, index: int, state: str, start: Any, results: Any) -> None:
    os.environ["TAO_STATE_DIR"] = state_dir
    store = RecordStore()
    start.wait(timeout=60)
    try:
        store.mark(
            record_id,
            state,
            message=f"worker {index}",
            source="poller",
            err_class="ERR_INFRA" if state == "ERROR" else None,
        )
        results.put((index, state, "ok"))
    except Exception as exc:  # reported to the test, which decides whether it was a legal refusal
        results.put((index, state, f"{type(exc).__name__}: {getattr(exc, 'message', exc)}"))


def _read(path: str, start: Any, stop: Any, results: Any) -> None:
    reads, problems = 0, []
    start.wait(timeout=60)
    while not stop.is_set() or reads == 0:
        try:
            data = json.loads(Path(path).read_bytes())
            found = schema_errors(data, "job-record") + transition_problems(data)
        except ValueError as exc:
            found = [f"torn read: {exc}"]
        reads += 1
        problems += found
    results.put((reads, problems[:5]))


@pytest.mark.timeout(180)
def test_50_concurrent_marks_on_one_record_stay_legal_and_never_tear(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state_dir = tmp_path / "state"
    monkeypatch.setenv("TAO_STATE_DIR", str(state_dir))
    record = open_kubernetes_record(
        RecordStore(), image="busybox:1.36", network_arch="conc", action="mark", results_dir="/workspace/results/conc"
    )
    record_id = record.id
    # 40 workers move it between the live states, 10 try to end it (only one terminal state can win).
    plan = [("RUNNING", "PENDING", "UNKNOWN")[i % 3] for i in range(40)]
    plan += [("COMPLETE", "ERROR", "CANCELED")[i % 3] for i in range(10)]
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(len(plan) + 1)
    stop = ctx.Event()
    results: Any = ctx.Queue()
    reader_results: Any = ctx.Queue()
    reader = ctx.Process(
        target=_read, args=(str(state_dir / "jobs" / f"{record_id}.json"), start, stop, reader_results)
    )
    workers = [
        ctx.Process(target=_mark, args=(str(state_dir), record_id, i, state, start, results))
        for i, state in enumerate(plan)
    ]
    for proc in [reader, *workers]:
        proc.start()
    outcomes = []
    try:
        for _ in workers:
            outcomes.append(results.get(timeout=120))
    except queue.Empty:
        pytest.fail(f"only {len(outcomes)} of {len(workers)} marks answered within 120s")
    finally:
        stop.set()
        for proc in workers:
            proc.join(timeout=30)
        reads, torn = reader_results.get(timeout=60)
        reader.join(timeout=30)
    assert all(proc.exitcode == 0 for proc in [reader, *workers])
    assert reads > 0 and torn == [], f"a reader saw a torn or invalid record: {torn}"

    final, _extra = check_record(state_dir, record_id)
    messages = [t["message"] for t in final["transitions"]]
    terminal = final["terminal_state"]
    assert terminal in TERMINAL_STATES, "one of the 10 terminal marks must have won"
    assert len(set(messages)) == len(messages), "a mark was written twice"
    for index, state, outcome in outcomes:
        if outcome == "ok":
            if state in TERMINAL_STATES:
                assert state == terminal, f"worker {index} ended it {state} but the record says {terminal}"
            else:
                assert f"worker {index}" in messages, f"worker {index}'s {state} was acknowledged but lost"
        else:
            assert "illegal transition" in outcome, f"worker {index}: {outcome}"
            assert f"worker {index}" not in messages
    ok_live = sum(1 for _i, s, o in outcomes if o == "ok" and s not in TERMINAL_STATES)
    assert len(messages) == 1 + ok_live + 1  # opened, every acknowledged live mark, one terminal
