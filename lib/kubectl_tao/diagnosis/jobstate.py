"""What a Job is doing, from the JSON kubectl returns: PENDING, RUNNING, COMPLETE, ERROR or UNKNOWN.

Input is the Job (`kubectl get job NAME -o json`, or None when kubectl said NotFound), its pods
(`kubectl get pods -l job-name=NAME -o json`) and optionally the events of the Job and its pods
(`kubectl get events -o json`). The result names the state, a short reason class, kubectl's or the kubelet's
own one-line message, the error class for failures, and one line per rank.

Why pods are read rather than trusting `status.active`: the Job controller counts a pod as active from the
moment it exists, Pending included. A job whose pod waits on ImagePullBackOff or on a GPU that never frees
up has active=1, and calling that RUNNING (as the reference's table does) hides the very thing users ask
about. A job is RUNNING here only once one of its pods has phase Running.

The OPEN and CANCELED states come from the job record, not from the cluster, and are not produced here.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from kubectl_tao.core import contract
from kubectl_tao.core.contract import CANCELED, COMPLETE, ERROR, PENDING, RUNNING, TERMINAL_STATES, UNKNOWN
from kubectl_tao.core.valueclass import Factory, Value, record
from kubectl_tao.restarts.table import (
    EXIT_RENDEZVOUS_TIMEOUT,
    EXIT_SIGKILL,
    EXIT_SIGTERM,
    EXIT_STALLED,
    EXIT_UPLOAD_FAILED,
)

__all__ = ["CANCELED", "COMPLETE", "ERROR", "PENDING", "RUNNING", "TERMINAL_STATES", "UNKNOWN"]

ERR_INFRA = "ERR_INFRA"
ERR_PROGRAM = "ERR_PROGRAM"

INDEX_KEY = contract.COMPLETION_INDEX_ANNOTATION
KUEUE_QUEUE_LABEL = contract.QUEUE_LABEL
MAIN_CONTAINER = "tao"
RENDEZVOUS_EXIT_CODE = EXIT_RENDEZVOUS_TIMEOUT  # the pod scripts' reserved codes: restarts/table.py
UPLOAD_EXIT_CODE = EXIT_UPLOAD_FAILED  # tier C: the command succeeded, the upload of its results did not
SIGKILL_EXIT_CODE = EXIT_SIGKILL

# Container waiting reasons that explain a Pending pod better than anything else.
WAITING_PROBLEMS = (
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "CrashLoopBackOff",
)
STARTING_REASONS = ("ContainerCreating", "PodInitializing")

# Pod-level failure reasons that say the infrastructure, not the program, ended the pod.
INFRA_POD_REASONS = {
    "Evicted": "Evicted",
    "Preempted": "Preempted",
    "DeadlineExceeded": "DeadlineExceeded",
    "NodeLost": "NodeLost",
    "NodeShutdown": "NodeShutdown",
    "Shutdown": "NodeShutdown",
    "Terminated": "NodeShutdown",
    "UnexpectedAdmissionError": "UnexpectedAdmissionError",
    "NodeAffinity": "NodeAffinity",
}
# DisruptionTarget condition reasons (k8s >= 1.26) and the class they map to.
DISRUPTION_REASONS = {
    "PreemptionByScheduler": "Preempted",
    "PreemptionByKubeScheduler": "Preempted",
    "DeletionByTaintManager": "NodeLost",
    "DeletionByPodGC": "NodeLost",
    "EvictionByEvictionAPI": "Evicted",
    "TerminationByKubelet": "Evicted",
}
_INFRA_WORDS = {
    "Evicted": "was evicted",
    "Preempted": "was preempted",
    "NodeLost": "lost its node",
    "NodeShutdown": "stopped with its node",
    "DeadlineExceeded": "ran past its deadline",
}
# Job failure condition reasons that are infrastructure by themselves.
INFRA_JOB_REASONS = {"DeadlineExceeded"}


@record(frozen=True)
class RankStatus(Value):
    """One rank's pod as job_status sees it (`to_dict` keys in field order: status and list `-o json`)."""

    rank: int
    pod: str
    node: str | None
    phase: str
    ready: bool
    exit_code: int | None
    reason: str
    message: str
    started_at: str | None
    finished_at: str | None
    restarts: int

    def to_dict(self) -> dict[str, Any]:
        return self.as_dict()


@record
class JobStatus(Value):
    """What job_status makes of a Job and its pods; job_status fills it in as it goes (`to_dict` keys in
    field order: status and list `-o json`)."""

    state: str
    reason: str
    message: str
    err_class: str | None = None
    ranks: list[RankStatus] = Factory(list)
    active: int = 0
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    total: int = 1
    first_failed_rank: int | None = None
    job_uid: str | None = None
    gang: dict[str, Any] | None = None  # gang.GangView.to_dict() of a native gang job
    kueue: dict[str, Any] | None = None  # kueue.Admission of a Job held suspended by Kueue, when it was read

    def to_dict(self) -> dict[str, Any]:
        """Every field by name, in `_fields` order; ranks as dicts, gang and kueue copied."""
        out = self.as_dict()
        out["ranks"] = [rank.to_dict() for rank in self.ranks]
        out["gang"], out["kueue"] = copy.deepcopy(self.gang), copy.deepcopy(self.kueue)
        return out

    @property
    def terminal(self) -> bool:
        return is_terminal(self.state)


def is_terminal(state: str) -> bool:
    """COMPLETE, ERROR and CANCELED are final; PENDING, RUNNING and UNKNOWN can still change."""
    return state in TERMINAL_STATES


# --------------------------------------------------------------------------------------------------------
# Small readers


def items_of(data: Any) -> list[Mapping[str, Any]]:
    """A kubectl List's items, or the list itself."""
    if data is None:
        return []
    if isinstance(data, Mapping):
        return [item for item in data.get("items") or [] if isinstance(item, Mapping)]
    return [item for item in data if isinstance(item, Mapping)]


def parse_time(value: Any) -> datetime | None:
    """RFC 3339 timestamps as Kubernetes writes them ("2024-05-01T10:00:00Z", with or without micros)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _one_line(text: Any, limit: int = 400) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _last_line(text: Any) -> str:
    """The last non-empty line of a termination message (with FallbackToLogsOnError it is a log tail)."""
    lines = [line for line in str(text or "").splitlines() if line.strip()]
    return _one_line(lines[-1]) if lines else ""


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return condition
    return None


def _true(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    condition = _condition(obj, kind)
    return condition if condition is not None and condition.get("status") == "True" else None


def pod_rank(pod: Mapping[str, Any]) -> int:
    """The completion index (annotation, or the label k8s >= 1.28 adds); 0 for a non-indexed Job."""
    meta = pod.get("metadata") or {}
    for source in (meta.get("annotations") or {}, meta.get("labels") or {}):
        value = source.get(INDEX_KEY)
        if value is not None and str(value).isdigit():
            return int(value)
    return 0


def _pod_env(pod: Mapping[str, Any], name: str) -> str | None:
    for container in (pod.get("spec") or {}).get("containers") or []:
        for env in container.get("env") or []:
            if env.get("name") == name and isinstance(env.get("value"), str):
                return env["value"]
    return None


# --------------------------------------------------------------------------------------------------------
# Ranks


@record(frozen=True)
class _Salient(Value):
    """The one container state that best describes a pod."""

    exit_code: int | None = None
    reason: str = ""
    message: str = ""
    started_at: str | None = None
    finished_at: str | None = None


def _by_name_first(statuses: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted(statuses, key=lambda s: s.get("name") != MAIN_CONTAINER)


def _salient(pod: Mapping[str, Any]) -> _Salient:
    status = pod.get("status") or {}
    inits = list(status.get("initContainerStatuses") or [])
    mains = _by_name_first(list(status.get("containerStatuses") or []))

    def terminated(cs: Mapping[str, Any]) -> Mapping[str, Any] | None:
        state = cs.get("state") or {}
        if state.get("terminated"):
            return state["terminated"]
        if state.get("waiting"):  # restarted container: its last run holds the exit code
            return (cs.get("lastState") or {}).get("terminated")
        return None

    def from_terminated(term: Mapping[str, Any]) -> _Salient:
        return _Salient(
            exit_code=term.get("exitCode"),
            reason=str(term.get("reason") or ""),
            message=_last_line(term.get("message")),
            started_at=term.get("startedAt"),
            finished_at=term.get("finishedAt"),
        )

    # 1. a failed init container (e.g. a tier C download) stops everything after it
    for cs in inits:
        term = (cs.get("state") or {}).get("terminated")
        if term and term.get("exitCode", 0) != 0:
            return from_terminated(term)
    # 2. a main container that ended badly
    for cs in mains:
        term = terminated(cs)
        if term and term.get("exitCode", 0) != 0:
            return from_terminated(term)
    # 3. anything stuck waiting for a reason worth showing, init containers first
    for cs in [*inits, *mains]:
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason") in WAITING_PROBLEMS:
            return _Salient(reason=waiting["reason"], message=_one_line(waiting.get("message")))
    # 4. an init container still running
    for cs in inits:
        running = (cs.get("state") or {}).get("running")
        if running:
            return _Salient(reason="Initializing", started_at=running.get("startedAt"))
    # 5. the main container running, starting, or done
    for cs in mains:
        state = cs.get("state") or {}
        if state.get("running"):
            return _Salient(started_at=state["running"].get("startedAt"))
        if state.get("terminated"):
            return from_terminated(state["terminated"])
        if state.get("waiting"):
            waiting = state["waiting"]
            return _Salient(reason=str(waiting.get("reason") or ""), message=_one_line(waiting.get("message")))
    return _Salient()


def rank_status(pod: Mapping[str, Any]) -> RankStatus:
    """One pod as one rank: phase, node, exit code and the most telling reason and message."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    phase = str(status.get("phase") or "Pending")
    found = _salient(pod)
    reason, message = found.reason, found.message
    pod_reason = str(status.get("reason") or "")
    disruption = _true(pod, "DisruptionTarget")
    if pod_reason and phase == "Failed" and found.exit_code in (None, 0, SIGKILL_EXIT_CODE, EXIT_SIGTERM):
        reason, message = pod_reason, _one_line(status.get("message")) or message
    elif disruption is not None and phase == "Failed":
        reason = DISRUPTION_REASONS.get(str(disruption.get("reason")), str(disruption.get("reason") or ""))
        message = _one_line(disruption.get("message")) or message
    elif phase == "Pending" and not spec.get("nodeName") and not reason:
        scheduled = _condition(pod, "PodScheduled")
        if scheduled is not None and scheduled.get("status") == "False":
            reason = str(scheduled.get("reason") or "Unschedulable")
            message = _one_line(scheduled.get("message"))
    ready = _true(pod, "Ready") is not None
    restarts = sum(
        int(cs.get("restartCount") or 0)
        for cs in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    )
    return RankStatus(
        rank=pod_rank(pod),
        pod=str(meta.get("name") or ""),
        node=spec.get("nodeName") or None,
        phase=phase,
        ready=ready,
        exit_code=found.exit_code,
        reason=reason,
        message=message,
        started_at=found.started_at or status.get("startTime"),
        finished_at=found.finished_at,
        restarts=restarts,
    )


def _latest_per_rank(pods: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """One pod per completion index: the newest attempt (retries leave older pods behind)."""
    best: dict[int, Mapping[str, Any]] = {}
    for pod in pods:
        rank = pod_rank(pod)
        current = best.get(rank)
        if current is None or _created_key(pod) > _created_key(current):
            best[rank] = pod
    return [best[rank] for rank in sorted(best)]


def _created_key(pod: Mapping[str, Any]) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    created = parse_time(meta.get("creationTimestamp"))
    return (created.isoformat() if created else "", str(meta.get("name") or ""))


def _failed(rank: RankStatus) -> bool:
    return rank.phase == "Failed" or (rank.exit_code is not None and rank.exit_code != 0)


def first_failure(ranks: Iterable[RankStatus]) -> RankStatus | None:
    """The failed rank that finished first (rank order breaks ties and fills in missing times)."""
    failed = [r for r in ranks if _failed(r)]
    if not failed:
        return None
    far_future = datetime.max.replace(tzinfo=None)

    def key(rank: RankStatus) -> tuple[datetime, int]:
        finished = parse_time(rank.finished_at)
        return (finished.replace(tzinfo=None) if finished else far_future, rank.rank)

    return min(failed, key=key)


# --------------------------------------------------------------------------------------------------------
# Scheduler and event text


_SCHED_PART = re.compile(r"(\d+)\s+(\S.*)")  # one stripped part: one pass (no lazy run before spaces)


def parse_scheduler_message(message: str) -> dict[str, int]:
    """'0/3 nodes are available: 1 node(s) didn't match ..., 2 Insufficient nvidia.com/gpu.' -> counts.

    The "preemption: ..." tail newer schedulers append is ignored.
    """
    head = message.split(" preemption:", 1)[0]
    if "are available:" not in head:
        return {}
    body = head.split("are available:", 1)[1].strip().rstrip(".")
    out: dict[str, int] = {}
    for part in body.split(", "):
        match = _SCHED_PART.fullmatch(part.strip())
        if match:
            out[match.group(2).rstrip(".")] = out.get(match.group(2).rstrip("."), 0) + int(match.group(1))
    return out


def unschedulable_reason(message: str) -> str:
    """The reason class for a scheduler message: PVCNotFound, PVCNotBound, Insufficient nvidia.com/gpu or
    Unschedulable."""
    low = message.lower()
    if 'persistentvolumeclaim "' in low and "not found" in low:
        return "PVCNotFound"
    if "unbound immediate persistentvolumeclaims" in low or "unbound persistentvolumeclaims" in low:
        return "PVCNotBound"
    if contract.INSUFFICIENT_GPU.lower() in low:
        return contract.INSUFFICIENT_GPU
    return "Unschedulable"


def event_fields(event: Mapping[str, Any]) -> tuple[str, str, str, str, datetime | None]:
    """(kind, name, reason, message, when) for core/v1 and events.k8s.io/v1 Events."""
    target = event.get("involvedObject") or event.get("regarding") or {}
    when = (
        parse_time(event.get("lastTimestamp"))
        or parse_time(event.get("deprecatedLastTimestamp"))
        or parse_time(event.get("eventTime"))
        or parse_time(event.get("firstTimestamp"))
        or parse_time((event.get("series") or {}).get("lastObservedTime"))
        or parse_time((event.get("metadata") or {}).get("creationTimestamp"))
    )
    return (
        str(target.get("kind") or ""),
        str(target.get("name") or ""),
        str(event.get("reason") or ""),
        _one_line(event.get("message") or event.get("note")),
        when,
    )


# What the Job controller appends to a Job's name for its pods: -<5 chars>, or -<index>-<5 chars> (Indexed).
# One pattern for every Job (list classifies hundreds of Jobs per run; a pattern per Job name costs more).
_POD_SUFFIX = re.compile(r"-(\d+-)?[a-z0-9]{5}")


def job_events(events: Any, job_name: str, pod_names: Iterable[str]) -> list[Mapping[str, Any]]:
    """The events about this Job or its pods (including pods already gone), oldest first."""
    names = set(pod_names)
    prefix = f"{job_name}-"
    picked = []
    for event in items_of(events):
        kind, name, _, _, _ = event_fields(event)
        if (
            (kind in ("Job", "") and name == job_name)
            or name in names
            or (kind == "Pod" and name.startswith(prefix) and _POD_SUFFIX.fullmatch(name, len(job_name)))
        ):
            picked.append(event)
    epoch = datetime.min

    def when(event: Mapping[str, Any]) -> datetime:
        stamp = event_fields(event)[4]
        return stamp.replace(tzinfo=None) if stamp else epoch

    return sorted(picked, key=when)


# --------------------------------------------------------------------------------------------------------
# The state machine


def job_status(job: Mapping[str, Any] | None, pods: Any, events: Any = None, *, admission: Any = None) -> JobStatus:
    """Map a Job, its pods and (optionally) events to the state vocabulary. See the module docstring.

    `admission` (a kueue.Admission, read from the Job's Workload) words the wait of a Job Kueue holds
    suspended in Kueue's own terms; without it the queue label alone says that Kueue holds it."""
    if job is None:
        return JobStatus(
            state=UNKNOWN,
            reason="NotFound",
            message="the Job is gone (deleted by hand or by ttlSecondsAfterFinished); "
            "the job record keeps its history",
        )
    meta = job.get("metadata") or {}
    spec = job.get("spec") or {}
    jstatus = job.get("status") or {}
    name = str(meta.get("name") or "")
    pod_list = items_of(pods)
    all_ranks = [rank_status(p) for p in pod_list]
    ranks = [rank_status(p) for p in _latest_per_rank(pod_list)]
    total = int(spec.get("completions") or 1)
    first = first_failure(all_ranks)
    result = JobStatus(
        state=PENDING,
        reason="",
        message="",
        ranks=ranks,
        active=int(jstatus.get("active") or 0),
        ready=int(jstatus.get("ready") if jstatus.get("ready") is not None else sum(r.ready for r in ranks)),
        succeeded=int(jstatus.get("succeeded") or 0),
        failed=int(jstatus.get("failed") or 0),
        total=total,
        first_failed_rank=first.rank if first else None,
        job_uid=meta.get("uid"),
    )
    event_list = job_events(events, name, (r.pod for r in all_ranks))

    complete = _true(job, "Complete") or _true(job, "SuccessCriteriaMet")
    failed = _true(job, "Failed") or _true(job, "FailureTarget")
    if complete is not None:
        result.state, result.reason = COMPLETE, "Completed"
        result.message = f"{result.succeeded or total}/{total} {'rank' if total == 1 else 'ranks'} succeeded"
        return result
    if failed is not None:
        _explain_failure(result, failed, first, pod_list, all_ranks)
        return result
    if spec.get("suspend"):
        result.reason = "Suspended"
        queue = (meta.get("labels") or {}).get(KUEUE_QUEUE_LABEL)
        if queue and admission is not None:
            result.reason, result.message = admission.status_reason, admission.line()
            result.kueue = admission.to_dict()
            return result
        result.message = (
            f"waiting for admission (Kueue LocalQueue {queue})"
            if queue
            else "the Job is suspended (spec.suspend: true); nothing runs until it is resumed"
        )
        return result

    live = [r for r in ranks if r.phase in ("Pending", "Running", "Unknown")]
    running = [r for r in ranks if r.phase == "Running"]
    pending = [r for r in ranks if r.phase == "Pending"]
    pods_missing = len(ranks) < total
    if running:
        result.state = RUNNING
        if len(running) < total:
            result.reason = f"{len(running)}/{total} ranks running"
            result.message = _partial_message(pending, event_list, total, pods_missing)
        else:
            result.message = (
                f"running on {running[0].node}" if total == 1 else f"{len(running)}/{total} ranks running"
            )
    elif pending or not ranks:
        result.state = PENDING
        result.reason, result.message = _explain_pending(pending, event_list, total, pods_missing)
    elif any(r.phase == "Unknown" for r in live):
        lost = next(r for r in live if r.phase == "Unknown")
        result.state, result.reason = UNKNOWN, "PodUnknown"
        result.message = f"rank {lost.rank}'s node {lost.node} stopped reporting (pod phase Unknown)"
    elif (latest_failure := first_failure(ranks)) is not None:
        result.state, result.reason = PENDING, "Retrying"
        result.message = (
            f"rank {latest_failure.rank} failed ({_failure_words(latest_failure)}); the Job controller will start a "
            "replacement pod (backoffLimit allows it)"
        )
    else:
        result.state, result.reason = RUNNING, "Finishing"
        result.message = "every rank succeeded; waiting for the Job controller to mark the Job Complete"
    if meta.get("deletionTimestamp"):
        result.reason, result.message = "Deleting", "the Job is being deleted (its pods are terminating)"
    return result


def _failure_words(rank: RankStatus) -> str:
    if rank.exit_code not in (None, 0):
        return f"exit code {rank.exit_code}"
    return rank.reason or rank.phase


def _explain_failure(
    result: JobStatus,
    condition: Mapping[str, Any],
    first: RankStatus | None,
    pods: list[Mapping[str, Any]],
    all_ranks: list[RankStatus],
) -> None:
    """ERROR: the condition's reason, refined by how the first failed pod ended.

    OOMKilled is classed ERR_INFRA (retriable). The reference contradicts itself here; we follow its
    Kubernetes status table: the process was healthy and ran out of memory the node or the limit gave it,
    the fix is a larger memory limit or a larger node, and a retry with that change is worth making. A
    bare exit 137 (SIGKILL) is read as an OOM kill too: a wrapper shell whose child was OOM-killed exits
    137 while the runtime reports "Error", not "OOMKilled".

    The pod scripts' reserved codes (restarts/table.py): the rendezvous-timeout code is the barrier's own
    failure (a rank could not reach rank 0 before the deadline): ERR_INFRA, since DNS, NetworkPolicy or a
    partial start cause it, not the program. The upload-failed code of a tier C pod (one with TAO_UPLOAD_URI) is
    its upload step's: the command succeeded and the results did not reach S3 (bucket, credentials, endpoint or
    a missing client): UploadFailed, ERR_INFRA.
    The stalled code of a pod with TAO_STALL_TIMEOUT is the stall watch's: the program made no progress for
    --stall-timeout and was ended: Stalled, ERR_INFRA (its log's stall line is read as the diagnosis).
    """
    result.state = ERROR
    cond_reason = str(condition.get("reason") or "Failed")
    result.reason = cond_reason
    result.message = _one_line(condition.get("message")) or cond_reason
    result.err_class = ERR_INFRA if cond_reason in INFRA_JOB_REASONS else None
    if cond_reason in INFRA_JOB_REASONS or first is None:
        return
    failed_count = len({r.rank for r in all_ranks if _failed(r)})
    suffix = f" (first of {failed_count} failed ranks)" if failed_count > 1 else ""
    pod = next((p for p in pods if (p.get("metadata") or {}).get("name") == first.pod), {})
    rank = first.rank
    if first.reason in INFRA_POD_REASONS.values() or first.reason in INFRA_POD_REASONS:
        result.reason = INFRA_POD_REASONS.get(first.reason, first.reason)
        result.err_class = ERR_INFRA
        said = f": {first.message}" if first.message else ""
        result.message = f"rank {rank} {_INFRA_WORDS.get(result.reason, 'failed: ' + result.reason)}{said}"
    elif first.reason == "OOMKilled" or first.exit_code == SIGKILL_EXIT_CODE:
        result.reason, result.err_class = "OOMKilled", ERR_INFRA
        how = "OOMKilled" if first.reason == "OOMKilled" else "killed (SIGKILL, most often out of memory)"
        result.message = f"rank {rank} was {how}, exit code {first.exit_code or SIGKILL_EXIT_CODE}"
    elif first.exit_code == RENDEZVOUS_EXIT_CODE:
        result.reason, result.err_class = "RendezvousTimeout", ERR_INFRA
        addr = _pod_env(pod, "MASTER_ADDR") or "MASTER_ADDR"
        port = _pod_env(pod, "MASTER_PORT") or "MASTER_PORT"
        said = f"rank {rank}: {first.message}" if first.message else ""
        result.message = said or f"rank {rank} could not reach rank 0 at {addr}:{port}"
    elif first.exit_code == EXIT_STALLED and _pod_env(pod, "TAO_STALL_TIMEOUT"):
        result.reason, result.err_class = "Stalled", ERR_INFRA
        result.message = (
            f"rank {rank} made no progress for --stall-timeout ({_pod_env(pod, 'TAO_STALL_TIMEOUT')}s): the stall "
            f"watch ended it (exit {first.exit_code})"
        )
    elif first.exit_code == UPLOAD_EXIT_CODE and _pod_env(pod, "TAO_UPLOAD_URI"):
        result.reason, result.err_class = "UploadFailed", ERR_INFRA
        result.message = (
            f"rank {rank}'s command succeeded, but uploading its results to {_pod_env(pod, 'TAO_UPLOAD_URI')} "
            f"failed (exit {UPLOAD_EXIT_CODE})"
        )
    elif first.exit_code not in (None, 0):
        result.reason, result.err_class = "ExitCode", ERR_PROGRAM
        init = _failed_init_container(pod)
        where = f" in init container {init}" if init else ""
        result.message = f"rank {rank} exited with code {first.exit_code}{where}"
    else:
        return
    result.message += suffix


def _failed_init_container(pod: Mapping[str, Any]) -> str | None:
    for cs in (pod.get("status") or {}).get("initContainerStatuses") or []:
        term = (cs.get("state") or {}).get("terminated")
        if term and term.get("exitCode", 0) != 0:
            return str(cs.get("name") or "")
    return None


def _rank_prefix(rank: RankStatus, total: int) -> str:
    return f"rank {rank.rank}: " if total > 1 else ""


def _explain_pending(
    pending: list[RankStatus], events: list[Mapping[str, Any]], total: int, pods_missing: bool
) -> tuple[str, str]:
    """(reason, message) for ranks that are not running, the most telling cause first.

    Order: a container waiting on a problem (image pull, missing Secret), then the scheduler's verdict in
    PodScheduled=False, then Warning events about these pods or the Job (FailedScheduling, FailedMount,
    FailedCreate), then pods merely starting (ContainerCreating, init containers running).
    """
    for rank in pending:
        if rank.reason in WAITING_PROBLEMS:
            return rank.reason, _rank_prefix(rank, total) + (rank.message or rank.reason)
    for rank in pending:
        if rank.node is None and rank.reason == "SchedulingGated":
            return "SchedulingGated", _rank_prefix(rank, total) + (rank.message or "scheduling gates are set")
        if rank.node is None and (rank.reason == "Unschedulable" or rank.message):
            return unschedulable_reason(rank.message), _rank_prefix(rank, total) + rank.message
    found = _from_events(events, pending, pods_missing)
    if found is not None:
        return found
    for rank in pending:
        if rank.reason == "Initializing":
            return "Initializing", f"rank {rank.rank} is running its init containers on {rank.node}"
        if rank.reason in STARTING_REASONS or rank.node:
            return "ContainerCreating", f"rank {rank.rank} is starting on {rank.node}"
    if pending:
        return "Pending", f"rank {pending[0].rank} is Pending"
    return "NoPods", "no pods created yet"


def _from_events(
    events: list[Mapping[str, Any]], pending: list[RankStatus], pods_missing: bool
) -> tuple[str, str] | None:
    """The newest Warning event that explains the wait, or None.

    Only events that still apply count: FailedScheduling for a pod that is still unscheduled, FailedMount
    for a pod still Pending, FailedCreate on the Job while it has fewer pods than ranks.
    """
    unscheduled = {r.pod for r in pending if r.node is None}
    waiting = {r.pod for r in pending}
    for event in reversed(events):
        if str(event.get("type") or "Warning") != "Warning":
            continue
        kind, name, reason, message, _ = event_fields(event)
        if reason == "FailedScheduling" and name in unscheduled:
            return unschedulable_reason(message), message
        if reason in ("FailedMount", "FailedAttachVolume") and name in waiting:
            low = message.lower()
            if 'persistentvolumeclaim "' in low and "not found" in low:
                return "PVCNotFound", message
            return "FailedMount", message
        if reason == "FailedCreate" and kind in ("Job", "") and pods_missing:
            return ("QuotaExceeded" if "exceeded quota" in message.lower() else "FailedCreate"), message
    return None


def _partial_message(
    pending: list[RankStatus], events: list[Mapping[str, Any]], total: int, pods_missing: bool
) -> str:
    """For a partly started multi-node job: why the ranks that are not running yet wait."""
    if not pending and not pods_missing:
        return ""
    _, message = _explain_pending(pending, events, total, pods_missing)
    if len(pending) > 1:
        return f"ranks {', '.join(str(r.rank) for r in pending)} are waiting; {message}"
    return message
