"""Fixtures for driving the CLI in-process with kubectl replaced by recorded answers.

`cli(*argv, stdin=...)` runs `kubectl_tao.cli.main` and returns (exit code, stdout, stderr).
`fake_kubectl` replaces `Kubectl.run` with a support.fake_kubectl.FakeKubectl (what it answers, what it was asked).
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.fake_kubectl import KUBECONFIG, FakeKubectl

from kubectl_tao.k8s.kubectl import Kubectl


@pytest.fixture
def tao_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh HOME, TAO_STATE_DIR and kubeconfig (context lab, namespace tao-jobs)."""
    home = tmp_path / "home"
    home.mkdir()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG, encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TAO_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    for name in ("TAO_K8S_NAMESPACE", "TAO_K8S_CONTEXT", "KUBECTL_TAO_TRACE"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
def fake_kubectl(monkeypatch: pytest.MonkeyPatch) -> FakeKubectl:
    fake = FakeKubectl()
    monkeypatch.setattr(Kubectl, "_spawn", lambda self, args, full, stdin: fake.spawn(self, args, full, stdin))
    return fake


class _Stdin(io.TextIOWrapper):
    def isatty(self) -> bool:
        return False


@pytest.fixture
def cli(
    tao_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., tuple[int, str, str]]]:
    from kubectl_tao.cli.main import main
    from kubectl_tao.commands.common import reset_session

    monkeypatch.setattr(sys, "argv", ["kubectl-tao"])

    def run(*argv: str, stdin: str = "") -> tuple[int, str, str]:
        reset_session()
        capsys.readouterr()
        monkeypatch.setattr(sys, "stdin", _Stdin(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8"))
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    yield run
    reset_session()
