"""`cancel`: delete the Job (UID precondition, foreground cascade), its Service and Secret; mark CANCELED.

Idempotent: cancelling a canceled job says so and succeeds. A finished job (COMPLETE or ERROR) is refused:
there is nothing to stop and its record must keep its outcome, so a Job that ended while nobody was looking
has its history captured and is refused the same way. A Job launched the reference's way (no kubectl-tao
labels) is found by its backend_ref name and deleted alone; records of other platforms are refused.
"""

from __future__ import annotations

from typing import Any

from kubectl_tao.core.errors import GateError
from kubectl_tao.core.valueclass import Factory, Value, record
from kubectl_tao.jobs.track import Tracked, check_pin, fetch, observe, refuse_other_platform
from kubectl_tao.k8s import objects
from kubectl_tao.k8s.kubectl import Kubectl


@record
class CancelResult(Value):
    record_id: str
    state: str
    already: bool = False
    deleted: list[str] = Factory(list)
    leftovers: list[str] = Factory(list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.record_id,
            "state": self.state,
            "alreadyCanceled": self.already,
            "deleted": self.deleted,
            "leftovers": self.leftovers,
        }


def cancel(
    kc: Kubectl,
    store: Any,
    tracked: Tracked,
    *,
    server: str,
    force: bool = False,
    wait: bool = True,
    timeout: float = 120.0,
    message: str = "canceled by user",
) -> CancelResult:
    refuse_other_platform(tracked, "cancel")
    check_pin(tracked, server, force=force)
    if tracked.terminal:
        return _refuse_finished(tracked)
    ns, name = tracked.namespace, tracked.job_name
    result = CancelResult(tracked.id, "CANCELED")
    if ns and name:
        _settle_if_finished(kc, store, tracked, server=server, force=force)
        # --force skips the cluster pin only: the Job is deleted with the pinned UID as a precondition, or,
        # when none was pinned, only after its label and record annotation show it is this record's. A record
        # launched the reference's way names its Job by backend_ref alone: that name is the claim.
        uid = tracked.k8s.job_uid
        if not uid and tracked.launched_here:
            uid = objects.owned_job_uid(kc, ns, name, tracked.id)
        how = "name" if uid or not tracked.launched_here else "keep"
        done = objects.teardown(kc, ns, name, job=how, uid=uid, labelled=tracked.launched_here, strict=True)
        result.deleted += done.deleted
    if ns and name and wait:
        result.leftovers = objects.wait_gone(kc, ns, name, timeout, launched_here=tracked.launched_here)
    if result.leftovers:
        message += f"; still present after {int(timeout)}s: {', '.join(result.leftovers)}"
    store.mark(tracked.id, "CANCELED", message=message, source="agent")
    return result


def _refuse_finished(tracked: Tracked) -> CancelResult:
    state = tracked.record_state
    if state == "CANCELED":
        return CancelResult(tracked.id, "CANCELED", already=True)
    raise GateError(
        f"job {tracked.id} already finished ({state}); there is nothing to cancel and its record keeps that outcome"
    )


def _settle_if_finished(kc: Kubectl, store: Any, tracked: Tracked, *, server: str, force: bool) -> None:
    """A Job that ended before anyone polled it is finished, not canceled: capture its history, record its
    outcome and refuse, as for a job already known to be finished."""
    job, pods = fetch(kc, tracked)
    if job is None:
        return
    peek = observe(kc, store, tracked, server=server, force=force, update=False, job=job, pods=pods, fetched=True)
    if peek.state in ("COMPLETE", "ERROR"):
        observe(kc, store, tracked, server=server, force=force, job=job, pods=pods, fetched=True)
        _refuse_finished(tracked)
