"""Jobs on the local cluster's real nodes: real containers (containerd + runc) on a bridge with no
uplink, real cluster DNS, fake GPUs. Each test submits through the plugin with ordinary flags (a node
selector and a toleration for the real nodes' own taint) and reads back what the container really did.

Skipped when the cluster has no real nodes (KUBECTL_TAO_REAL_NODES=0).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cluster import (
    LOCAL_CLUSTER,
    Cluster,
    Tao,
    bound_claim_objects,
    kubectl,
    states,
    submitted_id,
    wait_for,
)

pytestmark = pytest.mark.e2e

REAL_NODE_LABEL = "kubectl-tao.io/real-node"
ON_REAL_NODES = [
    "--node-selector",
    f"{REAL_NODE_LABEL}=true",
    "--toleration",
    f"{REAL_NODE_LABEL}=true:NoSchedule",
]


def real_images(cluster: Cluster) -> dict[str, str]:
    """The image references local-cluster imported into every real node (KEY=VALUE lines)."""
    path = cluster.data_dir / "real" / "images.env"
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


@pytest.fixture(scope="module")
def images(cluster: Cluster) -> dict[str, str]:
    nodes = kubectl("get", "nodes", "-l", REAL_NODE_LABEL, "-o", "name").stdout.split()
    if not nodes:
        pytest.skip("the local cluster has no real nodes (KUBECTL_TAO_REAL_NODES=0)")
    return real_images(cluster)


@pytest.fixture()
def real(cluster: Cluster, namespace: str, tmp_path: Path, images: dict[str, str]) -> Iterator[Tao]:
    """A Tao in a fresh namespace with a Bound claim `tao-data` whose hostPath lives in the cluster's
    data directory (so `down` removes it). The test's files on the claim are in `t.volume`."""
    t = Tao(cluster, namespace, tmp_path / "state")
    pv = f"pv-{namespace}"
    volume = cluster.data_dir / "real" / "volumes" / namespace
    volume.mkdir(parents=True, exist_ok=True)
    t.volume = volume  # type: ignore[attr-defined]
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
    t.kubectl("delete", "jobs", "--all", "--cascade=foreground", "--wait=false", check=False)
    wait_for(lambda: t.kubectl("get", "pods", "-o", "name").stdout == "", 90, message="the test's pods to go")
    t.kubectl("delete", "pv", pv, "--ignore-not-found", "--wait=false", check=False)


def submit(t: Tao, image: str, command: str, *extra: str, gpus: int = 1, input: str | None = None) -> Any:
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
        *ON_REAL_NODES,
        *extra,
        input=input,
        timeout=240,
    )


def record_pods(t: Tao, record_id: str) -> list[dict[str, Any]]:
    job = t.extra(record_id)["job_name"]
    out = t.kubectl("get", "pods", "-l", f"job-name={job}", "-o", "json").stdout
    return list(json.loads(out)["items"])


def status_json(t: Tao, record_id: str) -> dict[str, Any]:
    result = t("status", record_id, "-o", "json")
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


# ------------------------------------------------------------------ single node


def test_single_node_job_prints_real_output_and_completes(real: Tao, images: dict[str, str]) -> None:
    command = (
        "echo host=$(hostname); echo kernel=$(uname -r); echo gpus=$NVIDIA_VISIBLE_DEVICES fake=$KUBECTL_TAO_FAKE_GPU"
    )
    result = submit(real, images["BUSYBOX_IMAGE"], command, "--wait", "--timeout", "180")
    assert result.returncode == 0, result.stderr
    record_id = result.stdout.strip().splitlines()[-1]
    assert real.record(record_id)["terminal_state"] == "COMPLETE"
    logs = real("logs", record_id)
    assert logs.returncode == 0, logs.stderr
    # Only a real container on this machine's kernel can print the kernel release.
    assert f"kernel={os.uname().release}" in logs.stdout
    assert "fake=1" in logs.stdout
    gpus = next(line for line in logs.stdout.splitlines() if line.startswith("gpus="))
    assert gpus.split()[0].startswith("gpus=FAKE-GPU-real-node-")
    (pod,) = record_pods(real, record_id)
    assert pod["spec"]["nodeName"].startswith("real-node-")
    assert f"host={pod['metadata']['name']}" in logs.stdout


def test_the_container_runs_exactly_the_command_text_given(real: Tao, images: dict[str, str]) -> None:
    # The kubelet turns `$$` into `$` and `$(NAME)` into a container variable's value before the shell
    # starts; submit escapes both, so the single-quoted text comes out as typed and `$$` is the shell's PID.
    text = "$$ $(TAO_JOB_ID) $$(x) $"
    command = f"printf 'text=%s\\n' '{text}'; echo pid=$$"
    result = submit(real, images["BUSYBOX_IMAGE"], command, "--wait", "--timeout", "180", gpus=0)
    assert result.returncode == 0, result.stderr
    logs = real("logs", result.stdout.strip().splitlines()[-1]).stdout
    assert f"text={text}" in logs, logs
    pid = next(line for line in logs.splitlines() if "pid=" in line).split("pid=", 1)[1]
    assert pid.isdigit(), logs


def test_logs_follow_ends_when_the_container_exits(real: Tao, images: dict[str, str]) -> None:
    record_id = submitted_id(submit(real, images["BUSYBOX_IMAGE"], "echo first; sleep 4; echo last", gpus=0))
    wait_for(lambda: status_json(real, record_id)["state"] == "RUNNING", 90, message="the job to run")
    follow = real("logs", record_id, "-f", timeout=90)  # a follow that outlived the container would time out
    assert follow.returncode == 0, follow.stderr
    assert "first" in follow.stdout and "last" in follow.stdout
    wait_for(lambda: status_json(real, record_id)["state"] == "COMPLETE", 60, message="COMPLETE")


def test_exit_3_is_error_err_program_and_explain_names_it(real: Tao, images: dict[str, str]) -> None:
    result = submit(
        real, images["BUSYBOX_IMAGE"], "echo about to fail; exit 3", "--wait", "--timeout", "180", gpus=0
    )
    assert result.returncode == 1, result.stderr
    record_id = result.stdout.strip().splitlines()[-1]
    record = real.record(record_id)
    assert record["terminal_state"] == "ERROR" and record["err_class"] == "ERR_PROGRAM"
    (pod,) = record_pods(real, record_id)
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 3
    assert "about to fail" in real("logs", record_id).stdout
    explain = real("explain", record_id)
    assert "3" in explain.stdout and "exit" in explain.stdout.lower(), explain.stdout


def test_memory_limit_exceeded_is_oomkilled_err_infra(real: Tao, images: dict[str, str]) -> None:
    # dd's 64 MiB buffer is more than this 32Mi default limit: the kernel's memcg kills it.
    real.kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "v1",
                "kind": "LimitRange",
                "metadata": {"name": "memory"},
                "spec": {"limits": [{"type": "Container", "default": {"memory": "32Mi"}}]},
            }
        ),
    )
    result = submit(
        real, images["BUSYBOX_IMAGE"], "dd if=/dev/zero of=/dev/null bs=64M count=4", "--wait", "--timeout", "180",
        gpus=0,
    )
    assert result.returncode == 1, result.stderr
    record_id = result.stdout.strip().splitlines()[-1]
    record = real.record(record_id)
    assert record["terminal_state"] == "ERROR" and record["err_class"] == "ERR_INFRA"
    (pod,) = record_pods(real, record_id)
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["reason"] == "OOMKilled" and terminated["exitCode"] == 137


def test_env_file_secret_reaches_the_container_environment(real: Tao, images: dict[str, str]) -> None:
    value = "canary-" + secrets.token_hex(12)
    command = "printf %s \"$REAL_POD_TOKEN\" | sha256sum | cut -d' ' -f1 | sed 's/^/token-sha256=/'"
    result = submit(
        real, images["BUSYBOX_IMAGE"], command, "--env-file", "-", "--wait", "--timeout", "180", gpus=0,
        input=f"REAL_POD_TOKEN={value}\n",
    )
    assert result.returncode == 0, result.stderr
    record_id = result.stdout.strip().splitlines()[-1]
    logs = real("logs", record_id).stdout
    assert f"token-sha256={hashlib.sha256(value.encode()).hexdigest()}" in logs
    assert value not in logs
    job_yaml = real.kubectl("get", "jobs", "-o", "yaml").stdout
    assert value not in job_yaml
    assert value not in json.dumps(real.record(record_id)) + json.dumps(real.extra(record_id))
    assert all(value not in " ".join(call) for call in real.kubectl_calls())


def _container_processes(marker: str) -> list[int]:
    """Host pids whose command line is exactly `sleep MARKER` (the test container's process)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", marker.encode()]:
            found.append(int(proc.name))
    return found


def test_cancel_stops_the_running_container_and_leaves_nothing(real: Tao, images: dict[str, str]) -> None:
    marker = str(3000 + secrets.randbelow(5000))
    record_id = submitted_id(submit(real, images["BUSYBOX_IMAGE"], f"exec sleep {marker}", gpus=0))
    wait_for(lambda: _container_processes(marker), 90, message="the container's sleep process")
    result = real("cancel", record_id)
    assert result.returncode == 0, result.stderr
    wait_for(lambda: not _container_processes(marker), 30, message="the container's process to be gone")
    assert real.leftovers() == []
    assert real.kubectl("get", "pods", "-o", "name").stdout == ""
    assert real.record(record_id)["terminal_state"] == "CANCELED"


# ------------------------------------------------------------------ multi-node

RENDEZVOUS_VARS = ["WORLD_SIZE", "NNODES", "NUM_GPU_PER_NODE", "NPROC_PER_NODE", "NODE_RANK", "MASTER_ADDR",
                   "MASTER_PORT"]
# Each rank prints its rendezvous variables; rank 0 then accepts one connection on MASTER_PORT, which is
# what rank 1's barrier probes, so both ranks end.
PRINT_RENDEZVOUS = " ".join(f'echo "{v}=${v}";' for v in RENDEZVOUS_VARS) + (
    ' if [ "$NODE_RANK" = 0 ]; then nc -l -p "$MASTER_PORT" >/dev/null; fi'
)


def _rank_lines(logs: str, rank: int) -> dict[str, str]:
    prefix = f"[rank {rank}] "
    out = {}
    for line in logs.splitlines():
        if line.startswith(prefix) and "=" in line:
            key, value = line[len(prefix):].split("=", 1)
            out[key] = value
    return out


@pytest.mark.parametrize("image_key", ["BUSYBOX_IMAGE", "GLIBC_IMAGE"])
def test_tao_launcher_ranks_get_the_rendezvous_env_and_pass_the_barrier(
    real: Tao, images: dict[str, str], image_key: str
) -> None:
    result = submit(
        real, images[image_key], PRINT_RENDEZVOUS, "--nodes", "2", "--master-port", "29555",
        "--rendezvous-timeout", "60", "--wait", "--timeout", "180", gpus=2,
    )
    assert result.returncode == 0, result.stderr + result.stdout
    record_id = result.stdout.strip().splitlines()[-1]
    job = real.extra(record_id)["job_name"]
    pods = record_pods(real, record_id)
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["real-node-0", "real-node-1"]
    logs = real("logs", record_id).stdout
    for rank in (0, 1):
        env = _rank_lines(logs, rank)
        assert env == {
            "WORLD_SIZE": "2",
            "NNODES": "2",
            "NUM_GPU_PER_NODE": "2",
            "NPROC_PER_NODE": "2",
            "NODE_RANK": str(rank),
            "MASTER_ADDR": f"{job}-0.{job}",
            "MASTER_PORT": "29555",
        }, logs
        assert f"[rank {rank}] kubectl-tao: rank {rank} passed the rendezvous barrier" in logs


def test_rank_that_cannot_reach_rank_0_exits_88_and_fails_the_job_at_once(
    real: Tao, images: dict[str, str]
) -> None:
    # Nothing listens on MASTER_PORT: rank 1's barrier gives up after 8 s.
    result = submit(
        real, images["BUSYBOX_IMAGE"], "sleep 120", "--nodes", "2", "--rendezvous-timeout", "8",
        "--wait", "--timeout", "120", gpus=1,
    )
    assert result.returncode == 1, result.stderr
    record_id = result.stdout.strip().splitlines()[-1]
    record = real.record(record_id)
    assert record["terminal_state"] == "ERROR" and record["err_class"] == "ERR_INFRA"
    assert "RendezvousTimeout" in json.dumps(record["transitions"][-1]) + json.dumps(status_json(real, record_id))
    index = "batch.kubernetes.io/job-completion-index"
    pods = {p["metadata"]["annotations"][index]: p for p in record_pods(real, record_id)}
    rank1 = pods["1"]["status"]["containerStatuses"][0]["state"].get("terminated") or {}
    assert rank1.get("exitCode") == 88
    # Rank 0 would sleep 120 s: the Job failed at once through its podFailurePolicy, not when rank 0 ended.
    job = real.extra(record_id)["job_name"]
    conditions = json.loads(real.kubectl("get", "job", job, "-o", "json").stdout)["status"].get("conditions") or []
    # FailureTarget at once; Failed only once rank 0's container has stopped (its grace period)
    ending = {c["type"]: c["reason"] for c in conditions if c["type"] in ("FailureTarget", "Failed")}
    assert ending and set(ending.values()) == {"PodFailurePolicy"}, conditions  # (both are only ever set True)
    rank0 = (pods["0"]["status"]["containerStatuses"][0]["state"].get("terminated") or {}) if "0" in pods else {}
    assert rank0.get("exitCode") != 0, rank0  # rank 0 did not end its sleep: it was stopped with the Job
    assert "ERROR" in states(record)


ALL_REDUCE = """
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
world = dist.get_world_size()
print(f"all_reduce rank {rank} of {world}: sum={value.item():g} backend={dist.get_backend()}", flush=True)
dist.destroy_process_group()
"""


def test_torchrun_all_reduce_over_gloo_on_two_real_nodes(real: Tao, cluster: Cluster) -> None:
    # The torch image is imported in the background after `up`; wait for it.
    image = wait_for(lambda: real_images(cluster).get("TORCH_IMAGE"), 300, message="the torch image on the nodes")
    (real.volume / "all_reduce.py").write_text(ALL_REDUCE)  # type: ignore[attr-defined]
    result = submit(
        real, image, "/workspace/all_reduce.py", "--nodes", "2", "--launcher", "torchrun",
        "--rendezvous-timeout", "60", "--wait", "--timeout", "240", gpus=1,
    )
    assert result.returncode == 0, result.stderr + result.stdout
    record_id = result.stdout.strip().splitlines()[-1]
    assert real.record(record_id)["terminal_state"] == "COMPLETE"
    logs = real("logs", record_id).stdout
    # Rank 0 adds 1 and rank 1 adds 2: both print the reduced value, each line prefixed with its rank.
    assert "[rank 0] all_reduce rank 0 of 2: sum=3 backend=gloo" in logs, logs
    assert "[rank 1] all_reduce rank 1 of 2: sum=3 backend=gloo" in logs, logs
    assert sorted(p["spec"]["nodeName"] for p in record_pods(real, record_id)) == ["real-node-0", "real-node-1"]


def test_pulls_fail_fast_and_nothing_leaves_the_machine(real: Tao) -> None:
    # An image that is not on the nodes: the pull goes to a closed local port and fails at once.
    record_id = submitted_id(submit(real, "registry.example.invalid/none:1", "true", gpus=0))

    def pull_failed() -> str | None:
        for pod in record_pods(real, record_id):
            for status in pod["status"].get("containerStatuses") or []:
                reason = (status["state"].get("waiting") or {}).get("reason")
                if reason in ("ErrImagePull", "ImagePullBackOff"):
                    return str(reason)
        return None

    wait_for(pull_failed, 60, message="the image pull to fail")
    assert real("cancel", record_id).returncode == 0


def test_status_lists_each_real_nodes_kubelet_and_containerd(cluster: Cluster, images: dict[str, str]) -> None:
    out = subprocess.run([str(LOCAL_CLUSTER), "status"], capture_output=True, text=True, check=False, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    for node in ("real-node-0", "real-node-1"):
        for part in ("kubelet", "containerd"):
            assert any(line.split()[:2] == [node, part] and "running" in line for line in out.stdout.splitlines())
    assert "no GPU exists" in out.stdout
