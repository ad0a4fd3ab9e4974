from __future__ import annotations

import time
from pathlib import Path

import pytest

from kubectl_tao.errors import ClusterUnreachableError, KubectlError, TaoError, UsageError
from kubectl_tao.k8s.kubectl import ClusterOptions, Kubectl, classify_stderr, first_error_line


@pytest.mark.parametrize(
    ("stderr", "reason"),
    [
        (
            "The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?",
            "Unreachable",
        ),
        ("Unable to connect to the server: dial tcp: lookup nowhere: no such host", "Unreachable"),
        ('Error from server (NotFound): jobs.batch "x" not found', "NotFound"),
        ('Error from server (AlreadyExists): secrets "s" already exists', "AlreadyExists"),
        ('Error from server (Forbidden): jobs.batch is forbidden: User "u" cannot create resource', "Forbidden"),
        (
            "Error from server (Conflict): Operation cannot be fulfilled: Precondition failed: UID in precondition",
            "Conflict",
        ),
        ('error: context "nope" does not exist', "NoContext"),
        ("error: something else entirely", ""),
    ],
)
def test_stderr_is_classified(stderr: str, reason: str) -> None:
    assert classify_stderr(stderr) == reason


def test_error_line_is_scrubbed() -> None:
    line = first_error_line("warning: x\nerror: bad value AKIAABCDEFGHIJKLMNOP in field\n")
    assert "AKIAABCDEFGHIJKLMNOP" not in line
    assert line.startswith("error: bad value")


def test_errors_map_to_exit_codes() -> None:
    kc = Kubectl(ClusterOptions())
    assert isinstance(kc.error_for("The connection to the server localhost:8080 was refused"), ClusterUnreachableError)
    assert isinstance(kc.error_for('error: context "x" does not exist'), UsageError)
    err = kc.error_for('Error from server (NotFound): jobs.batch "x" not found')
    assert isinstance(err, KubectlError) and err.reason == "NotFound"


def test_global_flags_are_passed_to_every_call() -> None:
    opts = ClusterOptions(context="c", namespace="n", kubeconfig="/k", request_timeout="5s")
    assert opts.flags() == ["--kubeconfig=/k", "--context=c", "--namespace=n", "--request-timeout=5s"]
    assert "--namespace=n" not in opts.flags(namespaced=False)


def test_missing_kubectl_binary_is_reported_as_unreachable() -> None:
    kc = Kubectl(ClusterOptions(), binary="/nonexistent/kubectl")
    with pytest.raises(ClusterUnreachableError, match="kubectl not found"):
        kc.run(["version"])


def _stand_in(tmp_path: Path, body: str) -> str:
    path = tmp_path / "kubectl"
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(0o755)
    return str(path)


def test_a_real_process_gets_argv_and_stdin_and_hands_back_output_and_exit_code(tmp_path: Path) -> None:
    binary = _stand_in(tmp_path, 'printf "%s|" "$@"; cat; echo "Error from server (NotFound): x" >&2; exit 1\n')
    kc = Kubectl(ClusterOptions(context="c", namespace="n"), binary=binary)
    result = kc.run(["get", "job", "x"], stdin="héllo", check=False)
    assert (result.stdout, result.returncode) == ("--context=c|--namespace=n|get|job|x|héllo", 1)
    assert result.stderr == "Error from server (NotFound): x\n" and kc.calls == 1
    with pytest.raises(KubectlError) as raised:
        kc.run(["get", "job", "x"])
    assert raised.value.reason == "NotFound"


def test_a_call_past_its_timeout_is_killed_and_reported_as_unreachable(tmp_path: Path) -> None:
    kc = Kubectl(ClusterOptions(), binary=_stand_in(tmp_path, "exec sleep 30\n"))
    started = time.monotonic()
    with pytest.raises(ClusterUnreachableError, match=r"kubectl get timed out after 0.5s"):
        kc.run(["get", "pods"], timeout=0.5)
    assert time.monotonic() - started < 10


def test_a_kubectl_that_cannot_be_executed_is_one_line_error(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"\x7fELF not really")
    garbage.chmod(0o755)
    with pytest.raises(TaoError, match=r"^could not run kubectl: OSError$"):
        Kubectl(binary=str(garbage)).run(["version"])
    not_executable = tmp_path / "plain"
    not_executable.write_text("#!/bin/sh\n")
    with pytest.raises(ClusterUnreachableError, match="kubectl not found on PATH"):
        Kubectl(binary=str(not_executable)).run(["version"])
