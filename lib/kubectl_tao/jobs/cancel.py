"""`cancel`: delete the Job (UID precondition, foreground cascade), its Service and Secret; mark CANCELED.

Idempotent: cancelling a canceled job says so and succeeds. A finished job (COMPLETE or ERROR) is refused:
there is nothing to stop and its record must keep its outcome, so a Job that ended while nobody was looking
has its history captured and is refused the same way. A Job launched the reference's way (no kubectl-tao
labels) is found by its backend_ref name and deleted alone; records of other platforms are refused.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from kubectl_tao.errors import GateError, KubectlError, TaoError
from kubectl_tao.jobs.track import JOB_LABEL, Tracked, check_pin, fetch, observe, refuse_other_platform
from kubectl_tao.k8s.kubectl import Kubectl

MANAGED = "app.kubernetes.io/managed-by=kubectl-tao"


@dataclass
class CancelResult:
    record_id: str
    state: str
    already: bool = False
    deleted: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.record_id,
            "state": self.state,
            "alreadyCanceled": self.already,
            "deleted": self.deleted,
            "leftovers": self.leftovers,
        }


def delete_options(uid: str | None) -> str:
    body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"}
    if uid:
        body["preconditions"] = {"uid": uid}
    return json.dumps(body)


def _delete_job(kc: Kubectl, namespace: str, name: str, uid: str | None) -> bool:
    """True when a Job was deleted, False when there was none. Conflict = a different object: refuse."""
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}"
    try:
        kc.run(["delete", "--raw", path, "-f", "-"], stdin=delete_options(uid), namespaced=False)
    except KubectlError as exc:
        if exc.reason == "NotFound":
            return False
        if exc.reason == "Conflict" or "precondition" in exc.message.lower():
            raise GateError(
                f"Job {namespace}/{name} does not have the UID {uid} the record was pinned to: it is a different "
                "Job with the same name; it was not deleted"
            ) from None
        raise
    return True


RECORD_ID_ANNOTATION = "kubectl-tao.io/record-id"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"


def owned_job_uid(kc: Kubectl, namespace: str, name: str, record_id: str) -> str | None:
    """The UID of Job `name` when kubectl-tao made it for this record; None when there is no such Job.
    Used when the record pins no UID: a Job of that name without our label, or made for another record,
    belongs to someone else and is refused."""
    try:
        job = kc.json(["get", "job", name, "-n", namespace], namespaced=False)
    except KubectlError as exc:
        if exc.reason == "NotFound":
            return None
        raise
    meta = (job or {}).get("metadata") or {}
    managed = (meta.get("labels") or {}).get(MANAGED_BY_LABEL)
    owner = (meta.get("annotations") or {}).get(RECORD_ID_ANNOTATION)
    if managed != "kubectl-tao" or owner != record_id:
        raise GateError(
            f"Job {namespace}/{name} was not made by kubectl-tao for record {record_id} (label {MANAGED_BY_LABEL}="
            f"{managed or '(none)'}, annotation {RECORD_ID_ANNOTATION}={owner or '(none)'}); it was not deleted, "
            "with or without --force: if it is yours, delete it with kubectl"
        )
    return str(meta.get("uid") or "") or None


def remaining(kc: Kubectl, namespace: str, name: str, *, launched_here: bool = True) -> list[str]:
    if launched_here:
        query = ["get", "jobs,pods,services,secrets", "-n", namespace, "-l", f"{JOB_LABEL}={name},{MANAGED}"]
    else:  # a Job without kubectl-tao's labels: only the Job itself, by name
        query = ["get", "job", name, "-n", namespace, "--ignore-not-found"]
    result = kc.run([*query, "-o", "name"], namespaced=False)
    pods = kc.run(["get", "pods", "-n", namespace, "-l", f"job-name={name}", "-o", "name"], namespaced=False)
    names = {line.strip() for line in (result.stdout + pods.stdout).splitlines() if line.strip()}
    return sorted(names)


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
        uid = tracked.extra.get("job_uid")
        if not uid and tracked.launched_here:
            uid = owned_job_uid(kc, ns, name, tracked.id)
        if (uid or not tracked.launched_here) and _delete_job(kc, ns, name, uid):
            result.deleted.append(f"job.batch/{name}")
    if ns and name and tracked.launched_here:
        deps = kc.run(
            [
                "delete",
                "services,secrets",
                "-n",
                ns,
                "-l",
                f"{JOB_LABEL}={name},{MANAGED}",
                "--ignore-not-found",
                "-o",
                "name",
            ],
            namespaced=False,
        )
        result.deleted += [line.strip() for line in deps.stdout.splitlines() if "/" in line and " " not in line.strip()]
    if ns and name and wait:
        result.leftovers = _wait_gone(kc, ns, name, timeout, launched_here=tracked.launched_here)
    if result.leftovers:
        message += f"; still present after {int(timeout)}s: {', '.join(result.leftovers)}"
    try:
        store.mark(tracked.id, "CANCELED", message=message, source="agent")
    except TaoError:
        raise
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


def _wait_gone(kc: Kubectl, namespace: str, name: str, timeout: float, *, launched_here: bool = True) -> list[str]:
    deadline = time.monotonic() + timeout
    left = remaining(kc, namespace, name, launched_here=launched_here)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = remaining(kc, namespace, name, launched_here=launched_here)
    return left
