"""The fit gate's cluster read, one function for submit, fit, preflight, explain and gpus.

`kubectl get --raw` of the nodes and of the pods that are bound to a node and not Succeeded or Failed (finished
and unscheduled pods hold no GPUs, so a long history or a queue of pending pods costs nothing), run at once
with the caller's other reads. `--raw` hands the API server's bytes through (`get nodes,pods -o json` made
kubectl decode and re-encode every object), and kubectl passes them on as the server sends them: each answer
is reduced while it arrives (gatelists.reduce_stream, on the thread of its kubectl call), so the plugin never
holds a whole list, nor even whole pods, and is done a moment after the last byte.

Both lists are one answer from the API server's watch cache (`resourceVersion=0`, which also makes the server
ignore any `limit`): a snapshot that may be a moment old; the scheduler has the last word. Pages would cost a
kubectl process and a round trip each, one after the other, and pages after the first are read from etcd.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote

from kubectl_tao.core.errors import KubectlError, TaoError
from kubectl_tao.core.valueclass import Value, record
from kubectl_tao.k8s.kubectl import Completed

_POD_FIELDS = quote("status.phase!=Succeeded,status.phase!=Failed,spec.nodeName!=", safe="")
NODES_PATH = "/api/v1/nodes?resourceVersion=0"
PODS_PATH = f"/api/v1/pods?fieldSelector={_POD_FIELDS}&resourceVersion=0"
NODES_READ = ["get", "--raw", NODES_PATH]
PODS_READ = ["get", "--raw", PODS_PATH]


def calls() -> dict[str, tuple[list[str], dict[str, Any]]]:
    """The two reads, keyed "nodes" and "pods", to merge into a caller's `Kubectl.run_many`: each answer's
    Completed holds its reduced gatelists.Page as `value`. The GPU health signals are read here, so that a
    setting that cannot be read stops the verb before any call starts."""
    signals = health_signals()

    def nodes(chunks: Iterator[bytes]) -> Any:
        from kubectl_tao.gates import gatelists  # here: the calls start before the reducer (and the fit code) loads

        return gatelists.reduce_stream(chunks, "nodes", signals=signals)

    def pods(chunks: Iterator[bytes]) -> Any:
        from kubectl_tao.gates import gatelists

        return gatelists.reduce_stream(chunks, "pods")

    return {
        "nodes": (NODES_READ, {"namespaced": False, "reader": nodes}),
        "pods": (PODS_READ, {"namespaced": False, "reader": pods}),
    }


@record(frozen=True)
class Capacity(Value):
    """What the gate can see. `nodes` None: nodes could not be listed (capacity unknown); `usage_known`
    False: pods could not be listed, so `pods` holds nothing and only each node's allocatable is known.
    `nodes` holds every node reduced (gatelists), `pods` what the pods hold (a gpufit.PodUse)."""

    nodes: dict[str, Any] | None
    pods: Any
    usage_known: bool
    warning: str | None = None


def _page(result: Completed, what: str) -> Any:
    """An answer reduced: its reader's gatelists.Page, or (an answer read whole) its stdout reduced now."""
    from kubectl_tao.gates import gatelists

    if result.value is not None:
        return result.value
    if what == "nodes":
        return gatelists.reduce(result.stdout, "nodes", signals=health_signals())
    return gatelists.reduce(result.stdout, "pods")


def _nodes(result: Completed) -> dict[str, Any]:
    return {"items": _page(result, "nodes").items}


def _held(result: Completed) -> Any:
    return _page(result, "pods").use


def _nothing_held() -> Any:
    from kubectl_tao.gates.gpufit import PodUse

    return PodUse()


def health_signals() -> tuple[Any, ...]:
    """The GPU health signals: gates/gpuhealth.py's list plus those of KUBECTL_TAO_GPU_HEALTH_SIGNALS (exit 2 for
    an entry it cannot read)."""
    from kubectl_tao.gates import gpuhealth

    return gpuhealth.parse_signals(os.environ.get(gpuhealth.SETTING))


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
    return Capacity(_nodes(nodes), _held(pods), True)


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
            _nothing_held(),
            False,
            f"cannot list nodes ({nodes.message}); GPU capacity was not checked: the job may wait Pending if no "
            "node can take it (`kubectl tao fit` needs `list nodes` and `list pods`)",
        )
    if isinstance(pods, TaoError):
        return Capacity(
            _nodes(nodes),
            _nothing_held(),
            False,
            f"cannot list pods in all namespaces ({pods.message}); the fit gate checked each node's allocatable "
            "nvidia.com/gpu only, not what is in use, so the job may still wait for GPUs",
        )
    return Capacity(_nodes(nodes), _held(pods), True)
