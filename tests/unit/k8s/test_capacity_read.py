"""The fit gate's shared read: nodes and running pods through two `get --raw` calls at once, items as the API
server lists them (no `kind`), finished pods left out by the server's field selector."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl, fixture_json

from kubectl_tao.core.errors import TaoError
from kubectl_tao.gates import capacity
from kubectl_tao.gates.gpuinventory import DRA_READ
from kubectl_tao.k8s.kubectl import Completed

NODES_FORBIDDEN = 'Error from server (Forbidden): nodes is forbidden: User "u" cannot list resource "nodes"'


def test_reads_are_raw_cached_and_skip_finished_pods() -> None:
    nodes_path, pods_path = capacity.NODES_READ[2], capacity.PODS_READ[2]
    assert capacity.NODES_READ[:2] == capacity.PODS_READ[:2] == ["get", "--raw"]
    assert nodes_path.startswith("/api/v1/nodes?") and "resourceVersion=0" in nodes_path
    assert "resourceVersion=0" in pods_path
    assert "fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed" in pods_path


def test_items_without_kind_are_counted(cli: Any, fake_kubectl: FakeKubectl) -> None:
    fake_kubectl.capacity({"items": fixture_json("nodes-2x8.json")["items"] + fixture_json("pods-busy.json")["items"]})
    fake_kubectl.on("get", "localqueues.kueue.x-k8s.io", stderr="error: the server doesn't have a resource type", rc=1)
    fake_kubectl.on(*DRA_READ[:2], data={"items": []})
    code, out, err = cli("fit", "--gpus", "4", "-o", "json")
    assert (code, err) == (0, ""), out
    data = json.loads(out)
    # the running pods' requests are counted although the raw items name no kind
    assert (data["verdict"], data["inUse"], data["chosen"]) == ("fits", 8, ["gpu-node-1"])


def test_nodes_forbidden_with_pods_allowed_leaves_capacity_unchecked() -> None:
    from kubectl_tao.core.errors import KubectlError

    seen = capacity.view({
        "nodes": KubectlError(NODES_FORBIDDEN, stderr=NODES_FORBIDDEN, reason="Forbidden"),
        "pods": Completed('{"items": []}', "", 0),
    })
    assert seen.nodes is None and not seen.usage_known
    assert seen.warning and seen.warning.startswith("cannot list nodes") and "was not checked" in seen.warning


def test_output_that_is_not_json_is_one_line_error() -> None:
    with pytest.raises(TaoError, match=r"^kubectl get --raw nodes returned output that is not JSON$"):
        capacity.read({"nodes": Completed("<html>", "", 0), "pods": Completed('{"items": []}', "", 0)})
