"""Kueue's queues as the gates read them: the namespace's LocalQueues, the one whose quota applies, and the
quota of the ClusterQueue behind it (gates/quota.py).

The LocalQueues are one read beside the gates' others (`queue_call`); the ClusterQueue follows once the
LocalQueue is known (`read_queue`). A cluster without Kueue answers the LocalQueue read with "the server
doesn't have a resource type": that is not an error, it means no quota to check.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kubectl_tao.core.errors import TaoError, UsageError
from kubectl_tao.k8s.kubectl import Completed, Kubectl

LOCALQUEUES = "localqueues.kueue.x-k8s.io"
CLUSTERQUEUES = "clusterqueues.kueue.x-k8s.io"
_NO_KUEUE_MARKERS = ("doesn't have a resource type", "the server could not find the requested resource")


def no_kueue(error: TaoError) -> bool:
    """True when kubectl says the Kueue resource types do not exist on this server."""
    return any(marker in error.message.lower() for marker in _NO_KUEUE_MARKERS)


def pick_local_queue(queues_json: Any, wanted: str | None, namespace: str) -> tuple[Mapping[str, Any] | None, str]:
    """The LocalQueue whose quota applies, and a note saying why (or '' when there is nothing to say).

    --queue NAME picks that one; without it a queue named "default" (Kueue's default LocalQueue) is used,
    else the only one in the namespace; several and none named "default" means no quota check."""
    items = [q for q in (queues_json or {}).get("items") or [] if isinstance(q, Mapping)]
    by_name = {str((q.get("metadata") or {}).get("name")): q for q in items}
    if wanted:
        if wanted not in by_name:
            listed = ", ".join(sorted(by_name)) or "none"
            raise UsageError(
                f"--queue {wanted}: no LocalQueue {wanted!r} in namespace {namespace} (found: {listed}); "
                f"`kubectl get {LOCALQUEUES} -n {namespace}` lists them"
            )
        return by_name[wanted], ""
    if not items:
        return None, ""
    if "default" in by_name:
        return by_name["default"], f"using LocalQueue default of namespace {namespace}"
    if len(items) == 1:
        name = next(iter(by_name))
        return items[0], f"using LocalQueue {name}, the only one in namespace {namespace}"
    return None, (
        f"namespace {namespace} has {len(items)} LocalQueues ({', '.join(sorted(by_name))}); pass --queue NAME "
        "to check its quota"
    )


def _json(result: Completed, what: str) -> Any:
    try:
        return json.loads(result.stdout) if result.stdout.strip() else None
    except json.JSONDecodeError:
        raise TaoError(f"kubectl get {what} returned output that is not JSON") from None


RESOURCEFLAVORS = "resourceflavors.kueue.x-k8s.io"
TOPOLOGIES = "topologies.kueue.x-k8s.io"


def check_topology(kc: Kubectl, quota: Any, topology: Any) -> list[str]:
    """--topology with --queue: one of the ClusterQueue's nvidia.com/gpu ResourceFlavors must name a Topology
    whose levels include the label (one `get` of the flavors and Topologies; UsageError, exit 2, otherwise).
    Notes when they cannot be read (cluster-scoped: a namespace user may not)."""
    from kubectl_tao.core.topology import flavor_problem

    if quota is None or topology is None:
        return []
    try:
        listed = kc.json(["get", f"{RESOURCEFLAVORS},{TOPOLOGIES}"], namespaced=False)
    except TaoError as exc:
        return [f"--topology {topology.label}: the queue's ResourceFlavors and Topologies not checked: {exc.message}"]
    problem = flavor_problem(listed, [f.name for f in quota.flavors if f.name], quota.cluster_queue, topology)
    if problem:
        raise UsageError(problem)
    return []


def queue_call(namespace: str) -> tuple[list[str], dict[str, Any]]:
    """The LocalQueues of the namespace: one run_many entry, beside the other reads of round trip 1."""
    return ["get", LOCALQUEUES, "-n", namespace, "-o", "json"], {"namespaced": False}


def read_queue(
    kc: Kubectl, queues: Completed | TaoError, queue: str | None, namespace: str
) -> tuple[Any, str | None, list[str]]:
    """The quota (quota.QueueQuota) of the LocalQueue that applies, its name, and notes; round trip 2 reads
    its ClusterQueue. --queue naming no LocalQueue, or a cluster without Kueue, is a UsageError (exit 2)."""
    from kubectl_tao.gates.quota import queue_quota

    notes: list[str] = []
    if isinstance(queues, TaoError):
        if no_kueue(queues):
            if queue:
                raise UsageError(f"--queue {queue}: this cluster has no Kueue ({LOCALQUEUES} is not a resource); "
                                 "drop --queue")
        else:
            notes.append(f"Kueue quota not checked: cannot list {LOCALQUEUES} in {namespace}: {queues.message}")
        return None, None, notes
    chosen, note = pick_local_queue(_json(queues, LOCALQUEUES), queue, namespace)
    if note:
        notes.append(note)
    if chosen is None:
        return None, None, notes
    local_queue = str((chosen.get("metadata") or {}).get("name"))
    cq_name = str((chosen.get("spec") or {}).get("clusterQueue") or "")
    if not cq_name:
        notes.append(f"LocalQueue {local_queue} names no ClusterQueue; Kueue quota not checked")
        return None, local_queue, notes
    try:
        cq = kc.json(["get", CLUSTERQUEUES, cq_name], namespaced=False)
    except TaoError as exc:
        if queue and "not found" in exc.message.lower():
            raise UsageError(
                f"--queue {local_queue}: LocalQueue {local_queue} points at ClusterQueue {cq_name}, which does "
                f"not exist; Kueue admits nothing from it (`kubectl get {CLUSTERQUEUES}` lists them)"
            ) from None
        notes.append(f"Kueue quota not checked: cannot read ClusterQueue {cq_name}: {exc.message}")
        return None, local_queue, notes
    return queue_quota(chosen, cq), local_queue, notes
