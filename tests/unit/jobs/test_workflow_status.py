"""workflows/runs.judge: a run's state from its steps' records and Jobs (`workflow status -o json`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubectl_tao.core.errors import GateError
from kubectl_tao.store.jobrecord import JobRecord, K8sRecord
from kubectl_tao.store.records import Record
from kubectl_tao.workflows.runs import judge


def row(step: str, index: int, state: str = "RUNNING", after: str | None = None, when: str | None = None,
        message: str = "", progress: dict[str, Any] | None = None) -> tuple[JobRecord, K8sRecord]:
    rec = JobRecord.from_stored({"id": f"id-{step}", "transitions": [{"state": state, "message": message}]})
    extra = {"workflow": "wf-1", "workflow_step": step, "workflow_index": index, "job_name": f"j-{step}",
             "workflow_after": after, "workflow_when": when, "namespace": "tao",
             **({"progress": progress} if progress is not None else {})}
    return rec, K8sRecord.from_stored(extra)


def job(name: str, *, suspend: bool = False, condition: str | None = None, active: int = 0,
        gate: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if gate is not None:
        meta["annotations"] = {"kubectl-tao.io/workflow-gate": json.dumps(gate)}
    status: dict[str, Any] = {"active": active}
    if condition:
        status["conditions"] = [{"type": condition, "status": "True"}]
    return {"metadata": meta, "spec": {"suspend": suspend}, "status": status}


ROWS = [row("train", 0), row("evaluate", 1, after="train", when="train.val_mAP >= 0.5"), row("export", 2,
                                                                                           after="evaluate")]


def test_a_running_chain_shows_the_held_steps_and_why() -> None:
    seen = judge(ROWS, {"j-train": job("j-train", active=1), "j-evaluate": job("j-evaluate", suspend=True),
                        "j-export": job("j-export", suspend=True)})
    assert seen["state"] == "RUNNING" and seen["name"] == "wf-1"
    assert [(s["name"], s["state"]) for s in seen["steps"]] == [("train", "RUNNING"), ("evaluate", "HELD"),
                                                                 ("export", "HELD")]
    assert seen["steps"][1]["reason"] == "held until train succeeds and train.val_mAP >= 0.5"
    assert set(seen) == {"name", "state", "reason", "steps"}
    assert {"name", "state", "job", "reason"} <= set(seen["steps"][0])


def test_every_step_complete_is_complete() -> None:
    seen = judge(ROWS, {f"j-{s}": job(f"j-{s}", condition="Complete") for s in ("train", "evaluate", "export")})
    assert seen["state"] == "COMPLETE" and seen["reason"] == ""


def test_a_failed_gate_is_its_own_end_state_naming_value_and_threshold() -> None:
    gate = [{"step": "evaluate", "gate": "train.val_mAP >= 0.5", "value": 0.31, "passed": False}]
    seen = judge(ROWS, {"j-train": job("j-train", condition="Complete", gate=gate)})
    assert seen["state"] == "GATE_FAILED"
    assert seen["reason"] == "step evaluate: gate train.val_mAP >= 0.5 failed: the value was 0.31"
    assert [s["state"] for s in seen["steps"]] == ["COMPLETE", "NOT_RUN", "NOT_RUN"]


def test_a_failed_step_ends_the_run_and_the_removed_steps_did_not_run() -> None:
    rows = [row("train", 0, state="ERROR", message="exit code 3"), *ROWS[1:]]
    seen = judge(rows, {"j-train": job("j-train", condition="Failed")})
    assert seen["state"] == "ERROR"
    assert seen["reason"] == "step train failed: exit code 3; `kubectl tao explain id-train` shows the cause"
    assert [s["state"] for s in seen["steps"]] == ["ERROR", "NOT_RUN", "NOT_RUN"]


def queued(item: dict[str, Any]) -> dict[str, Any]:
    """JOB as a queued step's: Kueue's queue label and the label naming its prebuilt Workload (named as the Job)."""
    name = item["metadata"]["name"]
    item["metadata"]["uid"] = f"uid-{name}"
    item["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team", "kueue.x-k8s.io/prebuilt-workload-name": name}
    return item


def workload(name: str, *, active: bool, conditions: list[dict[str, str]] | None = None,
             cluster_queue: str | None = None) -> dict[str, Any]:
    if conditions is None and not active:  # Kueue evicts every inactive Workload (workload_controller.go)
        conditions = [{"type": "Evicted", "status": "True", "reason": "Deactivated",
                       "message": "The workload is deactivated"}]
    status: dict[str, Any] = {"conditions": conditions or []}
    if cluster_queue:
        status["admission"] = {"clusterQueue": cluster_queue}
    return {"metadata": {"name": name, "labels": {"kueue.x-k8s.io/job-uid": f"uid-{name}",
                                                  "kubectl-tao.io/workflow": "wf-1"}},
            "spec": {"active": active, "queueName": "team"}, "status": status}


def test_a_queued_step_is_held_while_its_workload_is_inactive_and_waits_in_the_queue_once_released() -> None:
    jobs = {"j-train": queued(job("j-train", active=1)), "j-evaluate": queued(job("j-evaluate", suspend=True)),
            "j-export": queued(job("j-export", suspend=True))}
    workloads = {"j-evaluate": workload("j-evaluate", active=False), "j-export": workload("j-export", active=False)}
    seen = judge(ROWS, jobs, workloads)
    assert [s["state"] for s in seen["steps"]] == ["RUNNING", "HELD", "HELD"] and seen["state"] == "RUNNING"
    assert seen["steps"][1]["reason"] == "held until train succeeds and train.val_mAP >= 0.5"

    jobs["j-train"] = queued(job("j-train", condition="Complete"))
    pending = [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                "message": "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu"}]
    workloads["j-evaluate"] = workload("j-evaluate", active=True, conditions=pending)
    seen = judge(ROWS, jobs, workloads)
    assert [s["state"] for s in seen["steps"]] == ["COMPLETE", "PENDING", "HELD"] and seen["state"] == "RUNNING"
    assert seen["steps"][1]["reason"] == ("waiting for admission (Kueue LocalQueue team): couldn't assign flavors "
                                          "to pod set main: insufficient quota for nvidia.com/gpu")

    admitted = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": ""},
                {"type": "Admitted", "status": "True", "reason": "Admitted", "message": ""}]
    workloads["j-evaluate"] = workload("j-evaluate", active=True, conditions=admitted, cluster_queue="cq")
    seen = judge(ROWS, jobs, workloads)
    assert seen["steps"][1]["state"] == "PENDING"
    assert seen["steps"][1]["reason"] == ("admitted by Kueue (Kueue LocalQueue team, ClusterQueue cq); the Job is "
                                          "being started")


def test_a_released_queued_step_makes_its_gone_predecessor_complete_but_a_held_one_does_not() -> None:
    jobs = {"j-evaluate": queued(job("j-evaluate", suspend=True)), "j-export": queued(job("j-export", suspend=True))}
    held = {"j-evaluate": workload("j-evaluate", active=False), "j-export": workload("j-export", active=False)}
    assert [s["state"] for s in judge(ROWS, jobs, held)["steps"]] == ["NOT_RUN", "HELD", "HELD"]
    released = {**held, "j-evaluate": workload("j-evaluate", active=True)}
    assert [s["state"] for s in judge(ROWS, jobs, released)["steps"]] == ["COMPLETE", "PENDING", "HELD"]


def test_a_queued_step_whose_workload_is_missing_says_so() -> None:
    jobs = {"j-train": queued(job("j-train", suspend=True))}
    seen = judge(ROWS[:1], jobs, {})
    assert seen["steps"][0]["state"] == "PENDING"
    assert seen["steps"][0]["reason"].startswith("its Kueue Workload j-train is missing")


def test_a_canceled_run_is_canceled() -> None:
    rows = [row(s, i, state="CANCELED") for i, s in enumerate(("train", "evaluate", "export"))]
    assert judge(rows, {})["state"] == "CANCELED"


def test_list_shows_a_workflow_column_only_where_a_job_is_a_step(capsys: Any) -> None:
    from kubectl_tao.commands import present
    from kubectl_tao.jobs.track import Observation, Tracked

    def obs(extra: dict[str, Any]) -> Observation:
        tracked = Tracked(Record({"id": "real-run-1", "submitted_at": "2026-12-05T07:00:00Z"}),
                          {"namespace": "ns", "job_name": "real-run-1", "nodes": 1, "gpus": 1, **extra})
        return Observation(tracked, "RUNNING", "", "", None, None)

    present.show([obs({})], "table", False)
    assert "WORKFLOW" not in capsys.readouterr().out
    present.show([obs({"workflow": "chain-1a2b3c", "workflow_step": "train"}), obs({})], "table", False)
    header, first, second = capsys.readouterr().out.splitlines()[:3]
    assert header.split()[-1] == "WORKFLOW"
    assert first.split()[-1] == "chain-1a2b3c/train" and second.split()[-1] == "-"


def test_a_failed_job_whose_record_is_not_settled_yet_shows_the_jobs_condition() -> None:
    failed = job("j-train", condition="Failed")
    failed["status"]["conditions"][0].update(reason="BackoffLimitExceeded", message="Job has reached the specified "
                                             "backoff limit")
    rows = [row("train", 0, message="applied Job tao/j-train"), *ROWS[1:]]
    seen = judge(rows, {"j-train": failed})
    assert seen["reason"] == ("step train failed: BackoffLimitExceeded: Job has reached the specified backoff limit; "
                              "`kubectl tao explain id-train` shows the cause")


def test_a_passed_gate_and_the_kept_progress_show_on_the_step() -> None:
    gate = [{"step": "evaluate", "gate": "train.val_mAP >= 0.5", "value": 0.61, "passed": True}]
    kept = {"source": "status.json", "epoch": 80, "max_epoch": 80, "percent": 100.0, "kpi": {"val_mAP": 0.61}}
    rows = [row("train", 0, progress=kept), row("evaluate", 1, after="train", when="train.val_mAP >= 0.5")]
    seen = judge(rows, {"j-train": job("j-train", condition="Complete", gate=gate),
                        "j-evaluate": job("j-evaluate", active=1)})
    assert seen["steps"][1]["reason"] == "gate train.val_mAP >= 0.5 passed: the value was 0.61"
    assert seen["steps"][1]["state"] == "RUNNING" and seen["state"] == "RUNNING"
    assert (seen["steps"][0]["progress"], seen["steps"][0]["kpi"]) == ("epoch 80/80 100%", "val_mAP 0.61")
    assert (seen["steps"][1]["progress"], seen["steps"][1]["kpi"]) == ("", "")


def _answer_jobs(fake: Any, jobs: list[dict[str, Any]]) -> None:
    """The fake kubectl's answers to `workflow status`'s read of the run's Jobs and to each step's own read
    (`status`'s: the Job and its pods by the tao-job label), the later rules first."""
    from kubectl_tao.core import contract
    from kubectl_tao.workflows.objects import selector

    fake.rules.clear()
    for item in jobs:
        name = item["metadata"]["name"]
        fake.on(*contract.job_objects_read("tao", name), data={"items": [{"kind": "Job", **item}]})
    fake.on("get", "jobs", "-n", "tao", "-l", selector("wf-1"), data={"items": jobs})


def _three_steps(store: Any, mark: bool = True) -> dict[str, str]:
    from support.fake_kubectl import open_kubernetes_record

    ids = {}
    for index, (step, after) in enumerate((("train", None), ("evaluate", "train"), ("export", "evaluate"))):
        rec = open_kubernetes_record(store)
        ids[step] = rec.id
        store.update_extra(rec.id, workflow="wf-1", workflow_step=step, workflow_index=index, job_name=f"j-{step}",
                           workflow_after=after, namespace="tao")
        if mark:
            store.mark(rec.id, "RUNNING", message=f"applied Job tao/j-{step}", source="agent")
    return ids


def test_a_step_whose_job_is_gone_but_whose_successor_was_released_is_complete() -> None:
    # Nobody ran `kubectl tao status` on the steps: every record still says RUNNING, and the TTL removed the Jobs.
    seen = judge(ROWS, {"j-evaluate": job("j-evaluate", active=1), "j-export": job("j-export", suspend=True)})
    assert [s["state"] for s in seen["steps"]] == ["COMPLETE", "RUNNING", "HELD"] and seen["state"] == "RUNNING"
    rows = [*ROWS[:2], row("export", 2, state="COMPLETE", after="evaluate")]
    seen = judge(rows, {})
    assert [s["state"] for s in seen["steps"]] == ["COMPLETE", "COMPLETE", "COMPLETE"]
    assert seen["state"] == "COMPLETE" and seen["reason"] == ""


def test_a_held_successor_does_not_make_its_gone_predecessor_complete() -> None:
    seen = judge(ROWS, {"j-evaluate": job("j-evaluate", suspend=True), "j-export": job("j-export", suspend=True)})
    assert [s["state"] for s in seen["steps"]] == ["NOT_RUN", "HELD", "HELD"]


def test_status_writes_the_ending_of_a_finished_step_so_its_ttl_loses_nothing(
    tmp_path: Any, fake_kubectl: Any
) -> None:
    from kubectl_tao.k8s.kubectl import Kubectl
    from kubectl_tao.store.records import RecordStore
    from kubectl_tao.workflows.runs import resumable, status

    store = RecordStore(tmp_path)
    ids = _three_steps(store)
    done = [job(f"j-{s}", condition="Complete") for s in ("train", "evaluate", "export")]
    _answer_jobs(fake_kubectl, done)
    seen = status(Kubectl(), store, "wf-1")
    assert seen["state"] == "COMPLETE"
    assert [store.show(ids[s]).state for s in ("train", "evaluate", "export")] == ["COMPLETE"] * 3
    assert store.get_extra(ids["train"])["history"]["state"] == "COMPLETE"  # the history is captured
    _answer_jobs(fake_kubectl, [])  # the TTL removed every step Job
    later = status(Kubectl(), store, "wf-1")
    assert later["state"] == "COMPLETE" and [s["state"] for s in later["steps"]] == ["COMPLETE"] * 3
    with pytest.raises(GateError, match="nothing to resume"):
        resumable(later)


def test_status_closes_the_records_of_the_steps_a_failure_removed_and_remembers_why(
    tmp_path: Any, fake_kubectl: Any
) -> None:
    from kubectl_tao.k8s.kubectl import Kubectl
    from kubectl_tao.store.records import RecordStore
    from kubectl_tao.workflows.runs import status

    store = RecordStore(tmp_path)
    ids = _three_steps(store)
    failed = job("j-train", condition="Failed")
    failed["status"]["conditions"][0].update(reason="BackoffLimitExceeded",
                                             message="Job has reached the specified backoff limit")
    _answer_jobs(fake_kubectl, [failed])
    seen = status(Kubectl(), store, "wf-1")
    said = "step train failed: Job has reached the specified backoff limit"
    assert seen["state"] == "ERROR" and [s["state"] for s in seen["steps"]] == ["ERROR", "NOT_RUN", "NOT_RUN"]
    for step in ("evaluate", "export"):
        rec = store.show(ids[step])
        assert rec.state == "CANCELED"
        assert rec["transitions"][-1]["message"].startswith(f"not run: {said}")
    assert store.show(ids["train"]).state == "ERROR"  # settled as `status` settles a job, with the cause
    _answer_jobs(fake_kubectl, [])  # the TTL removed the failed Job too
    later = status(Kubectl(), store, "wf-1")
    assert later["state"] == "ERROR" and later["reason"].startswith(said)
    assert [s["state"] for s in later["steps"]] == ["ERROR", "NOT_RUN", "NOT_RUN"]


def test_status_closes_the_gated_step_and_those_after_it_after_a_failed_gate(
    tmp_path: Any, fake_kubectl: Any
) -> None:
    from kubectl_tao.k8s.kubectl import Kubectl
    from kubectl_tao.store.records import RecordStore
    from kubectl_tao.workflows.runs import status

    store = RecordStore(tmp_path)
    ids = _three_steps(store, mark=False)
    gate = [{"step": "evaluate", "gate": "train.val_mAP >= 0.9", "value": 0.7, "passed": False}]
    _answer_jobs(fake_kubectl, [job("j-train", condition="Complete", gate=gate)])
    seen = status(Kubectl(), store, "wf-1")
    assert seen["state"] == "GATE_FAILED"
    assert [store.show(ids[s]).state for s in ("train", "evaluate", "export")] == ["COMPLETE", "CANCELED", "CANCELED"]
    assert store.show(ids["evaluate"])["transitions"][-1]["message"] == (
        "not run: gate train.val_mAP >= 0.9 failed: the value was 0.7")


UID = "0b9b6c1e-1111-2222-3333-444455556666"


def test_status_gives_a_captured_step_job_its_ttl_back(tmp_path: Any, fake_kubectl: Any) -> None:
    from kubectl_tao.k8s.kubectl import Kubectl
    from kubectl_tao.store.records import RecordStore
    from kubectl_tao.workflows.runs import status

    store = RecordStore(tmp_path)
    ids = _three_steps(store)
    store.update_extra(ids["train"], keep_until_captured=True, ttl_seconds=600, job_uid=UID)
    done = job("j-train", condition="Complete")
    done["metadata"]["uid"] = UID
    _answer_jobs(fake_kubectl, [done, job("j-evaluate", active=1), job("j-export", suspend=True)])
    fake_kubectl.on("patch", "job", "j-train")
    assert status(Kubectl(), store, "wf-1")["state"] == "RUNNING"
    (patch,) = [c.argv for c in fake_kubectl.calls if "patch" in c.argv]
    body = json.loads(patch[patch.index("-p") + 1])
    assert body == {"spec": {"ttlSecondsAfterFinished": 600}, "metadata": {"uid": UID}}
    assert store.show(ids["train"]).state == "COMPLETE"
