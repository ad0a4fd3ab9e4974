"""The fit gate's `get --raw` list answers, reduced as they arrive to the few fields the gate reads.

Per node the gate reads its name, labels, taints, cordon, Ready condition and allocatable nvidia.com/gpu (and
preflight its container runtime);
per pod only its node, phase, namespace and effective nvidia.com/gpu request (gpufit.node_gpus and
gpuinventory.inventory, nothing else). So each node is reduced at once to a small node-shaped dict, and the
pods are summed as they come into a gpufit.PodUse (the GPUs held per node and per namespace there, counted by
gpufit.pod_gpu_request from the real containers, init containers and sidecars): those functions give the same
answer over the reduced read as over the full one, and no pod is kept.

`reduce_stream` reads an answer while kubectl still passes it on: whole items are cut off its front in pieces
of about PIECE_BYTES and reduced, so the answer is never held whole and the reduction overlaps the transfer.
Of the pods only those whose bytes name nvidia.com/gpu are decoded (most pods of a cluster hold no GPU).

With msgspec installed (a dependency; release archives and wheelhouses carry it) each item is decoded straight
into those fields where it lies in the answer: the rest of every object is skipped, never built as Python
objects, about ten times faster than json.loads and a fraction of its memory. Without it, or when a piece holds
a value of a type the typed decoder does not expect, json.loads reads that piece and the same reduction
follows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from kubectl_tao.core import gcpause
from kubectl_tao.core.errors import TaoError
from kubectl_tao.core.quantities import count_problem, gpu_quantity
from kubectl_tao.core.valueclass import Factory, Value, record
from kubectl_tao.gates import gpuhealth
from kubectl_tao.gates.gpufit import GPU_RESOURCE, PodUse, pod_gpu_request, pod_use

FINISHED = ("Succeeded", "Failed")
Buffer = bytes | bytearray
Text = str | bytes | bytearray
Signals = tuple[gpuhealth.Signal, ...]
PIECE_BYTES = 4 << 20
# Between two items of the API server's compact list JSON. A quote inside a JSON string is always escaped, so
# these bytes are structure, never text. They would also stand between two objects of an array nested in an
# item whose objects start with "metadata" (no Pod or Node field has one): a piece cut there is not JSON
# alone, and the rest of the answer is then reduced whole.
_BETWEEN_ITEMS = b'},{"metadata":'
_ITEMS_HEAD, _ITEMS_TAIL = b'{"items":[', b"]}"
_ITEMS_KEY, _ITEM_HEAD = b'"items":[', b'{"metadata":'
_GPU_NAMED = f'"{GPU_RESOURCE}"'.encode()


@record
class Page(Value):
    """A list answer (or a piece of one) reduced: the nodes kept, or what the pods hold."""

    items: list[dict[str, Any]] = Factory(list)
    use: PodUse = Factory(PodUse)

    def extend(self, other: Page) -> None:
        self.items += other.items
        self.use.merge(other.use)


def _reduced_node(
    name: Any, labels: Any, taints: Any, unschedulable: Any, gpus: Any, ready: Any, health: list[dict[str, Any]],
    runtime: Any = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [{"type": "Ready", "status": ready}] if ready is not None else []}
    if gpus is not None:
        status["allocatable"] = {GPU_RESOURCE: gpus}
    if isinstance(runtime, str) and runtime:
        status["nodeInfo"] = {"containerRuntimeVersion": runtime}
    return {
        "metadata": {"name": name, "labels": labels if type(labels) is dict else dict(labels or {})},
        "spec": {"taints": [dict(t) for t in taints or [] if isinstance(t, Mapping)], "unschedulable": unschedulable},
        "status": status,
        "health": health,
    }


def _health(conditions: list[Any], taints: Any, gpus: Any, capacity: Any, signals: Signals) -> list[dict[str, Any]]:
    """The node's unhealthy marks (gpuhealth.judge), as dicts: the only conditions besides Ready kept."""
    if not conditions and (capacity is None or capacity == gpus) and not _signalling_taint(taints, signals):
        return []  # nothing judge could mark: most nodes, so the common case skips reading quantities
    try:
        allocatable, total = gpu_quantity(gpus), None if capacity is None else gpu_quantity(capacity)
    except TaoError:
        allocatable, total = 0, None
    marks = gpuhealth.judge(conditions, [t for t in taints or [] if isinstance(t, Mapping)], allocatable, total,
                            signals)
    return [m.to_dict() for m in marks]


def _signalling_taint(taints: Any, signals: Signals) -> bool:
    if not taints:
        return False
    keys = gpuhealth.taint_keys(signals)
    return any(isinstance(t, Mapping) and t.get("key") in keys for t in taints)


# ------------------------------------------------------------------------------------------- a node's shape
# What the gate reads of a node, of a type no API server sends (labels as a list, a count of 5,000 digits, JSON
# nested past what a reader follows), is one line naming the node (exit 1), never a crash or a silent guess.

_ANSWERED = "an API server never sends that: check the server or proxy the kubeconfig points at"
_NODE_NAME = re.compile(r"[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    kinds = {bool: "true or false", Mapping: "an object", list: "a list", str: "a string", int: "a whole number",
             float: "a number"}
    return next((name for kind, name in kinds.items() if isinstance(value, kind)), "a value")


def _bad_node(name: Any, problem: str) -> TaoError:
    if isinstance(name, str) and _NODE_NAME.fullmatch(name):
        shown = name
    elif name is None or name == "":
        shown = "without a name"
    else:
        shown = f"named {json.dumps(name)[:80] if isinstance(name, str) else _kind(name)}"
    return TaoError(f"kubectl get --raw nodes: node {shown} has {problem}; {_ANSWERED}")


def _wrong(field: str, value: Any, wanted: str) -> str:
    return f"{field} of the wrong shape ({_kind(value)}, not {wanted})"


def _node_problem(meta: Any, spec: Any, status: Any) -> str | None:
    """What of the fields the gate reads has a type no API server sends (json.loads' reading), or None."""
    for field, part in (("metadata", meta), ("spec", spec), ("status", status)):
        if part is not None and not isinstance(part, Mapping):
            return _wrong(field, part, "an object")
    meta, spec, status = meta or {}, spec or {}, status or {}
    name, labels = meta.get("name"), meta.get("labels")
    if name is not None and not isinstance(name, str):
        return _wrong("metadata.name", name, "a string")
    if labels is not None:
        if not isinstance(labels, Mapping):
            return _wrong("metadata.labels", labels, "a map of strings")
        odd = next((value for value in labels.values() if not isinstance(value, str)), labels)
        if odd is not labels:
            return f"metadata.labels of the wrong shape (a label whose value is {_kind(odd)}, not a string)"
    for field, value, wanted in (("spec.taints", spec.get("taints"), "a list of taints"),
                                 ("status.conditions", status.get("conditions"), "a list of conditions")):
        if value is not None and not (isinstance(value, list) and all(isinstance(v, Mapping) for v in value)):
            return _wrong(field, value, wanted)
    unschedulable = spec.get("unschedulable")
    if unschedulable is not None and not isinstance(unschedulable, bool):
        return _wrong("spec.unschedulable", unschedulable, "true or false")
    for field in ("allocatable", "capacity"):
        resources = status.get(field)
        if resources is None:
            continue
        if not isinstance(resources, Mapping):
            return _wrong(f"status.{field}", resources, "a map of quantities")
        problem = count_problem(resources.get(GPU_RESOURCE))
        if problem is not None:
            return f"status.{field} {GPU_RESOURCE} of the wrong shape ({problem})"
    return None


def _count_checked(name: Any, gpus: Any, capacity: Any) -> None:
    """The typed reading's check: msgspec typed every field the gate reads but the two counts."""
    for field, value in (("allocatable", gpus), ("capacity", capacity)):
        problem = count_problem(value)
        if problem is not None:
            raise _bad_node(name, f"status.{field} {GPU_RESOURCE} of the wrong shape ({problem})")


_UNREADABLE = (RecursionError, ValueError)  # nested past the reader's depth; an integer past Python's digit limit
_NAME_AT = re.compile(rb'"name":"((?:[^"\\]|\\.){0,253})"')


def _unreadable_node(text: Text) -> TaoError:
    """The one-line error for a nodes answer json.loads cannot read though it is JSON: the first item that alone
    cannot be read is named (the API server writes metadata.name first)."""
    data = text.encode() if isinstance(text, str) else bytes(text)
    start = data.find(_ITEM_HEAD)
    while start >= 0:
        end = data.find(_BETWEEN_ITEMS, start + 1)
        item = data[start: end + 1] if end >= 0 else data[start:].rstrip().removesuffix(b"}").rstrip()
        item = item if end >= 0 else item.removesuffix(b"]")
        try:
            json.loads(item)
        except _UNREADABLE as exc:
            if isinstance(exc, json.JSONDecodeError):
                break
            found = _NAME_AT.match(item, len(_ITEM_HEAD) + 1)
            name = json.loads(b'"' + found[1] + b'"') if found else None
            why = "JSON nested deeper than a reader follows" if isinstance(exc, RecursionError) else (
                "a number of more digits than a reader takes")
            return _bad_node(name, why)
        start = end + 2 if end >= 0 else -1
    return TaoError(f"kubectl get --raw nodes returned JSON nested too deep or with a number too long to read; "
                    f"{_ANSWERED}")


# ------------------------------------------------------------------------------------------- json (stdlib)


def _loads(text: str | bytes, what: str) -> Mapping[str, Any]:
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        raise TaoError(f"kubectl get --raw {what} returned output that is not JSON") from None
    except _UNREADABLE:
        if what == "nodes":
            raise _unreadable_node(text) from None
        raise TaoError(f"kubectl get --raw {what} returned JSON nested too deep or with a number too long to "
                       f"read; {_ANSWERED}") from None
    if not isinstance(data, Mapping):
        raise TaoError(f"kubectl get --raw {what} returned JSON that is not a list")
    return data


def _objects(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [i for i in data.get("items") or [] if isinstance(i, Mapping)]


def _pods_json(text: Text, signals: Signals, page: Page) -> Page:
    page.use.merge(pod_use(_objects(_loads(text, "pods"))))
    return page


def _nodes_json(text: Text, signals: Signals, page: Page) -> Page:
    items = _loads(text, "nodes").get("items")
    if items is not None and not isinstance(items, list):
        raise TaoError(f"kubectl get --raw nodes returned JSON whose items are {_kind(items)}, not a list; {_ANSWERED}")
    for node in items or ():
        if not isinstance(node, Mapping):
            raise TaoError(f"kubectl get --raw nodes returned a node that is {_kind(node)}, not an object; {_ANSWERED}")
        parts = node.get("metadata"), node.get("spec"), node.get("status")
        problem = _node_problem(*parts)
        if problem is not None:
            raise _bad_node(parts[0].get("name") if isinstance(parts[0], Mapping) else None, problem)
        meta, spec, status = (part or {} for part in parts)
        conditions = [c for c in status.get("conditions") or [] if isinstance(c, Mapping)]
        ready = next((c.get("status") for c in conditions if c.get("type") == "Ready"), None)
        gpus = (status.get("allocatable") or {}).get(GPU_RESOURCE)
        capacity = (status.get("capacity") or {}).get(GPU_RESOURCE)
        info = status.get("nodeInfo")
        page.items.append(
            _reduced_node(meta.get("name", ""), meta.get("labels"), spec.get("taints"), spec.get("unschedulable"),
                          gpus, ready, _health(conditions, spec.get("taints"), gpus, capacity, signals),
                          info.get("containerRuntimeVersion") if isinstance(info, Mapping) else None)
        )
    return page


# ------------------------------------------------------------------------------------------- msgspec


def _decoders() -> Any:
    """The typed decoders (gates/gatetypes.py); None without msgspec."""
    try:
        from kubectl_tao.gates import gatetypes
    except ImportError:
        return None
    return gatetypes


def _shape(containers: list[Any] | None, unset: Any) -> tuple[tuple[tuple[Any, Any, Any], ...], bool]:
    """Per container what pod_gpu_request reads: restartPolicy, the GPU request, the GPU limit (unset: none);
    and whether any of them names nvidia.com/gpu."""
    out = []
    named = False
    for container in containers or ():
        resources = container.resources
        requests = resources.requests if resources else None
        limits = resources.limits if resources else None
        request = requests.value if requests else unset
        limit = limits.value if limits else unset
        named = named or request is not unset or limit is not unset
        out.append((container.restartPolicy, request, limit))
    return tuple(out), named


def _gpus_of(init: tuple[Any, ...], main: tuple[Any, ...], unset: Any) -> int:
    """gpufit.pod_gpu_request over containers of these shapes (pods of one Job or ReplicaSet share them)."""

    def container(shape: tuple[Any, Any, Any]) -> dict[str, Any]:
        policy, request, limit = shape
        return {
            "restartPolicy": policy,
            "resources": {
                "requests": {} if request is unset else {GPU_RESOURCE: request},
                "limits": {} if limit is unset else {GPU_RESOURCE: limit},
            },
        }

    return pod_gpu_request(
        {"spec": {"initContainers": [container(c) for c in init], "containers": [container(c) for c in main]}}
    )


def _pods_typed(decoded: Any, unset: Any, signals: Signals, page: Page) -> Page:
    return _typed_pods_page(decoded.items or [], unset, page)


def _typed_pods_page(objects: list[Any], unset: Any, page: Page) -> Page:
    """Adds what the pods hold to PAGE; all are decoded already, so an answer that is not what the decoder
    expects adds nothing."""
    add = page.use.add
    known: dict[Any, int] = {}
    for pod in objects:
        spec = pod.spec
        if spec is None or not spec.nodeName:
            continue
        main, main_named = _shape(spec.containers, unset)
        init, init_named = _shape(spec.initContainers, unset) if spec.initContainers else ((), False)
        if not (init_named or main_named):
            continue  # no nvidia.com/gpu anywhere: holds none
        phase = pod.status.phase if pod.status else None
        if phase in FINISHED:
            continue
        try:
            gpus = known.get((init, main))
            if gpus is None:
                gpus = known[(init, main)] = _gpus_of(init, main, unset)
        except TypeError:  # a quantity that is not a string or number (unhashable): not worth remembering
            gpus = _gpus_of(init, main, unset)
        if gpus:
            add(spec.nodeName, (pod.metadata.namespace if pod.metadata else None) or "", gpus)
    return page


def _nodes_typed(decoded: Any, unset: Any, signals: Signals, page: Page) -> Page:
    return _typed_nodes_page(decoded.items or [], unset, signals, page)


def _typed_nodes_page(objects: list[Any], unset: Any, signals: Signals, page: Page) -> Page:
    watched = gpuhealth.condition_types(signals)
    for node in objects:
        meta, spec, status = node.metadata, node.spec, node.status
        conditions = (status.conditions if status else None) or []
        ready = next((c.status for c in conditions if c.type == "Ready"), None)
        marked = [
            {"type": c.type, "status": c.status, "reason": c.reason, "lastTransitionTime": c.lastTransitionTime}
            for c in conditions
            if c.type in watched
        ]
        taints = spec.taints if spec else None
        gpus = _allocatable(status.allocatable if status else None, unset)
        capacity = _allocatable(status.capacity if status else None, unset)
        if not (
            (gpus is None or (type(gpus) is str and len(gpus) <= 18 and gpus.isdigit()))
            and (capacity is None or (type(capacity) is str and len(capacity) <= 18 and capacity.isdigit()))
        ):  # not the plain "8" of nearly every node: checked
            _count_checked(meta.name if meta else None, gpus, capacity)
        info = status.nodeInfo if status else None
        page.items.append(
            _reduced_node(
                (meta.name if meta else None) or "",
                meta.labels if meta else None,
                taints,
                spec.unschedulable if spec else None,
                gpus,
                ready,
                _health(marked, taints, gpus, capacity, signals),
                info.containerRuntimeVersion if info else None,
            )
        )
    return page


def _allocatable(gpus: Any, unset: Any) -> Any:
    return None if gpus is None or gpus.value is unset else gpus.value


# ------------------------------------------------------------------------------------------- entry points

_READERS = {"pods": (_pods_typed, _pods_json), "nodes": (_nodes_typed, _nodes_json)}


def reduce(
    text: Text, what: str, *, fast: bool = True, signals: Signals = gpuhealth.DEFAULT_SIGNALS,
    into: Page | None = None,
) -> Page:
    """A `get --raw` list answer of `what` ("pods" or "nodes") reduced to what the gate reads (`fast`: msgspec
    when installed; False forces json.loads, for tests), added to INTO (a new Page when None) and returned.
    A node keeps its GPU health marks (`signals`) as "health". An answer that cannot be read adds nothing."""
    typed, plain = _READERS[what]
    page = Page() if into is None else into
    types = _decoders() if fast else None
    if types is not None and text.strip():
        try:
            decoded = types.DECODERS[what].decode(text)
        except (*types.ERRORS, RecursionError):
            pass  # an unexpected type somewhere, too deep, or not JSON at all: json.loads decides and names it
        else:
            return typed(decoded, types.UNSET, signals, page)
    return plain(text, signals, page)


def reduce_stream(chunks: Iterable[bytes], what: str, *, signals: Signals = gpuhealth.DEFAULT_SIGNALS) -> Page:
    """`reduce` of the answer that CHUNKS make up, reduced as they come: each time PIECE_BYTES are in, the
    whole items before the last item boundary are cut off and reduced (the first piece with the list's head),
    the rest waits for more. Same result as `reduce` of the whole."""
    with gcpause.paused():
        return _reduce_stream(chunks, what, signals)


def _reduce_stream(chunks: Iterable[bytes], what: str, signals: Signals) -> Page:
    found = Page()
    # What came since the last cut, in one growing buffer: appending a chunk copies it once (joining the held
    # chunks made a new piece-sized object for every piece), and what follows a cut is less than an item.
    held = bytearray()
    cut = -1  # where in what is held the last item boundary seen starts
    tail = b""  # the held bytes' last few, for a boundary that two chunks share
    first = True  # the list's own head is still held until the first piece is cut
    splitting = True
    keep = len(_BETWEEN_ITEMS) - 1
    for chunk in chunks:
        if splitting:  # each chunk is searched once, as it comes: the held bytes never again
            at = chunk.rfind(_BETWEEN_ITEMS)
            if at >= 0:
                cut = len(held) + at
            else:
                at = (tail + chunk[:keep]).rfind(_BETWEEN_ITEMS)
                cut = len(held) - len(tail) + at if at >= 0 else cut
            tail = chunk[-keep:] if len(chunk) >= keep else (tail + chunk)[-keep:]
        held += chunk
        if not splitting or len(held) < PIECE_BYTES or cut < 0:
            continue
        if not _piece(held, cut + 1, first, what, signals, found):
            splitting = False
            continue
        held = held[cut + 2:]  # from the next item's "{", the last boundary seen: none in what is held
        cut, first = -1, False
    return reduce(bytes(held) if first else _ITEMS_HEAD + held, what, signals=signals, into=found)


def _piece(text: Buffer, end: int, first: bool, what: str, signals: Signals, found: Page) -> bool:
    """The whole items that text[:end] holds, joined by commas (the `first` piece: after the list's own head),
    reduced into FOUND; False when they are not JSON on their own (then nothing more is cut).

    False after some were added only where reading them raised an error (a quantity that is not one): the
    same items, read again with the rest, raise it again, so nothing is ever counted twice in an answer."""
    if _in_place(text, end, first, what, signals, found):
        return True
    try:
        reduce((b"" if first else _ITEMS_HEAD) + text[:end] + _ITEMS_TAIL, what, signals=signals, into=found)
    except TaoError:
        return False
    return True


def _in_place(text: Buffer, end: int, first: bool, what: str, signals: Signals, found: Page) -> bool:
    """The items of a piece (text[:end]) decoded each on its own where it lies, without a copy: every node,
    and only the pods whose bytes name nvidia.com/gpu (a pod that requests GPUs names the resource as a key;
    most pods of a cluster name it nowhere) and the piece's last one, added to FOUND. False, with nothing
    added, when msgspec is not there or an item decoded is not one whole object; the caller then reduces the
    piece whole.

    An item is what lies between two _BETWEEN_ITEMS. Were those bytes ever inside an object (see
    _BETWEEN_ITEMS), the item that holds a GPU pod's containers would not be JSON alone (it starts or ends
    inside the pod), nor would the last one when the cut itself is inside an object: the piece is then
    reduced whole, which stops the cutting. A pod that names the resource nowhere holds no GPUs."""
    types = _decoders()
    if types is None:
        return False
    start = 0
    if first:
        key = text.find(_ITEMS_KEY, 0, end)
        if key < 0 or not _is_list_head(text[: key + len(_ITEMS_KEY)] + _ITEMS_TAIL, types):
            return False
        start = key + len(_ITEMS_KEY)
    decoder = types.ONE[what]
    last = text.rfind(_BETWEEN_ITEMS, start, end)
    last = start if last < 0 else last + 2  # where the last item starts
    objects = []
    at = start
    with memoryview(text) as view:  # released at once: a bytearray cannot grow while a view of it exists
        try:
            while at < last:
                named = at
                if what == "pods":
                    named = text.find(_GPU_NAMED, at, last)
                    if named < 0:
                        break
                    begin = text.rfind(_BETWEEN_ITEMS, at, named)
                    at = at if begin < 0 else begin + 2
                # the "}" that ends this item (the last one at `last`): no boundary lies between its start and
                # the name found in it
                close = text.find(_BETWEEN_ITEMS, named, end)
                objects.append(decoder.decode(view[at: close + 1]))
                at = close + 2
            objects.append(decoder.decode(view[last:end]))
        except (*types.ERRORS, RecursionError):
            return False
    if what == "pods":
        _typed_pods_page(objects, types.UNSET, found)
    else:
        _typed_nodes_page(objects, types.UNSET, signals, found)
    return True


def _is_list_head(text: bytes, types: Any) -> bool:
    try:
        types.LIST_HEAD.decode(text)
        return True
    except (*types.ERRORS, RecursionError):
        return False
