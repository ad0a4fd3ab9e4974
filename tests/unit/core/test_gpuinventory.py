"""gpuinventory: GPUs per node from device plugins and DRA, over JSON recorded from the local 1.36.3 cluster.

The recording (dra-nodes-pods.json, dra-objects.json): gpu-node-0 and gpu-node-1 offer 8 nvidia.com/gpu each
through a device plugin (gpu-node-1 tainted dedicated=ml:NoSchedule); dra-node-0 has no nvidia.com/gpu
allocatable and a ResourceSlice of driver gpu.nvidia.com with 4 GPUs and one MIG device; DeviceClass
gpu.nvidia.com serves nvidia.com/gpu. In namespace rec a pod asking nvidia.com/gpu: 3 runs on dra-node-0 (the
scheduler gave it an extended-resource claim of 3 devices) and one asking 2 runs on gpu-node-0.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from support.fake_kubectl import fixture_json

from kubectl_tao.core.errors import TaoError, UsageError
from kubectl_tao.gates import gpufit
from kubectl_tao.gates.gpuinventory import (
    DraGpus,
    DraNode,
    class_drivers,
    fit_nodes,
    gate_nodes,
    inventory,
    no_gpu_hint,
    not_gpu_class_reason,
    parse_dra,
    pick_device_class,
    read_dra,
)
from kubectl_tao.k8s.kubectl import Completed

GPU_TOLERATION = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def capacity(*, dra_only: bool = False) -> dict[str, Any]:
    data = copy.deepcopy(fixture_json("dra-nodes-pods.json"))
    if dra_only:  # the same cluster without its device-plugin nodes
        data["items"] = [
            i for i in data["items"] if not (i["kind"] == "Node" and i["metadata"]["name"].startswith("gpu-node-"))
        ]
    return data


def split(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A `get nodes,pods -o json` list as the two reads the gate makes: nodes, pods."""
    items = data["items"]
    return ({"items": [i for i in items if i["kind"] == "Node"]}, {"items": [i for i in items if i["kind"] == "Pod"]})


def dra_objects(*, with_class: bool = True) -> dict[str, Any]:
    data = copy.deepcopy(fixture_json("dra-objects.json"))
    if not with_class:
        data["items"] = [i for i in data["items"] if i["kind"] != "DeviceClass"]
    return data


def kinds(data: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [i for i in data["items"] if i["kind"] == kind]


def test_recorded_dra_node_counts_whole_gpus_minus_the_allocated_claim() -> None:
    dra = parse_dra(dra_objects())
    # the MIG device is not a whole GPU
    assert dra.nodes == {"dra-node-0": DraNode(total=4, allocated=3, product="NVIDIA H200")}
    assert dra.serving_class == "gpu.nvidia.com"
    assert dra.by_namespace == {"rec": 3}
    assert dra.off_node == 0


def test_dra_only_node_is_gpu_capacity_when_a_class_serves_nvidia_gpu() -> None:
    nodes = {n.name: n for n in fit_nodes(*split(capacity()), parse_dra(dra_objects()))}
    # requested comes from the claim (3), not from the pod's request on top of it (which would make 6)
    assert (nodes["dra-node-0"].allocatable, nodes["dra-node-0"].requested, nodes["dra-node-0"].free) == (4, 3, 1)
    assert (nodes["gpu-node-0"].allocatable, nodes["gpu-node-0"].requested) == (8, 2)


def test_dra_only_cluster_fits_queues_and_never_fits_by_its_devices() -> None:
    nodes = fit_nodes(*split(capacity(dra_only=True)), parse_dra(dra_objects()))
    fits = gpufit.fit(nodes, 1, 1, tolerations=GPU_TOLERATION)
    assert fits.message == "fits: 1 x 1 nvidia.com/gpu on dra-node-0 (1 free)"
    assert gpufit.fit(nodes, 2, 1, tolerations=GPU_TOLERATION).verdict == gpufit.QUEUE
    never = gpufit.fit(nodes, 8, 1, tolerations=GPU_TOLERATION)
    assert never.verdict == gpufit.NEVER and "the largest eligible node is dra-node-0: 4" in never.message


def test_without_a_serving_class_the_never_message_names_the_device_class_fix_not_the_gpu_operator() -> None:
    dra = parse_dra(dra_objects(with_class=False))
    assert dra.serving_class is None and dra.nodes["dra-node-0"].total == 4
    nodes = fit_nodes(*split(capacity(dra_only=True)), dra)
    verdict = gpufit.fit(nodes, 1, 1, tolerations=GPU_TOLERATION, no_gpu_hint=no_gpu_hint(dra))
    assert verdict.verdict == gpufit.NEVER
    assert "4 GPUs published through DRA (driver gpu.nvidia.com)" in verdict.message
    assert "spec.extendedResourceName: nvidia.com/gpu" in verdict.message
    assert "GPU Operator" not in verdict.message


def test_a_node_with_device_plugin_gpus_is_served_by_its_plugin_even_with_dra_devices() -> None:
    plugin = fit_nodes(*split(capacity()), None)
    dra = DraGpus({"gpu-node-0": DraNode(4, 0, "")}, ("gpu.nvidia.com",), "gpu.nvidia.com", {}, 0)
    node = next(n for n in gate_nodes(plugin, dra) if n.name == "gpu-node-0")
    assert (node.allocatable, node.requested) == (8, 2)


def test_inventory_adds_up_plugin_and_dra_per_node_and_per_namespace() -> None:
    inv = inventory(*split(capacity()), parse_dra(dra_objects()))
    rows = {r.name: r for r in inv.nodes}
    assert set(rows) == {"dra-node-0", "gpu-node-0", "gpu-node-1"}  # cpu-node-0 has no GPUs
    assert (rows["dra-node-0"].source, rows["dra-node-0"].total, rows["dra-node-0"].allocated) == ("dra", 4, 3)
    assert rows["dra-node-0"].product == "NVIDIA H200"
    assert (rows["gpu-node-0"].source, rows["gpu-node-0"].free) == ("device-plugin", 6)
    assert rows["gpu-node-0"].product == "NVIDIA-H100-80GB-HBM3"
    assert rows["gpu-node-1"].taints == ["dedicated=ml:NoSchedule"]
    assert inv.namespaces == {"rec": 5}
    assert inv.totals == {"nodes": 3, "total": 20, "allocated": 5, "free": 15, "freeSchedulable": 15}


def test_inventory_lists_dra_gpus_even_when_no_class_serves_nvidia_gpu() -> None:
    inv = inventory(*split(capacity()), parse_dra(dra_objects(with_class=False)))
    assert {r.name: r.free for r in inv.nodes}["dra-node-0"] == 1
    assert inv.dra_class is None


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    data = dra_objects()
    stale = copy.deepcopy(kinds(data, "ResourceSlice")[0])
    stale["metadata"]["name"] = "dra-node-0-gpu-old"
    stale["spec"]["pool"]["generation"] = 0
    stale["spec"]["devices"] = [{"name": f"old-{i}"} for i in range(8)]
    data["items"].append(stale)
    assert parse_dra(data).nodes["dra-node-0"].total == 4


def test_a_gpu_whose_mig_slice_is_allocated_is_busy() -> None:
    data = dra_objects()
    for claim in kinds(data, "ResourceClaim"):
        claim["status"]["allocation"]["devices"]["results"] = [
            {"request": "r", "driver": "gpu.nvidia.com", "pool": "dra-node-0", "device": "mig-0"}
        ]
    devices = kinds(data, "ResourceSlice")[0]["spec"]["devices"]
    for device in devices:
        if device["name"] in ("gpu-0", "mig-0"):
            device["consumesCounters"] = [{"counterSet": "gpu-0-counters", "counters": {}}]
    dra = parse_dra(data)
    assert dra.nodes["dra-node-0"] == DraNode(total=4, allocated=1, product="NVIDIA H200")
    assert dra.by_namespace == {}  # a MIG slice is not a whole GPU


def test_admin_access_allocations_do_not_hold_devices() -> None:
    data = dra_objects()
    for claim in kinds(data, "ResourceClaim"):
        for result in claim["status"]["allocation"]["devices"]["results"]:
            result["adminAccess"] = True
    assert parse_dra(data).nodes["dra-node-0"].allocated == 0


def test_devices_of_other_drivers_are_not_gpus() -> None:
    data = dra_objects()
    kinds(data, "ResourceSlice")[0]["spec"]["driver"] = "nic.example.com"
    assert parse_dra(data).nodes == {}


def test_network_attached_gpus_are_counted_apart() -> None:
    data = dra_objects()
    spec = kinds(data, "ResourceSlice")[0]["spec"]
    del spec["nodeName"]
    spec["allNodes"] = True
    dra = parse_dra(data)
    assert dra.nodes == {} and dra.off_node == 4


def test_the_serving_class_adds_its_driver() -> None:
    data = dra_objects()
    kinds(data, "ResourceSlice")[0]["spec"]["driver"] = "gpu.example.com"
    for claim in kinds(data, "ResourceClaim"):
        for result in claim["status"]["allocation"]["devices"]["results"]:
            result["driver"] = "gpu.example.com"
    serving = next(c for c in kinds(data, "DeviceClass") if c["metadata"]["name"] == "gpu.nvidia.com")
    serving["spec"]["selectors"] = [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]
    dra = parse_dra(data)
    assert dra.drivers == ("gpu.nvidia.com", "gpu.example.com")
    assert dra.nodes["dra-node-0"].allocated == 3


def test_gpu_and_non_gpu_device_classes() -> None:
    classes = {c["metadata"]["name"]: c for c in kinds(dra_objects(), "DeviceClass")}
    assert class_drivers(classes["mig.nvidia.com"]) == ("gpu.nvidia.com",)
    assert not_gpu_class_reason(classes["gpu.nvidia.com"]) == ""
    assert not_gpu_class_reason(classes["mig.nvidia.com"]) == "it selects devices of type mig, not whole GPUs"
    nic = {"metadata": {"name": "nic"}, "spec": {"selectors": [{"cel": {"expression": "device.driver == 'nic.x'"}}]}}
    assert not_gpu_class_reason(nic) == "it selects driver nic.x, not gpu.nvidia.com"
    assert not_gpu_class_reason({"metadata": {"name": "any"}, "spec": {}}) == "its selectors name no device driver"


def test_pick_device_class_refuses_a_missing_or_non_gpu_class_with_the_fix() -> None:
    classes = kinds(dra_objects(), "DeviceClass")
    assert pick_device_class(classes, "gpu.nvidia.com")["metadata"]["name"] == "gpu.nvidia.com"
    with pytest.raises(UsageError) as missing:
        pick_device_class(classes, "gpu.nvdia.com")
    assert missing.value.message == (
        "--device-class gpu.nvdia.com: no DeviceClass 'gpu.nvdia.com' on this cluster (found: gpu.nvidia.com, "
        "mig.nvidia.com); `kubectl get deviceclasses.v1.resource.k8s.io` lists them"
    )
    with pytest.raises(UsageError) as mig:
        pick_device_class(classes, "mig.nvidia.com")
    assert "not a GPU DeviceClass (it selects devices of type mig, not whole GPUs)" in mig.value.message
    assert mig.value.exit_code == 2 and "\n" not in mig.value.message


def test_device_class_restricts_the_counted_drivers() -> None:
    dra = parse_dra(dra_objects(), device_class="gpu.nvidia.com")
    assert dra.drivers == ("gpu.nvidia.com",) and dra.nodes["dra-node-0"].total == 4


def test_read_dra_without_the_dra_api_is_silent_but_other_errors_leave_a_note() -> None:
    no_api = TaoError('error: the server doesn\'t have a resource type "resourceslices"')
    assert read_dra(no_api) == (None, "")
    with pytest.raises(UsageError):
        read_dra(no_api, device_class="gpu.nvidia.com")
    dra, note = read_dra(TaoError("Error from server (Forbidden): resourceslices is forbidden"))
    assert dra is None and note.startswith("DRA GPUs not counted: cannot list")
    import json

    dra, note = read_dra(Completed(json.dumps(dra_objects()), "", 0))
    assert note == "" and dra is not None and dra.total == 4


@pytest.mark.parametrize("text", ['{"items":' + "[" * 100_000 + "]" * 100_000 + "}", '{"items":[' + "9" * 5000 + "]}"])
def test_read_dra_of_json_too_deep_or_too_long_a_number_leaves_a_note(text: str) -> None:
    assert read_dra(Completed(text, "", 0)) == (
        None, "DRA GPUs not counted: kubectl returned JSON nested too deep or with a number too long to read"
    )


_SHAPE_ANSWERED = "an API server never sends that: check the server or proxy the kubeconfig points at"


def _slice(data: dict[str, Any]) -> dict[str, Any]:
    return next(i for i in data["items"] if i["kind"] == "ResourceSlice")


def _claim(data: dict[str, Any]) -> dict[str, Any]:
    return next(i for i in data["items"] if i["kind"] == "ResourceClaim")


def _class(data: dict[str, Any]) -> dict[str, Any]:
    return next(i for i in data["items"] if i["kind"] == "DeviceClass")


@pytest.mark.parametrize(
    ("malform", "problem"),
    [
        (lambda d: _slice(d)["spec"].__setitem__("devices", {"gpu-0": {}}),
         "ResourceSlice {slice} has spec.devices of the wrong shape (an object, not a list of objects)"),
        (lambda d: _slice(d).__setitem__("spec", ["gpu-0"]),
         "ResourceSlice {slice} has spec of the wrong shape (a list, not an object)"),
        (lambda d: _slice(d)["spec"].__setitem__("pool", "pool-0"),
         "ResourceSlice {slice} has spec.pool of the wrong shape (a string, not an object)"),
        (lambda d: _slice(d)["spec"]["pool"].__setitem__("generation", int("9" * 40)),
         "ResourceSlice {slice} has spec.pool.generation of the wrong shape (a whole number past 2^63-1, not a "
         "whole number)"),
        (lambda d: _slice(d)["spec"].__setitem__("nodeName", ["dra-node-0"]),
         "ResourceSlice {slice} has spec.nodeName of the wrong shape (a list, not a string)"),
        (lambda d: _slice(d)["spec"]["devices"][0].__setitem__("attributes", ["type=gpu"]),
         "ResourceSlice {slice} has spec.devices[0].attributes of the wrong shape (a list, not an object)"),
        (lambda d: _slice(d)["spec"]["devices"][1].__setitem__("consumesCounters", [{"counterSet": 3}]),
         "ResourceSlice {slice} has spec.devices[1].consumesCounters[0].counterSet of the wrong shape (a whole "
         "number, not a string)"),
        (lambda d: _claim(d)["status"].__setitem__("allocation", ["x"]),
         "ResourceClaim {claim} has status.allocation of the wrong shape (a list, not an object)"),
        (lambda d: _class(d)["spec"].__setitem__("selectors", "device.driver == 'gpu.nvidia.com'"),
         "DeviceClass {cls} has spec.selectors of the wrong shape (a string, not a list of objects)"),
    ],
)
def test_dra_objects_of_the_wrong_shape_are_named_in_one_line_never_a_crash(malform: Any, problem: str) -> None:
    import json

    data = dra_objects()
    names = {"slice": _slice(data)["metadata"]["name"], "claim": _claim(data)["metadata"]["name"],
             "cls": _class(data)["metadata"]["name"]}
    malform(data)
    expected = f"{problem.format(**names)}; {_SHAPE_ANSWERED}"
    with pytest.raises(TaoError) as caught:
        parse_dra(data)
    assert caught.value.message == expected
    # gpus and fit go on without the DRA GPUs, and say why; --device-class cannot
    assert read_dra(Completed(json.dumps(data), "", 0)) == (None, f"DRA GPUs not counted: {expected}")
    with pytest.raises(TaoError) as caught:
        read_dra(Completed(json.dumps(data), "", 0), device_class="gpu.nvidia.com")
    assert caught.value.message == f"--device-class gpu.nvidia.com: cannot read the DRA objects: {expected}"
