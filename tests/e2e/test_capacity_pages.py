"""The fit gate's paged pods read against the real API server: `limit` is honoured with
resourceVersionMatch=NotOlderThan (served from the watch cache), every continue token is followed with the
same field selector, and the paged answer equals the one-answer read (resourceVersion=0). Pages of 2 pods:
this test's six bound pods alone span three pages."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.cluster import Cluster, kubectl_json, wait_for

from kubectl_tao.core import gpuinventory
from kubectl_tao.k8s import capacity
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


def test_paged_read_equals_the_one_answer_read(cluster: Cluster, namespace: str,
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
    nodes_answer = kc.run(capacity.NODES_READ, namespaced=False)
    whole = capacity.read({"nodes": nodes_answer, "pods": kc.run(capacity.PODS_READ, namespaced=False)})
    monkeypatch.setattr(capacity, "PAGE_SIZE", 2)
    before = kc.calls
    first = kc.run(capacity.pods_page_read(), namespaced=False)
    paged = capacity.read({"nodes": nodes_answer, "pods": first}, kc)

    assert whole.pages == 1 and paged.pages >= 3 and kc.calls - before == paged.pages
    held = [gpuinventory.inventory(seen.nodes, seen.pods, None).namespaces.get(namespace) for seen in (whole, paged)]
    assert held == [3, 3]  # the bound pods' GPUs; the unscheduled pod's 2 are not sent
    mine = [p for p in paged.pods["items"] if p["metadata"]["namespace"] == namespace]
    assert len(mine) == 3 and {p["spec"]["nodeName"] for p in mine} == {gpu_node}
