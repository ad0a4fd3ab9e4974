"""`kubectl tao gpus`: read what gpuinventory needs in one round trip (the same reads as the fit gate).

Three processes at once, whatever the node count: the nodes and running pods (capacity.calls) and
gpuinventory.DRA_READ (ResourceSlices, ResourceClaims and DeviceClasses of resource.k8s.io/v1).
"""

from __future__ import annotations

from typing import Any

from kubectl_tao.k8s.kubectl import Kubectl


def gather(kc: Kubectl, *, device_class: str | None = None) -> Any:
    """The cluster's GPUs per node and per namespace (a gpuinventory.Inventory)."""
    from kubectl_tao import gpuinventory
    from kubectl_tao.k8s import capacity

    results = kc.run_many({**capacity.calls(), "dra": (gpuinventory.DRA_READ, {"namespaced": False})})
    dra, note = gpuinventory.read_dra(results["dra"], device_class=device_class)
    seen = capacity.read(results)
    notes = [note] if note else []
    hint = gpuinventory.no_gpu_hint(dra)
    if hint:
        notes.append(hint)
    if dra and dra.off_node:
        notes.append(f"{dra.off_node} DRA GPUs are not tied to one node (network-attached) and are not listed")
    return gpuinventory.inventory(seen.nodes, seen.pods, dra, notes)
