"""Shared helpers for tests that run against the real local cluster (scripts/local-cluster).

Import them from any suite: ``from support.cluster import kubectl, wait_for``.
Every helper talks to the cluster through the cluster's own kubectl (same version as the server) and
its admin kubeconfig; nothing here needs the ``cluster`` fixture object, only that the cluster is up.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[2]
LOCAL_CLUSTER = REPO / "scripts" / "local-cluster"
BUILD_LOCAL_CLUSTER = REPO / "scripts" / "build-local-cluster"

# Pod annotations understood by the kwok stages in cluster/kwok/stages.yaml.
RUN_SECONDS = "kwok.kubectl-tao.io/run-seconds"
EXIT_CODE = "kwok.kubectl-tao.io/exit-code"
OOM = "kwok.kubectl-tao.io/oom"
IMAGE_PULL = "kwok.kubectl-tao.io/image-pull"
STAY_RUNNING = "kwok.kubectl-tao.io/stay-running"

# What `kubectl logs` returns for every simulated container (cluster/kwok/container.log).
SIMULATED_LOG_LINE = "kwok: simulated container output"

T = TypeVar("T")


TAO = str(REPO / "kubectl-tao")
TAO_IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt"


class Tao:
    """Runs the real plugin against the local cluster with a private record store and a kubectl trace
    (the ``tao`` fixture in conftest.py gives one per test, with a Bound PVC ``tao-data`` and an
    image-pull Secret ``ngc`` in its namespace)."""

    def __init__(self, cluster: Any, namespace: str, state_dir: Path) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.state_dir = state_dir
        self.trace = state_dir / "kubectl-trace.jsonl"
        self.env = {
            **os.environ,
            **cluster.env,
            "TAO_STATE_DIR": str(state_dir),
            "TAO_K8S_NAMESPACE": namespace,
            "TAO_K8S_SKIP_NODE_RUNTIME_CHECK": "1",
            "KUBECTL_TAO_TRACE": str(self.trace),
        }

    def __call__(self, *args: str, input: str | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [TAO, *args], env=self.env, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", "-n", self.namespace, *args],
            env=self.env,
            input=input,
            capture_output=True,
            text=True,
            timeout=60,
            check=check,
        )

    def record(self, record_id: str) -> dict[str, Any]:
        return json.loads((self.state_dir / "jobs" / f"{record_id}.json").read_text())

    def extra(self, record_id: str) -> dict[str, Any]:
        return json.loads((self.state_dir / "jobs" / ".kubectl-tao" / f"{record_id}.json").read_text())

    def records(self) -> list[str]:
        jobs = self.state_dir / "jobs"
        return sorted(p.stem for p in jobs.glob("*.json")) if jobs.exists() else []

    def leftovers(self) -> list[str]:
        out = self.kubectl(
            "get", "jobs,pods,services,secrets", "-l", "app.kubernetes.io/managed-by=kubectl-tao", "-o", "name"
        ).stdout
        return [line for line in out.splitlines() if line]

    def submit(
        self, *extra: str, gpus: int = 8, annotations: dict[str, str] | None = None, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        args = [
            "submit",
            "--image",
            TAO_IMAGE,
            "--image-pull-secret",
            "ngc",
            "--network-arch",
            "dino",
            "--action",
            "train",
            "--gpus",
            str(gpus),
            "--pvc",
            "tao-data",
            "--command",
            "dino train -e /workspace/specs/train.yaml",
        ]
        for key, value in (annotations or {}).items():
            args += ["--annotation", f"{key}={value}"]
        return self(*args, *extra, input=input)

    def kubectl_calls(self) -> list[list[str]]:
        """The argv of every kubectl call the plugin made so far (from the KUBECTL_TAO_TRACE file)."""
        if not self.trace.exists():
            return []
        return [json.loads(line)["argv"] for line in self.trace.read_text().splitlines() if line.strip()]


KILL_KUBECTL = REPO / "tests" / "support" / "kill-plugin-kubectl"


def killed_at(tao: Tao, match: str, fired: Path, *args: str, input: str | None = None, timeout: float = 300) -> str:
    """`kubectl tao ARGS` SIGKILLed (tests/support/kill-plugin-kubectl, as KUBECTL_TAO_KUBECTL) at its first kubectl
    call whose space-joined argv matches the regex MATCH, a call it never makes; that call's argv. FIRED: a path
    of the test's own (it must not exist yet)."""
    import shutil
    import signal

    saved = dict(tao.env)
    tao.env.update(KUBECTL_TAO_KUBECTL=str(KILL_KUBECTL), KILL_FIRED=str(fired), KILL_MATCH=match,
                   KILL_REAL_KUBECTL=shutil.which("kubectl", path=tao.env.get("PATH")) or "kubectl")
    try:
        killed = tao(*args, input=input, timeout=timeout)
    finally:
        tao.env.clear()
        tao.env.update(saved)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    return fired.read_text()


def submitted_id(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def states(record: dict[str, Any]) -> list[str]:
    return [t["state"] for t in record["transitions"]]


def versions() -> dict[str, str]:
    """The pinned component versions (cluster/versions.env)."""
    out: dict[str, str] = {}
    for line in (REPO / "cluster" / "versions.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            out[key] = value
    return out


def k8s_version() -> str:
    """The Kubernetes version of the local cluster: what `up` recorded in the data directory, else the one
    KUBECTL_TAO_K8S_VERSION selects, else the default of cluster/versions.env."""
    recorded = data_dir() / "k8s-version"
    if recorded.is_file():
        return recorded.read_text(encoding="utf-8").strip()
    return os.environ.get("KUBECTL_TAO_K8S_VERSION") or versions()["K8S_VERSION"]


def k8s_minor() -> int:
    return int(k8s_version().split(".")[1])


def cache_dir() -> Path:
    return Path(os.environ.get("KUBECTL_TAO_CACHE") or Path.home() / ".cache" / "kubectl-tao")


def data_dir() -> Path:
    explicit = os.environ.get("KUBECTL_TAO_CLUSTER_DIR")
    if explicit:
        return Path(explicit).resolve()
    return Path(os.environ.get("TMPDIR") or "/tmp") / "kubectl-tao-cluster"


def bin_dir() -> Path:
    """Directory with kube-apiserver, kube-controller-manager, kube-scheduler and kubectl."""
    return cache_dir() / f"k8s-{k8s_version()}" / "bin"


def kubeconfig_path() -> Path:
    return data_dir() / "kubeconfig"


def cluster_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A full environment for subprocesses: ``base`` (default os.environ) with the cluster's
    KUBECONFIG and its kubectl first on PATH."""
    env = dict(os.environ if base is None else base)
    env["KUBECONFIG"] = str(kubeconfig_path())
    env["PATH"] = f"{bin_dir()}{os.pathsep}{env.get('PATH', '')}"
    return env


@dataclass(frozen=True)
class Cluster:
    """What the session-scoped ``cluster`` fixture yields."""

    kubeconfig: Path
    bin_dir: Path
    data_dir: Path
    env: dict[str, str] = field(repr=False)
    started_here: bool = False

    def kubectl(
        self, *args: str, ns: str | None = None, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return kubectl(*args, ns=ns, input=input, check=check, timeout=timeout)


def current_cluster(started_here: bool = False) -> Cluster:
    return Cluster(
        kubeconfig=kubeconfig_path(),
        bin_dir=bin_dir(),
        data_dir=data_dir(),
        env=cluster_env(),
        started_here=started_here,
    )


class KubectlError(AssertionError):
    """kubectl exited non-zero where the test needed it to succeed."""


def kubectl(
    *args: str, ns: str | None = None, input: str | None = None, check: bool = True, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run the cluster's kubectl (``-n ns`` when given); raise KubectlError on failure if ``check``."""
    cmd = [str(bin_dir() / "kubectl"), *(["-n", ns] if ns else []), *args]
    proc = subprocess.run(
        cmd, input=input, capture_output=True, text=True, env=cluster_env(), timeout=timeout, check=False
    )
    if check and proc.returncode != 0:
        raise KubectlError(f"kubectl {' '.join(args)} (ns={ns}) exited {proc.returncode}: {proc.stderr.strip()}")
    return proc


def kubectl_json(*args: str, ns: str | None = None) -> Any:
    """``kubectl <args> -o json`` parsed."""
    return json.loads(kubectl(*args, "-o", "json", ns=ns).stdout)


def get(kind: str, name: str, ns: str | None = None) -> dict[str, Any] | None:
    """The object as a dict, or None if it does not exist."""
    proc = kubectl("get", kind, name, "-o", "json", "--ignore-not-found", ns=ns)
    return json.loads(proc.stdout) if proc.stdout.strip() else None


def wait_for(predicate: Callable[[], T], timeout: float = 30, interval: float = 0.25, message: str = "condition") -> T:
    """Poll ``predicate`` until it returns something truthy and return that value."""
    deadline = time.monotonic() + timeout
    last: T = predicate()
    while not last:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}; last value: {last!r}")
        time.sleep(interval)
        last = predicate()
    return last


def apply_yaml(text: str, ns: str | None = None) -> str:
    """``kubectl apply -f -`` with YAML or JSON text; returns kubectl's output."""
    return kubectl("apply", "-f", "-", ns=ns, input=text).stdout


def apply_obj(obj: Mapping[str, Any], ns: str | None = None) -> str:
    """Apply one object (or a v1 List) given as a dict."""
    return apply_yaml(json.dumps(obj), ns=ns)


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def job(
    name: str,
    *,
    gpus: int = 0,
    annotations: Mapping[str, str] | None = None,
    completions: int | None = None,
    parallelism: int | None = None,
    indexed: bool = False,
    subdomain: str | None = None,
    ttl_seconds: int | None = None,
    backoff_limit: int = 0,
    image: str = "nvcr.io/nvidia/pytorch:24.01-py3",
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A batch/v1 Job for the simulated nodes: one container ``main``; pod template annotations
    select the simulated behaviour (see the constants above)."""
    container: dict[str, Any] = {"name": "main", "image": image, "command": ["python", "train.py"]}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if subdomain:
        pod_spec["subdomain"] = subdomain
    spec: dict[str, Any] = {
        "backoffLimit": backoff_limit,
        "template": {
            "metadata": {"labels": dict(labels or {}), "annotations": dict(annotations or {})},
            "spec": pod_spec,
        },
    }
    if completions is not None:
        spec["completions"] = completions
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if indexed:
        spec["completionMode"] = "Indexed"
    if ttl_seconds is not None:
        spec["ttlSecondsAfterFinished"] = ttl_seconds
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def pods_of_job(job_name: str, ns: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kubectl_json("get", "pods", "-l", f"batch.kubernetes.io/job-name={job_name}", ns=ns)[
        "items"
    ]
    return sorted(items, key=lambda p: p["metadata"]["name"])


def job_condition(job_name: str, ns: str) -> str | None:
    """'Complete' or 'Failed' once the Job has that condition True, else None."""
    obj = get("job", job_name, ns)
    for cond in (obj or {}).get("status", {}).get("conditions", []):
        if cond["type"] in ("Complete", "Failed") and cond["status"] == "True":
            return str(cond["type"])
    return None


def wait_job_finished(job_name: str, ns: str, timeout: float = 60) -> str:
    return wait_for(lambda: job_condition(job_name, ns), timeout, message=f"job {job_name} to finish")


def terminated_state(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``state.terminated`` of the pod's first container, if it has one."""
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return statuses[0].get("state", {}).get("terminated") if statuses else None


def events_for(name: str, ns: str, kind: str = "Pod") -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kubectl_json(
        "get",
        "events",
        "--field-selector",
        f"involvedObject.kind={kind},involvedObject.name={name}",
        ns=ns,
    )["items"]
    return items


def bound_claim_objects(
    namespace: str, pv: str, claim: str = "tao-data", host_path: str | None = None
) -> list[dict[str, Any]]:
    """A hostPath PersistentVolume pre-bound to a ReadWriteMany claim in `namespace` (no provisioner here).
    `host_path` names a directory real nodes create on demand; without it the path is never used (KWOK)."""
    volume_source: dict[str, str] = (
        {"path": host_path, "type": "DirectoryOrCreate"} if host_path else {"path": f"/tmp/{pv}"}
    )
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "manual",
                "hostPath": volume_source,
                "claimRef": {"namespace": namespace, "name": claim},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": namespace},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "manual",
                "volumeName": pv,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    ]


@contextlib.contextmanager
def claim_on_real_nodes(cluster: Any, prefix: str, state_dir: Path) -> Iterator[tuple[Tao, Path]]:
    """A fresh namespace PREFIX-* (its default ServiceAccount made) with a Bound claim `tao-data` whose hostPath
    lives in the cluster's data directory (so `down` removes it): a Tao there and the claim's directory. On the
    way out its Jobs, the namespace and the PersistentVolume are deleted, without waiting."""
    namespace = unique_name(prefix)
    kubectl("create", "namespace", namespace)
    t = Tao(cluster, namespace, state_dir)
    volume = cluster.data_dir / "real" / "volumes" / namespace
    volume.mkdir(parents=True, exist_ok=True)
    pv = f"pv-{namespace}"
    try:
        wait_for(
            lambda: kubectl("get", "serviceaccount", "default", ns=namespace, check=False).returncode == 0, 30,
            message="the namespace's default ServiceAccount",
        )
        t.kubectl("apply", "-f", "-", input=json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": bound_claim_objects(namespace, pv, host_path=str(volume))}
        ))
        wait_for(lambda: t.kubectl("get", "pvc", "tao-data", "-o", "jsonpath={.status.phase}").stdout == "Bound",
                 60, message="PVC tao-data to bind")
        yield t, volume
    finally:
        t.kubectl("delete", "jobs", "--all", "--wait=false", check=False)
        kubectl("delete", "namespace", namespace, "--wait=false", "--ignore-not-found", check=False)
        t.kubectl("delete", "pv", pv, "--ignore-not-found", "--wait=false", check=False)
