"""Credentials that do not work, against the real API server: a token it does not know, and a kubeconfig
that does not exist. Both are refused with exit 3 and a line that says the credentials are the problem
(never "permission denied"), before any record or object exists."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from support.cluster import Cluster, Tao

from .helpers import objects, record_ids

TIER_C = ["--image", "busybox:1.36", "--command", "true", "--storage-tier", "C", "--s3-output", "s3://tao-results/creds"]


def _unknown_token_kubeconfig(cluster: Cluster, namespace: str, path: Path) -> Path:
    admin = yaml.safe_load(cluster.kubeconfig.read_text(encoding="utf-8"))
    server = admin["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": server}],
        "users": [{"name": "stranger", "user": {"token": "not-a-token-this-server-issued"}}],
        "contexts": [{"name": "stranger", "context": {"cluster": "local", "user": "stranger", "namespace": namespace}}],
        "current-context": "stranger",
    }
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    path.chmod(0o600)
    return path


@pytest.mark.timeout(120)
def test_unknown_token_and_missing_kubeconfig_exit_3_naming_the_credentials(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    tao = Tao(cluster, namespace, tmp_path / "state")
    stranger = _unknown_token_kubeconfig(cluster, namespace, tmp_path / "stranger.kubeconfig")
    for kubeconfig, phrase in (
        (str(stranger), "the API server refused your credentials"),
        (str(tmp_path / "no-such.kubeconfig"), "no-such.kubeconfig does not exist"),
    ):
        result = tao("submit", "--kubeconfig", kubeconfig, *TIER_C, "--gpus", "0")
        assert result.returncode == 3, result.stderr
        [line] = result.stderr.strip().splitlines()
        assert line.startswith("error: ") and phrase in line, line
        assert "permission denied" not in line and "kubectl get nodes" in line and "$KUBECONFIG" in line
        assert "not-a-token" not in line
    assert record_ids(tao.state_dir) == []
    assert objects(namespace, kinds="jobs,secrets,services") == []


@pytest.mark.timeout(120)
def test_an_api_server_that_does_not_answer_is_unreachable_not_permission_denied(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    tao = Tao(cluster, namespace, tmp_path / "state")
    stranger = _unknown_token_kubeconfig(cluster, namespace, tmp_path / "closed.kubeconfig")
    config = yaml.safe_load(stranger.read_text(encoding="utf-8"))
    config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:1"  # a loopback port nothing listens on
    stranger.write_text(yaml.safe_dump(config), encoding="utf-8")
    result = tao("submit", "--kubeconfig", str(stranger), *TIER_C, "--gpus", "0")
    assert result.returncode == 3, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: cluster unreachable") and "permission denied" not in line
    assert record_ids(tao.state_dir) == []
