"""`kubectl_tao.cli.main` in this process, thousands of times, with nothing real behind it: a temp
TAO_STATE_DIR, a kubeconfig that points nowhere, and tests/reliability/fake-kubectl as KUBECTL_TAO_KUBECTL
(it logs every call and fails). `reject` is the bad-input contract: exit 2, exactly one `error:` line on
stderr, no traceback, no kubectl call, no record, no crash log."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .helpers import HERE
from .stats import STATS

FAKE_KUBECTL = HERE / "fake-kubectl"
KUBECONFIG = """\
apiVersion: v1
kind: Config
current-context: nowhere
clusters:
- name: nowhere
  cluster: {server: "https://127.0.0.1:9"}
contexts:
- name: nowhere
  context: {cluster: nowhere, user: nobody, namespace: tao-jobs}
users:
- name: nobody
  user: {token: placeholder}
"""
_UNSET = ("TAO_K8S_CONTEXT", "KUBECTL_TAO_TRACE", "TAO_K8S_SKIP_NODE_RUNTIME_CHECK")


class _Stdin(io.TextIOWrapper):
    def isatty(self) -> bool:
        return False


class InProcess:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.state = root / "state"
        self.files = root / "files"
        self.calls = root / "kubectl-calls.log"
        self.files.mkdir(parents=True, exist_ok=True)
        (root / "home").mkdir(exist_ok=True)
        (root / "kubeconfig").write_text(KUBECONFIG, encoding="utf-8")
        self.calls.write_text("", encoding="utf-8")
        self.env = {
            "HOME": str(root / "home"),
            "TAO_STATE_DIR": str(self.state),
            "KUBECONFIG": str(root / "kubeconfig"),
            "TAO_K8S_NAMESPACE": "tao-jobs",
            "KUBECTL_TAO_KUBECTL": str(FAKE_KUBECTL),
            "FAKE_KUBECTL_LOG": str(self.calls),
        }

    @contextlib.contextmanager
    def active(self) -> Iterator[InProcess]:
        """os.environ and the typer app set up for many calls; both restored afterwards."""
        import typer.main

        from kubectl_tao.cli.app import app

        saved = {key: os.environ.get(key) for key in [*self.env, *_UNSET]}
        os.environ.update(self.env)
        for key in _UNSET:
            os.environ.pop(key, None)
        original = typer.main.get_command
        command = original(app)  # typer rebuilds the click command on every call (~8 ms): build it once
        typer.main.get_command = lambda a: command if a is app else original(a)  # type: ignore[assignment]
        try:
            yield self
        finally:
            typer.main.get_command = original  # type: ignore[assignment]
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def run(self, argv: list[str], stdin: bytes = b"") -> tuple[int, str, str]:
        from kubectl_tao.cli.main import main
        from kubectl_tao.commands.common import reset_session

        reset_session()
        out, err = io.StringIO(), io.StringIO()
        saved_stdin, saved_argv = sys.stdin, sys.argv
        sys.stdin, sys.argv = _Stdin(io.BytesIO(stdin), encoding="utf-8"), ["kubectl-tao"]
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(list(argv))
        finally:
            sys.stdin, sys.argv = saved_stdin, saved_argv
            reset_session()
        return code, out.getvalue(), err.getvalue()

    def reject(self, argv: list[str], stdin: bytes = b"") -> str:
        """Run a bad input; assert the contract; return the error line."""
        STATS.bad_inputs_tried += 1
        self.calls.write_text("", encoding="utf-8")
        (self.state / "kubectl-tao-crash.log").unlink(missing_ok=True)
        code, out, err = self.run(argv, stdin)
        assert_rejected(code, out, err, argv)
        assert self.calls.read_text(encoding="utf-8") == "", f"kubectl was called for bad input {argv!r}"
        assert not list(self.state.glob("jobs/**/*.json")), f"a record was written for bad input {argv!r}"
        assert not (self.state / "kubectl-tao-crash.log").exists(), f"internal error for {argv!r}"
        STATS.bad_inputs_rejected += 1
        return err.strip()


def assert_rejected(code: int, out: str, err: str, what: Any) -> None:
    lines = err.splitlines()
    assert "Traceback" not in out + err, f"traceback for {what!r}: {err}"
    assert code == 2, f"exit {code} (expected 2) for {what!r}: {err!r}"
    assert len(lines) == 1, f"expected exactly one line on stderr for {what!r}, got {err!r}"
    assert lines[0].startswith(("error: ", "ERROR: ")), f"not an error line for {what!r}: {err!r}"
