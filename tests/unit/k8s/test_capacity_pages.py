"""The fit gate's paged, reduced read gives the same answers as reading every object whole.

A synthetic cluster (GPU and CPU nodes, taints, cordons, NotReady nodes; pods in every phase, unscheduled,
requesting GPUs through requests, limits, init containers and sidecars, across namespaces) is served the way
the API server pages it: the first page for PODS_FIRST_PAGE, then one page per continue token. node_gpus, the
`gpus` inventory and fit verdicts over the reduced pages must equal those over the full JSON, with msgspec and
with the json.loads fallback. An expired continue token (410) restarts the list once, then fails clearly.
"""

from __future__ import annotations

import json
import random
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from kubectl_tao.core import gpufit, gpuinventory
from kubectl_tao.core.errors import KubectlError, TaoError
from kubectl_tao.k8s import capacity, gatelists
from kubectl_tao.k8s.kubectl import Completed, Kubectl

GPU = "nvidia.com/gpu"
TOLERATE_GPU = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]
EXPIRED = (
    "Error from server (Expired): The provided continue parameter is too old to display a consistent list "
    "result. You can start a new list without the continue parameter."
)


def _container(name: str, gpus: int, how: str, **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}}
    if gpus and how in ("both", "requests"):
        resources["requests"][GPU] = str(gpus)
    if gpus and how in ("both", "limits"):
        resources["limits"][GPU] = gpus if how == "limits" else str(gpus)  # an int quantity too
    return {"name": name, "image": "img", "env": [{"name": "NOTE", "value": '{"nvidia.com/gpu": "8"}'}],
            "resources": resources, **extra}


def synthetic(nodes: int = 40, pods: int = 400, seed: int = 7) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rng = random.Random(seed)
    node_items = []
    for i in range(nodes):
        name = f"node-{i:03d}"
        labels = {"kubernetes.io/hostname": name, "zone": f"z{i % 3}"}
        status: dict[str, Any] = {
            "allocatable": {"cpu": "64", "pods": "110"},
            "conditions": [{"type": "MemoryPressure", "status": "False"},
                           {"type": "Ready", "status": "False" if i % 11 == 3 else "True"}],
            "images": [{"names": [f"img-{k}"], "sizeBytes": k} for k in range(3)],
        }
        spec: dict[str, Any] = {"podCIDR": "10.0.0.0/24"}
        if i % 4:
            status["allocatable"][GPU] = rng.choice(("4", "8", "8"))
            labels["nvidia.com/gpu.product"] = rng.choice(("H100", "A100"))
            spec["taints"] = [{"key": GPU, "value": "present", "effect": "NoSchedule"}]
        if i % 13 == 5:
            spec["unschedulable"] = True
        if i % 17 == 2:
            spec.setdefault("taints", []).append({"key": "dedicated", "value": "infra", "effect": "NoSchedule"})
        if i == 9:
            del status["conditions"]  # no Ready condition at all
        node_items.append({"metadata": {"name": name, "labels": labels, "uid": f"u{i}"}, "spec": spec,
                           "status": status})
    pod_items = []
    phases = ["Running"] * 5 + ["Pending", "Succeeded", "Failed", "Unknown"]
    for j in range(pods):
        node = rng.choice(node_items)["metadata"]["name"] if j % 23 else None  # some never scheduled
        how = rng.choice(("both", "requests", "limits"))
        gpus = rng.choice((0, 0, 1, 2, 4, 8))
        spec: dict[str, Any] = {"containers": [_container("main", gpus, how)], "restartPolicy": "Never"}
        if j % 7 == 0:
            spec["containers"].append(_container("side", rng.choice((0, 1)), "both"))
        if j % 9 == 0:  # a classic init container may need more than the main containers
            spec["initContainers"] = [_container("init", rng.choice((0, 2, 8)), "both")]
        if j % 15 == 0:  # a sidecar (restartPolicy Always) adds to everything after it
            spec.setdefault("initContainers", []).append(_container("sidecar", 1, "limits", restartPolicy="Always"))
        if node:
            spec["nodeName"] = node
        pod_items.append({
            "metadata": {"name": f"pod-{j:04d}", "namespace": f"team-{j % 5}", "labels": {"app": "x"}},
            "spec": spec,
            "status": {"phase": rng.choice(phases), "conditions": [{"type": "Ready", "status": "True"}]},
        })
    return node_items, pod_items


def listing(items: list[dict[str, Any]], token: str = "") -> str:
    meta: dict[str, Any] = {"resourceVersion": "42"}
    if token:
        meta["continue"] = token
        meta["remainingItemCount"] = 3
    return json.dumps({"kind": "List", "apiVersion": "v1", "metadata": meta, "items": items}, separators=(",", ":"))


class PagingServer:
    """Answers the pods pages as the API server would: the field selector applied (finished and unscheduled
    pods left out), `size` pods per page, a continue token per page; `expire` lists the tokens to refuse once
    (410 Expired), `expire_always` those refused every time."""

    def __init__(self, pods: list[dict[str, Any]], size: int, expire: set[str] | None = None,
                 expire_always: set[str] | None = None) -> None:
        self.pods = [p for p in pods if p["spec"].get("nodeName")
                     and p["status"]["phase"] not in ("Succeeded", "Failed")]
        self.size = size
        self.expire = set(expire or ())
        self.expire_always = set(expire_always or ())
        self.asked: list[str] = []

    def page(self, index: int) -> Completed:
        chunk = self.pods[index * self.size:(index + 1) * self.size]
        more = (index + 1) * self.size < len(self.pods)
        return Completed(listing(chunk, f"tok/{index + 1}+=" if more else ""), "", 0)

    def run(self, kc: Kubectl, args: list[str], **kwargs: Any) -> Completed:
        assert args[:2] == ["get", "--raw"] and kwargs.get("namespaced") is False
        query = parse_qs(urlsplit(args[2]).query)
        assert query["fieldSelector"] == ["status.phase!=Succeeded,status.phase!=Failed,spec.nodeName!="]
        assert query["limit"] == [str(capacity.PAGE_SIZE)]
        token = query.get("continue", [""])[0]
        self.asked.append(token)
        if not token:
            assert query["resourceVersionMatch"] == ["NotOlderThan"] and query["resourceVersion"] == ["1"]
            return self.page(0)
        assert "resourceVersion" not in query and "resourceVersionMatch" not in query
        if token in self.expire_always or token in self.expire:
            self.expire.discard(token)
            return kc.settle(Completed("", EXPIRED, 1), check=True)
        return self.page(int(token.split("/")[1].rstrip("+=")))


def full_answer(node_items: list[dict[str, Any]], pod_items: list[dict[str, Any]]) -> dict[str, Any]:
    """Everything the gate's callers compute, from every object whole."""
    nodes_json, pods_json = {"items": node_items}, {"items": pod_items}
    return answers(nodes_json, pods_json)


def answers(nodes_json: Any, pods_json: Any) -> dict[str, Any]:
    table = gpufit.node_gpus(nodes_json, pods_json)
    verdicts = [
        gpufit.fit(table, gpus, count, tolerations=TOLERATE_GPU, **extra).to_dict()
        for gpus, count, extra in [(1, 1, {}), (8, 1, {}), (8, 3, {}), (4, 6, {}), (8, 40, {}), (16, 1, {}),
                                   (2, 2, {"gpu_product": "H100"}), (4, 1, {"node_selector": {"zone": "z1"}})]
    ]
    verdicts.append(gpufit.fit(table, 4, 2).to_dict())  # without the GPU toleration
    inventory = gpuinventory.inventory(nodes_json, pods_json, None).to_dict()
    return {"table": [n.to_dict() for n in table], "verdicts": verdicts, "inventory": inventory}


def paged_read(monkeypatch: pytest.MonkeyPatch, server: PagingServer, node_items: list[dict[str, Any]]) -> Any:
    monkeypatch.setattr(Kubectl, "run", lambda self, args, **kw: server.run(self, args, **kw))
    kc = Kubectl()
    first = kc.run(capacity.PODS_FIRST_PAGE, namespaced=False)
    return capacity.read({"nodes": Completed(listing(node_items), "", 0), "pods": first}, kc)


@pytest.fixture(params=["msgspec", "json"])
def decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "json":
        monkeypatch.setattr(gatelists, "_decoders", lambda: None)
    else:
        assert gatelists._decoders() is not None, "msgspec is a dependency: it must be installed"
    return str(request.param)


def test_paged_reduced_read_answers_like_the_full_read(decoder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    node_items, pod_items = synthetic()
    server = PagingServer(pod_items, size=37)  # pages end in the middle of nodes' pods
    seen = paged_read(monkeypatch, server, node_items)
    expected = full_answer(node_items, pod_items)
    assert answers(seen.nodes, seen.pods) == expected
    pages = -(-len(server.pods) // 37)
    assert seen.pages == pages > 2
    assert server.asked == ["", *[f"tok/{i}+=" for i in range(1, pages)]]  # every token followed, once
    # the verdicts are not trivial: some fit, some queue, some never
    assert {v["verdict"] for v in expected["verdicts"]} == {"fits", "queue", "never"}
    assert sum(n["requested"] for n in expected["table"]) > 0
    # only GPU-holding pods bound to a node and not finished are kept, each small
    assert 0 < len(seen.pods["items"]) < len(server.pods)
    assert all(set(p) == {"metadata", "spec", "status"} for p in seen.pods["items"])


def test_one_page_and_an_empty_list(decoder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    node_items, pod_items = synthetic(nodes=6, pods=30, seed=3)
    seen = paged_read(monkeypatch, PagingServer(pod_items, size=1000), node_items)
    assert seen.pages == 1
    assert answers(seen.nodes, seen.pods) == full_answer(node_items, pod_items)
    empty = paged_read(monkeypatch, PagingServer([], size=5), node_items)
    assert empty.pages == 1 and empty.pods == {"items": []}


def test_the_unpaged_read_answers_like_the_full_read(decoder: str) -> None:
    node_items, pod_items = synthetic(seed=11)
    served = [p for p in pod_items if p["status"]["phase"] not in ("Succeeded", "Failed")]
    seen = capacity.read({"nodes": Completed(listing(node_items), "", 0), "pods": Completed(listing(served), "", 0)})
    assert (seen.pages, answers(seen.nodes, seen.pods)) == (1, full_answer(node_items, pod_items))


def test_an_expired_continue_token_restarts_the_list_once(decoder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    node_items, pod_items = synthetic(seed=5)
    server = PagingServer(pod_items, size=50, expire={"tok/2+="})
    seen = paged_read(monkeypatch, server, node_items)
    assert answers(seen.nodes, seen.pods) == full_answer(node_items, pod_items)  # nothing counted twice
    assert server.asked[:4] == ["", "tok/1+=", "tok/2+=", ""]
    assert server.asked.count("tok/1+=") == 2


def test_a_token_that_expires_again_is_a_one_line_error(decoder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    node_items, pod_items = synthetic(seed=5)
    server = PagingServer(pod_items, size=50, expire_always={"tok/1+="})
    with pytest.raises(TaoError) as caught:
        paged_read(monkeypatch, server, node_items)
    assert caught.value.message == (
        "kubectl get --raw pods: the API server expired the list's continue token twice (410 Expired: the read "
        "took longer than the server keeps a list's snapshot); run the command again"
    )
    assert server.asked == ["", "tok/1+=", "", "tok/1+="]


def test_other_errors_on_a_later_page_are_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    node_items, pod_items = synthetic(seed=5)
    server = PagingServer(pod_items, size=50)
    forbidden = 'Error from server (Forbidden): pods is forbidden: User "u" cannot list resource "pods"'

    def run(self: Kubectl, args: list[str], **kw: Any) -> Completed:
        if "continue=" in args[2]:
            return self.settle(Completed("", forbidden, 1), check=True)
        return server.run(self, args, **kw)

    monkeypatch.setattr(Kubectl, "run", run)
    kc = Kubectl()
    first = kc.run(capacity.PODS_FIRST_PAGE, namespaced=False)
    with pytest.raises(KubectlError, match="forbidden"):
        capacity.view({"nodes": Completed(listing(node_items), "", 0), "pods": first}, kc)


def test_a_wrong_guess_of_the_token_is_never_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    node_items, pod_items = synthetic(nodes=6, pods=60, seed=4)
    server = PagingServer(pod_items, size=10)
    first = server.page(0)
    # JSON keeps the last of two equal keys; the read-ahead guess sees the first one
    text = first.stdout.replace('"metadata":{', '"metadata":{"continue":"guess",', 1)
    monkeypatch.setattr(Kubectl, "run", lambda self, args, **kw: (
        Completed(listing([]), "", 0) if "continue=guess" in args[2] else server.run(self, args, **kw)))
    seen = capacity.read({"nodes": Completed(listing(node_items), "", 0), "pods": Completed(text, "", 0)}, Kubectl())
    assert answers(seen.nodes, seen.pods) == full_answer(node_items, pod_items)
    assert server.asked[0] == "tok/1+="


def test_a_continue_token_without_a_kubectl_is_refused() -> None:
    node_items, pod_items = synthetic(nodes=3, pods=20)
    first = PagingServer(pod_items, size=2).page(0)
    with pytest.raises(TaoError, match=r"paged pods read needs its Kubectl"):
        capacity.read({"nodes": Completed(listing(node_items), "", 0), "pods": first})


def test_unexpected_types_fall_back_to_json_with_the_same_answer() -> None:
    node_items, pod_items = synthetic(nodes=5, pods=40, seed=2)
    node_items[0]["metadata"]["labels"]["weird"] = 7  # not a string: msgspec refuses it, json.loads does not
    pod_items[0]["spec"]["containers"] = [{"name": "x", "resources": None}]
    pod_items[1]["spec"]["containers"][0]["resources"]["limits"][GPU] = {"odd": 1}  # no quantity, not hashable
    pod_items[1]["spec"]["nodeName"], pod_items[1]["status"]["phase"] = "node-001", "Running"
    text = listing(pod_items)
    assert gatelists.reduce(text, "pods").items == gatelists.reduce(text, "pods", fast=False).items
    reduced = gatelists.reduce(listing(node_items), "nodes")
    assert reduced.items == gatelists.reduce(listing(node_items), "nodes", fast=False).items
    assert reduced.items[0]["metadata"]["labels"]["weird"] == 7


def test_not_json_is_a_one_line_error_on_both_decoders() -> None:
    for fast in (True, False):
        with pytest.raises(TaoError, match=r"^kubectl get --raw pods returned output that is not JSON$"):
            gatelists.reduce("<html>", "pods", fast=fast)
        with pytest.raises(TaoError, match=r"^kubectl get --raw nodes returned JSON that is not a list$"):
            gatelists.reduce("[1]", "nodes", fast=fast)


def test_continue_token_is_read_from_the_head_without_decoding() -> None:
    assert gatelists.continue_token(listing([{"metadata": {}}], "abc")) == "abc"
    assert gatelists.continue_token(listing([])) == ""
    assert gatelists.continue_token(" " + listing([], "abc")) == ""  # a guess only: then no read ahead
    assert gatelists.continue_token("not json") == ""
