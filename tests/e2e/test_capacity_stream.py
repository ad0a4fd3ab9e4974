"""The fit gate's streamed read against the real API server and kubectl: the answers reduced while they arrive,
cut into pieces as small as kubectl's chunks allow (each cut between two items of the server's own JSON),
equal the same answers read whole; the field selector leaves the unscheduled pod on the server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.cluster import Cluster, kubectl_json, wait_for

from kubectl_tao.gates import capacity, gatelists, gpuinventory
from kubectl_tao.k8s.kubectl import ClusterOptions, Kubectl

pytestmark = pytest.mark.e2e

STAY = {"kwok.kubectl-tao.io/stay-running": "true"}


def _pod(name: str, node: str | None, gpus: int) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": "10m"}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "busybox", "resources": resources}],
        "tolerations": [{"operator": "Exists"}],
    }
    if node:
        spec["nodeName"] = node
    else:  # never scheduled: no node carries this label
        spec["nodeSelector"] = {"kubectl-tao.io/no-such-node": "true"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": STAY}, "spec": spec}


def test_streamed_read_equals_the_whole_read(cluster: Cluster, namespace: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = kubectl_json("get", "nodes")["items"]
    gpu_node = next(n["metadata"]["name"] for n in nodes if "nvidia.com/gpu" in n["status"].get("allocatable", {})
                    and (n["metadata"].get("annotations") or {}).get("kwok.x-k8s.io/node") == "fake")  # simulated
    pods = [_pod(f"gpu-{i}", gpu_node, 1) for i in range(3)]
    pods += [_pod(f"cpu-{i}", gpu_node, 0) for i in range(3)] + [_pod("unscheduled", None, 2)]
    cluster.kubectl("create", "-f", "-", ns=namespace, input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                         "items": pods}))
    try:
        _compare(cluster, namespace, gpu_node, monkeypatch)
    finally:  # gone before the next test, which counts the GPUs in use (the namespace goes away later)
        cluster.kubectl("delete", "pods", "--all", "--grace-period=0", "--force", "--wait=true", ns=namespace,
                        timeout=120)


def _compare(cluster: Cluster, namespace: str, gpu_node: str, monkeypatch: pytest.MonkeyPatch) -> None:
    wait_for(lambda: all(p["status"].get("phase") == "Running" for p in kubectl_json("get", "pods", ns=namespace)[
        "items"] if p["spec"].get("nodeName")), 60, message="the bound pods Running")

    kc = Kubectl(ClusterOptions(kubeconfig=str(cluster.kubeconfig)), binary=str(cluster.bin_dir / "kubectl"))
    whole = capacity.read({"nodes": kc.run(capacity.NODES_READ, namespaced=False),
                           "pods": kc.run(capacity.PODS_READ, namespaced=False)})
    monkeypatch.setattr(gatelists, "PIECE_BYTES", 300)
    pieces: list[bool] = []  # per piece cut off an answer: whether it was JSON on its own
    real = gatelists._piece

    def piece(text: bytes, end: int, first: bool, what: str, signals: Any, found: Any) -> Any:
        alone = real(text, end, first, what, signals, found)
        pieces.append(alone)
        return alone

    monkeypatch.setattr(gatelists, "_piece", piece)
    before = kc.calls
    streamed = capacity.read(kc.run_many(capacity.calls()))

    # kubectl hands the answers on in chunks of several KiB; one cut per chunk, at an item boundary the server's
    # own JSON has
    assert kc.calls - before == 2 and pieces and all(pieces)
    assert [n["metadata"]["name"] for n in streamed.nodes["items"]] == [n["metadata"]["name"] for n in whole.nodes[
        "items"]]
    held = [gpuinventory.inventory(seen.nodes, seen.pods, None).namespaces.get(namespace) for seen in (whole, streamed)]
    assert held == [3, 3]  # the bound pods' GPUs; the unscheduled pod's 2 are not sent
    mine = {node: gpus for (node, ns), gpus in streamed.pods.per_namespace.items() if ns == namespace}
    assert mine == {gpu_node: 3}
