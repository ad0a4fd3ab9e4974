"""A Kubernetes 1.37 API server with the RestartAllContainersOnContainerExits gate off: `--max-restarts` is refused
with exit 2 and one line naming the server version and what is missing (found by the server dry run, the version
alone would say yes), nothing is created; preflight warns and fit says restarts are not available.

The cluster is its own (KWOK nodes only, no Kueue, a data directory of its own), as in test_gang_gate_off.py.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cluster import BUILD_LOCAL_CLUSTER, data_dir

from . import test_gang_gate_off as gate_off_module
from .test_gang_gate_off import GateOff, version

pytestmark = pytest.mark.e2e

GATES = "RestartAllContainersOnContainerExits=false"


@pytest.fixture(scope="module")
def gate_off() -> Iterator[GateOff]:
    if os.environ.get("KUBECTL_TAO_SKIP_E2E") == "1":
        pytest.skip("KUBECTL_TAO_SKIP_E2E=1")
    cluster = GateOff(Path(f"{data_dir()}-restarts-off"))
    cluster.env["KUBECTL_TAO_FEATURE_GATES"] = GATES
    if subprocess.run([str(BUILD_LOCAL_CLUSTER), "--check"], env=cluster.env, check=False).returncode != 0:
        pytest.skip(f"the {version()} control plane is not built (a test does not start a 12-50 min build)")
    up = cluster.local_cluster("up", timeout=600)
    try:
        assert up.returncode == 0, f"up failed ({up.returncode}):\n{up.stdout}\n{up.stderr}"
        yield cluster
    finally:
        down = cluster.local_cluster("down")
        assert down.returncode == 0, down.stderr


namespace = gate_off_module.namespace


def test_max_restarts_is_refused_in_one_line_and_nothing_is_created(
    gate_off: GateOff, namespace: str, tmp_path: Path
) -> None:
    assert (gate_off.dir / "feature-gates").read_text().strip().endswith(GATES)
    state = tmp_path / "state"
    submit = ["submit", "--image", "busybox", "--network-arch", "dino", "--action", "train", "--gpus", "8",
              "--nodes", "2", "--pvc", "tao-data", "--command", "true", "--gang", "off"]
    refused = gate_off.tao(state, namespace, *submit, "--max-restarts", "2")
    assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: --max-restarts 2: Kubernetes v{version().lstrip('v')} cannot restart a rank's "
                           "containers in place: "), last
    assert "RestartAllContainersOnContainerExits" in last
    assert gate_off.kubectl("get", "jobs,services,secrets", "-n", namespace, "-l",
                            "app.kubernetes.io/managed-by=kubectl-tao", "-o", "name").stdout == ""
    assert not (state / "jobs").exists() or not list((state / "jobs").glob("*.json"))

    fit = gate_off.tao(state, namespace, "fit", "--gpus", "8", "--nodes", "2", "-o", "json")
    assert fit.returncode == 0, fit.stderr
    assert json.loads(fit.stdout)["restarts"]["available"] is False
    preflight = gate_off.tao(state, namespace, "preflight", "--gpus", "8", "--nodes", "2", "--pvc", "tao-data")
    [line] = [line for line in preflight.stdout.splitlines() if ": restarts: " in line]
    assert line.startswith("WARN: restarts: restarts in place (--max-restarts): not available on Kubernetes "), line

    # without the flag, the same job is submitted as before
    submitted = gate_off.tao(state, namespace, *submit)
    assert submitted.returncode == 0, submitted.stderr
