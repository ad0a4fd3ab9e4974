"""The local control plane does what the other end-to-end tests rely on: GPU scheduling, Job and
Indexed Job semantics, simulated pod outcomes chosen by annotation, garbage collection, RBAC and logs,
with every node address on loopback."""

from __future__ import annotations

import ipaddress
import json
import os
import time
from datetime import datetime
from typing import Any

import pytest
from support.cluster import (
    EXIT_CODE,
    IMAGE_PULL,
    OOM,
    RUN_SECONDS,
    SIMULATED_LOG_LINE,
    STAY_RUNNING,
    Cluster,
    apply_obj,
    events_for,
    get,
    job,
    k8s_minor,
    k8s_version,
    kubectl,
    kubectl_json,
    pods_of_job,
    terminated_state,
    wait_for,
    wait_job_finished,
)

pytestmark = pytest.mark.e2e

GPUS_PER_NODE = int(os.environ.get("KUBECTL_TAO_GPUS_PER_NODE", "8"))
GPU_NODES = int(os.environ.get("KUBECTL_TAO_GPU_NODES", "2"))
POD_CIDR = ipaddress.ip_network("10.244.0.0/16")
REAL_NODE = "kubectl-tao.io/real-node"
SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/16")


def _ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _running_pods(job_name: str, ns: str, count: int) -> list[dict[str, Any]]:
    def ready() -> list[dict[str, Any]]:
        pods = pods_of_job(job_name, ns)
        return pods if len(pods) == count and all(p["status"].get("phase") == "Running" for p in pods) else []

    return wait_for(ready, 30, message=f"{count} running pod(s) of {job_name}")


def _only_pod(job_name: str, ns: str, phase: str | None = None, timeout: float = 30) -> dict[str, Any]:
    def one() -> dict[str, Any] | None:
        pods = pods_of_job(job_name, ns)
        if len(pods) == 1 and (phase is None or pods[0]["status"].get("phase") == phase):
            return pods[0]
        return None

    return wait_for(one, timeout, message=f"the pod of {job_name} in phase {phase}")


# ------------------------------------------------------------------ nodes


def test_nodes_are_loopback_gpu_nodes_and_a_cpu_node(cluster: Cluster) -> None:
    # The simulated nodes; real nodes (test_real_nodes_use_the_bridge_gateway_address) are labelled apart.
    nodes = {n["metadata"]["name"]: n for n in kubectl_json("get", "nodes", "-l", f"!{REAL_NODE}")["items"]}
    gpu = [f"gpu-node-{i}" for i in range(GPU_NODES)]
    assert set(gpu) | {"cpu-node-0"} <= set(nodes)
    for name, node in nodes.items():
        addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
        assert addresses["InternalIP"] == "127.0.0.1", name
        assert set(addresses.values()) <= {"127.0.0.1", "localhost"}, name
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", name
    for name in gpu:
        status, labels = nodes[name]["status"], nodes[name]["metadata"]["labels"]
        assert status["capacity"]["nvidia.com/gpu"] == str(GPUS_PER_NODE)
        assert status["allocatable"]["nvidia.com/gpu"] == str(GPUS_PER_NODE)
        assert labels["nvidia.com/gpu.present"] == "true"
        assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
        assert labels["nvidia.com/gpu.count"] == str(GPUS_PER_NODE)
    assert "nvidia.com/gpu" not in nodes["cpu-node-0"]["status"]["allocatable"]
    # The same through the table kubectl users look at.
    wide = kubectl("get", "nodes", "-l", f"!{REAL_NODE}", "-o", "wide", "--no-headers").stdout.splitlines()
    assert len(wide) == len(nodes)
    assert {line.split()[5] for line in wide} == {"127.0.0.1"}


def test_real_nodes_use_the_bridge_gateway_address_and_carry_their_own_taint(cluster: Cluster) -> None:
    nodes = kubectl_json("get", "nodes", "-l", REAL_NODE)["items"]
    assert len(nodes) == int(os.environ.get("KUBECTL_TAO_REAL_NODES", "2"))
    for node in nodes:
        name = node["metadata"]["name"]
        addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
        # kubelet refuses a loopback node IP: real nodes share the pod bridge's gateway, one port each.
        assert addresses["InternalIP"] == "10.88.0.1", name
        assert node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] > 0
        assert {"key": REAL_NODE, "value": "true", "effect": "NoSchedule"} in node["spec"]["taints"]
        assert node["metadata"]["labels"]["kubectl-tao.io/fake-gpu"] == "true"
    ports = {n["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] for n in nodes}
    assert len(ports) == len(nodes)


def test_server_and_client_report_the_pinned_version(cluster: Cluster) -> None:
    version = kubectl_json("version")
    assert version["serverVersion"]["gitVersion"] == version["clientVersion"]["gitVersion"]
    assert version["serverVersion"]["gitVersion"] == k8s_version()
    assert str(cluster.bin_dir) in cluster.env["PATH"].split(os.pathsep)[0]


def test_workload_aware_scheduling_is_served_from_1_37_on(cluster: Cluster) -> None:
    """1.37+: the feature gates and runtime-config of scripts/local-cluster serve the Workload and PodGroup API
    at scheduling.k8s.io/v1beta1 and keep a Job's spec.scheduling; 1.36: neither (the no-gang path)."""
    served = kubectl("api-resources", "--api-group=scheduling.k8s.io", "-o", "name").stdout.split()
    gang_job = job("gang-check", completions=2, parallelism=2, indexed=True)
    gang_job["spec"]["scheduling"] = {"schedulingPolicy": {"gang": {"minCount": 2}}}
    kept = kubectl("create", "--dry-run=server", "--validate=ignore", "-f", "-", "-n", "default", "-o",
                   "jsonpath={.spec.scheduling.schedulingPolicy.gang.minCount}", input=json.dumps(gang_job)).stdout
    if k8s_minor() >= 37:
        assert {"podgroups.scheduling.k8s.io", "workloads.scheduling.k8s.io"} <= set(served)
        assert kubectl("get", "--raw", "/apis/scheduling.k8s.io/v1beta1").returncode == 0
        assert kept == "2"
    else:
        assert "podgroups.scheduling.k8s.io" not in served
        assert kept == ""


# ------------------------------------------------------------------ scheduling and completion


def test_gpu_job_schedules_on_a_gpu_node_runs_and_completes(namespace: str) -> None:
    apply_obj(job("gpu8", gpus=GPUS_PER_NODE), namespace)  # default simulated run time (3 s)
    running = _only_pod("gpu8", namespace, phase="Running")
    assert running["spec"]["nodeName"].startswith("gpu-node-")
    assert running["status"]["hostIP"] == "127.0.0.1"
    pod_ip = ipaddress.ip_address(running["status"]["podIP"])
    assert pod_ip in POD_CIDR and pod_ip not in SERVICE_CIDR
    assert wait_job_finished("gpu8", namespace) == "Complete"
    pod = _only_pod("gpu8", namespace, phase="Succeeded")
    term = terminated_state(pod)
    assert term is not None and term["exitCode"] == 0 and term["reason"] == "Completed"
    assert (_ts(term["finishedAt"]) - _ts(term["startedAt"])).total_seconds() >= 2


def test_more_gpus_than_a_node_has_stays_pending_with_the_scheduler_reason(namespace: str) -> None:
    apply_obj(job("gpu-too-many", gpus=GPUS_PER_NODE + 1), namespace)
    pod = _only_pod("gpu-too-many", namespace)
    name = pod["metadata"]["name"]
    messages = wait_for(
        lambda: [e["message"] for e in events_for(name, namespace) if e["reason"] == "FailedScheduling"],
        30,
        message="a FailedScheduling event",
    )
    assert any("Insufficient nvidia.com/gpu" in m for m in messages), messages
    pod = get("pod", name, namespace)
    assert pod is not None and pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")
    scheduled = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled[0]["status"] == "False" and scheduled[0]["reason"] == "Unschedulable"


def test_run_seconds_annotation_sets_how_long_the_pod_runs(namespace: str) -> None:
    apply_obj(job("quick", annotations={RUN_SECONDS: "1"}), namespace)
    assert wait_job_finished("quick", namespace, timeout=30) == "Complete"
    term = terminated_state(_only_pod("quick", namespace))
    assert term is not None
    assert (_ts(term["finishedAt"]) - _ts(term["startedAt"])).total_seconds() <= 2


# ------------------------------------------------------------------ Indexed Job + headless Service


def test_indexed_job_pods_get_index_hostnames_and_a_headless_service(namespace: str) -> None:
    name = "ddp"
    apply_obj(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name},
            "spec": {
                "clusterIP": "None",
                "selector": {"batch.kubernetes.io/job-name": name},
                "ports": [{"name": "rdzv", "port": 29500}],
            },
        },
        namespace,
    )
    apply_obj(
        job(
            name,
            gpus=GPUS_PER_NODE,
            completions=2,
            parallelism=2,
            indexed=True,
            subdomain=name,
            annotations={STAY_RUNNING: "true"},
        ),
        namespace,
    )
    pods = _running_pods(name, namespace, 2)
    by_index = {p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]: p for p in pods}
    assert sorted(by_index) == ["0", "1"]
    for index, pod in by_index.items():
        assert pod["spec"]["hostname"] == f"{name}-{index}"
        assert pod["spec"]["subdomain"] == name
        env = {e["name"]: e for e in pod["spec"]["containers"][0].get("env", [])}
        assert (
            "batch.kubernetes.io/job-completion-index"
            in env["JOB_COMPLETION_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]
        )
    # Two 8-GPU pods need both GPU nodes.
    assert {p["spec"]["nodeName"] for p in pods} == {f"gpu-node-{i}" for i in range(2)}

    def endpoints() -> dict[str, dict[str, Any]]:
        slices = kubectl_json("get", "endpointslices", "-l", f"kubernetes.io/service-name={name}", ns=namespace)[
            "items"
        ]
        eps = {e["targetRef"]["name"]: e for s in slices for e in s.get("endpoints") or []}
        return eps if len(eps) == 2 else {}

    eps = wait_for(endpoints, 30, message="an EndpointSlice listing both pods")
    assert set(eps) == {p["metadata"]["name"] for p in pods}
    for pod in pods:
        ep = eps[pod["metadata"]["name"]]
        assert ep["addresses"] == [pod["status"]["podIP"]]
        assert ep["hostname"] == pod["spec"]["hostname"]
        assert ep["conditions"]["ready"] is True


# ------------------------------------------------------------------ simulated failures


def test_oom_annotation_gives_oomkilled_137_and_a_failed_job(namespace: str) -> None:
    apply_obj(job("oom", annotations={OOM: "true", RUN_SECONDS: "1"}), namespace)
    assert wait_job_finished("oom", namespace) == "Failed"
    pod = _only_pod("oom", namespace, phase="Failed")
    term = terminated_state(pod)
    assert term is not None and term["reason"] == "OOMKilled" and term["exitCode"] == 137
    failed = [c for c in get("job", "oom", namespace)["status"]["conditions"] if c["type"] == "Failed"]
    assert failed[0]["reason"] == "BackoffLimitExceeded"


@pytest.mark.parametrize(
    ("code", "phase", "reason", "outcome"),
    [
        ("42", "Failed", "Error", "Failed"),
        ("0", "Succeeded", "Completed", "Complete"),
    ],
)
def test_exit_code_annotation_sets_the_container_exit_code(
    namespace: str, code: str, phase: str, reason: str, outcome: str
) -> None:
    apply_obj(job("exit", annotations={EXIT_CODE: code, RUN_SECONDS: "1"}), namespace)
    assert wait_job_finished("exit", namespace) == outcome
    term = terminated_state(_only_pod("exit", namespace, phase=phase))
    assert term is not None and term["exitCode"] == int(code) and term["reason"] == reason


def test_image_pull_backoff_annotation_keeps_the_pod_waiting(namespace: str) -> None:
    apply_obj(job("pull", annotations={IMAGE_PULL: "backoff"}), namespace)

    def waiting() -> dict[str, Any] | None:
        pods = pods_of_job("pull", namespace)
        statuses = pods[0]["status"].get("containerStatuses") if pods else None
        return statuses[0]["state"].get("waiting") if statuses else None

    state = wait_for(waiting, 30, message="a waiting container")
    assert state["reason"] == "ImagePullBackOff"
    pod = _only_pod("pull", namespace)
    name = pod["metadata"]["name"]
    assert any(e["reason"] == "BackOff" and e["type"] == "Warning" for e in events_for(name, namespace))
    time.sleep(4)  # longer than the default simulated run time: it must still not run
    pod = get("pod", name, namespace)
    assert pod is not None and pod["status"]["phase"] == "Pending"
    assert pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ImagePullBackOff"
    assert job_active(namespace, "pull") == 1


def job_active(ns: str, name: str) -> int:
    obj = get("job", name, ns)
    return int((obj or {}).get("status", {}).get("active", 0))


# ------------------------------------------------------------------ deletion and garbage collection


def test_foreground_cascading_delete_removes_the_pods_first(namespace: str) -> None:
    apply_obj(job("fg", completions=2, parallelism=2, annotations={STAY_RUNNING: "true"}), namespace)
    _running_pods("fg", namespace, 2)
    time.sleep(4)  # stay-running: still running past the default run time
    assert len([p for p in pods_of_job("fg", namespace) if p["status"]["phase"] == "Running"]) == 2
    kubectl("delete", "job", "fg", "--cascade=foreground", "--timeout=60s", ns=namespace)
    # The Job object disappears only after its pods are gone.
    assert get("job", "fg", namespace) is None
    assert pods_of_job("fg", namespace) == []


def test_ttl_after_finished_deletes_the_finished_job_and_its_pods(namespace: str) -> None:
    apply_obj(job("ttl0", ttl_seconds=0, annotations={RUN_SECONDS: "1"}), namespace)
    apply_obj(job("ttl2", ttl_seconds=2, annotations={RUN_SECONDS: "1"}), namespace)
    assert wait_job_finished("ttl2", namespace) == "Complete"
    seen_complete = time.monotonic()
    wait_for(lambda: get("job", "ttl0", namespace) is None, 30, message="ttl0 to be deleted")
    wait_for(lambda: get("job", "ttl2", namespace) is None, 30, message="ttl2 to be deleted")
    assert time.monotonic() - seen_complete >= 1.0  # ttl2 lived on after it finished
    wait_for(
        lambda: not pods_of_job("ttl0", namespace) and not pods_of_job("ttl2", namespace),
        30,
        message="the pods of the deleted jobs to be gone",
    )


# ------------------------------------------------------------------ RBAC


def test_rbac_limited_service_account_cannot_create_jobs(namespace: str) -> None:
    apply_obj(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader"}},
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "Role",
                    "metadata": {"name": "get-pods"},
                    "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
                },
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": {"name": "reader"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "get-pods"},
                    "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
                },
            ],
        },
        namespace,
    )
    as_reader = f"--as=system:serviceaccount:{namespace}:reader"
    no = kubectl("auth", "can-i", "create", "jobs.batch", as_reader, ns=namespace, check=False)
    assert (no.returncode, no.stdout.strip()) == (1, "no")
    yes = kubectl("auth", "can-i", "get", "pods", as_reader, ns=namespace, check=False)
    assert (yes.returncode, yes.stdout.strip()) == (0, "yes")
    admin = kubectl("auth", "can-i", "create", "jobs.batch", ns=namespace, check=False)
    assert (admin.returncode, admin.stdout.strip()) == (0, "yes")
    denied = kubectl("create", "job", "nope", "--image=busybox", as_reader, ns=namespace, check=False)
    assert denied.returncode != 0 and "forbidden" in denied.stderr


# ------------------------------------------------------------------ logs


def test_kubectl_logs_returns_the_simulated_output(namespace: str) -> None:
    apply_obj(job("logs", annotations={STAY_RUNNING: "true"}), namespace)
    pod = _only_pod("logs", namespace, phase="Running")
    name = pod["metadata"]["name"]
    out = kubectl("logs", name, "-c", "main", ns=namespace).stdout
    assert SIMULATED_LOG_LINE in out.splitlines()
    tail = kubectl("logs", name, "--tail=1", ns=namespace).stdout
    assert len(tail.splitlines()) == 1 and tail.strip() == out.splitlines()[-1]
    by_job = kubectl("logs", "job/logs", ns=namespace).stdout
    assert by_job == out
