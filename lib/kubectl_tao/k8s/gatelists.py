"""The fit gate's `get --raw` list answers, reduced page by page to the few fields the gate reads.

Per node the gate reads its name, labels, taints, cordon, Ready condition and allocatable nvidia.com/gpu;
per pod only its node, phase, namespace and effective nvidia.com/gpu request (gpufit.node_gpus and
gpuinventory.inventory, nothing else). So a page of pods is reduced at once to the pods that hold GPUs on a
node and are not finished, each as a small pod-shaped dict whose one container requests the pod's effective
GPU count (computed by gpufit.pod_gpu_request from the real containers, init containers and sidecars): those
functions give the same answer over the reduced list as over the full one, and everything else is dropped.

With msgspec installed (a dependency; release archives and wheelhouses carry it) a page is decoded straight
into those fields: the rest of every object is skipped, never built as Python objects, about ten times
faster than json.loads and a fraction of its memory. Without it, or when a page holds a value of a type the
typed decoder does not expect, json.loads reads that page and the same reduction follows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from kubectl_tao.core import gpuhealth
from kubectl_tao.core.errors import TaoError
from kubectl_tao.core.gpufit import GPU_RESOURCE, pod_gpu_request
from kubectl_tao.core.quantities import gpu_quantity
from kubectl_tao.core.valueclass import Factory, Value, record

FINISHED = ("Succeeded", "Failed")
# The list's own metadata before its items, the continue token a base64 string (no quote, no backslash).
_HEAD = re.compile(r'\{[^\[]*?"metadata":\{[^{}]*?"continue":"([^"\\]*)"')


@record
class Page(Value):
    """One list answer reduced: the kept items, the continue token ('' on the last page) and the item count."""

    items: list[dict[str, Any]] = Factory(list)
    token: str = ""
    listed: int = 0


def _reduced_pod(namespace: Any, node: Any, phase: Any, gpus: int) -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace},
        "spec": {"nodeName": node, "containers": [{"resources": {"requests": {GPU_RESOURCE: gpus}}}]},
        "status": {"phase": phase},
    }


def _reduced_node(
    name: Any, labels: Any, taints: Any, unschedulable: Any, gpus: Any, ready: Any, health: list[dict[str, Any]]
) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [{"type": "Ready", "status": ready}] if ready is not None else []}
    if gpus is not None:
        status["allocatable"] = {GPU_RESOURCE: gpus}
    return {
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {"taints": [dict(t) for t in taints or [] if isinstance(t, Mapping)], "unschedulable": unschedulable},
        "status": status,
        "health": health,
    }


def _health(
    conditions: list[Any], taints: Any, gpus: Any, capacity: Any, signals: tuple[gpuhealth.Signal, ...]
) -> list[dict[str, Any]]:
    """The node's unhealthy marks (gpuhealth.judge), as dicts: the only conditions besides Ready kept."""
    if not conditions and not taints and capacity is None:
        return []
    try:
        allocatable, total = gpu_quantity(gpus), None if capacity is None else gpu_quantity(capacity)
    except TaoError:
        allocatable, total = 0, None
    marks = gpuhealth.judge(conditions, [t for t in taints or [] if isinstance(t, Mapping)], allocatable, total,
                            signals)
    return [m.to_dict() for m in marks]


# ------------------------------------------------------------------------------------------- json (stdlib)


def _loads(text: str, what: str) -> Mapping[str, Any]:
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        raise TaoError(f"kubectl get --raw {what} returned output that is not JSON") from None
    if not isinstance(data, Mapping):
        raise TaoError(f"kubectl get --raw {what} returned JSON that is not a list")
    return data


def _token(data: Mapping[str, Any]) -> str:
    meta = data.get("metadata")
    token = meta.get("continue") if isinstance(meta, Mapping) else None
    return token if isinstance(token, str) else ""


def _objects(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [i for i in data.get("items") or [] if isinstance(i, Mapping)]


def _pods_json(text: str) -> Page:
    data = _loads(text, "pods")
    objects = _objects(data)
    page = Page(token=_token(data), listed=len(objects))
    for pod in objects:
        spec = pod.get("spec") or {}
        phase = (pod.get("status") or {}).get("phase")
        if not spec.get("nodeName") or phase in FINISHED:
            continue
        gpus = pod_gpu_request(pod)
        if gpus:
            page.items.append(_reduced_pod((pod.get("metadata") or {}).get("namespace"), spec["nodeName"], phase, gpus))
    return page


def _nodes_json(text: str, signals: tuple[gpuhealth.Signal, ...] = gpuhealth.DEFAULT_SIGNALS) -> Page:
    data = _loads(text, "nodes")
    objects = _objects(data)
    page = Page(token=_token(data), listed=len(objects))
    for node in objects:
        meta, spec, status = (node.get(k) or {} for k in ("metadata", "spec", "status"))
        conditions = [c for c in status.get("conditions") or [] if isinstance(c, Mapping)]
        ready = next((c.get("status") for c in conditions if c.get("type") == "Ready"), None)
        gpus = (status.get("allocatable") or {}).get(GPU_RESOURCE)
        capacity = (status.get("capacity") or {}).get(GPU_RESOURCE)
        page.items.append(
            _reduced_node(meta.get("name", ""), meta.get("labels"), spec.get("taints"), spec.get("unschedulable"),
                          gpus, ready, _health(conditions, spec.get("taints"), gpus, capacity, signals))
        )
    return page


# ------------------------------------------------------------------------------------------- msgspec


def _decoders() -> Any:
    """The typed decoders (k8s/gatetypes.py); None without msgspec."""
    try:
        from kubectl_tao.k8s import gatetypes
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


def _pods_typed(decoded: Any, unset: Any) -> Page:
    objects = decoded.items or []
    page = Page(token=(decoded.metadata.token if decoded.metadata else None) or "", listed=len(objects))
    known: dict[Any, int] = {}
    for pod in objects:
        spec = pod.spec
        if spec is None or not spec.nodeName:
            continue
        (init, init_named), (main, main_named) = _shape(spec.initContainers, unset), _shape(spec.containers, unset)
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
            namespace = pod.metadata.namespace if pod.metadata else None
            page.items.append(_reduced_pod(namespace, spec.nodeName, phase, gpus))
    return page


def _nodes_typed(decoded: Any, unset: Any, signals: tuple[gpuhealth.Signal, ...] = gpuhealth.DEFAULT_SIGNALS) -> Page:
    objects = decoded.items or []
    page = Page(token=(decoded.metadata.token if decoded.metadata else None) or "", listed=len(objects))
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
        page.items.append(
            _reduced_node(
                (meta.name if meta else None) or "",
                meta.labels if meta else None,
                taints,
                spec.unschedulable if spec else None,
                gpus,
                ready,
                _health(marked, taints, gpus, capacity, signals),
            )
        )
    return page


def _allocatable(gpus: Any, unset: Any) -> Any:
    return None if gpus is None or gpus.value is unset else gpus.value


# ------------------------------------------------------------------------------------------- entry points

_READERS = {"pods": (_pods_typed, _pods_json), "nodes": (_nodes_typed, _nodes_json)}


def reduce(
    text: str, what: str, *, fast: bool = True, signals: tuple[gpuhealth.Signal, ...] = gpuhealth.DEFAULT_SIGNALS
) -> Page:
    """A `get --raw` list answer of `what` ("pods" or "nodes") reduced to what the gate reads (`fast`: msgspec
    when installed; False forces json.loads, for tests). A node keeps its GPU health marks (`signals`) as
    "health"."""
    typed, plain = _READERS[what]
    extra = (signals,) if what == "nodes" else ()
    types = _decoders() if fast else None
    if types is not None and text.strip():
        try:
            return typed(types.DECODERS[what].decode(text), types.UNSET, *extra)
        except types.ERRORS:
            pass  # an unexpected type somewhere, or not JSON at all: json.loads decides and names it
    return plain(text, *extra)


def continue_token(text: str) -> str:
    """The continue token as the API server writes it, at the head of the list (`{"kind":...,"metadata":
    {...,"continue":"..."},"items":[...`), found without decoding the page ('' when not there), so that the
    next page can be fetched while this one is reduced. Only a guess: the caller follows it only when it
    equals the token the full decode finds."""
    head = _HEAD.match(text, 0, 4096)
    return head.group(1) if head else ""
