"""How far a running job is (docs/progress.md): one kubectl call into its rank 0, read by the pure readers of
`progress/`, and what the record keeps of it.

The call is `kubectl exec` of a small fixed POSIX sh program (progress/execread.py) in rank 0's container (by the
Job, `job/NAME`, for a one-pod job: `status` starts that call beside its read of the Job and pods): it prints the
newest `status.json` at the top of the job's results directory or one or two directories below it (TAO writes
`<results>/<task>/status.json`), as its path, a NUL byte and the file's last 64 KiB. The results directory
reaches the program as a positional argument (the record's, when the container has no TAO_RESULTS_ROOT),
never as shell text. Where the results hold no status.json, or kubectl may not exec into the pod (Forbidden),
or the exec fails (an image without /bin/sh), the progress comes from the end of rank 0's log (`kubectl logs
--tail --timestamps`): the record remembers that, so later looks make that one call only. After a look that
found no status.json, or an exec that failed (rank 0 ending, an image without /bin/sh), exec is tried again
once rank 0 has run as long again (15 s to 5 min): a TAO task writes status.json soon after it starts, and a
program that ran long without one likely writes none. Once status.json was read, the log may only bring its
progress up to date (a later epoch, newer metrics), never replace it. Everything read is redacted and
sanitized before it is parsed. Jobs that are not running are never read: their record answers.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from kubectl_tao.core.errors import KubectlError, TaoError
from kubectl_tao.jobs.track import Observation, Tracked
from kubectl_tao.k8s.kubectl import Kubectl
from kubectl_tao.progress.execread import exec_call, exec_target
from kubectl_tao.progress.kept import clean, from_log
from kubectl_tao.progress.model import SOURCE_LOG, Progress, final, from_stored, rfc3339, stored
from kubectl_tao.store.jobrecord import K8sRecord, ProgressRead

LOG_TAIL_LINES = 100  # lines of rank 0's log read when status.json cannot be
RETRY_EXEC_SECONDS = 300  # a look that found no status.json: the log answers for at most this long ...
RETRY_EXEC_FLOOR = 15  # ... and at least this long (retry_after)
EXEC_TIMEOUT_SECONDS = 30.0


FROM_LOG = "log"
WHY_FORBIDDEN = "forbidden"
WHY_EXEC_FAILED = "exec failed"
WHY_NO_STATUS_JSON = "no status.json"


def kept(tracked: Tracked) -> tuple[Progress | None, str | None]:
    """The progress the record keeps (the last one read, or the final one of a job that ended) and where it
    was read."""
    return from_stored(tracked.k8s.progress)


def rank0(obs: Observation) -> dict[str, Any] | None:
    """Rank 0 (its pod, when it started) when it is Running (a Job launched elsewhere: its first Running pod)."""
    ranks = [r for r in (obs.live or {}).get("ranks") or [] if r.get("phase") == "Running" and r.get("pod")]
    ranks.sort(key=lambda r: (r.get("rank") is None, r.get("rank") or 0))
    if not ranks or ranks[0].get("rank") not in (0, None):
        return None
    return dict(ranks[0])


def _moment(text: object) -> datetime | None:
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def retry_after(started_at: object, now: datetime) -> float:
    """How long the log answers after a look found no status.json: as long as rank 0 has run so far, between
    RETRY_EXEC_FLOOR and RETRY_EXEC_SECONDS (a TAO task writes status.json soon after it starts; a program that
    has run for long without one likely writes none)."""
    started = _moment(started_at) if started_at else None
    ran = (now - started).total_seconds() if started is not None else RETRY_EXEC_SECONDS
    return min(float(RETRY_EXEC_SECONDS), max(float(RETRY_EXEC_FLOOR), ran))


def _container(tracked: Tracked) -> list[str]:
    return ["-c", "tao"] if tracked.launched_here else []  # a Job made elsewhere: its default container


def exec_args(tracked: Tracked, pod: str) -> list[str]:
    """The status.json read (progress/execread.py): by the Job for a one-pod job kubectl-tao launched (the call
    `status` prestarts), else into rank 0's POD."""
    nodes = tracked.k8s.nodes
    target = exec_target(str(tracked.job_name), pod, launched_here=tracked.launched_here,
                         nodes=nodes if nodes is not None else 1)
    return exec_call(str(tracked.namespace), target, tracked.job.results_dir,
                     launched_here=tracked.launched_here)


def log_args(tracked: Tracked, pod: str) -> list[str]:
    return ["logs", "-n", str(tracked.namespace), pod, *_container(tracked), f"--tail={LOG_TAIL_LINES}",
            "--timestamps"]


def parse_exec(stdout: str) -> tuple[Progress | None, str] | None:
    """The program's answer: (the progress of the status.json tail, its path), or None when it found none."""
    from kubectl_tao.progress.statusjson import read_status_json

    path, nul, tail = stdout.partition("\0")
    if not nul:
        return None
    return read_status_json(clean(tail)), clean(path)[:200]


def _hint(tracked: Tracked, now: datetime) -> ProgressRead | None:
    """The record's note that rank 0's log answers (exec refused or failed; no status.json, for a while)."""
    hint = tracked.k8s.progress_read
    if hint is None or hint.from_ != FROM_LOG:
        return None
    if hint.why != WHY_FORBIDDEN:  # no status.json yet, or an exec that failed: tried again later
        until = _moment(hint.retry_at)
        at = _moment(hint.at)
        if until is None and at is not None:
            until = at + timedelta(seconds=RETRY_EXEC_SECONDS)
        if until is None or now >= until:
            return None
    return hint


def read(kc: Kubectl, store: Any, obs: Observation, *, update: bool = True, now: datetime | None = None) -> None:
    """Set OBS's progress: for a RUNNING job whose rank 0 runs, read now (one kubectl call; two the first time
    the log must stand in for status.json) and kept in the record (STORE, when UPDATE) when it changed; else what
    the record keeps. A note says once that the log stands in when exec was refused (Forbidden)."""
    tracked = obs.tracked
    obs.progress, obs.progress_where = kept(tracked)
    rank = rank0(obs) if obs.state == "RUNNING" and tracked.namespace else None
    if rank is None:
        return
    pod = str(rank["pod"])
    now = now or datetime.now(UTC)
    hint = _hint(tracked, now)
    new_hint: ProgressRead | None = None
    progress: Progress | None = None
    where: str | None = None
    found = None
    try:
        if hint is None:
            result = kc.run(exec_args(tracked, pod), namespaced=False, check=False, timeout=EXEC_TIMEOUT_SECONDS)
            found = parse_exec(result.stdout) if result.returncode == 0 else None
            if found is not None:  # a status.json with no whole line yet: its next look tells
                progress, where = found[0], f"status.json {found[1]} in pod {pod}"
            else:
                new_hint = _fallback(kc, result, rank, now, obs)
        if found is None:
            result = kc.run(log_args(tracked, pod), namespaced=False, check=False, timeout=EXEC_TIMEOUT_SECONDS)
            if result.returncode == 0:
                progress, where = from_log(result.stdout), f"log of pod {pod}"
    except TaoError:
        return  # the cluster went away between the two reads: the record's progress stands
    if progress is not None and progress.known():
        if progress.source == SOURCE_LOG and obs.progress is not None and obs.progress.source != SOURCE_LOG:
            # status.json was read before (the log stands in for a while): the log may only bring it up to date
            merged = final(obs.progress, progress)
            before = obs.progress_where or "status.json"
            where = before if merged is obs.progress or str(where) in before else f"{before} and the {where}"
            progress = merged
        obs.progress, obs.progress_where = progress, where
    if update and store is not None:
        keep(store, tracked, obs.progress, obs.progress_where, hint=new_hint)


def _fallback(kc: Kubectl, result: Any, rank: dict[str, Any], now: datetime, obs: Observation) -> ProgressRead:
    """The record's note when the exec did not give a status.json: none there (tried again after
    retry_after), the exec refused (Forbidden: said once, never tried again), or the exec failed (rank 0 ending,
    an image without /bin/sh: tried again after retry_after)."""
    if result.returncode == 0:
        why = WHY_NO_STATUS_JSON
    else:
        error = kc.error_for(result.stderr)
        why = WHY_FORBIDDEN if isinstance(error, KubectlError) and error.reason == "Forbidden" else WHY_EXEC_FAILED
    if why == WHY_FORBIDDEN:
        obs.notes.append("progress read from rank 0's log: kubectl may not exec into pods (Forbidden)")
        return ProgressRead.partial(from_=FROM_LOG, why=why, at=rfc3339(now))
    until = now + timedelta(seconds=retry_after(rank.get("started_at"), now))
    return ProgressRead.partial(from_=FROM_LOG, why=why, at=rfc3339(now), retry_at=rfc3339(until))


def keep(store: Any, tracked: Tracked, progress: Progress | None, where: str | None, *,
         hint: ProgressRead | None = None) -> None:
    """Write PROGRESS (and the note HINT) into the record's kubectl-tao data, when they changed."""
    part = K8sRecord.partial()
    if progress is not None:
        value = stored(progress, where)
        if value != tracked.k8s.progress:
            part = part.changed(progress=value)
    if hint is not None:
        part = part.changed(progress_read=hint)
    if part.order:
        tracked.extra = store.merge_k8s(tracked.id, part)
