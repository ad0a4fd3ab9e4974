"""Attacks on a job's lifecycle, on the real control plane, each counted in the summary (attacks tried / held):

- a role that may create Jobs and Secrets but not patch or delete them must be refused before anything exists;
- when an admission policy stops the rollback, submit must name the credential Secret it left, never say
  "nothing left";
- `cancel --force` must never delete another user's Job that has the record's name (pinned UID or none);
- the kubelet's `$(VAR)` / `$$` expansion must not change the command the user gave;
- flags that would weaken the pod (a wildcard toleration, a mount over the service-account token, a record id
  with look-alike or direction-control characters) are refused before any object or record exists.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from support.cluster import STAY_RUNNING, Cluster, Tao, kubectl, submitted_id, wait_for

from kubectl_tao.manifests.kubelet_text import expand

from .helpers import (
    REPO,
    check_record,
    objects,
    record_ids,
    service_account_kubeconfig,
    service_account_role,
    wait_gone,
)
from .stats import STATS

TIER_C = ["--image", "busybox:1.36", "--storage-tier", "C", "--s3-output", "s3://tao-results/attacks"]
READ = ["get", "list", "watch"]
# What a careless Role grants: create, no patch, no delete.
CREATE_ONLY = [
    {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": READ},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": [*READ, "create"]},
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
]
# Everything submit asks for.
FULL = [
    {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": READ},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": [*READ, "create", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["secrets", "services"], "verbs": ["list", "create", "patch", "delete"]},
]


def _canary() -> str:
    return f"hf_Attack{uuid.uuid4().hex}"


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    return lines[0] if len(lines) == 1 else f"<{len(lines)} error lines> {stderr!r}"


def _count(held: bool, what: str) -> None:
    STATS.attack(held)
    assert held, what


@pytest.mark.timeout(120)
def test_a_create_only_role_leaves_no_secret_and_no_job(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    service_account_role(namespace, "create-only", CREATE_ONLY)
    config = service_account_kubeconfig(cluster, namespace, "create-only", tmp_path / "create-only.kubeconfig")
    tao = Tao(cluster, namespace, tmp_path / "state")
    canary = _canary()
    result = tao(
        "submit", "--kubeconfig", str(config), *TIER_C, "--command", "true", "--gpus", "0", "--env-file", "-",
        input=f"HF_TOKEN={canary}\n",
    )
    line = _error_line(result.stderr)
    left = kubectl("get", "jobs,secrets,services", "-o", "name", ns=namespace).stdout.split()
    held = (
        result.returncode == 1
        and line.startswith("error: permission denied: you may not ")
        and all(f"{verb} secrets" in line for verb in ("patch", "list", "delete"))
        and "delete jobs.batch" in line
        and canary not in result.stdout + result.stderr
        and record_ids(tao.state_dir) == []
        and left == []
    )
    _count(held, f"rc={result.returncode} line={line!r} left={left} records={record_ids(tao.state_dir)}")


def _deny_secret_changes(namespace: str, account: str) -> str:
    """A ValidatingAdmissionPolicy (cluster-scoped) that stops `account` from updating or deleting Secrets in
    `namespace`: RBAC says yes, admission says no, so the owner-reference patch and the rollback both fail."""
    name = f"deny-secrets-{namespace}"
    match = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}
    user = f"system:serviceaccount:{namespace}:{account}"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                **match,
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE", "DELETE"],
                     "resources": ["secrets"]}
                ],
            },
            "validations": [{"expression": f"request.userInfo.username != '{user}'", "message": "no changes"}],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"], "matchResources": match},
    }
    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [policy, binding]}))
    kubectl("create", "secret", "generic", "probe-policy", ns=namespace)

    def enforced() -> bool:
        probe = kubectl(
            "delete", "secret", "probe-policy", "--dry-run=server", f"--as={user}", ns=namespace, check=False
        )
        return probe.returncode != 0 and "no changes" in probe.stderr

    wait_for(enforced, timeout=30, message="the admission policy to be enforced")
    return name


@pytest.mark.timeout(180)
def test_a_rollback_stopped_by_admission_names_the_secret_it_left(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    service_account_role(namespace, "blocked", FULL)
    config = service_account_kubeconfig(cluster, namespace, "blocked", tmp_path / "blocked.kubeconfig")
    policy = _deny_secret_changes(namespace, "blocked")
    try:
        tao = Tao(cluster, namespace, tmp_path / "state")
        canary = _canary()
        result = tao(
            "submit", "--kubeconfig", str(config), *TIER_C, "--command", "true", "--gpus", "0", "--env-file", "-",
            "--annotation", f"{STAY_RUNNING}=true", input=f"HF_TOKEN={canary}\n",
        )
        line = _error_line(result.stderr)
        [record_id] = record_ids(tao.state_dir)
        record, extra = check_record(tao.state_dir, record_id)
        secret = f"secret/{extra['secret_names'][0]}"
        still_there = kubectl("get", secret, "-o", "name", ns=namespace, check=False).stdout.strip()
        message = record["transitions"][-1]["message"]
        held = (
            result.returncode == 1
            and "nothing left" not in line
            and f"could not remove {secret} in namespace {namespace}" in line
            and f"`kubectl delete -n {namespace} {secret}`" in line
            and record["terminal_state"] == "ERROR"
            and f"could not remove {secret}" in message
            and extra.get("left_behind") == [secret]
            and still_there == secret
            and canary not in result.stdout + result.stderr + json.dumps(record) + json.dumps(extra)
        )
        _count(held, f"rc={result.returncode} line={line!r} message={message!r} extra={extra.get('left_behind')}")
        wait_gone(namespace, extra["job_name"], timeout=60, kinds="jobs,pods")  # the Job itself was rolled back
    finally:
        kubectl("delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", policy, check=False)
        kubectl("delete", "secrets", "--all", ns=namespace, check=False)


def _foreign_job(name: str) -> dict[str, Any]:
    """Another user's Job: same name, no kubectl-tao label, no record annotation."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"app": "theirs"}},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {STAY_RUNNING: "true"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "3600"]}],
                },
            },
        },
    }


@pytest.mark.timeout(180)
@pytest.mark.parametrize("pinned", [True, False], ids=["uid-pinned", "uid-never-pinned"])
def test_cancel_force_never_deletes_another_users_job_of_the_same_name(
    cluster: Cluster, namespace: str, tmp_path: Path, pinned: bool
) -> None:
    tao = Tao(cluster, namespace, tmp_path / "state")
    record_id = submitted_id(
        tao("submit", *TIER_C, "--command", "true", "--gpus", "0", "--annotation", f"{STAY_RUNNING}=true")
    )
    job_name = tao.extra(record_id)["job_name"]
    tao.kubectl("delete", "job", job_name, "--cascade=foreground", "--wait=true")
    wait_gone(namespace, job_name, timeout=60)
    if not pinned:  # the record of a submit cut off before it could pin the Job's UID
        path = tao.state_dir / "jobs" / ".kubectl-tao" / f"{record_id}.json"
        extra = json.loads(path.read_text(encoding="utf-8"))
        extra.pop("job_uid")
        path.write_text(json.dumps(extra), encoding="utf-8")
    tao.kubectl("create", "-f", "-", input=json.dumps(_foreign_job(job_name)))
    theirs = json.loads(tao.kubectl("get", "job", job_name, "-o", "json").stdout)["metadata"]["uid"]

    result = tao("cancel", record_id, "--force")
    after = tao.kubectl("get", "job", job_name, "-o", "json", check=False)
    uid_after = json.loads(after.stdout)["metadata"]["uid"] if after.returncode == 0 else None
    deleting = json.loads(after.stdout)["metadata"].get("deletionTimestamp") if after.returncode == 0 else "gone"
    expected = "different Job with the same name" if pinned else "was not made by kubectl-tao"
    held = (
        result.returncode == 1
        and expected in _error_line(result.stderr)
        and uid_after == theirs
        and deleting is None
        and tao.record(record_id)["terminal_state"] is None
    )
    _count(held, f"rc={result.returncode} stderr={result.stderr!r} uid={uid_after} (theirs {theirs}) {deleting}")
    tao.kubectl("delete", "job", job_name, "--cascade=foreground", "--wait=false")


@pytest.mark.timeout(120)
def test_the_kubelet_gets_the_command_back_exactly(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    tao = Tao(cluster, namespace, tmp_path / "state")
    command = 'echo pid=$$ id=$(TAO_JOB_ID) sum=$((1+2)) home=$HOME; kill -0 $$'
    record_id = submitted_id(
        tao("submit", *TIER_C, "--command", command, "--gpus", "0", "--annotation", f"{STAY_RUNNING}=true")
    )
    job = json.loads(tao.kubectl("get", "job", tao.extra(record_id)["job_name"], "-o", "json").stdout)
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    stored = container["args"][2]  # tier C: [run script, "kubectl-tao", the command, excludes...]
    held = (
        "TAO_JOB_ID" in env
        and stored == 'echo pid=$$$$ id=$$(TAO_JOB_ID) sum=$$((1+2)) home=$HOME; kill -0 $$$$'
        and expand(stored, env) == command
        and expand(container["args"][0], env) == (REPO / "templates" / "k8s" / "tier-c-run.sh").read_text()
    )
    _count(held, f"stored={stored!r} delivered={expand(stored, env)!r}")
    assert tao("cancel", record_id).returncode == 0


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--toleration", ":NoSchedule"], "the key is empty, which would tolerate every NoSchedule taint"),
        (["--mount-path", "/var/run/secrets/kubernetes.io"], "would cover the service-account token"),
        (["--network-arch", "din\u043e"], "character 4 (U+043E) is not plain ASCII"),
        (["--action", "tr\u202eain"], "character 3 (U+202E) is not plain ASCII"),
    ],
    ids=["wildcard-toleration", "token-mount", "homoglyph-arch", "bidi-action"],
)
def test_flags_that_weaken_the_pod_are_refused_before_anything_exists(
    cluster: Cluster, namespace: str, tmp_path: Path, flags: list[str], message: str
) -> None:
    tao = Tao(cluster, namespace, tmp_path / "state")
    result = tao("submit", *TIER_C, "--command", "true", "--gpus", "1", *flags)
    line = _error_line(result.stderr)
    held = (
        result.returncode == 2
        and message in line
        and result.stderr.count("\n") == 1
        and record_ids(tao.state_dir) == []
        and tao.kubectl_calls() == []
        and objects(namespace) == []
    )
    _count(held, f"rc={result.returncode} stderr={result.stderr!r} calls={tao.kubectl_calls()}")
