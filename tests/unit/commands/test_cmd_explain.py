"""`kubectl tao explain JOB`: causes with evidence and fix, from live objects or from the record."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from support.cluster import TAO_IMAGE
from support.fake_kubectl import FakeKubectl, fixture_json, open_kubernetes_record

from kubectl_tao.gates.capacity import NODES_READ, PODS_READ
from kubectl_tao.gates.gpuinventory import DRA_READ
from kubectl_tao.store.records import RecordStore

SERVER = "https://127.0.0.1:6443"


def store() -> RecordStore:
    return RecordStore(os.environ["TAO_STATE_DIR"])


def launched(name: str, namespace: str = "tao-jobs", **extra: Any) -> str:
    """A record submitted as Job `namespace/name` to the kubeconfig's cluster."""
    records = store()
    record = open_kubernetes_record(records, image=TAO_IMAGE, results_dir=None, results_root="/workspace/results")
    records.mark(record.id, "RUNNING", backend_ref=f"{namespace}/{name}")
    records.update_extra(record.id, namespace=namespace, job_name=name, api_server=SERVER, **extra)
    return record.id


def serve(fake: FakeKubectl, scenario: str, nodes: str | None = "nodes-2x8.json") -> str:
    """Answer explain's calls with the recorded JSON of a scenario; returns the Job's name."""
    job, pods, events = (fixture_json(f"{scenario}.{part}.json") for part in ("job", "pods", "events"))
    name = job["metadata"]["name"]
    fake.on("get", "jobs,pods", data={"kind": "List", "items": [job, *pods["items"]]})
    fake.on("get", "events", data=events)
    if nodes:
        items = fixture_json(nodes)["items"] + fixture_json("pods-busy.json")["items"]
        fake.capacity({"kind": "List", "items": items})
        fake.on(*DRA_READ[:2], data={"kind": "List", "items": []})
    return name


def test_pending_job_short_of_gpus_names_the_cause_evidence_and_fix(cli: Any, fake_kubectl: FakeKubectl) -> None:
    rid = launched(serve(fake_kubectl, "pending-gpu"))
    code, out, err = cli("explain", rid)
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == f"job {rid} (tao-jobs/dino-train-8d2e4b): PENDING - Insufficient nvidia.com/gpu"
    assert lines[1] == "1. not enough free GPUs on any single node"
    assert lines[2].startswith("   evidence: ") and "Insufficient nvidia.com/gpu" in lines[2]
    assert lines[3].startswith("   fix: wait for running jobs to finish")
    assert "(8 of 16 allocatable GPUs are free right now)" in lines[3]
    assert err == ""


def test_pending_job_costs_four_calls_in_two_round_trips(cli: Any, fake_kubectl: FakeKubectl) -> None:
    name = serve(fake_kubectl, "pending-gpu")
    cli("explain", launched(name))
    first, second = fake_kubectl.argvs()[:2], fake_kubectl.argvs()[2:]
    assert sorted(first) == [
        ["get", "events", "-n", "tao-jobs", "-o", "json"],
        ["get", "jobs,pods", "-n", "tao-jobs", "-l", f"tao-job={name}", "-o", "json"],
    ]
    assert sorted(second) == sorted([NODES_READ, PODS_READ, DRA_READ])


def test_cluster_without_gpus_points_at_the_gpu_operator(cli: Any, fake_kubectl: FakeKubectl) -> None:
    rid = launched(serve(fake_kubectl, "pending-gpu", nodes="nodes-cpu-only.json"))
    code, out, _ = cli("explain", rid)
    assert code == 1
    assert "1. no node offers nvidia.com/gpu: the NVIDIA GPU Operator (or device plugin) is not installed" in out


def test_failed_job_reads_only_the_nodes_its_pods_ran_on(cli: Any, fake_kubectl: FakeKubectl) -> None:
    rid = launched(serve(fake_kubectl, "oomkilled", nodes=None))
    healthy = next(n for n in fixture_json("nodes-2x8.json")["items"] if n["metadata"]["name"] == "gpu-node-0")
    fake_kubectl.on("get", "nodes", "gpu-node-0", data=healthy)
    code, out, err = cli("explain", rid)
    assert code == 1
    assert "1. a rank ran out of memory (OOMKilled, exit 137)" in out
    assert len(fake_kubectl.calls) == 3  # the Job and pods, the events, then the one node its pods ran on
    assert fake_kubectl.argvs()[2] == ["get", "nodes", "gpu-node-0", "--ignore-not-found", "-o", "json"]
    assert "unhealthy" not in out and err == ""


def test_a_failed_rank_on_a_node_now_marked_unhealthy_is_named_first(cli: Any, fake_kubectl: FakeKubectl) -> None:
    rid = launched(serve(fake_kubectl, "oomkilled", nodes=None))
    node = next(n for n in fixture_json("nodes-2x8.json")["items"] if n["metadata"]["name"] == "gpu-node-0")
    node["status"]["conditions"].append({"type": "XidCriticalError", "status": "True", "reason": "Xid79"})
    fake_kubectl.on("get", "nodes", "gpu-node-0", data=node)
    code, out, _ = cli("explain", rid)
    assert code == 1
    lines = out.splitlines()
    assert lines[1] == ("1. ranks ran on nodes whose GPUs are now marked unhealthy: rank 0 on gpu-node-0 "
                        "(XidCriticalError) (ERR_INFRA: the hardware, not the program)")
    assert "gpu-node-0: XidCriticalError Xid79" in lines[2]
    assert "2. a rank ran out of memory (OOMKilled, exit 137)" in out


def test_a_failed_job_whose_nodes_cannot_be_read_says_so(cli: Any, fake_kubectl: FakeKubectl) -> None:
    rid = launched(serve(fake_kubectl, "oomkilled", nodes=None))
    fake_kubectl.on("get", "nodes", rc=1, stderr='Error from server (Forbidden): nodes is forbidden: User "u"')
    code, out, err = cli("explain", rid)
    assert code == 1 and "1. a rank ran out of memory" in out
    assert "cannot tell whether a rank's GPUs failed" in out + err


def test_completed_job_has_nothing_to_explain(cli: Any, fake_kubectl: FakeKubectl) -> None:
    rid = launched(serve(fake_kubectl, "complete", nodes=None))
    code, out, _ = cli("explain", rid)
    assert code == 0
    assert out.splitlines()[1].startswith("nothing wrong found")


def test_json_output_lists_the_findings(cli: Any, fake_kubectl: FakeKubectl) -> None:
    rid = launched(serve(fake_kubectl, "imagepull", nodes=None))
    code, out, _ = cli("explain", rid, "-o", "json")
    data = json.loads(out)
    assert code == 1
    assert data["id"] == rid and data["source"] == "cluster" and data["state"] == "PENDING"
    assert [f["code"] for f in data["findings"]] == ["image-pull"]
    assert set(data["findings"][0]) == {"cause", "evidence", "fix", "code"}


def test_gone_job_is_explained_from_the_record_history(cli: Any, fake_kubectl: FakeKubectl) -> None:
    history = {
        "state": "ERROR",
        "reason": "OOMKilled",
        "message": "rank 0 container tao was OOMKilled (exit 137)",
        "err_class": "ERR_INFRA",
        "first_failed_rank": 0,
        "ranks": [],
        "captured_at": "2024-11-04T10:05:00Z",
    }
    rid = launched("dino-train-gone", history=history)
    fake_kubectl.on("get", "jobs,pods", data={"kind": "List", "items": []})
    fake_kubectl.on("get", "events", data={"kind": "List", "items": []})
    code, out, err = cli("explain", rid)
    assert code == 1
    assert "1. a rank ran out of memory (OOMKilled, exit 137)" in out
    assert "evidence: rank 0 container tao was OOMKilled (exit 137)" in out
    assert err == "note: the Job is gone; explained from the history the record captured at 2024-11-04T10:05:00Z\n"


def test_gone_job_without_history_says_it_is_gone(cli: Any, fake_kubectl: FakeKubectl) -> None:
    rid = launched("dino-train-gone")
    fake_kubectl.on("get", "jobs,pods", data={"kind": "List", "items": []})
    fake_kubectl.on("get", "events", data={"kind": "List", "items": []})
    code, out, _ = cli("explain", rid, "-o", "json")
    data = json.loads(out)
    assert code == 1
    assert data["source"] == "record" and [f["code"] for f in data["findings"]] == ["job-gone"]


def test_explain_never_writes_the_record(cli: Any, fake_kubectl: FakeKubectl) -> None:
    rid = launched("dino-train-gone")
    before = store().show(rid)
    fake_kubectl.on("get", "jobs,pods", data={"kind": "List", "items": []})
    fake_kubectl.on("get", "events", data={"kind": "List", "items": []})
    cli("explain", rid)
    assert store().show(rid) == before


def test_canceled_job_is_explained_without_kubectl(cli: Any, fake_kubectl: FakeKubectl) -> None:
    rid = launched("dino-train-x")
    store().mark(rid, "CANCELED", message="canceled by kubectl tao cancel")
    code, out, _ = cli("explain", rid)
    assert code == 1
    assert "1. the job was canceled" in out and "evidence: canceled by kubectl tao cancel" in out
    assert fake_kubectl.calls == []


def test_never_launched_record_is_explained_from_its_last_message(cli: Any, fake_kubectl: FakeKubectl) -> None:
    records = store()
    record = records.open(
        platform="kubernetes", image="busybox", network_arch="dino", action="train", storage_tier="A",
        results_root="/workspace/results",
    )
    records.mark(record.id, "ERROR", message="capacity gate: never fits", err_class="ERR_INFRA")
    code, out, _ = cli("explain", record.id)
    assert code == 1
    assert "1. the job was never launched (the record names no Kubernetes Job)" in out
    assert "evidence: capacity gate: never fits" in out
    assert fake_kubectl.calls == []


def test_forbidden_events_leave_a_note(cli: Any, fake_kubectl: FakeKubectl) -> None:
    job, pods = fixture_json("oomkilled.job.json"), fixture_json("oomkilled.pods.json")
    fake_kubectl.on("get", "jobs,pods", data={"kind": "List", "items": [job, *pods["items"]]})
    fake_kubectl.on("get", "events", rc=1, stderr='Error from server (Forbidden): events is forbidden: User "u"')
    code, out, err = cli("explain", launched(job["metadata"]["name"]))
    assert code == 1 and "OOMKilled" in out
    assert err.startswith("note: events not read (Error from server (Forbidden)")


def test_other_cluster_is_refused_unless_forced(cli: Any, fake_kubectl: FakeKubectl) -> None:
    rid = launched(serve(fake_kubectl, "oomkilled", nodes=None))
    store().update_extra(rid, api_server="https://elsewhere:6443")
    code, out, err = cli("explain", rid)
    assert code == 1 and out == ""
    assert err.startswith(f"error: job {rid} was submitted to https://elsewhere:6443")
    assert fake_kubectl.calls == []
    assert cli("explain", rid, "--force")[0] == 1


def test_replaced_job_with_another_uid_is_refused(cli: Any, fake_kubectl: FakeKubectl) -> None:
    rid = launched(serve(fake_kubectl, "oomkilled", nodes=None), job_uid="00000000-0000-4000-8000-000000000000")
    code, _, err = cli("explain", rid)
    assert code == 1
    assert "it is a different Job with the same name; refusing to act on it" in err


def test_unknown_record_is_an_error(cli: Any, fake_kubectl: FakeKubectl) -> None:
    code, out, err = cli("explain", "no-such-job-abc123")
    assert code == 1 and out == ""
    assert err.startswith("error: ") and "no-such-job-abc123" in err


@pytest.mark.parametrize(("argv", "message"), [(["explain"], "Missing argument 'JOB'"),
                                              (["explain", "x", "-o", "name"], "unknown format 'name'")])
def test_bad_arguments_are_usage_errors(cli: Any, fake_kubectl: FakeKubectl, argv: list[str], message: str) -> None:
    code, _, err = cli(*argv)
    assert code == 2 and message in err


def _serve_dra(fake: FakeKubectl, *, with_class: bool, scheduler_says: str | None = None) -> str:
    """pending-gpu on a DRA-only cluster (recorded: dra-node-0, 4 GPUs, 3 allocated)."""
    job, pods, events = (fixture_json(f"pending-gpu.{part}.json") for part in ("job", "pods", "events"))
    if scheduler_says:
        pods = json.loads(json.dumps(pods).replace("2 Insufficient nvidia.com/gpu", scheduler_says))
        events = json.loads(json.dumps(events).replace("2 Insufficient nvidia.com/gpu", scheduler_says))
    fake.on("get", "jobs,pods", data={"kind": "List", "items": [job, *pods["items"]]})
    fake.on("get", "events", data=events)
    capacity = fixture_json("dra-nodes-pods.json")
    capacity["items"] = [i for i in capacity["items"] if not i["metadata"]["name"].startswith("gpu-node-")]
    fake.capacity(capacity)
    dra = fixture_json("dra-objects.json")
    if not with_class:
        dra["items"] = [i for i in dra["items"] if i["kind"] != "DeviceClass"]
    fake.on(*DRA_READ[:2], data=dra)
    return str(job["metadata"]["name"])


def test_dra_gpus_without_a_serving_class_are_not_called_a_missing_gpu_operator(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    rid = launched(_serve_dra(fake_kubectl, with_class=False))
    code, out, _ = cli("explain", rid)
    assert code == 1
    assert "1. no node offers nvidia.com/gpu to pods" in out
    assert "4 GPUs published through DRA" in out and "extendedResourceName" in out
    assert "GPU Operator" not in out


def test_dra_shortage_cannot_allocate_all_claims_is_a_gpu_shortage(cli: Any, fake_kubectl: FakeKubectl) -> None:
    rid = launched(_serve_dra(fake_kubectl, with_class=True, scheduler_says="1 cannot allocate all claims"))
    code, out, _ = cli("explain", rid)
    assert code == 1
    assert "1. not enough free GPUs on any single node" in out
    assert "(1 of 4 allocatable GPUs are free right now)" in out


LEAKY = {  # what a Warning event or a container message can quote (fake values)
    "url": ("https://puller:{c}@registry.example/v2/", "UrlPassCanary1x"),
    "env": ("init failed: HF_TOKEN={c} rejected", "EnvCanary2xyz"),
    "colon": ("login failed; password: {c} was refused", "ColonCanary3q"),
}


def _leaky_imagepull(fake: FakeKubectl) -> str:
    job, pods, events = (fixture_json(f"imagepull.{part}.json") for part in ("job", "pods", "events"))
    said = "; ".join(text.format(c=canary) for text, canary in LEAKY.values())
    for event in events["items"]:
        event["message"] = f"{event['message']}: {said}"
    for pod in pods["items"]:
        for status in pod["status"].get("containerStatuses") or []:
            waiting = (status.get("state") or {}).get("waiting")
            if waiting:
                waiting["message"] = f"{waiting.get('message', '')}: {said}"
    fake.on("get", "jobs,pods", data={"kind": "List", "items": [job, *pods["items"]]})
    fake.on("get", "events", data=events)
    return str(job["metadata"]["name"])


@pytest.mark.parametrize("output", ["table", "json", "yaml"])
def test_cluster_evidence_is_redacted(cli: Any, fake_kubectl: FakeKubectl, output: str) -> None:
    rid = launched(_leaky_imagepull(fake_kubectl))
    code, out, err = cli("explain", rid, "-o", output)
    assert code == 1
    assert "REDACTED" in out
    for _, canary in LEAKY.values():
        assert canary not in out + err


@pytest.mark.parametrize("output", ["table", "wide", "json", "yaml"])
def test_status_redacts_the_cluster_messages_it_shows(cli: Any, fake_kubectl: FakeKubectl, output: str) -> None:
    rid = launched(_leaky_imagepull(fake_kubectl))
    code, out, err = cli("status", rid, "-o", output)
    assert code == 0, err
    for _, canary in LEAKY.values():
        assert canary not in out + err


# ------------------------------------------------------------------------------- native gang (PodGroup waiting)

GANG_MESSAGE = "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) had untolerated taint."


def serve_native_gang(fake: FakeKubectl) -> str:
    """A 2 x 8 Job submitted with spec.scheduling gang (minCount 2) whose PodGroup the scheduler holds:
    both pods exist, none is bound, PodGroupInitiallyScheduled=False. Built on the pending-gpu recording."""
    from kubectl_tao.diagnosis import jobstate
    from kubectl_tao.k8s import gang

    job = fixture_json("pending-gpu.job.json")
    name, uid = job["metadata"]["name"], job["metadata"]["uid"]
    job["spec"].update(completionMode="Indexed", completions=2, parallelism=2, scheduling=gang.scheduling_field(2))
    group = f"{name}-wl-pgt-0-x"
    [pod] = fixture_json("pending-gpu.pods.json")["items"]
    pods = []
    for index in range(2):
        copy = json.loads(json.dumps(pod))
        copy["metadata"]["name"] = f"{name}-{index}-q9w4z"
        copy["metadata"]["annotations"] = {jobstate.INDEX_KEY: str(index)}
        copy["spec"]["schedulingGroup"] = {"podGroupName": group}
        copy["status"]["conditions"][0]["message"] = GANG_MESSAGE
        pods.append(copy)
    podgroup = {
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": group, "namespace": "tao-jobs",
                     "ownerReferences": [{"kind": "Job", "name": name, "uid": uid, "controller": True}]},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
        "status": {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "False",
                                   "reason": "Unschedulable", "message": GANG_MESSAGE}]},
    }
    fake.on("get", "jobs,pods", data={"kind": "List", "items": [job, *pods]})
    fake.on("get", "events", data={"kind": "List", "items": []})
    fake.on("get", gang.groups_call("tao-jobs")[0][1], data={"kind": "List", "items": [podgroup]})
    fake.capacity({"kind": "List", "items": fixture_json("nodes-2x8.json")["items"]
                   + fixture_json("pods-busy.json")["items"]})
    fake.on(*DRA_READ[:2], data={"kind": "List", "items": []})
    return str(name)


def test_native_gang_waiting_until_its_ranks_fit_together(cli: Any, fake_kubectl: FakeKubectl) -> None:
    name = serve_native_gang(fake_kubectl)
    rid = launched(name, gang="native", gpus=8)
    code, out, err = cli("explain", rid)
    assert code == 1 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"job {rid} (tao-jobs/{name}): PENDING - Insufficient nvidia.com/gpu"
    assert lines[1] == (f"gang: native gang, PodGroup {name}-wl-pgt-0-x (minCount 2): waiting until 2 ranks fit "
                        "together; no pod is bound meanwhile")
    assert lines[2] == ("1. native gang scheduling holds all 2 ranks until they fit together; no pod is bound and "
                        "no GPU is held meanwhile")
    assert lines[3] == (f"   evidence: PodGroup {name}-wl-pgt-0-x: PodGroupInitiallyScheduled=False (Unschedulable): "
                        f"{GANG_MESSAGE}")
    assert lines[4].startswith("   fix: nothing to repair: it starts whole as soon as 2 nodes have the GPUs free")
    assert "`kubectl tao fit --gpus 8 --nodes 2`" in lines[4]
    assert lines[5] == "2. not enough free GPUs on any single node"  # the scheduler's words, second
    code, out, _ = cli("explain", rid, "-o", "json")
    data = json.loads(out)
    assert data["findings"][0]["code"] == "gang-waiting"
    assert (data["gang"]["state"], data["gang"]["min_count"], data["gang"]["podgroup"]) == (
        "Waiting", 2, f"{name}-wl-pgt-0-x")
    # The PodGroups are read in the first round trip, beside the Job and the events.
    assert ["get", "podgroups.v1beta1.scheduling.k8s.io,workloads.v1beta1.scheduling.k8s.io", "-n", "tao-jobs", "-o",
            "json"] in fake_kubectl.argvs()[:3]
