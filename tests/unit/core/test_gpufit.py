"""The GPU fit gate (gpufit.py) and the Kueue quota it counts (quota.py) over recorded and synthetic kubectl JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import FIXTURES as FIXTURES_ROOT

from kubectl_tao.core.errors import TaoError
from kubectl_tao.core.quantities import gpu_quantity
from kubectl_tao.gates import gpufit
from kubectl_tao.gates.gpufit import NodeGpus, fit
from kubectl_tao.gates.quota import QueueQuota, queue_quota

FIXTURES = FIXTURES_ROOT / "k8s"


def load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def gpu_node(name: str, alloc: int, used: int = 0, **kw: Any) -> NodeGpus:
    return NodeGpus(name=name, allocatable=alloc, requested=used, free=max(alloc - used, 0), **kw)


def node_json(name: str, gpus: int, *, ready: bool = True, labels: dict | None = None, taints: list | None = None,
              unschedulable: bool = False) -> dict:
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {
            "allocatable": {"cpu": "8", "nvidia.com/gpu": str(gpus)} if gpus else {"cpu": "8"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "Unknown"}],
        },
    }


def pod_json(node: str | None, gpus: int, phase: str = "Running", *, requests: bool = False) -> dict:
    resources: dict[str, Any] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    if requests:
        resources["requests"] = {"nvidia.com/gpu": str(gpus)}
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": resources}]}
    if node:
        spec["nodeName"] = node
    return {"kind": "Pod", "metadata": {"name": f"p-{node}-{gpus}"}, "spec": spec, "status": {"phase": phase}}


# ------------------------------------------------------------------------------------------- quantities


@pytest.mark.parametrize(
    ("value", "expected"),
    [("8", 8), (8, 8), ("0", 0), ("1k", 1000), ("2000m", 2), ("1500m", 2), ("1.5", 2), ("bogus", 0), (None, 0),
     ("", 0), (True, 0), ("1Ki", 1024), (-3, 0), (" 8 ", 8), ("08", 8), ("+8", 8), ("-8", 0), ("٨", 0), ("8 8", 0)],
)
def test_gpu_quantity(value: Any, expected: int) -> None:
    assert gpu_quantity(value) == expected


def test_pod_gpu_request_uses_limits_when_requests_are_absent() -> None:
    assert gpufit.pod_gpu_request(pod_json("n", 4)) == 4


def test_pod_gpu_request_prefers_requests_over_limits() -> None:
    pod = {"spec": {"containers": [{"resources": {"requests": {"nvidia.com/gpu": "2"},
                                                  "limits": {"nvidia.com/gpu": "4"}}}]}}
    assert gpufit.pod_gpu_request(pod) == 2


def test_pod_gpu_request_is_max_of_largest_init_and_sum_of_containers() -> None:
    gpu = {"limits": {"nvidia.com/gpu": "2"}}
    pod = {"spec": {"initContainers": [{"resources": {"limits": {"nvidia.com/gpu": "5"}}}, {"resources": gpu}],
                    "containers": [{"resources": gpu}, {"resources": gpu}]}}
    assert gpufit.pod_gpu_request(pod) == 5
    pod["spec"]["initContainers"] = [{"resources": gpu}]
    assert gpufit.pod_gpu_request(pod) == 4


def test_pod_gpu_request_adds_sidecar_init_containers() -> None:
    gpu1 = {"limits": {"nvidia.com/gpu": "1"}}
    pod = {"spec": {"initContainers": [{"restartPolicy": "Always", "resources": gpu1}],
                    "containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}
    assert gpufit.pod_gpu_request(pod) == 3


# ------------------------------------------------------------------------------------------- nodes


def test_node_gpus_counts_only_non_terminal_bound_pods() -> None:
    nodes = {n.name: n for n in gpufit.node_gpus(load("nodes-2x8.json"), load("pods-busy.json"))}
    assert nodes["gpu-node-0"].requested == 6  # 4 + 2 running
    assert nodes["gpu-node-0"].free == 2
    assert nodes["gpu-node-0"].gpu_pods == 2
    # the Succeeded 8-GPU pod holds nothing; the init container's 2 outweigh the container's 1
    assert nodes["gpu-node-1"].requested == 2
    assert nodes["control-plane-0"].allocatable == 0
    assert nodes["control-plane-0"].taints[0]["key"] == "node-role.kubernetes.io/control-plane"


def test_node_gpus_reads_readiness_cordon_and_labels() -> None:
    nodes = {n.name: n for n in gpufit.node_gpus(load("nodes-mixed.json"), None)}
    assert nodes["a100-1"].unschedulable
    assert not nodes["l4-0"].ready
    assert nodes["h100-0"].labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert nodes["l4-0"].allocatable == 4


def test_node_gpus_accepts_plain_lists() -> None:
    nodes = gpufit.node_gpus([node_json("a", 8)], [pod_json("a", 3), pod_json("a", 8, "Failed")])
    assert (nodes[0].requested, nodes[0].free) == (3, 5)


def test_pod_use_sums_what_the_pods_hold_per_node_and_namespace() -> None:
    pods = [pod_json("a", 3), pod_json("a", 2), pod_json("b", 8), pod_json("a", 8, "Failed"), pod_json(None, 4),
            pod_json("b", 0)]
    pods[1]["metadata"]["namespace"] = "team"
    use = gpufit.pod_use({"items": pods})
    assert use.per_node == {"a": [5, 2], "b": [8, 1]}  # GPUs held, pods holding them
    assert use.per_namespace == {("a", ""): 3, ("a", "team"): 2, ("b", ""): 8}
    assert gpufit.pod_use(use) is use  # a read that summed them already is taken as it is
    again = gpufit.PodUse()
    again.merge(gpufit.pod_use(pods[:2]))
    again.merge(gpufit.pod_use(pods[2:]))
    assert again == use
    nodes = [node_json("a", 8), node_json("b", 8)]
    assert gpufit.node_gpus(nodes, use) == gpufit.node_gpus(nodes, pods)


def test_the_largest_eligible_node_is_the_first_by_name_among_equals() -> None:
    nodes = [gpu_node("n-2", 8, 8), gpu_node("n-1", 8, 8), gpu_node("a-0", 4, 4)]
    assert fit(nodes, 8, 1).largest == ("n-1", 8)
    assert fit([gpu_node("z", 2), gpu_node("y", 1)], 4, 1).largest == ("z", 2)


def test_total_allocatable_is_the_reference_sum() -> None:
    assert gpufit.total_allocatable(gpufit.node_gpus(load("nodes-2x8.json"), None)) == 16


# ------------------------------------------------------------------------------------------- tolerations


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        ({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
         {"key": "k", "value": "v", "effect": "NoSchedule"}, True),
        ({"key": "k", "value": "v"}, {"key": "k", "value": "v", "effect": "NoExecute"}, True),  # Equal default
        ({"key": "k", "operator": "Equal", "value": "x"}, {"key": "k", "value": "v", "effect": "NoSchedule"}, False),
        ({"key": "k", "operator": "Exists"}, {"key": "k", "value": "v", "effect": "NoSchedule"}, True),
        ({"key": "other", "operator": "Exists"}, {"key": "k", "effect": "NoSchedule"}, False),
        ({"operator": "Exists"}, {"key": "anything", "value": "v", "effect": "NoExecute"}, True),
        ({"operator": "Exists", "effect": "NoSchedule"}, {"key": "k", "effect": "NoExecute"}, False),
        ({"key": "k", "operator": "Exists", "effect": "NoExecute"}, {"key": "k", "effect": "NoExecute"}, True),
        ({"key": "k", "operator": "Equal"}, {"key": "k", "effect": "NoSchedule"}, True),  # both values empty
        ({"key": "k", "operator": "Bogus"}, {"key": "k", "effect": "NoSchedule"}, False),
    ],
)
def test_tolerates_follows_kubernetes_matching(toleration: dict, taint: dict, expected: bool) -> None:
    assert gpufit.tolerates(toleration, taint) is expected


# ------------------------------------------------------------------------------------------- fit


def two_by_eight(used: tuple[int, int] = (0, 0)) -> list[NodeGpus]:
    return [gpu_node("gpu-node-0", 8, used[0]), gpu_node("gpu-node-1", 8, used[1])]


def test_two_by_twelve_on_two_by_eight_never_fits() -> None:
    verdict = fit(two_by_eight(), 12, 2)
    assert verdict.verdict == "never"
    assert "gpu-node-0: 8" in verdict.message


def test_one_by_twelve_never_fits_although_the_sum_is_enough() -> None:
    nodes = two_by_eight()
    assert gpufit.total_allocatable(nodes) >= 12  # the reference's sum would let it through
    verdict = fit(nodes, 12, 1)
    assert verdict.verdict == "never"
    assert verdict.largest == ("gpu-node-0", 8)
    assert "largest eligible node is gpu-node-0: 8" in verdict.message
    assert verdict.fitting_ever == []


def test_three_by_eight_on_two_by_eight_never_fits() -> None:
    verdict = fit(two_by_eight(), 8, 3)
    assert verdict.verdict == "never"
    assert "needs 3 distinct nodes" in verdict.message
    assert "only 2 eligible" in verdict.message


def test_two_by_eight_fits_an_idle_two_by_eight_cluster() -> None:
    verdict = fit(two_by_eight(), 8, 2)
    assert verdict.verdict == "fits"
    assert verdict.chosen == ["gpu-node-0", "gpu-node-1"]
    assert verdict.message.startswith("fits: 2 x 8 nvidia.com/gpu on gpu-node-0 (8 free), gpu-node-1 (8 free)")


def test_busy_cluster_queues_and_says_how_many_gpus_are_in_use() -> None:
    nodes = gpufit.node_gpus(load("nodes-2x8.json"), load("pods-busy.json"))
    verdict = fit(nodes, 8, 1)
    assert verdict.verdict == "queue"
    assert verdict.fitting_ever == ["gpu-node-0", "gpu-node-1"]
    assert verdict.fitting_now == []
    assert "8 of their 16 nvidia.com/gpu in use by 3 pods" in verdict.message


def test_best_fit_prefers_the_fullest_node_that_still_fits() -> None:
    nodes = [gpu_node("empty", 8), gpu_node("half", 8, 4), gpu_node("full", 8, 7)]
    verdict = fit(nodes, 4, 1)
    assert verdict.verdict == "fits"
    assert verdict.chosen == ["half"]
    assert "best fit" in verdict.message
    assert set(verdict.fitting_now) == {"empty", "half"}


def test_multi_node_ranks_need_distinct_nodes_even_when_one_node_has_room_for_both() -> None:
    verdict = fit([gpu_node("big", 16), gpu_node("small", 2)], 8, 2)
    assert verdict.verdict == "never"


def test_not_ready_node_counts_for_ever_but_not_now() -> None:
    nodes = [gpu_node("a", 8), gpu_node("b", 8, ready=False)]
    verdict = fit(nodes, 8, 2)
    assert verdict.verdict == "queue"
    assert "NotReady: b" in verdict.message


def test_transient_lifecycle_taint_means_queue_not_never() -> None:
    taint = [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    verdict = fit([gpu_node("a", 8, taints=taint)], 8, 1)
    assert verdict.verdict == "queue"


def test_cordoned_node_is_not_eligible() -> None:
    verdict = fit([gpu_node("a", 8), gpu_node("b", 8, unschedulable=True)], 8, 2)
    assert verdict.verdict == "never"
    assert "1 node cordoned: b" in verdict.message


def test_node_selector_mismatch_says_no_node_is_eligible() -> None:
    nodes = [gpu_node("a", 8, labels={"pool": "train"})]
    verdict = fit(nodes, 1, 1, node_selector={"pool": "infer"})
    assert verdict.verdict == "never"
    assert verdict.largest is None
    assert "no node is eligible" in verdict.message
    assert "not matching the node selector" in verdict.message
    assert fit(nodes, 1, 1, node_selector={"pool": "train"}).verdict == "fits"


def test_gpu_product_filter_lists_the_products_the_cluster_has() -> None:
    nodes = gpufit.node_gpus(load("nodes-mixed.json"), None)
    verdict = fit(nodes, 1, 1, gpu_product="NVIDIA-B200")
    assert verdict.verdict == "never"
    assert "NVIDIA-A100-SXM4-80GB" in verdict.message
    assert "control-plane-0" not in verdict.message  # a CPU-only node excluded from a GPU job is not news


def test_untolerated_taint_excludes_a_node_and_a_toleration_admits_it() -> None:
    nodes = gpufit.node_gpus(load("nodes-mixed.json"), None)
    verdict = fit(nodes, 8, 1, gpu_product="NVIDIA-H100-80GB-HBM3")
    assert verdict.verdict == "never"
    assert "add a toleration for nvidia.com/gpu=present:NoSchedule" in verdict.message
    tolerated = fit(nodes, 8, 1, gpu_product="NVIDIA-H100-80GB-HBM3",
                    tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
    assert tolerated.verdict == "fits"
    assert tolerated.chosen == ["h100-0"]


def test_prefer_no_schedule_taints_do_not_exclude() -> None:
    taint = [{"key": "x", "effect": "PreferNoSchedule"}]
    assert fit([gpu_node("a", 8, taints=taint)], 8, 1).verdict == "fits"


def test_mixed_fixture_single_a100_fits_and_two_nodes_never() -> None:
    nodes = gpufit.node_gpus(load("nodes-mixed.json"), None)
    assert fit(nodes, 4, 1).chosen == ["a100-0"]
    never = fit(nodes, 8, 2)
    assert never.verdict == "never"
    assert "only 1 eligible (a100-0: 8)" in never.message


def test_cluster_without_gpus_names_the_gpu_operator() -> None:
    nodes = gpufit.node_gpus(load("nodes-cpu-only.json"), None)
    verdict = fit(nodes, 1, 1)
    assert verdict.verdict == "never"
    assert "GPU Operator" in verdict.message
    assert "kubectl get nodes -o jsonpath='{.items[*].status.allocatable}'" in verdict.message


def test_zero_gpus_needs_only_schedulable_nodes() -> None:
    nodes = gpufit.node_gpus(load("nodes-cpu-only.json"), None)
    assert fit(nodes, 0, 2).verdict == "fits"
    verdict = fit(nodes, 0, 3)  # the control plane is tainted
    assert verdict.verdict == "never"
    assert "needs 3 eligible nodes; only 2 are" in verdict.message


def test_fit_rejects_nonsense_requests() -> None:
    with pytest.raises(TaoError):
        fit(two_by_eight(), -1, 1)
    with pytest.raises(TaoError):
        fit(two_by_eight(), 1, 0)


def test_fit_verdict_to_dict_is_json() -> None:
    data = fit(two_by_eight(), 12, 1).to_dict()
    assert data["verdict"] == "never"
    assert data["largest"] == {"name": "gpu-node-0", "allocatable": 8}
    json.dumps(data)


def test_thousand_node_cluster_is_linear_in_nodes_and_pods() -> None:
    nodes = {"items": [node_json(f"n{i:04d}", 8) for i in range(1000)]}
    pods = {"items": [pod_json(f"n{i % 1000:04d}", 1, requests=True) for i in range(7000)]}
    listed = gpufit.node_gpus(nodes, pods)
    assert all(n.requested == 7 for n in listed)
    verdict = fit(listed, 1, 1000)
    assert verdict.verdict == "fits"
    assert len(verdict.chosen) == 1000
    assert fit(listed, 2, 1).verdict == "queue"


# ------------------------------------------------------------------------------------------- Kueue


def test_queue_quota_reads_clusterqueue_nominal_borrowing_and_usage() -> None:
    quota = queue_quota(load("kueue-localqueue.json"), load("kueue-clusterqueue.json"))
    assert quota is not None
    assert (quota.cluster_queue, quota.nominal, quota.borrowing_limit, quota.used) == ("team-cq", 16, None, 8)
    assert quota.ceiling == 16 and quota.free == 8  # no cohort: no borrowing, whatever the limit


def test_queue_quota_is_none_without_kueue() -> None:
    assert queue_quota(None, None) is None
    assert queue_quota(load("kueue-localqueue.json"), None) is None


def test_clusterqueue_without_gpu_quota_never_admits_gpu_jobs() -> None:
    cq = load("kueue-clusterqueue.json")
    for group in cq["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            flavor["resources"] = [r for r in flavor["resources"] if r["name"] != "nvidia.com/gpu"]
    quota = queue_quota(load("kueue-localqueue.json"), cq)
    assert quota is not None and quota.ceiling == 0
    assert fit(two_by_eight(), 1, 1, quota=quota).verdict == "never"
    assert fit(two_by_eight(), 0, 1, quota=quota).verdict == "fits"


def test_quota_ceiling_is_unbounded_when_borrowing_has_no_limit_in_a_cohort() -> None:
    assert QueueQuota("cq", 8, None, 0, cohort="shared").ceiling is None
    assert QueueQuota("cq", 8, None, 0).ceiling == 8
    assert QueueQuota("cq", 8, 4, 0).ceiling == 12


def test_quota_too_small_ever_is_never() -> None:
    quota = QueueQuota("cq", 16, 0, 0)
    verdict = fit([gpu_node(f"n{i}", 8) for i in range(3)], 8, 3, quota=quota)
    assert verdict.verdict == "never"
    assert "ClusterQueue cq can admit at most 16" in verdict.message


def test_quota_in_use_means_queue() -> None:
    quota = QueueQuota("cq", 16, 0, 12)
    verdict = fit(two_by_eight(), 8, 1, quota=quota)
    assert verdict.verdict == "queue"
    assert "12 of 16 in use" in verdict.message


def test_nodes_that_can_never_host_it_win_over_a_quota_wait() -> None:
    quota = QueueQuota("cq", 64, 0, 60)
    assert fit(two_by_eight(), 12, 1, quota=quota).verdict == "never"


def test_quota_with_room_leaves_the_node_rules() -> None:
    quota = QueueQuota("cq", 64, 0, 0)
    assert fit(two_by_eight(), 8, 2, quota=quota).verdict == "fits"


# ------------------------------------------------------------------------------------------- properties

cluster = st.lists(
    st.tuples(st.integers(0, 8), st.integers(0, 8), st.booleans()), min_size=0, max_size=12
)


@settings(max_examples=200, deadline=None)
@given(cluster, st.integers(0, 9), st.integers(1, 5))
def test_fit_verdict_matches_a_direct_count(spec: list, gpus: int, count: int) -> None:
    nodes = [gpu_node(f"n{i}", alloc, min(used, alloc), ready=ready) for i, (alloc, used, ready) in enumerate(spec)]
    verdict = fit(nodes, gpus, count)
    big = [n for n in nodes if n.allocatable >= gpus]
    free = [n for n in big if n.ready and n.free >= gpus]
    if (gpus > 0 and gpufit.total_allocatable(nodes) == 0) or len(big) < count:
        expected = "never"
    elif len(free) < count:
        expected = "queue"
    else:
        expected = "fits"
    assert verdict.verdict == expected
    if expected == "fits":
        assert len(set(verdict.chosen)) == count
        chosen = [n for n in nodes if n.name in verdict.chosen]
        assert all(n.free >= gpus and n.ready for n in chosen)
        # best fit: no unchosen fitting node has fewer free GPUs than a chosen one
        worst_chosen = max(n.free for n in chosen)
        assert all(n.free >= worst_chosen for n in free if n.name not in verdict.chosen)
    else:
        assert verdict.chosen == []
    assert "\n" not in verdict.message


taint_strategy = st.fixed_dictionaries(
    {"key": st.sampled_from(["a", "b"]), "value": st.sampled_from(["", "x"]),
     "effect": st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"])}
)
toleration_strategy = st.fixed_dictionaries(
    {"key": st.sampled_from(["", "a", "b"]), "operator": st.sampled_from(["Exists", "Equal"]),
     "value": st.sampled_from(["", "x"]), "effect": st.sampled_from(["", "NoSchedule", "NoExecute"])}
)


@settings(max_examples=200, deadline=None)
@given(toleration_strategy, taint_strategy)
def test_tolerates_agrees_with_the_spec_rules(toleration: dict, taint: dict) -> None:
    effect_ok = toleration["effect"] in ("", taint["effect"])
    key_ok = toleration["key"] in ("", taint["key"])
    value_ok = toleration["operator"] == "Exists" or toleration["value"] == taint["value"]
    assert gpufit.tolerates(toleration, taint) is (effect_ok and key_ok and value_ok)
