"""The verbs end to end on the real local control plane: every state, every gate refusal, nothing left behind."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

import pytest

# Tao and the `tao` fixture (conftest.py) are shared by every e2e module; the names stay importable from here.
from support.cluster import TAO_IMAGE, Tao, k8s_version, states, submitted_id  # noqa: F401

pytestmark = pytest.mark.e2e

CANARY = "hf_CanaryValue0123456789abcdefXYZ"


def wait_for(predicate: Callable[[], Any], timeout: float = 60, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


# ------------------------------------------------------------------ preflight


def test_preflight_passes_on_the_local_cluster(tao: Tao) -> None:
    result = tao("preflight", "--gpus", "8", "--nodes", "2", "--pvc", "tao-data", "--credentials")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"OK: cluster: reachable, Kubernetes {k8s_version()}" in result.stdout
    # 2 KWOK nodes x 8, plus the fake GPUs of the real nodes (tainted, but allocatable all the same).
    real = tao.kubectl("get", "nodes", "-l", "kubectl-tao.io/real-node", "-o", "name").stdout.split()
    gpus, nodes = 16 + int(os.environ.get("KUBECTL_TAO_REAL_NODE_GPUS", "8")) * len(real), 2 + len(real)
    assert f"OK: gpu-operator: {gpus} nvidia.com/gpu allocatable on {nodes} node(s)" in result.stdout
    jobs = "create, get, list and delete jobs.batch"
    assert f"OK: permissions: you may {jobs}; list pods; create, patch, list and delete secrets" in result.stdout
    assert "OK: references: PersistentVolumeClaim tao-data is Bound" in result.stdout


def test_preflight_reports_missing_pvc_and_capacity(tao: Tao) -> None:
    result = tao("preflight", "--gpus", "12", "--pvc", "nope")
    assert result.returncode == 1
    assert "MISSING: references: --pvc: PersistentVolumeClaim 'nope' not found" in result.stdout
    assert "MISSING: capacity:" in result.stdout


# ------------------------------------------------------------------ submit -> COMPLETE


def test_submit_wait_runs_to_complete_and_keeps_history(tao: Tao) -> None:
    result = tao.submit("--wait", "--timeout", "120", annotations={"kwok.kubectl-tao.io/run-seconds": "4"})
    record_id = submitted_id(result)
    record = tao.record(record_id)
    assert record["terminal_state"] == "COMPLETE"
    assert states(record)[0] == "PENDING" and record["transitions"][0]["message"] == "record opened before launch"
    assert "RUNNING" in states(record)
    assert record["backend_ref"] == f"{tao.namespace}/{record_id}"
    extra = tao.extra(record_id)
    assert extra["job_uid"] and extra["api_server"].startswith("https://127.0.0.1:")
    assert extra["history"]["ranks"][0]["exit_code"] == 0
    assert extra["history"]["ranks"][0]["node"].startswith("gpu-node-")
    logs = tao("logs", record_id)
    assert logs.returncode == 0 and logs.stdout.strip()
    status = tao("status", record_id, "-o", "json")
    assert json.loads(status.stdout)["state"] == "COMPLETE"


def test_ttl_deleted_job_is_unknown_but_record_and_logs_survive(tao: Tao) -> None:
    result = tao.submit(
        "--ttl-seconds", "1", "--wait", "--timeout", "120", annotations={"kwok.kubectl-tao.io/run-seconds": "1"}
    )
    record_id = submitted_id(result)
    wait_for(lambda: tao.kubectl("get", "job", record_id, check=False).returncode != 0, 60)
    status = tao("status", record_id, "-o", "json")
    data = json.loads(status.stdout)
    assert data["state"] == "COMPLETE"  # terminal in the record; the Job is gone
    assert "gone" in " ".join(data["notes"])
    logs = tao("logs", record_id)
    assert logs.returncode == 0 and "captured" in logs.stderr


# ------------------------------------------------------------------ states


def test_pending_on_image_pull_backoff_says_why(tao: Tao) -> None:
    record_id = submitted_id(tao.submit(annotations={"kwok.kubectl-tao.io/image-pull": "backoff"}))
    data = wait_for(
        lambda: (d := json.loads(tao("status", record_id, "-o", "json").stdout))["reason"] == "ImagePullBackOff" and d,
        60,
    )
    assert data["state"] == "PENDING"
    assert tao("cancel", record_id).returncode == 0


def test_running_then_cancel_leaves_nothing_behind(tao: Tao) -> None:
    record_id = submitted_id(
        tao.submit(
            "--env-file", "-", input=f"HF_TOKEN={CANARY}\n", annotations={"kwok.kubectl-tao.io/stay-running": "true"}
        )
    )
    wait_for(lambda: json.loads(tao("status", record_id, "-o", "json").stdout)["state"] == "RUNNING", 60)
    assert tao.kubectl("get", "secret", f"tao-creds-{record_id}", "-o", "name").returncode == 0
    result = tao("cancel", record_id)
    assert result.returncode == 0, result.stderr
    assert "canceled" in result.stdout
    assert tao.leftovers() == []
    assert tao.record(record_id)["terminal_state"] == "CANCELED"
    again = tao("cancel", record_id)
    assert again.returncode == 0 and "already canceled" in again.stdout


def test_oomkilled_is_error_err_infra(tao: Tao) -> None:
    result = tao.submit("--wait", "--timeout", "120", annotations={"kwok.kubectl-tao.io/oom": "true"})
    assert result.returncode == 1
    record_id = result.stdout.strip()
    record = tao.record(record_id)
    assert record["terminal_state"] == "ERROR" and record["err_class"] == "ERR_INFRA"
    assert "OOMKilled" in json.dumps(tao.extra(record_id)["history"])
    cancel = tao("cancel", record_id)
    assert cancel.returncode == 1 and "already finished (ERROR)" in cancel.stderr


def test_exit_code_is_error_err_program(tao: Tao) -> None:
    result = tao.submit("--wait", "--timeout", "120", annotations={"kwok.kubectl-tao.io/exit-code": "3"})
    record_id = result.stdout.strip()
    record = tao.record(record_id)
    assert record["terminal_state"] == "ERROR" and record["err_class"] == "ERR_PROGRAM"
    assert "exited with code 3" in record["transitions"][-1]["message"]


def test_job_deleted_by_hand_is_unknown_and_history_is_kept(tao: Tao) -> None:
    record_id = submitted_id(tao.submit(annotations={"kwok.kubectl-tao.io/stay-running": "true"}))
    wait_for(lambda: json.loads(tao("status", record_id, "-o", "json").stdout)["state"] == "RUNNING", 60)
    tao.kubectl("delete", "job", record_id, "--cascade=foreground")
    data = json.loads(tao("status", record_id, "-o", "json").stdout)
    assert data["state"] == "UNKNOWN"
    assert states(tao.record(record_id))[-1] == "UNKNOWN"
    assert "RUNNING" in states(tao.record(record_id))


# ------------------------------------------------------------------ gates


def test_capacity_gate_refuses_before_anything_is_created(tao: Tao) -> None:
    result = tao.submit(gpus=9)
    assert result.returncode == 4
    assert "never" in result.stderr and "gpu-node-" in result.stderr
    assert tao.records() == [] and tao.leftovers() == []


def test_missing_pvc_refused_before_the_record_opens(tao: Tao) -> None:
    result = tao("submit", "--image", "busybox", "--command", "true", "--gpus", "0", "--pvc", "absent")
    assert result.returncode == 1
    assert "PersistentVolumeClaim 'absent' not found" in result.stderr
    assert tao.records() == []


def test_server_dry_run_failure_is_refused_before_the_record_opens_and_leaves_nothing(tao: Tao) -> None:
    tao.kubectl("create", "quota", "no-jobs", "--hard=count/jobs.batch=0")
    result = tao.submit("--env-file", "-", input=f"HF_TOKEN={CANARY}\n")
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()[-1:]
    assert line.startswith("error: server dry run refused the job: ") and "exceeded quota" in line
    assert CANARY not in result.stderr
    assert tao.records() == [] and tao.leftovers() == []


def test_bad_input_exits_2_with_nothing_created(tao: Tao) -> None:
    result = tao("submit", "--image", "busybox", "--command", "true", "--storage-tier", "Z")
    assert result.returncode == 2 and result.stderr.startswith("error: --storage-tier")
    assert len(result.stderr.strip().splitlines()) == 1
    assert tao.records() == []


def test_dry_run_server_creates_nothing(tao: Tao) -> None:
    result = tao.submit("--dry-run=server", "--env-file", "-", input=f"HF_TOKEN={CANARY}\n")
    assert result.returncode == 0, result.stderr
    assert "\nkind: Job\n" in result.stdout and CANARY not in result.stdout
    assert tao.records() == [] and tao.leftovers() == []


# ------------------------------------------------------------------ secrets never leak


def test_canary_credential_never_leaves_the_secret(tao: Tao) -> None:
    result = tao.submit(
        "--env-file",
        "-",
        "--wait",
        "--timeout",
        "120",
        input=f"HF_TOKEN={CANARY}\n",
        annotations={"kwok.kubectl-tao.io/run-seconds": "1"},
    )
    record_id = submitted_id(result)
    assert CANARY not in result.stdout + result.stderr
    assert CANARY not in tao.trace.read_text()  # no kubectl argv carried it
    for path in (tao.state_dir / "jobs").rglob("*.json"):
        assert CANARY not in path.read_text()
    job_yaml = tao.kubectl("get", "job", record_id, "-o", "yaml").stdout
    assert CANARY not in job_yaml and f"tao-creds-{record_id}" in job_yaml
    assert CANARY not in tao("logs", record_id).stdout
    assert CANARY not in tao("status", record_id, "-o", "json").stdout


# ------------------------------------------------------------------ list and pins


def test_list_is_newest_first_with_a_constant_number_of_kubectl_calls(tao: Tao) -> None:
    ids = [submitted_id(tao.submit(gpus=0, annotations={"kwok.kubectl-tao.io/stay-running": "true"})) for _ in range(3)]
    tao.trace.write_text("")
    listing = tao("list", "-o", "json")
    calls_three = len(tao.trace.read_text().splitlines())
    rows = json.loads(listing.stdout)["items"]
    assert [r["id"] for r in rows] == list(reversed(ids))
    ids.append(submitted_id(tao.submit(gpus=0, annotations={"kwok.kubectl-tao.io/stay-running": "true"})))
    tao.trace.write_text("")
    tao("list")
    assert len(tao.trace.read_text().splitlines()) == calls_three == 2  # the Jobs and the pods, at once
    table = tao("list").stdout.splitlines()
    assert table[0].split()[:6] == ["NAME", "STATE", "GPUS", "NODES", "AGE", "REASON"]
    for record_id in ids:
        tao("cancel", record_id, "--no-wait")


def test_status_refuses_a_record_from_another_cluster(tao: Tao) -> None:
    record_id = submitted_id(tao.submit(gpus=0, annotations={"kwok.kubectl-tao.io/stay-running": "true"}))
    path = tao.state_dir / "jobs" / ".kubectl-tao" / f"{record_id}.json"
    extra = json.loads(path.read_text())
    extra["api_server"] = "https://elsewhere.example:6443"
    path.write_text(json.dumps(extra))
    for verb in ("status", "logs", "cancel"):
        result = tao(verb, record_id)
        assert result.returncode == 1 and "was submitted to https://elsewhere.example:6443" in result.stderr
    assert tao("cancel", record_id, "--force").returncode == 0


def test_status_refuses_a_job_with_another_uid(tao: Tao) -> None:
    record_id = submitted_id(tao.submit(gpus=0, annotations={"kwok.kubectl-tao.io/stay-running": "true"}))
    job = json.loads(tao.kubectl("get", "job", record_id, "-o", "json").stdout)
    tao.kubectl("delete", "job", record_id, "--cascade=foreground")
    for key in ("uid", "resourceVersion", "creationTimestamp"):
        job["metadata"].pop(key, None)
    job.pop("status", None)
    job["spec"]["selector"] = None
    job["spec"]["template"]["metadata"]["labels"] = {
        k: v
        for k, v in job["spec"]["template"]["metadata"]["labels"].items()
        if "controller-uid" not in k and k not in ("job-name", "batch.kubernetes.io/job-name")
    }
    job["spec"].pop("selector")
    tao.kubectl("create", "-f", "-", input=json.dumps(job))
    for verb in ("status", "cancel"):
        result = tao(verb, record_id)
        assert result.returncode == 1 and "different Job with the same name" in result.stderr
    assert tao.kubectl("get", "job", record_id).returncode == 0  # not deleted
    tao.kubectl("delete", "job", record_id, "--cascade=foreground")


# ------------------------------------------------------------------ watchdogs


def test_image_pull_watchdog_fails_fast(tao: Tao) -> None:
    result = tao.submit(
        "--wait",
        "--image-pull-timeout",
        "3",
        "--timeout",
        "90",
        annotations={"kwok.kubectl-tao.io/image-pull": "backoff"},
    )
    assert result.returncode == 1
    record_id = result.stdout.strip()
    record = tao.record(record_id)
    assert record["terminal_state"] == "ERROR"
    assert "image-pull-timeout" in record["transitions"][-1]["message"]
    assert tao.leftovers() == []


def test_pending_watchdog_fires_when_gpus_are_busy(tao: Tao) -> None:
    holders = [submitted_id(tao.submit(annotations={"kwok.kubectl-tao.io/stay-running": "true"})) for _ in range(2)]
    wait_for(lambda: all(json.loads(tao("status", h, "-o", "json").stdout)["state"] == "RUNNING" for h in holders), 60)
    result = tao.submit("--wait", "--pending-timeout", "3", "--timeout", "90")
    assert result.returncode == 1
    assert "queue" in result.stderr  # the fit verdict warned before launch
    record = tao.record(result.stdout.strip())
    assert record["terminal_state"] == "ERROR" and "pending-timeout" in record["transitions"][-1]["message"]
    assert "Insufficient nvidia.com/gpu" in record["transitions"][-1]["message"]
    for holder in holders:
        tao("cancel", holder, "--no-wait")
