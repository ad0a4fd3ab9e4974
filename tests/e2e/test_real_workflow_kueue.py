"""A workflow with a Kueue queue on the local cluster's real nodes and its real Kueue controller: every step is
admitted through the LocalQueue, in order. A held step's Job names a Workload created inactive (Kueue's
prebuilt-workload label), so Kueue neither admits it nor counts it while its predecessor runs, even with quota
free; the predecessor's release activates that Workload and Kueue admits the step and unsuspends its Job.
`workflow cancel` removes the Workloads with the Jobs.

The release runs in the step's pod, so the cluster's pods must reach the API server (as in
tests/e2e/test_real_workflow.py, which fails rather than skips when they cannot). The real nodes' GPUs are fake
(a device plugin; no GPU exists): each step asks for one so that the ClusterQueue's GPU quota admits it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cluster import Tao, wait_for

from .test_kueue import WORKLOADS, Queue, condition
from .test_real_pods import REAL_NODE_LABEL, images, real  # noqa: F401
from .test_real_workflow import STEP, pods_can_reach_the_api_server, run_workflow, status

pytestmark = pytest.mark.e2e


@pytest.fixture()
def queued(real: Tao, images: dict[str, str]) -> Iterator[tuple[Tao, Queue]]:  # noqa: F811
    found = real.kubectl("get", "crd", "clusterqueues.kueue.x-k8s.io", "-o", "name", check=False)
    if found.returncode != 0:
        pytest.fail("this cluster runs no Kueue: bring it up with KUBECTL_TAO_KUEUE=1 (the default of "
                    "scripts/local-cluster)")
    reached, said = pods_can_reach_the_api_server(real, images["TORCH_IMAGE"])
    if not reached:
        pytest.fail("this cluster's pods cannot reach the API server at the kubernetes Service's address, so a "
                    f"step's release cannot run in its pod (the pod said: {said}); see docs/local-cluster.md")
    queue = Queue(real, 2)  # room for two one-GPU steps at once: only the workflow holds the later ones back
    wait_for(queue.active, 30, message="the ClusterQueue to become Active")
    yield real, queue
    queue.delete()


def queued_file(t: Tao, image: str, *, first: str = "sleep 15; ", first_queued: bool = True) -> Path:
    volume: Path = t.volume  # type: ignore[attr-defined]
    (volume / "step.py").write_text(STEP)
    own = "\n  queue: team" if first_queued else ""
    text = f"""\
apiVersion: kubectl-tao/v1
kind: Workflow
metadata: {{name: queued}}
defaults:
  image: {json.dumps(image)}
  pvc: tao-data
  gpus: 1
  network-arch: real
  node-selector: {REAL_NODE_LABEL}=true
  toleration: {REAL_NODE_LABEL}=true:NoSchedule
steps:
- name: train
  action: train
  command: {first}python3 /workspace/step.py ${{train.results}} - 0.7 0{own}
- name: evaluate
  when: train.val_mAP >= 0.5
  queue: team
  action: evaluate
  command: sleep 15; python3 /workspace/step.py ${{evaluate.results}} ${{train.results}}/train/model.pth 0.6 0
- name: export
  queue: team
  action: export
  command: python3 /workspace/step.py ${{export.results}} ${{evaluate.results}}/train/model.pth 0.6 0
"""
    path = volume.parent / f"{volume.name}-queued-workflow.yaml"
    path.write_text(text)
    return path


def workload_of(t: Tao, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(t.kubectl("get", WORKLOADS, name, "-o", "json").stdout)
    return data


def admitted(workload: dict[str, Any]) -> bool:
    return condition(workload, "Admitted").get("status") == "True"


def reserved(workload: dict[str, Any]) -> bool:
    return condition(workload, "QuotaReserved").get("status") == "True"


def pods(t: Tao, job: str) -> str:
    return t.kubectl("get", "pods", "-l", f"job-name={job}", "-o", "name").stdout


def test_steps_are_admitted_in_order_through_the_queue(queued: tuple[Tao, Queue], images: dict[str, str]) -> None:  # noqa: F811
    t, queue = queued
    created = run_workflow(t, queued_file(t, images["TORCH_IMAGE"]))
    name = created["name"]
    jobs = {s["name"]: s["job"].split("/", 1)[1] for s in created["steps"]}
    for step, job in jobs.items():  # every step's Job names its own Workload and waits for Kueue
        made = json.loads(t.kubectl("get", "job", job, "-o", "json").stdout)
        assert made["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] == job
        assert made["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team"
        workload = workload_of(t, job)
        assert workload["spec"]["active"] is (step == "train")
        assert workload["metadata"]["ownerReferences"][0]["uid"] == made["metadata"]["uid"]

    # The first step is admitted through the queue and runs; the held ones stay inactive and unadmitted, though
    # the ClusterQueue has room for them.
    wait_for(lambda: admitted(workload_of(t, jobs["train"])) and pods(t, jobs["train"]) != "", 120,
             message="the first step to be admitted by Kueue and start")
    train = workload_of(t, jobs["train"])
    assert train["status"]["admission"]["clusterQueue"] == queue.cq
    train_admitted = str(condition(train, "Admitted")["lastTransitionTime"])
    for held in ("evaluate", "export"):
        workload = workload_of(t, jobs[held])
        assert workload["spec"]["active"] is False and not reserved(workload) and not admitted(workload)
        assert json.loads(t.kubectl("get", "job", jobs[held], "-o", "json").stdout)["spec"]["suspend"] is True
        assert pods(t, jobs[held]) == ""
    seen = status(t, name)
    assert [s["state"] for s in seen["steps"]][1:] == ["HELD", "HELD"]
    assert seen["steps"][1]["reason"] == "held until train succeeds and train.val_mAP >= 0.5"

    # The first step's release activates the next step's Workload: Kueue admits it and unsuspends its Job,
    # while the step after it stays held.
    wait_for(lambda: admitted(workload_of(t, jobs["evaluate"])) and pods(t, jobs["evaluate"]) != "", 180,
             message="the second step to be admitted by Kueue after the first one succeeded")
    evaluate = workload_of(t, jobs["evaluate"])
    assert evaluate["spec"]["active"] is True and evaluate["status"]["admission"]["clusterQueue"] == queue.cq
    evaluate_admitted = str(condition(evaluate, "Admitted")["lastTransitionTime"])
    assert evaluate_admitted >= train_admitted  # RFC 3339 times of one clock, same format: ordered as strings
    export = workload_of(t, jobs["export"])
    assert export["spec"]["active"] is False and not reserved(export)
    assert pods(t, jobs["export"]) == ""
    logs = t.kubectl("logs", f"job/{jobs['train']}").stdout
    assert f"released step evaluate (Workload {jobs['evaluate']} active" in logs

    wait_for(lambda: status(t, name)["state"] != "RUNNING", 300, message="the workflow to end")
    seen = status(t, name)
    assert seen["state"] == "COMPLETE", seen
    ids = [s["id"] for s in created["steps"]]
    last = t.volume / "results" / ids[2] / "train" / "model.pth"  # type: ignore[attr-defined]
    assert last.read_text() == f"{ids[2]} after {ids[1]} after {ids[0]} after none"
    # Every step went through Kueue to its end, the last one admitted after the one before it.
    ended = {step: workload_of(t, job) for step, job in jobs.items()}
    assert all(condition(w, "Finished").get("status") == "True" for w in ended.values()), ended
    assert str(condition(ended["export"], "Admitted").get("lastTransitionTime") or "") >= evaluate_admitted, ended


def test_cancel_removes_the_held_steps_workloads_too(queued: tuple[Tao, Queue], images: dict[str, str]) -> None:  # noqa: F811
    t, _queue = queued
    created = run_workflow(t, queued_file(t, images["TORCH_IMAGE"], first="sleep 600; "))
    name = created["name"]
    jobs = [s["job"].split("/", 1)[1] for s in created["steps"]]
    wait_for(lambda: pods(t, jobs[0]) != "", 120, message="the first step to start")
    # The first step's token may activate the next step's Workload and no other (RBAC, asked of the server).
    account = f"system:serviceaccount:{t.namespace}:tao-wf-{name}-train"

    def may(*what: str) -> bool:
        return t.kubectl("auth", "can-i", *what, "--as", account, check=False).stdout.strip() == "yes"

    assert may("patch", f"{WORKLOADS}/{jobs[1]}")
    assert not may("patch", f"{WORKLOADS}/{jobs[2]}") and not may("patch", f"{WORKLOADS}/{jobs[0]}")
    assert not may("list", WORKLOADS) and not may("create", WORKLOADS) and not may("delete", f"{WORKLOADS}/{jobs[1]}")
    result = t("workflow", "cancel", name, "-o", "json")
    assert result.returncode == 0, result.stderr
    deleted = json.loads(result.stdout)["deleted"]
    # Each Workload goes by cancel's own delete (pinned to its UID) or with its Job (the garbage collector, Kueue),
    # whichever comes first; none of another run is touched, and none of this one is left.
    removed = {d.split("/", 1)[1] for d in deleted if d.startswith("workload.kueue.x-k8s.io/")}
    assert removed <= set(jobs), deleted
    selector = f"kubectl-tao.io/workflow={name}"
    wait_for(lambda: t.kubectl("get", f"jobs,pods,{WORKLOADS}", "-l", selector, "-o", "name").stdout == "", 90,
             message="the run's Jobs, pods and Workloads to go")
    assert status(t, name)["state"] == "CANCELED"


def test_a_first_step_without_a_queue_starts_after_its_queued_successors_workloads_exist(
    queued: tuple[Tao, Queue], images: dict[str, str], tmp_path: Path  # noqa: F811
) -> None:
    # The first step runs at once (no queue) and ends quickly: its release must find the next step's Workload,
    # so `workflow run` makes the held steps' Workloads before it creates the first step's Job.
    t, queue = queued
    # A global default PriorityClass (kept until the run ends: the pods get their priority from it when they are
    # created): Kueue gives it to the Workload of a Job that names no priority, and the run's prebuilt Workloads
    # must carry it as Kueue would.
    default = f"wf-default-{t.namespace}"[:63]
    t.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": default},
        "value": 7, "globalDefault": True}))
    try:
        queued_run(t, queue, images["TORCH_IMAGE"], tmp_path, default)
    finally:
        t.kubectl("delete", "priorityclass", default, "--wait=false", check=False)


def queued_run(t: Tao, queue: Queue, image: str, tmp_path: Path, default: str) -> None:
    trace = tmp_path / "trace.jsonl"
    t.env["KUBECTL_TAO_TRACE"] = str(trace)
    try:
        created = run_workflow(t, queued_file(t, image, first="", first_queued=False))
    finally:
        t.env.pop("KUBECTL_TAO_TRACE", None)
    name = created["name"]
    jobs = {s["name"]: s["job"].split("/", 1)[1] for s in created["steps"]}
    calls = [json.loads(line)["argv"] for line in trace.read_text().splitlines()]
    creates = [i for i, argv in enumerate(calls) if argv[:2] == ["create", "-f"]]  # not a dry run, not a review
    (read,) = [i for i, argv in enumerate(calls) if "jobs" in argv and f"kubectl-tao.io/workflow={name}" in
               " ".join(argv) and "get" in argv]
    # The RBAC, the held steps' Jobs, the one read of them, their Workloads, then the first step's Job.
    assert [i > read for i in creates] == [False, False, False, True, True], calls
    print(f"workflow run, 3 steps, the two held ones queued: {len(calls)} kubectl calls")
    assert "kueue.x-k8s.io/prebuilt-workload-name" not in json.loads(
        t.kubectl("get", "job", jobs["train"], "-o", "json").stdout)["metadata"]["labels"]

    # The priority Kueue reads, as on the Workload Kueue makes itself for a plain queued Job.
    plain = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "kueue-made", "labels": {
        "kueue.x-k8s.io/queue-name": "team"}}, "spec": {"suspend": True, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": image,
                                                      "command": ["true"]}]}}}}
    t.kubectl("create", "-f", "-", input=json.dumps(plain))
    theirs: dict[str, Any] = {}

    def kueue_made() -> bool:
        listed = json.loads(t.kubectl("get", WORKLOADS, "-o", "json").stdout)["items"]
        theirs.update(next((w for w in listed if (w["metadata"].get("ownerReferences") or [{}])[0].get("name")
                            == "kueue-made"), {}))
        return bool(theirs)

    wait_for(kueue_made, 60, message="Kueue to make the plain Job's Workload")
    t.kubectl("delete", "job", "kueue-made", "--wait=false")
    for held in ("evaluate", "export"):
        spec = workload_of(t, jobs[held])["spec"]
        assert (spec.get("priorityClassRef"), spec.get("priority")) == (
            theirs["spec"].get("priorityClassRef"), theirs["spec"].get("priority")) == (
            {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": default}, 7), (spec, theirs["spec"])

    wait_for(lambda: status(t, name)["state"] != "RUNNING", 300, message="the workflow to end")
    seen = status(t, name)
    assert seen["state"] == "COMPLETE", seen
    logs = t.kubectl("logs", f"job/{jobs['train']}").stdout
    assert f"released step evaluate (Workload {jobs['evaluate']} active" in logs
    for held in ("evaluate", "export"):  # each went through the queue
        workload = workload_of(t, jobs[held])
        assert workload["status"]["admission"]["clusterQueue"] == queue.cq
        assert condition(workload, "Finished").get("status") == "True", workload
    ids = [s["id"] for s in created["steps"]]
    last = t.volume / "results" / ids[2] / "train" / "model.pth"  # type: ignore[attr-defined]
    assert last.read_text() == f"{ids[2]} after {ids[1]} after {ids[0]} after none"
