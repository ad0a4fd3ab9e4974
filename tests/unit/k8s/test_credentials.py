"""Credentials that do not work are named as such (exit 3 with the fix), wherever kubectl reports them;
a Forbidden answer stays the RBAC message. The submit cases drive the CLI with recorded kubectl answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.fake_kubectl import review_answer

from kubectl_tao.core.errors import EXIT_UNREACHABLE, ClusterUnreachableError, CredentialsRefusedError, KubectlError
from kubectl_tao.k8s.kubectl import ClusterOptions, Completed, Kubectl, kubectl_error_kind

UNAUTHORIZED = "error: You must be logged in to the server (Unauthorized)"
EXEC_PLUGIN = (
    "Unable to connect to the server: getting credentials: exec: executable aws failed with exit code 255"
)
REFUSED = "The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?"
SUBMIT = ["submit", "--image", "busybox:1.36", "--command", "true", "--gpus", "0", "--storage-tier", "C",
          "--s3-output", "s3://bucket/out"]


@pytest.mark.parametrize(
    "stderr",
    [
        UNAUTHORIZED,
        "error: You must be logged in to the server (the server has asked for the client to provide credentials)",
        EXEC_PLUGIN,
        'Error from server (Unauthorized): jobs.batch "x" is forbidden',
    ],
)
def test_refused_credentials_are_classified_before_network_errors(stderr: str) -> None:
    assert kubectl_error_kind(stderr) == "Unauthorized"


def test_refused_credentials_exit_3_with_the_fix() -> None:
    error = Kubectl(ClusterOptions()).error_for(UNAUTHORIZED)
    assert isinstance(error, CredentialsRefusedError) and error.exit_code == EXIT_UNREACHABLE
    assert "refused your credentials" in error.message and "\n" not in error.message
    for hint in ("$KUBECONFIG", "kubectl get nodes", "aws eks update-kubeconfig", "gcloud container clusters "
                 "get-credentials", "az aks get-credentials"):
        assert hint in error.message


def test_a_kubeconfig_that_does_not_exist_is_missing_credentials() -> None:
    kc = Kubectl(ClusterOptions(kubeconfig="/nowhere/kubeconfig"))
    error = kc.error_for("error: stat /nowhere/kubeconfig: no such file or directory")
    assert isinstance(error, CredentialsRefusedError)
    assert error.message.startswith("no credentials: --kubeconfig /nowhere/kubeconfig does not exist")


def test_no_kubeconfig_at_all_is_missing_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nowhere/config")
    error = Kubectl(ClusterOptions()).error_for(
        "The connection to the server localhost:8080 was refused - did you specify the right host or port?"
    )
    assert isinstance(error, CredentialsRefusedError)
    assert "$KUBECONFIG=/nowhere/config does not exist" in error.message


def test_forbidden_is_still_a_kubectl_error() -> None:
    error = Kubectl(ClusterOptions()).error_for('Error from server (Forbidden): jobs.batch is forbidden: User "u"')
    assert isinstance(error, KubectlError) and error.reason == "Forbidden"


def test_unchecked_calls_still_raise_when_there_is_no_answer() -> None:
    kc = Kubectl(ClusterOptions())
    denied = Completed("no\n", "", 1)
    assert kc.settle(denied, check=False) is denied
    with pytest.raises(CredentialsRefusedError):
        kc.settle(Completed("", UNAUTHORIZED, 1), check=False)
    with pytest.raises(ClusterUnreachableError):
        kc.settle(Completed("", REFUSED, 1), check=False)
    quiet = Completed("", REFUSED, 1)
    assert kc.settle(quiet, check=False, best_effort=True) is quiet


def _nothing_opened(tao_env: Path) -> None:
    jobs = tao_env / "state" / "jobs"
    assert not jobs.exists() or not list(jobs.glob("*.json"))


@pytest.mark.parametrize(
    ("stderr", "phrase"),
    [
        (UNAUTHORIZED, "the API server refused your credentials"),
        (EXEC_PLUGIN, "the API server refused your credentials"),
        (REFUSED, "cluster unreachable"),
    ],
)
def test_submit_names_bad_credentials_or_a_dead_server_not_rbac(
    cli: Any, fake_kubectl: Any, tao_env: Path, stderr: str, phrase: str
) -> None:
    review, _ = review_answer()
    fake_kubectl.on(*review, stderr=stderr, rc=1)
    code, out, err = cli(*SUBMIT)
    assert code == EXIT_UNREACHABLE, err
    [line] = err.strip().splitlines()
    assert line.startswith("error: ") and phrase in line and "permission denied" not in line
    assert out == ""
    _nothing_opened(tao_env)


def test_submit_keeps_the_rbac_message_for_a_real_no(cli: Any, fake_kubectl: Any, tao_env: Path) -> None:
    review, answer = review_answer(deny=("create jobs.batch",))
    fake_kubectl.on(*review, stdout=answer)
    code, _, err = cli(*SUBMIT)
    assert code == 1
    assert "permission denied: you may not create jobs.batch" in err
    _nothing_opened(tao_env)
