"""A Kubernetes 1.37 API server that serves the PodGroup API (GenericWorkload on) but has the WorkloadWithJob
gate off, so it drops a Job's spec.scheduling: gang detection must say "none" (its server dry run sees the
field dropped), fit and submit say so, and `--gang native` is refused with exit 2 and nothing created.

The cluster is its own: KWOK nodes only, no Kueue, started by `scripts/local-cluster up` with
KUBECTL_TAO_FEATURE_GATES=WorkloadWithJob=false in a data directory of its own (next to the session's), and
stopped at the end of the module. It needs no real nodes, so no lock, and may run beside the session cluster.
GPUs are simulated (2 KWOK nodes x 8).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cluster import (
    BUILD_LOCAL_CLUSTER,
    LOCAL_CLUSTER,
    TAO,
    bound_claim_objects,
    cache_dir,
    data_dir,
    unique_name,
    versions,
    wait_for,
)

pytestmark = pytest.mark.e2e

GATES = "WorkloadWithJob=false"
UP_TIMEOUT_S = 600  # the binaries are cached (checked first); a start takes 30-60 s


def version() -> str:
    """The first pinned version with workload-aware scheduling (1.37+)."""
    found = [v for v in versions()["K8S_VERSIONS"].split(",") if int(v.split(".")[1]) >= 37]
    assert found, "cluster/versions.env pins no Kubernetes >= 1.37"
    return found[0]


class GateOff:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("KUBECTL_TAO_")},
            "KUBECTL_TAO_CLUSTER_DIR": str(directory),
            "KUBECTL_TAO_K8S_VERSION": version(),
            "KUBECTL_TAO_REAL_NODES": "0",
            "KUBECTL_TAO_KUEUE": "0",
            "KUBECTL_TAO_CPU_NODES": "0",
            "KUBECTL_TAO_FEATURE_GATES": GATES,
        }
        for keep in ("KUBECTL_TAO_CACHE",):
            if keep in os.environ:
                self.env[keep] = os.environ[keep]
        self.bin = cache_dir() / f"k8s-{version()}" / "bin"

    def local_cluster(self, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(LOCAL_CLUSTER), *args], env={**self.env, **env}, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([str(self.bin / "kubectl"), "--kubeconfig", str(self.dir / "kubeconfig"), *args],
                                capture_output=True, text=True, timeout=60, check=False, input=input)
        assert not check or result.returncode == 0, result.stderr
        return result

    def tao(self, state: Path, namespace: str, *args: str) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "KUBECONFIG": str(self.dir / "kubeconfig"),
            "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
            "TAO_STATE_DIR": str(state),
            "TAO_K8S_NAMESPACE": namespace,
            "TAO_K8S_SKIP_NODE_RUNTIME_CHECK": "1",
        }
        return subprocess.run([TAO, *args], env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def gate_off() -> Iterator[GateOff]:
    if os.environ.get("KUBECTL_TAO_SKIP_E2E") == "1":
        pytest.skip("KUBECTL_TAO_SKIP_E2E=1")
    cluster = GateOff(Path(f"{data_dir()}-gate-off"))
    cached = subprocess.run([str(BUILD_LOCAL_CLUSTER), "--check"], env=cluster.env, check=False).returncode == 0
    if not cached:  # e.g. a `KUBECTL_TAO_K8S_VERSION=v1.36.3 make test` run, which builds 1.36.3 only
        pytest.skip(f"the {version()} control plane is not built (KUBECTL_TAO_K8S_VERSION={version()} "
                    "scripts/build-local-cluster builds it; a test does not start a 12-50 min build)")
    started = time.monotonic()
    up = cluster.local_cluster("up", timeout=UP_TIMEOUT_S)
    try:
        assert up.returncode == 0, f"up failed ({up.returncode}):\n{up.stdout}\n{up.stderr}"
        print(f"gate-off cluster up in {time.monotonic() - started:.0f}s")
        yield cluster
    finally:
        down = cluster.local_cluster("down")
        assert down.returncode == 0, down.stderr


@pytest.fixture()
def namespace(gate_off: GateOff) -> Iterator[str]:
    """A namespace with a Bound claim tao-data (submit's tier A gate wants one)."""
    name = unique_name("gate-off")
    gate_off.kubectl("create", "namespace", name)
    claim = {"apiVersion": "v1", "kind": "List", "items": bound_claim_objects(name, f"pv-{name}")}
    gate_off.kubectl("apply", "-f", "-", input=json.dumps(claim))
    wait_for(lambda: gate_off.kubectl("get", "pvc", "tao-data", "-n", name, "-o", "jsonpath={.status.phase}").stdout
             == "Bound", 60, message="PVC tao-data to bind")
    yield name
    gate_off.kubectl("delete", "namespace", name, "--wait=false", check=False)
    gate_off.kubectl("delete", "pv", f"pv-{name}", "--wait=false", "--ignore-not-found", check=False)


def test_an_unknown_gate_name_is_refused_before_anything_starts(tmp_path: Path) -> None:
    cluster = GateOff(tmp_path / "cluster")
    result = cluster.local_cluster("up", KUBECTL_TAO_FEATURE_GATES="WorkloadWithJob=false,NoSuchGate=true")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"local-cluster: KUBECTL_TAO_FEATURE_GATES: Kubernetes {version()} has no feature gate NoSuchGate; "
        f"`{cluster.bin}/kube-apiserver --help` lists them under --feature-gates\n"
    )
    assert not (tmp_path / "cluster").exists()


def test_the_gates_reach_the_api_server_and_are_recorded(gate_off: GateOff) -> None:
    assert (gate_off.dir / "feature-gates").read_text() == "GenericWorkload=true,WorkloadWithJob=false\n"
    metrics = gate_off.kubectl("get", "--raw", "/metrics").stdout
    assert 'kubernetes_feature_enabled{name="WorkloadWithJob",stage="ALPHA"} 0' in metrics
    assert 'kubernetes_feature_enabled{name="GenericWorkload",stage="BETA"} 1' in metrics
    served = json.loads(gate_off.kubectl("get", "--raw", "/apis/scheduling.k8s.io/v1beta1").stdout)
    assert "podgroups" in [r["name"] for r in served["resources"]]


def test_fit_and_submit_say_no_native_gang_and_gang_native_is_refused(
    gate_off: GateOff, namespace: str, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    fit = gate_off.tao(state, namespace, "fit", "--gpus", "8", "--nodes", "2", "-o", "json")
    assert fit.returncode == 0, fit.stderr
    gang = json.loads(fit.stdout)["gang"]
    assert gang["kind"] == "none", gang
    assert "WorkloadWithJob feature gate is off" in gang["message"]

    submit = ["submit", "--image", "busybox", "--network-arch", "dino", "--action", "train", "--gpus", "8",
              "--nodes", "2", "--pvc", "tao-data", "--command", "true"]
    refused = gate_off.tao(state, namespace, *submit, "--gang", "native")
    assert (refused.returncode, refused.stdout) == (2, "")
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith("error: --gang native: this cluster does not gang-schedule Jobs: "), last
    assert "WorkloadWithJob" in last
    assert gate_off.kubectl("get", "jobs,services,secrets", "-n", namespace, "-l",
                            "app.kubernetes.io/managed-by=kubectl-tao", "-o", "name").stdout == ""
    assert not (state / "jobs").exists() or not list((state / "jobs").glob("*.json"))

    submitted = gate_off.tao(state, namespace, *submit)
    assert submitted.returncode == 0, submitted.stderr
    assert "gang scheduling: none (" in submitted.stderr
    assert "WorkloadWithJob feature gate is off" in submitted.stderr
    [job] = json.loads(gate_off.kubectl("get", "jobs", "-n", namespace, "-o", "json").stdout)["items"]
    assert "scheduling" not in job["spec"]


def test_start_component_restarts_the_api_server_with_the_recorded_gates(gate_off: GateOff) -> None:
    env = {"KUBECTL_TAO_FEATURE_GATES": "WorkloadWithJob=true"}  # what `up` recorded wins over the environment
    for step in ("stop-component", "start-component"):
        result = gate_off.local_cluster(step, "kube-apiserver", **env)
        assert result.returncode == 0, result.stderr
    metrics = gate_off.kubectl("get", "--raw", "/metrics").stdout
    assert 'kubernetes_feature_enabled{name="WorkloadWithJob",stage="ALPHA"} 0' in metrics
