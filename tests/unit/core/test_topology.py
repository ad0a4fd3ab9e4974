"""--topology (core/topology.py): the flag, the fit gate's judgement per domain, the Kueue flavor check and
`gpus --by`."""

from __future__ import annotations

from typing import Any

import pytest

from kubectl_tao.core import contract
from kubectl_tao.core.errors import UsageError
from kubectl_tao.core.topology import Topology, check_label_key, flavor_problem, is_label_key, parse, unplaced_warning
from kubectl_tao.gates import gpufit, gpuinventory

RACK = "example.com/rack"


def node(name: str, rack: str | None, gpus: int = 8) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {RACK: rack} if rack else {}},
        "spec": {},
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def pod(node_name: str, gpus: int = 8) -> dict[str, Any]:
    return {"metadata": {"namespace": "ml"}, "spec": {"nodeName": node_name, "containers": [
        {"resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]}, "status": {"phase": "Running"}}


def cluster(*busy: str) -> list[gpufit.NodeGpus]:
    """Two racks of two 8-GPU nodes and a rack of one; BUSY nodes run an 8-GPU pod."""
    nodes = [node("a1", "r1"), node("a2", "r1"), node("b1", "r2"), node("b2", "r2"), node("c1", "r3")]
    return gpufit.node_gpus({"items": nodes}, {"items": [pod(name) for name in busy]})


# ------------------------------------------------------------------------------------------- the flag


def test_parse_reads_the_label_and_the_mode() -> None:
    assert parse(RACK) == Topology(RACK, True)
    assert parse(f"{RACK}:preferred") == Topology(RACK, False)
    assert parse(f"{RACK}:required") == Topology(RACK, True)
    assert parse(None) is None
    assert parse("kubernetes.io/hostname").text() == "kubernetes.io/hostname"


@pytest.mark.parametrize(
    "bad",
    ["", "a b", "rack:soon", "-rack", "x/", "Example.com/rack", "rack\n:preferred", "rack\n:required",
     "example.com\n/rack", "rack\x00:preferred"],
)
def test_a_bad_label_is_one_line_naming_the_flag(bad: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse(bad)
    assert caught.value.message.startswith(f"--topology {bad!r}: not a node label key")


def test_the_annotations_are_kueues() -> None:
    assert Topology(RACK).annotations() == {contract.KUEUE_REQUIRED_TOPOLOGY: RACK}
    assert Topology(RACK, False).annotations() == {contract.KUEUE_PREFERRED_TOPOLOGY: RACK}
    assert contract.KUEUE_REQUIRED_TOPOLOGY == "kueue.x-k8s.io/podset-required-topology"
    assert contract.KUEUE_PREFERRED_TOPOLOGY == "kueue.x-k8s.io/podset-preferred-topology"


# ------------------------------------------------------------------------------------------- fit


def test_fits_inside_one_rack_best_fit() -> None:
    verdict = gpufit.fit(cluster("a1"), 8, 2, topology=parse(RACK))
    assert verdict.verdict == gpufit.FITS
    assert verdict.chosen == ["b1", "b2"]
    assert f"in one {RACK} domain on b1 (8 free), b2 (8 free)" in verdict.message


def test_queue_when_no_rack_has_room_though_the_cluster_does() -> None:
    verdict = gpufit.fit(cluster("a1", "b2"), 8, 2, topology=parse(RACK))
    assert verdict.verdict == gpufit.QUEUE
    assert verdict.message.startswith(f"queue: 2 x 8 nvidia.com/gpu with --topology {RACK}: no {RACK} domain has 2")
    assert f"{RACK}=r1: 1 of 2 nodes with 8 free (8 GPUs free)" in verdict.message
    assert "the cluster has 3 such nodes free across domains" in verdict.message
    assert gpufit.fit(cluster("a1", "b2"), 8, 2).verdict == gpufit.FITS  # without --topology it fits now


def test_never_when_no_rack_is_big_enough() -> None:
    verdict = gpufit.fit(cluster(), 8, 3, topology=parse(RACK))
    assert verdict.verdict == gpufit.NEVER
    assert f"needs 3 nodes with >= 8 nvidia.com/gpu inside one {RACK} domain; the largest has 2" in verdict.message
    assert verdict.to_dict()["topology"]["domains"][0]["value"] in ("r1", "r2")


def test_preferred_fits_across_racks() -> None:
    verdict = gpufit.fit(cluster("a1", "b2"), 8, 2, topology=parse(f"{RACK}:preferred"))
    assert verdict.verdict == gpufit.FITS
    assert "no single" in verdict.message and "spread over several" in verdict.message


def test_an_unhealthy_node_is_no_room_in_its_rack() -> None:
    nodes = [n.replaced(health=[gpufit.gpuhealth.Unhealthy("XidCriticalError", "condition")]) if n.name == "b1"
             else n for n in cluster("a1")]
    verdict = gpufit.fit(nodes, 8, 2, topology=parse(RACK))
    assert verdict.verdict == gpufit.QUEUE
    assert "left out as unhealthy: b1 XidCriticalError" in verdict.message


def test_a_label_no_node_carries_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as caught:
        gpufit.fit(cluster(), 8, 2, topology=parse("example.com/block"))
    assert caught.value.message.startswith("--topology example.com/block: no node carries the label")


# ------------------------------------------------------------------------------------------- Kueue's flavor


def flavor(name: str, topology: str | None) -> dict[str, Any]:
    spec = {"nodeLabels": {"pool": "gpu"}, **({"topologyName": topology} if topology else {})}
    return {"kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def topology_object(name: str, *levels: str) -> dict[str, Any]:
    return {"kind": "Topology", "metadata": {"name": name}, "spec": {"levels": [{"nodeLabel": lv} for lv in levels]}}


def test_a_flavor_naming_a_topology_with_the_level_passes() -> None:
    dc = topology_object("dc", RACK, "kubernetes.io/hostname")
    listed = {"items": [flavor("plain", None), flavor("tas", "dc"), dc]}
    assert flavor_problem(listed, ["plain", "tas"], "cq", Topology(RACK)) is None


def test_a_flavor_without_a_topology_is_named() -> None:
    problem = flavor_problem({"items": [flavor("plain", None)]}, ["plain"], "team-cq", Topology(RACK))
    assert problem is not None
    assert problem.startswith(f"--topology {RACK}: no nvidia.com/gpu ResourceFlavor of ClusterQueue team-cq names a "
                              "Topology (spec.topologyName; flavors: plain)")


def test_a_topology_without_the_level_names_its_levels() -> None:
    listed = {"items": [flavor("tas", "dc"), topology_object("dc", "example.com/block")]}
    problem = flavor_problem(listed, ["tas"], "cq", Topology(RACK))
    assert problem == (f"--topology {RACK}: Topology dc (ResourceFlavor tas) has the levels example.com/block, not "
                       f"{RACK}; name one of them")
    missing = flavor_problem({"items": [flavor("tas", "gone")]}, ["tas"], "cq", Topology(RACK))
    assert missing is not None and "names Topology gone, which does not exist" in missing


# ------------------------------------------------------------------------------------------- gpus --by


def test_gpus_by_groups_free_gpus_per_domain() -> None:
    nodes = {"items": [node("a1", "r1"), node("a2", "r1"), node("b1", "r2"), node("x", None, 4)]}
    inv = gpuinventory.inventory(nodes, {"items": [pod("a1", 6)]}, None, by=RACK)
    assert [(d["domain"], d["nodes"], d["free"], d["largestFree"]) for d in inv.domains()] == [
        ("r1", 2, 10, 8), ("r2", 1, 8, 8), ("<none>", 1, 4, 4)
    ]
    assert inv.to_dict()["by"] == RACK


@pytest.mark.parametrize("text", ["rack\n", "example.com/rack\r", "rack\x00", "a" * 317])
def test_a_label_key_is_the_whole_text(text: str) -> None:
    assert not is_label_key(text)
    with pytest.raises(UsageError) as caught:
        check_label_key(text, "--by")
    assert caught.value.message.startswith(f"--by {text!r}: not a node label key")
    assert "\n" not in caught.value.message
    assert check_label_key(RACK, "--by") == RACK


def test_only_a_preferred_topology_across_nodes_without_a_queue_is_warned_about() -> None:
    preferred = Topology(RACK, required=False)
    assert unplaced_warning(preferred, queue=None, nodes=2) == (
        f"--topology {RACK}:preferred without --queue: nothing places the ranks close together (Kueue's "
        "topology-aware scheduling needs --queue); the scheduler spreads them as it likes"
    )
    assert unplaced_warning(preferred, queue="gpu-queue", nodes=2) == ""
    assert unplaced_warning(preferred, queue=None, nodes=1) == ""
    assert unplaced_warning(Topology(RACK), queue=None, nodes=2) == ""
    assert unplaced_warning(None, queue=None, nodes=2) == ""
