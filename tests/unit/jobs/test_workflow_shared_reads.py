"""A workflow's steps are gated from shared reads (gates/checks.SharedReads): every step's reads start at once,
each distinct read once, and every step's verdicts are the ones it gets gated alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl, answer_pvc_submit, fixture_json, review_answer

from kubectl_tao.core.errors import TaoError
from kubectl_tao.gates import checks
from kubectl_tao.gates.capacity import NODES_READ, PODS_READ
from kubectl_tao.gates.gaterequest import SUBMIT, GateRequest
from kubectl_tao.k8s.kubectl import Kubectl

FIVE = """\
apiVersion: kubectl-tao/v1
kind: Workflow
metadata: {name: chain}
defaults: {image: "busybox:1.36", pvc: data, gpus: 1, network-arch: real}
steps:
- {name: train, action: train, command: "run ${train.results}"}
- {name: evaluate, action: evaluate, when: train.acc >= 0.5, command: "eval ${train.results}"}
- {name: prune, action: prune, command: "prune ${evaluate.results}"}
- {name: retrain, action: train, command: "run ${retrain.results}"}
- {name: export, action: export, gpus: 0, command: "export ${retrain.results}"}
"""


def calls_of(fake: FakeKubectl, *head: str) -> int:
    return sum(1 for argv in fake.argvs() if head[0] in argv and argv[argv.index(head[0]):][: len(head)] == list(head))


def test_a_five_step_run_reads_the_nodes_pods_and_pvc_once_and_dry_runs_each_step(
    cli: Any, fake_kubectl: FakeKubectl, tmp_path: Path, tao_env: Path
) -> None:
    fake_kubectl.on("create", "-f", stdout="Job x 0b9b6c1e-1111-2222-3333-444455556666\n")
    fake_kubectl.on("patch", "-f", "-", stdout="serviceaccount/x\n")
    answer_pvc_submit(fake_kubectl)
    path = tmp_path / "five.yaml"
    path.write_text(FIVE, encoding="utf-8")
    code, out, err = cli("workflow", "run", str(path), "-o", "json")
    assert code == 0, err
    assert len(json.loads(out)["steps"]) == 5
    assert calls_of(fake_kubectl, *NODES_READ) == 1
    assert calls_of(fake_kubectl, *PODS_READ) == 1
    assert calls_of(fake_kubectl, "get", "persistentvolumeclaim/data") == 1
    dry_runs = [argv for argv in fake_kubectl.argvs() if "--dry-run=server" in argv]
    assert len(dry_runs) == 5  # each step's own objects, with its permission reviews
    creates = [argv for argv in fake_kubectl.argvs() if argv[:2] == ["create", "-f"] and argv not in dry_runs]
    # The reads (nodes, pods, PVC), the 5 dry runs, the review of the run's own permissions; the RBAC and 5 step
    # creates; the RBAC's owners.
    assert len(creates) == 6 and len(fake_kubectl.argvs()) == 3 + 5 + 1 + 6 + 1


def cluster(fake: FakeKubectl) -> None:
    review, granted = review_answer()
    fake.on(*review, stdout=granted)
    fake.on("version", data=fixture_json("version-gke-1.30.json"))
    holding = {"kind": "Pod", "metadata": {"name": "other", "namespace": "team"},  # 6 GPUs of gpu-node-0 in use
               "spec": {"nodeName": "gpu-node-0", "containers": [{"name": "c", "resources": {
                   "requests": {"nvidia.com/gpu": "6"}, "limits": {"nvidia.com/gpu": "6"}}}]},
               "status": {"phase": "Running"}}
    fake.capacity({"kind": "List", "items": [*fixture_json("nodes-2x8.json")["items"], holding]})
    fake.on("get", "persistentvolumeclaim/data", stdout="PersistentVolumeClaim data Bound \n")
    fake.on("get", "persistentvolumeclaim/pending", stdout="PersistentVolumeClaim pending Pending \n")
    fake.on("get", "persistentvolumeclaim/gone", stderr='persistentvolumeclaims "gone" not found', rc=1)


REQUESTS = [
    GateRequest(SUBMIT, "tao", gpus=1, pvc="data"),
    GateRequest(SUBMIT, "tao", gpus=8, pvc="data"),  # fits the free node whole
    GateRequest(SUBMIT, "tao", gpus=4, pvc="data"),  # fits beside the pod in use
    GateRequest(SUBMIT, "tao", gpus=8, nodes=2, gang_mode="off", pvc="data"),  # must queue: one node is in use
    GateRequest(SUBMIT, "tao", gpus=16, pvc="data"),  # no node has 16 GPUs: never fits
    GateRequest(SUBMIT, "tao", gpus=0, pvc="pending"),  # a PVC not bound: refused
    GateRequest(SUBMIT, "tao", gpus=1, pvc="data", image="nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt"),  # a warning
    GateRequest(SUBMIT, "tao", gpus=2, pvc="gone"),  # a PVC that does not exist: refused
    GateRequest(SUBMIT, "tao", gpus=1, pvc="data", min_version=(1, 99), min_version_feature="a feature"),
    GateRequest(SUBMIT, "tao", gpus=1, pvc="data", min_version=(1, 24), min_version_feature="Job suspend"),
    GateRequest(SUBMIT, "tao", gpus=4, node_selector={"nvidia.com/gpu.product": "H100"}),
]


def outcome(judged: Any) -> Any:
    """What submit acts on: the refusal (its class and line), or the fit, the warnings and the gang mechanism."""
    try:
        gates = judged()
    except TaoError as exc:
        return ("refused", type(exc).__name__, exc.message)
    return ("passed", gates.fit, list(gates.warnings), gates.mechanism.to_dict())


def test_every_step_gated_from_shared_reads_gets_the_verdicts_it_gets_alone(
    fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster(fake_kubectl)
    kc = Kubectl()
    alone = []
    for request in REQUESTS:
        alone.append(outcome(lambda request=request: checks.for_submit(kc, request, [])))
    alone_calls = len(fake_kubectl.argvs())
    fake_kubectl.calls.clear()

    shared = checks.SharedReads(kc)
    runs = [checks.Run(kc, request, shared) for request in REQUESTS]  # every read started before any judging
    together = [outcome(lambda run=run: checks.judge_submit(run, [])) for run in runs]

    assert together == alone
    kinds = {entry[0] for entry in alone}
    assert kinds == {"refused", "passed"}  # both kinds of outcome are compared
    assert any(entry[0] == "passed" and entry[2] for entry in alone)  # and a warning
    # The distinct first reads, once each: the nodes, the pods, the version, three PVCs and two sets of reviews
    # (a multi-node job also needs Services); a step's follow-up read (the DRA devices of the two that never fit
    # and of the one that must queue) stays its own.
    dra = [argv for argv in fake_kubectl.argvs() if argv[:1] == ["get"] and "resourceslices" in argv[1]]
    assert len(dra) == 3 and len(fake_kubectl.argvs()) - len(dra) == 8 < alone_calls


def test_reads_that_differ_are_not_shared(fake_kubectl: FakeKubectl) -> None:
    cluster(fake_kubectl)
    kc = Kubectl()
    shared = checks.SharedReads(kc)
    one = shared.start_many({"refs": (["get", "persistentvolumeclaim/data"], {"check": False})})
    other = shared.start_many({"refs": (["get", "persistentvolumeclaim/gone"], {"check": False})})
    first, second = one.result("refs"), other.result("refs")
    assert not isinstance(first, TaoError) and "data Bound" in first.stdout
    assert not isinstance(second, TaoError) and second.returncode == 1
    assert len(fake_kubectl.argvs()) == 2


QUEUED = [
    GateRequest(SUBMIT, "tao", gpus=1, pvc="data", queue="team"),
    GateRequest(SUBMIT, "tao", gpus=4, pvc="data", queue="team"),
    GateRequest(SUBMIT, "tao", gpus=12, pvc="data", queue="team"),  # more than the ClusterQueue has free
    GateRequest(SUBMIT, "tao", gpus=1, pvc="data", queue="other"),  # no such LocalQueue: refused
]


def test_queued_steps_read_their_clusterqueue_once_and_get_the_verdicts_they_get_alone(
    fake_kubectl: FakeKubectl,
) -> None:
    cluster(fake_kubectl)
    fake_kubectl.on("get", "localqueues.kueue.x-k8s.io", data={"kind": "List", "items": [
        fixture_json("kueue-localqueue.json")]})
    fake_kubectl.on("get", "clusterqueues.kueue.x-k8s.io", data=fixture_json("kueue-clusterqueue.json"))
    kc = Kubectl()
    alone = [outcome(lambda request=request: checks.for_submit(kc, request, [])) for request in QUEUED]
    cq_read = ["get", "clusterqueues.kueue.x-k8s.io", "team-cq", "-o", "json"]
    assert fake_kubectl.argvs().count(cq_read) == 3  # each queued step alone reads it
    fake_kubectl.calls.clear()

    shared = checks.SharedReads(kc)
    runs = [checks.Run(kc, request, shared) for request in QUEUED]
    together = [outcome(lambda run=run: checks.judge_submit(run, [])) for run in runs]

    assert together == alone
    assert {entry[0] for entry in alone} == {"refused", "passed"}
    assert fake_kubectl.argvs().count(cq_read) == 1  # round trip 2 of every step that asks it alike: one read


def test_a_failed_shared_follow_up_read_is_each_steps_own_refusal(fake_kubectl: FakeKubectl) -> None:
    fake_kubectl.on("get", "clusterqueues.kueue.x-k8s.io", rc=1,
                    stderr='Error from server (NotFound): clusterqueues.kueue.x-k8s.io "team-cq" not found')
    shared = checks.SharedReads(Kubectl())
    for _ in range(2):
        with pytest.raises(TaoError, match="not found"):
            shared.json(["get", "clusterqueues.kueue.x-k8s.io", "team-cq"], namespaced=False)
    assert len(fake_kubectl.argvs()) == 1
