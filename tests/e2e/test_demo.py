"""`make demo` (scripts/demo) on the session's cluster, before any other test uses it: every step it announces
runs, and its two real-node steps show the lines the real containers printed.

The demo reuses the session's cluster (`local-cluster up` finds it up); its records go to the test's own
TAO_STATE_DIR. Its namespace and PersistentVolume are removed afterwards.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import ROOT
from support.cluster import Cluster, kubectl

pytestmark = pytest.mark.e2e

FIRST_ON_SHARED_CLUSTER = True  # tests/e2e/conftest.py runs this module first of those on the session's cluster
DEMO = ROOT / "scripts" / "demo"
DEMO_TIMEOUT_S = 1200  # the torch image may still be importing into the real nodes when the demo starts


@pytest.fixture()
def demo_namespace(cluster: Cluster) -> Iterator[str]:
    yield "tao-demo"
    kubectl("delete", "namespace", "tao-demo", "--ignore-not-found", "--timeout=120s", check=False, timeout=150)
    kubectl("delete", "pv", "tao-demo-data", "--ignore-not-found", "--timeout=60s", check=False, timeout=90)


def test_the_demo_runs_every_step_and_shows_the_real_containers(
    cluster: Cluster, demo_namespace: str, tmp_path: Path
) -> None:
    env = {**cluster.env, "TAO_STATE_DIR": str(tmp_path / "state")}
    env.pop("KUBECTL_TAO_REAL_NODES", None)  # the demo's own default: its two real-node steps run
    env.pop("TAO_K8S_NAMESPACE", None)
    result = subprocess.run(
        [str(DEMO)], env=env, capture_output=True, text=True, timeout=DEMO_TIMEOUT_S, check=False, cwd=ROOT
    )
    out = result.stdout
    assert result.returncode == 0, f"{out}\n{result.stderr}"
    steps = re.findall(r"^\x1b\[1m== (\d)\. ", out, flags=re.M)
    assert steps == ["1", "2", "3", "4", "5", "6", "7"], out
    assert "left out" not in out
    # step 5: one container on a real node printed its hostname, kernel and the (fake) GPUs it was given
    assert re.search(r"^(\[\S+\] )?hostname: \S+$", out, flags=re.M), out
    assert re.search(r"^(\[\S+\] )?kernel: " + re.escape(os.uname().release) + "$", out, flags=re.M), out
    assert re.search(r"^(\[\S+\] )?GPUs given \(fake\): \S+$", out, flags=re.M), out
    # step 6: both ranks of the 2-node torchrun job, one on each real node, summed over gloo
    for rank in (0, 1):
        pattern = rf"^\[rank {rank}\] rank {rank} on \S+: all_reduce of 1 \+ 2 over gloo = 3$"
        assert re.search(pattern, out, flags=re.M), out
    assert "demo-key-not-real" not in out + result.stderr
