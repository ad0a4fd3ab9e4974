"""msgspec types of the fields the fit gate reads from the nodes and pods lists (see gatelists.py).

Imported only by gatelists, and only when msgspec is installed. msgspec skips every field not named here
without building it. Every field is optional (and null is accepted), as the API server omits empty ones.
No decoded answer can hold a reference cycle, so no struct is tracked by the garbage collector (gc=False).
"""

from __future__ import annotations

from typing import Any

import msgspec

from kubectl_tao.core.contract import GPU_RESOURCE

UNSET = msgspec.UNSET


class NodeMeta(msgspec.Struct, gc=False):
    name: str | None = None
    labels: dict[str, str] | None = None


class PodMeta(msgspec.Struct, gc=False):
    """A pod's metadata: the namespace alone (its name and labels are never read)."""

    namespace: str | None = None


class Gpus(msgspec.Struct, gc=False):
    """A resource map (requests, limits, allocatable) read for nvidia.com/gpu alone; UNSET when absent."""

    value: Any = msgspec.field(default=UNSET, name=GPU_RESOURCE)


class Resources(msgspec.Struct, gc=False):
    requests: Gpus | None = None
    limits: Gpus | None = None


class Container(msgspec.Struct, gc=False):
    resources: Resources | None = None
    restartPolicy: str | None = None


class PodSpec(msgspec.Struct, gc=False):
    nodeName: str | None = None
    containers: list[Container] | None = None
    initContainers: list[Container] | None = None


class PodStatus(msgspec.Struct, gc=False):
    phase: str | None = None


class Pod(msgspec.Struct, gc=False):
    metadata: PodMeta | None = None
    spec: PodSpec | None = None
    status: PodStatus | None = None


class PodList(msgspec.Struct, gc=False):
    items: list[Pod] | None = None


class Condition(msgspec.Struct, gc=False):
    type: str | None = None
    status: str | None = None
    reason: str | None = None
    lastTransitionTime: str | None = None


class NodeSpec(msgspec.Struct, gc=False):
    taints: list[dict[str, Any]] | None = None
    unschedulable: bool | None = None


class NodeInfo(msgspec.Struct, gc=False):
    """The node's system info: its container runtime alone (`containerd://2.1.4`), for preflight."""

    containerRuntimeVersion: str | None = None


class NodeStatus(msgspec.Struct, gc=False):
    allocatable: Gpus | None = None
    capacity: Gpus | None = None
    conditions: list[Condition] | None = None
    nodeInfo: NodeInfo | None = None


class Node(msgspec.Struct, gc=False):
    metadata: NodeMeta | None = None
    spec: NodeSpec | None = None
    status: NodeStatus | None = None


class NodeList(msgspec.Struct, gc=False):
    items: list[Node] | None = None


ONE = {"pods": msgspec.json.Decoder(Pod), "nodes": msgspec.json.Decoder(Node)}  # one item on its own
LIST_HEAD = msgspec.json.Decoder(dict[str, Any])  # a list's head with its items left out
DECODERS = {
    "pods": msgspec.json.Decoder(PodList),
    "nodes": msgspec.json.Decoder(NodeList),
}
ERRORS = (msgspec.ValidationError, msgspec.DecodeError)
