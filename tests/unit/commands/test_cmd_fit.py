"""`kubectl tao fit`: the verdict over recorded kubectl JSON, its exit codes and its kubectl calls."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl, fixture_json

from kubectl_tao.gates.capacity import NODES_READ, PODS_READ
from kubectl_tao.gates.gpuinventory import DRA_READ

NO_KUEUE = 'error: the server doesn\'t have a resource type "localqueues"'


def cluster(nodes: str = "nodes-2x8.json", pods: str = "pods-busy.json") -> dict[str, Any]:
    return {"kind": "List", "items": fixture_json(nodes)["items"] + fixture_json(pods)["items"]}


def without_kueue(fake: FakeKubectl, nodes: str = "nodes-2x8.json", pods: str = "pods-busy.json") -> None:
    fake.capacity(cluster(nodes, pods))
    fake.on(*DRA_READ[:2], data={"kind": "List", "items": []})
    fake.on("get", "localqueues.kueue.x-k8s.io", stderr=NO_KUEUE, rc=1)


def test_fits_now_exits_0_and_names_the_best_fit_node(cli: Any, fake_kubectl: FakeKubectl) -> None:
    without_kueue(fake_kubectl)
    code, out, err = cli("fit", "--gpus", "4")
    assert code == 0
    assert out == "fits: 1 x 4 nvidia.com/gpu on gpu-node-1 (6 free)\n"
    assert err == ""


def test_busy_nodes_queue_with_exit_1(cli: Any, fake_kubectl: FakeKubectl) -> None:
    without_kueue(fake_kubectl)
    code, out, _ = cli("fit", "--gpus", "8", "--nodes", "2")
    assert code == 1
    assert out.startswith("queue: 2 x 8 nvidia.com/gpu: 2 nodes are big enough but only 0 have 8 free now")


def test_too_big_for_any_node_never_fits_with_exit_4(cli: Any, fake_kubectl: FakeKubectl) -> None:
    without_kueue(fake_kubectl)
    code, out, _ = cli("fit", "--gpus", "16")
    assert code == 4
    assert "never: 1 x 16 nvidia.com/gpu needs a node with >= 16 nvidia.com/gpu" in out


def test_cluster_without_gpus_never_fits_and_names_the_gpu_operator(cli: Any, fake_kubectl: FakeKubectl) -> None:
    without_kueue(fake_kubectl, nodes="nodes-cpu-only.json")
    code, out, _ = cli("fit", "--gpus", "1")
    assert code == 4
    assert "GPU Operator" in out


def test_gpu_taint_is_tolerated_by_default(cli: Any, fake_kubectl: FakeKubectl) -> None:
    without_kueue(fake_kubectl, nodes="nodes-mixed.json")
    code, out, _ = cli("fit", "--gpus", "8", "--gpu-product", "NVIDIA-H100-80GB-HBM3")
    assert (code, out) == (0, "fits: 1 x 8 nvidia.com/gpu on h100-0 (8 free)\n")


def test_node_selector_and_extra_toleration_are_applied(cli: Any, fake_kubectl: FakeKubectl) -> None:
    without_kueue(fake_kubectl)
    code, out, _ = cli("fit", "--gpus", "1", "--node-selector", "pool=none", "--toleration", "dedicated=ml:NoSchedule")
    assert code == 4
    assert "not matching the node selector" in out


def test_json_output_carries_the_verdict(cli: Any, fake_kubectl: FakeKubectl) -> None:
    without_kueue(fake_kubectl)
    code, out, _ = cli("fit", "--gpus", "2", "--nodes", "2", "-o", "json")
    data = json.loads(out)
    assert code == 0
    assert data["verdict"] == "fits"
    assert data["chosen"] == ["gpu-node-0", "gpu-node-1"]
    assert data["namespace"] == "tao-jobs" and data["localQueue"] is None and data["quota"] is None


# What `fit -n team` reads at once: the nodes, the first page of pods and the namespace's LocalQueues.
ROUND_ONE = [NODES_READ, PODS_READ, ["get", "localqueues.kueue.x-k8s.io", "-n", "team", "-o", "json"]]


def test_one_round_trip_nodes_pods_and_queue_when_the_device_plugins_gpus_fit(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    without_kueue(fake_kubectl)
    code, _, _ = cli("fit", "--gpus", "4", "-n", "team")
    assert code == 0
    assert sorted(fake_kubectl.argvs()) == sorted(ROUND_ONE)


def test_dra_devices_are_read_only_when_the_device_plugins_gpus_do_not_fit(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    without_kueue(fake_kubectl)
    code, _, _ = cli("fit", "--gpus", "64", "-n", "team")
    assert code == 4
    argvs = fake_kubectl.argvs()
    assert argvs.count(DRA_READ) == 1
    # a follow-up read, started once the nodes and pods showed the device plugins short (beside the other reads)
    assert argvs.index(DRA_READ) > max(argvs.index(NODES_READ), argvs.index(PODS_READ))
    assert sorted(argv for argv in argvs if argv != DRA_READ) == sorted(ROUND_ONE)


def _kueue(fake: FakeKubectl, used: int | None = None) -> None:
    fake.capacity(cluster())
    localqueue = fixture_json("kueue-localqueue.json")
    fake.on("get", "localqueues.kueue.x-k8s.io", data={"kind": "List", "items": [localqueue]})
    clusterqueue = copy.deepcopy(fixture_json("kueue-clusterqueue.json"))
    if used is not None:
        for flavor in clusterqueue["status"]["flavorsReservation"]:
            for resource in flavor["resources"]:
                if resource["name"] == "nvidia.com/gpu":
                    resource["total"] = str(used)
    fake.on("get", "clusterqueues.kueue.x-k8s.io", data=clusterqueue)


def test_only_local_queue_quota_is_checked(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _kueue(fake_kubectl)
    code, out, _ = cli("fit", "--gpus", "4", "-o", "json")
    data = json.loads(out)
    assert code == 0
    assert data["localQueue"] == "team"
    assert data["quota"]["cluster_queue"] == "team-cq" and data["quota"]["nominal"] == 16
    assert data["quota"]["free"] == 8 and data["quota"]["flavors"] == [
        {"name": "default", "nominal": 16, "borrowing_limit": None, "used": 8, "admitted": 8, "borrowed": 0}
    ]
    assert "using LocalQueue team, the only one in namespace tao-jobs" in data["notes"]
    assert ["get", "clusterqueues.kueue.x-k8s.io", "team-cq", "-o", "json"] in fake_kubectl.argvs()


def test_quota_in_use_queues_with_exit_1(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _kueue(fake_kubectl, used=14)
    code, out, err = cli("fit", "--gpus", "4")
    assert code == 1
    assert "ClusterQueue team-cq has 14 of 16 nvidia.com/gpu reserved in flavor default (2 unused)" in out
    assert "note: using LocalQueue team" in err


def test_request_above_the_quota_ceiling_never_fits(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _kueue(fake_kubectl)
    code, out, _ = cli("fit", "--gpus", "8", "--nodes", "3")
    assert code == 4
    assert "ClusterQueue team-cq can admit at most 16" in out


def test_unknown_queue_is_a_usage_error(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _kueue(fake_kubectl)
    code, out, err = cli("fit", "--gpus", "1", "--queue", "nope")
    assert code == 2 and out == ""
    assert err == (
        "error: --queue nope: no LocalQueue 'nope' in namespace tao-jobs (found: team); "
        "`kubectl get localqueues.kueue.x-k8s.io -n tao-jobs` lists them\n"
    )


def test_queue_on_a_cluster_without_kueue_is_a_usage_error(cli: Any, fake_kubectl: FakeKubectl) -> None:
    without_kueue(fake_kubectl)
    code, _, err = cli("fit", "--gpus", "1", "--queue", "q")
    assert code == 2
    assert "--queue q: this cluster has no Kueue" in err


def test_a_local_queue_whose_cluster_queue_is_missing_is_a_usage_error(cli: Any, fake_kubectl: FakeKubectl) -> None:
    fake_kubectl.capacity(cluster())
    fake_kubectl.on("get", "localqueues.kueue.x-k8s.io", data={"kind": "List", "items": [
        fixture_json("kueue-localqueue.json")]})
    fake_kubectl.on("get", "clusterqueues.kueue.x-k8s.io", rc=1,
                    stderr='Error from server (NotFound): clusterqueues.kueue.x-k8s.io "team-cq" not found')
    code, out, err = cli("fit", "--gpus", "1", "--queue", "team")
    assert code == 2 and out == ""
    assert err == (
        "error: --queue team: LocalQueue team points at ClusterQueue team-cq, which does not exist; Kueue admits "
        "nothing from it (`kubectl get clusterqueues.kueue.x-k8s.io` lists them)\n"
    )
    code, _, err = cli("fit", "--gpus", "1")  # picked without --queue: a note, not an error
    assert code == 0 and "Kueue quota not checked: cannot read ClusterQueue team-cq" in err


def test_forbidden_localqueues_leave_a_note_not_an_error(cli: Any, fake_kubectl: FakeKubectl) -> None:
    fake_kubectl.capacity(cluster())
    fake_kubectl.on(
        "get", "localqueues.kueue.x-k8s.io", rc=1,
        stderr='Error from server (Forbidden): localqueues.kueue.x-k8s.io is forbidden: User "u" cannot list',
    )
    code, out, err = cli("fit", "--gpus", "4")
    assert code == 0 and out.startswith("fits: ")
    assert err.startswith("note: Kueue quota not checked: cannot list localqueues.kueue.x-k8s.io in tao-jobs")


def test_unreachable_cluster_exits_3(cli: Any, fake_kubectl: FakeKubectl) -> None:
    refused = "The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?"
    fake_kubectl.on("get", stderr=refused, rc=1)
    code, out, err = cli("fit", "--gpus", "1")
    assert code == 3 and out == ""
    assert err.startswith("error: cluster unreachable:")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["fit"], "Missing option '--gpus'"),
        (["fit", "--gpus", "-1"], "--gpus"),
        (["fit", "--gpus", "1", "--nodes", "0"], "--nodes"),
        (["fit", "--gpus", "1", "-o", "wide"], "-o/--output: unknown format 'wide'"),
        (["fit", "--gpus", "1", "--node-selector", "novalue"], "--node-selector #1 must look like KEY=VALUE"),
        (["fit", "--gpus", "1", "--toleration", "k:Sometimes"], "--toleration #1: toleration 0 effect must"),
    ],
)
def test_bad_flags_are_usage_errors(cli: Any, fake_kubectl: FakeKubectl, argv: list[str], message: str) -> None:
    code, out, err = cli(*argv)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and message in err
    assert fake_kubectl.calls == []


# ------------------------------------------------------------------------------------------- --topology, health


def _racked(fake: FakeKubectl, *, xid_on: str | None = None) -> None:
    """The 2x8 cluster with both GPU nodes in rack r1 (gpu-node-1 optionally marked XidCriticalError)."""
    data = cluster()
    for item in data["items"]:
        if item.get("kind") == "Node" and item["metadata"]["name"].startswith("gpu-node"):
            item["metadata"]["labels"]["example.com/rack"] = "r1"
            if item["metadata"]["name"] == xid_on:
                item["status"]["conditions"].append(
                    {"type": "XidCriticalError", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}
                )
    fake.capacity(data)
    fake.on(*DRA_READ[:2], data={"kind": "List", "items": []})


def test_topology_label_no_node_carries_is_exit_2(cli: Any, fake_kubectl: FakeKubectl) -> None:
    without_kueue(fake_kubectl)
    code, out, err = cli("fit", "--gpus", "1", "--nodes", "2", "--topology", "example.com/rack")
    assert (code, out) == (2, "")
    assert err.startswith("error: --topology example.com/rack: no node carries the label example.com/rack")
    assert err.count("\n") == 1


def test_topology_judges_the_domain(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _racked(fake_kubectl)
    fake_kubectl.on("get", "localqueues.kueue.x-k8s.io", stderr=NO_KUEUE, rc=1)
    code, out, _ = cli("fit", "--gpus", "2", "--nodes", "2", "--topology", "example.com/rack", "-o", "json")
    data = json.loads(out)
    assert code == 0 and data["topology"]["label"] == "example.com/rack" and data["topology"]["mode"] == "required"
    assert data["topology"]["domains"][0]["value"] == "r1"
    assert "in one example.com/rack domain" in data["message"]


def test_an_unhealthy_node_is_left_out_and_named(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _racked(fake_kubectl, xid_on="gpu-node-1")
    fake_kubectl.on("get", "localqueues.kueue.x-k8s.io", stderr=NO_KUEUE, rc=1)
    code, out, _ = cli("fit", "--gpus", "2")
    assert code == 0
    assert out.startswith("fits: 1 x 2 nvidia.com/gpu on gpu-node-0")
    assert "1 node left out as unhealthy: gpu-node-1 XidCriticalError since " in out


def test_a_queue_whose_flavor_names_no_topology_is_exit_2(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _racked(fake_kubectl)
    fake_kubectl.on("get", "localqueues.kueue.x-k8s.io", data={"kind": "List", "items": [
        fixture_json("kueue-localqueue.json")]})
    fake_kubectl.on("get", "clusterqueues.kueue.x-k8s.io", data=fixture_json("kueue-clusterqueue.json"))
    fake_kubectl.on("get", "resourceflavors.kueue.x-k8s.io,topologies.kueue.x-k8s.io", data={"kind": "List", "items": [
        {"kind": "ResourceFlavor", "metadata": {"name": "default"}, "spec": {}}]})
    code, out, err = cli("fit", "--gpus", "2", "--nodes", "2", "--queue", "team", "--topology", "example.com/rack")
    assert (code, out) == (2, "")
    assert err == (
        "error: --topology example.com/rack: no nvidia.com/gpu ResourceFlavor of ClusterQueue team-cq names a "
        "Topology (spec.topologyName; flavors: default), so Kueue cannot place the ranks by example.com/rack; ask "
        "the cluster admin for a topology-aware flavor, or drop --topology\n"
    )


def test_health_setting_that_cannot_be_read_is_exit_2(
    cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_kueue(fake_kubectl)
    monkeypatch.setenv("KUBECTL_TAO_GPU_HEALTH_SIGNALS", "label:x")
    code, _, err = cli("fit", "--gpus", "1")
    assert code == 2
    assert err.startswith("error: KUBECTL_TAO_GPU_HEALTH_SIGNALS: cannot read 'label:x'")
