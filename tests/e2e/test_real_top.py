"""`kubectl tao top` on the local cluster's real nodes: real containers whose GPUs are fake (the fake device
plugin), so what the GPUs do comes from stand-ins that print exactly what the real tools print:
- an `nvidia-smi` shipped into the job's containers by its command, printing the CSV the real one prints for
  top's query (`index, uuid, utilization.gpu, memory.used, memory.total`, ", "-joined, no units);
- a pod serving a DCGM exporter metrics page (the exporter's text format and pod attribution labels) with
  busybox httpd, behind a Service labelled as the GPU Operator labels the exporter's.
top reads the first through `kubectl exec` and the second through the API server's service proxy.

Skipped when the cluster has no real nodes (KUBECTL_TAO_REAL_NODES=0)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.cluster import Tao, submitted_id, wait_for

from .test_real_pods import REAL_NODE_LABEL, images, real, record_pods, status_json, submit  # noqa: F401

pytestmark = pytest.mark.e2e

BUSY_UUID = "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"
IDLE_UUID = "GPU-3c5e1f7a-0b9d-4e21-8f6a-2d7c9b1e4a03"
# Rank 0 busy, every other rank idle with almost nothing in memory; anything but top's query is refused as
# nvidia-smi refuses an unknown field (exit 2).
NVIDIA_SMI = f"""#!/bin/sh
[ "$*" = "--query-gpu=index,uuid,utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits" ] || {{
  echo "Field \\"$1\\" is not a valid field to query."; exit 2; }}
if [ "$JOB_COMPLETION_INDEX" = "0" ]; then
  printf '0, {BUSY_UUID}, 87, 40213, 81559\\n'
else
  printf '0, {IDLE_UUID}, 0, 3, 81559\\n'
fi
"""
INSTALL = ("mkdir -p /usr/local/bin && cp /workspace/nvidia-smi /usr/local/bin/nvidia-smi && "
           "chmod 755 /usr/local/bin/nvidia-smi && echo stand-in installed && sleep 240")


def top_json(t: Tao, record_id: str, *extra: str) -> list[dict[str, Any]]:
    result = t("top", record_id, "-o", "json", *extra, timeout=60)
    assert result.returncode == 0, result.stderr
    data: list[dict[str, Any]] = json.loads(result.stdout)
    return data


SEEN: list[str] = []  # what top said last, for the message of a wait that timed out


def all_read(t: Tao, record_id: str, ranks: int) -> list[dict[str, Any]] | None:
    result = t("top", record_id, "-o", "json", timeout=60)
    SEEN[:] = [result.stdout, result.stderr]
    if result.returncode == 2 and "has no running pod yet" in result.stderr:
        return None
    assert result.returncode == 0, (result.stderr, t("logs", record_id).stdout)
    data: list[dict[str, Any]] = json.loads(result.stdout)
    return data if len(data) == ranks and all(rank["gpus"] for rank in data) else None


def test_top_reads_nvidia_smi_in_every_rank_and_flags_the_idle_one(real: Tao, images: dict[str, str]) -> None:  # noqa: F811
    (real.volume / "nvidia-smi").write_text(NVIDIA_SMI)  # type: ignore[attr-defined]
    # No rendezvous barrier: rank 0 runs no server for rank 1 to wait for.
    record_id = submitted_id(submit(real, images["BUSYBOX_IMAGE"], INSTALL, "--nodes", "2", "--master-port", "29571",
                                    "--rendezvous-timeout", "0"))
    try:
        data = wait_for(lambda: all_read(real, record_id, 2), 240, interval=2, message="both ranks' nvidia-smi")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; top said {SEEN}; status: {status_json(real, record_id)}") from None
    pods = {pod["metadata"]["name"]: pod["spec"]["nodeName"] for pod in record_pods(real, record_id)}
    assert [rank["rank"] for rank in data] == [0, 1]
    for rank in data:
        assert rank["source"] == "nvidia-smi" and "reason" not in rank
        assert rank["node"] == pods[rank["pod"]] and rank["node"].startswith("real-node-")
    assert data[0]["gpus"] == [{"index": 0, "uuid": BUSY_UUID, "utilization": 87.0, "memory_used_mib": 40213,
                                "memory_total_mib": 81559, "idle": False}]
    assert data[1]["gpus"][0]["uuid"] == IDLE_UUID and data[1]["gpus"][0]["idle"] is True
    assert (data[0]["idle"], data[0]["low_memory"], data[1]["idle"], data[1]["low_memory"]) == (
        False, False, True, True)
    table = real("top", record_id, timeout=60)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["RANK", "POD", "NODE", "GPU", "UUID", "UTIL", "MEMORY", "FLAGS", "SOURCE"]
    assert lines[1].split()[5:] == ["87%", "40213/81559", "MiB", "-", "nvidia-smi"]
    assert lines[2].split()[5:] == ["0%", "3/81559", "MiB", "idle,low-memory", "nvidia-smi"]
    assert "warning: idle GPUs (below 5% busy) on rank 1" in table.stderr


def dcgm_page(namespace: str, pod: str) -> str:
    """The exporter's page for two GPUs of a node: GPU 0 allocated to POD's container, GPU 1 to no pod."""
    lines = []
    for field, help_text, ours, other in (
        ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "64", "0"),
        ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", "61559", "81559"),
        ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "20000", "0"),
    ):
        lines += [f"# HELP {field} {help_text}", f"# TYPE {field} gauge"]
        lines.append(
            f'{field}{{gpu="0",UUID="{BUSY_UUID}",pci_bus_id="00000000:00:06.0",device="nvidia0",'
            f'modelName="NVIDIA H100 80GB HBM3",hostname="real-node-1",container="tao",namespace="{namespace}",'
            f'pod="{pod}"}} {ours}'
        )
        lines.append(
            f'{field}{{gpu="1",UUID="{IDLE_UUID}",pci_bus_id="00000000:00:07.0",device="nvidia1",'
            f'modelName="NVIDIA H100 80GB HBM3",hostname="real-node-1",container="",namespace="",pod=""}} {other}'
        )
    return "\n".join(lines) + "\n"


def exporter_objects(namespace: str, image: str) -> dict[str, Any]:
    labels = {"app": "kubectl-tao-test-dcgm"}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "dcgm-standin", "namespace": namespace, "labels": labels},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "nodeSelector": {REAL_NODE_LABEL: "true"},
            "tolerations": [{"key": REAL_NODE_LABEL, "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
            "containers": [{
                "name": "httpd", "image": image, "imagePullPolicy": "Never",
                "command": ["httpd", "-f", "-p", "9400", "-h", "/workspace/dcgm"],
                "volumeMounts": [{"name": "data", "mountPath": "/workspace"}],
            }],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "tao-data"}}],
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "nvidia-dcgm-exporter", "namespace": namespace, "labels": {"app": "nvidia-dcgm-exporter"}},
        "spec": {"selector": labels, "ports": [{"name": "gpu-metrics", "port": 9400, "targetPort": 9400}]},
    }
    return {"apiVersion": "v1", "kind": "List", "items": [pod, service]}


def test_top_reads_the_dcgm_exporter_through_the_service_proxy(real: Tao, images: dict[str, str]) -> None:  # noqa: F811
    namespace = real.namespace
    (real.volume / "dcgm").mkdir()  # type: ignore[attr-defined]
    real.kubectl("apply", "-f", "-", input=json.dumps(exporter_objects(namespace, images["BUSYBOX_IMAGE"])))
    try:
        read_through_the_exporter(real, images, namespace)
    finally:
        real.kubectl("delete", "pod", "dcgm-standin", "--wait=false", check=False)


def read_through_the_exporter(real: Tao, images: dict[str, str], namespace: str) -> None:  # noqa: F811
    # No stand-in nvidia-smi in this job: a rank top read any other way would say nvidia-smi is missing.
    record_id = submitted_id(submit(real, images["BUSYBOX_IMAGE"], "sleep 240"))
    wait_for(lambda: status_json(real, record_id)["state"] == "RUNNING", 90, message="the job to run")
    (pod,) = record_pods(real, record_id)
    (real.volume / "dcgm" / "metrics").write_text(dcgm_page(namespace, pod["metadata"]["name"]))  # type: ignore[attr-defined]
    wait_for(
        lambda: real.kubectl("get", "pod", "dcgm-standin", "-o", "jsonpath={.status.phase}").stdout == "Running",
        90, message="the exporter stand-in to run",
    )
    data = wait_for(lambda: (d := top_json(real, record_id)) and d[0]["source"] == "dcgm" and d, 60,
                    message="top to read the exporter")
    assert data == [{
        "rank": 0, "pod": pod["metadata"]["name"], "node": pod["spec"]["nodeName"],
        "gpus": [{"index": 0, "uuid": BUSY_UUID, "utilization": 64.0, "memory_used_mib": 20000,
                  "memory_total_mib": 81559, "idle": False}],
        "source": "dcgm", "idle": False, "low_memory": False,
    }]
    # Told to read nvidia-smi, the same rank says why it could not.
    (rank,) = top_json(real, record_id, "--source", "nvidia-smi")
    assert rank["gpus"] == [] and rank["source"] == "nvidia-smi"
    assert "nvidia-smi" in rank["reason"], rank["reason"]
