"""The fit gate's streamed, reduced read gives the same answers as reading every object whole.

A synthetic cluster (GPU and CPU nodes, taints, cordons, NotReady nodes; pods in every phase, unscheduled,
requesting GPUs through requests, limits, init containers and sidecars, across namespaces) is handed to
gatelists.reduce_stream in chunks of every size, with pieces small enough that cuts land everywhere: node_gpus,
the `gpus` inventory and fit verdicts over the reduced lists must equal those over the full JSON, with msgspec
and with the json.loads fallback. The reader runs on a real kubectl-shaped process (a script that prints the
answer), so a failed call and a broken answer are seen through real pipes.
"""

from __future__ import annotations

import json
import os
import random
import stat
from pathlib import Path
from typing import Any, ClassVar

import pytest

from kubectl_tao.core.errors import KubectlError, TaoError, UsageError
from kubectl_tao.gates import capacity, gatelists, gpufit, gpuinventory
from kubectl_tao.k8s.kubectl import Completed, Kubectl

GPU = "nvidia.com/gpu"
TOLERATE_GPU = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]


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


def listing(items: list[dict[str, Any]]) -> str:
    meta: dict[str, Any] = {"resourceVersion": "42"}
    return json.dumps({"kind": "List", "apiVersion": "v1", "metadata": meta, "items": items}, separators=(",", ":"))


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


@pytest.fixture(params=["msgspec", "json"])
def decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "json":
        monkeypatch.setattr(gatelists, "_decoders", lambda: None)
    else:
        assert gatelists._decoders() is not None, "msgspec is a dependency: it must be installed"
    return str(request.param)


def served(pod_items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the field selector lets through: pods bound to a node and not finished."""
    return [p for p in pod_items if p["spec"].get("nodeName") and p["status"]["phase"] not in ("Succeeded", "Failed")]


def chunked(text: str, size: int) -> list[bytes]:
    data = text.encode("utf-8")
    return [data[i:i + size] for i in range(0, len(data), size)]


def streamed(node_items: list[dict[str, Any]], pod_items: list[dict[str, Any]], size: int) -> Any:
    nodes = gatelists.reduce_stream(chunked(listing(node_items), size), "nodes")
    pods = gatelists.reduce_stream(chunked(listing(served(pod_items)), size), "pods")
    return {"items": nodes.items}, pods.use


@pytest.mark.parametrize("size", [1, 7, 4096])
def test_streamed_read_answers_like_the_full_read(decoder: str, size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gatelists, "PIECE_BYTES", 600)  # a few items a piece: cuts everywhere
    node_items, pod_items = synthetic()
    nodes, pods = streamed(node_items, pod_items, size)
    expected = full_answer(node_items, pod_items)
    assert answers(nodes, pods) == expected
    # the verdicts are not trivial: some fit, some queue, some never
    assert {v["verdict"] for v in expected["verdicts"]} == {"fits", "queue", "never"}
    assert sum(n["requested"] for n in expected["table"]) > 0
    # no pod is kept: the GPUs they hold are summed per node and per namespace there, as from every pod whole
    assert pods == gpufit.pod_use({"items": pod_items})
    holders = [p for p in served(pod_items) if gpufit.pod_gpu_request(p)]
    assert 0 < len(holders) == sum(n for _, n in pods.per_node.values()) < len(served(pod_items))


def test_pieces_are_cut_while_the_answer_arrives(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gatelists, "PIECE_BYTES", 2000)
    cut: list[int] = []
    real = gatelists._piece
    monkeypatch.setattr(gatelists, "_piece", lambda text, end, first, what, signals, found: cut.append(end)
                        or real(text, end, first, what, signals, found))
    _, pod_items = synthetic(nodes=10, pods=200, seed=9)
    whole = listing(served(pod_items))
    page = gatelists.reduce_stream(chunked(whole, 1000), "pods")
    assert len(cut) > 5 and max(cut) < 6000  # never the whole answer at once
    assert page == gatelists.reduce(whole, "pods")


def test_an_empty_list_and_a_pretty_printed_one(decoder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gatelists, "PIECE_BYTES", 100)
    _, pod_items = synthetic(nodes=6, pods=30, seed=3)
    empty = gatelists.reduce_stream(chunked(listing([]), 5), "pods")
    assert empty == gatelists.Page() == gatelists.reduce_stream([], "pods")
    pretty = json.dumps({"kind": "List", "items": served(pod_items)}, indent=2)  # no cut point: read whole
    page = gatelists.reduce_stream(chunked(pretty, 64), "pods")
    assert page == gatelists.reduce(listing(served(pod_items)), "pods")


class _Searched(bytes):
    """A chunk that counts how often it is searched for an item boundary."""

    searches: ClassVar[list[int]] = []

    def rfind(self, *args: Any) -> int:  # type: ignore[override]
        self.searches.append(len(self))
        return super().rfind(*args)


@pytest.mark.parametrize("pretty", [True, False])
def test_each_chunk_is_searched_once(pretty: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretty-printed JSON has no cut point at all: the held bytes are never searched again as more come (that
    was quadratic in the answer's size); a compact answer is cut as before."""
    monkeypatch.setattr(gatelists, "PIECE_BYTES", 2000)
    monkeypatch.setattr(_Searched, "searches", [])
    _, pod_items = synthetic(nodes=6, pods=120, seed=14)
    kept = served(pod_items)
    text = json.dumps({"kind": "List", "items": kept}, indent=2) if pretty else listing(kept)
    chunks = [_Searched(c) for c in chunked(text, 100)]
    pieces: list[int] = []
    real = gatelists._piece
    monkeypatch.setattr(gatelists, "_piece", lambda *args: pieces.append(1) or real(*args))
    page = gatelists.reduce_stream(chunks, "pods")
    assert page == gatelists.reduce(listing(kept), "pods")
    assert len(_Searched.searches) == len(chunks)
    assert (pieces == []) if pretty else (len(pieces) > 10)


def test_a_cut_inside_an_item_is_not_json_and_the_rest_is_read_whole(decoder: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gatelists, "PIECE_BYTES", 1)
    _, pod_items = synthetic(nodes=6, pods=40, seed=4)
    kept = served(pod_items)
    # an array nested in an item whose objects start with "metadata": the bytes between them look like a cut
    kept[3]["spec"]["extra"] = [{"metadata": {"a": 1}}, {"metadata": {"b": 2}}, {"metadata": {}}]
    whole = listing(kept)
    page = gatelists.reduce_stream(chunked(whole, 1), "pods")
    assert page == gatelists.reduce(whole, "pods")


def _whole_pieces(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the pieces reduced whole (the selective decode gave up on them)."""
    whole: list[int] = []
    real = gatelists.reduce
    monkeypatch.setattr(gatelists, "reduce", lambda text, what, **kw: whole.append(len(text)) or real(text, what, **kw))
    return whole


def test_only_pods_that_name_the_gpu_resource_are_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gatelists, "PIECE_BYTES", 3000)
    _, pod_items = synthetic(nodes=10, pods=300, seed=12)
    kept = served(pod_items)
    for pod in kept[::2]:  # half of them name no GPU anywhere (not even in a string)
        for container in pod["spec"]["containers"] + pod["spec"].get("initContainers", []):
            container["env"] = []
            for resources in container["resources"].values():
                resources.pop(GPU, None)
    expected = gatelists.reduce(listing(kept), "pods", fast=False)
    decoded: list[bytes] = []
    types = gatelists._decoders()
    pod_decoder = types.ONE["pods"]

    class Counting:
        def decode(self, text: bytes) -> Any:
            decoded.append(text)
            return pod_decoder.decode(text)

    monkeypatch.setitem(types.ONE, "pods", Counting())
    whole = _whole_pieces(monkeypatch)
    pieces: list[int] = []
    real = gatelists._in_place
    monkeypatch.setattr(gatelists, "_in_place", lambda *args: pieces.append(1) or real(*args))
    page = gatelists.reduce_stream(chunked(listing(kept), 512), "pods")
    assert page == expected
    assert len(whole) == 1 and whole[0] < 4000  # the rest after the last cut, nothing else read whole
    unnamed = [d for d in decoded if b'"nvidia.com/gpu"' not in bytes(d)]
    assert len(pieces) > 10 and len(unnamed) <= len(pieces)  # at most each piece's last pod
    assert len(decoded) < len(kept) * 3 // 4


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_pod_cut_inside_itself_is_never_misread(where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cut inside a GPU pod (a nested array whose objects start with "metadata", before or after the part
    that names the GPU) leaves parts that are not JSON alone: that piece is reduced whole, same answer."""
    monkeypatch.setattr(gatelists, "PIECE_BYTES", 1)
    _, pod_items = synthetic(nodes=6, pods=60, seed=5)
    kept = served(pod_items)
    gpu_pods = [p for p in kept if gpufit.pod_gpu_request(p)]
    odd = [{"metadata": {"a": 1}}, {"metadata": {"b": 2}}]
    for pod in gpu_pods[:2]:  # two such pods: their parts must not pair up either
        if where == "before":
            pod["metadata"]["extra"] = odd
        else:
            pod["spec"]["extra"] = odd
    whole_text = listing(kept)
    expected = gatelists.reduce(whole_text, "pods", fast=False)
    whole = _whole_pieces(monkeypatch)
    page = gatelists.reduce_stream(chunked(whole_text, 1), "pods")
    assert page == expected
    assert len(whole) >= 2  # the piece cut inside the first of them, then the rest


@pytest.mark.parametrize("where", ["metadata", "status"])
def test_a_node_cut_inside_itself_is_never_misread(where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every node is decoded on its own: a cut inside one makes that piece, and the rest, read whole."""
    monkeypatch.setattr(gatelists, "PIECE_BYTES", 1)
    node_items, _ = synthetic(nodes=30, pods=0, seed=13)
    for node in node_items[4:6]:
        node[where]["extra"] = [{"metadata": {"a": 1}}, {"metadata": {"b": 2}}, {"metadata": {}}]
    whole_text = listing(node_items)
    expected = gatelists.reduce(whole_text, "nodes", fast=False).items
    whole = _whole_pieces(monkeypatch)
    page = gatelists.reduce_stream(chunked(whole_text, 1), "nodes")
    assert page.items == expected and len(page.items) == 30
    assert len(whole) >= 2


def test_a_list_head_that_is_not_json_alone_reads_the_piece_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gatelists, "PIECE_BYTES", 1)
    _, pod_items = synthetic(nodes=6, pods=20, seed=8)
    text = listing(served(pod_items)).replace('"metadata":{"resourceVersion":"42"}', '"metadata":{"x":[1,')
    whole = _whole_pieces(monkeypatch)
    with pytest.raises(TaoError, match=r"^kubectl get --raw pods returned output that is not JSON$"):
        gatelists.reduce_stream(chunked(text, 1), "pods")
    assert len(whole) == 2  # the first piece, then the rest: the broken head is json's to name


def test_an_answer_that_is_not_json_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gatelists, "PIECE_BYTES", 10)
    text = listing([{"metadata": {"namespace": "a"}}, {"metadata": {"namespace": "b"}}])[:-5] + "<html>"
    with pytest.raises(TaoError, match=r"^kubectl get --raw pods returned output that is not JSON$"):
        gatelists.reduce_stream(chunked(text, 3), "pods")


def test_answers_read_whole_are_reduced_too(decoder: str) -> None:
    node_items, pod_items = synthetic(seed=11)
    seen = capacity.read({"nodes": Completed(listing(node_items), "", 0),
                          "pods": Completed(listing(served(pod_items)), "", 0)})
    assert answers(seen.nodes, seen.pods) == full_answer(node_items, pod_items)


def test_the_calls_read_one_answer_each_from_the_watch_cache() -> None:
    calls = capacity.calls()
    assert [calls[k][0] for k in ("nodes", "pods")] == [capacity.NODES_READ, capacity.PODS_READ]
    assert capacity.PODS_PATH.endswith("&resourceVersion=0") and "limit=" not in capacity.PODS_PATH
    assert all(callable(calls[k][1]["reader"]) for k in ("nodes", "pods"))


def test_a_health_setting_that_cannot_be_read_stops_before_any_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECTL_TAO_GPU_HEALTH_SIGNALS", "label:x")
    with pytest.raises(UsageError, match=r"^KUBECTL_TAO_GPU_HEALTH_SIGNALS: cannot read 'label:x'"):
        capacity.calls()


# ------------------------------------------------------------------------------- through a real process


def printer(tmp_path: Path, stdout: str, stderr: str = "", code: int = 0) -> Kubectl:
    """A kubectl stand-in that prints STDOUT (in several writes) and STDERR and exits CODE."""
    (tmp_path / "out").write_text(stdout)
    (tmp_path / "err").write_text(stderr)
    script = tmp_path / "kubectl"
    script.write_text(f"#!/bin/sh\nsplit -b 3000 --filter=cat '{tmp_path}/out'\ncat '{tmp_path}/err' >&2\n"
                      f"exit {code}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return Kubectl(binary=str(script))


def test_the_read_runs_through_a_real_pipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gatelists, "PIECE_BYTES", 5000)
    node_items, pod_items = synthetic(nodes=30, pods=300, seed=6)
    (tmp_path / "n").mkdir()
    (tmp_path / "p").mkdir()
    nodes_kc = printer(tmp_path / "n", listing(node_items))
    pods_kc = printer(tmp_path / "p", listing(served(pod_items)))
    calls = capacity.calls()
    nodes = nodes_kc.run(calls["nodes"][0], **calls["nodes"][1])
    pods = pods_kc.run(calls["pods"][0], **calls["pods"][1])
    assert nodes.stdout == pods.stdout == ""
    seen = capacity.read({"nodes": nodes, "pods": pods})
    assert answers(seen.nodes, seen.pods) == full_answer(node_items, pod_items)


def test_a_failed_call_is_kubectls_error_not_the_readers(tmp_path: Path) -> None:
    forbidden = 'Error from server (Forbidden): pods is forbidden: User "u" cannot list resource "pods"\n'
    kc = printer(tmp_path, "<html>not an answer</html>", forbidden, 1)
    args, kwargs = capacity.calls()["pods"]
    with pytest.raises(KubectlError, match="forbidden"):
        kc.run(args, **kwargs)
    answer = kc.run(args, **{**kwargs, "check": False})
    assert (answer.returncode, answer.value) == (1, None)


def test_a_broken_answer_of_a_call_that_succeeded_is_the_readers_error(tmp_path: Path) -> None:
    kc = printer(tmp_path, "x" * 100_000)
    args, kwargs = capacity.calls()["pods"]
    with pytest.raises(TaoError, match=r"^kubectl get --raw pods returned output that is not JSON$"):
        kc.run(args, **kwargs)
    assert not [p for p in os.listdir("/proc") if p.isdigit() and _is_child_zombie(p)]


def _is_child_zombie(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] == "Z" and fields[1] == str(os.getpid())


def test_unexpected_types_fall_back_to_json_with_the_same_answer() -> None:
    node_items, pod_items = synthetic(nodes=5, pods=40, seed=2)
    node_items[0]["metadata"]["annotations"] = {"weird": 7}  # not read, and no type for it: both decoders agree
    node_items[1]["status"]["allocatable"][GPU] = 8  # a count as a number: msgspec and json.loads read it alike
    pod_items[0]["spec"]["containers"] = [{"name": "x", "resources": None}]
    pod_items[1]["spec"]["containers"][0]["resources"]["limits"][GPU] = {"odd": 1}  # no quantity, not hashable
    pod_items[1]["spec"]["nodeName"], pod_items[1]["status"]["phase"] = "node-001", "Running"
    text = listing(pod_items)
    assert gatelists.reduce(text, "pods") == gatelists.reduce(text, "pods", fast=False)
    reduced = gatelists.reduce(listing(node_items), "nodes")
    assert reduced.items == gatelists.reduce(listing(node_items), "nodes", fast=False).items
    assert reduced.items[1]["status"]["allocatable"][GPU] == 8


# A node of a shape no API server sends: the item is spliced into the compact answer as raw JSON text where the
# placeholder stands, so it can be nested or long past what json.dumps itself would write.
_ANSWERED = "an API server never sends that: check the server or proxy the kubeconfig points at"
_SPLICE = '"@@"'


_Q = f"{GPU} of the wrong shape"
# case -> (where in node-002 (metadata, spec or status), key, value, raw JSON for the placeholder, the problem)
_MALFORMED: dict[str, tuple[str, str, Any, str | None, str]] = {
    "labels-list": ("metadata", "labels", ["zone=z1", "rack=r1"], None,
                    "metadata.labels of the wrong shape (a list, not a map of strings)"),
    "label-number": ("metadata", "labels", {"zone": "z1", "rack": 7}, None,
                     "metadata.labels of the wrong shape (a label whose value is a whole number, not a string)"),
    "taints-object": ("spec", "taints", {"key": GPU}, None,
                      "spec.taints of the wrong shape (an object, not a list of taints)"),
    "unschedulable-text": ("spec", "unschedulable", "yes", None,
                           "spec.unschedulable of the wrong shape (a string, not true or false)"),
    "conditions-text": ("status", "conditions", "Ready", None,
                        "status.conditions of the wrong shape (a string, not a list of conditions)"),
    "quantity-5000-digits": ("status", "allocatable", {GPU: "9" * 5000}, None,
                             f"status.allocatable {_Q} (a quantity of 5000 characters, longer than any count)"),
    "quantity-past-int64": ("status", "capacity", {GPU: "1e30"}, None,
                            f"status.capacity {_Q} (a count past 9223372036854775807)"),
    "quantity-list": ("status", "allocatable", {GPU: ["8"]}, None, f"status.allocatable {_Q} (a list, not a quantity)"),
    "number-5000-digits": ("status", "capacity", {GPU: "@@"}, "9" * 5000,
                           "a number of more digits than a reader takes"),
    "number-infinite": ("status", "allocatable", {GPU: "@@"}, "1e400",
                        f"status.allocatable {_Q} (a number past any count)"),
    "nested-100000-deep": ("metadata", "annotations", {"deep": "@@"}, "[" * 100_000 + "]" * 100_000,
                           "JSON nested deeper than a reader follows"),
}
MALFORMED = list(_MALFORMED)


def _malformed(case: str) -> tuple[str, str]:
    """(the nodes answer with node-002 malformed as CASE says, the expected error)."""
    node_items, _ = synthetic(nodes=6, pods=0, seed=3)
    part, key, value, raw, problem = _MALFORMED[case]
    node_items[2][part][key] = value
    text = listing(node_items)
    if raw is not None:
        text = text.replace(_SPLICE, raw)
    return text, f"kubectl get --raw nodes: node node-002 has {problem}; {_ANSWERED}"


@pytest.mark.parametrize("case", MALFORMED)
@pytest.mark.parametrize("size", [0, 64, 1 << 20])
def test_a_node_of_the_wrong_shape_is_one_line_naming_it_on_every_read(
    decoder: str, case: str, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gatelists, "PIECE_BYTES", 500)  # cut into pieces of a node or two: the bad one in its own
    text, expected = _malformed(case)
    with pytest.raises(TaoError) as caught:
        if size:
            gatelists.reduce_stream(chunked(text, size), "nodes")
        else:
            gatelists.reduce(text, "nodes")
    assert caught.value.message == expected
    assert caught.value.exit_code == 1


def test_a_bad_name_or_an_unreadable_list_is_still_one_line() -> None:
    node_items, _ = synthetic(nodes=2, pods=0)
    node_items[1]["metadata"]["name"] = ["node-001"]
    with pytest.raises(TaoError) as caught:
        gatelists.reduce(listing(node_items), "nodes")
    assert caught.value.message == (
        f"kubectl get --raw nodes: node named a list has metadata.name of the wrong shape (a list, not a string); "
        f"{_ANSWERED}"
    )
    node_items[1]["metadata"]["name"] = "node\n001"
    node_items[1]["metadata"]["labels"] = "zone=z1"
    with pytest.raises(TaoError) as caught:
        gatelists.reduce(listing(node_items), "nodes")
    assert caught.value.message == (
        'kubectl get --raw nodes: node named "node\\n001" has metadata.labels of the wrong shape (a string, not a '
        f"map of strings); {_ANSWERED}"
    )
    for text in ('{"items":' + "[" * 100_000 + "]" * 100_000 + "}", '{"items":[' + "9" * 5000 + "]}"):
        for what in ("nodes", "pods"):
            with pytest.raises(TaoError) as caught:
                gatelists.reduce(text, what)
            assert caught.value.message == (
                f"kubectl get --raw {what} returned JSON nested too deep or with a number too long to read; {_ANSWERED}"
            )


def test_not_json_is_a_one_line_error_on_both_decoders() -> None:
    for fast in (True, False):
        with pytest.raises(TaoError, match=r"^kubectl get --raw pods returned output that is not JSON$"):
            gatelists.reduce("<html>", "pods", fast=fast)
        with pytest.raises(TaoError, match=r"^kubectl get --raw nodes returned JSON that is not a list$"):
            gatelists.reduce("[1]", "nodes", fast=fast)
