from __future__ import annotations

from pathlib import Path

import pytest

from kubectl_tao.core.errors import UsageError
from kubectl_tao.k8s.kubeconfig import resolve

CONFIG_A = """
apiVersion: v1
kind: Config
current-context: dev
contexts:
- name: dev
  context: {cluster: dev-cluster, user: me, namespace: team-a}
- name: prod
  context: {cluster: prod-cluster, user: me}
clusters:
- name: dev-cluster
  cluster: {server: "https://127.0.0.1:6443/"}
- name: prod-cluster
  cluster: {server: "https://prod.example:443"}
users: []
"""

CONFIG_B = """
apiVersion: v1
kind: Config
current-context: prod
contexts:
- name: dev
  context: {cluster: other, user: me}
clusters:
- name: other
  cluster: {server: "https://ignored:1"}
"""


@pytest.fixture()
def config_a(tmp_path: Path) -> Path:
    path = tmp_path / "a.yaml"
    path.write_text(CONFIG_A, encoding="utf-8")
    return path


def test_current_context_gives_server_and_namespace(config_a: Path) -> None:
    target = resolve(str(config_a))
    assert (target.server, target.context, target.namespace) == ("https://127.0.0.1:6443", "dev", "team-a")


def test_explicit_context_and_namespace_win(config_a: Path) -> None:
    target = resolve(str(config_a), "prod", "ns1")
    assert (target.server, target.context, target.namespace) == ("https://prod.example:443", "prod", "ns1")


def test_context_without_namespace_defaults_to_default(config_a: Path) -> None:
    assert resolve(str(config_a), "prod").namespace == "default"


def test_unknown_context_is_a_usage_error(config_a: Path) -> None:
    with pytest.raises(UsageError, match="--context: context 'nope' is not in the kubeconfig"):
        resolve(str(config_a), "nope")


def test_kubeconfig_env_merges_first_file_wins(config_a: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    second = tmp_path / "b.yaml"
    second.write_text(CONFIG_B, encoding="utf-8")
    monkeypatch.setenv("KUBECONFIG", f"{config_a}:{second}")
    target = resolve()
    assert (target.context, target.server) == ("dev", "https://127.0.0.1:6443")


def test_invalid_yaml_names_the_flag(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("contexts: [unclosed", encoding="utf-8")
    with pytest.raises(UsageError, match=r"--kubeconfig: .* is not valid YAML"):
        resolve(str(bad))


def test_no_kubeconfig_and_no_service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    target = resolve(str(tmp_path / "missing.yaml"))
    assert (target.server, target.source, target.namespace) == ("", "none", "default")
