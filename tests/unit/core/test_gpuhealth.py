"""GPU health (gates/gpuhealth.py): the signals, their judge, and how fit, gpus and explain leave such nodes out."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from kubectl_tao.core.errors import UsageError
from kubectl_tao.diagnosis.diagnose import explain
from kubectl_tao.diagnosis.jobstate import JobStatus
from kubectl_tao.gates import gatelists, gpufit, gpuhealth, gpuinventory

NOW = datetime(2026, 12, 5, 7, 10, 0, tzinfo=UTC)
XID = {"type": "XidCriticalError", "status": "True", "reason": "Xid79", "lastTransitionTime": "2026-12-05T07:00:00Z"}


def node(name: str, gpus: int, *, conditions: list[dict[str, Any]] = (), capacity: int | None = None,
         taints: list[dict[str, Any]] | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"taints": taints} if taints else {},
        "status": {
            "allocatable": {"cpu": "8", "nvidia.com/gpu": str(gpus)},
            "capacity": {"cpu": "8", "nvidia.com/gpu": str(gpus if capacity is None else capacity)},
            "conditions": [{"type": "Ready", "status": "True"}, *conditions],
        },
    }


def nodes_list(*items: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": list(items)}


# ------------------------------------------------------------------------------------------- the judge


def test_a_true_condition_of_the_list_is_unhealthy_with_its_time() -> None:
    marks = gpuhealth.judge([{"type": "Ready", "status": "True"}, XID], [], 8, 8)
    assert [(m.signal, m.kind, m.since, m.detail) for m in marks] == [
        ("XidCriticalError", "condition", "2026-12-05T07:00:00Z", "Xid79")
    ]


def test_a_false_condition_is_healthy_and_eks_hardware_ready_false_is_not() -> None:
    assert gpuhealth.judge([{**XID, "status": "False"}], [], 8, 8) == []
    marks = gpuhealth.judge([{"type": "AcceleratedHardwareReady", "status": "False"}], [], 8, 8)
    assert [m.signal for m in marks] == ["AcceleratedHardwareReady"]
    assert gpuhealth.judge([{"type": "AcceleratedHardwareReady", "status": "True"}], [], 8, 8) == []


def test_allocatable_below_capacity_is_the_device_plugins_mark() -> None:
    (mark,) = gpuhealth.judge([], [], 6, 8)
    assert mark.kind == gpuhealth.ALLOCATABLE
    assert gpuhealth.text(mark) == "2 of 8 GPUs unhealthy (device plugin)"
    assert gpuhealth.judge([], [], 8, 8) == [] and gpuhealth.judge([], [], 8, None) == []


def test_the_setting_adds_conditions_and_taints() -> None:
    signals = gpuhealth.parse_signals(" taint:example.com/gpu-bad , condition:GpuDrained=False")
    assert signals[: len(gpuhealth.DEFAULT_SIGNALS)] == gpuhealth.DEFAULT_SIGNALS
    taint = {"key": "example.com/gpu-bad", "value": "x", "effect": "NoSchedule"}
    assert [m.signal for m in gpuhealth.judge([], [taint], 8, 8, signals)] == ["example.com/gpu-bad"]
    assert gpuhealth.judge([], [taint], 8, 8) == []  # not a default signal
    assert [m.signal for m in gpuhealth.judge([{"type": "GpuDrained", "status": "False"}], [], 8, 8, signals)] == [
        "GpuDrained"
    ]


@pytest.mark.parametrize("bad", ["label:x", "condition:", "taint:k=v", "condition:X=maybe", "X"])
def test_an_unreadable_setting_is_one_line_naming_it(bad: str) -> None:
    with pytest.raises(UsageError) as caught:
        gpuhealth.parse_signals(bad)
    assert caught.value.message.startswith(f"{gpuhealth.SETTING}: cannot read {bad!r}")
    assert "\n" not in caught.value.message


# ------------------------------------------------------------------------------------------- the reduced read


@pytest.mark.parametrize("fast", [True, False])
def test_the_reduced_nodes_carry_the_marks_on_both_decoders(fast: bool) -> None:
    text = json.dumps(nodes_list(node("ok", 8), node("xid", 8, conditions=[XID]), node("lost", 7, capacity=8),
                                 node("tainted", 8, taints=[{"key": "gpu.health/bad", "effect": "NoSchedule"}])))
    signals = gpuhealth.parse_signals("taint:gpu.health/bad")
    page = gatelists.reduce(text, "nodes", fast=fast, signals=signals)
    health = {item["metadata"]["name"]: [m["signal"] for m in item["health"]] for item in page.items}
    assert health == {"ok": [], "xid": ["XidCriticalError"], "lost": ["allocatable"], "tainted": ["gpu.health/bad"]}
    found = gpufit.node_gpus({"items": page.items}, {"items": []})
    assert {n.name: bool(n.health) for n in found} == {"ok": False, "xid": True, "lost": True, "tainted": True}


def test_whole_node_objects_are_judged_with_the_default_signals() -> None:
    found = gpufit.node_gpus(nodes_list(node("ok", 8), node("xid", 8, conditions=[XID])), {"items": []})
    assert [n.name for n in found if n.health] == ["xid"]
    assert found[1].health_text(NOW) == "XidCriticalError since 10m"


# ------------------------------------------------------------------------------------------- fit, gpus, explain


def test_fit_leaves_unhealthy_nodes_out_and_names_them() -> None:
    nodes = gpufit.node_gpus(nodes_list(node("a", 8), node("b", 8, conditions=[XID])), {"items": []})
    verdict = gpufit.fit(nodes, 8, 1, now=NOW)
    assert verdict.verdict == gpufit.FITS
    assert verdict.chosen == ["a"]
    assert verdict.message.endswith("; 1 node left out as unhealthy: b XidCriticalError since 10m")
    assert verdict.to_dict()["leftOut"] == [{"node": "b", "signal": "XidCriticalError since 10m"}]
    never = gpufit.fit(nodes, 8, 2, now=NOW)
    assert never.verdict == gpufit.NEVER
    assert "excluded: 1 node with an unhealthy GPU: b (XidCriticalError since 10m)" in never.message


def test_a_job_that_only_fits_on_the_unhealthy_node_waits_for_the_healthy_one() -> None:
    nodes = gpufit.node_gpus(
        nodes_list(node("a", 8), node("b", 8, conditions=[XID])),
        {"items": [{"metadata": {"namespace": "x"}, "spec": {"nodeName": "a", "containers": [
            {"resources": {"requests": {"nvidia.com/gpu": "8"}}}]}, "status": {"phase": "Running"}}]},
    )
    verdict = gpufit.fit(nodes, 8, 1, now=NOW)
    assert verdict.verdict == gpufit.QUEUE
    assert "left out as unhealthy: b" in verdict.message


def test_gpus_shows_the_mark_and_leaves_it_out_of_the_schedulable_total() -> None:
    inv = gpuinventory.inventory(nodes_list(node("a", 8), node("b", 8, capacity=8, conditions=[XID])),
                                 {"items": []}, None)
    assert [(r.name, r.health.split(" since ")[0]) for r in inv.nodes] == [("a", ""), ("b", "XidCriticalError")]
    assert inv.totals["free"] == 16 and inv.totals["freeSchedulable"] == 8
    assert inv.to_dict()["nodes"][1]["health"].startswith("XidCriticalError since ")


def test_explain_of_a_pending_job_names_the_nodes_left_out() -> None:
    nodes = gpufit.node_gpus(nodes_list(node("a", 8), node("gpu-node-3", 8, conditions=[XID])), {"items": []})
    status = JobStatus(state="PENDING", reason="Unschedulable", message="0/2 nodes are available")
    found = explain(status, [], [], nodes=nodes)
    finding = next(f for f in found if f.code == "unhealthy-gpu-nodes")
    assert finding.cause.startswith("1 node left out: gpu-node-3 XidCriticalError since ")
    assert "gpu-node-3: XidCriticalError Xid79" in finding.evidence
    assert "cordon" in finding.fix
