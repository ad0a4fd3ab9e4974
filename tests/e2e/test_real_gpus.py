"""KUBECTL_TAO_GPUS=host on a machine without a GPU: the local cluster's real node gets two stand-in
GPUs (character devices with /dev/null's numbers in a temporary device root, a stand-in libcuda and
nvidia-smi) through the device plugin's passthrough mode, and the tests prove that what its Allocate
answer carries reaches the container through the real kubelet, containerd and runc: the device nodes,
the read-only driver files, NVIDIA_VISIBLE_DEVICES. No GPU computes here: docs/real-gpus.md says how
the same path runs on a GPU host (gpu-smoke).

This module starts its own cluster (and brings it down): no other local cluster may be up.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cluster import LOCAL_CLUSTER, Cluster, Tao, bound_claim_objects, current_cluster, kubectl, wait_for
from support.gpu_standins import STAND_IN_LIBCUDA, UUIDS, make_stand_ins

NODE = "real-node-0"

pytestmark = pytest.mark.e2e


# Real nodes share one bridge on the machine: with another cluster's real nodes up, this module cannot start its own.
OWN_CLUSTER = True  # tests/e2e/conftest.py runs such modules before the session's cluster starts
OCCUPIED = (
    "another local cluster with real nodes is up (bridge ktbr0 exists): this module starts its own with "
    "KUBECTL_TAO_GPUS=host; run it when none is up"
)


def bridge_exists() -> bool:
    return subprocess.run(["ip", "link", "show", "ktbr0"], capture_output=True).returncode == 0


def local_cluster(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Any:
    return subprocess.run(
        [str(LOCAL_CLUSTER), *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def gpu_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if os.environ.get("KUBECTL_TAO_SKIP_E2E") == "1":
        pytest.skip("KUBECTL_TAO_SKIP_E2E=1")
    if os.geteuid() != 0:
        pytest.skip("real nodes need root")
    if bridge_exists():
        pytest.skip(OCCUPIED)
    with pytest.MonkeyPatch.context() as mp:
        # A data directory of its own: support.cluster's helpers follow KUBECTL_TAO_CLUSTER_DIR.
        mp.setenv("KUBECTL_TAO_CLUSTER_DIR", str(tmp_path_factory.mktemp("gpu-cluster")))
        env = {**os.environ, **make_stand_ins(tmp_path_factory.mktemp("stand-in-gpus"))}
        up = local_cluster("up", env=env, timeout=1800)
        try:
            assert up.returncode == 0, f"up failed ({up.returncode}):\n{up.stdout}\n{up.stderr}"
            assert f"{NODE}: 2 real GPU(s): Stand-in GPU 80GB ({UUIDS[0]}, /dev/nvidia0, 81559 MiB)" in up.stdout
            yield current_cluster(started_here=True)
        finally:
            if os.environ.get("KUBECTL_TAO_KEEP_CLUSTER") != "1":
                local_cluster("down")


@pytest.fixture()
def real(gpu_cluster: Cluster, tmp_path: Path) -> Iterator[Tao]:
    namespace = f"gpus-{os.urandom(3).hex()}"
    kubectl("create", "namespace", namespace)
    t = Tao(gpu_cluster, namespace, tmp_path / "state")
    wait_for(
        lambda: t.kubectl("get", "serviceaccount", "default", check=False).returncode == 0,
        30,
        message="the default ServiceAccount",
    )
    volume = gpu_cluster.data_dir / "real" / "volumes" / namespace
    volume.mkdir(parents=True, exist_ok=True)
    pv = f"pv-{namespace}"
    t.kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": bound_claim_objects(namespace, pv, host_path=str(volume))}
        ),
    )
    wait_for(
        lambda: t.kubectl("get", "pvc", "tao-data", "-o", "jsonpath={.status.phase}").stdout == "Bound",
        60,
        message="PVC tao-data to bind",
    )
    yield t
    kubectl("delete", "namespace", namespace, "--wait=false", check=False)
    kubectl("delete", "pv", pv, "--ignore-not-found", "--wait=false", check=False)


def busybox(cluster: Cluster) -> str:
    lines = (cluster.data_dir / "real" / "images.env").read_text().splitlines()
    images = dict(line.split("=", 1) for line in lines if "=" in line)
    return images["BUSYBOX_IMAGE"]


def submit(t: Tao, image: str, command: str, gpus: int) -> Any:
    return t(
        "submit",
        "--image",
        image,
        "--network-arch",
        "real",
        "--action",
        "run",
        "--gpus",
        str(gpus),
        "--pvc",
        "tao-data",
        "--command",
        command,
        "--wait",
        "--timeout",
        "180",
        timeout=240,
    )


# What the container reports of the GPUs it was given (the kubelet expands nothing: submit escapes `$`).
PROBE = (
    "echo visible=$NVIDIA_VISIBLE_DEVICES; echo ld=$LD_LIBRARY_PATH; echo fake=${KUBECTL_TAO_FAKE_GPU:-unset}; "
    "for d in /dev/nvidia*; do if [ -c $d ]; then echo chardev=$d; else echo other=$d; fi; done; "
    "cat /usr/local/nvidia/lib64/libcuda.so.1; nvidia-smi -L; "
    "if echo x >>/usr/local/nvidia/lib64/libcuda.so.1; then echo lib=writable; else echo lib=read-only; fi"
)


def test_the_node_advertises_the_gpus_with_gpu_feature_discovery_labels(gpu_cluster: Cluster) -> None:
    node = json.loads(kubectl("get", "node", NODE, "-o", "json").stdout)
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "2"
    labels = node["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "Stand-in-GPU-80GB"
    assert labels["nvidia.com/gpu.memory"] == "81559"
    assert labels["nvidia.com/gpu.count"] == "2"
    assert labels["nvidia.com/gpu.present"] == "true"
    assert "kubectl-tao.io/fake-gpu" not in labels
    assert not node["spec"].get("taints"), "a host-GPU cluster's real node takes every job: no taint"
    status = local_cluster("status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert "their nvidia.com/gpu are this machine's real GPUs:" in status.stdout
    assert (
        f"{NODE}: 2 real GPU(s): Stand-in GPU 80GB ({UUIDS[0]}, /dev/nvidia0, 81559 MiB), "
        f"Stand-in GPU 80GB ({UUIDS[1]}, /dev/nvidia1, 81559 MiB)" in status.stdout
    )


@pytest.mark.parametrize("gpus", [1, 2])
def test_what_allocate_returns_reaches_the_container(real: Tao, gpu_cluster: Cluster, gpus: int) -> None:
    result = submit(real, busybox(gpu_cluster), PROBE, gpus)
    assert result.returncode == 0, result.stdout + result.stderr
    record_id = result.stdout.strip().splitlines()[-1]
    logs = real("logs", record_id)
    assert logs.returncode == 0, logs.stderr
    out = logs.stdout.splitlines()
    visible = next(line for line in out if line.startswith("visible=")).removeprefix("visible=").split(",")
    assert len(visible) == gpus and set(visible) <= set(UUIDS), logs.stdout
    minors = sorted(UUIDS.index(u) for u in visible)
    # Exactly the allocated GPUs' device nodes, and the control nodes, as character devices.
    want = {f"chardev=/dev/nvidia{m}" for m in minors} | {
        "chardev=/dev/nvidiactl",
        "chardev=/dev/nvidia-uvm",
        "chardev=/dev/nvidia-uvm-tools",
    }
    assert {line for line in out if line.startswith(("chardev=", "other="))} == want, logs.stdout
    assert "ld=/usr/local/nvidia/lib64:/usr/local/nvidia/lib" in out
    assert "fake=unset" in out
    assert STAND_IN_LIBCUDA in out
    assert "lib=read-only" in out
    for i, u in enumerate(visible):
        assert f"GPU {i}: Stand-in GPU 80GB (UUID: {u})" in out
    # The device plugin gave all of it: the pod is not privileged and mounts no host path of its own.
    job = real.extra(record_id)["job_name"]
    (pod,) = json.loads(real.kubectl("get", "pods", "-l", f"job-name={job}", "-o", "json").stdout)["items"]
    assert pod["spec"]["nodeName"] == NODE
    assert not any("hostPath" in v for v in pod["spec"].get("volumes", []))
    for c in pod["spec"]["containers"]:
        assert not (c.get("securityContext") or {}).get("privileged")
        assert c["resources"]["limits"]["nvidia.com/gpu"] == str(gpus)


def test_more_gpus_than_the_machine_has_is_refused_by_the_fit_gate(real: Tao, gpu_cluster: Cluster) -> None:
    result = submit(real, busybox(gpu_cluster), "true", 3)
    assert result.returncode == 4, result.stdout + result.stderr
    assert "nvidia.com/gpu" in result.stderr or "GPU" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) <= 3, result.stderr
    assert real.records() == []
    assert real.kubectl("get", "jobs", "-o", "name").stdout == ""
