"""The fit gate's cluster read, one function for submit, fit, preflight, explain and gpus.

`kubectl get --raw` of the nodes and of the pods that are bound to a node and not Succeeded or Failed (finished
and unscheduled pods hold no GPUs, so a long history or a queue of pending pods costs nothing), run at once
with the caller's other reads. `--raw` hands the API server's bytes through; `get nodes,pods -o json` made
kubectl decode and re-encode every object. Each answer is reduced at once to what the gate reads
(k8s/gatelists.py), so the plugin never holds whole pods.

A caller that passes its Kubectl (`calls(paged=True)`, then `read(results, kc)` / `view(results, kc)`) reads
the pods in pages of PAGE_SIZE: each page is reduced and dropped while the next one is fetched, which bounds
the memory at a page. The first page is served from the API server's watch cache (`resourceVersionMatch=
NotOlderThan`: `resourceVersion=0`, the usual way to ask for the cache, makes the server ignore `limit` and
send everything at once); the following pages come from the same snapshot through the continue token. When
the token has expired (410 Expired: the read outlived the snapshot and etcd's compaction) the list is read
again from the start once. Without a Kubectl the pods come in one answer (`resourceVersion=0`). The nodes come
in one answer either way. The gate is a snapshot that may be a moment old either way; the scheduler has the
last word.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from kubectl_tao.core.errors import KubectlError, TaoError
from kubectl_tao.core.valueclass import Value, record
from kubectl_tao.k8s.kubectl import Completed

if TYPE_CHECKING:
    from kubectl_tao.k8s.kubectl import Kubectl

PAGE_SIZE = 10000
_POD_FIELDS = quote("status.phase!=Succeeded,status.phase!=Failed,spec.nodeName!=", safe="")
NODES_PATH = "/api/v1/nodes?resourceVersion=0"
PODS_PATH = f"/api/v1/pods?fieldSelector={_POD_FIELDS}&resourceVersion=0"
NODES_READ = ["get", "--raw", NODES_PATH]
PODS_READ = ["get", "--raw", PODS_PATH]


def pods_page_path(token: str = "", limit: int | None = None) -> str:
    """The first page of the pods (no token) or the page a continue token points at (PAGE_SIZE pods)."""
    limit = limit or PAGE_SIZE
    if token:
        return f"/api/v1/pods?fieldSelector={_POD_FIELDS}&limit={limit}&continue={quote(token, safe='')}"
    return f"/api/v1/pods?fieldSelector={_POD_FIELDS}&limit={limit}&resourceVersion=1&resourceVersionMatch=NotOlderThan"


def pods_page_read(token: str = "") -> list[str]:
    return ["get", "--raw", pods_page_path(token)]


PODS_FIRST_PAGE = pods_page_read()


def calls(*, paged: bool = False) -> dict[str, tuple[list[str], dict[str, Any]]]:
    """The two reads, keyed "nodes" and "pods", to merge into a caller's `Kubectl.run_many`. `paged`: the pods'
    first page only; the caller must then hand its Kubectl to `read`/`view` for the rest."""
    pods = PODS_FIRST_PAGE if paged else PODS_READ
    return {"nodes": (NODES_READ, {"namespaced": False}), "pods": (pods, {"namespaced": False})}


@record(frozen=True)
class Capacity(Value):
    """What the gate can see. `nodes` None: nodes could not be listed (capacity unknown); `usage_known`
    False: pods could not be listed, so `pods` is empty and only each node's allocatable is known. Both hold
    reduced items (gatelists): every node, and the pods that hold GPUs on a node. `pages`: pod pages read."""

    nodes: dict[str, Any] | None
    pods: dict[str, Any]
    usage_known: bool
    warning: str | None = None
    pages: int = 0


def _expired(error: TaoError) -> bool:
    return isinstance(error, KubectlError) and "(expired)" in (error.stderr or error.message).lower()


def _pods(first: Completed, kc: Kubectl | None) -> tuple[list[dict[str, Any]], int]:
    """Every page's reduced pods, starting from the answer to the first read; the next page is fetched while
    the current one is reduced. An expired continue token restarts the list once."""

    from kubectl_tao.k8s import gatelists  # here: the calls start before the reducer (and the fit code) loads

    def fetch(token: str) -> Completed:
        assert kc is not None
        return kc.run(pods_page_read(token), namespaced=False)

    items: list[dict[str, Any]] = []
    pages, restarted, result = 0, False, first
    pool: Any = None  # one worker for every next page, made only when there is one (a single page is the usual read)
    try:
        while True:
            ahead = gatelists.continue_token(result.stdout) if kc is not None else ""
            if ahead and pool is None:
                from concurrent.futures import ThreadPoolExecutor

                pool = ThreadPoolExecutor(max_workers=1)
            upcoming = pool.submit(fetch, ahead) if ahead else None
            page = gatelists.reduce(result.stdout, "pods")
            items += page.items
            pages += 1
            if not page.token:
                return items, pages
            if kc is None:
                raise TaoError("internal error: a paged pods read needs its Kubectl (capacity.read(results, kc))")
            try:
                result = upcoming.result() if upcoming is not None and ahead == page.token else fetch(page.token)
            except KubectlError as exc:
                if not _expired(exc):
                    raise
                if restarted:
                    raise TaoError(
                        "kubectl get --raw pods: the API server expired the list's continue token twice (410 "
                        "Expired: the read took longer than the server keeps a list's snapshot); run the command "
                        "again"
                    ) from None
                restarted, items = True, []
                result = fetch("")
    finally:
        if pool is not None:
            pool.shutdown(wait=True)


def health_signals() -> tuple[Any, ...]:
    """The GPU health signals: core/gpuhealth.py's list plus those of KUBECTL_TAO_GPU_HEALTH_SIGNALS (exit 2 for
    an entry it cannot read)."""
    from kubectl_tao.core import gpuhealth

    return gpuhealth.parse_signals(os.environ.get(gpuhealth.SETTING))


def _nodes(result: Completed) -> dict[str, Any]:
    from kubectl_tao.k8s import gatelists

    return {"items": gatelists.reduce(result.stdout, "nodes", signals=health_signals()).items}


def _forbidden(result: Completed | TaoError) -> bool:
    return isinstance(result, KubectlError) and result.reason == "Forbidden"


def read(results: Mapping[str, Completed | TaoError], kc: Kubectl | None = None) -> Capacity:
    """Nodes and running pods, or the first error (fit and gpus: no fallback)."""
    for key in ("nodes", "pods"):
        error = results[key]
        if isinstance(error, TaoError):
            raise error
    nodes, pods = results["nodes"], results["pods"]
    assert isinstance(nodes, Completed) and isinstance(pods, Completed)
    node_items = _nodes(nodes)
    pod_items, pages = _pods(pods, kc)
    return Capacity(node_items, {"items": pod_items}, True, pages=pages)


def view(results: Mapping[str, Completed | TaoError], kc: Kubectl | None = None) -> Capacity:
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
            _nodes(nodes),
            {"items": []},
            False,
            f"cannot list pods in all namespaces ({pods.message}); the fit gate checked each node's allocatable "
            "nvidia.com/gpu only, not what is in use, so the job may still wait for GPUs",
        )
    pod_items, pages = _pods(pods, kc)
    return Capacity(_nodes(nodes), {"items": pod_items}, True, pages=pages)
