"""`kubectl tao gpus`: read what gpuinventory needs in one round trip (the same reads as the fit gate).

Two processes at once, whatever the node count: `get nodes,pods --all-namespaces -o json` and
gpuinventory.DRA_READ (ResourceSlices, ResourceClaims and DeviceClasses of resource.k8s.io/v1).
"""

from __future__ import annotations

import json
from typing import Any

from .errors import TaoError
from .kubectl import Completed, Kubectl


def gather(kc: Kubectl, *, device_class: str | None = None) -> Any:
    """The cluster's GPUs per node and per namespace (a gpuinventory.Inventory)."""
    from . import gpuinventory

    results = kc.run_many(
        {
            "capacity": (["get", "nodes,pods", "--all-namespaces", "-o", "json"], {"namespaced": False}),
            "dra": (gpuinventory.DRA_READ, {"namespaced": False}),
        }
    )
    dra, note = gpuinventory.read_dra(results["dra"], device_class=device_class)
    capacity = results["capacity"]
    if isinstance(capacity, TaoError):
        raise capacity
    assert isinstance(capacity, Completed)
    try:
        data = json.loads(capacity.stdout) if capacity.stdout.strip() else {}
    except json.JSONDecodeError:
        raise TaoError("kubectl get nodes,pods returned output that is not JSON") from None
    notes = [note] if note else []
    hint = gpuinventory.no_gpu_hint(dra)
    if hint:
        notes.append(hint)
    if dra and dra.off_node:
        notes.append(f"{dra.off_node} DRA GPUs are not tied to one node (network-attached) and are not listed")
    return gpuinventory.inventory(data, dra, notes)
