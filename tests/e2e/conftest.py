"""Fixtures for the end-to-end tests on the real local control plane (scripts/local-cluster).

- ``cluster`` (session) and ``namespace`` (function) come from tests/conftest.py (shared with
  tests/reliability).
- ``tao`` (function): a helpers.Tao that runs the real plugin in that namespace with its own TAO_STATE_DIR
  and a kubectl trace, plus a Bound ReadWriteMany PVC ``tao-data`` and an image-pull Secret ``ngc``.

KUBECTL_TAO_SKIP_E2E=1 skips every test in this directory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cluster import Cluster, Tao, bound_claim_objects, wait_for

HERE = Path(__file__).resolve().parent


def _order(item: pytest.Item) -> tuple[bool, bool]:
    module = getattr(item, "module", None)
    return not getattr(module, "OWN_CLUSTER", False), not getattr(module, "FIRST_ON_SHARED_CLUSTER", False)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = os.environ.get("KUBECTL_TAO_SKIP_E2E") == "1"
    # Modules that start a cluster of their own with real nodes (OWN_CLUSTER) run first, before the session's
    # cluster (one bridge for real nodes per machine); then the demo (FIRST_ON_SHARED_CLUSTER), the first check of
    # the session's cluster and its real nodes; the order is otherwise kept.
    items.sort(key=_order)
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.e2e)
            if skip:
                item.add_marker(pytest.mark.skip(reason="KUBECTL_TAO_SKIP_E2E=1"))


@pytest.fixture()
def tao(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[Tao]:
    t = Tao(cluster, namespace, tmp_path / "state")
    pv = f"pv-{namespace}"
    t.kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [
                    *bound_claim_objects(namespace, pv),
                    {
                        "apiVersion": "v1",
                        "kind": "Secret",
                        "metadata": {"name": "ngc", "namespace": namespace},
                        "type": "kubernetes.io/dockerconfigjson",
                        "stringData": {".dockerconfigjson": json.dumps({"auths": {"nvcr.io": {"auth": "eDp5"}}})},
                    },
                ],
            }
        ),
    )
    wait_for(
        lambda: t.kubectl("get", "pvc", "tao-data", "-o", "jsonpath={.status.phase}").stdout == "Bound",
        60,
        message="PVC tao-data to bind",
    )
    yield t
    t.kubectl("delete", "pv", pv, "--ignore-not-found", "--wait=false", check=False)
