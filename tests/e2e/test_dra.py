"""DRA GPUs on the real local control plane (resource.k8s.io/v1; DRAExtendedResource GA in 1.37, on in 1.36).

The test publishes what a GPU driver would: two KWOK nodes with no nvidia.com/gpu allocatable, one
ResourceSlice of driver gpu.nvidia.com per node (4 GPUs and a MIG device each), and a DeviceClass that serves
nvidia.com/gpu. A job submitted as usual (nvidia.com/gpu limits) then gets devices from the real scheduler,
through the extended-resource claims it creates. Every cluster-scoped object is removed afterwards, so the
other tests see the usual two device-plugin nodes only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from support.cluster import Tao, submitted_id, unique_name, wait_for

pytestmark = pytest.mark.e2e

GPUS_PER_NODE = 4
STAY = {"kwok.kubectl-tao.io/stay-running": "true"}


@dataclass
class DraNodes:
    names: list[str]
    label: str  # KEY=VALUE every DRA node carries, for --node-selector
    device_class: str


def _node(name: str, key: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"kubernetes.io/hostname": name, "type": "kwok", key: value},
        },
        "status": {
            "addresses": [{"address": "127.0.0.1", "type": "InternalIP"}],
            "allocatable": {"cpu": "96", "memory": "1Ti", "pods": "110"},
            "capacity": {"cpu": "96", "memory": "1Ti", "pods": "110"},
        },
    }


def _device(name: str, kind: str) -> dict[str, Any]:
    return {"name": name, "attributes": {"type": {"string": kind}, "productName": {"string": "NVIDIA H200"}}}


def _slice(node: str) -> dict[str, Any]:
    devices = [_device(f"gpu-{i}", "gpu") for i in range(GPUS_PER_NODE)] + [_device("mig-0", "mig")]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def _device_class(name: str) -> dict[str, Any]:
    expression = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}], "extendedResourceName": "nvidia.com/gpu"},
    }


@pytest.fixture()
def dra(tao: Tao) -> Iterator[DraNodes]:
    suffix = unique_name("dra")
    key, value = "kubectl-tao.io/e2e-dra", suffix
    names = [f"{suffix}-{i}" for i in range(2)]
    objects = [
        *(_node(n, key, value) for n in names),
        *(_slice(n) for n in names),
        _device_class(f"{suffix}-gpu"),
    ]
    tao.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    try:
        wait_for(
            lambda: all(
                tao.kubectl("get", "node", n, "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}").stdout
                == "True"
                for n in names
            ),
            60,
            message="the DRA nodes to be Ready",
        )
        yield DraNodes(names, f"{key}={value}", f"{suffix}-gpu")
    finally:
        # Pods first (their claims go with them), then the cluster-scoped objects this fixture made.
        tao.kubectl("delete", "jobs,pods", "--all", "--wait=true", "--timeout=60s", check=False)
        tao.kubectl("delete", "deviceclass", f"{suffix}-gpu", "--ignore-not-found", check=False)
        tao.kubectl("delete", "resourceslices", *(f"{n}-gpu" for n in names), "--ignore-not-found", check=False)
        tao.kubectl("delete", "nodes", *names, "--ignore-not-found", check=False)


def gpus(t: Tao) -> dict[str, Any]:
    result = t("gpus", "-o", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def rows(data: dict[str, Any], names: list[str]) -> dict[str, tuple[str, int, int, int]]:
    wanted = [n for n in data["nodes"] if n["name"] in names]
    return {n["name"]: (n["source"], n["total"], n["allocated"], n["free"]) for n in wanted}


def fit(t: Tao, d: DraNodes, *args: str) -> tuple[int, dict[str, Any]]:
    result = t("fit", "--node-selector", d.label, *args, "-o", "json")
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else {}


def extended_claims(t: Tao) -> list[dict[str, Any]]:
    items = json.loads(t.kubectl("get", "resourceclaims", "-o", "json").stdout)["items"]
    annotation = "resource.kubernetes.io/extended-resource-claim"
    return [c for c in items if (c["metadata"].get("annotations") or {}).get(annotation) == "true"]


def test_scheduler_allocated_dra_gpus_are_counted_by_gpus_and_the_fit_gate(tao: Tao, dra: DraNodes) -> None:
    before = gpus(tao)
    assert rows(before, dra.names) == {n: ("dra", 4, 0, 4) for n in dra.names}  # the MIG device is no GPU
    assert before["dra"]["deviceClass"] == dra.device_class
    code, verdict = fit(tao, dra, "--gpus", "4", "--nodes", "2")
    assert (code, verdict["verdict"]) == (0, "fits"), verdict  # the old gate said "never": no allocatable
    assert sorted(verdict["chosen"]) == sorted(dra.names)
    code, verdict = fit(tao, dra, "--gpus", "5")
    assert (code, verdict["verdict"]) == (4, "never") and "4" in verdict["message"]

    rid = submitted_id(tao.submit("--nodes", "2", "--node-selector", dra.label, gpus=3, annotations=STAY))
    wait_for(lambda: json.loads(tao("status", rid, "-o", "json").stdout)["state"] == "RUNNING", 60)
    wait_for(lambda: len(extended_claims(tao)) == 2, 30, message="two extended-resource claims")
    for claim in extended_claims(tao):
        results = claim["status"]["allocation"]["devices"]["results"]
        assert len(results) == 3 and {r["driver"] for r in results} == {"gpu.nvidia.com"}
        assert all(r["device"].startswith("gpu-") for r in results)

    during = gpus(tao)
    assert rows(during, dra.names) == {n: ("dra", 4, 3, 1) for n in dra.names}
    assert {"namespace": tao.namespace, "gpus": 6} in during["namespaces"]  # not 12: the request and its claim
    code, verdict = fit(tao, dra, "--gpus", "2")
    assert (code, verdict["verdict"]) == (1, "queue"), verdict
    code, verdict = fit(tao, dra, "--gpus", "1", "--nodes", "2")
    assert (code, verdict["verdict"]) == (0, "fits"), verdict

    assert tao("cancel", rid).returncode == 0
    wait_for(lambda: rows(gpus(tao), dra.names) == {n: ("dra", 4, 0, 4) for n in dra.names}, 60,
             message="the devices to be free again")


def test_a_pending_job_on_busy_dra_gpus_is_explained_as_short_of_gpus(tao: Tao, dra: DraNodes) -> None:
    holder = submitted_id(tao.submit("--nodes", "2", "--node-selector", dra.label, gpus=3, annotations=STAY))
    wait_for(lambda: json.loads(tao("status", holder, "-o", "json").stdout)["state"] == "RUNNING", 60)
    waiting = tao.submit("--node-selector", dra.label, gpus=2)
    assert "queue:" in waiting.stderr  # the gate warns, it does not refuse
    rid = submitted_id(waiting)

    def pending_explained() -> dict[str, Any] | None:
        data = json.loads(tao("explain", rid, "-o", "json").stdout)
        return data if data["findings"] else None

    data = wait_for(pending_explained, 60, message="the scheduler to refuse the pod")
    codes = [f["code"] for f in data["findings"]]
    assert "insufficient-gpu" in codes, data
    assert "no-gpu-capacity" not in codes


def test_without_a_serving_class_dra_gpus_are_listed_but_jobs_are_refused_with_the_fix(
    tao: Tao, dra: DraNodes
) -> None:
    tao.kubectl("delete", "deviceclass", dra.device_class)
    data = gpus(tao)
    assert rows(data, dra.names) == {n: ("dra", 4, 0, 4) for n in dra.names}
    assert data["dra"]["deviceClass"] is None
    code, verdict = fit(tao, dra, "--gpus", "1")
    assert code == 4 and verdict["verdict"] == "never"
    assert "extendedResourceName" in verdict["message"] and "GPU Operator" not in verdict["message"]
    refused = tao.submit("--node-selector", dra.label, gpus=1)
    assert refused.returncode == 4 and "extendedResourceName" in refused.stderr
    assert tao.leftovers() == []


def test_a_non_gpu_device_class_is_refused_with_exit_2_and_nothing_created(tao: Tao, dra: DraNodes) -> None:
    mig = f"{dra.device_class}-mig"
    tao.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": mig},
        "spec": {"selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].type == 'mig' && "
                                                      "device.driver == 'gpu.nvidia.com'"}}]},
    }))
    try:
        result = tao("gpus", "--device-class", mig)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr.startswith(f"error: --device-class {mig}: not a GPU DeviceClass")
        assert result.stderr.count("\n") == 1
        ok = tao("gpus", "--device-class", dra.device_class, "-o", "json")
        assert ok.returncode == 0 and rows(json.loads(ok.stdout), dra.names)[dra.names[0]] == ("dra", 4, 0, 4)
    finally:
        tao.kubectl("delete", "deviceclass", mig, "--ignore-not-found", check=False)
