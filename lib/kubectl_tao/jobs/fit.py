"""`kubectl tao fit`: gather what gpufit.fit needs in as few kubectl calls as possible, then ask it.

Round trip 1 (three processes at once, four for --nodes > 1 without --queue): the nodes and running pods
(capacity.calls), `get localqueues.kueue.x-k8s.io -n NS -o json` and the discovery of scheduling.k8s.io/v1beta1
(gang.py). Round trip 2, only when a LocalQueue is used: `get clusterqueues.kueue.x-k8s.io CQ -o json`; only
when the device plugins' GPUs do not fit, the DRA devices and claims (gpuinventory.DRA_READ); and only where
PodGroups are served, the gang dry run.
A cluster without Kueue answers the LocalQueue call with "the server doesn't have a resource type"; that is not
an error, it means no quota to check (nor is it when the DRA read gets that answer: no resource.k8s.io/v1, no
DRA GPUs).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubectl_tao.core.errors import TaoError, UsageError
from kubectl_tao.core.valueclass import Factory, Value, record
from kubectl_tao.k8s.kubectl import Completed, Kubectl, Running

LOCALQUEUES = "localqueues.kueue.x-k8s.io"
CLUSTERQUEUES = "clusterqueues.kueue.x-k8s.io"
_NO_KUEUE_MARKERS = ("doesn't have a resource type", "the server could not find the requested resource")


@record
class FitReport(Value):
    verdict: Any  # gpufit.FitVerdict
    namespace: str
    local_queue: str | None = None
    notes: list[str] = Factory(list)
    gang: Any = None  # gang.Mechanism

    def to_dict(self) -> dict[str, Any]:
        data = self.verdict.to_dict()
        data["namespace"] = self.namespace
        data["localQueue"] = self.local_queue
        data["notes"] = list(self.notes)
        data["gang"] = self.gang.to_dict() if self.gang is not None else None
        return data


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


def queue_call(namespace: str) -> tuple[list[str], dict[str, Any]]:
    """The LocalQueues of the namespace: one run_many entry, beside the other reads of round trip 1."""
    return ["get", LOCALQUEUES, "-n", namespace, "-o", "json"], {"namespaced": False}


def read_queue(
    kc: Kubectl, queues: Completed | TaoError, queue: str | None, namespace: str
) -> tuple[Any, str | None, list[str]]:
    """The quota (quota.QueueQuota) of the LocalQueue that applies, its name, and notes; round trip 2 reads
    its ClusterQueue. --queue naming no LocalQueue, or a cluster without Kueue, is a UsageError (exit 2)."""
    from kubectl_tao.core.quota import queue_quota

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


def judge_reading_dra_if_needed(
    kc: Kubectl, judge: Callable[[Any], Any], *, first: Any = None, started: Running | None = None
) -> tuple[Any, str]:
    """`judge(dra)` -> gpufit.FitVerdict, judged first without DRA devices and again with them only when that
    does not fit. DRA devices only ever add GPUs to nodes the device plugins leave at zero
    (gpuinventory.gate_nodes), so a job that fits without them fits with them, and their read (the costliest
    of the gate on a big cluster) is made only when it could change the verdict. Returns the verdict and, when
    it still does not fit, why DRA GPUs were not counted ('' when they were or there are none). `first`: the
    verdict without DRA devices when the caller has it already; `started`: DRA_READ already on its way (the
    caller's to stop when it is not read here)."""
    from kubectl_tao.core import gpufit, gpuinventory

    verdict = judge(None) if first is None else first
    if verdict.verdict == gpufit.FITS:
        return verdict, ""
    answer: Completed | TaoError
    if started is not None:
        try:
            answer = started.wait()
        except TaoError as exc:
            answer = exc
    else:
        answer = kc.run_many({"dra": (gpuinventory.DRA_READ, {"namespaced": False})})["dra"]
    dra, note = gpuinventory.read_dra(answer)
    verdict = judge(dra)
    return verdict, note if verdict.verdict != gpufit.FITS else ""


def judge_seen(
    seen: Any,
    dra: Any,
    gpus: int,
    nodes: int,
    *,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] | None = None,
    gpu_product: str | None = None,
    quota: Any = None,
) -> Any:
    """The fit verdict (gpufit.FitVerdict) of GPUS x NODES over what the gate read (capacity.Capacity: nodes and
    the pods on them), DRA devices (gpuinventory.read_dra, or None) and a queue's quota (or None)."""
    from kubectl_tao.core import gpufit, gpuinventory

    return gpufit.fit(
        gpuinventory.fit_nodes(seen.nodes, seen.pods, dra),
        gpus,
        nodes,
        node_selector=node_selector or None,
        tolerations=tolerations or None,
        gpu_product=gpu_product,
        quota=quota,
        no_gpu_hint=gpuinventory.no_gpu_hint(dra),
    )


def check(
    kc: Kubectl,
    namespace: str,
    gpus: int,
    nodes: int,
    *,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] | None = None,
    gpu_product: str | None = None,
    queue: str | None = None,
) -> FitReport:
    from kubectl_tao.k8s import capacity, gang

    calls: dict[str, tuple[list[str], dict[str, Any]]] = {**capacity.calls(paged=True), "queues": queue_call(namespace)}
    if nodes > 1 and not queue:
        calls["gang"] = gang.DISCOVERY_CALL
    results = kc.run_many(calls)
    seen = capacity.read(results, kc)
    queues = results["queues"]
    assert isinstance(queues, (Completed, TaoError))
    quota, local_queue, notes = read_queue(kc, queues, queue, namespace)

    def judge(dra: Any) -> Any:
        return judge_seen(seen, dra, gpus, nodes, node_selector=node_selector, tolerations=tolerations,
                          gpu_product=gpu_product, quota=quota)

    verdict, dra_note = judge_reading_dra_if_needed(kc, judge)
    if dra_note:
        notes.append(dra_note)
    support = gang.detect(kc, namespace, results["gang"], nodes) if "gang" in results else None
    return FitReport(verdict, namespace, local_queue, notes, gang.choose(nodes, queue, support))
