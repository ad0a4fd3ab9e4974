"""`kubectl tao gpus`: read what gpuinventory needs in one round trip (the same reads as the fit gate).

Three processes at once, whatever the node count: the nodes and the running pods (capacity.calls, each
reduced as it arrives, as for fit) and gpuinventory.DRA_READ
(ResourceSlices, ResourceClaims and DeviceClasses of resource.k8s.io/v1). With `--queue NAME` a fourth, the
namespace's LocalQueues, and then its ClusterQueue (round trip 2): the reads and the errors of `fit --queue`
(gates/fit.read_queue), so both say the same about a queue.
"""

from __future__ import annotations

from typing import Any

from kubectl_tao.core.errors import TaoError, UsageError
from kubectl_tao.core.valueclass import Value, record
from kubectl_tao.k8s.kubectl import Completed, Kubectl


@record(frozen=True)
class QueueView(Value):
    """What is left of the ClusterQueue quota behind a LocalQueue (quota: quota.QueueQuota; None when the
    ClusterQueue could not be read, which a note says)."""

    local_queue: str
    namespace: str
    quota: Any = None

    def to_dict(self) -> dict[str, Any]:
        quota = self.quota
        data: dict[str, Any] = {"localQueue": self.local_queue, "namespace": self.namespace, "clusterQueue": None}
        if quota is None:
            return data
        data.update(
            clusterQueue=quota.cluster_queue,
            cohort=quota.cohort,
            pendingWorkloads=quota.pending_workloads,
            admittedWorkloads=quota.admitted_workloads,
            remaining=quota.free,
            flavors=[
                {
                    "name": f.name or None,
                    "nominalQuota": f.nominal,
                    "reserved": f.used,
                    "used": f.admitted,
                    "borrowed": f.borrowed,
                    "remaining": f.remaining,
                    "borrowingLimit": borrowing_limit(quota, f),
                }
                for f in quota.flavors
            ],
        )
        return data


def borrowing_limit(quota: Any, flavor: Any) -> int | str | None:
    """A flavor's borrowing limit as Kueue applies it: None outside a cohort (no borrowing at all),
    "unlimited" in a cohort without a stated limit, else the limit."""
    if not quota.cohort:
        return None
    return "unlimited" if flavor.borrowing_limit is None else int(flavor.borrowing_limit)


@record(frozen=True)
class GpusView(Value):
    inventory: Any  # gpuinventory.Inventory
    queue: QueueView | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**self.inventory.to_dict(), "queue": self.queue.to_dict() if self.queue else None}


def gather(
    kc: Kubectl, *, device_class: str | None = None, queue: str | None = None, namespace: str = "",
    by: str | None = None,
) -> GpusView:
    """The cluster's GPUs per node and per namespace, and with `queue` the remaining quota of that LocalQueue
    of `namespace`. A LocalQueue that does not exist, a cluster without Kueue and a queue Kueue marks
    inactive are UsageErrors (exit 2), raised before anything is printed."""
    from kubectl_tao.gates import capacity, gpuinventory, queues

    if by is not None:
        from kubectl_tao.core.topology import check_label_key

        check_label_key(by, "--by")

    calls: dict[str, tuple[list[str], dict[str, Any]]] = {
        **capacity.calls(),
        "dra": (gpuinventory.DRA_READ, {"namespaced": False}),
    }
    if queue:
        calls["queues"] = queues.queue_call(namespace)
    results = kc.run_many(calls)
    notes: list[str] = []
    view = None
    if queue:
        listed = results["queues"]
        assert isinstance(listed, (Completed, TaoError))
        quota, local_queue, notes = queues.read_queue(kc, listed, queue, namespace)
        if quota is not None and quota.inactive:
            raise UsageError(
                f"--queue {queue}: ClusterQueue {quota.cluster_queue} admits no workload ({quota.inactive}); "
                f"fix it (`kubectl describe {queues.CLUSTERQUEUES} {quota.cluster_queue}`) or pass another "
                f"LocalQueue (`kubectl get {queues.LOCALQUEUES} -n {namespace}`)"
            )
        if quota is not None and not any(f.name for f in quota.flavors):
            notes.append(f"ClusterQueue {quota.cluster_queue} has no nvidia.com/gpu quota: Kueue admits no GPU "
                         f"job from LocalQueue {queue}")
        view = QueueView(local_queue or queue, namespace, quota)
    dra, note = gpuinventory.read_dra(results["dra"], device_class=device_class)
    seen = capacity.read(results)
    if note:
        notes.append(note)
    hint = gpuinventory.no_gpu_hint(dra)
    if hint:
        notes.append(hint)
    if dra and dra.off_node:
        notes.append(f"{dra.off_node} DRA GPUs are not tied to one node (network-attached) and are not listed")
    if by:
        from kubectl_tao.core.topology import unknown_label

        if not any(by in ((n.get("metadata") or {}).get("labels") or {}) for n in (seen.nodes or {}).get("items", [])):
            raise unknown_label(by, "--by")
    return GpusView(gpuinventory.inventory(seen.nodes, seen.pods, dra, notes, by), view)
