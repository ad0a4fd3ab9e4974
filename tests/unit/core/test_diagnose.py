"""`kubectl tao explain`: each cause the reference's error patterns name, with its fix."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import FIXTURES as FIXTURES_ROOT

from kubectl_tao.diagnosis import diagnose
from kubectl_tao.diagnosis.diagnose import explain
from kubectl_tao.diagnosis.jobstate import JobStatus, job_status
from kubectl_tao.gates import gpufit

FIXTURES = FIXTURES_ROOT / "k8s"


def load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def findings(name: str, **kw: Any) -> list[diagnose.Finding]:
    job, pods, events = (load(f"{name}.{part}.json") for part in ("job", "pods", "events"))
    return explain(job_status(job, pods, events), events, pods, job=job["metadata"]["name"], **kw)


def codes(found: list[diagnose.Finding]) -> list[str]:
    return [f.code for f in found]


def pending_pod(message: str, name: str = "j-abcde") -> dict:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"containers": [{"name": "tao", "image": "busybox"}]},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]},
    }


def waiting_pod(reason: str, message: str, image: str = "nvcr.io/nvidia/tao/tao-toolkit:5.5.0-pyt",
                pull_secrets: list | None = None) -> dict:
    spec: dict[str, Any] = {"nodeName": "n0", "containers": [{"name": "tao", "image": image}]}
    if pull_secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in pull_secrets]
    return {
        "metadata": {"name": "j-abcde", "namespace": "ns"},
        "spec": spec,
        "status": {"phase": "Pending", "containerStatuses": [
            {"name": "tao", "image": image, "state": {"waiting": {"reason": reason, "message": message}}}]},
    }


def job(**kw: Any) -> dict:
    return {"metadata": {"name": "j", "uid": "u"}, "spec": {"completions": 1, **kw}, "status": {}}


def run(pods: list, events: list | None = None, **kw: Any) -> list[diagnose.Finding]:
    return explain(job_status(job(), pods, events or []), events or [], pods, job="j", **kw)


# ------------------------------------------------------------------------------------------- GPUs


def test_gpu_less_cluster_points_at_the_gpu_operator() -> None:
    nodes = gpufit.node_gpus(load("nodes-cpu-only.json"), None)
    found = findings("pending-gpu", nodes=nodes)
    assert codes(found) == ["no-gpu-capacity"]
    assert "GPU Operator" in found[0].cause
    assert "kubectl get nodes -o jsonpath='{.items[*].status.allocatable}'" in found[0].fix


def test_busy_cluster_says_insufficient_and_suggests_fit() -> None:
    nodes = gpufit.node_gpus(load("nodes-2x8.json"), load("pods-busy.json"))
    found = findings("pending-gpu", nodes=nodes)
    assert codes(found) == ["insufficient-gpu"]
    assert "kubectl tao fit" in found[0].fix
    assert "8 of 16 allocatable GPUs are free" in found[0].fix
    assert found[0].evidence.startswith("0/3 nodes are available")


def test_control_plane_taint_is_not_reported_as_a_cause() -> None:
    assert "untolerated-taint" not in codes(findings("pending-gpu"))


# A pending pod's scheduler message -> the one finding it gives, and a part of that finding's fix ("" where the
# test asks for the code only).
PENDING_MESSAGES = [
    pytest.param(
        "0/2 nodes are available: 2 node(s) had untolerated taint {nvidia.com/gpu: present}.",
        "untolerated-taint",
        "toleration",
        id="gpu node taint is reported",
    ),
    pytest.param(
        "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector.",
        "node-selector",
        "kubectl get nodes -L nvidia.com/gpu.product",
        id="node selector or product mismatch",
    ),
    pytest.param("0/2 nodes are available: 2 node(s) were unschedulable.", "cordoned", "", id="cordoned nodes"),
    pytest.param(
        "0/2 nodes are available: 2 Insufficient memory.", "insufficient-resources", "", id="cpu or memory shortage"
    ),
    pytest.param(
        "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
        "pvc-not-bound",
        "kubectl describe pvc -n ns",
        id="unbound pvc",
    ),
]


@pytest.mark.parametrize(("message", "code", "fix"), PENDING_MESSAGES)
def test_a_pending_pods_scheduler_message_gives_its_finding(message: str, code: str, fix: str) -> None:
    found = run([pending_pod(message)])
    assert codes(found) == [code]
    assert fix in found[0].fix


# ------------------------------------------------------------------------------------------- images


def test_image_pull_without_credentials_suggests_a_pull_secret_for_the_registry() -> None:
    found = findings("imagepull")
    assert codes(found) == ["image-pull"]
    assert "kubectl tao secret image-pull NAME --registry nvcr.io" in found[0].fix
    assert "stdin" in found[0].fix
    assert found[0].evidence.startswith("Back-off pulling image")


def test_image_pull_mentions_the_secret_already_in_use() -> None:
    found = run([waiting_pod("ErrImagePull", "unauthorized: authentication required", pull_secrets=["ngc"])])
    assert "the pod uses ngc" in found[0].fix


def test_missing_tag_says_the_image_does_not_exist() -> None:
    found = run([waiting_pod("ErrImagePull", 'failed to resolve reference "x:9": not found', image="ghcr.io/o/x:9")])
    assert "does not exist in ghcr.io" in found[0].fix


def test_invalid_image_name() -> None:
    found = run([waiting_pod("InvalidImageName", 'couldn\'t parse image name "Bad:Name"', image="Bad:Name")])
    assert codes(found) == ["image-pull"]
    assert "not valid" in found[0].fix


@pytest.mark.parametrize(
    ("image", "registry"),
    [("nvcr.io/nvidia/tao/tao-toolkit:5.5.0-pyt", "nvcr.io"), ("busybox:1.36", "docker.io"),
     ("library/busybox", "docker.io"), ("localhost/x", "localhost"), ("registry:5000/x", "registry:5000")],
)
def test_image_registry(image: str, registry: str) -> None:
    assert diagnose.image_registry(image) == registry


# ------------------------------------------------------------------------------------------- storage, secrets


def test_missing_pvc() -> None:
    found = findings("pvc-missing")
    assert codes(found) == ["pvc-not-found"]
    assert "tao-data" in found[0].cause and "tao-jobs" in found[0].cause
    assert "Bound" in found[0].fix


def test_missing_secret_from_create_container_config_error() -> None:
    found = findings("config-error")
    assert codes(found) == ["missing-secret"]
    assert "tao-creds-dino-train-6e7f80" in found[0].cause
    assert "--from-env-file=/dev/stdin" in found[0].fix
    assert "resubmitting recreates it" in found[0].fix


def test_missing_secret_key() -> None:
    found = run([waiting_pod("CreateContainerConfigError", "couldn't find key HF_TOKEN in Secret ns/creds")])
    assert found[0].cause == "the Secret ns/creds has no key HF_TOKEN"


def test_missing_secret_volume_from_a_failed_mount_event() -> None:
    pod = waiting_pod("ContainerCreating", "")
    events = [{"type": "Warning", "reason": "FailedMount", "involvedObject": {"kind": "Pod", "name": "j-abcde"},
               "message": 'MountVolume.SetUp failed for volume "creds" : secret "s3-creds" not found'}]
    found = run([pod], events)
    assert codes(found) == ["missing-secret"]
    assert "s3-creds" in found[0].cause


# ------------------------------------------------------------------------------------------- failures


def test_oom_killed() -> None:
    found = findings("oomkilled")
    assert codes(found) == ["oom-killed"]
    assert "batch size" in found[0].fix and "memory limit" in found[0].fix and "larger" in found[0].fix


def test_rendezvous_timeout_lists_network_dns_version_and_nccl() -> None:
    found = findings("multi-rendezvous")
    assert codes(found) == ["rendezvous-timeout"]
    for needle in ("NetworkPolicy", "headless Service", "1.28", "NCCL_SOCKET_IFNAME", "partial start"):
        assert needle in found[0].fix


def test_upload_failed_names_the_bucket_the_credentials_and_the_client() -> None:
    pod = {
        "metadata": {"name": "j-a", "namespace": "ns", "annotations": {}},
        "spec": {"containers": [{"name": "tao", "env": [{"name": "TAO_UPLOAD_URI", "value": "s3://bkt/o/r/"}]}]},
        "status": {"phase": "Failed", "containerStatuses": [
            {"name": "tao", "state": {"terminated": {"exitCode": 89, "reason": "Error"}}, "restartCount": 0}]},
    }
    job = {"metadata": {"name": "j", "uid": "u"}, "spec": {"completions": 1},
           "status": {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}}
    found = explain(job_status(job, [pod], {"items": []}), {"items": []}, [pod], job="j")
    assert codes(found) == ["upload-failed"]
    assert "s3://bkt/o/r/" in found[0].evidence
    for needle in ("bucket", "AWS_ACCESS_KEY_ID", "AWS_ENDPOINT_URL", "awscli", "kubectl tao logs j --rank 0"):
        assert needle in found[0].fix


def test_program_error_without_a_log_diagnosis_points_at_the_logs() -> None:
    found = findings("exit-code")
    assert codes(found) == ["program-error"]
    assert "kubectl tao logs dino-train-1d2e3f --rank 0" in found[0].fix
    assert "--errors" in found[0].fix and "not read or printed nothing" in found[0].fix


def test_a_log_diagnosis_becomes_the_finding_of_a_failed_program() -> None:
    from kubectl_tao.diagnosis.causes import cause_in_log

    cause = cause_in_log("Traceback (most recent call last):\nModuleNotFoundError: No module named 'timm'\n", 0)
    assert cause is not None
    found = findings("exit-code", diagnosis=cause.to_dict())
    assert codes(found) == ["log:MissingModule"]
    assert found[0].cause == (
        "a Python module the program imports is not in the image on rank 0 (MissingModule, ERR_PROGRAM)"
    )
    assert found[0].evidence == "rank 0: ModuleNotFoundError: No module named 'timm'"
    assert "install it in the image" in found[0].fix


def test_eviction_is_infrastructure_with_a_memory_hint() -> None:
    found = findings("evicted")
    assert codes(found) == ["infrastructure"]
    assert "memory request" in found[0].fix


def test_deadline_exceeded() -> None:
    assert codes(findings("deadline")) == ["deadline-exceeded"]


def test_failure_without_detail_points_at_the_record() -> None:
    status = JobStatus(state="ERROR", reason="BackoffLimitExceeded", message="Job has reached the backoff limit")
    found = explain(status, [], [], job="j")
    assert codes(found) == ["job-failed"]
    assert "kubectl tao status j" in found[0].fix


# ------------------------------------------------------------------------------------------- waiting


def test_job_gone() -> None:
    found = explain(job_status(None, []), [], [], job="j")
    assert codes(found) == ["job-gone"]


def test_kueue_admission_wait() -> None:
    found = findings("kueue-suspended", namespace="tao-jobs")
    assert codes(found) == ["awaiting-admission"]
    assert "kubectl get workloads.kueue.x-k8s.io -n tao-jobs" in found[0].fix


def test_plain_suspend_says_how_to_resume() -> None:
    found = explain(job_status(job(suspend=True), []), [], [], job="j", namespace="ns")
    assert codes(found) == ["suspended"]
    assert "kubectl patch job j -n ns" in found[0].fix


def test_resource_quota_refusal() -> None:
    found = findings("quota-exceeded", namespace="tao-jobs")
    assert codes(found) == ["failed-create"]
    assert "kubectl describe resourcequota -n tao-jobs" in found[0].fix


def test_no_pods_yet() -> None:
    assert codes(findings("no-pods")) == ["no-pods"]


def test_tier_c_download_holds_the_gpu() -> None:
    found = findings("initializing")
    assert codes(found) == ["initializing"]
    assert "holds its GPUs" in found[0].fix


def test_partial_start_comes_first() -> None:
    found = findings("multi-partial")
    assert codes(found)[0] == "partial-start"
    assert "insufficient-gpu" in codes(found)


@pytest.mark.parametrize("name", ["running", "complete"])
def test_healthy_jobs_have_nothing_to_explain(name: str) -> None:
    assert findings(name) == []


def test_findings_serialise() -> None:
    data = [f.to_dict() for f in findings("oomkilled")]
    assert set(data[0]) == {"cause", "evidence", "fix", "code"}
    json.dumps(data)


def test_kubectl_commands_name_the_kubernetes_job_not_the_record_id() -> None:
    suspended = job_status(job(suspend=True), [])
    found = explain(suspended, [], [], job="rtdetr-train-1a2b3c", namespace="ns", job_name="by-hand-1a2b3c")
    assert "kubectl patch job by-hand-1a2b3c -n ns" in found[0].fix
    assert "rtdetr-train-1a2b3c" not in found[0].fix
