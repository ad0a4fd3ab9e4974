from __future__ import annotations

import pytest

from kubectl_tao.errors import ClusterUnreachableError, KubectlError, UsageError
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
