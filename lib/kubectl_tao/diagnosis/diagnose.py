"""`kubectl tao explain JOB`: from a JobStatus, the events and the pods to causes with a fix each.

Pure: it reads what `status.job_status` concluded plus the raw pod and event JSON, and returns Findings.
What the ranks printed is read by diagnosis/ranklogs.py and named by diagnosis/causes.py; its diagnosis (a dict, as the
record keeps it) becomes the finding of a program that failed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubectl_tao.core import contract
from kubectl_tao.core.valueclass import Value, plain, record
from kubectl_tao.diagnosis import jobstate as st
from kubectl_tao.diagnosis import kueue
from kubectl_tao.gates.gpufit import GPU_PRODUCT_LABEL, GPU_RESOURCE, NodeGpus, total_allocatable
from kubectl_tao.restarts.table import EXIT_UPLOAD_FAILED

GPU_OPERATOR_CHECK = "kubectl get nodes -o jsonpath='{.items[*].status.allocatable}'"


@record(frozen=True)
class Finding(Value):
    cause: str  # what is wrong, in a few words
    evidence: str  # the cluster's own text that shows it (one line)
    fix: str  # what to do about it
    code: str = ""  # stable identifier, for -o json and tests

    def to_dict(self) -> dict[str, str]:
        return plain(self)


# --------------------------------------------------------------------------------------------------------
# Readers


def _pods(pods: Any) -> list[Mapping[str, Any]]:
    if isinstance(pods, Mapping):
        return [p for p in pods.get("items") or [] if isinstance(p, Mapping)]
    return [p for p in pods or [] if isinstance(p, Mapping)]


def _namespace(pods: Sequence[Mapping[str, Any]], namespace: str | None) -> str:
    if namespace:
        return namespace
    for pod in pods:
        ns = (pod.get("metadata") or {}).get("namespace")
        if ns:
            return str(ns)
    return "NAMESPACE"


def _scheduler_messages(status: st.JobStatus, events: Any, pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every scheduler verdict we can see: PodScheduled=False messages and FailedScheduling events."""
    out: list[str] = []
    for pod in pods:
        for condition in (pod.get("status") or {}).get("conditions") or []:
            scheduled = condition.get("type") == "PodScheduled" and condition.get("status") == "False"
            if scheduled and condition.get("message"):
                out.append(" ".join(str(condition["message"]).split()))
    for event in st.items_of(events):
        _, _, reason, message, _ = st.event_fields(event)
        if reason == "FailedScheduling" and message:
            out.append(message)
    if status.reason in ("Unschedulable", contract.INSUFFICIENT_GPU, "PVCNotFound", "PVCNotBound"):
        out.append(status.message.split(": ", 1)[-1] if status.message.startswith("rank ") else status.message)
    return list(dict.fromkeys(m for m in out if m))


def _waiting(pods: Sequence[Mapping[str, Any]], reasons: Iterable[str]) -> list[tuple[Mapping, Mapping, Mapping]]:
    """(pod, container spec, waiting state) for containers waiting with one of `reasons`."""
    wanted = set(reasons)
    out = []
    for pod in pods:
        spec = pod.get("spec") or {}
        specs = {c.get("name"): c for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]}
        pstatus = pod.get("status") or {}
        for cs in [*(pstatus.get("initContainerStatuses") or []), *(pstatus.get("containerStatuses") or [])]:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in wanted:
                out.append((pod, specs.get(cs.get("name"), {"image": cs.get("image", "")}), waiting))
    return out


def image_registry(image: str) -> str:
    """The registry host of an image reference; docker.io when the first part is not a host."""
    first, sep, _ = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def _one(text: Any) -> str:
    return " ".join(str(text or "").split())


# --------------------------------------------------------------------------------------------------------
# Causes


_CONTROL_PLANE_TAINTS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")


def _parts(messages: Sequence[str]) -> list[tuple[str, str]]:
    """(part, whole message) for every '<n> <why>' part of every scheduler message."""
    out = []
    for message in messages:
        counted = st.parse_scheduler_message(message)
        for part in counted or [message]:
            out.append((part.lower(), message))
    return out


def _first(parts: Sequence[tuple[str, str]], test: Any) -> str:
    return next((message for part, message in parts if test(part)), "")


def _gpu_findings(
    messages: Sequence[str], nodes: Sequence[NodeGpus] | None, no_gpu_hint: str | None = None
) -> list[Finding]:
    parts = _parts(messages)
    out: list[Finding] = []
    # A node serving nvidia.com/gpu through DRA reports a shortage as "cannot allocate all claims".
    insufficient = _first(parts, lambda p: f"insufficient {GPU_RESOURCE}" in p or "cannot allocate all claims" in p)
    if insufficient:
        if nodes is not None and total_allocatable(nodes) == 0 and no_gpu_hint:
            out.append(Finding("no node offers nvidia.com/gpu to pods", insufficient, no_gpu_hint, "dra-unmapped"))
        elif nodes is not None and total_allocatable(nodes) == 0:
            out.append(
                Finding(
                    "no node offers nvidia.com/gpu: the NVIDIA GPU Operator (or device plugin) is not installed",
                    insufficient,
                    "install the NVIDIA GPU Operator (or the NVIDIA device plugin) on the GPU nodes, then check "
                    f"that they list {GPU_RESOURCE}: {GPU_OPERATOR_CHECK}",
                    "no-gpu-capacity",
                )
            )
        else:
            known = ""
            if nodes:
                free = sum(n.free for n in nodes)
                known = f" ({free} of {total_allocatable(nodes)} allocatable GPUs are free right now)"
            out.append(
                Finding(
                    "not enough free GPUs on any single node",
                    insufficient,
                    "wait for running jobs to finish, or ask for fewer GPUs per node; `kubectl tao fit --gpus G "
                    f"--nodes N` says whether the request fits now, later or never{known}. If no node has GPUs "
                    f"at all, the GPU Operator is missing: {GPU_OPERATOR_CHECK}",
                    "insufficient-gpu",
                )
            )
    selector = _first(parts, lambda p: "didn't match pod's node affinity/selector" in p)
    if selector:
        out.append(
            Finding(
                "no node matches the job's node selector or GPU product",
                selector,
                f"compare the selector with the node labels (`kubectl get nodes -L {GPU_PRODUCT_LABEL}`) and "
                "correct or drop --gpu-product / --node-selector",
                "node-selector",
            )
        )
    taint = _first(
        parts, lambda p: "untolerated taint" in p and not any(cp in p for cp in _CONTROL_PLANE_TAINTS)
    )
    if taint:
        out.append(
            Finding(
                "the GPU nodes carry a taint the job does not tolerate",
                taint,
                "add a toleration for the taint (`kubectl get nodes -o custom-columns=NAME:.metadata.name,"
                "TAINTS:.spec.taints`) or ask the cluster admin which nodes this namespace may use",
                "untolerated-taint",
            )
        )
    cordoned = _first(parts, lambda p: "were unschedulable" in p)
    if cordoned:
        out.append(
            Finding(
                "some nodes that could run the job are cordoned",
                cordoned,
                "wait for the maintenance to end, or `kubectl uncordon NODE` if it is over",
                "cordoned",
            )
        )
    other = _first(parts, lambda p: re.search(r"insufficient (cpu|memory|ephemeral-storage)", p) is not None)
    if other:
        out.append(
            Finding(
                "not enough CPU or memory on the GPU nodes for the requests",
                other,
                "lower the CPU/memory requests, or use nodes with more CPU and memory",
                "insufficient-resources",
            )
        )
    return out


def _health_findings(nodes: Sequence[NodeGpus] | None) -> list[Finding]:
    """GPU nodes whose GPUs are marked unhealthy (gates/gpuhealth.py): the fit gate leaves them out, the scheduler
    does not (a node condition is no taint), so the job waits for the others or may land there."""
    bad = [n for n in nodes or () if n.health]
    if not bad:
        return []
    shown = ", ".join(f"{n.name} {n.health_text()}" for n in bad[:5])
    shown += f", +{len(bad) - 5} more" if len(bad) > 5 else ""
    return [
        Finding(
            f"{len(bad)} node{'' if len(bad) == 1 else 's'} left out: {shown}",
            "; ".join(f"{n.name}: {', '.join(f'{m.signal} {m.detail}'.strip() for m in n.health)}" for n in bad[:5]),
            "their GPUs reported errors: the fit gate does not count them, but the scheduler reads no node "
            "condition, so ranks may still land there; ask the cluster admin to cordon or taint them (`kubectl "
            "cordon NODE`) until the GPUs are repaired; `kubectl tao gpus` lists them",
            "unhealthy-gpu-nodes",
        )
    ]


def _ran_on_unhealthy(pods: Sequence[Mapping[str, Any]], nodes: Sequence[NodeGpus] | None) -> list[Finding]:
    """A failed job whose ranks ran on nodes now marked GPU-unhealthy (gates/gpuhealth.py): likely the hardware,
    not the program (ERR_INFRA)."""
    bad = {n.name: n for n in nodes or () if n.health}
    ranks: list[tuple[str, str]] = []
    for pod in pods:
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if node in bad:
            index = ((pod.get("metadata") or {}).get("annotations") or {}).get(contract.COMPLETION_INDEX_ANNOTATION)
            ranks.append((str(index if index is not None else 0), node))
    if not ranks:
        return []
    ranks.sort(key=lambda r: (int(r[0]) if r[0].isdigit() else 0, r[1]))
    shown = ", ".join(f"rank {rank} on {node} ({bad[node].health_text()})" for rank, node in ranks[:4])
    return [
        Finding(
            f"ranks ran on nodes whose GPUs are now marked unhealthy: {shown} (ERR_INFRA: the hardware, not the "
            "program)",
            "; ".join(
                f"{node}: {', '.join(f'{m.signal} {m.detail}'.strip() for m in bad[node].health)}"
                for node in dict.fromkeys(node for _, node in ranks)
            ),
            "resubmit: the fit gate now leaves these nodes out, but the scheduler reads no node condition, so ask "
            "the cluster admin to cordon or taint them (`kubectl cordon NODE`) until the GPUs are repaired",
            "ran-on-unhealthy-node",
        )
    ]


def _pvc_findings(status: st.JobStatus, messages: Sequence[str], events: Any, ns: str) -> list[Finding]:
    texts = [*messages, status.message]
    for event in st.items_of(events):
        _, _, reason, message, _ = st.event_fields(event)
        if reason in ("FailedMount", "FailedAttachVolume"):
            texts.append(message)
    out: list[Finding] = []
    missing = next((t for t in texts if re.search(r'persistentvolumeclaim "[^"]+" not found', t, re.I)), "")
    if missing:
        claim = re.search(r'persistentvolumeclaim "([^"]+)"', missing, re.I)
        name = claim.group(1) if claim else "CLAIM"
        out.append(
            Finding(
                f"the PersistentVolumeClaim {name} does not exist in namespace {ns}",
                missing,
                f"create the claim (`kubectl get pvc -n {ns}` lists the existing ones) or point the job at one "
                "that exists; storage tier A mounts a claim that must already be Bound",
                "pvc-not-found",
            )
        )
    unbound = next((t for t in texts if "unbound" in t.lower() and "persistentvolumeclaim" in t.lower()), "")
    if unbound:
        out.append(
            Finding(
                "the PersistentVolumeClaim exists but is not Bound",
                unbound,
                f"`kubectl describe pvc -n {ns}` shows why (no default StorageClass, no matching "
                "PersistentVolume); tier A needs a Bound claim holding the data",
                "pvc-not-bound",
            )
        )
    return out


def _image_findings(pods: Sequence[Mapping[str, Any]], ns: str) -> list[Finding]:
    stuck = _waiting(pods, ("ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull"))
    if not stuck:
        return []
    pod, container, waiting = stuck[0]
    image = str(container.get("image") or "")
    registry = image_registry(image)
    message = _one(waiting.get("message")) or str(waiting.get("reason"))
    low = message.lower()
    pull_secrets = [s.get("name") for s in (pod.get("spec") or {}).get("imagePullSecrets") or []]
    if waiting.get("reason") == "InvalidImageName":
        fix = f"the image reference {image!r} is not valid: correct --image"
    elif any(word in low for word in ("not found", "manifest unknown", "name unknown")):
        fix = f"the image or tag does not exist in {registry}: check the spelling of {image!r} and the tag"
    else:
        has = f" (the pod uses {', '.join(map(str, pull_secrets))}; check it is for {registry})" if pull_secrets else ""
        fix = (
            f"check the image name and tag {image!r}; for a private registry create an image-pull Secret with "
            f"the key on stdin, e.g. `kubectl tao secret image-pull NAME --registry {registry}` (for nvcr.io the "
            "user is $oauthtoken and the password your NGC key), and submit with --image-pull-secret NAME"
            f"{has}"
        )
    return [Finding(f"the image cannot be pulled ({waiting.get('reason')})", message, fix, "image-pull")]


_SECRET_MISSING = re.compile(r'secret "([^"]+)" not found', re.I)
_KEY_MISSING = re.compile(r"couldn't find key (\S+) in Secret (\S+)", re.I)
_CONFIGMAP_MISSING = re.compile(r'configmap "([^"]+)" not found', re.I)


def _config_findings(pods: Sequence[Mapping[str, Any]], events: Any, ns: str) -> list[Finding]:
    texts = [_one(w.get("message")) for _, _, w in _waiting(pods, ("CreateContainerConfigError",))]
    for event in st.items_of(events):
        _, _, reason, message, _ = st.event_fields(event)
        if reason in ("FailedMount", "Failed") and ("secret" in message.lower() or "configmap" in message.lower()):
            texts.append(message)
    for text in texts:
        secret = _SECRET_MISSING.search(text)
        key = _KEY_MISSING.search(text)
        configmap = _CONFIGMAP_MISSING.search(text)
        if key:
            return [
                Finding(
                    f"the Secret {key.group(2)} has no key {key.group(1)}",
                    text,
                    "recreate the Secret with that key, from an env-file on stdin "
                    "(`kubectl create secret generic NAME --from-env-file=/dev/stdin`), then resubmit",
                    "missing-secret",
                )
            ]
        if secret:
            name = secret.group(1)
            why = (
                " (the per-job credential Secret was deleted; resubmitting recreates it)"
                if name.startswith("tao-creds-")
                else ""
            )
            return [
                Finding(
                    f"the Secret {name} referenced by the pod does not exist in namespace {ns}",
                    text,
                    f"create it from stdin (`kubectl create secret generic {name} -n {ns} "
                    f"--from-env-file=/dev/stdin`), or fix the name the job refers to{why}",
                    "missing-secret",
                )
            ]
        if configmap:
            return [
                Finding(
                    f"the ConfigMap {configmap.group(1)} referenced by the pod does not exist",
                    text,
                    f"create the ConfigMap in namespace {ns} or fix the reference",
                    "missing-configmap",
                )
            ]
    if texts:
        return [
            Finding(
                "the container configuration refers to something missing",
                texts[0],
                "create the Secret or ConfigMap the message names, then resubmit",
                "missing-secret",
            )
        ]
    return []


def log_finding(found: Mapping[str, Any], job: str) -> Finding:
    """The finding of a cause the ranks' output showed (diagnosis/causes.Diagnosis.to_dict())."""
    rank = found.get("rank")
    on = f" on rank {rank}" if rank is not None else ""
    where = f"rank {rank}: " if rank is not None else ""
    cause = f"{found.get('summary')}{on} ({found.get('cause')}, {found.get('err_class')})"
    fix = str(found.get("fix") or "")
    if found.get("cause") in ("ProgramError",) and rank is not None:
        fix += f"; every rank's first error: `kubectl tao logs {job} --errors`"
    return Finding(cause, f"{where}{found.get('evidence') or ''}", fix, f"log:{found.get('cause')}")


def _failure_findings(status: st.JobStatus, job: str, diagnosis: Mapping[str, Any] | None = None) -> list[Finding]:
    rank = status.first_failed_rank if status.first_failed_rank is not None else 0
    reason = status.reason
    if diagnosis and diagnosis.get("cause"):
        return [log_finding(diagnosis, job)]
    if reason == "OOMKilled":
        return [
            Finding(
                "a rank ran out of memory (OOMKilled, exit 137)",
                status.message,
                "lower the batch size (or max_length), give the container a larger memory limit, or target "
                "a node with more memory; then retry (classed ERR_INFRA)",
                "oom-killed",
            )
        ]
    if reason == "RendezvousTimeout":
        return [
            Finding(
                "the ranks could not meet at the rendezvous (rank 0 unreachable before the deadline)",
                status.message,
                "check in this order: every rank was scheduled (a partial start leaves rank 0 alone); no "
                "NetworkPolicy blocks the MASTER_PORT between pods; the headless Service resolves "
                "(<job>-0.<job>, publishNotReadyAddresses); the cluster runs Kubernetes >= 1.28; on multi-NIC "
                "nodes set NCCL_SOCKET_IFNAME / NCCL_IB_HCA",
                "rendezvous-timeout",
            )
        ]
    if reason == "UploadFailed":
        return [
            Finding(
                "the command succeeded but its results did not reach S3 (storage tier C upload, exit "
                f"{EXIT_UPLOAD_FAILED})",
                status.message,
                f"read why in the upload's own lines: `kubectl tao logs {job} --rank {rank}`; check that the bucket "
                "exists, that the job's Secret holds credentials that may write there (AWS_ACCESS_KEY_ID, "
                "AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL for a store other than AWS) and that the image has an S3 "
                "client (`aws` or Python's awscli); the results were in the pod's emptyDir and went with it",
                "upload-failed",
            )
        ]
    if reason == "ExitCode":
        return [
            Finding(
                "the program failed (non-zero exit code)",
                status.message,
                f"read the output of the failing rank: `kubectl tao logs {job} --rank {rank}` (its first error: "
                f"`kubectl tao logs {job} --errors`); its log was not read or printed nothing",
                "program-error",
            )
        ]
    if reason in ("Evicted", "Preempted", "NodeLost", "NodeShutdown", "UnexpectedAdmissionError"):
        extra = ""
        if reason == "Evicted" and "memory" in status.message.lower():
            extra = "; the node ran low on memory: set a memory request close to what the job uses"
        return [
            Finding(
                f"the cluster stopped a rank ({reason}), not the program",
                status.message,
                f"retry the job (classed ERR_INFRA){extra}",
                "infrastructure",
            )
        ]
    if reason == "DeadlineExceeded":
        return [
            Finding(
                "the job ran longer than its active deadline",
                status.message,
                "raise the deadline (activeDeadlineSeconds) or shorten the run, then retry",
                "deadline-exceeded",
            )
        ]
    return [
        Finding(
            f"the Job failed ({reason or 'Failed'}) and its pods no longer say why",
            status.message,
            f"the record keeps the exit codes and log tail captured at the end: `kubectl tao status {job}`; "
            f"otherwise `kubectl tao logs {job}` while the pods exist",
            "job-failed",
        )
    ]


def _pending_findings(
    status: st.JobStatus, events: Any, job_name: str, ns: str, queue_quota: Any = None
) -> list[Finding]:
    reason, message = status.reason, status.message
    if status.kueue is not None:
        return kueue_findings(status.kueue, queue_quota, ns, job_name)
    if reason == "Suspended":
        if "Kueue" in message:
            return [
                Finding(
                    "Kueue has not admitted the job yet (the queue's GPU quota is in use)",
                    message,
                    f"`kubectl get workloads.kueue.x-k8s.io -n {ns}` shows the queue position; the job starts when "
                    "quota frees up, or cancel it and ask for fewer GPUs",
                    "awaiting-admission",
                )
            ]
        return [
            Finding(
                "the Job is suspended",
                message,
                f"resume it: kubectl patch job {job_name} -n {ns} --type=merge -p '{{\"spec\":{{\"suspend\":false}}}}'",
                "suspended",
            )
        ]
    if reason in ("QuotaExceeded", "FailedCreate"):
        if reason == "QuotaExceeded":
            fix = f"ask for fewer GPUs, or raise the namespace quota (`kubectl describe resourcequota -n {ns}`)"
            cause = "the namespace's ResourceQuota refuses the pods"
        else:
            fix = "the Job controller cannot create the pods: fix what the message names (admission policy, "
            fix += "webhook, service account)"
            cause = "the pods cannot be created"
        return [Finding(cause, message, fix, "failed-create")]
    if reason == "Initializing":
        return [
            Finding(
                "the init container is still running (storage tier C download)",
                message,
                "nothing is wrong yet, but the pod holds its GPUs while it downloads; prefer tier A (a Bound "
                "PVC) for large data",
                "initializing",
            )
        ]
    if reason == "NoPods":
        return [
            Finding(
                "no pods exist yet",
                message,
                f"the Job controller usually creates them within seconds; `kubectl describe job {job_name} -n {ns}` "
                "shows FailedCreate events if it cannot",
                "no-pods",
            )
        ]
    return []


def explain(
    status: st.JobStatus,
    events: Any,
    pods: Any,
    *,
    nodes: Sequence[NodeGpus] | None = None,
    job: str = "JOB",
    namespace: str | None = None,
    job_name: str | None = None,
    no_gpu_hint: str | None = None,
    queue_quota: Any = None,
    diagnosis: Mapping[str, Any] | None = None,
) -> list[Finding]:
    """Causes with evidence and a fix, most important first; [] when nothing is wrong.

    `job` is the record id (for `kubectl tao` commands), `job_name` the Kubernetes Job's name (for `kubectl`
    commands; the record's backend_ref, which need not equal the id).

    `nodes` (from gpufit.node_gpus) tells a GPU-less cluster from a busy one; without it an
    Insufficient nvidia.com/gpu finding mentions both possibilities. `no_gpu_hint` (gpuinventory.no_gpu_hint)
    is the fix when the GPUs exist as DRA devices that pods asking for nvidia.com/gpu cannot use.
    `queue_quota` (quota.QueueQuota) is the ClusterQueue of a Job Kueue holds (status.kueue), when read.
    `diagnosis` is what the ranks' output showed (diagnosis/causes.Diagnosis.to_dict()) for a program that failed.
    """
    pod_list = _pods(pods)
    ns = _namespace(pod_list, namespace)
    found: list[Finding] = []
    if status.state == st.UNKNOWN and status.reason == "NotFound":
        found.append(
            Finding(
                "the Job no longer exists",
                status.message,
                f"`kubectl tao status {job}` shows what the record captured (state, per-rank exit codes, log "
                "tail); raise --ttl to keep finished Jobs longer",
                "job-gone",
            )
        )
    elif status.state == st.ERROR:
        found += _ran_on_unhealthy(pod_list, nodes)
        found += _failure_findings(status, job, diagnosis)
    elif status.state in (st.PENDING, st.RUNNING):
        messages = _scheduler_messages(status, events, pod_list)
        found += _image_findings(pod_list, ns)
        found += _config_findings(pod_list, events, ns)
        found += _pvc_findings(status, messages, events, ns)
        found += _gpu_findings(messages, nodes, no_gpu_hint)
        found += _health_findings(nodes)
        if not found:
            found += _pending_findings(status, events, job_name or job, ns, queue_quota)
        if status.state == st.RUNNING and status.total > 1 and status.reason:
            found.insert(
                0,
                Finding(
                    "a partial start: some ranks run while others wait, and rank 0 waits for all of them",
                    f"{status.reason}; {status.message}",
                    "cancel and resubmit when `kubectl tao fit` says the whole job fits, or with all-or-nothing "
                    "scheduling: native gang (`--gang`, Kubernetes 1.37+) or Kueue (`--queue`); the running ranks "
                    "hold their GPUs meanwhile",
                    "partial-start",
                ),
            )
    seen: set[str] = set()
    unique = []
    for finding in found:
        if finding.code not in seen:
            seen.add(finding.code)
            unique.append(finding)
    return unique


# --------------------------------------------------------------------------------------------------------
# Kueue


def _queue_usage(quota: Any) -> str:
    gpu = GPU_RESOURCE
    flavors = ", ".join(
        f"{f.used} of {f.nominal} {gpu} reserved" + (f" in flavor {f.name}" if f.name else "")
        for f in quota.flavors
    )
    counts = f"{quota.admitted_workloads} workload(s) admitted, {quota.pending_workloads} pending"
    return f"ClusterQueue {quota.cluster_queue}: {flavors or 'no ' + gpu + ' quota'}; {counts}"


def kueue_findings(admission_data: Mapping[str, Any], quota: Any, namespace: str, job_name: str) -> list[Finding]:
    """explain's findings for a Job Kueue holds: Kueue's reason as the evidence, and the fix it calls for.

    `admission_data` is Admission.to_dict() (as JobStatus.kueue carries it); `quota` a quota.QueueQuota of
    its ClusterQueue, or None when that could not be read."""
    state = str(admission_data.get("state") or "")
    lq = str(admission_data.get("local_queue") or "")
    message = str(admission_data.get("message") or "")
    reason = str(admission_data.get("reason") or "")
    workload = admission_data.get("workload")
    usage = f"; {_queue_usage(quota)}" if quota is not None else ""
    lists = f"`kubectl get {kueue.WORKLOADS} -n {namespace}` lists the queue"
    found: list[Finding] = []
    if quota is not None and quota.inactive:
        found.append(
            Finding(
                f"ClusterQueue {quota.cluster_queue} admits no workload",
                quota.inactive,
                f"a cluster admin must fix ClusterQueue {quota.cluster_queue} (`kubectl describe clusterqueue "
                f"{quota.cluster_queue}`; a missing ResourceFlavor is the usual cause)",
                "kueue-queue-inactive",
            )
        )
    if state == kueue.NO_WORKLOAD:
        found.append(
            Finding(
                "Kueue has not taken up the Job: it made no Workload for it",
                f"Job {job_name} is suspended with {kueue.QUEUE_LABEL}={lq}, and no Workload has label "
                f"{kueue.JOB_UID_LABEL} of its UID",
                f"check that Kueue runs, integrates batch/job and manages namespace {namespace} (its "
                f"managedJobsNamespaceSelector); {lists}",
                "kueue-no-workload",
            )
        )
    elif state == kueue.INADMISSIBLE:
        if "LocalQueue" in message:
            fix = (
                f"create LocalQueue {lq} in namespace {namespace}, or cancel the job and submit it again with "
                f"--queue set to one of `kubectl get localqueues.kueue.x-k8s.io -n {namespace}`"
            )
        else:
            fix = "a cluster admin must create or fix the ClusterQueue named above (`kubectl get clusterqueues`)"
        found.append(Finding("Kueue cannot admit the job", f"{reason}: {message}", fix, "kueue-inadmissible"))
    elif state == kueue.WORKFLOW_HELD:
        found.append(
            Finding(
                "the job is a workflow step held until the step before it succeeds",
                f"Workload {workload} has spec.active: false",
                "the step before it activates the Workload when it succeeds (and its gate passes); "
                "`kubectl tao workflow status` shows the run",
                "workflow-held",
            )
        )
    elif state == kueue.DEACTIVATED:
        found.append(
            Finding(
                "Kueue deactivated the job's Workload: it will not be admitted again",
                f"{reason}: {message}" if reason else message or f"Workload {workload} has spec.active: false",
                f"`kubectl describe workload {workload} -n {namespace}` says why; cancel the job and submit it again",
                "kueue-deactivated",
            )
        )
    elif state == kueue.EVICTED:
        found.append(
            Finding(
                f"Kueue evicted the job ({reason}) and queues it again",
                message + usage,
                f"it starts again when Kueue admits it; {lists}",
                "kueue-evicted",
            )
        )
    elif state == kueue.RESERVED:
        found.append(
            Finding(
                "Kueue reserved quota for the job and waits for its admission checks",
                message + usage,
                f"`kubectl describe workload {workload} -n {namespace}` lists the checks and their state",
                "kueue-admission-checks",
            )
        )
    elif state == kueue.PENDING:
        found.append(
            Finding(
                "Kueue has not admitted the job yet: the queue's quota is in use",
                (message or f"Workload {workload} waits in LocalQueue {lq}") + usage,
                f"the job starts when quota frees up ({lists}); or cancel it and submit a smaller job",
                "awaiting-admission",
            )
        )
    return found
