"""On the real control plane: other tools' records stay theirs, a Job launched the reference's way is found by
its name, waiting never loses an ending to a short TTL, and cancel refuses a Job that ended unseen."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from support.cluster import REPO, RUN_SECONDS, SIMULATED_LOG_LINE, STAY_RUNNING, Tao, submitted_id, wait_for

pytestmark = pytest.mark.e2e

RECORD_TOOL = str(REPO / "scripts" / "tao_job_record.py")  # the reference's own script name


def record_tool(tao: Tao, *args: str) -> str:
    result = subprocess.run(
        [RECORD_TOOL, *args], env=tao.env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def job_gone(tao: Tao, name: str) -> bool:
    return tao.kubectl("get", "job", name, "--ignore-not-found", "-o", "name", check=False).stdout.strip() == ""


def hand_made_job(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    """A Job as a user would write it for the reference: none of kubectl-tao's labels or annotations."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", "echo hi"]}],
                },
            },
        },
    }


# ------------------------------------------------------------------ item 1


def test_records_kubectl_tao_did_not_launch(tao: Tao) -> None:
    # Another platform's record, RUNNING: every verb leaves the file byte-identical.
    slurm = record_tool(
        tao, "open", "--platform", "slurm", "--image", "img", "--network-arch", "dino", "--action", "train",
        "--storage-tier", "A", "--results-dir", "/lustre/results/x",
    )
    record_tool(tao, "mark", slurm, "--state", "RUNNING", "--backend-ref", "cluster-a/12345")
    slurm_file = tao.state_dir / "jobs" / f"{slurm}.json"
    before = slurm_file.read_bytes()

    # A kubernetes record launched the reference's way: record tool + a Job created by hand, named otherwise.
    ref = record_tool(
        tao, "open", "--platform", "kubernetes", "--image", "busybox", "--network-arch", "rtdetr",
        "--action", "train", "--storage-tier", "A", "--results-dir", "/workspace/results/ref",
    )
    name = f"by-hand-{ref.rsplit('-', 1)[1]}"
    tao.kubectl("create", "-f", "-", input=json.dumps(hand_made_job(name, {STAY_RUNNING: "true"})))
    record_tool(tao, "mark", ref, "--state", "RUNNING", "--backend-ref", f"{tao.namespace}/{name}")

    running = wait_for(
        lambda: (d := json.loads(tao("status", ref, "-o", "json").stdout))["state"] == "RUNNING" and d, 60,
        message="the hand-made Job to run",
    )
    assert running["job"] == name
    assert tao.record(ref)["transitions"][-1]["state"] == "RUNNING"

    listed = json.loads(tao("list", "-o", "json").stdout)["items"]
    states = {row["id"]: row["state"] for row in listed}
    assert states == {slurm: "RUNNING", ref: "RUNNING"}

    logs = tao("logs", ref)
    assert logs.returncode == 0 and SIMULATED_LOG_LINE in logs.stdout, logs.stderr

    for verb in (["status", slurm], ["cancel", slurm], ["logs", slurm], ["explain", slurm]):
        tao(*verb)
    assert slurm_file.read_bytes() == before
    refused = tao("cancel", slurm)
    assert refused.returncode == 1 and "runs on platform slurm" in refused.stderr

    cancel = tao("cancel", ref)
    assert cancel.returncode == 0, cancel.stderr
    assert job_gone(tao, name)
    assert tao.kubectl("get", "pods", "-l", f"job-name={name}", "-o", "name").stdout.strip() == ""
    assert tao.record(ref)["terminal_state"] == "CANCELED"
    assert slurm_file.read_bytes() == before


# ------------------------------------------------------------------ item 8


def test_submit_wait_sees_the_ending_even_with_ttl_zero(tao: Tao) -> None:
    result = tao.submit("--ttl-seconds", "0", "--wait", "--timeout", "120", annotations={RUN_SECONDS: "1"})
    record_id = submitted_id(result)
    assert "ended COMPLETE" in result.stderr
    record = tao.record(record_id)
    assert record["terminal_state"] == "COMPLETE"
    history = tao.extra(record_id)["history"]
    assert history["state"] == "COMPLETE" and history["ranks"][0]["log_tail"]
    # Once captured, the TTL the user asked for applies: the Job goes.
    wait_for(lambda: job_gone(tao, record_id), 60, message="TTL 0 to delete the Job after capture")


def test_status_watch_holds_the_ttl_of_a_running_job(tao: Tao) -> None:
    record_id = submitted_id(tao.submit("--ttl-seconds", "0", annotations={RUN_SECONDS: "6"}))
    watched = tao("status", record_id, "--watch", "--timeout", "120")
    assert watched.returncode == 0, watched.stderr
    assert tao.record(record_id)["terminal_state"] == "COMPLETE"
    assert tao.extra(record_id)["history"]["ranks"][0]["exit_code"] == 0
    wait_for(lambda: job_gone(tao, record_id), 60, message="the TTL to be given back and delete the Job")


# ------------------------------------------------------------------ item 9


def test_cancel_of_a_job_that_ended_unseen_is_refused_as_finished(tao: Tao) -> None:
    record_id = submitted_id(tao.submit(annotations={RUN_SECONDS: "1"}))
    conditions = "jsonpath={.status.conditions[*].type}"
    wait_for(
        lambda: "Complete" in tao.kubectl("get", "job", record_id, "-o", conditions).stdout,
        60,
        message="the Job to complete",
    )
    assert tao.record(record_id)["transitions"][-1]["state"] == "RUNNING"  # nobody polled it
    result = tao("cancel", record_id)
    assert result.returncode == 1
    assert "already finished (COMPLETE)" in result.stderr and result.stderr.count("\n") == 1
    assert tao.record(record_id)["terminal_state"] == "COMPLETE"
    assert tao.extra(record_id)["history"]["ranks"]
    assert not job_gone(tao, record_id)  # refused: nothing was deleted
