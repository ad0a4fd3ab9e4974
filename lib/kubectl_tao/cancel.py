"""`cancel`: delete the Job (UID precondition, foreground cascade), its Service and Secret; mark CANCELED.

Idempotent: cancelling a canceled job says so and succeeds. A finished job (COMPLETE or ERROR) is refused:
there is nothing to stop and its record must keep its outcome.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from .errors import GateError, KubectlError, TaoError
from .kubectl import Kubectl
from .tracking import JOB_LABEL, Tracked, check_pin

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


def remaining(kc: Kubectl, namespace: str, name: str) -> list[str]:
    result = kc.run(
        ["get", "jobs,pods,services,secrets", "-n", namespace, "-l", f"{JOB_LABEL}={name},{MANAGED}", "-o", "name"],
        namespaced=False,
    )
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
    check_pin(tracked, server, force=force)
    state = tracked.record_state
    if tracked.terminal:
        if state == "CANCELED":
            return CancelResult(tracked.id, "CANCELED", already=True)
        raise GateError(
            f"job {tracked.id} already finished ({state}); there is nothing to cancel and its record keeps that outcome"
        )
    ns, name = tracked.namespace, tracked.job_name
    result = CancelResult(tracked.id, "CANCELED")
    if ns and name:
        # --force skips the cluster pin only: the Job is deleted with the pinned UID as a precondition, or,
        # when none was pinned, only after its label and record annotation show it is this record's.
        uid = tracked.extra.get("job_uid") or owned_job_uid(kc, ns, name, tracked.id)
        if uid and _delete_job(kc, ns, name, uid):
            result.deleted.append(f"job.batch/{name}")
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
        if wait:
            result.leftovers = _wait_gone(kc, ns, name, timeout)
    if result.leftovers:
        message += f"; still present after {int(timeout)}s: {', '.join(result.leftovers)}"
    try:
        store.mark(tracked.id, "CANCELED", message=message, source="agent")
    except TaoError:
        raise
    return result


def _wait_gone(kc: Kubectl, namespace: str, name: str, timeout: float) -> list[str]:
    deadline = time.monotonic() + timeout
    left = remaining(kc, namespace, name)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = remaining(kc, namespace, name)
    return left
