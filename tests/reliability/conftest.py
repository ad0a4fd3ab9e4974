"""Reliability tests: concurrency, injected API server faults, bad input, secrets, RBAC, records that
outlive the cluster. Every test here is marked ``reliability``; the ones that need the local control
plane use the shared ``cluster`` / ``namespace`` fixtures of tests/conftest.py (KUBECTL_TAO_CLUSTER_DIR
picks the cluster, KUBECTL_TAO_SKIP_E2E=1 skips them). The tests that stop and restart cluster components
(test_faults.py, test_outlive.py) run on a cluster this session started, or with KUBECTL_TAO_FAULTS=1. At
the end of the run one summary block says what was tried and what held (stats.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cluster import Cluster

from .helpers import ControlPlane
from .stats import STATS

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.reliability)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not STATS.touched():
        return
    terminalreporter.write_sep("=", "reliability summary")
    for line in STATS.lines():
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def control_plane(cluster: Cluster) -> Iterator[ControlPlane]:
    """The local cluster's components, to stop and start for real; everything runs again afterwards.

    Only on a cluster this test session started (as `make test` does on a fresh machine), or with
    KUBECTL_TAO_FAULTS=1: a cluster that was already up may be in use by someone else."""
    plane = ControlPlane(cluster.data_dir)
    if not plane.is_local():
        pytest.skip("fault injection needs the local provider (scripts/local-cluster up)")
    if not cluster.started_here and os.environ.get("KUBECTL_TAO_FAULTS") != "1":
        pytest.skip(
            f"the cluster in {cluster.data_dir} was already up (it may be shared): set KUBECTL_TAO_FAULTS=1 to "
            "let these tests stop and restart its API server and etcd"
        )
    yield plane
    plane.ensure_up()
