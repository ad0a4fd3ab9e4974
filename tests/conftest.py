"""Fixtures shared by the tests that need the real local control plane (tests/e2e, tests/reliability).

- ``cluster`` (session): reuses a running cluster (``scripts/local-cluster status`` exits 0) or brings
  one up, and tears it down at the end only if it started it (KUBECTL_TAO_KEEP_CLUSTER=1 keeps it).
  The data directory is ``KUBECTL_TAO_CLUSTER_DIR`` (default ``${TMPDIR:-/tmp}/kubectl-tao-cluster``),
  as for scripts/local-cluster. Yields an support.cluster.Cluster: ``.kubeconfig``, ``.bin_dir``,
  ``.data_dir``, ``.env`` (a full environment for subprocesses: os.environ plus KUBECONFIG and PATH
  with the cluster's kubectl first), ``.started_here`` and ``.kubectl(...)``.
- ``namespace`` (function): a fresh namespace whose ``default`` ServiceAccount exists; deleted afterwards.

KUBECTL_TAO_SKIP_E2E=1 skips every test that needs the cluster.

In CI (``CI=true``) a real-path test cannot pass by skipping: a skip in tests/e2e or tests/install, or of any test
that uses the ``cluster`` fixture (tests/reliability's cluster tests), is reported as a failure that names why the
test could not run (no root, no bridge, a reused cluster without real nodes, KUBECTL_TAO_SKIP_E2E=1, ...).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest
from support.ci import real_path, skip_in_ci
from support.cluster import (
    BUILD_LOCAL_CLUSTER,
    LOCAL_CLUSTER,
    Cluster,
    current_cluster,
    data_dir,
    kubectl,
    unique_name,
    wait_for,
)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    if (
        report.skipped
        and not hasattr(report, "wasxfail")
        and os.environ.get("CI") == "true"
        and real_path(item.path, getattr(item, "fixturenames", ()))
    ):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = skip_in_ci(reason)


# A cold build of the binaries takes 12-50 min on 2 cores (22 min of CPU for 1.37.2); a warm start about 30 s.
UP_TIMEOUT_S = 3600


def _run(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LOCAL_CLUSTER), *args], capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    if os.environ.get("KUBECTL_TAO_SKIP_E2E") == "1":
        pytest.skip("KUBECTL_TAO_SKIP_E2E=1")
    started = False
    if _run("status", timeout=60).returncode != 0:
        cached = subprocess.run([str(BUILD_LOCAL_CLUSTER), "--check"], check=False).returncode == 0
        if not cached and shutil.which("go") is None:
            pytest.skip(
                "the local cluster binaries are not cached and Go is not installed "
                "(run scripts/build-local-cluster on a machine with Go >= 1.26)"
            )
        up = _run("up", timeout=UP_TIMEOUT_S)
        if up.returncode != 0:
            pytest.fail(f"scripts/local-cluster up failed ({up.returncode}):\n{up.stdout}\n{up.stderr}")
        # Another session may have started it between our status and up (the lock serializes them).
        started = "already up" not in up.stdout
    if not started:
        _check_real_nodes()
    yield current_cluster(started_here=started)
    if started and os.environ.get("KUBECTL_TAO_KEEP_CLUSTER") != "1":
        _run("down", timeout=120)


def _check_real_nodes() -> None:
    """A reused cluster must have the real nodes the real-node tests need, else they would all skip."""
    wanted = int(os.environ.get("KUBECTL_TAO_REAL_NODES") or 2)
    mode = data_dir() / "gpus-mode"
    if wanted == 0 or (mode.exists() and mode.read_text(encoding="utf-8").strip() == "host"):
        return  # asked for none (their tests skip, saying so), or a workstation cluster of real GPUs
    listed = kubectl("get", "nodes", "-l", "kubectl-tao.io/real-node=true", "-o", "name", check=False)
    have = len(listed.stdout.split())
    if have < wanted:
        pytest.fail(
            f"the running local cluster in {data_dir()} has {have} of the {wanted} real nodes the real-node tests "
            "need (it was started with KUBECTL_TAO_REAL_NODES=0 or by another provider); stop it with "
            "`make cluster-down` and run the tests again as root (or set KUBECTL_TAO_REAL_NODES=0 to leave them out)"
        )


@pytest.fixture()
def namespace(cluster: Cluster) -> Iterator[str]:
    name = unique_name("e2e")
    kubectl("create", "namespace", name)
    wait_for(
        lambda: kubectl("get", "serviceaccount", "default", ns=name, check=False).returncode == 0,
        timeout=120,
        message=f"the default ServiceAccount in {name}",
    )
    yield name
    kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)
