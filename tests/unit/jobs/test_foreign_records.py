"""Records kubectl-tao did not launch: another platform's stay byte-identical whatever verb runs; a Kubernetes
Job launched the reference's way (record tool + a Job without kubectl-tao's labels) is found by its
backend_ref name and its pods by job-name=, never by assuming the Kubernetes name equals the record id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.cluster import TAO_IMAGE
from support.fake_kubectl import FakeKubectl, fixture_json, open_kubernetes_record

from kubectl_tao.store.records import RecordStore

# The reference's own Job: named by whoever created it, with none of kubectl-tao's labels.
JOB_NAME = "dino-train-3f9a1c"


def _unlabelled(item: dict[str, Any]) -> dict[str, Any]:
    labels = item["metadata"].get("labels") or {}
    ours = ("tao-job", "app.kubernetes.io/managed-by")
    item["metadata"]["labels"] = {k: v for k, v in labels.items() if k not in ours}
    return item


def _slurm_record() -> tuple[RecordStore, str]:
    store = RecordStore()
    record = open_kubernetes_record(store, platform="slurm", image=TAO_IMAGE, results_dir="/lustre/results/x")
    store.mark(record.id, "RUNNING", message="sbatch accepted", backend_ref="cluster-a/12345")
    return store, record.id


def _reference_record() -> tuple[RecordStore, str]:
    """Opened and marked RUNNING by the record tool, exactly as the reference's submit does."""
    store = RecordStore()
    record = open_kubernetes_record(store, image=TAO_IMAGE, network_arch="rtdetr")
    store.mark(record.id, "RUNNING", message="applied", backend_ref=f"tao-jobs/{JOB_NAME}")
    return store, record.id


def _files(store: RecordStore, record_id: str) -> tuple[bytes, bool]:
    return store.path(record_id).read_bytes(), store.extra_path(record_id).exists()


# ------------------------------------------------------------------ another platform's records


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["list"], 0),
        (["list", "-o", "json"], 0),
        (["status"], 0),
        (["status", "-o", "json"], 0),
        (["status", "--watch"], 1),
        (["cancel"], 1),
        (["logs"], 1),
    ],
)
def test_every_verb_leaves_a_slurm_record_byte_identical(
    cli: Any, fake_kubectl: FakeKubectl, argv: list[str], code: int
) -> None:
    store, record_id = _slurm_record()
    before = _files(store, record_id)
    args = [*argv, record_id] if argv[0] != "list" else argv
    result, out, err = cli(*args)
    assert result == code, err
    assert _files(store, record_id) == before
    assert fake_kubectl.calls == []  # cluster-a/12345 is not a namespace/Job: nothing was looked up
    if code:
        assert err.count("\n") == 1 and "runs on platform slurm" in err and "that platform's own tools" in err
    else:
        assert record_id in out and "RUNNING" in out and "UNKNOWN" not in out


def test_status_of_a_slurm_record_says_whose_it_is(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _, record_id = _slurm_record()
    code, out, _ = cli("status", record_id, "-o", "json")
    data = json.loads(out)
    assert code == 0 and data["state"] == "RUNNING"
    assert any("platform slurm" in note for note in data["notes"])


# ------------------------------------------------------------------ a Job launched the reference's way


def _answer_running(fake: FakeKubectl) -> None:
    fake.on("get", "job", JOB_NAME, data=_unlabelled(fixture_json("running.job.json")))
    pods = fixture_json("running.pods.json")
    pods["items"] = [_unlabelled(p) for p in pods["items"]]
    fake.on("get", "pods", data=pods)


def test_status_finds_the_reference_job_by_its_backend_ref_name(cli: Any, fake_kubectl: FakeKubectl) -> None:
    store, record_id = _reference_record()
    assert record_id != JOB_NAME
    _answer_running(fake_kubectl)
    code, out, err = cli("status", record_id, "-o", "json")
    assert code == 0, err
    assert json.loads(out)["state"] == "RUNNING"
    assert store.show(record_id)["transitions"][-1]["state"] == "RUNNING"  # not UNKNOWN
    argvs = fake_kubectl.argvs()
    job_query = next(a for a in argvs if "job" in a)
    assert job_query[job_query.index("job") + 1] == JOB_NAME  # by name: the Job carries no tao-job label
    pod_query = next(a for a in argvs if "pods" in a)
    assert f"job-name={JOB_NAME}" in pod_query


def test_list_shows_the_reference_job_live(cli: Any, fake_kubectl: FakeKubectl) -> None:
    store, record_id = _reference_record()
    _answer_running(fake_kubectl)
    code, out, err = cli("list", "-o", "json")
    assert code == 0, err
    rows = {row["id"]: row for row in json.loads(out)["items"]}
    assert rows[record_id]["state"] == "RUNNING"
    assert store.show(record_id)["transitions"][-1]["state"] == "RUNNING"


def test_logs_select_the_reference_pods_by_job_name_with_the_default_tail(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _, record_id = _reference_record()
    _answer_running(fake_kubectl)
    fake_kubectl.on("logs", stdout=f"[pod/{JOB_NAME}-x7k2p/main] step 1\n")
    code, out, err = cli("logs", record_id)
    assert code == 0, err
    assert out == "step 1\n"
    logs = next(a for a in fake_kubectl.argvs() if "logs" in a)
    assert f"job-name={JOB_NAME}" in logs and "--tail=200" in logs
    assert "-c" not in logs  # a Job made elsewhere: its default container, whatever its name


def test_cancel_deletes_the_reference_job_in_the_foreground_and_marks_canceled(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    store, record_id = _reference_record()
    _answer_running(fake_kubectl)
    fake_kubectl.on("delete", "--raw", stdout="")
    code, _, err = cli("cancel", record_id, "--wait=false")
    assert code == 0, err
    deletes = [c for c in fake_kubectl.calls if "delete" in c.argv]
    assert len(deletes) == 1  # the Job only: no kubectl-tao Service or Secret to look for
    assert f"/apis/batch/v1/namespaces/tao-jobs/jobs/{JOB_NAME}" in deletes[0].argv
    body = json.loads(deletes[0].stdin or "{}")
    assert body["propagationPolicy"] == "Foreground" and "preconditions" not in body
    assert store.show(record_id)["terminal_state"] == "CANCELED"


def test_a_reference_job_that_ended_unseen_is_settled_from_job_name_pods(
    tao_env: Path, fake_kubectl: FakeKubectl
) -> None:
    from kubectl_tao.jobs import track as tracking
    from kubectl_tao.k8s.kubectl import Kubectl

    store, record_id = _reference_record()
    job = _unlabelled(fixture_json("complete.job.json"))
    job["metadata"]["name"] = JOB_NAME
    fake_kubectl.on("get", "job", JOB_NAME, data=job)
    fake_kubectl.on("get", "pods", data=fixture_json("complete.pods.json"))
    fake_kubectl.on("logs", stdout="")
    obs = tracking.observe(Kubectl(), store, tracking.load(store, record_id), server="https://127.0.0.1:6443")
    assert obs.state == "COMPLETE"
    assert store.show(record_id)["terminal_state"] == "COMPLETE"
    logs = next(a for a in fake_kubectl.argvs() if "logs" in a)
    assert f"job-name={JOB_NAME}" in logs


def test_explain_reads_a_slurm_record_without_the_cluster(cli: Any, fake_kubectl: FakeKubectl) -> None:
    store, record_id = _slurm_record()
    before = _files(store, record_id)
    _, out, _ = cli("explain", record_id, "-o", "json")
    assert any("platform slurm" in note for note in json.loads(out)["notes"])
    assert fake_kubectl.calls == [] and _files(store, record_id) == before


def test_explain_finds_the_reference_job_by_name(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _, record_id = _reference_record()
    _answer_running(fake_kubectl)
    fake_kubectl.on("get", "events", data={"kind": "List", "items": []})
    code, out, err = cli("explain", record_id, "-o", "json")
    data = json.loads(out)
    assert data["source"] == "cluster" and data["state"] == "RUNNING", err
    assert code == 0 and data["job"] == JOB_NAME
