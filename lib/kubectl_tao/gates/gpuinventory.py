"""GPUs per node from what kubectl returned: device-plugin allocatable and DRA devices. Pure.

Two ways a node offers GPUs:

- a device plugin: `status.allocatable["nvidia.com/gpu"]`, used by the requests of the pods bound there;
- Dynamic Resource Allocation (resource.k8s.io/v1): a GPU driver (`gpu.nvidia.com`) publishes one device per
  GPU in ResourceSlices; a device is used while an allocated ResourceClaim names it.

A pod that asks for `nvidia.com/gpu` (what submit renders) can use DRA devices only when a DeviceClass sets
`spec.extendedResourceName: nvidia.com/gpu` (DRAExtendedResource, beta and on by default from 1.36), and then
only on nodes whose allocatable does not list nvidia.com/gpu: the scheduler gives the pod a claim of its own
(annotated `resource.kubernetes.io/extended-resource-claim`). So the fit gate counts a DRA-only node's devices
when such a class exists, and never counts a pod's request and its claim twice.

The callers read three things at once: the nodes and the running pods (capacity.calls) and DRA_READ.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kubectl_tao.core.errors import TaoError, UsageError
from kubectl_tao.core.topology import NONE_DOMAIN
from kubectl_tao.core.valueclass import Factory, Value, plain, record
from kubectl_tao.gates.gpufit import GPU_PRODUCT_LABEL, GPU_RESOURCE, NodeGpus, node_gpus, pod_use

if TYPE_CHECKING:
    from kubectl_tao.k8s.kubectl import Completed

GPU_DRIVERS = ("gpu.nvidia.com",)
SLICES = "resourceslices.v1.resource.k8s.io"
CLAIMS = "resourceclaims.v1.resource.k8s.io"
CLASSES = "deviceclasses.v1.resource.k8s.io"
DRA_READ = ["get", f"{SLICES},{CLAIMS},{CLASSES}", "--all-namespaces", "-o", "json"]

# `device.driver == "gpu.nvidia.com"` in a DeviceClass's CEL selector: the drivers the class selects.
_CEL_DRIVER = re.compile(r"""device\.driver\s*==\s*["']([^"']+)["']""")
# `...type == "mig"`: the NVIDIA driver's device kind (gpu, mig, vfio); only whole GPUs count as GPUs.
_CEL_TYPE = re.compile(r"""\.type\s*==\s*["']([^"']+)["']|\[["']type["']\]\s*==\s*["']([^"']+)["']""")
_NO_DRA_API = ("doesn't have a resource type", "the server could not find the requested resource")


# --------------------------------------------------------------------------------------------------------
# DeviceClasses


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _expressions(device_class: Mapping[str, Any]) -> list[str]:
    selectors = (device_class.get("spec") or {}).get("selectors") or []
    return [str((s.get("cel") or {}).get("expression") or "") for s in selectors if isinstance(s, Mapping)]


def class_drivers(device_class: Mapping[str, Any]) -> tuple[str, ...]:
    """The drivers a DeviceClass's CEL selectors name (`device.driver == "..."`), in order, no repeats."""
    found: list[str] = []
    for expression in _expressions(device_class):
        for driver in _CEL_DRIVER.findall(expression):
            if driver not in found:
                found.append(driver)
    return tuple(found)


def serves_gpu_resource(device_class: Mapping[str, Any]) -> bool:
    return (device_class.get("spec") or {}).get("extendedResourceName") == GPU_RESOURCE


def not_gpu_class_reason(device_class: Mapping[str, Any]) -> str:
    """Why a DeviceClass does not hand out whole GPUs ('' when it does)."""
    if serves_gpu_resource(device_class):
        return ""
    drivers = class_drivers(device_class)
    if not drivers:
        return "its selectors name no device driver"
    if not any(d in GPU_DRIVERS for d in drivers):
        return f"it selects driver {', '.join(drivers)}, not {' or '.join(GPU_DRIVERS)}"
    kinds = {a or b for e in _expressions(device_class) for a, b in _CEL_TYPE.findall(e)}
    if kinds - {"gpu"}:
        return f"it selects devices of type {', '.join(sorted(kinds - {'gpu'}))}, not whole GPUs"
    return ""


def pick_device_class(classes: Sequence[Mapping[str, Any]], wanted: str) -> Mapping[str, Any]:
    """The DeviceClass --device-class names; UsageError (exit 2) when it is missing or not a GPU class."""
    by_name = {_name(c): c for c in classes}
    if wanted not in by_name:
        listed = ", ".join(sorted(by_name)) or "none"
        raise UsageError(
            f"--device-class {wanted}: no DeviceClass {wanted!r} on this cluster (found: {listed}); "
            f"`kubectl get {CLASSES}` lists them"
        )
    why = not_gpu_class_reason(by_name[wanted])
    if why:
        raise UsageError(
            f"--device-class {wanted}: not a GPU DeviceClass ({why}); name a class that selects whole GPUs of "
            f"driver {GPU_DRIVERS[0]} or serves {GPU_RESOURCE}, or drop --device-class"
        )
    return by_name[wanted]


# --------------------------------------------------------------------------------------------------------
# ResourceSlices and ResourceClaims


@record(frozen=True)
class DraNode(Value):
    total: int
    allocated: int
    product: str  # the productName attribute of its first GPU device ('' when the driver gives none)

    @property
    def free(self) -> int:
        return max(self.total - self.allocated, 0)


@record(frozen=True)
class DraGpus(Value):
    nodes: dict[str, DraNode]
    drivers: tuple[str, ...]  # the drivers whose devices were counted as GPUs
    serving_class: str | None  # the DeviceClass whose extendedResourceName is nvidia.com/gpu
    by_namespace: dict[str, int]  # GPU devices held by allocated claims, per claim namespace
    off_node: int  # GPU devices not tied to one node (network-attached), not counted per node

    @property
    def total(self) -> int:
        return sum(n.total for n in self.nodes.values())


def _items(data: Any) -> list[Mapping[str, Any]]:
    items = data.get("items") if isinstance(data, Mapping) else data
    return [i for i in items or [] if isinstance(i, Mapping)] if isinstance(items, list) else []


# --------------------------------------------------------------------------------------------------------
# The fields parse_dra reads, by the type the API server gives them (each may be absent or null): an object
# of another shape is named in one line (DraShapeError), never a crash.

_Fields = dict[str, tuple[str, Any]]
_META: _Fields = {"metadata": ("object", {"name": ("text", None), "namespace": ("text", None),
                                          "creationTimestamp": ("text", None)})}
_DRA_SHAPES: dict[str, _Fields] = {
    "DeviceClass": {**_META, "spec": ("object", {
        "extendedResourceName": ("text", None),
        "selectors": ("objects", {"cel": ("object", {"expression": ("text", None)})}),
    })},
    "ResourceSlice": {**_META, "spec": ("object", {
        "driver": ("text", None), "nodeName": ("text", None), "perDeviceNodeSelection": ("bool", None),
        "pool": ("object", {"name": ("text", None), "generation": ("int", None)}),
        "devices": ("objects", {
            "name": ("text", None), "nodeName": ("text", None), "attributes": ("object", None),
            "consumesCounters": ("objects", {"counterSet": ("text", None)}),
        }),
    })},
    "ResourceClaim": {**_META, "status": ("object", {"allocation": ("object", {"devices": ("object", {
        "results": ("objects", {"driver": ("text", None), "pool": ("text", None), "device": ("text", None)}),
    })})})},
}
_WANTED = {"object": "an object", "objects": "a list of objects", "text": "a string", "bool": "true or false",
           "int": "a whole number"}
_MAX_GENERATION = 2**63 - 1


class DraShapeError(TaoError):
    """A DRA object of a shape no API server sends."""


def _json_kind(value: Any) -> str:
    kinds = {bool: "true or false", Mapping: "an object", list: "a list", str: "a string", int: "a whole number",
             float: "a number"}
    return next((name for kind, name in kinds.items() if isinstance(value, kind)), "a value")


def _shape_problem(value: Any, kind: str, fields: _Fields | None, path: str) -> str | None:
    if value is None:
        return None
    good = {
        "object": isinstance(value, Mapping),
        "objects": isinstance(value, list) and all(isinstance(v, Mapping) for v in value),
        "text": isinstance(value, str),
        "bool": isinstance(value, bool),
        "int": type(value) is int and abs(value) <= _MAX_GENERATION,
    }[kind]
    if not good:
        shown = "a whole number past 2^63-1" if kind == "int" and type(value) is int else _json_kind(value)
        return f"{path} of the wrong shape ({shown}, not {_WANTED[kind]})"
    for at, part in enumerate(value if kind == "objects" else [value] if fields else []):
        where = f"{path}[{at}]" if kind == "objects" else path
        for name, (sub_kind, sub_fields) in (fields or {}).items():
            problem = _shape_problem(part.get(name), sub_kind, sub_fields, f"{where}.{name}")
            if problem is not None:
                return problem
    return None


def check_dra_shapes(items: Sequence[Mapping[str, Any]]) -> None:
    """DraShapeError naming the first DeviceClass, ResourceSlice or ResourceClaim whose fields parse_dra reads are
    of a type no API server sends."""
    for item in items:
        kind = item.get("kind")
        fields = _DRA_SHAPES.get(kind) if isinstance(kind, str) else None
        if fields is None:
            continue
        for name, (field_kind, sub_fields) in fields.items():
            problem = _shape_problem(item.get(name), field_kind, sub_fields, name)
            if problem is not None:
                meta = item.get("metadata")
                named = meta.get("name") if isinstance(meta, Mapping) else None
                shown = named if isinstance(named, str) and re.fullmatch(r"[a-z0-9][-a-z0-9.]{0,252}", named) else (
                    "without a readable name")
                raise DraShapeError(
                    f"{kind} {shown} has {problem}; an API server never sends that: check the server or proxy the "
                    "kubeconfig points at"
                )


def _attribute(device: Mapping[str, Any], driver: str, key: str) -> Any:
    """An attribute's value; unqualified names are in the driver's own domain, so both spellings count."""
    attributes = device.get("attributes") or {}
    value = attributes.get(key, attributes.get(f"{driver}/{key}"))
    if not isinstance(value, Mapping):
        return None
    for kind in ("string", "int", "bool", "version"):
        if kind in value:
            return value[kind]
    return None


def _whole_gpu(device: Mapping[str, Any], driver: str) -> bool:
    kind = _attribute(device, driver, "type")
    return kind is None or kind == "gpu"


def _current_slices(slices: Sequence[Mapping[str, Any]], drivers: Sequence[str]) -> list[Mapping[str, Any]]:
    """The slices of the newest generation of each pool: older generations are being replaced."""
    newest: dict[tuple[str, str], int] = {}
    mine = []
    for item in slices:
        spec = item.get("spec") or {}
        if spec.get("driver") not in drivers:
            continue
        pool = spec.get("pool") or {}
        key = (str(spec.get("driver")), str(pool.get("name") or ""))
        generation = int(pool.get("generation") or 0)
        newest[key] = max(newest.get(key, generation), generation)
        mine.append(item)
    out = []
    for item in mine:
        spec = item.get("spec") or {}
        pool = spec.get("pool") or {}
        if int(pool.get("generation") or 0) == newest[(str(spec.get("driver")), str(pool.get("name") or ""))]:
            out.append(item)
    return out


def _effective_class(serving: Sequence[Mapping[str, Any]]) -> str | None:
    """The class the scheduler uses when several claim nvidia.com/gpu: the newest, then the first by name."""
    if not serving:
        return None
    newest = max(str((c.get("metadata") or {}).get("creationTimestamp") or "") for c in serving)
    return min(_name(c) for c in serving if str((c.get("metadata") or {}).get("creationTimestamp") or "") == newest)


def parse_dra(data: Any, *, device_class: str | None = None) -> DraGpus:
    """Count GPU devices per node from `get resourceslices,resourceclaims,deviceclasses -o json`.

    GPU drivers: gpu.nvidia.com, plus those the class serving nvidia.com/gpu selects, or only those of
    `device_class` when given. A device counts when it is a whole GPU (the driver's `type` attribute is
    absent or "gpu"); it is allocated when a claim's allocation names it (admin access excluded), or when it
    shares a counter set with an allocated device (a MIG slice of the same GPU).
    """
    items = _items(data)
    check_dra_shapes(items)
    kinds: dict[str, list[Mapping[str, Any]]] = {"ResourceSlice": [], "ResourceClaim": [], "DeviceClass": []}
    for item in items:
        kinds.get(str(item.get("kind")), []).append(item)
    classes = kinds["DeviceClass"]
    serving = [c for c in classes if serves_gpu_resource(c)]
    if device_class is not None:
        drivers = class_drivers(pick_device_class(classes, device_class)) or GPU_DRIVERS
    else:
        drivers = tuple(dict.fromkeys([*GPU_DRIVERS, *(d for c in serving for d in class_drivers(c))]))

    # (driver, pool, device) -> (node or None, whole GPU?, counter sets it consumes)
    devices: dict[tuple[str, str, str], tuple[str | None, bool, frozenset[str]]] = {}
    products: dict[str, str] = {}
    for item in _current_slices(kinds["ResourceSlice"], drivers):
        spec = item.get("spec") or {}
        driver = str(spec.get("driver"))
        pool = str((spec.get("pool") or {}).get("name") or "")
        slice_node = spec.get("nodeName")
        for device in spec.get("devices") or []:
            node = device.get("nodeName") if spec.get("perDeviceNodeSelection") else slice_node
            counters = frozenset(str(c.get("counterSet")) for c in device.get("consumesCounters") or [])
            whole = _whole_gpu(device, driver)
            devices[(driver, pool, str(device.get("name")))] = (node, whole, counters)
            product = _attribute(device, driver, "productName")
            if whole and node and product and node not in products:
                products[node] = str(product)

    allocated: set[tuple[str, str, str]] = set()
    by_namespace: dict[str, int] = {}
    for claim in kinds["ResourceClaim"]:
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
        namespace = str((claim.get("metadata") or {}).get("namespace") or "")
        for result in results:
            key = (str(result.get("driver")), str(result.get("pool")), str(result.get("device")))
            if key[0] not in drivers or result.get("adminAccess"):
                continue
            if key not in allocated and devices.get(key, (None, True, frozenset()))[1]:
                by_namespace[namespace] = by_namespace.get(namespace, 0) + 1
            allocated.add(key)
    busy_counters = {(k[0], k[1], c) for k in allocated for c in devices.get(k, (None, True, frozenset()))[2]}

    totals: dict[str, list[int]] = {}
    off_node = 0
    for (driver, pool, name), (node, whole, counters) in devices.items():
        if not whole:
            continue
        if not node:
            off_node += 1
            continue
        count = totals.setdefault(str(node), [0, 0])
        count[0] += 1
        if (driver, pool, name) in allocated or any((driver, pool, c) in busy_counters for c in counters):
            count[1] += 1
    return DraGpus(
        nodes={n: DraNode(t, a, products.get(n, "")) for n, (t, a) in totals.items()},
        drivers=drivers,
        serving_class=_effective_class(serving),
        by_namespace=by_namespace,
        off_node=off_node,
    )


def read_dra(result: Completed | TaoError | None, *, device_class: str | None = None) -> tuple[DraGpus | None, str]:
    """DRA_READ's answer -> (the DRA GPUs or None, a note why they were not counted, '' when nothing to say).

    A server without resource.k8s.io/v1 (before 1.34) has no DRA GPUs to count; that needs no note.
    """
    import json

    if result is None:
        return None, ""
    if isinstance(result, TaoError):
        if any(marker in result.message.lower() for marker in _NO_DRA_API):
            if device_class:
                raise UsageError(
                    f"--device-class {device_class}: this cluster does not serve resource.k8s.io/v1 "
                    "(DRA, Kubernetes >= 1.34); drop --device-class"
                )
            return None, ""
        if device_class:
            raise TaoError(f"--device-class {device_class}: cannot read DeviceClasses: {result.message}")
        return None, f"DRA GPUs not counted: cannot list ResourceSlices/ResourceClaims/DeviceClasses: {result.message}"
    try:
        data = json.loads(result.stdout) if result.stdout.strip() else {}
    except json.JSONDecodeError:
        return None, "DRA GPUs not counted: kubectl returned output that is not JSON"
    except (RecursionError, ValueError):  # nested past the reader's depth; an integer past Python's digit limit
        return None, "DRA GPUs not counted: kubectl returned JSON nested too deep or with a number too long to read"
    try:
        return parse_dra(data, device_class=device_class), ""
    except DraShapeError as exc:
        if device_class:
            raise TaoError(f"--device-class {device_class}: cannot read the DRA objects: {exc.message}") from None
        return None, f"DRA GPUs not counted: {exc.message}"


# --------------------------------------------------------------------------------------------------------
# What the fit gate counts


def gate_nodes(plugin: Sequence[NodeGpus], dra: DraGpus | None) -> list[NodeGpus]:
    """The nodes as the scheduler sees them for a pod asking nvidia.com/gpu.

    A node whose allocatable lists nvidia.com/gpu is served by its device plugin, DRA devices or not. A node
    without it is served by its DRA devices when a DeviceClass maps nvidia.com/gpu to them; the pods' requests
    there are already counted as their claims' devices.
    """
    if dra is None or dra.serving_class is None:
        return list(plugin)
    out = []
    for node in plugin:
        devices = dra.nodes.get(node.name)
        if node.allocatable == 0 and devices is not None:
            node = node.replaced(allocatable=devices.total, requested=devices.allocated, free=devices.free)
        out.append(node)
    return out


def counts_for_fit(dra: DraGpus | None) -> bool:
    """Whether DRA devices can change a fit verdict: GPUs a DeviceClass maps to nvidia.com/gpu (gate_nodes), or
    GPUs that none maps (the verdict then names the fix, no_gpu_hint)."""
    return dra is not None and (dra.serving_class is not None or dra.total > 0)


def no_gpu_hint(dra: DraGpus | None) -> str | None:
    """The fix to name when no node offers nvidia.com/gpu but DRA GPUs exist (None: the usual hint applies)."""
    if dra is None or dra.total == 0 or dra.serving_class is not None:
        return None
    return (
        f"this cluster has {dra.total} GPUs published through DRA (driver {', '.join(dra.drivers)}) but no "
        f"DeviceClass sets spec.extendedResourceName: {GPU_RESOURCE}, so pods asking for {GPU_RESOURCE} cannot use "
        f"them; ask the cluster admin to set it on the GPU DeviceClass (Kubernetes >= 1.34, DRAExtendedResource)"
    )


def fit_nodes(nodes_json: Any, pods_json: Any, dra: DraGpus | None) -> list[NodeGpus]:
    """gpufit.node_gpus over the nodes and pods plus what DRA adds: what the gate, explain and preflight count."""
    return gate_nodes(node_gpus(nodes_json, pods_json), dra)


# --------------------------------------------------------------------------------------------------------
# The `gpus` view


@record(frozen=True)
class NodeRow(Value):
    name: str
    product: str
    source: str  # "device-plugin", "dra" or "device-plugin+dra"
    total: int
    allocated: int
    free: int
    taints: list[str]
    cordoned: bool
    ready: bool
    gpu_pods: int
    health: str = ""  # why its GPUs are unhealthy (gates/gpuhealth.py), '' when healthy
    domain: str | None = None  # its value of the `gpus --by` label (topology.NONE_DOMAIN without it)

    def to_dict(self) -> dict[str, Any]:
        return plain(self)


@record(frozen=True)
class Inventory(Value):
    nodes: list[NodeRow]
    namespaces: dict[str, int]
    dra_class: str | None
    dra_drivers: tuple[str, ...]
    off_node: int
    notes: list[str] = Factory(list)
    by: str | None = None  # `gpus --by LABEL`

    def domains(self) -> list[dict[str, Any]]:
        """Per value of the --by label: nodes, GPUs total/allocated/free, free on healthy schedulable nodes, the
        most free on one such node, and unhealthy nodes; most free first."""
        found: dict[str, dict[str, Any]] = {}
        for row in self.nodes:
            key = row.domain or NONE_DOMAIN
            d = found.setdefault(key, {"domain": key, "nodes": 0, "total": 0, "allocated": 0, "free": 0,
                                       "freeSchedulable": 0, "largestFree": 0, "unhealthyNodes": 0})
            d["nodes"] += 1
            d["total"] += row.total
            d["allocated"] += row.allocated
            d["free"] += row.free
            if row.health:
                d["unhealthyNodes"] += 1
            elif row.ready and not row.cordoned:
                d["freeSchedulable"] += row.free
                d["largestFree"] = max(d["largestFree"], row.free)
        return sorted(found.values(), key=lambda d: (d["domain"] == NONE_DOMAIN, -d["freeSchedulable"], d["domain"]))

    @property
    def totals(self) -> dict[str, int]:
        return {
            "nodes": len(self.nodes),
            "total": sum(n.total for n in self.nodes),
            "allocated": sum(n.allocated for n in self.nodes),
            "free": sum(n.free for n in self.nodes),
            "freeSchedulable": sum(n.free for n in self.nodes if not n.cordoned and n.ready and not n.health),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": [n.to_dict() for n in self.nodes],
            "namespaces": [{"namespace": k, "gpus": v} for k, v in sorted(self.namespaces.items())],
            "totals": self.totals,
            "dra": {"deviceClass": self.dra_class, "drivers": list(self.dra_drivers), "offNode": self.off_node},
            "notes": list(self.notes),
            **({"by": self.by, "domains": self.domains()} if self.by else {}),
        }


def _taint_text(taint: Mapping[str, Any]) -> str:
    value = taint.get("value")
    return f"{taint.get('key', '')}{'=' + str(value) if value else ''}:{taint.get('effect', '')}"


def inventory(
    nodes_json: Any, pods_json: Any, dra: DraGpus | None, notes: Sequence[str] = (), by: str | None = None
) -> Inventory:
    """Per GPU node: product, total, allocated, free (device plugin and DRA added up), taints, cordoned;
    per namespace the GPUs its running pods and allocated claims hold. One pass over pods and nodes."""
    use = pod_use(pods_json)
    plugin = node_gpus(nodes_json, use)
    dra_nodes = dra.nodes if dra else {}
    plugin_served = {n.name for n in plugin if n.allocatable > 0 or n.name not in dra_nodes}
    namespaces: dict[str, int] = dict(dra.by_namespace) if dra else {}
    for (node, namespace), gpus in use.per_namespace.items():
        if node in plugin_served:  # not on a DRA node, where its claim is what holds the GPUs
            namespaces[namespace] = namespaces.get(namespace, 0) + gpus
    rows = []
    for node in plugin:
        devices = dra_nodes.get(node.name)
        dra_total = devices.total if devices else 0
        if node.allocatable == 0 and dra_total == 0:
            continue
        source = "+".join(s for s, n in (("device-plugin", node.allocatable), ("dra", dra_total)) if n)
        allocated = (node.requested if node.allocatable else 0) + (devices.allocated if devices else 0)
        total = node.allocatable + dra_total
        rows.append(
            NodeRow(
                name=node.name,
                product=node.labels.get(GPU_PRODUCT_LABEL) or (devices.product if devices else ""),
                source=source,
                total=total,
                allocated=allocated,
                free=max(total - allocated, 0),
                taints=[_taint_text(t) for t in node.taints],
                cordoned=node.unschedulable,
                ready=node.ready,
                gpu_pods=node.gpu_pods,
                health=node.health_text(),
                domain=node.labels.get(by, NONE_DOMAIN) if by else None,
            )
        )
    return Inventory(
        nodes=rows,
        namespaces={k: v for k, v in sorted(namespaces.items()) if v},
        dra_class=dra.serving_class if dra else None,
        dra_drivers=dra.drivers if dra else (),
        off_node=dra.off_node if dra else 0,
        notes=list(notes),
        by=by,
    )
