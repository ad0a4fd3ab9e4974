"""`kubectl tao gpus`, and fit/preflight on a DRA cluster, over JSON recorded from the local 1.36.3 cluster
(see test_gpuinventory.py for what the recording holds)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl, fixture_json, review_answer

from kubectl_tao.gates.capacity import NODES_READ, PODS_READ
from kubectl_tao.gates.gpuinventory import DRA_READ

NO_KUEUE = 'error: the server doesn\'t have a resource type "localqueues"'
NO_DRA = 'error: the server doesn\'t have a resource type "resourceslices"'


def serve(fake: FakeKubectl, *, dra_only: bool = False, with_class: bool = True, dra: bool = True) -> None:
    capacity = fixture_json("dra-nodes-pods.json")
    if dra_only:
        capacity["items"] = [i for i in capacity["items"] if not i["metadata"]["name"].startswith("gpu-node-")]
    fake.capacity(capacity)
    objects = fixture_json("dra-objects.json")
    if not with_class:
        objects["items"] = [i for i in objects["items"] if i["kind"] != "DeviceClass"]
    if dra:
        fake.on(*DRA_READ[:2], data=objects)
    else:
        fake.on(*DRA_READ[:2], stderr=NO_DRA, rc=1)
    fake.on("get", "localqueues.kueue.x-k8s.io", stderr=NO_KUEUE, rc=1)


def test_table_lists_gpu_nodes_namespaces_and_totals(cli: Any, fake_kubectl: FakeKubectl) -> None:
    serve(fake_kubectl)
    code, out, err = cli("gpus")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["NODE", "PRODUCT", "TOTAL", "ALLOCATED", "FREE", "CORDONED", "TAINTS"]
    assert lines[1].split() == ["dra-node-0", "NVIDIA", "H200", "4", "3", "1", "no", "-"]
    assert lines[2].split() == ["gpu-node-0", "NVIDIA-H100-80GB-HBM3", "8", "2", "6", "no", "-"]
    assert lines[3].split() == ["gpu-node-1", "NVIDIA-H100-80GB-HBM3", "8", "0", "8", "no", "dedicated=ml:NoSchedule"]
    assert lines[4].split() == ["TOTAL", "20", "5", "15"]
    assert lines[6].split() == ["NAMESPACE", "GPUS-IN-USE"] and lines[7].split() == ["rec", "5"]


def test_wide_adds_source_readiness_and_gpu_pods(cli: Any, fake_kubectl: FakeKubectl) -> None:
    serve(fake_kubectl)
    code, out, _ = cli("gpus", "-o", "wide")
    assert code == 0
    assert out.splitlines()[0].split()[-3:] == ["SOURCE", "READY", "GPU-PODS"]
    assert out.splitlines()[1].split()[-3:] == ["dra", "yes", "1"]


def test_json_and_two_calls_in_one_round_trip(cli: Any, fake_kubectl: FakeKubectl) -> None:
    serve(fake_kubectl)
    code, out, _ = cli("gpus", "-o", "json")
    data = json.loads(out)
    assert code == 0
    assert data["totals"] == {"nodes": 3, "total": 20, "allocated": 5, "free": 15, "freeSchedulable": 15}
    assert data["namespaces"] == [{"namespace": "rec", "gpus": 5}]
    assert data["dra"] == {"deviceClass": "gpu.nvidia.com", "drivers": ["gpu.nvidia.com"], "offNode": 0}
    assert sorted(fake_kubectl.argvs()) == sorted([NODES_READ, PODS_READ, DRA_READ])


def test_cluster_without_dra_api_shows_device_plugin_gpus_only(cli: Any, fake_kubectl: FakeKubectl) -> None:
    serve(fake_kubectl, dra=False)
    code, out, err = cli("gpus", "-o", "json")
    assert code == 0 and err == ""
    assert [n["name"] for n in json.loads(out)["nodes"]] == ["gpu-node-0", "gpu-node-1"]


def test_unmapped_dra_gpus_are_listed_with_a_note(cli: Any, fake_kubectl: FakeKubectl) -> None:
    serve(fake_kubectl, with_class=False)
    code, out, err = cli("gpus")
    assert code == 0
    assert "dra-node-0" in out
    assert err.startswith("note: this cluster has 4 GPUs published through DRA")


def test_non_gpu_device_class_is_refused_in_one_line_with_exit_2(cli: Any, fake_kubectl: FakeKubectl) -> None:
    serve(fake_kubectl)
    code, out, err = cli("gpus", "--device-class", "mig.nvidia.com")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert err.startswith("error: --device-class mig.nvidia.com: not a GPU DeviceClass")
    assert "or drop --device-class" in err


def test_missing_device_class_is_refused_with_exit_2(cli: Any, fake_kubectl: FakeKubectl) -> None:
    serve(fake_kubectl)
    code, _, err = cli("gpus", "--device-class", "gpu")
    assert code == 2 and "no DeviceClass 'gpu' on this cluster (found: gpu.nvidia.com, mig.nvidia.com)" in err


def test_device_class_on_a_cluster_without_dra_is_refused_with_exit_2(cli: Any, fake_kubectl: FakeKubectl) -> None:
    serve(fake_kubectl, dra=False)
    code, _, err = cli("gpus", "--device-class", "gpu.nvidia.com")
    assert code == 2 and "does not serve resource.k8s.io/v1" in err


def test_unknown_output_format_exits_2_before_any_call(cli: Any, fake_kubectl: FakeKubectl) -> None:
    code, _, err = cli("gpus", "-o", "name")
    assert code == 2 and err.startswith("error: -o/--output: unknown format 'name'")
    assert fake_kubectl.calls == []


def test_fit_on_a_dra_only_cluster_counts_its_devices(cli: Any, fake_kubectl: FakeKubectl) -> None:
    serve(fake_kubectl, dra_only=True)
    assert cli("fit", "--gpus", "1") == (0, "fits: 1 x 1 nvidia.com/gpu on dra-node-0 (1 free)\n", "")
    code, out, _ = cli("fit", "--gpus", "4")
    assert code == 1
    assert out.startswith("queue: 1 x 4 nvidia.com/gpu: 1 node is big enough but only 0 have 4 free now; 3 of their 4")


def test_fit_without_a_serving_class_names_the_device_class_fix(cli: Any, fake_kubectl: FakeKubectl) -> None:
    serve(fake_kubectl, dra_only=True, with_class=False)
    code, out, _ = cli("fit", "--gpus", "1")
    assert code == 4
    assert out.startswith("never: no eligible node offers nvidia.com/gpu to pods: this cluster has 4 GPUs published")


def test_preflight_on_a_dra_only_cluster_is_not_told_no_gpus(
    cli: Any, fake_kubectl: FakeKubectl, monkeypatch: Any
) -> None:
    monkeypatch.setenv("TAO_K8S_SKIP_NODE_RUNTIME_CHECK", "1")
    serve(fake_kubectl, dra_only=True)
    fake_kubectl.on("version", data=fixture_json("version-gke-1.30.json"))
    review, granted = review_answer()
    fake_kubectl.on(*review, stdout=granted)
    _, out, _ = cli("preflight", "--gpus", "1")
    expected = "OK: gpu-operator: 4 nvidia.com/gpu allocatable on 1 node(s) (DRA devices via DeviceClass gpu.nvidia.com"
    assert expected in out
    assert "OK: capacity: fits: 1 x 1 nvidia.com/gpu on dra-node-0 (1 free)" in out


# ------------------------------------------------------------------------------------------ gpus --queue

LQ_READ = ["get", "localqueues.kueue.x-k8s.io", "-n", "tao-jobs", "-o", "json"]
CQ_READ = ["get", "clusterqueues.kueue.x-k8s.io", "team-cq", "-o", "json"]


def serve_kueue(fake: FakeKubectl, cq: dict[str, Any] | None = None, lq: dict[str, Any] | None = None) -> None:
    """Kueue's LocalQueue team -> ClusterQueue team-cq as recorded (16 GPUs, 8 reserved), before serve()."""
    fake.on("get", "localqueues.kueue.x-k8s.io", data={"kind": "List", "items": [lq or fixture_json(
        "kueue-localqueue.json")]})
    fake.on("get", "clusterqueues.kueue.x-k8s.io", data=cq or fixture_json("kueue-clusterqueue.json"))
    serve(fake)


def in_cohort() -> dict[str, Any]:
    cq = copy.deepcopy(fixture_json("kueue-clusterqueue.json"))
    cq["spec"]["cohortName"] = "research"
    cq["spec"]["resourceGroups"][0]["flavors"].append(
        {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "4"}]}
    )
    cq["status"]["flavorsReservation"].append(
        {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "10", "borrowed": "2"}]}
    )
    return cq


def test_queue_table_shows_the_cluster_queue_quota_left_per_flavor(cli: Any, fake_kubectl: FakeKubectl) -> None:
    serve_kueue(fake_kubectl)
    code, out, err = cli("gpus", "--queue", "team")
    assert code == 0 and err == ""
    tail = out.split("\n\n")[-1].splitlines()
    assert [line.split() for line in tail] == [
        ["LOCALQUEUE", "CLUSTERQUEUE", "FLAVOR", "NOMINAL", "RESERVED", "REMAINING"],
        ["team", "team-cq", "default", "16", "8", "8"],
    ]
    assert out.startswith("NODE ")  # the node view is still there
    assert LQ_READ in fake_kubectl.argvs() and CQ_READ in fake_kubectl.argvs()


def test_queue_in_a_cohort_shows_borrowing_limits_and_wide_adds_kueues_counts(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    serve_kueue(fake_kubectl, cq=in_cohort())
    code, out, _ = cli("gpus", "--queue", "team")
    assert code == 0
    assert [line.split() for line in out.split("\n\n")[-1].splitlines()] == [
        ["LOCALQUEUE", "CLUSTERQUEUE", "FLAVOR", "NOMINAL", "RESERVED", "REMAINING", "BORROWING-LIMIT"],
        ["team", "team-cq", "default", "16", "8", "8", "unlimited"],
        ["team", "team-cq", "h100", "8", "10", "0", "4"],
    ]
    code, out, _ = cli("gpus", "--queue", "team", "-o", "wide")
    rows = [line.split() for line in out.split("\n\n")[-1].splitlines()]
    assert rows[0][-6:] == ["BORROWING-LIMIT", "BORROWED", "USED", "COHORT", "ADMITTED-WORKLOADS", "PENDING-WORKLOADS"]
    assert rows[1][-6:] == ["unlimited", "0", "8", "research", "1", "1"]
    assert rows[2][-6:] == ["4", "2", "0", "research", "1", "1"]


def test_queue_json_carries_the_quota_per_flavor(cli: Any, fake_kubectl: FakeKubectl) -> None:
    serve_kueue(fake_kubectl, cq=in_cohort())
    code, out, _ = cli("gpus", "--queue", "team", "-o", "json")
    data = json.loads(out)
    assert code == 0 and data["totals"]["total"] == 20
    assert data["queue"] == {
        "localQueue": "team", "namespace": "tao-jobs", "clusterQueue": "team-cq", "cohort": "research",
        "pendingWorkloads": 1, "admittedWorkloads": 1, "remaining": 8,
        "flavors": [
            {"name": "default", "nominalQuota": 16, "reserved": 8, "used": 8, "borrowed": 0, "remaining": 8,
             "borrowingLimit": "unlimited"},
            {"name": "h100", "nominalQuota": 8, "reserved": 10, "used": 0, "borrowed": 2, "remaining": 0,
             "borrowingLimit": 4},
        ],
    }


def test_without_queue_no_kueue_read_and_json_queue_is_null(cli: Any, fake_kubectl: FakeKubectl) -> None:
    serve_kueue(fake_kubectl)
    code, out, _ = cli("gpus", "-o", "json")
    assert code == 0 and json.loads(out)["queue"] is None
    assert not any("localqueues.kueue.x-k8s.io" in argv for argv in fake_kubectl.argvs())


def test_a_queue_without_gpu_quota_gets_a_note(cli: Any, fake_kubectl: FakeKubectl) -> None:
    cq = copy.deepcopy(fixture_json("kueue-clusterqueue.json"))
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["name"] = "cpu"
    serve_kueue(fake_kubectl, cq=cq)
    code, out, err = cli("gpus", "--queue", "team")
    assert code == 0
    assert "note: ClusterQueue team-cq has no nvidia.com/gpu quota: Kueue admits no GPU job from LocalQueue team" in err
    assert out.split("\n\n")[-1].splitlines()[1].split() == ["team", "team-cq", "-", "0", "8", "0"]


def test_unreadable_cluster_queue_leaves_a_note_and_the_node_view(cli: Any, fake_kubectl: FakeKubectl) -> None:
    fake_kubectl.on("get", "clusterqueues.kueue.x-k8s.io", rc=1, stderr=(
        'Error from server (Forbidden): clusterqueues.kueue.x-k8s.io "team-cq" is forbidden: User "u" cannot get'))
    serve_kueue(fake_kubectl)
    code, out, _ = cli("gpus", "--queue", "team", "-o", "json")
    assert code == 0
    assert json.loads(out)["queue"] == {"localQueue": "team", "namespace": "tao-jobs", "clusterQueue": None}
    assert "Kueue quota not checked: cannot read ClusterQueue team-cq" in json.loads(out)["notes"][0]


def test_queue_that_does_not_exist_is_refused_with_exit_2(cli: Any, fake_kubectl: FakeKubectl) -> None:
    serve_kueue(fake_kubectl)
    code, out, err = cli("gpus", "--queue", "nope")
    assert (code, out) == (2, "")
    assert err == (
        "error: --queue nope: no LocalQueue 'nope' in namespace tao-jobs (found: team); "
        "`kubectl get localqueues.kueue.x-k8s.io -n tao-jobs` lists them\n"
    )


def test_queue_on_a_cluster_without_kueue_is_refused_with_exit_2(cli: Any, fake_kubectl: FakeKubectl) -> None:
    serve(fake_kubectl)
    code, out, err = cli("gpus", "--queue", "team")
    assert (code, out) == (2, "")
    assert err == (
        "error: --queue team: this cluster has no Kueue (localqueues.kueue.x-k8s.io is not a resource); "
        "drop --queue\n"
    )


def test_inactive_queue_is_refused_with_exit_2_and_kueues_reason(cli: Any, fake_kubectl: FakeKubectl) -> None:
    lq = copy.deepcopy(fixture_json("kueue-localqueue.json"))
    lq["spec"]["clusterQueue"] = "broken-cq"
    fake_kubectl.on("get", "clusterqueues.kueue.x-k8s.io", data=fixture_json("kueue-clusterqueue-inactive.json"))
    serve_kueue(fake_kubectl, lq=lq)
    code, out, err = cli("gpus", "--queue", "team", "-o", "json")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert err == (
        "error: --queue team: ClusterQueue broken-cq admits no workload (FlavorNotFound: Can't admit new "
        "workloads: references missing ResourceFlavor(s): no-such-flavor.); fix it (`kubectl describe "
        "clusterqueues.kueue.x-k8s.io broken-cq`) or pass another LocalQueue (`kubectl get "
        "localqueues.kueue.x-k8s.io -n tao-jobs`)\n"
    )
    assert not any(verb in argv for argv in fake_kubectl.argvs() for verb in ("create", "apply", "patch"))


def _mark(fake: FakeKubectl, *, rack: bool = True) -> None:
    """The recorded cluster with gpu-node-1 marked XidCriticalError and the GPU nodes in racks."""
    capacity = fixture_json("dra-nodes-pods.json")
    for item in capacity["items"]:
        name = item["metadata"]["name"]
        if item.get("kind") == "Node" and rack:
            item["metadata"].setdefault("labels", {})["example.com/rack"] = "r2" if name == "gpu-node-1" else "r1"
        if name == "gpu-node-1":
            item["status"]["conditions"].append({"type": "XidCriticalError", "status": "True"})
    fake.capacity(capacity)
    fake.on(*DRA_READ[:2], data=fixture_json("dra-objects.json"))


def test_an_unhealthy_node_gets_a_gpu_health_column(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _mark(fake_kubectl)
    code, out, _ = cli("gpus")
    lines = out.splitlines()
    assert code == 0
    assert lines[0].split()[-1] == "GPU-HEALTH"
    assert lines[2].split()[-1] == "ok" and lines[3].split()[-1] == "XidCriticalError"
    code, out, _ = cli("gpus", "-o", "json")
    data = json.loads(out)
    assert [n["health"] for n in data["nodes"]] == ["", "", "XidCriticalError"]
    assert data["totals"]["freeSchedulable"] == data["totals"]["free"] - 8


def test_by_groups_free_gpus_per_domain(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _mark(fake_kubectl)
    code, out, _ = cli("gpus", "--by", "example.com/rack")
    lines = out.splitlines()
    assert code == 0
    assert lines[0].split() == ["EXAMPLE.COM/RACK", "NODES", "TOTAL", "ALLOCATED", "FREE", "FREE-SCHEDULABLE",
                                "LARGEST-FREE", "UNHEALTHY"]
    assert lines[1].split() == ["r1", "2", "12", "5", "7", "7", "6", "0"]
    assert lines[2].split() == ["r2", "1", "8", "0", "8", "0", "0", "1"]


def test_by_a_label_no_node_carries_is_exit_2(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _mark(fake_kubectl, rack=False)
    code, out, err = cli("gpus", "--by", "example.com/rack")
    assert (code, out) == (2, "")
    assert err.startswith("error: --by example.com/rack: no node carries the label example.com/rack")


def test_by_a_text_that_is_not_a_whole_label_key_is_one_line_exit_2_before_any_read(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    code, out, err = cli("gpus", "--by", "example.com/rack\n")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "error: --by 'example.com/rack\\n': not a node label key; name one such as topology.kubernetes.io/zone or "
        "nvidia.com/gpu.clique"
    ]
    assert fake_kubectl.calls == []


def _served_as_the_api_server(fake: FakeKubectl, malform: Any) -> None:
    """The recorded nodes as `get --raw` sends them (compact, items without kind, metadata.name first), the
    node gpu-node-1 changed by MALFORM(node) -> raw JSON text for its "@@" placeholder (or None)."""
    capacity = fixture_json("dra-nodes-pods.json")
    nodes, raw = [], None
    for item in capacity["items"]:
        if item["kind"] != "Node":
            continue
        node = {"metadata": {"name": item["metadata"]["name"], **item["metadata"]}, "spec": item["spec"],
                "status": item["status"]}
        if node["metadata"]["name"] == "gpu-node-1":
            raw = malform(node)
        nodes.append(node)
    text = json.dumps({"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": nodes}, separators=(",", ":"))
    fake.on(*NODES_READ, stdout=text.replace('"@@"', raw) if raw else text)
    pods = [{k: v for k, v in i.items() if k != "kind"} for i in capacity["items"] if i["kind"] == "Pod"]
    fake.on(*PODS_READ, data={"kind": "List", "items": pods})
    fake.on(*DRA_READ[:2], stderr=NO_DRA, rc=1)
    fake.on("get", "localqueues.kueue.x-k8s.io", stderr=NO_KUEUE, rc=1)


def _labels_as_a_list(node: dict[str, Any]) -> None:
    node["metadata"]["labels"] = ["nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"]


def _count_of_5000_digits(node: dict[str, Any]) -> None:
    node["status"]["allocatable"]["nvidia.com/gpu"] = "9" * 5000


def _nested_100000_deep(node: dict[str, Any]) -> str:
    node["metadata"]["annotations"] = {"x": "@@"}
    return "[" * 100_000 + "]" * 100_000


ANSWERED = "an API server never sends that: check the server or proxy the kubeconfig points at"


@pytest.mark.parametrize(
    ("malform", "problem"),
    [
        (_labels_as_a_list, "metadata.labels of the wrong shape (a list, not a map of strings)"),
        (_count_of_5000_digits,
         "status.allocatable nvidia.com/gpu of the wrong shape (a quantity of 5000 characters, longer than any count)"),
        (_nested_100000_deep, "JSON nested deeper than a reader follows"),
    ],
)
@pytest.mark.parametrize("verb", [["gpus"], ["gpus", "-o", "json"], ["fit", "--gpus", "1"]])
def test_a_node_of_the_wrong_shape_is_one_line_exit_1_naming_it(
    cli: Any, fake_kubectl: FakeKubectl, malform: Any, problem: str, verb: list[str]
) -> None:
    _served_as_the_api_server(fake_kubectl, malform)
    code, out, err = cli(*verb)
    assert (code, out) == (1, "")
    assert err.splitlines() == [f"error: kubectl get --raw nodes: node gpu-node-1 has {problem}; {ANSWERED}"]
