"""The fit gate's cluster read, one function for submit, fit, preflight, explain and gpus.

Two `kubectl get --raw` calls run at once (with the caller's other reads): the nodes, and the pods that are
not Succeeded or Failed (finished pods hold no GPUs, so a long history costs nothing). `--raw` hands the API
server's bytes through; `get nodes,pods -o json` made kubectl decode and re-encode every object, which was
almost all of the gate's time on a big cluster. `resourceVersion=0` lets the API server answer from its watch
cache: the gate is a snapshot that may be a moment old either way, and the scheduler has the last word.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubectl_tao.errors import KubectlError, TaoError
from kubectl_tao.k8s.kubectl import Completed

NODES_PATH = "/api/v1/nodes?resourceVersion=0"
PODS_PATH = "/api/v1/pods?fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed&resourceVersion=0"
NODES_READ = ["get", "--raw", NODES_PATH]
PODS_READ = ["get", "--raw", PODS_PATH]


def calls() -> dict[str, tuple[list[str], dict[str, Any]]]:
    """The two reads, keyed "nodes" and "pods", to merge into a caller's `Kubectl.run_many`."""
    return {"nodes": (NODES_READ, {"namespaced": False}), "pods": (PODS_READ, {"namespaced": False})}


@dataclass(frozen=True)
class Capacity:
    """What the gate can see. `nodes` None: nodes could not be listed (capacity unknown); `usage_known`
    False: pods could not be listed, so `pods` is empty and only each node's allocatable is known."""

    nodes: dict[str, Any] | None
    pods: dict[str, Any]
    usage_known: bool
    warning: str | None = None


def _list(result: Completed, what: str) -> dict[str, Any]:
    try:
        data = json.loads(result.stdout) if result.stdout.strip() else {}
    except json.JSONDecodeError:
        raise TaoError(f"kubectl get --raw {what} returned output that is not JSON") from None
    if not isinstance(data, Mapping):
        raise TaoError(f"kubectl get --raw {what} returned JSON that is not a list")
    return {"items": [i for i in data.get("items") or [] if isinstance(i, Mapping)]}


def _forbidden(result: Completed | TaoError) -> bool:
    return isinstance(result, KubectlError) and result.reason == "Forbidden"


def read(results: Mapping[str, Completed | TaoError]) -> Capacity:
    """Nodes and running pods, or the first error (fit and gpus: no fallback)."""
    for key in ("nodes", "pods"):
        error = results[key]
        if isinstance(error, TaoError):
            raise error
    nodes, pods = results["nodes"], results["pods"]
    assert isinstance(nodes, Completed) and isinstance(pods, Completed)
    return Capacity(_list(nodes, "nodes"), _list(pods, "pods"), True)


def view(results: Mapping[str, Completed | TaoError]) -> Capacity:
    """The submit gate's and preflight's read, which never drops out silently: when listing pods cluster-wide
    is forbidden, the nodes alone (per-node allocatable, usage unknown); when nodes cannot be listed, no
    capacity. Either way with a warning. Errors other than Forbidden are raised."""
    nodes, pods = results["nodes"], results["pods"]
    for result in (nodes, pods):
        if isinstance(result, TaoError) and not _forbidden(result):
            raise result
    if isinstance(nodes, TaoError):
        return Capacity(
            None,
            {"items": []},
            False,
            f"cannot list nodes ({nodes.message}); GPU capacity was not checked: the job may wait Pending if no "
            "node can take it (`kubectl tao fit` needs `list nodes` and `list pods`)",
        )
    if isinstance(pods, TaoError):
        return Capacity(
            _list(nodes, "nodes"),
            {"items": []},
            False,
            f"cannot list pods in all namespaces ({pods.message}); the fit gate checked each node's allocatable "
            "nvidia.com/gpu only, not what is in use, so the job may still wait for GPUs",
        )
    return Capacity(_list(nodes, "nodes"), _list(pods, "pods"), True)
