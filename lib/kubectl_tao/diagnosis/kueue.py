"""Kueue's own account of a queued Job, read from its Workload (pure over kubectl JSON).

Kueue makes one Workload per Job it manages (label kueue.x-k8s.io/job-uid=<Job UID>, owned by the Job) and
writes there why the Job waits: condition QuotaReserved=False with reason Pending and the scheduler's
message ("couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor
default, 8 more needed"), or reason Inadmissible ("LocalQueue team-a doesn't exist"); Admitted=True with
status.admission.clusterQueue once admitted; Evicted=True when it took the quota back. `admission` turns
that into one state and one line; status and explain show Kueue's words, not a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubectl_tao.core import contract
from kubectl_tao.core.valueclass import Value, plain, record

WORKLOADS = "workloads.kueue.x-k8s.io"
QUEUE_LABEL = contract.QUEUE_LABEL
JOB_UID_LABEL = contract.KUEUE_JOB_UID_LABEL

NO_WORKLOAD = "no-workload"
PENDING = "pending"
INADMISSIBLE = "inadmissible"
RESERVED = "quota-reserved"
ADMITTED = "admitted"
EVICTED = "evicted"
DEACTIVATED = "deactivated"
WORKFLOW_HELD = "workflow-held"  # a workflow step's Workload, created inactive until the step before it succeeds
FINISHED = "finished"


def workload_read(namespace: str, job_uid: str) -> list[str]:
    """The kubectl arguments (without -o) that list the Workload Kueue made for the Job with this UID."""
    return ["get", WORKLOADS, "-n", namespace, "-l", f"{JOB_UID_LABEL}={job_uid}"]


def queue_of(job: Mapping[str, Any] | None) -> str | None:
    """The LocalQueue a Job was submitted to (its kueue.x-k8s.io/queue-name label), if any."""
    labels = ((job or {}).get("metadata") or {}).get("labels") or {}
    queue = labels.get(QUEUE_LABEL)
    return str(queue) if queue else None


@record(frozen=True)
class Admission(Value):
    state: str  # one of the constants above
    local_queue: str
    workload: str | None = None
    cluster_queue: str | None = None
    reason: str = ""  # Kueue's condition reason
    message: str = ""  # Kueue's condition message

    def to_dict(self) -> dict[str, Any]:
        return plain(self)

    @property
    def status_reason(self) -> str:
        """The `status` reason of a Job Kueue holds suspended."""
        return {INADMISSIBLE: "Inadmissible", DEACTIVATED: "Deactivated"}.get(self.state, "Suspended")

    def line(self) -> str:
        """One line for `status`: what Kueue says about the suspended Job, in Kueue's words."""
        where = f"Kueue LocalQueue {self.local_queue}" + (
            f", ClusterQueue {self.cluster_queue}" if self.cluster_queue else ""
        )
        said = f": {self.message}" if self.message else ""
        if self.state == NO_WORKLOAD:
            return f"waiting for admission ({where}): Kueue has made no Workload for the Job yet"
        if self.state == INADMISSIBLE:
            return f"Kueue cannot admit the job ({where}){said}"
        if self.state == WORKFLOW_HELD:
            return (f"held by its workflow: Workload {self.workload} ({where}) stays inactive until the step "
                    "before it succeeds and activates it")
        if self.state == DEACTIVATED:
            return f"Kueue deactivated the job's Workload {self.workload} ({where}){said}"
        if self.state == EVICTED:
            return f"waiting for admission ({where}): evicted by Kueue ({self.reason}){said}"
        if self.state == RESERVED:
            return f"waiting for admission ({where}): quota reserved, admission checks pending{said}"
        if self.state == ADMITTED:
            return f"admitted by Kueue ({where}); the Job is being started"
        return f"waiting for admission ({where}){said}"


def _conditions(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    found: dict[str, Mapping[str, Any]] = {}
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type"):
            found[str(condition["type"])] = condition
    return found


def _is_true(conditions: Mapping[str, Mapping[str, Any]], kind: str) -> bool:
    return (conditions.get(kind) or {}).get("status") == "True"


def _owned_by(workload: Mapping[str, Any], job_uid: str | None) -> bool:
    meta = workload.get("metadata") or {}
    if not job_uid:
        return True
    if (meta.get("labels") or {}).get(JOB_UID_LABEL) == job_uid:
        return True
    return any(ref.get("uid") == job_uid for ref in meta.get("ownerReferences") or [] if isinstance(ref, Mapping))


def pick_workload(workloads_json: Any, job_uid: str | None) -> Mapping[str, Any] | None:
    """The Job's Workload from a `get workloads` answer (the newest, should Kueue have made several)."""
    items = workloads_json.get("items") if isinstance(workloads_json, Mapping) else workloads_json
    mine = [w for w in items or [] if isinstance(w, Mapping) and _owned_by(w, job_uid)]
    if not mine:
        return None
    return max(mine, key=lambda w: str((w.get("metadata") or {}).get("creationTimestamp") or ""))


def _held_by_workflow(workload: Mapping[str, Any], conditions: Mapping[str, Mapping[str, Any]]) -> bool:
    """An inactive Workload of a workflow step that nobody but its spec.active holds back: Kueue evicts every
    inactive Workload with reason `Deactivated` (workload_controller.go), and one Kueue deactivated itself
    (requeuing limit, ...) with `Deactivated` plus the cause (`DeactivatedDueTo...`)."""
    labels = (workload.get("metadata") or {}).get("labels") or {}
    evicted = conditions.get("Evicted") or {}
    return contract.WORKFLOW_LABEL in labels and (not _is_true(conditions, "Evicted")
                                                  or evicted.get("reason") == "Deactivated")


def admission(job: Mapping[str, Any] | None, workloads_json: Any) -> Admission | None:
    """Kueue's state of a Job submitted to a LocalQueue; None for a Job without the queue label."""
    queue = queue_of(job)
    if queue is None:
        return None
    job_uid = ((job or {}).get("metadata") or {}).get("uid")
    workload = pick_workload(workloads_json, str(job_uid) if job_uid else None)
    if workload is None:
        return Admission(NO_WORKLOAD, queue)
    name = str((workload.get("metadata") or {}).get("name") or "")
    spec = workload.get("spec") or {}
    queue = str(spec.get("queueName") or queue)
    cluster_queue = ((workload.get("status") or {}).get("admission") or {}).get("clusterQueue")
    conditions = _conditions(workload)
    reserved = conditions.get("QuotaReserved") or {}

    def make(state: str, condition: Mapping[str, Any]) -> Admission:
        return Admission(
            state, queue, name, str(cluster_queue) if cluster_queue else None,
            str(condition.get("reason") or ""), str(condition.get("message") or ""),
        )

    if _is_true(conditions, "Finished"):
        return make(FINISHED, conditions["Finished"])
    if spec.get("active") is False and _held_by_workflow(workload, conditions):
        return make(WORKFLOW_HELD, {})
    if spec.get("active") is False:
        return make(DEACTIVATED, conditions.get("Evicted") or conditions.get("Deactivated") or {})
    if _is_true(conditions, "Admitted"):
        return make(ADMITTED, conditions["Admitted"])
    if _is_true(conditions, "QuotaReserved"):
        return make(RESERVED, conditions.get("Admitted") or reserved)
    if _is_true(conditions, "Evicted"):
        return make(EVICTED, conditions["Evicted"])
    if reserved.get("reason") == "Inadmissible":
        return make(INADMISSIBLE, reserved)
    return make(PENDING, reserved)

