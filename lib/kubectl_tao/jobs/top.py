"""`top JOB`: the GPU use of a running job's ranks (docs/progress.md).

One round of reads at once: the Job and its pods, and (unless told otherwise) the DCGM exporter's Service by its
labels, cluster-wide (core/contract.py: DCGM_SERVICE_SELECTORS). Where an exporter is found, its metrics are
read through the API server's service proxy in one call (`kubectl get --raw /api/v1/namespaces/NS/services/
NAME:PORT/proxy/metrics`) and each rank's GPUs found by the pod attribution labels. A rank the exporter's
answer does not name (the Service answers from one exporter, so one node, per call; a rank that holds no GPU; no
exporter at all) is read with `nvidia-smi` in its container through `kubectl exec`: every such rank at once,
each call bounded by `timeout`. A rank that cannot be read says why; nothing here fails the verb once the job's
pods are known. Every text read goes through progress/gpuuse.py's reader (redacted, sanitized, bounded)."""

from __future__ import annotations

from typing import Any

from kubectl_tao.core import contract
from kubectl_tao.core.errors import TaoError, UsageError
from kubectl_tao.core.redact import redact_cluster_text
from kubectl_tao.core.sanitize import sanitize
from kubectl_tao.core.valueclass import Value, record
from kubectl_tao.diagnosis.jobstate import MAIN_CONTAINER, pod_rank
from kubectl_tao.jobs import track as tracking
from kubectl_tao.k8s.kubectl import Completed, Kubectl
from kubectl_tao.progress import gpuuse
from kubectl_tao.progress.gpuuse import RankUse

SOURCES = ("auto", gpuuse.SOURCE_DCGM, gpuuse.SOURCE_NVIDIA_SMI)
DEFAULT_TIMEOUT = 10.0  # seconds each read (the metrics page, one rank's nvidia-smi) may take


@record
class Exporter(Value):
    namespace: str
    name: str
    port: str

    @property
    def path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/services/{self.name}:{self.port}/proxy/metrics"


@record
class TopResult(Value):
    ranks: tuple[RankUse, ...]
    notes: tuple[str, ...] = ()

    def to_list(self) -> list[dict[str, Any]]:
        return [rank.to_dict() for rank in self.ranks]


def _services_call(selector: str) -> tuple[list[str], dict[str, Any]]:
    return ["get", "services", "--all-namespaces", "-l", selector, "-o", "json"], {"namespaced": False, "check": False}


def exporter_of(answers: list[Completed | TaoError]) -> Exporter | None:
    """The first exporter Service the label reads found (in DCGM_SERVICE_SELECTORS order), with its metrics port:
    by name (DCGM_PORT_NAMES), else the one numbered DCGM_PORT, else its only port."""
    import json

    for answer in answers:
        if isinstance(answer, TaoError) or answer.returncode != 0:
            continue
        try:
            items = (json.loads(answer.stdout) or {}).get("items") or []
        except (json.JSONDecodeError, AttributeError):
            continue
        for service in sorted(items, key=lambda s: (s.get("metadata") or {}).get("namespace") or ""):
            meta, ports = service.get("metadata") or {}, (service.get("spec") or {}).get("ports") or []
            namespace, name = meta.get("namespace"), meta.get("name")
            if not namespace or not name or not ports:
                continue
            named = [p for n in contract.DCGM_PORT_NAMES for p in ports if p.get("name") == n]
            numbered = [p for p in ports if p.get("port") == contract.DCGM_PORT]
            port = (named or numbered or (ports if len(ports) == 1 else [None]))[0]
            if port is None:
                continue
            return Exporter(str(namespace), str(name), str(port.get("name") or port.get("port")))
    return None


def _ended(job: dict[str, Any]) -> str | None:
    """The Job's Complete or Failed condition, when it holds."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return str(condition["type"])
    return None


def _is_running(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and not (pod.get("metadata") or {}).get(
        "deletionTimestamp")


def rank_pods(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One pod per rank, in rank order: its running pod, else its newest (a rank waiting to start, or one
    whose pod ended)."""
    chosen: dict[int, dict[str, Any]] = {}
    for pod in sorted(pods, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or "")):
        rank = pod_rank(pod)
        if rank not in chosen or not _is_running(chosen[rank]):
            chosen[rank] = pod
    return [chosen[rank] for rank in sorted(chosen)]


def container_of(pod: dict[str, Any]) -> str:
    """The container nvidia-smi runs in: kubectl-tao's (`tao`), else the pod's first (a Job launched another way)."""
    names = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or [] if c.get("name")]
    return MAIN_CONTAINER if MAIN_CONTAINER in names or not names else names[0]


def _reason(text: str) -> str:
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return gpuuse.shorten(sanitize(redact_cluster_text(line)))


def _from_exec(answer: Completed | TaoError, timeout: float) -> tuple[list[gpuuse.GpuUse], str | None]:
    if isinstance(answer, TaoError):
        text = str(answer)
        if "timed out" in text:
            return [], f"nvidia-smi did not answer within {timeout:g}s"
        return [], _reason(text)
    gpus, reason = gpuuse.parse_nvidia_smi(answer.stdout)
    if gpus:
        return gpus, None
    if answer.returncode != 0 and (not answer.stdout.strip() or answer.stderr.strip()):
        said = _reason(answer.stderr)
        if answer.stdout.strip():
            return [], f"{reason} ({said})" if said else reason
        return [], f"nvidia-smi could not run: {said}" if said else "nvidia-smi could not run"
    return [], reason


def read_dcgm(kc: Kubectl, exporter: Exporter, timeout: float) -> tuple[dict[tuple[str, str], list[Any]], str | None]:
    """The exporter's GPUs by (namespace, pod), or nothing and why the page could not be read."""
    try:
        answer = kc.run(["get", "--raw", exporter.path], namespaced=False, timeout=timeout, check=False)
    except TaoError as exc:
        return {}, _reason(str(exc))
    if answer.returncode != 0:
        return {}, _reason(answer.stderr) or f"kubectl get --raw exited {answer.returncode}"
    return gpuuse.parse_dcgm(answer.stdout), None


def top(
    kc: Kubectl,
    store: Any,
    record_id: str,
    *,
    server: str,
    force: bool = False,
    source: str = "auto",
    timeout: float = DEFAULT_TIMEOUT,
) -> TopResult:
    """The GPU use of each running rank of job RECORD_ID (see the module's docstring). UsageError (exit 2) for a
    job that is not running or has no running pod."""
    if source not in SOURCES:
        raise UsageError(f"--source {source}: give one of {', '.join(SOURCES)}")
    tracked = tracking.load(store, record_id)
    tracking.refuse_other_platform(tracked, "read the GPU use of")
    tracking.check_pin(tracked, server, force=force)
    if tracked.terminal or not tracked.job_name:
        state = tracked.record_state
        raise UsageError(
            f"job {tracked.id} is {state}, not running: `top` reads the GPUs of a running job; see "
            f"`kubectl tao status {tracked.id}`"
        )
    fetching = tracking.Fetching(kc, tracked)
    notes: list[str] = []
    lookups = None
    if source != gpuuse.SOURCE_NVIDIA_SMI:
        lookups = kc.start_many({sel: _services_call(sel) for sel in contract.DCGM_SERVICE_SELECTORS})
    job, pods, _ = fetching.result()
    tracking.check_uid(tracked, job, force=force)
    if job is None:
        raise UsageError(f"job {tracked.id}: its Job {tracked.namespace}/{tracked.job_name} is gone; nothing to read")
    running = rank_pods(pods)
    if not any(_is_running(pod) for pod in running):
        ended = _ended(job)
        what = f"has ended ({ended})" if ended else "has no running pod yet"
        raise UsageError(
            f"job {tracked.id} {what}: `top` reads the GPUs of a running job; see `kubectl tao status {tracked.id}`"
        )
    namespace = str(tracked.namespace)
    by_pod: dict[tuple[str, str], list[Any]] = {}
    if lookups is not None:
        looked = [lookups.result(sel) for sel in contract.DCGM_SERVICE_SELECTORS]
        exporter = exporter_of(looked)
        refused = [a for a in looked if isinstance(a, Completed) and a.returncode != 0]
        if exporter is None and refused:
            notes.append(f"the DCGM exporter's Service could not be looked up: {_reason(refused[0].stderr)}")
        if exporter is None:
            if source == gpuuse.SOURCE_DCGM:
                raise UsageError(
                    "--source dcgm: no DCGM exporter Service found (labels "
                    f"{' or '.join(contract.DCGM_SERVICE_SELECTORS)}); drop --source to read nvidia-smi in each rank"
                )
        else:
            by_pod, why = read_dcgm(kc, exporter, timeout)
            if why is not None:
                notes.append(f"the DCGM exporter {exporter.namespace}/{exporter.name} could not be read: {why}")
    ranks: dict[str, RankUse] = {}
    wanted: list[dict[str, Any]] = []
    for pod in running:
        name = pod["metadata"]["name"]
        node = (pod.get("spec") or {}).get("nodeName")
        found = by_pod.get((namespace, name))
        if not _is_running(pod):
            phase = (pod.get("status") or {}).get("phase") or "Unknown"
            ranks[name] = RankUse(pod_rank(pod), name, node, reason=f"its pod is {sanitize(str(phase))[:40]}")
        elif found:
            ranks[name] = RankUse(pod_rank(pod), name, node, tuple(found), gpuuse.SOURCE_DCGM)
        elif source == gpuuse.SOURCE_DCGM:
            ranks[name] = RankUse(pod_rank(pod), name, node, reason="the DCGM exporter's answer names no GPU of it")
        else:
            wanted.append(pod)
    if wanted:
        calls = {
            p["metadata"]["name"]: (
                ["exec", p["metadata"]["name"], "-n", namespace, "-c", container_of(p), "--", *gpuuse.NVIDIA_SMI_QUERY],
                {"namespaced": False, "timeout": timeout, "check": False},
            )
            for p in wanted
        }
        answers = kc.run_many(calls)
        for pod in wanted:
            name = pod["metadata"]["name"]
            gpus, reason = _from_exec(answers[name], timeout)
            ranks[name] = RankUse(
                pod_rank(pod), name, (pod.get("spec") or {}).get("nodeName"), tuple(gpus),
                gpuuse.SOURCE_NVIDIA_SMI, reason,
            )
    ordered = tuple(ranks[p["metadata"]["name"]] for p in running)
    return TopResult(ordered, tuple(notes))
