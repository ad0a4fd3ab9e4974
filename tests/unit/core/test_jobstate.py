"""Job + pods + events JSON -> the state vocabulary, with reasons and per-rank detail."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from support import FIXTURES as FIXTURES_ROOT

from kubectl_tao.diagnosis import jobstate as st
from kubectl_tao.diagnosis.jobstate import job_status

FIXTURES = FIXTURES_ROOT / "k8s"


def load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def scenario(name: str) -> tuple[dict, dict, dict]:
    return load(f"{name}.job.json"), load(f"{name}.pods.json"), load(f"{name}.events.json")


def of(name: str) -> st.JobStatus:
    return job_status(*scenario(name))


def make_job(name: str = "j", *, completions: int = 1, conditions: list | None = None, suspend: bool = False,
             labels: dict | None = None, active: int = 0) -> dict:
    return {
        "metadata": {"name": name, "uid": "uid-1", "labels": labels or {}},
        "spec": {"completions": completions, "suspend": suspend},
        "status": {"active": active, "conditions": conditions or []},
    }


def make_pod(name: str, *, rank: int | None = None, phase: str = "Pending", node: str | None = "n0",
             state: dict | None = None, last: dict | None = None, init_state: dict | None = None,
             created: str = "2024-11-04T10:00:00Z", conditions: list | None = None, env: list | None = None,
             reason: str | None = None) -> dict:
    meta: dict[str, Any] = {"name": name, "creationTimestamp": created, "annotations": {}}
    if rank is not None:
        meta["annotations"][st.INDEX_KEY] = str(rank)
    spec: dict[str, Any] = {"containers": [{"name": "tao", "env": env or []}]}
    if node:
        spec["nodeName"] = node
    status: dict[str, Any] = {"phase": phase, "conditions": conditions or []}
    if state is not None:
        status["containerStatuses"] = [{"name": "tao", "state": state, "lastState": last or {}, "restartCount": 0}]
    if init_state is not None:
        status["initContainerStatuses"] = [{"name": "fetch", "state": init_state, "restartCount": 0}]
    if reason:
        status["reason"] = reason
    return {"metadata": meta, "spec": spec, "status": status}


def term(code: int, reason: str = "Error", finished: str = "2024-11-04T10:10:00Z", message: str | None = None) -> dict:
    out = {"terminated": {"exitCode": code, "reason": reason, "startedAt": "2024-11-04T10:01:00Z",
                          "finishedAt": finished}}
    if message:
        out["terminated"]["message"] = message
    return out


FAILED = [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
           "message": "Job has reached the specified backoff limit"}]


# ------------------------------------------------------------------------------------------- basics


def test_missing_job_is_unknown_and_points_at_the_record() -> None:
    result = job_status(None, [])
    assert (result.state, result.reason) == ("UNKNOWN", "NotFound")
    assert result.message == (
        "the Job is gone (deleted by hand or by ttlSecondsAfterFinished); the job record keeps its history"
    )


def test_running_pod_is_running_with_its_node() -> None:
    result = of("running")
    assert (result.state, result.reason, result.err_class) == ("RUNNING", "", None)
    assert result.message == "running on gpu-node-0"
    assert result.ranks[0].ready and result.ranks[0].phase == "Running"
    assert result.ranks[0].started_at == "2024-11-04T10:01:11Z"
    assert result.job_uid and result.active == 1 and result.ready == 1 and result.total == 1


def test_active_pending_pod_is_not_called_running() -> None:
    job, pods, events = scenario("pending-gpu")
    assert job["status"]["active"] == 1  # the reference's table would say RUNNING
    result = job_status(job, pods, events)
    assert result.state == "PENDING"
    assert result.reason == "Insufficient nvidia.com/gpu"
    assert result.message.startswith("0/3 nodes are available: 1 node(s) had untolerated taint")
    assert "2 Insufficient nvidia.com/gpu." in result.message


def test_complete_condition_is_complete() -> None:
    result = of("complete")
    assert (result.state, result.reason) == ("COMPLETE", "Completed")
    assert result.message == "1/1 rank succeeded"
    assert result.ranks[0].exit_code == 0
    assert st.is_terminal(result.state)


def test_success_criteria_met_alone_is_complete() -> None:
    job = make_job(conditions=[{"type": "SuccessCriteriaMet", "status": "True"}])
    assert job_status(job, []).state == "COMPLETE"


def test_false_conditions_are_ignored() -> None:
    job = make_job(conditions=[{"type": "Failed", "status": "False"}, {"type": "Complete", "status": "False"}])
    assert job_status(job, []).state == "PENDING"


@pytest.mark.parametrize(
    ("state", "terminal"),
    [("COMPLETE", True), ("ERROR", True), ("CANCELED", True), ("PENDING", False), ("RUNNING", False),
     ("UNKNOWN", False)],
)
def test_is_terminal(state: str, terminal: bool) -> None:
    assert st.is_terminal(state) is terminal


def test_to_dict_is_json_serialisable() -> None:
    data = of("multi-rendezvous").to_dict()
    assert data["ranks"][2]["exit_code"] == 88
    json.dumps(data)


# ------------------------------------------------------------------------------------------- failures


def test_oom_killed_is_infrastructure() -> None:
    result = of("oomkilled")
    assert (result.state, result.reason, result.err_class) == ("ERROR", "OOMKilled", "ERR_INFRA")
    assert result.message == "rank 0 was OOMKilled, exit code 137"
    assert result.first_failed_rank == 0


def test_bare_exit_137_is_read_as_an_oom_kill() -> None:
    pod = make_pod("j-a", phase="Failed", state=term(137, "Error"))
    result = job_status(make_job(conditions=FAILED), [pod])
    assert (result.reason, result.err_class) == ("OOMKilled", "ERR_INFRA")
    assert "SIGKILL" in result.message


def test_non_zero_exit_is_a_program_error() -> None:
    result = of("exit-code")
    assert (result.state, result.reason, result.err_class) == ("ERROR", "ExitCode", "ERR_PROGRAM")
    assert result.message == "rank 0 exited with code 1"
    # the last line of the termination message stays on the rank
    assert result.ranks[0].message.startswith("FileNotFoundError: [Errno 2]")


def test_pod_failure_policy_condition_is_refined_by_the_exit_code() -> None:
    cond = [{"type": "Failed", "status": "True", "reason": "PodFailurePolicy",
             "message": "Container tao for pod ns/j-a failed with exit code 42 matching FailJob rule at index 0"}]
    result = job_status(make_job(conditions=cond), [make_pod("j-a", phase="Failed", state=term(42))])
    assert (result.reason, result.err_class) == ("ExitCode", "ERR_PROGRAM")
    assert result.message == "rank 0 exited with code 42"


def test_failure_target_counts_as_error_before_failed_is_set() -> None:
    cond = [{"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded"}]
    result = job_status(make_job(conditions=cond), [make_pod("j-a", phase="Failed", state=term(3))])
    assert result.state == "ERROR"


def test_exit_88_is_a_rendezvous_timeout_naming_master_addr() -> None:
    result = of("multi-rendezvous")
    assert (result.state, result.reason, result.err_class) == ("ERROR", "RendezvousTimeout", "ERR_INFRA")
    assert result.message == (
        "rank 2 could not reach rank 0 at dino-train-2c3d4e-0.dino-train-2c3d4e:29500 (first of 4 failed ranks)"
    )


def test_exit_88_prefers_the_pods_own_termination_message() -> None:
    said = "starting rendezvous\nrendezvous: j-0.j:29500 unreachable after 600s\n"
    pod = make_pod("j-a", phase="Failed", state=term(88, message=said))
    result = job_status(make_job(conditions=FAILED), [pod])
    assert result.message == "rank 0: rendezvous: j-0.j:29500 unreachable after 600s"


def test_first_failed_rank_is_the_earliest_finish_not_the_lowest_rank() -> None:
    result = of("multi-rendezvous")
    assert result.first_failed_rank == 2
    assert [r.rank for r in result.ranks] == [0, 1, 2, 3]
    assert [r.exit_code for r in result.ranks] == [1, 1, 88, 143]
    assert result.total == 4 and result.failed == 4


def test_evicted_pod_is_infrastructure_and_keeps_the_kubelet_text() -> None:
    result = of("evicted")
    assert (result.reason, result.err_class) == ("Evicted", "ERR_INFRA")
    assert result.message.startswith("rank 0 was evicted: The node was low on resource: memory.")


def test_preempted_pod_via_disruption_target_is_infrastructure() -> None:
    pod = make_pod("j-a", phase="Failed", state=term(143),
                   conditions=[{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                                "message": "Preempted by a pod on node n0"}])
    result = job_status(make_job(conditions=FAILED), [pod])
    assert (result.reason, result.err_class) == ("Preempted", "ERR_INFRA")


def test_deadline_exceeded_wins_over_the_sigkill_it_causes() -> None:
    cond = [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded",
             "message": "Job was active longer than specified deadline"}]
    result = job_status(make_job(conditions=cond), [make_pod("j-a", phase="Failed", state=term(137))])
    assert (result.reason, result.err_class) == ("DeadlineExceeded", "ERR_INFRA")
    assert of("deadline").message == "Job was active longer than specified deadline"


def test_failed_job_without_pods_keeps_the_condition_and_no_class() -> None:
    result = job_status(make_job(conditions=FAILED), [])
    assert (result.state, result.reason, result.err_class) == ("ERROR", "BackoffLimitExceeded", None)
    assert result.message == "Job has reached the specified backoff limit"


def test_failed_init_container_is_named() -> None:
    pod = make_pod("j-a", phase="Failed", init_state=term(1), state={"waiting": {"reason": "PodInitializing"}})
    result = job_status(make_job(conditions=FAILED), [pod])
    assert result.message == "rank 0 exited with code 1 in init container fetch"


# ------------------------------------------------------------------------------------------- pending


def test_image_pull_back_off() -> None:
    result = of("imagepull")
    assert (result.state, result.reason) == ("PENDING", "ImagePullBackOff")
    assert result.message == 'Back-off pulling image "nvcr.io/nvidia/tao/tao-toolkit:5.5.0-pyt"'


def test_missing_pvc_from_the_scheduler_condition() -> None:
    result = of("pvc-missing")
    assert (result.state, result.reason) == ("PENDING", "PVCNotFound")
    assert 'persistentvolumeclaim "tao-data" not found' in result.message


def test_create_container_config_error_shows_the_kubelet_text() -> None:
    result = of("config-error")
    assert (result.reason, result.message) == (
        "CreateContainerConfigError", 'secret "tao-creds-dino-train-6e7f80" not found'
    )


def test_suspended_by_kueue_waits_for_admission() -> None:
    result = of("kueue-suspended")
    assert (result.state, result.reason) == ("PENDING", "Suspended")
    assert result.message == "waiting for admission (Kueue LocalQueue team-a)"


def test_suspended_without_kueue() -> None:
    result = job_status(make_job(suspend=True), [])
    assert result.reason == "Suspended"
    assert "spec.suspend" in result.message


def test_no_pods_and_no_events() -> None:
    result = of("no-pods")
    assert (result.state, result.reason, result.message) == ("PENDING", "NoPods", "no pods created yet")


def test_failed_create_quota_event_explains_missing_pods() -> None:
    result = of("quota-exceeded")
    assert result.reason == "QuotaExceeded"
    assert "exceeded quota: gpu-quota" in result.message


def test_init_container_running_is_initializing() -> None:
    result = of("initializing")
    assert (result.state, result.reason) == ("PENDING", "Initializing")
    assert result.message == "rank 0 is running its init containers on gpu-node-1"


def test_scheduled_pod_without_statuses_is_container_creating() -> None:
    pod = make_pod("j-a", state={"waiting": {"reason": "ContainerCreating"}})
    result = job_status(make_job(), [pod])
    assert (result.reason, result.message) == ("ContainerCreating", "rank 0 is starting on n0")


def test_a_stale_failed_scheduling_event_does_not_outlive_scheduling() -> None:
    pod = make_pod("j-abcde", state={"waiting": {"reason": "ContainerCreating"}})
    events = [{"type": "Warning", "reason": "FailedScheduling", "message": "0/1 nodes are available: 1 Insufficient "
               "nvidia.com/gpu.", "involvedObject": {"kind": "Pod", "name": "j-abcde"},
               "lastTimestamp": "2024-11-04T10:00:00Z"}]
    assert job_status(make_job(), [pod], events).reason == "ContainerCreating"


def test_failed_mount_event_for_a_missing_claim() -> None:
    pod = make_pod("j-abcde", state={"waiting": {"reason": "ContainerCreating"}})
    events = {"items": [{"type": "Warning", "reason": "FailedMount",
                         "involvedObject": {"kind": "Pod", "name": "j-abcde"},
                         "message": 'Unable to attach or mount volumes: persistentvolumeclaim "data" not found',
                         "lastTimestamp": "2024-11-04T10:00:05Z"}]}
    assert job_status(make_job(), [pod], events).reason == "PVCNotFound"


def test_events_k8s_io_format_is_read_too() -> None:
    pod = make_pod("j-abcde", node=None)
    events = [{"type": "Warning", "reason": "FailedScheduling", "regarding": {"kind": "Pod", "name": "j-abcde"},
               "note": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
               "eventTime": "2024-11-04T10:00:05.123456Z"}]
    result = job_status(make_job(), [pod], events)
    assert (result.reason, result.message) == (
        "Insufficient nvidia.com/gpu", "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    )


def test_events_of_other_jobs_are_ignored() -> None:
    events = [{"type": "Warning", "reason": "FailedCreate", "message": "exceeded quota",
               "involvedObject": {"kind": "Job", "name": "other"}}]
    assert job_status(make_job("j"), [], events).reason == "NoPods"


def test_waiting_problem_beats_an_unschedulable_sibling() -> None:
    unsched = make_pod("j-1-aaaaa", rank=1, node=None,
                       conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                    "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}])
    pulling = make_pod("j-0-bbbbb", rank=0, state={"waiting": {"reason": "ErrImagePull", "message": "pull failed"}})
    result = job_status(make_job(completions=2), [unsched, pulling])
    assert (result.reason, result.message) == ("ErrImagePull", "rank 0: pull failed")


def test_unbound_claim_is_its_own_reason() -> None:
    assert st.unschedulable_reason(
        "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    ) == "PVCNotBound"
    assert st.unschedulable_reason("0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.") \
        == "Unschedulable"


def test_scheduling_gates_are_reported() -> None:
    gated = {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
             "message": "Scheduling is blocked due to non-empty scheduling gates"}
    pod = make_pod("j-a", node=None, conditions=[gated])
    assert job_status(make_job(), [pod]).reason == "SchedulingGated"


def test_init_container_image_pull_problem_is_seen() -> None:
    pod = make_pod("j-a", init_state={"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling"}},
                   state={"waiting": {"reason": "PodInitializing"}})
    assert job_status(make_job(), [pod]).reason == "ImagePullBackOff"


# ------------------------------------------------------------------------------------------- multi-node


def test_partial_start_is_running_and_names_the_waiting_rank() -> None:
    result = of("multi-partial")
    assert (result.state, result.reason) == ("RUNNING", "1/2 ranks running")
    assert result.message.startswith("rank 1: 0/3 nodes are available: 1 Insufficient nvidia.com/gpu")


def test_latest_pod_per_rank_is_shown() -> None:
    old = make_pod("j-0-old", rank=0, phase="Failed", state=term(1), created="2024-11-04T10:00:00Z")
    new = make_pod("j-0-new", rank=0, phase="Running", state={"running": {"startedAt": "2024-11-04T10:20:00Z"}},
                   created="2024-11-04T10:15:00Z")
    result = job_status(make_job(), [new, old])
    assert [r.pod for r in result.ranks] == ["j-0-new"]
    assert result.state == "RUNNING"
    assert result.first_failed_rank == 0


def test_rank_from_the_index_label_when_the_annotation_is_absent() -> None:
    pod = make_pod("j-3-x")
    pod["metadata"]["labels"] = {st.INDEX_KEY: "3"}
    assert st.pod_rank(pod) == 3
    assert st.pod_rank(make_pod("j-x")) == 0


# ------------------------------------------------------------------------------------------- odd corners


def test_failed_pod_awaiting_replacement_is_retrying() -> None:
    result = job_status(make_job(), [make_pod("j-a", phase="Failed", state=term(2))])
    assert (result.state, result.reason) == ("PENDING", "Retrying")
    assert "exit code 2" in result.message


def test_all_succeeded_before_the_condition_is_finishing() -> None:
    result = job_status(make_job(), [make_pod("j-a", phase="Succeeded", state=term(0, "Completed"))])
    assert (result.state, result.reason) == ("RUNNING", "Finishing")


def test_a_rank_that_failed_then_succeeded_is_finishing_not_retrying() -> None:
    old = make_pod("j-old", phase="Failed", state=term(1), created="2024-11-04T10:00:00Z")
    new = make_pod("j-new", phase="Succeeded", state=term(0, "Completed"), created="2024-11-04T10:05:00Z")
    result = job_status(make_job(), [old, new])
    assert (result.state, result.reason) == ("RUNNING", "Finishing")
    assert result.first_failed_rank == 0


def test_pod_phase_unknown_is_unknown() -> None:
    result = job_status(make_job(), [make_pod("j-a", phase="Unknown")])
    assert (result.state, result.reason) == ("UNKNOWN", "PodUnknown")


def test_job_being_deleted_says_so() -> None:
    job = make_job()
    job["metadata"]["deletionTimestamp"] = "2024-11-04T10:30:00Z"
    running = make_pod("j-a", phase="Running", state={"running": {"startedAt": "2024-11-04T10:01:00Z"}})
    result = job_status(job, [running])
    assert (result.state, result.reason) == ("RUNNING", "Deleting")


def test_restart_counts_and_last_state_exit_code() -> None:
    pod = make_pod("j-a", phase="Running", state={"waiting": {"reason": "CrashLoopBackOff"}}, last=term(3))
    pod["status"]["containerStatuses"][0]["restartCount"] = 4
    rank = st.rank_status(pod)
    assert (rank.exit_code, rank.restarts) == (3, 4)


def test_inputs_are_not_mutated() -> None:
    job, pods, events = scenario("multi-rendezvous")
    before = copy.deepcopy((job, pods, events))
    job_status(job, pods, events)
    assert (job, pods, events) == before


def test_parse_scheduler_message_counts_parts_and_drops_the_preemption_tail() -> None:
    parts = st.parse_scheduler_message(load("pending-gpu.pods.json")["items"][0]["status"]["conditions"][0]["message"])
    assert parts == {
        "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }": 1,
        "Insufficient nvidia.com/gpu": 2,
    }
    assert st.parse_scheduler_message("no pattern here") == {}


UPLOAD_ENV = [{"name": "TAO_UPLOAD_URI", "value": "s3://bkt/out/run-1/"}]


def test_exit_89_of_a_tier_c_pod_is_a_failed_upload() -> None:
    pod = make_pod("j-a", phase="Failed", state=term(89), env=UPLOAD_ENV)
    result = job_status(make_job(conditions=FAILED), [pod])
    assert (result.state, result.reason, result.err_class) == ("ERROR", "UploadFailed", "ERR_INFRA")
    assert result.message == (
        "rank 0's command succeeded, but uploading its results to s3://bkt/out/run-1/ failed (exit 89)"
    )


def test_exit_89_without_an_upload_is_the_programs_own_exit_code() -> None:
    result = job_status(make_job(conditions=FAILED), [make_pod("j-a", phase="Failed", state=term(89))])
    assert (result.reason, result.err_class) == ("ExitCode", "ERR_PROGRAM")


def test_exit_86_of_a_watched_pod_is_a_stall_the_watch_ended() -> None:
    env = [{"name": "TAO_STALL_TIMEOUT", "value": "1800"}]
    result = job_status(make_job(conditions=FAILED), [make_pod("j-a", phase="Failed", state=term(86), env=env)])
    assert (result.state, result.reason, result.err_class) == ("ERROR", "Stalled", "ERR_INFRA")
    assert result.message == "rank 0 made no progress for --stall-timeout (1800s): the stall watch ended it (exit 86)"


def test_exit_86_without_the_watch_is_the_programs_own_exit_code() -> None:
    result = job_status(make_job(conditions=FAILED), [make_pod("j-a", phase="Failed", state=term(86))])
    assert (result.reason, result.err_class) == ("ExitCode", "ERR_PROGRAM")


@pytest.mark.parametrize(
    "name", ["complete", "config-error", "deadline", "evicted", "exit-code", "imagepull", "multi-partial", "running"],
)
def test_to_dict_names_every_field_in_order_and_copies_what_is_mutable(name: str) -> None:
    """`-o json` of status and list carries these keys; a field added to JobStatus or RankStatus shows here."""
    status = of(name)
    status.gang = {"mechanism": "native", "groups": [{"name": "g", "members": [1, 2]}]}
    status.kueue = {"queue": "q", "flavors": {"gpu": ["a100"]}}
    got = status.to_dict()
    assert list(got) == [
        "state", "reason", "message", "err_class", "ranks", "active", "ready", "succeeded", "failed", "total",
        "first_failed_rank", "job_uid", "gang", "kueue",
    ]
    assert all(got[key] == getattr(status, key) for key in got if key != "ranks")
    assert got["gang"] is not status.gang and got["gang"]["groups"][0] is not status.gang["groups"][0]
    assert got["kueue"] is not status.kueue
    rank_keys = ["rank", "pod", "node", "phase", "ready", "exit_code", "reason", "message", "started_at",
                 "finished_at", "restarts"]
    assert [list(r) for r in got["ranks"]] == [rank_keys] * len(status.ranks)
    assert got["ranks"] == [{key: getattr(r, key) for key in rank_keys} for r in status.ranks]
