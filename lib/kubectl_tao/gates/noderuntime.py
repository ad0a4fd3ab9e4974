"""The GPU nodes' runtime as the cluster shows it: what preflight's node-runtime gate judges. Pure.

A client that is not a GPU node cannot run the host check of the setup script on the nodes, so the nodes are
judged from what the cluster says of them:

- the NVIDIA driver version and the CUDA version the driver supports, from GPU Feature Discovery's labels
  (`nvidia.com/cuda.driver-version.*` and `nvidia.com/cuda.runtime-version.*`, or the deprecated
  `nvidia.com/cuda.driver.*` / `nvidia.com/cuda.runtime.*` that GFD still writes beside them); a node without
  them is not judged (the GPU Operator and the device plugin's Helm chart deploy GFD);
- the container runtime from the node's `status.nodeInfo.containerRuntimeVersion` (`containerd://2.1.4`,
  `cri-o://1.31.0`), as the kubelet reports it;
- whether the cluster injects GPUs through CDI: the GPU Operator creates the RuntimeClass `nvidia-cdi` when CDI
  is on, and a CDI-enabled runtime is needed then (the device plugin's docs: containerd 1.7 or newer, CRI-O
  1.24 or newer).

The NVIDIA Container Toolkit's version is not visible from the cluster; the setup script checks it on a node.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from kubectl_tao.core import contract
from kubectl_tao.core.quantities import gpu_quantity
from kubectl_tao.core.valueclass import Value, record

# The defaults of scripts/setup-nvidia-gpu-host.sh (TAO_MIN_DRIVER, TAO_MIN_CUDA override both).
MIN_DRIVER, MIN_CUDA = "580", "13.0"
# CDI-enabled container runtimes (NVIDIA/k8s-device-plugin docs/cdi.md).
CDI_RUNTIMES = {"containerd": (1, 7), "cri-o": (1, 24)}
_VERSION = re.compile(r"^v?(\d+(?:\.\d+)*)")


@record(frozen=True)
class GpuNode(Value):
    """One GPU node as the cluster shows it ('' where the cluster does not say)."""

    name: str
    driver: str = ""  # 580.95.05, or 580 where only the major is labelled
    cuda: str = ""  # 13.0
    runtime: str = ""  # containerd://2.1.4

    @property
    def runtime_text(self) -> str:
        """`containerd 2.1.4`, or '' when the node reports none."""
        kind, _, version = self.runtime.partition("://")
        return f"{kind} {version}".strip() if version else kind


def version(text: str) -> tuple[int, ...] | None:
    """The numbers of a dotted version (`v1.7.27-k3s1` -> (1, 7, 27)), or None when it starts with none."""
    found = _VERSION.match(text.strip())
    return tuple(int(part) for part in found.group(1).split(".")) if found else None


def is_version(text: str) -> bool:
    """Whether TEXT is a dotted number (a minimum the user set)."""
    return re.fullmatch(r"\d+(\.\d+)*", text.strip()) is not None


def _labelled(labels: Mapping[str, Any], prefixes: Iterable[str], parts: tuple[str, ...]) -> str:
    """The version the labels under the first prefix that has any spell: its `full`, else its parts joined."""
    for prefix in prefixes:
        full = labels.get(prefix + "full")
        if isinstance(full, str) and full:
            return full
        found = [labels.get(prefix + part) for part in parts]
        found = [str(p) for p in found if isinstance(p, str) and p]
        if found:
            return ".".join(found)
    return ""


def driver_of(labels: Mapping[str, Any]) -> str:
    new, old = contract.GFD_DRIVER_PREFIXES
    return _labelled(labels, (new,), ("major", "minor", "revision")) or _labelled(labels, (old,), ("major", "minor",
                                                                                                     "rev"))


def cuda_of(labels: Mapping[str, Any]) -> str:
    return _labelled(labels, contract.GFD_CUDA_PREFIXES, ("major", "minor"))


def is_gpu_node(node: Mapping[str, Any]) -> bool:
    """A node with nvidia.com/gpu allocatable, or one GFD or the device plugin labelled as having GPUs."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    allocatable = ((node.get("status") or {}).get("allocatable") or {}).get(contract.GPU_RESOURCE)
    return gpu_quantity(allocatable) > 0 or labels.get(contract.GPU_PRESENT_LABEL) == "true" or bool(driver_of(labels))


def gpu_nodes(items: Iterable[Mapping[str, Any]], gpu_product: str | None = None) -> tuple[GpuNode, ...]:
    """The GPU nodes among the (reduced or whole) nodes ITEMS, with their product when one is asked for."""
    found = []
    for node in items:
        labels = (node.get("metadata") or {}).get("labels") or {}
        if not is_gpu_node(node) or (gpu_product and labels.get(contract.GPU_PRODUCT_LABEL) != gpu_product):
            continue
        info = (node.get("status") or {}).get("nodeInfo") or {}
        runtime = info.get("containerRuntimeVersion")
        found.append(GpuNode(
            str((node.get("metadata") or {}).get("name") or ""),
            driver_of(labels),
            cuda_of(labels),
            runtime if isinstance(runtime, str) else "",
        ))
    return tuple(sorted(found, key=lambda n: n.name))


def runtime_classes(text: str) -> tuple[str, ...]:
    """The RuntimeClass names of the read's answer (one a line)."""
    return tuple(sorted({line.strip() for line in text.splitlines() if line.strip()}))


def uses_cdi(classes: Iterable[str]) -> bool:
    return contract.NVIDIA_CDI_RUNTIME_CLASS in classes


def problems(node: GpuNode, *, min_driver: str, min_cuda: str, cdi: bool) -> list[str]:
    """What keeps NODE from running a TAO container: a driver or CUDA below the minimum, a runtime that cannot
    inject CDI devices where the cluster uses CDI. Nothing for what the node does not report."""
    found = []
    driver, cuda = version(node.driver), version(node.cuda)
    need_driver, need_cuda = version(min_driver), version(min_cuda)
    if driver is not None and need_driver is not None and driver < need_driver:
        found.append(f"driver {node.driver} < {min_driver}")
    if cuda is not None and need_cuda is not None and cuda < need_cuda:
        found.append(f"CUDA {node.cuda} < {min_cuda}")
    kind, _, text = node.runtime.partition("://")
    need = CDI_RUNTIMES.get(kind)
    have = version(text)
    if cdi and need is not None and have is not None and have[:2] < need:
        found.append(f"{kind} {text} has no CDI support (needs >= {'.'.join(map(str, need))})")
    return found


def listed(names: list[str], most: int = 3) -> str:
    """`a, b, c and 4 more`."""
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def summary(nodes: Iterable[GpuNode], what: str) -> str:
    """`containerd 2.1.4 (2), cri-o 1.31.0 (1)`: the distinct values of WHAT ("driver", "cuda", "runtime_text") and
    how many nodes have each."""
    counts: dict[str, int] = {}
    for node in nodes:
        value = getattr(node, what)
        if value:
            counts[value] = counts.get(value, 0) + 1
    return ", ".join(f"{value} ({n})" if len(counts) > 1 else value for value, n in sorted(counts.items()))
