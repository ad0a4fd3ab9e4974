"""Placement on the real local cluster: `--topology` gangs admitted by the real Kueue controller's topology-aware
scheduling inside one rack, and GPU nodes marked unhealthy left out by fit and named by gpus and explain.

The test makes four KWOK GPU nodes of 8 GPUs in two racks (a rack label, `kubernetes.io/hostname` below it), a
Kueue Topology of those two levels, a ResourceFlavor naming it (its nodeLabels select the four nodes), a
ClusterQueue and LocalQueue `team`; everything cluster-scoped is deleted at the end, so the other tests see the
usual two GPU nodes only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from support.cluster import TAO_IMAGE, Tao, submitted_id, unique_name, wait_for

pytestmark = pytest.mark.e2e

GPU = "nvidia.com/gpu"
RACK = "kubectl-tao.io/e2e-rack"
POOL = "kubectl-tao.io/e2e-tas"
HOSTNAME = "kubernetes.io/hostname"
STAY = "kwok.kubectl-tao.io/stay-running=true"
WORKLOADS = "workloads.kueue.x-k8s.io"
V = "kueue.x-k8s.io/v1beta2"


@dataclass
class Racks:
    pool: str  # the POOL label's value on the four nodes
    nodes: dict[str, str]  # node -> rack
    flavor: str
    cq: str
    topology: str

    @property
    def selector(self) -> str:
        return f"{POOL}={self.pool}"

    def in_rack(self, rack: str) -> list[str]:
        return sorted(n for n, r in self.nodes.items() if r == rack)


def _node(name: str, pool: str, rack: str) -> dict[str, Any]:
    resources = {"cpu": "96", "memory": "1Ti", "pods": "110", GPU: "8"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {HOSTNAME: name, "type": "kwok", POOL: pool, RACK: rack},
        },
        "status": {
            "addresses": [{"address": "127.0.0.1", "type": "InternalIP"}],
            "allocatable": resources,
            "capacity": resources,
        },
    }


@pytest.fixture(scope="module", autouse=True)
def kueue_runs(cluster: Any) -> None:
    found = cluster.kubectl("get", "crd", "topologies.kueue.x-k8s.io", "-o", "name", check=False)
    if found.returncode != 0:
        pytest.fail("this cluster runs no Kueue with topologies: bring it up with KUBECTL_TAO_KUEUE=1")


@pytest.fixture()
def racks(tao: Tao) -> Iterator[Racks]:
    pool = unique_name("tas")
    nodes = {f"{pool}-{rack}-{i}": rack for rack in ("r1", "r2") for i in range(2)}
    found = Racks(pool, nodes, f"rf-{tao.namespace}", f"cq-{tao.namespace}", f"topo-{tao.namespace}")
    objects: list[dict[str, Any]] = [
        *(_node(name, pool, rack) for name, rack in nodes.items()),
        {"apiVersion": V, "kind": "Topology", "metadata": {"name": found.topology},
         "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOSTNAME}]}},
        {"apiVersion": V, "kind": "ResourceFlavor", "metadata": {"name": found.flavor},
         "spec": {"nodeLabels": {POOL: pool}, "topologyName": found.topology}},
        {"apiVersion": V, "kind": "ClusterQueue", "metadata": {"name": found.cq},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": [GPU], "flavors": [
             {"name": found.flavor, "resources": [{"name": GPU, "nominalQuota": 64}]}]}]}},
        {"apiVersion": V, "kind": "LocalQueue", "metadata": {"name": "team", "namespace": tao.namespace},
         "spec": {"clusterQueue": found.cq}},
    ]
    tao.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    try:
        wait_for(lambda: all(_ready(tao, n) for n in nodes), 60, message="the rack nodes to be Ready")
        wait_for(lambda: _active(tao, found.cq), 120, message="the ClusterQueue to become Active")
        yield found
    finally:
        tao.kubectl("delete", "jobs", "--all", "--cascade=foreground", "--wait=false", check=False)
        tao.kubectl("delete", "pods", "--all", "--wait=false", check=False)
        wait_for(lambda: tao.kubectl("get", "pods", "-o", "name").stdout == "", 60, message="the pods to go")
        tao.kubectl("delete", "localqueues.kueue.x-k8s.io", "--all", "--ignore-not-found", check=False)
        tao.kubectl("delete", "clusterqueue.kueue.x-k8s.io", found.cq, "--ignore-not-found", check=False)
        tao.kubectl("delete", "resourceflavor.kueue.x-k8s.io", found.flavor, "--ignore-not-found", check=False)
        tao.kubectl("delete", "topology.kueue.x-k8s.io", found.topology, "--ignore-not-found", check=False)
        tao.kubectl("delete", "nodes", *nodes, "--ignore-not-found", check=False)


def _ready(tao: Tao, node: str) -> bool:
    out = tao.kubectl("get", "node", node, "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}").stdout
    return out == "True"


def _active(tao: Tao, cq: str) -> bool:
    data = json.loads(tao.kubectl("get", "clusterqueue.kueue.x-k8s.io", cq, "-o", "json").stdout)
    return any(c["type"] == "Active" and c["status"] == "True" for c in data.get("status", {}).get("conditions", []))


def submit(tao: Tao, *extra: str, nodes: int = 1, queue: bool = True) -> str:
    args = ["submit", "--image", TAO_IMAGE, "--image-pull-secret", "ngc", "--network-arch", "dino", "--action",
            "train", "--gpus", "8", "--nodes", str(nodes), "--pvc", "tao-data", "--command", "true",
            "--annotation", STAY, *(["--queue", "team"] if queue else []), *extra]
    return submitted_id(tao(*args))


def job_name(tao: Tao, record_id: str) -> str:
    return str(tao.record(record_id)["backend_ref"]).rsplit("/", 1)[-1]  # NAMESPACE/NAME


def placed(tao: Tao, record_id: str) -> list[str]:
    """The nodes of the job's Running pods."""
    pods = json.loads(tao.kubectl("get", "pods", "-l", f"job-name={job_name(tao, record_id)}", "-o", "json").stdout)
    return sorted(p["spec"].get("nodeName") or "" for p in pods["items"] if p["status"].get("phase") == "Running")


def workload(tao: Tao, record_id: str) -> dict[str, Any]:
    uid = json.loads(tao.kubectl("get", "job", job_name(tao, record_id), "-o", "json").stdout)["metadata"]["uid"]
    items = json.loads(tao.kubectl("get", WORKLOADS, "-l", f"kueue.x-k8s.io/job-uid={uid}", "-o", "json").stdout)
    return (items.get("items") or [{}])[0]


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def fit(tao: Tao, *args: str) -> tuple[int, dict[str, Any]]:
    result = tao("fit", "--gpus", "8", *args, "-o", "json")
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else {"stderr": result.stderr}


def test_a_topology_gang_is_admitted_inside_one_rack_and_waits_when_no_rack_has_room(tao: Tao, racks: Racks) -> None:
    rendered = tao("render", "--image", TAO_IMAGE, "--gpus", "8", "--nodes", "2", "--pvc", "tao-data", "--command",
                   "true", "--queue", "team", "--topology", RACK)
    assert rendered.returncode == 0, rendered.stderr
    assert f"kueue.x-k8s.io/podset-required-topology: {RACK}" in rendered.stdout

    gang = submit(tao, "--topology", RACK, nodes=2)
    wait_for(lambda: len(placed(tao, gang)) == 2, 90, message="the gang's two ranks to run")
    where = placed(tao, gang)
    assert len({racks.nodes[n] for n in where}) == 1, where  # both ranks in one rack
    assignment = workload(tao, gang)["status"]["admission"]["podSetAssignments"][0]
    assert assignment.get("topologyAssignment"), assignment  # Kueue's TAS placed it
    assert tao("cancel", gang).returncode == 0
    wait_for(lambda: placed(tao, gang) == [], 60, message="the gang to go")

    # One node busy in each rack: the cluster has two free 8-GPU nodes, but no rack has two.
    holders = [submit(tao, "--node-selector", f"{HOSTNAME}={racks.in_rack(rack)[0]}") for rack in ("r1", "r2")]
    for holder in holders:
        wait_for(lambda h=holder: len(placed(tao, h)) == 1, 90, message="a holder to run")
    code, data = fit(tao, "--nodes", "2", "--node-selector", racks.selector)
    assert (code, data["verdict"]) == (0, "fits"), data  # without --topology it would start now
    code, data = fit(tao, "--nodes", "2", "--node-selector", racks.selector, "--topology", RACK)
    assert (code, data["verdict"]) == (1, "queue"), data
    assert f"no {RACK} domain has 2 nodes with 8 free now" in data["message"]
    assert f"{RACK}=r1: 1 of 2 nodes with 8 free" in data["message"]
    assert "the cluster has 2 such nodes free across domains" in data["message"]
    code, data = fit(tao, "--nodes", "3", "--node-selector", racks.selector, "--topology", RACK)
    assert (code, data["verdict"]) == (4, "never"), data

    waiting = submit(tao, "--topology", RACK, nodes=2)
    wait_for(lambda: condition(workload(tao, waiting), "QuotaReserved").get("status") == "False", 60,
             message="Kueue to leave the gang pending")
    assert placed(tao, waiting) == [] and condition(workload(tao, waiting), "Admitted").get("status") != "True"
    result = tao("gpus", "--by", RACK, "-o", "json")
    assert result.returncode == 0, result.stderr
    domains = {d["domain"]: d for d in json.loads(result.stdout)["domains"]}
    assert (domains["r1"]["free"], domains["r2"]["free"], domains["r1"]["largestFree"]) == (8, 8, 8)

    assert tao("cancel", holders[0]).returncode == 0  # rack r1 has two free nodes again
    wait_for(lambda: len(placed(tao, waiting)) == 2, 120, message="Kueue to admit the gang into rack r1")
    assert {racks.nodes[n] for n in placed(tao, waiting)} == {"r1"}


def test_bad_topology_inputs_exit_2_and_create_nothing(tao: Tao, racks: Racks) -> None:
    base = ["submit", "--image", TAO_IMAGE, "--gpus", "8", "--nodes", "2", "--pvc", "tao-data", "--command", "true"]
    result = tao(*base, "--topology", RACK)
    assert (result.returncode, result.stdout) == (2, "")
    # The local cluster gangs natively (GenericWorkload, WorkloadWithJob) without TopologyAwareWorkloadScheduling.
    assert result.stderr.startswith(f"error: --topology {RACK}: nothing keeps every rank in one {RACK} domain "
                                    "without --queue: "), result.stderr
    result = tao(*base, "--queue", "team", "--topology", "kubectl-tao.io/e2e-no-such-level")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("error: --topology kubectl-tao.io/e2e-no-such-level: Topology ")
    result = tao("fit", "--gpus", "8", "--nodes", "2", "--topology", "kubectl-tao.io/e2e-no-such-level")
    assert (result.returncode, result.stdout) == (2, "")
    assert "no node carries the label kubectl-tao.io/e2e-no-such-level" in result.stderr
    # A flavor without a Topology: Kueue could not place by rack.
    plain = {"apiVersion": V, "kind": "ResourceFlavor", "metadata": {"name": f"{racks.flavor}-plain"}}
    cq = {"apiVersion": V, "kind": "ClusterQueue", "metadata": {"name": f"{racks.cq}-plain"},
          "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": [GPU], "flavors": [
              {"name": plain["metadata"]["name"], "resources": [{"name": GPU, "nominalQuota": 16}]}]}]}}
    lq = {"apiVersion": V, "kind": "LocalQueue", "metadata": {"name": "plain", "namespace": tao.namespace},
          "spec": {"clusterQueue": cq["metadata"]["name"]}}
    tao.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [plain, cq, lq]}))
    try:
        wait_for(lambda: _active(tao, cq["metadata"]["name"]), 120, message="the plain ClusterQueue to be Active")
        result = tao(*base, "--queue", "plain", "--topology", RACK)
        assert (result.returncode, result.stdout) == (2, "")
        assert result.stderr == (
            f"error: --topology {RACK}: no nvidia.com/gpu ResourceFlavor of ClusterQueue {cq['metadata']['name']} "
            f"names a Topology (spec.topologyName; flavors: {plain['metadata']['name']}), so Kueue cannot place the "
            f"ranks by {RACK}; ask the cluster admin for a topology-aware flavor, or drop --topology\n"
        )
    finally:
        tao.kubectl("delete", "localqueue.kueue.x-k8s.io", "plain", "--ignore-not-found", check=False)
        tao.kubectl("delete", "clusterqueue.kueue.x-k8s.io", cq["metadata"]["name"], "--ignore-not-found", check=False)
        tao.kubectl("delete", "resourceflavor.kueue.x-k8s.io", plain["metadata"]["name"], "--ignore-not-found",
                    check=False)
    assert tao.leftovers() == [] and tao.records() == []


def test_an_unhealthy_node_is_left_out_by_fit_and_named_by_gpus_and_explain(tao: Tao, racks: Racks) -> None:
    bad = racks.in_rack("r2")[1]
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    patch = {"status": {"conditions": [{"type": "XidCriticalError", "status": "True", "reason": "Xid79",
                                        "message": "GPU has fallen off the bus", "lastTransitionTime": now,
                                        "lastHeartbeatTime": now}]}}
    tao.kubectl("patch", "node", bad, "--subresource=status", "-p", json.dumps(patch))
    code, data = fit(tao, "--node-selector", racks.selector)
    assert code == 0 and bad not in data["fittingEver"], data
    assert [entry["node"] for entry in data["leftOut"]] == [bad]
    assert data["leftOut"][0]["signal"].startswith("XidCriticalError")
    result = tao("gpus")
    assert result.returncode == 0, result.stderr
    row = next(line.split() for line in result.stdout.splitlines() if line.startswith(bad))
    assert row[-1] == "XidCriticalError" or "XidCriticalError" in row, row

    # Every node of the pool busy (the unhealthy one too: the scheduler reads no condition): a job waits.
    # (submit's fit gate calls a job that only the unhealthy node could take "never", so a bare pod holds it)
    holders = [submit(tao, "--node-selector", f"{HOSTNAME}={node}", queue=False) for node in racks.nodes if node != bad]
    for holder in holders:
        wait_for(lambda h=holder: len(placed(tao, h)) == 1, 90, message="a holder to run")
    result = tao("submit", "--image", TAO_IMAGE, "--gpus", "8", "--pvc", "tao-data", "--command", "true",
                 "--node-selector", f"{HOSTNAME}={bad}")
    assert result.returncode == 4 and f"{bad} (XidCriticalError since " in result.stderr, result.stderr
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "holds-the-bad-node",
                                                            "annotations": {STAY.split("=")[0]: "true"}},
           "spec": {"nodeName": bad, "containers": [{"name": "c", "image": TAO_IMAGE,
                                                     "resources": {"limits": {GPU: "8"}}}]}}
    tao.kubectl("apply", "-f", "-", input=json.dumps(pod))
    waiting = submit(tao, "--node-selector", racks.selector, queue=False)

    def explained() -> dict[str, Any] | None:
        out = tao("explain", waiting, "-o", "json")
        found = json.loads(out.stdout)["findings"] if out.stdout.strip() else []
        return next((f for f in found if f["code"] == "unhealthy-gpu-nodes"), None)

    finding = wait_for(explained, 60, message="explain to name the unhealthy node")
    assert finding["cause"].startswith(f"1 node left out: {bad} XidCriticalError since ")
    assert f"{bad}: XidCriticalError Xid79" in finding["evidence"]
