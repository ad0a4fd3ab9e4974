"""Kueue's account of a queued Job (kueue.py), the ClusterQueue quota (quota.py: queue_quota) and what status,
explain, fit and submit make of them, over objects recorded from the real Kueue v0.17.0 of the local cluster
(tests/fixtures/k8s/kueue-*.json: ClusterQueue team-cq of 16 nvidia.com/gpu in flavor default, 8 reserved by
one admitted 1 x 8 job; a 2 x 8 job waiting in LocalQueue team)."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl, fixture_json, review_answer

from kubectl_tao.diagnosis import kueue
from kubectl_tao.diagnosis.diagnose import explain
from kubectl_tao.diagnosis.jobstate import job_status
from kubectl_tao.gates.gpufit import NodeGpus, fit
from kubectl_tao.gates.quota import FlavorGpus, QueueQuota, queue_quota
from kubectl_tao.store.records import RecordStore

SERVER = "https://127.0.0.1:6443"

PENDING_MESSAGE = (
    "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor default, "
    "8 more needed"
)


def queued_job() -> dict[str, Any]:
    job: dict[str, Any] = fixture_json("kueue-queued.job.json")
    return job


def listed(*names: str) -> dict[str, Any]:
    return {"kind": "List", "items": [fixture_json(name) for name in names]}


def quota() -> QueueQuota:
    found = queue_quota(fixture_json("kueue-localqueue.json"), fixture_json("kueue-clusterqueue.json"))
    assert found is not None
    return found


# ------------------------------------------------------------------------------------------- the Workload


def test_the_pending_workload_is_kueues_reason_in_its_own_words() -> None:
    job = queued_job()
    adm = kueue.admission(job, listed("kueue-workload-admitted.json", "kueue-workload-pending.json"))
    assert adm is not None
    assert (adm.state, adm.local_queue, adm.reason, adm.message) == ("pending", "team", "Pending", PENDING_MESSAGE)
    assert adm.workload == "job-dino-train-630dd6-e5674"  # the one whose job-uid label is this Job's UID
    status = job_status(job, [], admission=adm)
    assert (status.state, status.reason) == ("PENDING", "Suspended")
    assert status.message == f"waiting for admission (Kueue LocalQueue team): {PENDING_MESSAGE}"
    assert status.kueue == adm.to_dict()


def test_without_the_workload_read_the_label_alone_says_kueue_holds_it() -> None:
    status = job_status(queued_job(), [])
    assert status.message == "waiting for admission (Kueue LocalQueue team)" and status.kueue is None


def test_no_workload_yet() -> None:
    adm = kueue.admission(queued_job(), {"kind": "List", "items": []})
    assert adm is not None and adm.state == "no-workload"
    assert job_status(queued_job(), [], admission=adm).message == (
        "waiting for admission (Kueue LocalQueue team): Kueue has made no Workload for the Job yet"
    )


def test_inadmissible_is_a_reason_of_its_own() -> None:
    adm = kueue.admission(queued_job(), listed("kueue-workload-inadmissible.json"))
    status = job_status(queued_job(), [], admission=adm)
    assert (status.state, status.reason) == ("PENDING", "Inadmissible")
    assert status.message == "Kueue cannot admit the job (Kueue LocalQueue team): LocalQueue team doesn't exist"


def test_admitted_while_the_job_is_still_suspended() -> None:
    workload = copy.deepcopy(fixture_json("kueue-workload-admitted.json"))
    workload["metadata"]["labels"][kueue.JOB_UID_LABEL] = queued_job()["metadata"]["uid"]
    adm = kueue.admission(queued_job(), {"items": [workload]})
    assert adm is not None and (adm.state, adm.cluster_queue) == ("admitted", "team-cq")
    assert adm.line() == "admitted by Kueue (Kueue LocalQueue team, ClusterQueue team-cq); the Job is being started"


def test_evicted_and_deactivated_workloads() -> None:
    workload = copy.deepcopy(fixture_json("kueue-workload-pending.json"))
    workload["status"]["conditions"].append(
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "Preempted to accommodate a workload"}
    )
    adm = kueue.admission(queued_job(), {"items": [workload]})
    assert adm is not None and adm.state == "evicted"
    assert "evicted by Kueue (Preempted): Preempted to accommodate a workload" in adm.line()
    workload["spec"]["active"] = False
    adm = kueue.admission(queued_job(), {"items": [workload]})
    assert adm is not None and (adm.state, adm.status_reason) == ("deactivated", "Deactivated")


def test_a_workflow_steps_inactive_workload_is_held_by_its_workflow_not_deactivated_by_kueue() -> None:
    from kubectl_tao.diagnosis.diagnose import kueue_findings

    workload = copy.deepcopy(fixture_json("kueue-workload-pending.json"))
    workload["spec"]["active"] = False
    workload["metadata"].setdefault("labels", {})["kubectl-tao.io/workflow"] = "chain-1a2b3c"
    adm = kueue.admission(queued_job(), {"items": [workload]})
    assert adm is not None and adm.state == "workflow-held"
    assert adm.line().startswith("held by its workflow: Workload ")
    assert adm.line().endswith("stays inactive until the step before it succeeds and activates it")
    (finding,) = kueue_findings(adm.to_dict(), None, "tao", "j")
    assert finding.code == "workflow-held"
    assert finding.cause == "the job is a workflow step held until the step before it succeeds"
    # Kueue evicts every inactive Workload, with reason Deactivated: still the workflow's hold.
    evicted = {"type": "Evicted", "status": "True", "reason": "Deactivated", "message": "The workload is deactivated"}
    workload["status"]["conditions"].append(evicted)
    adm = kueue.admission(queued_job(), {"items": [workload]})
    assert adm is not None and adm.state == "workflow-held"
    # Kueue's own deactivation names its cause (here its requeuing limit): not a hold.
    evicted.update(reason="DeactivatedDueToRequeuingLimitExceeded",
                   message="The workload is deactivated due to exceeding the maximum number of re-queuing retries")
    adm = kueue.admission(queued_job(), {"items": [workload]})
    assert adm is not None and adm.state == "deactivated"


def test_a_job_without_a_queue_has_no_admission() -> None:
    job = queued_job()
    del job["metadata"]["labels"][kueue.QUEUE_LABEL]
    assert kueue.admission(job, listed("kueue-workload-pending.json")) is None


def test_the_workload_read_selects_by_the_job_uid() -> None:
    assert kueue.workload_read("demo", "u-1") == [
        "get", "workloads.kueue.x-k8s.io", "-n", "demo", "-l", "kueue.x-k8s.io/job-uid=u-1"
    ]


# ------------------------------------------------------------------------------------------- the ClusterQueue


def test_quota_per_flavor_from_spec_and_reservation_from_status() -> None:
    q = quota()
    assert (q.cluster_queue, q.nominal, q.used, q.free, q.ceiling) == ("team-cq", 16, 8, 8, 16)
    assert q.flavors == (FlavorGpus("default", 16, None, 8, admitted=8, borrowed=0),)
    assert (q.pending_workloads, q.admitted_workloads, q.inactive, q.cohort) == (1, 1, None, None)


def test_reservation_counts_not_usage() -> None:
    cq = copy.deepcopy(fixture_json("kueue-clusterqueue.json"))
    cq["status"]["flavorsReservation"][0]["resources"][0]["total"] = "12"  # admission checks still running
    cq["status"]["flavorsReservation"][0]["resources"][0]["borrowed"] = "2"
    found = queue_quota(fixture_json("kueue-localqueue.json"), cq)
    assert found is not None and (found.used, found.free) == (12, 4)
    assert (found.flavors[0].admitted, found.flavors[0].borrowed, found.flavors[0].remaining) == (8, 2, 4)


def test_a_job_must_fit_in_one_flavor() -> None:
    cq = copy.deepcopy(fixture_json("kueue-clusterqueue.json"))
    group = cq["spec"]["resourceGroups"][0]
    group["flavors"] = [
        {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]},
        {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]},
    ]
    cq["status"]["flavorsReservation"] = [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "4"}]}]
    found = queue_quota(fixture_json("kueue-localqueue.json"), cq)
    assert found is not None and (found.nominal, found.ceiling, found.free) == (16, 8, 8)
    nodes = [NodeGpus(f"n{i}", 8, 0, 8) for i in range(4)]
    verdict = fit(nodes, 8, 2, quota=found)  # 16 GPUs: the sum of the flavors, but no single flavor
    assert verdict.verdict == "never"
    assert "ClusterQueue team-cq can admit at most 8 in one flavor (nominal 8)" in verdict.message
    verdict = fit(nodes, 6, 1, quota=found)
    assert verdict.verdict == "fits"  # a100 has 8 unused


def test_an_inactive_cluster_queue_is_never_with_kueues_reason() -> None:
    lq, cq = fixture_json("kueue-localqueue.json"), fixture_json("kueue-clusterqueue-inactive.json")
    found = queue_quota(lq, cq)
    assert found is not None
    assert found.inactive == (
        "FlavorNotFound: Can't admit new workloads: references missing ResourceFlavor(s): no-such-flavor."
    )
    verdict = fit([NodeGpus("n0", 8, 0, 8)], 1, 1, quota=found)
    assert verdict.verdict == "never"
    assert verdict.message == (
        "never (until the queue is fixed): ClusterQueue broken-cq admits no workload: FlavorNotFound: Can't admit "
        "new workloads: references missing ResourceFlavor(s): no-such-flavor."
    )


def test_an_inactive_local_queue_counts_too() -> None:
    lq = copy.deepcopy(fixture_json("kueue-localqueue.json"))
    lq["status"]["conditions"] = [
        {"type": "Active", "status": "False", "reason": "ClusterQueueDoesNotExist", "message": "Can't submit"}
    ]
    found = queue_quota(lq, fixture_json("kueue-clusterqueue.json"))
    assert found is not None and found.inactive == "LocalQueue team: ClusterQueueDoesNotExist: Can't submit"


def test_quota_wait_and_busy_nodes_are_both_named() -> None:
    nodes = [NodeGpus("n0", 8, 8, 0, gpu_pods=1), NodeGpus("n1", 8, 0, 8)]
    verdict = fit(nodes, 8, 2, quota=quota())
    assert verdict.verdict == "queue"
    assert verdict.message.startswith("queue: 2 x 8 nvidia.com/gpu: 2 nodes are big enough but only 1 has 8 free")
    assert verdict.message.endswith(
        "ClusterQueue team-cq has 8 of 16 nvidia.com/gpu reserved in flavor default (8 unused); 1 workload pending; "
        "Kueue admits the job when quota frees up"
    )


# ------------------------------------------------------------------------------------------- explain


def test_explain_gives_kueues_message_and_the_queue_usage() -> None:
    adm = kueue.admission(queued_job(), listed("kueue-workload-pending.json"))
    status = job_status(queued_job(), [], admission=adm)
    [finding] = explain(status, [], [], job="dino-train-630dd6", namespace="demo", queue_quota=quota())
    assert finding.code == "awaiting-admission"
    assert finding.evidence == (
        f"{PENDING_MESSAGE}; ClusterQueue team-cq: 8 of 16 nvidia.com/gpu reserved in flavor default; "
        "1 workload(s) admitted, 1 pending"
    )
    assert "`kubectl get workloads.kueue.x-k8s.io -n demo` lists the queue" in finding.fix


def test_explain_an_inadmissible_job_says_which_queue_to_create() -> None:
    adm = kueue.admission(queued_job(), listed("kueue-workload-inadmissible.json"))
    found = explain(job_status(queued_job(), [], admission=adm), [], [], job="j", namespace="demo")
    assert [f.code for f in found] == ["kueue-inadmissible"]
    assert found[0].evidence == "Inadmissible: LocalQueue team doesn't exist"
    assert found[0].fix.startswith("create LocalQueue team in namespace demo, or cancel the job")


def test_explain_an_inactive_cluster_queue_and_a_job_kueue_never_took_up() -> None:
    lq, cq = fixture_json("kueue-localqueue.json"), fixture_json("kueue-clusterqueue-inactive.json")
    inactive = queue_quota(lq, cq)
    adm = kueue.admission(queued_job(), {"items": []})
    found = explain(job_status(queued_job(), [], admission=adm), [], [], job="j", namespace="demo",
                    queue_quota=inactive)
    assert [f.code for f in found] == ["kueue-queue-inactive", "kueue-no-workload"]
    assert "managedJobsNamespaceSelector" in found[1].fix


# ------------------------------------------------------------------------------------------- through the CLI


@pytest.fixture
def queued_record(fake_kubectl: FakeKubectl, tao_env: Path) -> str:
    """A record of the queued Job (namespace demo), and the objects Kueue made for it."""
    job = queued_job()
    records = RecordStore(os.environ["TAO_STATE_DIR"])
    record = records.open(platform="kubernetes", image="nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt",
                          network_arch="dino", action="train", storage_tier="A", results_root="/workspace/results")
    records.mark(record.id, "RUNNING", backend_ref=f"demo/{job['metadata']['name']}")
    records.update_extra(record.id, namespace="demo", job_name=job["metadata"]["name"], api_server=SERVER)
    fake_kubectl.on("get", "jobs,pods", data={"kind": "List", "items": [job]})
    fake_kubectl.on("get", "events", data={"kind": "List", "items": []})
    fake_kubectl.on("get", "workloads.kueue.x-k8s.io", data=listed("kueue-workload-pending.json"))
    fake_kubectl.on("get", "localqueues.kueue.x-k8s.io", data=fixture_json("kueue-localqueue.json"))
    fake_kubectl.on("get", "clusterqueues.kueue.x-k8s.io", data=listed("kueue-clusterqueue.json"))
    return record.id


def test_status_reads_the_workload_only_while_the_job_is_suspended(
    cli: Any, fake_kubectl: FakeKubectl, queued_record: str
) -> None:
    code, out, err = cli("status", queued_record, "-o", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["message"] == f"waiting for admission (Kueue LocalQueue team): {PENDING_MESSAGE}"
    uid = queued_job()["metadata"]["uid"]
    assert ["get", "workloads.kueue.x-k8s.io", "-n", "demo", "-l", f"kueue.x-k8s.io/job-uid={uid}", "-o", "json"] in (
        fake_kubectl.argvs())


def test_explain_reads_workload_local_queue_and_cluster_queues_at_once(
    cli: Any, fake_kubectl: FakeKubectl, queued_record: str
) -> None:
    code, out, _ = cli("explain", queued_record, "-o", "json")
    assert code == 1
    [finding] = json.loads(out)["findings"]
    assert finding["code"] == "awaiting-admission" and "ClusterQueue team-cq: 8 of 16" in finding["evidence"]


def test_explain_without_rights_on_cluster_queues_notes_it(
    cli: Any, fake_kubectl: FakeKubectl, queued_record: str
) -> None:
    fake_kubectl.rules.insert(0, (("get", "clusterqueues.kueue.x-k8s.io"), fake_kubectl_error()))
    code, out, _ = cli("explain", queued_record, "-o", "json")
    data = json.loads(out)
    assert code == 1 and data["findings"][0]["evidence"] == PENDING_MESSAGE
    assert any("Kueue's clusterqueues not read" in note for note in data["notes"])


def fake_kubectl_error() -> Any:
    from kubectl_tao.k8s.kubectl import Completed

    return Completed("", 'Error from server (Forbidden): clusterqueues.kueue.x-k8s.io is forbidden: User "u" '
                     "cannot list resource", 1)


# ------------------------------------------------------------------------------------------- submit --queue


def submit_cluster(fake: FakeKubectl) -> None:
    from kubectl_tao.gates.gpuinventory import DRA_READ

    prefix, granted = review_answer()
    fake.on(*prefix, stdout=granted)
    fake.on("get", "persistentvolumeclaim/data", stdout="PersistentVolumeClaim data Bound \n")
    fake.on("create", "--dry-run=server", stdout="job.batch/x\n")
    fake.capacity({"kind": "List", "items": fixture_json("nodes-2x8.json")["items"]})
    fake.on(*DRA_READ[:2], data={"kind": "List", "items": []})
    fake.on("version", data={"serverVersion": {"major": "1", "minor": "36", "gitVersion": "v1.36.3"}})


SUBMIT = ["submit", "--image", "busybox:1.36", "--command", "true", "--gpus", "8", "--pvc", "data"]


def objects_created(fake: FakeKubectl) -> list[list[str]]:
    from kubectl_tao.gates import permissions

    return [c.argv for c in fake.calls if c.argv[:1] == ["create"] and "--dry-run=server" not in c.argv
            and permissions.REVIEW_TEMPLATE not in c.argv]


def test_submit_to_a_queue_on_a_cluster_without_kueue_is_refused(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path
) -> None:
    submit_cluster(fake_kubectl)
    fake_kubectl.on("get", "localqueues.kueue.x-k8s.io", rc=1,
                    stderr='error: the server doesn\'t have a resource type "localqueues"')
    code, out, err = cli(*SUBMIT, "--queue", "team")
    assert (code, out) == (2, "")
    assert err.splitlines()[-1] == (
        "error: --queue team: this cluster has no Kueue (localqueues.kueue.x-k8s.io is not a resource); drop --queue"
    )
    assert objects_created(fake_kubectl) == [] and not list((tao_env / "state").glob("jobs/*.json"))


def test_submit_reads_the_queue_in_the_gates_round_trip_and_gates_on_its_quota(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path
) -> None:
    submit_cluster(fake_kubectl)
    fake_kubectl.on("get", "localqueues.kueue.x-k8s.io", data=listed("kueue-localqueue.json"))
    fake_kubectl.on("get", "clusterqueues.kueue.x-k8s.io", data=fixture_json("kueue-clusterqueue.json"))
    code, _, err = cli(*SUBMIT, "--nodes", "3", "--queue", "team", "--ttl-seconds", "60")
    assert code == 4, err  # 3 x 8 = 24 > the 16 the ClusterQueue can ever admit
    assert "ClusterQueue team-cq can admit at most 16 (nominal 16)" in err
    assert objects_created(fake_kubectl) == []
    assert ["get", "localqueues.kueue.x-k8s.io", "-n", "tao-jobs", "-o", "json"] in fake_kubectl.argvs()
