"""`--topology LABEL[:preferred]`: every rank inside one domain of a node label (a rack, a block, a zone, an
NVLink clique), and how the fit gate judges it (pure).

A domain is the set of nodes that share a value of LABEL. With Kueue (`--queue`) the pod template carries
Kueue's topology annotation and Kueue's topology-aware scheduling admits the whole gang into one domain (the
queue's ResourceFlavor must name a Topology whose levels include LABEL); `required` waits until one domain
has room, `preferred` takes the closest placement the cluster allows. docs/placement.md has the mechanisms.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from kubectl_tao.core import contract
from kubectl_tao.core.errors import UsageError
from kubectl_tao.core.valueclass import Value, plain, record

PREFERRED, REQUIRED = "preferred", "required"
# A qualified label key: an optional DNS-subdomain prefix and a name of at most 63 characters.
_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_LABEL = re.compile(rf"({_PREFIX}/)?{_NAME}")  # fullmatch only: `$` would let a trailing newline through
NONE_DOMAIN = "<none>"  # nodes without the label, as `gpus --by` shows them


@record(frozen=True)
class Topology(Value):
    """The --topology request: the node label of the level, and whether one domain is required."""

    label: str
    required: bool = True

    @property
    def mode(self) -> str:
        return REQUIRED if self.required else PREFERRED

    def annotations(self) -> dict[str, str]:
        """Kueue's pod-template annotation for this request (kueue.x-k8s.io/podset-{required,preferred}-topology)."""
        key = contract.KUEUE_REQUIRED_TOPOLOGY if self.required else contract.KUEUE_PREFERRED_TOPOLOGY
        return {key: self.label}

    def text(self) -> str:
        return self.label if self.required else f"{self.label}:{PREFERRED}"

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "mode": self.mode}


def parse(text: str | None, flag: str = "--topology") -> Topology | None:
    """LABEL or LABEL:preferred (LABEL:required is the default spelled out); UsageError naming the flag."""
    if text is None:
        return None
    value = text.strip()
    label, mode = value, REQUIRED
    if value.endswith((f":{PREFERRED}", f":{REQUIRED}")):
        label, _, mode = value.rpartition(":")
    if not is_label_key(label):
        raise UsageError(
            f"{flag} {text!r}: not a node label key; use LABEL or LABEL:preferred, e.g. "
            "topology.kubernetes.io/zone or nvidia.com/gpu.clique"
        )
    return Topology(label, mode == REQUIRED)


def unplaced_warning(topology: Topology | None, *, queue: str | None, nodes: int) -> str:
    """The warning a preferred --topology without --queue gets ('' for none): with --queue Kueue places the
    gang; a required one without it is kept by a native gang (or refused once the server is known); one rank
    is always in one domain."""
    if topology is None or queue or topology.required or nodes < 2:
        return ""
    return (
        f"--topology {topology.text()} without --queue: nothing places the ranks close together (Kueue's "
        "topology-aware scheduling needs --queue); the scheduler spreads them as it likes"
    )


def is_label_key(text: str) -> bool:
    """TEXT is a whole node label key (`[prefix/]name`), nothing before or after it, not even a newline."""
    return len(text) <= 316 and _LABEL.fullmatch(text) is not None


def check_label_key(text: str, flag: str) -> str:
    """TEXT when it is a node label key; else UsageError naming FLAG (the value shown escaped)."""
    if not is_label_key(text):
        raise UsageError(
            f"{flag} {text!r}: not a node label key; name one such as topology.kubernetes.io/zone or "
            "nvidia.com/gpu.clique"
        )
    return text


def label_carried(labels: Sequence[dict[str, str]], label: str) -> bool:
    return any(label in node_labels for node_labels in labels)


def unknown_label(label: str, flag: str = "--topology") -> UsageError:
    return UsageError(
        f"{flag} {label}: no node carries the label {label}; name a label the nodes have (`kubectl get nodes "
        f"-L {label}` shows it empty), e.g. the level label of the cluster's racks or blocks"
    )


@record(frozen=True)
class Domain(Value):
    """One value of the level label: its nodes, and how many of them can take a rank ever and now."""

    value: str
    nodes: int
    fitting_ever: list[str]
    fitting_now: list[str]
    free: int  # free GPUs on its schedulable, healthy nodes

    def to_dict(self) -> dict[str, Any]:
        return plain(self)


def domains(
    label: str, ever: Sequence[Any], now: Sequence[Any], eligible: Sequence[Any]
) -> list[Domain]:
    """The domains of LABEL over gpufit's node lists (NodeGpus: eligible, big enough, fitting now), largest
    number of nodes fitting now first; nodes without the label belong to no domain."""
    by_value: dict[str, list[Any]] = {}
    for node in eligible:
        value = node.labels.get(label)
        if value is not None:
            by_value.setdefault(value, []).append(node)
    ever_names = {n.name for n in ever}
    now_names = {n.name for n in now}
    out = [
        Domain(
            value,
            len(members),
            [n.name for n in members if n.name in ever_names],
            [n.name for n in members if n.name in now_names],
            sum(n.free for n in members if n.ready and not n.unschedulable),
        )
        for value, members in by_value.items()
    ]
    return sorted(out, key=lambda d: (-len(d.fitting_now), -len(d.fitting_ever), d.value))


def domains_text(label: str, found: Sequence[Domain], gpus: int, limit: int = 4) -> str:
    """`rack=r1: 1 of 2 nodes with 8 free (9 GPUs free), rack=r2: ...`."""
    parts = [
        f"{label}={d.value}: {len(d.fitting_now)} of {d.nodes} node{'' if d.nodes == 1 else 's'} with {gpus} free "
        f"({d.free} GPUs free)"
        for d in found[:limit]
    ]
    more = f", +{len(found) - limit} more" if len(found) > limit else ""
    return ", ".join(parts) + more


def flavor_problem(
    objects: Any, flavor_names: Sequence[str], cluster_queue: str, topology: Topology
) -> str | None:
    """Why Kueue cannot place the gang by LABEL through these ResourceFlavors of the ClusterQueue (None: one of
    them names a Topology whose levels include LABEL). OBJECTS: the ResourceFlavors and Topologies listed."""
    items = [i for i in (objects or {}).get("items") or [] if isinstance(i, dict)]
    flavors = {str((i.get("metadata") or {}).get("name")): i for i in items if i.get("kind") == "ResourceFlavor"}
    topologies = {str((i.get("metadata") or {}).get("name")): i for i in items if i.get("kind") == "Topology"}
    named: list[str] = []
    for name in flavor_names:
        topology_name = ((flavors.get(name) or {}).get("spec") or {}).get("topologyName")
        if not topology_name:
            continue
        named.append(f"{name} -> {topology_name}")
        levels = [
            str(level.get("nodeLabel"))
            for level in ((topologies.get(topology_name) or {}).get("spec") or {}).get("levels") or []
            if isinstance(level, dict)
        ]
        if topology.label in levels:
            return None
        if topology_name not in topologies:
            return (
                f"--topology {topology.label}: ResourceFlavor {name} names Topology {topology_name}, which does "
                "not exist; ask the cluster admin to create it"
            )
        return (
            f"--topology {topology.label}: Topology {topology_name} (ResourceFlavor {name}) has the levels "
            f"{', '.join(levels) or '(none)'}, not {topology.label}; name one of them"
        )
    shown = ", ".join(flavor_names) or "(none)"
    return (
        f"--topology {topology.label}: no nvidia.com/gpu ResourceFlavor of ClusterQueue {cluster_queue} names a "
        f"Topology (spec.topologyName; flavors: {shown}), so Kueue cannot place the ranks by {topology.label}; "
        "ask the cluster admin for a topology-aware flavor, or drop --topology"
    )
