"""The restarts gate (gates/checks.py, restarts/servercheck.py): --max-restarts is refused in one line (exit 2) where
the API server drops or refuses container restart rules, found by a server dry run, never by the version alone;
preflight and fit say whether restarts are available."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl, answer_pvc_submit

from kubectl_tao.restarts import servercheck

NAMESPACE = "tao-jobs"
SUBMIT_ARGS = ["submit", "--image", "busybox", "--command", "true", "--gpus", "8", "--nodes", "2", "--pvc", "data",
               "--max-restarts", "2", "--dry-run=server", "--gang", "off"]
KEPT = "RestartAllContainers"
UNKNOWN_FIELD = (
    'Error from server (BadRequest): error when creating "STDIN": Job in version "v1" cannot be handled as a Job: '
    'strict decoding error: unknown field "spec.template.spec.containers[0].restartPolicyRules"'
)


@pytest.fixture(autouse=True)
def _managed_gpu_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAO_K8S_SKIP_NODE_RUNTIME_CHECK", "1")


def cluster(fake: FakeKubectl, *, restart_answer: dict[str, Any]) -> None:
    args, _ = servercheck.dry_run_call(NAMESPACE)
    fake.on(*args, **restart_answer)  # before the job's own dry run: the first matching rule answers
    answer_pvc_submit(fake)


def error_line(err: str) -> str:
    [line] = [line for line in err.splitlines() if line.startswith("error: ")]
    return line.removeprefix("error: ")


def test_a_server_that_drops_the_rule_refuses_max_restarts_naming_version_and_what_is_missing(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    cluster(fake_kubectl, restart_answer={"stdout": ""})
    code, _, err = cli(*SUBMIT_ARGS)
    assert code == 2, err
    line = error_line(err)
    assert line.startswith(
        "--max-restarts 2: Kubernetes v1.30.5-gke.1014001 cannot restart a rank's containers in place"
    )
    assert "drops container restartPolicyRules" in line
    assert "ContainerRestartRules" in line and "RestartAllContainersOnContainerExits" in line
    # the check is the dry run of a Job carrying the very rule submit renders
    [call] = [c for c in fake_kubectl.calls if "kubectl-tao-restart-check-" in (c.stdin or "")]
    probe = json.loads(call.stdin or "")
    container = probe["spec"]["template"]["spec"]["containers"][0]
    assert container["restartPolicyRules"][0]["action"] == "RestartAllContainers"
    assert probe["spec"]["suspend"] is True


def test_a_server_that_does_not_know_the_field_is_refused_in_one_line(cli: Any, fake_kubectl: FakeKubectl) -> None:
    cluster(fake_kubectl, restart_answer={"stderr": UNKNOWN_FIELD, "rc": 1})
    code, _, err = cli(*SUBMIT_ARGS)
    assert code == 2
    assert "does not know container restartPolicyRules" in error_line(err)


def test_a_server_that_keeps_the_rule_lets_max_restarts_through(cli: Any, fake_kubectl: FakeKubectl) -> None:
    cluster(fake_kubectl, restart_answer={"stdout": KEPT})
    code, out, err = cli(*SUBMIT_ARGS)
    assert code == 0, err
    assert "RestartAllContainers" in out  # the printed dry-run objects carry the rule


def test_without_max_restarts_submit_never_asks(cli: Any, fake_kubectl: FakeKubectl) -> None:
    cluster(fake_kubectl, restart_answer={"stdout": ""})
    at = SUBMIT_ARGS.index("--max-restarts")
    args = SUBMIT_ARGS[:at] + SUBMIT_ARGS[at + 2:]
    code, _, err = cli(*args)
    assert code == 0, err
    assert not any("kubectl-tao-restart-check-" in (c.stdin or "") for c in fake_kubectl.calls)


@pytest.mark.parametrize(
    ("answer", "status", "words"),
    [({"stdout": KEPT}, "OK", "available on Kubernetes v1.30.5-gke.1014001"),
     ({"stdout": ""}, "WARN", "not available on Kubernetes v1.30.5-gke.1014001")],
)
def test_preflight_says_whether_restarts_are_available(
    cli: Any, fake_kubectl: FakeKubectl, answer: dict[str, Any], status: str, words: str
) -> None:
    cluster(fake_kubectl, restart_answer=answer)
    code, out, err = cli("preflight", "--gpus", "8", "--pvc", "data")
    assert code == 0, out + err
    [line] = [line for line in out.splitlines() if ": restarts: " in line]
    assert line.startswith(f"{status}: restarts: restarts in place (--max-restarts): {words}")


def test_fit_of_a_multi_node_request_reports_restarts(cli: Any, fake_kubectl: FakeKubectl) -> None:
    cluster(fake_kubectl, restart_answer={"stdout": KEPT})
    fake_kubectl.on("get", "localqueues.kueue.x-k8s.io", stderr="error: the server doesn't have a resource type "
                    '"localqueues"', rc=1)
    fake_kubectl.on("get", "--raw", stderr="Error from server (NotFound): the server could not find the requested "
                    "resource", rc=1)
    code, out, err = cli("fit", "--gpus", "8", "--nodes", "2", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["restarts"]["available"] is True
    code, out, err = cli("fit", "--gpus", "8", "--nodes", "2")
    assert "restarts in place (--max-restarts): available" in err


def test_the_dry_run_answers_are_read_as_support_or_its_absence() -> None:
    from kubectl_tao.core.errors import KubectlError
    from kubectl_tao.k8s.kubectl import Completed

    assert servercheck.kept(Completed(KEPT + "\n", "", 0)).available
    assert not servercheck.kept(Completed("", "", 0)).available
    refused = servercheck.kept(KubectlError('The Job "x" is invalid: spec.template.spec.containers[0]'
                                         '.restartPolicyRules[0].action: Unsupported value: "RestartAllContainers"'))
    assert not refused.available and "RestartAllContainersOnContainerExits" in refused.detail
    other = servercheck.kept(KubectlError("admission webhook denied the request"))
    assert not other.available and "admission webhook denied the request" in other.detail
