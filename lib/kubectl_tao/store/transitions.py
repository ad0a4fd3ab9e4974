"""The record's state machine: its states, which transitions a mark may make, and how a mark changes a
record (pure: a typed JobRecord in, the changed JobRecord out; the store writes its `to_stored()`).

States: PENDING RUNNING COMPLETE ERROR CANCELED UNKNOWN.  COMPLETE, ERROR and CANCELED are terminal
and final.  Allowed transitions (``ALLOWED_TRANSITIONS``):

    from \\ to       PENDING RUNNING COMPLETE ERROR CANCELED UNKNOWN
    PENDING         yes     yes     yes      yes   yes      yes
    RUNNING         yes     yes     yes      yes   yes      yes
    UNKNOWN         yes     yes     yes      yes   yes      yes
    COMPLETE/ERROR/CANCELED: only the same state again, which may fill a missing err_class or
    backend_ref and otherwise changes nothing (an idempotent cancel or a late poller is not an error).

RUNNING -> PENDING is allowed because Kubernetes can take a running Job back to having no scheduled
pod (a pod evicted from a drained node and waiting for a new one, or a retry when backoffLimit > 0).
UNKNOWN is not terminal: it means "the cluster could not tell", and the same Job can show up again.
Re-marking the current non-terminal state with the same message is a no-op, so pollers do not grow
the append-only ``transitions`` list.

OPEN is not a stored state: ``effective_state`` reports OPEN for a record that is still PENDING and
has no ``backend_ref`` (opened, never launched).  ``mark --state OPEN`` is refused.

``err_class`` goes only with ERROR: ERR_INFRA (the platform failed the job; retrying can help) or
ERR_PROGRAM (the job itself failed; retrying the same request cannot help).  See ``oom_error_class``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kubectl_tao.core import contract
from kubectl_tao.core.errors import TaoError, UsageError
from kubectl_tao.store.jobrecord import JobRecord, Transition
from kubectl_tao.store.recordfields import SCHEMA_VERSION

STATES = contract.STATES
TERMINAL_STATES = contract.TERMINAL_STATES
OPEN = "OPEN"
ALLOWED_TRANSITIONS: dict[str, frozenset[str]] = {
    "PENDING": frozenset(STATES),
    "RUNNING": frozenset(STATES),
    "UNKNOWN": frozenset(STATES),
    "COMPLETE": frozenset({"COMPLETE"}),
    "ERROR": frozenset({"ERROR"}),
    "CANCELED": frozenset({"CANCELED"}),
}
SOURCES = ("agent", "poller", "backend-hook")
ERR_CLASSES = ("ERR_INFRA", "ERR_PROGRAM")
OPENING_MESSAGE = "record opened before launch"
MAX_MESSAGE_CHARS = 4096


def oom_error_class() -> str:
    """The err_class of a container killed for memory (OOMKilled, exit 137): ERR_INFRA.

    The reference contradicts itself here.  We take its Kubernetes status table's answer: an OOM kill
    is the node enforcing a resource limit, and the same program with a bigger memory limit, or on a
    node with more memory, can succeed, so a retry with changed resources is worth offering.  An
    ERR_PROGRAM verdict would forbid every retry, including the one that fixes it.
    """
    return "ERR_INFRA"


def utc_now() -> str:
    """UTC ISO-8601 with milliseconds and a Z: ``2025-01-31T12:00:00.123Z``."""
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def parse_ts(value: object) -> datetime:
    """A record's timestamp; the earliest time for one that is not ISO-8601 (it sorts last, newest first)."""
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)


def last_state(record: Mapping[str, Any]) -> str:
    """The stored state: terminal_state if set, else the state of the last transition."""
    terminal = record.get("terminal_state")
    if terminal:
        return str(terminal)
    transitions = record.get("transitions") or []
    return str(transitions[-1].get("state", "PENDING")) if transitions else "PENDING"


def effective_state(record: Mapping[str, Any]) -> str:
    """The state to display: OPEN for a PENDING record never launched (no backend_ref), else
    ``last_state``."""
    state = last_state(record)
    if state == "PENDING" and not record.get("backend_ref"):
        return OPEN
    return state


def new_record(record_id: str, fields: Mapping[str, Any]) -> JobRecord:
    """A record of `recordfields.open_fields`, PENDING "record opened before launch" (retry_of and parent_job
    stored only when given)."""
    now = utc_now()
    results_dir = fields["results_dir"] or f"{fields['results_root']}/{record_id}"
    links = {name: fields[name] for name in ("retry_of", "parent_job") if fields[name] is not None}
    made: JobRecord = JobRecord.partial(
        schema_version=SCHEMA_VERSION,
        id=record_id,
        platform=fields["platform"],
        backend_ref=None,
        image=fields["image"],
        network_arch=fields["network_arch"],
        action=fields["action"],
        results_dir=results_dir,
        storage_tier=fields["storage_tier"],
        submitted_at=now,
        transitions=(Transition.partial(ts=now, state="PENDING", message=OPENING_MESSAGE, source="agent"),),
        terminal_state=None,
        redacted=True,
        upload_excludes=tuple(fields["upload_excludes"]),
        **links,
    )
    return made


def check_mark_args(state: str, source: str, err_class: str | None, message: str) -> None:
    if state == OPEN:
        raise UsageError("--state OPEN is set only by `open` (a record that was never launched); use PENDING")
    if state not in STATES:
        raise UsageError(f"--state must be one of {', '.join(STATES)} (got {state!r})")
    if source not in SOURCES:
        raise UsageError(f"--source must be one of {', '.join(SOURCES)} (got {source!r})")
    if err_class is not None:
        if err_class not in ERR_CLASSES:
            raise UsageError(f"--err-class must be ERR_INFRA or ERR_PROGRAM (got {err_class!r})")
        if state != "ERROR":
            raise UsageError(f"--err-class goes only with --state ERROR (got --state {state})")
    if not isinstance(message, str):
        raise UsageError("--message must be text")


def apply_mark(
    job: JobRecord,
    state: str,
    message: str,
    source: str,
    backend_ref: str | None,
    err_class: str | None,
) -> tuple[JobRecord, bool]:
    """The record with one mark applied, and whether anything changed."""
    current = job.state
    if current in TERMINAL_STATES:
        if state != current:
            raise TaoError(
                f"illegal transition {current} -> {state}: job record {job.id} is final; "
                f"open a new record with --retry-of {job.id} to run it again"
            )
        return _fill_terminal(job, backend_ref, err_class)
    if state not in ALLOWED_TRANSITIONS.get(current, frozenset()):
        raise TaoError(f"illegal transition {current} -> {state} for job record {job.id}")
    job, changed = _set_backend_ref(job, backend_ref)
    message = message[:MAX_MESSAGE_CHARS]
    last = job.last
    if state == current and last is not None and last.message == message and state not in TERMINAL_STATES:
        return job, changed
    step = Transition.partial(ts=utc_now(), state=state, message=message, source=source)
    job = job.changed(transitions=(*job.transitions, step))
    if state in TERMINAL_STATES:
        job = job.changed(terminal_state=state, terminal_write_by=source)
        if err_class is not None:
            job = job.changed(err_class=err_class)
    return job, True


def _fill_terminal(job: JobRecord, backend_ref: str | None, err_class: str | None) -> tuple[JobRecord, bool]:
    job, changed = _set_backend_ref(job, backend_ref)
    if err_class is not None:
        if job.err_class in (None, ""):
            return job.changed(err_class=err_class), True
        if job.err_class != err_class:
            raise TaoError(
                f"job record {job.id} is final with err_class {job.err_class}; it cannot become {err_class}"
            )
    return job, changed


def _set_backend_ref(job: JobRecord, backend_ref: str | None) -> tuple[JobRecord, bool]:
    if backend_ref is None or job.backend_ref == backend_ref:
        return job, False
    if job.backend_ref:
        raise TaoError(
            f"job record {job.id} already names {job.backend_ref}; a record follows one "
            f"launch: open a new record (with --retry-of {job.id}) for {backend_ref}"
        )
    return job.changed(backend_ref=backend_ref), True
