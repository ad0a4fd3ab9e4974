"""Shared pieces of the reliability tests: the control plane to break, record checks, leftovers."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from support.cluster import LOCAL_CLUSTER, REPO, Cluster, kubectl, wait_for

from kubectl_tao.store.records import schema_errors
from kubectl_tao.store.transitions import ALLOWED_TRANSITIONS, OPENING_MESSAGE, TERMINAL_STATES

from .stats import STATS

HERE = Path(__file__).resolve().parent
TAO = str(REPO / "kubectl-tao")
FAULT_KUBECTL = HERE / "fault-kubectl"
MANAGED = "app.kubernetes.io/managed-by=kubectl-tao"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
# The control plane's clients of the API server: restarted after it went away many times, so their watches
# do not wait out a long reconnect backoff in the next test. (kwok plays the nodes' kubelets, which keep
# running through a control plane restart; a restarted kwok takes ~40s to take its pods back.)
CLIENTS = ("kube-scheduler", "kube-controller-manager")


# ------------------------------------------------------------------ the control plane


class ControlPlane:
    """The processes of a scripts/local-cluster cluster, found through the pid files of its data dir."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.env = {**os.environ, "KUBECTL_TAO_CLUSTER_DIR": str(data_dir)}

    def is_local(self) -> bool:
        return (self.data_dir / "pids").is_dir() and (self.data_dir / "provider").read_text().strip() == "local"

    def pidfile(self, component: str = "kube-apiserver") -> Path:
        return self.data_dir / "pids" / f"{component}.pid"

    def pid(self, component: str = "kube-apiserver") -> int:
        return int(self.pidfile(component).read_text().strip())

    def state(self, component: str = "kube-apiserver") -> str:
        """The kernel's process state letter (R, S, T stopped, Z gone...), '' when there is no process."""
        try:
            return Path(f"/proc/{self.pid(component)}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, ValueError, IndexError):
            return ""

    def resume(self, component: str = "kube-apiserver") -> None:
        if self.state(component) == "T":
            os.kill(self.pid(component), signal.SIGCONT)

    def script(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(LOCAL_CLUSTER), *args], env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )
        assert result.returncode == 0, f"local-cluster {' '.join(args)}: {result.stdout}{result.stderr}"
        return result

    def stop(self, component: str) -> None:
        self.resume(component)
        self.script("stop-component", component)

    def start(self, component: str) -> None:
        self.script("start-component", component)
        if component == "kube-apiserver":
            # A fresh API server builds its OpenAPI document on the first request; kubectl create asks for it
            # to validate. Warm it up so a test's short --request-timeout meets a ready server.
            kubectl("get", "--raw", "/openapi/v2", check=False, timeout=60)

    def restart(self, *components: str) -> None:
        """Stop the components in the order given, then start them in the reverse order (same data)."""
        for component in components:
            self.stop(component)
        for component in reversed(components):
            self.start(component)
        wait_for(api_ready, timeout=60, message="the API server after the restart")

    def ensure_up(self) -> None:
        """Whatever a test did: every component running (resumed or started again) and the API ready."""
        for component in COMPONENTS:
            self.resume(component)
            self.start(component)
        wait_for(api_ready, timeout=60, message="the API server to answer again")


def api_ready() -> bool:
    return kubectl("get", "--raw", "/readyz", check=False, timeout=10).returncode == 0


# ------------------------------------------------------------------ records


def transition_problems(record: dict[str, Any]) -> list[str]:
    """Ways the record's transitions break the state machine (transitions.ALLOWED_TRANSITIONS)."""
    problems: list[str] = []
    transitions = record.get("transitions") or []
    if not transitions or transitions[0].get("state") != "PENDING" or transitions[0].get("message") != OPENING_MESSAGE:
        problems.append("the first transition is not PENDING 'record opened before launch'")
    states = [t.get("state") for t in transitions]
    for before, after in itertools.pairwise(states):
        if before in TERMINAL_STATES or after not in ALLOWED_TRANSITIONS.get(str(before), frozenset()):
            problems.append(f"illegal transition {before} -> {after}")
    terminal = record.get("terminal_state")
    if terminal is not None and (not states or states[-1] != terminal):
        problems.append(f"terminal_state {terminal} is not the last transition ({states[-1:]})")
    if terminal is None and any(s in TERMINAL_STATES for s in states):
        problems.append("a terminal transition without terminal_state")
    if record.get("err_class") and terminal != "ERROR":
        problems.append("err_class without ERROR")
    return problems


def check_record(state_dir: Path, record_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both files of a record parse, match their schemas and hold a legal history; counted in STATS."""
    STATS.records_checked += 1
    jobs = state_dir / "jobs"
    record = json.loads((jobs / f"{record_id}.json").read_text(encoding="utf-8"))
    extra_path = jobs / ".kubectl-tao" / f"{record_id}.json"
    extra = json.loads(extra_path.read_text(encoding="utf-8")) if extra_path.exists() else {}
    problems = schema_errors(record, "job-record") + transition_problems(record)
    if extra:
        problems += [f"sibling: {e}" for e in schema_errors(extra, "job-record-k8s")]
    assert record.get("id") == record_id, f"record {record_id} names id {record.get('id')!r}"
    assert not problems, f"record {record_id}: {problems}"
    STATS.records_intact += 1
    return record, extra


def record_ids(state_dir: Path) -> list[str]:
    jobs = state_dir / "jobs"
    return sorted(p.stem for p in jobs.glob("*.json")) if jobs.is_dir() else []


def snapshot(state_dir: Path) -> dict[str, bytes]:
    """Every file of the record store, byte for byte (to prove a command changed nothing)."""
    jobs = state_dir / "jobs"
    return {str(p.relative_to(jobs)): p.read_bytes() for p in sorted(jobs.rglob("*.json"))} if jobs.is_dir() else {}


def states(record: dict[str, Any]) -> list[str]:
    return [str(t["state"]) for t in record["transitions"]]


# ------------------------------------------------------------------ cluster objects


def objects(
    namespace: str, job_name: str | None = None, kinds: str = "jobs,pods,services,secrets"
) -> list[dict[str, Any]]:
    """kubectl-tao's objects in the namespace (of one job when job_name is given), as JSON."""
    selector = MANAGED + (f",tao-job={job_name}" if job_name else "")
    out = kubectl("get", kinds, "-l", selector, "-o", "json", ns=namespace, timeout=30).stdout
    return list(json.loads(out)["items"])


def names_of(items: Iterable[dict[str, Any]]) -> list[str]:
    return sorted(f"{i['kind']}/{i['metadata']['name']}" for i in items)


def wait_gone(
    namespace: str, job_name: str | None = None, timeout: float = 60, kinds: str = "jobs,pods,services,secrets"
) -> None:
    """Until nothing of the job (or of kubectl-tao in the namespace) is left; fails with what is."""
    deadline = time.monotonic() + timeout
    left = names_of(objects(namespace, job_name, kinds))
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = names_of(objects(namespace, job_name, kinds))
    assert not left, f"left behind after {timeout}s: {left}"


def owned_by(item: dict[str, Any], uid: str) -> bool:
    return any(
        ref.get("uid") == uid and ref.get("kind") == "Job" for ref in item["metadata"].get("ownerReferences", [])
    )


# ------------------------------------------------------------------ RBAC


def service_account_role(namespace: str, name: str, rules: list[dict[str, Any]]) -> None:
    """A ServiceAccount bound to a Role with exactly `rules` in the namespace."""
    items = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    ]
    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))


def service_account_kubeconfig(cluster: Cluster, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig for the ServiceAccount: a bound token, the admin kubeconfig's server and CA."""
    token = kubectl("create", "token", account, "--duration=10m", ns=namespace).stdout.strip()
    admin = yaml.safe_load(cluster.kubeconfig.read_text(encoding="utf-8"))
    server = admin["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "local",
                "cluster": {
                    "server": server["server"],
                    "certificate-authority-data": server["certificate-authority-data"],
                },
            }
        ],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": "local", "user": account, "namespace": namespace}}],
        "current-context": account,
    }
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    path.chmod(0o600)
    return path
