"""The GPU fit gate's judgement over the JSON kubectl returns: GPUs per node, taints, and the fit verdict.

Everything here is pure: callers fetch the nodes and the pods bound to them (gates/capacity.py) and, with Kueue,
the LocalQueue and its ClusterQueue (gates/quota.py), and hand the parsed JSON in. Nothing here starts a process.

The reference kit gates capacity on the *sum* of allocatable `nvidia.com/gpu` (`total_allocatable`). That
sum says yes to requests no node can host: two 8-GPU nodes "have" 16 GPUs, yet a single pod asking for 12
never schedules, and a 2 x 12 multi-node job never starts. `fit` checks what the scheduler checks instead:
every rank is one pod that must land whole on one node, and multi-node ranks go to distinct nodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from kubectl_tao.core import contract, gcpause
from kubectl_tao.core.ages import age
from kubectl_tao.core.errors import TaoError
from kubectl_tao.core.quantities import gpu_quantity
from kubectl_tao.core.topology import domains, domains_text, unknown_label
from kubectl_tao.core.valueclass import Factory, Value, plain, record
from kubectl_tao.gates import gpuhealth
from kubectl_tao.gates.quota import QueueQuota, inactive_queue_message, room_text

GPU_RESOURCE = contract.GPU_RESOURCE
GPU_PRODUCT_LABEL = contract.GPU_PRODUCT_LABEL

FITS = "fits"
QUEUE = "queue"
NEVER = "never"

# Taints the node lifecycle controller and the kubelet put on and take off by themselves (NotReady,
# unreachable, pressure, cordon). They keep a pod off a node *now*, but say nothing about *ever*.
_TRANSIENT_TAINT_PREFIX = "node.kubernetes.io/"
_CLOUD_UNINITIALIZED_TAINT = "node.cloudprovider.kubernetes.io/uninitialized"


# --------------------------------------------------------------------------------------------------------
# Pod GPU requests

def _container_gpus(container: Mapping[str, Any]) -> int:
    resources = container.get("resources") or {}
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    if GPU_RESOURCE in requests:
        return gpu_quantity(requests[GPU_RESOURCE])
    return gpu_quantity(limits.get(GPU_RESOURCE))


def pod_gpu_request(pod: Mapping[str, Any]) -> int:
    """The pod's effective nvidia.com/gpu request, computed the way the scheduler does.

    Regular containers run together, so they add up; classic init containers run one at a time before
    them, so the pod needs the largest of them; sidecar init containers (restartPolicy: Always) keep
    running, so they add to everything started after them. A container without a request uses its limit
    (for extended resources the API server copies the limit into the request, but hand-made JSON may not).
    """
    spec = pod.get("spec") or {}
    sidecars = 0
    init_peak = 0
    for init in spec.get("initContainers") or []:
        gpus = _container_gpus(init)
        if init.get("restartPolicy") == "Always":
            sidecars += gpus
        else:
            init_peak = max(init_peak, sidecars + gpus)
    regular = sum(_container_gpus(c) for c in spec.get("containers") or []) + sidecars
    return max(regular, init_peak)


@record
class PodUse(Value):
    """The GPUs held by the non-finished pods bound to nodes, summed: all that node_gpus and the `gpus`
    inventory read of the pods. The gate's streamed read (gates/gatelists.py) sums into one as the pods arrive
    and keeps no pod; `pod_use` sums a pod list read whole."""

    per_node: dict[str, list[int]] = Factory(dict)  # node -> [GPUs held there, pods holding them]
    per_namespace: dict[tuple[str, str], int] = Factory(dict)  # (node, namespace) -> GPUs held

    def add(self, node: str, namespace: str, gpus: int) -> None:
        """One pod on NODE in NAMESPACE holding GPUS (> 0)."""
        held = self.per_node.get(node)
        if held is None:
            self.per_node[node] = [gpus, 1]
        else:
            held[0] += gpus
            held[1] += 1
        key = (node, namespace)
        self.per_namespace[key] = self.per_namespace.get(key, 0) + gpus

    def merge(self, other: PodUse) -> None:
        for node, (gpus, pods) in other.per_node.items():
            held = self.per_node.get(node)
            if held is None:
                self.per_node[node] = [gpus, pods]
            else:
                held[0] += gpus
                held[1] += pods
        for key, gpus in other.per_namespace.items():
            self.per_namespace[key] = self.per_namespace.get(key, 0) + gpus


def pod_use(pods_json: Any) -> PodUse:
    """What the pods hold (PODS_JSON: a pod list, a list of pods, or a PodUse already): Succeeded and Failed
    pods and pods bound to no node hold nothing (pods still terminating do, until they are gone)."""
    if isinstance(pods_json, PodUse):
        return pods_json
    use = PodUse()
    for pod in _items(pods_json):
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        gpus = pod_gpu_request(pod)
        if gpus:
            use.add(node_name, str((pod.get("metadata") or {}).get("namespace") or ""), gpus)
    return use


# --------------------------------------------------------------------------------------------------------
# Nodes


@record(frozen=True)
class NodeGpus(Value):
    name: str
    allocatable: int
    requested: int
    free: int
    labels: dict[str, str] = Factory(dict)
    taints: list[dict[str, Any]] = Factory(list)
    unschedulable: bool = False
    ready: bool = True
    gpu_pods: int = 0  # non-terminal pods on this node that hold at least one GPU
    health: list[gpuhealth.Unhealthy] = Factory(list)  # its GPU-unhealthy marks (gates/gpuhealth.py); [] healthy

    def health_text(self, now: datetime | None = None) -> str:
        """`XidCriticalError since 10m` (the first mark), '' for a healthy node."""
        if not self.health:
            return ""
        first = self.health[0]
        return gpuhealth.text(first, age(first.since, now) if first.since else "")

    def to_dict(self) -> dict[str, Any]:
        return plain(self)


def _items(data: Any) -> list[Mapping[str, Any]]:
    """Accept a kubectl List object ({"items": [...]}) or a plain list of objects."""
    if data is None:
        return []
    if isinstance(data, Mapping):
        items = data.get("items")
        return [item for item in items or [] if isinstance(item, Mapping)]
    return [item for item in data if isinstance(item, Mapping)]


def _node_ready(node: Mapping[str, Any]) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def node_gpus(nodes_json: Any, pods_json: Any) -> list[NodeGpus]:
    """GPU allocatable, requested and free per node, in the order kubectl listed the nodes.

    requested = the sum of effective GPU requests of the non-terminal pods bound to the node (pod_use; PODS_JSON
    may be their PodUse already). One pass over the pods and one over the nodes.
    """
    with gcpause.paused():  # tens of thousands of pods on a big cluster: see gcpause
        return _node_gpus(nodes_json, pods_json)


_NOTHING_HELD = (0, 0)


def _node_gpus(nodes_json: Any, pods_json: Any) -> list[NodeGpus]:
    held = pod_use(pods_json).per_node
    out: list[NodeGpus] = []
    for node in _items(nodes_json):
        meta = node.get("metadata") or {}
        spec = node.get("spec") or {}
        status = node.get("status") or {}
        name = str(meta.get("name", ""))
        allocatable = gpu_quantity((status.get("allocatable") or {}).get(GPU_RESOURCE))
        used, holders = held.get(name, _NOTHING_HELD)
        out.append(
            NodeGpus(
                name=name,
                allocatable=allocatable,
                requested=used,
                free=max(allocatable - used, 0),
                labels=dict(meta.get("labels") or {}),
                taints=[dict(t) for t in spec.get("taints") or []],
                unschedulable=bool(spec.get("unschedulable")),
                ready=_node_ready(node),
                gpu_pods=holders,
                health=_node_health(node, allocatable),
            )
        )
    return out


def _node_health(node: Mapping[str, Any], allocatable: int) -> list[gpuhealth.Unhealthy]:
    """The marks the gate's reduced node carries ("health"), or, for a whole node object, those of the default
    signals."""
    reduced = node.get("health")
    if reduced is not None:
        return [gpuhealth.Unhealthy(**mark) for mark in reduced]
    status, spec = node.get("status") or {}, node.get("spec") or {}
    capacity = (status.get("capacity") or {}).get(GPU_RESOURCE)
    return gpuhealth.judge(
        status.get("conditions") or [], spec.get("taints") or [], allocatable,
        None if capacity is None else gpu_quantity(capacity),
    )


def total_allocatable(nodes: Iterable[NodeGpus]) -> int:
    """The reference kit's capacity number: the sum of allocatable nvidia.com/gpu over all nodes."""
    return sum(node.allocatable for node in nodes)


# --------------------------------------------------------------------------------------------------------
# Taints and tolerations


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' own matching rule (core/v1 Toleration.ToleratesTaint).

    An empty effect matches every effect; an empty key (which the API only allows with Exists) matches
    every key; Exists ignores the value; Equal (the default operator) needs the values to be equal.
    """
    effect = toleration.get("effect") or ""
    if effect and effect != (taint.get("effect") or ""):
        return False
    key = toleration.get("key") or ""
    if key and key != (taint.get("key") or ""):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def _blocking(taint: Mapping[str, Any]) -> bool:
    return taint.get("effect") in ("NoSchedule", "NoExecute")


def _transient(taint: Mapping[str, Any]) -> bool:
    key = str(taint.get("key") or "")
    return key.startswith(_TRANSIENT_TAINT_PREFIX) or key == _CLOUD_UNINITIALIZED_TAINT


def untolerated_taints(
    node: NodeGpus, tolerations: Sequence[Mapping[str, Any]] | None, *, transient: bool
) -> list[dict[str, Any]]:
    """The node's NoSchedule/NoExecute taints no toleration matches (only transient or only lasting ones)."""
    tols = list(tolerations or [])
    return [
        taint
        for taint in node.taints
        if _blocking(taint) and _transient(taint) == transient and not any(tolerates(t, taint) for t in tols)
    ]


def _taint_text(taint: Mapping[str, Any]) -> str:
    value = taint.get("value")
    return f"{taint.get('key', '')}{'=' + str(value) if value else ''}:{taint.get('effect', '')}"


# --------------------------------------------------------------------------------------------------------
# Fit


@record(frozen=True)
class FitVerdict(Value):
    verdict: str  # "fits" | "queue" | "never"
    gpus_per_node: int
    node_count: int
    fitting_now: list[str]
    fitting_ever: list[str]
    chosen: list[str]  # the nodes the message names when the verdict is "fits" (best fit, see `fit`)
    largest: tuple[str, int] | None  # the largest eligible node and its allocatable GPUs
    total_allocatable: int
    in_use: int  # GPUs requested by running pods on the eligible nodes
    message: str
    quota: QueueQuota | None = None
    left_out: list[tuple[str, str]] = Factory(list)  # (node, why): GPU nodes left out as unhealthy
    topology: Any = None  # topology.Topology of --topology
    domains: list[Any] = Factory(list)  # its topology.Domain list, best first

    def to_dict(self) -> dict[str, Any]:
        return {
            "leftOut": [{"node": node, "signal": why} for node, why in self.left_out],
            "topology": None if self.topology is None else {
                **self.topology.to_dict(), "domains": [d.to_dict() for d in self.domains]
            },
            "verdict": self.verdict,
            "gpusPerNode": self.gpus_per_node,
            "nodeCount": self.node_count,
            "fittingNow": list(self.fitting_now),
            "fittingEver": list(self.fitting_ever),
            "chosen": list(self.chosen),
            "largest": None if self.largest is None else {"name": self.largest[0], "allocatable": self.largest[1]},
            "totalAllocatable": self.total_allocatable,
            "inUse": self.in_use,
            "message": self.message,
            "quota": None if self.quota is None else self.quota.to_dict(),
        }


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _request_text(gpus: int, count: int) -> str:
    if gpus == 0:
        return f"{_plural(count, 'node')} (no GPUs)"
    return f"{count} x {gpus} {GPU_RESOURCE}"


def _ineligible_reason(
    node: NodeGpus,
    node_selector: Mapping[str, str] | None,
    tolerations: Sequence[Mapping[str, Any]] | None,
    gpu_product: str | None,
) -> str:
    """Why the node can never take a rank regardless of load ('' when it can)."""
    if node.unschedulable:
        return "cordoned"
    if node.health:
        return "unhealthy"
    for key, value in (node_selector or {}).items():
        if node.labels.get(key) != value:
            return "selector"
    if gpu_product and node.labels.get(GPU_PRODUCT_LABEL) != gpu_product:
        return "product"
    if untolerated_taints(node, tolerations, transient=False):
        return "taint"
    return ""


def fit(
    nodes: Sequence[NodeGpus],
    gpus_per_node: int,
    node_count: int,
    *,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] | None = None,
    gpu_product: str | None = None,
    quota: QueueQuota | None = None,
    no_gpu_hint: str | None = None,
    now: datetime | None = None,
    topology: Any = None,
) -> FitVerdict:
    """Can `node_count` ranks of `gpus_per_node` GPUs each run here: now ("fits"), later ("queue"), never?

    A node is eligible when it is not cordoned, its labels match `node_selector` (and
    nvidia.com/gpu.product == `gpu_product` when given), and the tolerations cover every lasting
    NoSchedule/NoExecute taint. Taints the node lifecycle manages itself (node.kubernetes.io/not-ready,
    unreachable, pressure) and NotReady nodes only keep a node out of "now".

    Each rank needs one distinct node with at least `gpus_per_node` GPUs (the renderer spreads multi-node
    ranks one per node with pod anti-affinity; a single rank simply needs one node).

    - never: fewer than `node_count` eligible nodes whose allocatable is big enough, or a Kueue quota too
      small to ever admit gpus_per_node x node_count;
    - queue: enough nodes by allocatable, but fewer than `node_count` have that many GPUs free now, or the
      queue's unused quota is too small now;
    - fits: the chosen nodes are the ones with the *fewest* free GPUs that still fit (best fit), so a small
      job does not take a whole empty node that a later big job needs. It is the nodes this verdict names;
      the scheduler makes its own choice when the pods are created.

    `no_gpu_hint` is the fix named when no eligible node offers nvidia.com/gpu for a known reason
    (gpuinventory.no_gpu_hint: DRA GPUs that no DeviceClass maps to nvidia.com/gpu).

    Runs in O(nodes + pods) plus a sort of the fitting nodes.
    """
    if gpus_per_node < 0 or node_count < 1:
        raise TaoError(f"fit: need gpus per node >= 0 and nodes >= 1, got {gpus_per_node} and {node_count}")
    gpus = gpus_per_node
    total = total_allocatable(nodes)
    request = _request_text(gpus, node_count)

    eligible: list[NodeGpus] = []
    why_not: dict[str, list[str]] = {}
    left_out: list[tuple[str, str]] = []
    for node in nodes:
        reason = _ineligible_reason(node, node_selector, tolerations, gpu_product)
        if not reason:
            eligible.append(node)
        elif gpus == 0 or node.allocatable > 0 or node.health:  # a CPU-only node left out of a GPU job is not news
            if reason == "unhealthy":
                left_out.append((node.name, node.health_text(now)))
            why_not.setdefault(reason, []).append(
                f"{node.name} ({left_out[-1][1]})" if reason == "unhealthy" else node.name
            )

    if topology is not None and not any(topology.label in n.labels for n in nodes):
        raise unknown_label(topology.label)
    ever = [n for n in eligible if n.allocatable >= gpus]
    now = [
        n
        for n in ever
        if n.ready and n.free >= gpus and not untolerated_taints(n, tolerations, transient=True)
    ]
    largest = _largest(eligible)
    in_use = sum(n.requested for n in eligible)
    chosen = [n.name for n in sorted(now, key=lambda n: (n.free, n.name))[:node_count]]
    found = domains(topology.label, ever, now, eligible) if topology is not None else []
    spread = ""
    if topology is not None:
        # Best fit inside one domain: the domain with the fewest free GPUs that still holds the gang now.
        holding = [d for d in found if len(d.fitting_now) >= node_count]
        if holding:
            best = min(holding, key=lambda d: (d.free, d.value))
            by_name = {n.name: n for n in now}
            inside = sorted((by_name[name] for name in best.fitting_now), key=lambda n: (n.free, n.name))
            chosen = [n.name for n in inside[:node_count]]
        elif not topology.required:
            spread = f"; no single {topology.label} domain has room now, so the ranks spread over several"

    def verdict(kind: str, message: str) -> FitVerdict:
        if left_out and kind != NEVER:
            message += f"; {left_out_text(left_out)}"
        return FitVerdict(
            verdict=kind,
            gpus_per_node=gpus,
            node_count=node_count,
            fitting_now=[n.name for n in now],
            fitting_ever=[n.name for n in ever],
            chosen=chosen if kind == FITS else [],
            largest=largest,
            total_allocatable=total,
            in_use=in_use,
            message=message,
            quota=quota,
            left_out=left_out,
            topology=topology,
            domains=found,
        )

    wanted = gpus * node_count
    if quota is not None and quota.inactive:
        return verdict(NEVER, inactive_queue_message(quota))
    if quota is not None and quota.ceiling is not None and wanted > quota.ceiling:
        per_flavor = " in one flavor" if len(quota.flavors) > 1 else ""
        best = max(quota.flavors, key=lambda f: f.nominal, default=None)
        borrowing = best.borrowing_limit if best is not None else quota.borrowing_limit
        return verdict(
            NEVER,
            f"never: {request} needs {wanted} {GPU_RESOURCE} but ClusterQueue {quota.cluster_queue} can admit "
            f"at most {quota.ceiling}{per_flavor} (nominal {best.nominal if best else quota.nominal}"
            f"{'' if not borrowing else f' + borrowing {borrowing}'}); "
            "ask for a smaller job or more quota",
        )

    if gpus > 0 and no_gpu_hint and not any(n.allocatable for n in eligible):
        return verdict(NEVER, f"never: no eligible node offers {GPU_RESOURCE} to pods: {no_gpu_hint}")
    if gpus > 0 and total == 0:
        return verdict(
            NEVER,
            f"never: no node in this cluster has allocatable {GPU_RESOURCE}: the NVIDIA GPU Operator (or "
            "device plugin) is missing; install it and check "
            "`kubectl get nodes -o jsonpath='{.items[*].status.allocatable}'`",
        )

    if len(ever) < node_count:
        taint_example = ""
        if "taint" in why_not:
            first = next(n for n in nodes if n.name == why_not["taint"][0])
            taint_example = _taint_text(untolerated_taints(first, tolerations, transient=False)[0])
        products = sorted({n.labels.get(GPU_PRODUCT_LABEL, "") for n in nodes if n.allocatable} - {""})
        return verdict(
            NEVER,
            _never_message(request, gpus, node_count, eligible, ever, why_not, largest, taint_example, products),
        )

    if topology is not None and topology.required and node_count > 1:
        judged = _topology_verdict(request, gpus, node_count, topology.label, found, len(ever), len(now))
        if judged is not None:
            return verdict(*judged)

    quota_wait = ""
    if quota is not None and wanted > 0 and wanted > quota.free:
        ahead = f"; {_plural(quota.pending_workloads, 'workload')} pending" if quota.pending_workloads else ""
        borrow = f"; it may borrow unused quota of cohort {quota.cohort}" if quota.cohort else ""
        quota_wait = (
            f"ClusterQueue {quota.cluster_queue} has {room_text(quota)}{ahead}{borrow}; Kueue admits the job "
            "when quota frees up"
        )

    if len(now) < node_count:
        nodes_wait = _queue_message(request, gpus, ever, now)
        return verdict(QUEUE, f"{nodes_wait}; {quota_wait}" if quota_wait else nodes_wait)

    if quota_wait:
        return verdict(QUEUE, f"queue: {request} needs {wanted} {GPU_RESOURCE}; {quota_wait}")

    where = ", ".join(f"{n.name} ({n.free} free)" if gpus else n.name for n in _named(now, chosen))
    best = " (best fit: the fullest nodes that still fit)" if gpus and len(now) > node_count else ""
    inside = f" in one {topology.label} domain" if topology is not None and not spread else ""
    return verdict(FITS, f"fits: {request}{inside} on {where}{best}{spread}")


def _topology_verdict(
    request: str, gpus: int, node_count: int, label: str, found: Sequence[Any], ever: int, now: int
) -> tuple[str, str] | None:
    """never: no domain of LABEL has node_count nodes big enough; queue: one has, but none has them free now
    (though the cluster may); None: a domain holds the gang now."""
    if any(len(d.fitting_now) >= node_count for d in found):
        return None
    listed = domains_text(label, found, gpus) or f"no eligible node carries {label}"
    if not any(len(d.fitting_ever) >= node_count for d in found):
        largest = max((len(d.fitting_ever) for d in found), default=0)
        return NEVER, (
            f"never: {request} with --topology {label} needs {node_count} nodes with >= {gpus} {GPU_RESOURCE} "
            f"inside one {label} domain; the largest has {largest} ({listed}); ask for fewer nodes, a higher "
            f"level (--topology with a wider label), or {label}:preferred"
        )
    cluster = f"; the cluster has {now} such nodes free across domains" if now >= node_count else ""
    return QUEUE, (
        f"queue: {request} with --topology {label}: no {label} domain has {node_count} nodes with {gpus} free "
        f"now ({listed}){cluster}; the job waits until one domain has room"
    )


def left_out_text(left_out: Sequence[tuple[str, str]]) -> str:
    """`2 nodes left out as unhealthy: gpu-node-3 XidCriticalError since 10m, gpu-node-5 ...`."""
    shown = _short_list([f"{node} {why}" for node, why in left_out])
    return f"{_plural(len(left_out), 'node')} left out as unhealthy: {shown}"


def _largest(nodes: Sequence[NodeGpus]) -> tuple[str, int] | None:
    """The node with the most allocatable GPUs (of those, the alphabetically first) and that count."""
    if not nodes:
        return None
    most = max(n.allocatable for n in nodes)
    return min(n.name for n in nodes if n.allocatable == most), most


def _named(nodes: Sequence[NodeGpus], names: Sequence[str]) -> list[NodeGpus]:
    by_name = {n.name: n for n in nodes}
    return [by_name[name] for name in names]


def _never_message(
    request: str,
    gpus: int,
    node_count: int,
    eligible: Sequence[NodeGpus],
    ever: Sequence[NodeGpus],
    why_not: Mapping[str, list[str]],
    largest: tuple[str, int] | None,
    taint_example: str,
    products: Sequence[str],
) -> str:
    labels = {
        "cordoned": "cordoned",
        "unhealthy": "with an unhealthy GPU",
        "selector": "not matching the node selector",
        "product": f"with another {GPU_PRODUCT_LABEL}"
        + (f" (this cluster has {_short_list(list(products))})" if products else ""),
        "taint": "with a taint the job does not tolerate",
    }
    excluded = "; ".join(
        f"{_plural(len(names), 'node')} {labels[key]}: {_short_list(names)}"
        for key, names in why_not.items()
    )
    if not eligible:
        detail = excluded or "the cluster has no nodes"
        if taint_example:
            detail += f"; add a toleration for {taint_example} if the job may run there"
        return f"never: no node is eligible for {request}: {detail}"
    if gpus == 0:
        tail = f"; excluded: {excluded}" if excluded else ""
        return f"never: {request} needs {node_count} eligible nodes; only {len(eligible)} are{tail}"
    if not ever and largest is not None:
        head = (
            f"never: {request} needs a node with >= {gpus} {GPU_RESOURCE}; the largest eligible node is "
            f"{largest[0]}: {largest[1]}"
        )
    else:
        head = (
            f"never: {request} needs {node_count} distinct nodes with >= {gpus} {GPU_RESOURCE} each; only "
            f"{len(ever)} eligible ({_short_list([f'{n.name}: {n.allocatable}' for n in ever])})"
        )
    total_eligible = sum(n.allocatable for n in eligible)
    tail = f" ({total_eligible} allocatable in total on {_plural(len(eligible), 'eligible node')})"
    if excluded:
        tail += f"; excluded: {excluded}"
    return head + tail + "; ask for fewer GPUs per node or fewer nodes"


def _queue_message(request: str, gpus: int, ever: Sequence[NodeGpus], now: Sequence[NodeGpus]) -> str:
    not_ready = [n.name for n in ever if not n.ready]
    enough = f"{gpus} free" if gpus else "room"
    parts = [
        f"queue: {request}: {_plural(len(ever), 'node')} {'is' if len(ever) == 1 else 'are'} big enough but "
        f"only {len(now)} {'has' if len(now) == 1 else 'have'} {enough} now"
    ]
    if gpus:
        in_use = sum(n.requested for n in ever)
        pods = sum(n.gpu_pods for n in ever)
        parts.append(
            f"{in_use} of their {sum(n.allocatable for n in ever)} {GPU_RESOURCE} in use by {_plural(pods, 'pod')}"
        )
    if not_ready:
        parts.append(f"NotReady: {_short_list(not_ready)}")
    return "; ".join(parts) + "; the pods will wait Pending until GPUs free up"


def _short_list(items: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(items[:limit])
    return shown if len(items) <= limit else f"{shown}, +{len(items) - limit} more"
