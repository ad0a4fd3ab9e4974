"""A Kueue ClusterQueue's nvidia.com/gpu quota behind a LocalQueue (pure over kubectl JSON): what a job can
ever get from it, what it can take now, and whether the queue admits anything at all."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubectl_tao.core import contract
from kubectl_tao.core.quantities import gpu_quantity
from kubectl_tao.core.valueclass import Value, plain, record

GPU_RESOURCE = contract.GPU_RESOURCE


@record(frozen=True)
class FlavorGpus(Value):
    """One ResourceFlavor's nvidia.com/gpu in a ClusterQueue: quota, borrowing limit, reserved now (and of
    that, what admitted workloads use and what is borrowed from the cohort)."""

    name: str
    nominal: int
    borrowing_limit: int | None = 0  # None: no limit stated (unlimited borrowing when in a cohort)
    used: int = 0  # status.flavorsReservation: what Kueue counts against the quota
    admitted: int = 0  # status.flavorsUsage: held by admitted workloads
    borrowed: int = 0  # of `used`, borrowed from the cohort

    @property
    def remaining(self) -> int:
        """Unused nominal quota: what a job can still take from this flavor without borrowing."""
        return max(self.nominal - self.used, 0)


@record(frozen=True)
class QueueQuota(Value):
    """A ClusterQueue's nvidia.com/gpu as Kueue sees it: per-flavor quota from its spec, reserved GPUs from
    its status (flavorsReservation), its Active condition and its workload counts.

    Kueue assigns one flavor to all pods of a pod set, and a kubectl-tao job is one pod set, so a job must
    fit inside one flavor: the ceiling and the room now are the best single flavor's, never a sum."""

    cluster_queue: str
    nominal: int  # summed over the flavors (for display)
    borrowing_limit: int | None = 0
    used: int = 0
    cohort: str | None = None
    flavors: tuple[FlavorGpus, ...] = ()
    pending_workloads: int = 0
    admitted_workloads: int = 0
    inactive: str | None = None  # Kueue's reason and message when the ClusterQueue cannot admit anything

    def _flavors(self) -> tuple[FlavorGpus, ...]:
        return self.flavors or (FlavorGpus("", self.nominal, self.borrowing_limit, self.used),)

    @property
    def ceiling(self) -> int | None:
        """The most GPUs one job could ever get from this queue; None when borrowing is unbounded."""
        best = 0
        for flavor in self._flavors():
            if flavor.borrowing_limit is None:
                if self.cohort:
                    return None
                best = max(best, flavor.nominal)
            else:
                best = max(best, flavor.nominal + flavor.borrowing_limit)
        return best

    @property
    def free(self) -> int:
        """Unused nominal quota of the flavor with the most of it (what a job can take without borrowing)."""
        return max((f.remaining for f in self._flavors()), default=0)

    def to_dict(self) -> dict[str, Any]:
        data = plain(self)
        data["ceiling"] = self.ceiling
        data["free"] = self.free
        return data


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return condition
    return None


def inactive_text(obj: Mapping[str, Any]) -> str | None:
    """Kueue's reason and message when a ClusterQueue or LocalQueue has condition Active=False."""
    active = _condition(obj, "Active")
    if active is None or active.get("status") != "False":
        return None
    reason, message = str(active.get("reason") or ""), str(active.get("message") or "")
    return f"{reason}: {message}" if reason and message else reason or message or "inactive"


def _flavor_gpus(flavors: Any) -> tuple[dict[str, int], dict[str, int]]:
    """nvidia.com/gpu `total` and `borrowed` per flavor of a ClusterQueue status list (flavorsReservation or
    flavorsUsage)."""
    total: dict[str, int] = {}
    borrowed: dict[str, int] = {}
    for flavor in flavors or []:
        for resource in flavor.get("resources") or []:
            if resource.get("name") == GPU_RESOURCE:
                key = str(flavor.get("name") or "")
                total[key] = total.get(key, 0) + gpu_quantity(resource.get("total"))
                borrowed[key] = borrowed.get(key, 0) + gpu_quantity(resource.get("borrowed"))
    return total, borrowed


def queue_quota(localqueue_json: Any, clusterqueue_json: Any) -> QueueQuota | None:
    """The ClusterQueue's nvidia.com/gpu quota behind a LocalQueue; None when there is no Kueue queue.

    Quota per flavor from spec.resourceGroups[].flavors[].resources[]; what is reserved from
    status.flavorsReservation (quota held by admitted workloads and those whose admission checks run; older
    servers without it: status.flavorsUsage). A ClusterQueue that does not cover nvidia.com/gpu at all can
    never admit a GPU workload: it has no GPU flavor, so its ceiling is 0.
    """
    if not isinstance(localqueue_json, Mapping) or not isinstance(clusterqueue_json, Mapping):
        return None
    meta = clusterqueue_json.get("metadata") or {}
    spec = clusterqueue_json.get("spec") or {}
    status = clusterqueue_json.get("status") or {}
    name = str(meta.get("name") or (localqueue_json.get("spec") or {}).get("clusterQueue") or "")
    reserved = status.get("flavorsReservation")
    used, borrowed = _flavor_gpus(reserved if reserved is not None else status.get("flavorsUsage"))
    admitted, _ = _flavor_gpus(status.get("flavorsUsage"))
    flavors = []
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for resource in flavor.get("resources") or []:
                if resource.get("name") != GPU_RESOURCE:
                    continue
                fname = str(flavor.get("name") or "")
                limit = gpu_quantity(resource.get("borrowingLimit")) if "borrowingLimit" in resource else None
                flavors.append(FlavorGpus(
                    fname, gpu_quantity(resource.get("nominalQuota")), limit, used.get(fname, 0),
                    admitted.get(fname, 0), borrowed.get(fname, 0),
                ))
    cohort = spec.get("cohortName") or spec.get("cohort") or None
    inactive = inactive_text(clusterqueue_json)
    lq_inactive = inactive_text(localqueue_json)
    if lq_inactive and not inactive:
        inactive = f"LocalQueue {(localqueue_json.get('metadata') or {}).get('name')}: {lq_inactive}"
    counts = {key: int(status.get(key) or 0) for key in ("pendingWorkloads", "admittedWorkloads")}
    if not flavors:
        flavors = [FlavorGpus("", 0, 0, sum(used.values()), sum(admitted.values()), sum(borrowed.values()))]
    limits = [f.borrowing_limit for f in flavors]
    return QueueQuota(
        name,
        sum(f.nominal for f in flavors),
        None if None in limits else sum(limit or 0 for limit in limits),
        sum(f.used for f in flavors),
        cohort,
        tuple(flavors),
        counts["pendingWorkloads"],
        counts["admittedWorkloads"],
        inactive,
    )


def inactive_queue_message(quota: QueueQuota) -> str:
    return (
        f"never (until the queue is fixed): ClusterQueue {quota.cluster_queue} admits no workload: {quota.inactive}"
    )




def room_text(quota: QueueQuota) -> str:
    named = [f for f in quota.flavors if f.name]
    if len(named) == 1:
        f = named[0]
        return f"{f.used} of {f.nominal} {GPU_RESOURCE} reserved in flavor {f.name} ({quota.free} unused)"
    if named:
        flavors = ", ".join(f"{f.name} {f.used}/{f.nominal}" for f in named)
        return f"{GPU_RESOURCE} reserved per flavor: {flavors} ({quota.free} unused in the freest)"
    return f"{quota.used} of {quota.nominal} in use ({quota.free} unused)"

