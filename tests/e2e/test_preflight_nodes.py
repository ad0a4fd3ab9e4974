"""preflight from a machine that is not a GPU node (a laptop with a kubeconfig): this machine's host check is
SKIPPED, the GPU nodes are judged from the cluster (GPU Feature Discovery's labels, put on the simulated GPU
nodes here and put back after), and the only MISSING a run can print is about the cluster."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cluster import TAO, Tao, kubectl, kubectl_json

pytestmark = pytest.mark.e2e

PRODUCT = "NVIDIA-H100-80GB-HBM3"  # the simulated GPU nodes' (cluster/kwok/gpu-node.yaml.tmpl)
SIMULATED_GPU_NODES = "type=kwok,nvidia.com/gpu.present=true"
# The gates preflight runs on the cluster: a MISSING line of any of these is about the cluster.
CLUSTER_CHECKS = {"cluster", "permissions", "gpu-operator", "node-runtime", "version", "nccl-probe", "references",
                  "queue", "capacity", "gang", "restarts"}
ON_A_GPU_NODE = Path("/dev/nvidiactl").exists()


def gfd_labels(driver: str, cuda: str) -> dict[str, str]:
    """The version labels GPU Feature Discovery writes for DRIVER (X.Y.Z) and CUDA (X.Y), old names and new."""
    major, minor, rev = driver.split(".")
    cuda_major, cuda_minor = cuda.split(".")
    return {
        "nvidia.com/cuda.driver.major": major, "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": rev, "nvidia.com/cuda.runtime.major": cuda_major,
        "nvidia.com/cuda.runtime.minor": cuda_minor,
        "nvidia.com/cuda.driver-version.major": major, "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": rev, "nvidia.com/cuda.driver-version.full": driver,
        "nvidia.com/cuda.runtime-version.major": cuda_major, "nvidia.com/cuda.runtime-version.minor": cuda_minor,
        "nvidia.com/cuda.runtime-version.full": cuda,
    }


@pytest.fixture()
def gpu_nodes() -> Iterator[list[str]]:
    """The simulated GPU nodes; every label a test sets on them is put back as it was afterwards."""
    nodes = kubectl_json("get", "nodes", "-l", SIMULATED_GPU_NODES)["items"]
    before = {n["metadata"]["name"]: dict(n["metadata"].get("labels") or {}) for n in nodes}
    assert len(before) >= 2, "the local cluster has two simulated GPU nodes"
    yield sorted(before)
    keys = set(gfd_labels("1.2.3", "4.5"))
    for name, labels in before.items():
        now = kubectl_json("get", "node", name)["metadata"].get("labels") or {}
        restore = [f"{k}={labels[k]}" for k in sorted(keys) if k in labels and now.get(k) != labels[k]]
        restore += [f"{k}-" for k in sorted(keys) if k in now and k not in labels]
        if restore:
            kubectl("label", "node", name, "--overwrite", *restore)


def label(node: str, labels: dict[str, str]) -> None:
    kubectl("label", "node", node, "--overwrite", *[f"{k}={v}" for k, v in labels.items()])


def preflight(tao: Tao, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The plugin as a user runs it: TAO_K8S_SKIP_NODE_RUNTIME_CHECK unset (the tao fixture sets it)."""
    run_env = {k: v for k, v in tao.env.items() if k != "TAO_K8S_SKIP_NODE_RUNTIME_CHECK"}
    return subprocess.run([TAO, "preflight", *args], env={**run_env, **env}, capture_output=True, text=True,
                          timeout=180, check=False)


def lines(out: str, name: str) -> list[str]:
    return [line for line in out.splitlines() if line.split(": ", 2)[1:2] == [name]]


def host_line_is_this_machines(out: str) -> None:
    [line] = lines(out, "host-runtime")
    if ON_A_GPU_NODE:
        assert line.startswith(("OK: host-runtime:", "MISSING: host-runtime:")), line
    else:
        assert line.startswith("SKIPPED: host-runtime: this machine is not a GPU node (no /dev/nvidiactl)"), line


def test_a_laptop_style_run_judges_the_gpu_nodes_from_the_cluster(tao: Tao, gpu_nodes: list[str]) -> None:
    for node in gpu_nodes:
        label(node, gfd_labels("580.95.05", "13.0"))
    result = preflight(tao, "--gpus", "8", "--pvc", "tao-data", "--gpu-product", PRODUCT)
    host_line_is_this_machines(result.stdout)
    missing = [line for line in result.stdout.splitlines() if line.startswith("MISSING")]
    assert [m for m in missing if m.split(": ", 2)[1] not in CLUSTER_CHECKS | {"host-runtime"}] == []
    if not ON_A_GPU_NODE:  # a laptop: no MISSING at all on a cluster whose GPU nodes are ready
        assert missing == [] and result.returncode == 0, result.stdout + result.stderr
    found = lines(result.stdout, "node-runtime")
    assert found[0] == (f"OK: node-runtime: {len(gpu_nodes)} GPU node(s) meet driver >= 580, CUDA >= 13.0: driver "
                        "580.95.05, CUDA 13.0")
    assert found[1].startswith("OK: node-runtime: container runtime on the GPU nodes: ")
    # The nodes came from the capacity read: one nodes read, one RuntimeClass read, in the same round trip.
    calls = [argv for argv in tao.kubectl_calls() if "--raw" in argv or "runtimeclasses.node.k8s.io" in argv]
    assert sum("/api/v1/nodes?resourceVersion=0" in argv for argv in calls) == 1
    assert sum("runtimeclasses.node.k8s.io" in argv for argv in calls) == 1


def test_an_old_driver_on_some_gpu_nodes_warns_and_on_all_is_missing(tao: Tao, gpu_nodes: list[str]) -> None:
    old, new = gpu_nodes[0], gpu_nodes[1:]
    label(old, gfd_labels("570.172.08", "12.8"))
    for node in new:
        label(node, gfd_labels("580.95.05", "13.0"))
    result = preflight(tao, "--gpu-product", PRODUCT)
    [warned] = [line for line in lines(result.stdout, "node-runtime") if line.startswith("WARN")]
    assert warned.startswith(f"WARN: node-runtime: 1 of {len(gpu_nodes)} GPU node(s) cannot run a TAO container "
                             f"(driver >= 580, CUDA >= 13.0): {old}: driver 570.172.08 < 580, CUDA 12.8 < 13.0 -- ")
    for node in new:
        label(node, gfd_labels("575.57.08", "12.9"))
    result = preflight(tao, "--gpu-product", PRODUCT, "-o", "json")
    assert result.returncode == 1, result.stdout + result.stderr
    checks = json.loads(result.stdout)["checks"]
    assert [c["check"] for c in checks if c["status"] == "MISSING" and c["check"] != "host-runtime"] == ["node-runtime"]
    # TAO_MIN_DRIVER / TAO_MIN_CUDA move the minimums as they do for the setup script.
    relaxed = preflight(tao, "--gpu-product", PRODUCT, TAO_MIN_DRIVER="570", TAO_MIN_CUDA="12.8")
    assert not [line for line in lines(relaxed.stdout, "node-runtime") if not line.startswith("OK")]


def test_no_kubeconfig_is_one_line_naming_it_and_exit_3(tao: Tao, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-kubeconfig"
    result = preflight(tao, KUBECONFIG=str(missing), KUBERNETES_SERVICE_HOST="")
    assert result.returncode == 3, result.stdout + result.stderr
    [line] = lines(result.stdout, "cluster")
    assert line.startswith(f"MISSING: cluster: no cluster configured: kubectl found no kubeconfig ($KUBECONFIG="
                           f"{missing} does not exist) and fell back to localhost:8080 -- get your cluster's ")
    assert line.count("aws eks") == 1 and len(line) - len(str(missing)) < 340
    assert [ln.split(": ", 2)[1] for ln in result.stdout.splitlines()] == ["host-runtime", "kubectl", "cluster"]
