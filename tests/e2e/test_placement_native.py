"""The native topology path on a real Kubernetes 1.37 server: GenericWorkload, WorkloadWithJob and
TopologyAwareWorkloadScheduling on (API server, controller manager and scheduler). `--topology LABEL` without
`--queue` sets the Job's spec.scheduling.schedulingConstraints.topology, the Job controller copies it into the
PodGroup it makes, and the real kube-scheduler's TopologyPlacementGenerator keeps every rank in one domain:
the gang waits while no rack has room though the cluster has, and starts inside one rack once one has.

The cluster is its own: KWOK nodes only (4 GPU nodes x 8 in two racks), no Kueue, no real node, started by
`scripts/local-cluster up` with KUBECTL_TAO_FEATURE_GATES=TopologyAwareWorkloadScheduling=true in a data
directory of its own, and stopped at the end of the module. It needs no real nodes, so no lock.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cluster import (
    BUILD_LOCAL_CLUSTER,
    LOCAL_CLUSTER,
    TAO,
    bound_claim_objects,
    cache_dir,
    data_dir,
    unique_name,
    versions,
    wait_for,
)

pytestmark = pytest.mark.e2e

GATES = "TopologyAwareWorkloadScheduling=true"
RACK = "kubectl-tao.io/e2e-rack"
RACKS = {"gpu-node-0": "r1", "gpu-node-1": "r1", "gpu-node-2": "r2", "gpu-node-3": "r2"}
STAY = {"kwok.kubectl-tao.io/stay-running": "true"}
UP_TIMEOUT_S = 600  # the binaries are cached (checked first); a start takes 30-60 s


def version() -> str:
    """The first pinned version with workload-aware scheduling (1.37+)."""
    found = [v for v in versions()["K8S_VERSIONS"].split(",") if int(v.split(".")[1]) >= 37]
    assert found, "cluster/versions.env pins no Kubernetes >= 1.37"
    return found[0]


class Native:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("KUBECTL_TAO_")},
            "KUBECTL_TAO_CLUSTER_DIR": str(directory),
            "KUBECTL_TAO_K8S_VERSION": version(),
            "KUBECTL_TAO_REAL_NODES": "0",
            "KUBECTL_TAO_KUEUE": "0",
            "KUBECTL_TAO_CPU_NODES": "0",
            "KUBECTL_TAO_GPU_NODES": str(len(RACKS)),
            "KUBECTL_TAO_FEATURE_GATES": GATES,
        }
        if "KUBECTL_TAO_CACHE" in os.environ:
            self.env["KUBECTL_TAO_CACHE"] = os.environ["KUBECTL_TAO_CACHE"]
        self.bin = cache_dir() / f"k8s-{version()}" / "bin"

    def local_cluster(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(LOCAL_CLUSTER), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([str(self.bin / "kubectl"), "--kubeconfig", str(self.dir / "kubeconfig"), *args],
                                capture_output=True, text=True, timeout=60, check=False, input=input)
        assert not check or result.returncode == 0, result.stderr
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def tao(self, state: Path, namespace: str, *args: str) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "KUBECONFIG": str(self.dir / "kubeconfig"),
            "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
            "TAO_STATE_DIR": str(state),
            "TAO_K8S_NAMESPACE": namespace,
            "TAO_K8S_SKIP_NODE_RUNTIME_CHECK": "1",
        }
        return subprocess.run([TAO, *args], env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def native() -> Iterator[Native]:
    if os.environ.get("KUBECTL_TAO_SKIP_E2E") == "1":
        pytest.skip("KUBECTL_TAO_SKIP_E2E=1")
    cluster = Native(Path(f"{data_dir()}-topology"))
    cached = subprocess.run([str(BUILD_LOCAL_CLUSTER), "--check"], env=cluster.env, check=False).returncode == 0
    if not cached:
        pytest.skip(f"the {version()} control plane is not built (KUBECTL_TAO_K8S_VERSION={version()} "
                    "scripts/build-local-cluster builds it; a test does not start a 12-50 min build)")
    started = time.monotonic()
    up = cluster.local_cluster("up", timeout=UP_TIMEOUT_S)
    try:
        assert up.returncode == 0, f"up failed ({up.returncode}):\n{up.stdout}\n{up.stderr}"
        print(f"topology cluster up in {time.monotonic() - started:.0f}s")
        for node, rack in RACKS.items():
            cluster.kubectl("label", "node", node, f"{RACK}={rack}", "--overwrite")
        yield cluster
    finally:
        down = cluster.local_cluster("down")
        assert down.returncode == 0, down.stderr


@pytest.fixture()
def namespace(native: Native) -> Iterator[str]:
    """A namespace with a Bound claim tao-data (submit's tier A gate wants one)."""
    name = unique_name("topo")
    native.kubectl("create", "namespace", name)
    claim = {"apiVersion": "v1", "kind": "List", "items": bound_claim_objects(name, f"pv-{name}")}
    native.kubectl("apply", "-f", "-", input=json.dumps(claim))
    wait_for(lambda: native.kubectl("get", "pvc", "tao-data", "-n", name, "-o", "jsonpath={.status.phase}").stdout
             == "Bound", 60, message="PVC tao-data to bind")
    yield name
    native.kubectl("delete", "namespace", name, "--wait=false", check=False)
    native.kubectl("delete", "pv", f"pv-{name}", "--wait=false", "--ignore-not-found", check=False)


def _holder(name: str, node: str, gpus: int) -> dict[str, Any]:
    """A pod bound to NODE that keeps GPUS of it busy."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": STAY},
            "spec": {"nodeName": node, "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "main", "image": "busybox",
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def _fit(native: Native, state: Path, namespace: str, *args: str) -> tuple[int, dict[str, Any]]:
    result = native.tao(state, namespace, "fit", "--gpus", "8", *args, "-o", "json")
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else {"stderr": result.stderr}


def _gang_pods(native: Native, namespace: str, job: str) -> list[dict[str, Any]]:
    return list(native.json("get", "pods", "-n", namespace, "-l", f"job-name={job}")["items"])


def test_the_topology_gate_reaches_the_api_server_and_the_scheduler(native: Native) -> None:
    assert (native.dir / "feature-gates").read_text() == (
        "GenericWorkload=true,WorkloadWithJob=true,TopologyAwareWorkloadScheduling=true\n")
    metrics = native.kubectl("get", "--raw", "/metrics").stdout
    assert 'kubernetes_feature_enabled{name="TopologyAwareWorkloadScheduling",stage="ALPHA"} 1' in metrics
    pid = (native.dir / "pids" / "kube-scheduler.pid").read_text().strip()
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert any(a.startswith(b"--feature-gates=") and b"TopologyAwareWorkloadScheduling=true" in a for a in argv), argv


def test_a_native_topology_gang_waits_for_one_rack_then_runs_inside_it(
    native: Native, namespace: str, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    # One node half busy in each rack: the cluster has two free 8-GPU nodes, but no rack has two.
    holders = {"hold-r1": "gpu-node-0", "hold-r2": "gpu-node-2"}
    items = [_holder(name, node, 4) for name, node in holders.items()]
    native.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                           "items": items}))
    wait_for(lambda: all(p["status"].get("phase") == "Running"
                         for p in native.json("get", "pods", "-n", namespace)["items"]), 60,
             message="the holders to run")

    code, data = _fit(native, state, namespace, "--nodes", "2")
    assert (code, data["verdict"]) == (0, "fits"), data  # without --topology it would start now, across racks
    assert data["gang"]["kind"] == "native", data["gang"]
    code, data = _fit(native, state, namespace, "--nodes", "2", "--topology", RACK)
    assert (code, data["verdict"]) == (1, "queue"), data
    assert f"no {RACK} domain has 2 nodes with 8 free now" in data["message"]
    assert "the cluster has 2 such nodes free across domains" in data["message"]
    domains = {d["value"]: d for d in data["topology"]["domains"]}
    assert {v: (d["nodes"], d["fitting_ever"], d["fitting_now"], d["free"]) for v, d in domains.items()} == {
        "r1": (2, ["gpu-node-0", "gpu-node-1"], ["gpu-node-1"], 12),
        "r2": (2, ["gpu-node-2", "gpu-node-3"], ["gpu-node-3"], 12)}, domains
    code, data = _fit(native, state, namespace, "--nodes", "3", "--topology", RACK)
    assert (code, data["verdict"]) == (4, "never"), data

    submit = ["submit", "--image", "busybox", "--network-arch", "dino", "--action", "train", "--gpus", "8",
              "--pvc", "tao-data", "--command", "true", "--annotation", "kwok.kubectl-tao.io/stay-running=true",
              "--topology", RACK]
    refused = native.tao(state, namespace, *submit, "--nodes", "3")
    assert (refused.returncode, refused.stdout) == (4, ""), refused.stderr
    assert f"never: 3 x 8 nvidia.com/gpu with --topology {RACK} needs 3 nodes" in refused.stderr, refused.stderr
    assert native.kubectl("get", "jobs", "-n", namespace, "-o", "name").stdout == ""

    # The control: the same gang without --topology starts at once, one rank in each rack.
    spread = native.tao(state, namespace, *submit[:-2], "--nodes", "2")
    assert spread.returncode == 0, spread.stderr
    [free_job] = native.json("get", "jobs", "-n", namespace)["items"]
    assert "schedulingConstraints" not in free_job["spec"]["scheduling"], free_job["spec"]
    name = free_job["metadata"]["name"]
    wait_for(lambda: [p["status"].get("phase") for p in _gang_pods(native, namespace, name)] == ["Running"] * 2,
             60, message="the gang without --topology to run")
    assert sorted(p["spec"]["nodeName"] for p in _gang_pods(native, namespace, name)) == ["gpu-node-1", "gpu-node-3"]
    assert native.tao(state, namespace, "cancel", spread.stdout.strip().splitlines()[-1]).returncode == 0
    native.kubectl("delete", "job", name, "-n", namespace, "--ignore-not-found", "--wait=false")
    wait_for(lambda: _gang_pods(native, namespace, name) == [], 60, message="the spread gang's pods to go")

    submitted = native.tao(state, namespace, *submit, "--nodes", "2")
    assert submitted.returncode == 0, submitted.stderr
    assert f"every rank in one {RACK} domain (Job spec.scheduling topology)" in submitted.stderr
    [job] = native.json("get", "jobs", "-n", namespace)["items"]
    assert job["spec"]["scheduling"]["schedulingConstraints"] == {"topology": [{"key": RACK}]}, job["spec"]

    def groups() -> list[dict[str, Any]]:
        found = native.json("get", "podgroups.v1beta1.scheduling.k8s.io", "-n", namespace)["items"]
        return [g for g in found if any(o.get("uid") == job["metadata"]["uid"]
                                        for o in g["metadata"].get("ownerReferences") or [])] or found

    wait_for(lambda: bool(groups()), 60, message="the Job controller to make the PodGroup")
    [group] = groups()
    assert group["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK}]}, group["spec"]

    wait_for(lambda: len(_gang_pods(native, namespace, job["metadata"]["name"])) == 2, 60,
             message="the Job controller to make both rank pods")
    time.sleep(20)  # the scheduler had time: two 8-GPU nodes are free, but in two racks
    pods = _gang_pods(native, namespace, job["metadata"]["name"])
    assert [p["spec"].get("nodeName") for p in pods] == [None, None], [p["spec"].get("nodeName") for p in pods]

    native.kubectl("delete", "pod", "hold-r2", "-n", namespace, "--grace-period=0", "--force")
    wait_for(lambda: all(p["status"].get("phase") == "Running"
                         for p in _gang_pods(native, namespace, job["metadata"]["name"])), 120,
             message="the gang to start once rack r2 has room")
    nodes = sorted(p["spec"]["nodeName"] for p in _gang_pods(native, namespace, job["metadata"]["name"]))
    assert nodes == ["gpu-node-2", "gpu-node-3"], nodes
    assert {native.json("get", "node", n)["metadata"]["labels"][RACK] for n in nodes} == {"r2"}
