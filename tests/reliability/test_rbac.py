"""Real RBAC on the local API server: ServiceAccounts with Roles that lack what submit needs, used through
kubeconfigs built from `kubectl create token` and the admin kubeconfig's server and CA. Preflight says
what is missing (the access reviews submit makes); submit refuses before anything exists (no record, no
Job, no Secret) and names the permission; when only listing nodes is forbidden the fit gate degrades to a
warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cluster import STAY_RUNNING, Cluster, Tao, kubectl

from .helpers import check_record, objects, record_ids, service_account_kubeconfig, service_account_role, wait_gone

TIER_C = ["--image", "busybox:1.36", "--command", "true", "--storage-tier", "C", "--s3-output", "s3://tao-results/rbac"]


READ_ONLY = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
]
JOBS_NO_SECRETS = [
    {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch", "create", "delete"]},
]


def _nothing_created(tao: Tao, namespace: str) -> None:
    assert record_ids(tao.state_dir) == [], "a record was opened although submit was refused"
    assert objects(namespace, kinds="jobs,secrets,services") == []


@pytest.mark.timeout(120)
def test_read_only_user_gets_missing_rbac_from_preflight_and_a_refused_submit(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    service_account_role(namespace, "reader", READ_ONLY)
    config = service_account_kubeconfig(cluster, namespace, "reader", tmp_path / "reader.kubeconfig")
    tao = Tao(cluster, namespace, tmp_path / "state")
    preflight = tao("preflight", "--kubeconfig", str(config), "--credentials")
    assert preflight.returncode == 1, preflight.stdout + preflight.stderr
    # The same access reviews, and the same words, as the submit below refuses with.
    [missing] = [line for line in preflight.stdout.splitlines() if line.startswith("MISSING: permissions: ")]
    assert f"in namespace {namespace}" in missing
    assert "create jobs.batch" in missing and "create secrets" in missing

    submit = tao("submit", "--kubeconfig", str(config), *TIER_C, "--gpus", "0")
    assert submit.returncode == 1, submit.stderr
    [line] = submit.stderr.strip().splitlines()
    assert line.startswith("error: permission denied") and "create jobs.batch" in line and namespace in line
    _nothing_created(tao, namespace)


@pytest.mark.timeout(120)
def test_user_without_secrets_is_refused_when_credentials_are_needed(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    service_account_role(namespace, "jobs-only", JOBS_NO_SECRETS)
    config = service_account_kubeconfig(cluster, namespace, "jobs-only", tmp_path / "jobs-only.kubeconfig")
    tao = Tao(cluster, namespace, tmp_path / "state")
    env_file = tmp_path / "creds.env"
    env_file.write_text("HF_TOKEN=hf_RbacCanary0123456789abcdefghijklmn\n", encoding="utf-8")

    refused = tao("submit", "--kubeconfig", str(config), *TIER_C, "--gpus", "0", "--env-file", str(env_file))
    assert refused.returncode == 1, refused.stderr
    [line] = refused.stderr.strip().splitlines()
    assert "permission denied" in line and "create secrets" in line and "hf_Rbac" not in line
    _nothing_created(tao, namespace)

    # Without credentials it may run; nodes cannot be listed, so capacity is not checked, with a warning.
    ran = tao("submit", "--kubeconfig", str(config), *TIER_C, "--gpus", "1", "--annotation", f"{STAY_RUNNING}=true")
    assert ran.returncode == 0, ran.stderr
    assert "cannot list nodes" in ran.stderr and "GPU capacity was not checked" in ran.stderr
    [record_id] = record_ids(tao.state_dir)
    record, extra = check_record(tao.state_dir, record_id)
    assert record["transitions"][-1]["state"] == "RUNNING" and extra["job_uid"]
    # The admin (same cluster, another user) cancels it from the same record.
    cancel = tao("cancel", record_id, "--no-wait")
    assert cancel.returncode == 0, cancel.stderr
    assert check_record(tao.state_dir, record_id)[0]["terminal_state"] == "CANCELED"
    wait_gone(namespace, extra["job_name"], timeout=60)


NAMESPACE_ADMIN = [{"apiGroups": ["", "batch"], "resources": ["*"], "verbs": ["*"]}]


@pytest.mark.timeout(120)
def test_without_cluster_wide_pods_the_fit_gate_uses_node_allocatable(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    service_account_role(namespace, "no-pods", NAMESPACE_ADMIN)
    binding = f"kubectl-tao-nodes-{namespace}"
    nodes_only = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": binding},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": binding},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": binding},
            "subjects": [{"kind": "ServiceAccount", "name": "no-pods", "namespace": namespace}],
        },
    ]
    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes_only}))
    try:
        config = service_account_kubeconfig(cluster, namespace, "no-pods", tmp_path / "no-pods.kubeconfig")
        tao = Tao(cluster, namespace, tmp_path / "state")
        args = ["submit", "--kubeconfig", str(config), *TIER_C, "--dry-run=server"]
        fits = tao(*args, "--gpus", "8")
        assert fits.returncode == 0, fits.stderr
        assert "cannot list pods in all namespaces" in fits.stderr
        assert "checked each node's allocatable nvidia.com/gpu only" in fits.stderr
        never = tao(*args, "--gpus", "12")
        assert never.returncode == 4, never.stderr
        assert never.stderr.strip().splitlines()[-1].startswith("error: ")
        _nothing_created(tao, namespace)
    finally:
        kubectl("delete", "clusterrolebinding,clusterrole", binding, "--ignore-not-found")
