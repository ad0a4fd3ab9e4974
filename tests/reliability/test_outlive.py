"""Records outlive the cluster's objects and the cluster's processes: one job finishes and its Job is
deleted by its TTL, another is running; etcd and the API server are stopped and started again (same data);
the running Job is then deleted by hand. `status` answers from the records: UNKNOWN for the job whose Job
vanished (its history of transitions intact), COMPLETE with the captured per-rank history for the other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cluster import RUN_SECONDS, STAY_RUNNING, Cluster, Tao, get, kubectl, wait_for

from .helpers import CLIENTS, ControlPlane, check_record, states, wait_gone

TIER_C = ["--image", "busybox:1.36", "--gpus", "0", "--storage-tier", "C", "--s3-output", "s3://tao-results/outlive"]


def _state(tao: Tao, record_id: str) -> str:
    result = tao("status", record_id, "-o", "json")
    assert result.returncode == 0, result.stderr
    return str(json.loads(result.stdout)["state"])


@pytest.mark.timeout(240)
def test_records_keep_their_history_across_job_deletion_and_a_control_plane_restart(
    cluster: Cluster, namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    tao = Tao(cluster, namespace, tmp_path / "state")
    running = tao("submit", *TIER_C, "--command", "sleep 3600", "--annotation", f"{STAY_RUNNING}=true")
    finished = tao(
        "submit", *TIER_C, "--command", "true", "--ttl-seconds", "2", "--annotation", f"{RUN_SECONDS}=1",
        "--wait", "--timeout", "90",
    )  # fmt: skip
    assert running.returncode == 0, running.stderr
    assert finished.returncode == 0, finished.stderr
    running_id, finished_id = running.stdout.split()[-1], finished.stdout.split()[-1]
    wait_for(lambda: _state(tao, running_id) == "RUNNING", timeout=60, message="the running job to run")
    _record, extra = check_record(tao.state_dir, finished_id)
    assert extra["history"]["ranks"][0]["exit_code"] == 0, "submit --wait captured the history"
    finished_job = extra["job_name"]
    wait_for(lambda: get("job", finished_job, namespace) is None, timeout=60, message="the TTL to delete the Job")

    # Stop the control plane (controllers, scheduler, API server, etcd) and start it again on the same data;
    # the nodes (kwok) keep running, as kubelets do.
    for component in (*CLIENTS, "kube-apiserver", "etcd"):
        control_plane.stop(component)
    down = tao("status", running_id, "--request-timeout=2s")
    assert down.returncode == 3 and "unreachable" in down.stderr
    control_plane.ensure_up()  # etcd first, then the API server and its clients

    running_job = check_record(tao.state_dir, running_id)[1]["job_name"]
    assert get("job", running_job, namespace) is not None, "etcd kept the running Job"
    # By hand: the Job, then its pods (not waiting on a garbage collector that is still syncing after the restart).
    kubectl("delete", "job", running_job, "--cascade=orphan", ns=namespace)
    kubectl("delete", "pods", "-l", f"batch.kubernetes.io/job-name={running_job}", "--timeout=60s", ns=namespace)

    assert _state(tao, running_id) == "UNKNOWN"
    record, extra = check_record(tao.state_dir, running_id)
    history = states(record)
    assert history[0] == "PENDING" and "RUNNING" in history and history[-1] == "UNKNOWN", history
    assert record["backend_ref"] == f"{namespace}/{running_job}" and extra["job_uid"]

    shown = json.loads(tao("status", finished_id, "-o", "json").stdout)
    assert shown["state"] == "COMPLETE" and any("gone" in note for note in shown["notes"])
    assert shown["history"]["ranks"][0]["exit_code"] == 0
    record, _extra = check_record(tao.state_dir, finished_id)
    assert states(record)[0] == "PENDING" and states(record)[-1] == "COMPLETE" and "RUNNING" in states(record)
    logs = tao("logs", finished_id)
    assert logs.returncode == 0 and "captured" in logs.stderr

    listed = {row["id"]: row for row in json.loads(tao("list", "-o", "json").stdout)["items"]}
    assert listed[running_id]["state"] == "UNKNOWN" and listed[finished_id]["state"] == "COMPLETE"
    assert tao("cancel", running_id).returncode == 0
    assert check_record(tao.state_dir, running_id)[0]["terminal_state"] == "CANCELED"
    wait_gone(namespace, timeout=60)
