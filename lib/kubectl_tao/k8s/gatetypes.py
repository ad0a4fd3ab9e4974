"""msgspec types of the fields the fit gate reads from the nodes and pods lists (see gatelists.py).

Imported only by gatelists, and only when msgspec is installed. msgspec skips every field not named here
without building it. Every field is optional (and null is accepted), as the API server omits empty ones.
"""

from __future__ import annotations

from typing import Any

import msgspec

from kubectl_tao.core.contract import GPU_RESOURCE

UNSET = msgspec.UNSET


class NodeMeta(msgspec.Struct):
    name: str | None = None
    labels: dict[str, str] | None = None


class PodMeta(msgspec.Struct):
    """A pod's metadata: the namespace alone (its name and labels are never read)."""

    namespace: str | None = None


class Gpus(msgspec.Struct):
    """A resource map (requests, limits, allocatable) read for nvidia.com/gpu alone; UNSET when absent."""

    value: Any = msgspec.field(default=UNSET, name=GPU_RESOURCE)


class Resources(msgspec.Struct):
    requests: Gpus | None = None
    limits: Gpus | None = None


class Container(msgspec.Struct):
    resources: Resources | None = None
    restartPolicy: str | None = None


class PodSpec(msgspec.Struct):
    nodeName: str | None = None
    containers: list[Container] | None = None
    initContainers: list[Container] | None = None


class PodStatus(msgspec.Struct):
    phase: str | None = None


class Pod(msgspec.Struct):
    metadata: PodMeta | None = None
    spec: PodSpec | None = None
    status: PodStatus | None = None


class PodList(msgspec.Struct):
    items: list[Pod] | None = None


class Condition(msgspec.Struct):
    type: str | None = None
    status: str | None = None
    reason: str | None = None
    lastTransitionTime: str | None = None


class NodeSpec(msgspec.Struct):
    taints: list[dict[str, Any]] | None = None
    unschedulable: bool | None = None


class NodeStatus(msgspec.Struct):
    allocatable: Gpus | None = None
    capacity: Gpus | None = None
    conditions: list[Condition] | None = None


class Node(msgspec.Struct):
    metadata: NodeMeta | None = None
    spec: NodeSpec | None = None
    status: NodeStatus | None = None


class NodeList(msgspec.Struct):
    items: list[Node] | None = None


ONE = {"pods": msgspec.json.Decoder(Pod), "nodes": msgspec.json.Decoder(Node)}  # one item on its own
LIST_HEAD = msgspec.json.Decoder(dict[str, Any])  # a list's head with its items left out
DECODERS = {
    "pods": msgspec.json.Decoder(PodList),
    "nodes": msgspec.json.Decoder(NodeList),
}
ERRORS = (msgspec.ValidationError, msgspec.DecodeError)
