"""What kubectl-tao and the cluster agree on: the only place that spells a label, an annotation, a selector,
the GPU resource and its toleration, and the job states (pure constants and string builders).

Every object a job owns (its Job, pods, headless Service, credential Secret) carries MANAGED_BY_LABEL=
MANAGED_BY and JOB_LABEL=<Kubernetes name>, and the record id in RECORD_ID_ANNOTATION; that is how
`status`, `cancel`, `list`, `logs` and every teardown find them again. `tests/unit/test_house_rules.py`
refuses these strings anywhere else in lib/.
"""

from __future__ import annotations

from typing import Any

# ---------------------------------------------------------------- labels and annotations kubectl-tao sets
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "kubectl-tao"
COMPONENT_LABEL = "app.kubernetes.io/component"
JOB_LABEL = "tao-job"
RECORD_ID_ANNOTATION = "kubectl-tao.io/record-id"
PROBE_LABEL = "kubectl-tao.io/probe"
WORKFLOW_LABEL = "kubectl-tao.io/workflow"  # a workflow run's id, on every object of every step and its release RBAC
WORKFLOW_STEP_LABEL = "kubectl-tao.io/workflow-step"  # the step's name, on its Job and pods
WORKFLOW_GATE_ANNOTATION = "kubectl-tao.io/workflow-gate"  # on a step's Job: the gates its release judged (JSON)
OWN_KEY_PREFIX = "kubectl-tao.io/"
# The short-lived pod `data push` and `results` start to reach a volume: managed-by plus this component.
VOLUME_HELPER_COMPONENT = "volume-helper"
# The scheduling gate a helper pod with a credential Secret is created with: lifted once the Secret exists, owned by
# the pod (so no moment leaves the Secret without an owner, and no container starts before it exists).
HELPER_CREDENTIALS_GATE = "kubectl-tao.io/credentials"

# ---------------------------------------------------------------- labels and annotations Kubernetes sets
POD_JOB_LABEL = "job-name"  # the Job controller's label on every pod of a Job (how Jobs made elsewhere are found)
# The Job controller's other labels on a Job's pod template, which Kueue's Job integration leaves out of a
# Workload's pod set (its cleanLabels keeps only batch.kubernetes.io/job-name).
JOB_CONTROLLER_POD_LABELS = frozenset({POD_JOB_LABEL, "controller-uid", "batch.kubernetes.io/controller-uid"})
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Kueue's pod-template annotations for topology-aware scheduling (--topology LABEL, LABEL:preferred).
KUEUE_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
KUEUE_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"  # Kueue's label on the Workload it makes for a Job: the Job's UID
# Kueue's Job label naming a Workload made beforehand, which Kueue then uses instead of making one (a workflow's
# queued steps: their Workloads are created inactive and activated by the release).
KUEUE_PREBUILT_WORKLOAD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
KUEUE_WORKLOAD_API = "kueue.x-k8s.io/v1beta2"
KUEUE_WORKLOAD_RESOURCE = "workload.kueue.x-k8s.io"  # as `kubectl delete -o name` names a Workload
# Keys a user may not set on a job's labels or annotations: the ones above and those of the Job controller/Kueue.
RESERVED_KEY_PREFIXES = (OWN_KEY_PREFIX, "batch.kubernetes.io/", "kueue.x-k8s.io/")
RESERVED_LABELS = frozenset({MANAGED_BY_LABEL, JOB_LABEL, POD_JOB_LABEL, "controller-uid", "job-index"})

# ---------------------------------------------------------------- GPUs
GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
# The taint GPU node pools commonly carry; GPU jobs tolerate it (and the fit gate assumes so).
GPU_TOLERATION: dict[str, Any] = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
INSUFFICIENT_GPU = f"Insufficient {GPU_RESOURCE}"  # the scheduler's reason, as classified
# GPU Feature Discovery's node labels (NVIDIA/k8s-device-plugin, internal/lm/nvml.go: newVersionLabeler): the
# driver version and the CUDA version the driver supports, under their current names and the deprecated ones.
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
GFD_DRIVER_PREFIXES = ("nvidia.com/cuda.driver-version.", "nvidia.com/cuda.driver.")
GFD_CUDA_PREFIXES = ("nvidia.com/cuda.runtime-version.", "nvidia.com/cuda.runtime.")
# The RuntimeClasses the GPU Operator creates: nvidia always, nvidia-cdi (and nvidia-legacy) when CDI is on.
NVIDIA_RUNTIME_CLASS = "nvidia"
NVIDIA_CDI_RUNTIME_CLASS = "nvidia-cdi"

# NVIDIA's DCGM exporter's Service: the GPU Operator's (assets/state-dcgm-exporter) and the exporter's own Helm
# chart's (deployment/templates/_helpers.tpl), tried in this order; the port of its metrics by name, else the number.
DCGM_SERVICE_SELECTORS = ("app=nvidia-dcgm-exporter", "app.kubernetes.io/name=dcgm-exporter")
DCGM_PORT_NAMES = ("gpu-metrics", "metrics")
DCGM_PORT = 9400

# ---------------------------------------------------------------- job states (records and live status)
PENDING, RUNNING, COMPLETE, ERROR, CANCELED, UNKNOWN = "PENDING", "RUNNING", "COMPLETE", "ERROR", "CANCELED", "UNKNOWN"
STATES = (PENDING, RUNNING, COMPLETE, ERROR, CANCELED, UNKNOWN)
TERMINAL_STATES = frozenset({COMPLETE, ERROR, CANCELED})
END_STATES = (COMPLETE, ERROR, CANCELED, UNKNOWN)  # a wait ends on these (UNKNOWN: the Job is gone)
# The record platforms that are Kubernetes jobs (the store holds records of other platforms too).
KUBERNETES_PLATFORMS = ("kubernetes", "k8s")
# A multi-node job's gang mechanism, as its record's additions name it (k8s/gang.py acts on them).
GANG_NATIVE, GANG_KUEUE, GANG_NONE = "native", "kueue", "none"

# ---------------------------------------------------------------- selectors
MANAGED_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
MANAGED_SELECTOR_QUERY = "app.kubernetes.io%2Fmanaged-by%3Dkubectl-tao"  # MANAGED_SELECTOR, URL-encoded


def job_labels(job_name: str) -> dict[str, str]:
    """The labels every object of job `job_name` carries."""
    return {MANAGED_BY_LABEL: MANAGED_BY, JOB_LABEL: job_name}


def volume_helper_labels() -> dict[str, str]:
    """The labels of a volume helper pod (not any job's: `teardown` of a job never touches it)."""
    return {MANAGED_BY_LABEL: MANAGED_BY, COMPONENT_LABEL: VOLUME_HELPER_COMPONENT}


def volume_helper_selector() -> str:
    """Every volume helper pod kubectl-tao started (a cleanup of the ones a killed process left)."""
    return f"{COMPONENT_LABEL}={VOLUME_HELPER_COMPONENT},{MANAGED_SELECTOR}"


def job_selector(job_name: str) -> str:
    """Every object kubectl-tao made for job `job_name`."""
    return f"{JOB_LABEL}={job_name},{MANAGED_SELECTOR}"


def pod_selector(job_name: str, *, launched_here: bool = True) -> str:
    """The pods of a Job: by kubectl-tao's label, or by the Job controller's for a Job made elsewhere."""
    return f"{JOB_LABEL if launched_here else POD_JOB_LABEL}={job_name}"


def job_objects_read(namespace: str, job_name: str) -> list[str]:
    """The one kubectl read of a Job kubectl-tao launched and its pods (run with namespaced=False)."""
    return ["get", "jobs,pods", "-n", namespace, "-l", pod_selector(job_name), "-o", "json"]


def events_read(namespace: str) -> list[str]:
    """The one kubectl read of a namespace's events (explain filters them to its Job and pods; namespaced=False)."""
    return ["get", "events", "-n", namespace, "-o", "json"]


def rank_selector(selector: str, rank: int) -> str:
    """`selector` narrowed to the pod of one rank of an Indexed Job."""
    return f"{selector},{COMPLETION_INDEX_ANNOTATION}={rank}"


def gpu_product_selector(product: str) -> str:
    return f"{GPU_PRODUCT_LABEL}={product}"


def owned_by_record(meta: dict[str, Any], record_id: str) -> bool:
    """Whether object metadata says kubectl-tao made it for `record_id`."""
    managed = (meta.get("labels") or {}).get(MANAGED_BY_LABEL)
    return managed == MANAGED_BY and record_annotation(meta) == record_id


def record_annotation(meta: dict[str, Any]) -> str | None:
    return (meta.get("annotations") or {}).get(RECORD_ID_ANNOTATION)
