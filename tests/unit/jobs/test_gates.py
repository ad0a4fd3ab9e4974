"""The one gate list (gates/checks.py) shared by submit, preflight and fit: every gate names a judge that exists,
preflight asks about permissions the way submit does (access reviews, never `auth can-i`), and preflight's
lines are the verdicts submit acts on, in the same words."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl, fixture_json, review_answer

from kubectl_tao.gates import checks, permissions, verdicts
from kubectl_tao.gates.gaterequest import FIT, PREFLIGHT, SUBMIT
from kubectl_tao.gates.gpuinventory import DRA_READ

SUBMIT_ARGS = ["submit", "--image", "busybox", "--command", "true", "--gpus", "8", "--pvc", "data",
               "--dry-run=server"]


@pytest.fixture(autouse=True)
def _a_client_that_is_not_a_gpu_node(monkeypatch: pytest.MonkeyPatch) -> None:
    from kubectl_tao.jobs import preflight

    monkeypatch.delenv("TAO_K8S_SKIP_NODE_RUNTIME_CHECK", raising=False)
    monkeypatch.setattr(preflight, "is_gpu_node", lambda: False)


def cluster(fake: FakeKubectl, *, deny: tuple[str, ...] = (), pvc: str = "Bound") -> None:
    review, granted = review_answer(deny=deny)
    fake.on(*review, stdout=granted)
    fake.on("version", data=fixture_json("version-gke-1.30.json"))
    fake.capacity({"kind": "List", "items": fixture_json("nodes-2x8.json")["items"]})
    if pvc:
        fake.on("get", "persistentvolumeclaim/data", stdout=f"PersistentVolumeClaim data {pvc} \n")
    fake.on("create", "--dry-run=server", stdout="job.batch/x\n")


def error_text(err: str) -> str:
    [line] = [line for line in err.splitlines() if line.startswith("error: ")]
    return line.removeprefix("error: ")


def preflight_lines(out: str, name: str) -> list[str]:
    return [line for line in out.splitlines() if line.split(": ", 2)[1:2] == [name]]


def test_every_gate_names_its_judge_and_every_judge_belongs_to_a_gate() -> None:
    judges = {gate.judge for gate in checks.GATES}
    for gate in checks.GATES:
        judge = getattr(verdicts, gate.judge)
        assert list(inspect.signature(judge).parameters)[:1] == ["request"], gate.name
        assert set(gate.verbs) <= {SUBMIT, PREFLIGHT, FIT}
    names = [gate.name for gate in checks.GATES]
    assert len(names) == len(set(names))
    gate_judges = {name for name, value in vars(verdicts).items() if inspect.isfunction(value)
                   and list(inspect.signature(value).parameters)[:2] in (["request", "seen"], ["request", "found"],
                                                                          ["request", "error"], ["request", "_seen"])}
    assert gate_judges == judges


def test_preflight_asks_with_access_reviews_as_submit_does_never_auth_can_i(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    cluster(fake_kubectl)
    code, out, err = cli("preflight", "--gpus", "8", "--pvc", "data", "--credentials")
    assert code == 0, out + err
    assert not any("auth" in argv for argv in fake_kubectl.argvs())
    [review] = [call for call in fake_kubectl.calls if permissions.REVIEW_TEMPLATE in call.argv]
    asked = set()
    for item in json.loads(review.stdin or "")["items"]:
        attributes = item["spec"]["resourceAttributes"]
        sub = attributes.get("subresource")
        asked.add((attributes["verb"], attributes["resource"] + (f"/{sub}" if sub else "")))
    wanted = permissions.needed(credentials=True, service=False) + permissions.optional()
    assert asked == {(p.verb, p.resource) for p in wanted}
    assert preflight_lines(out, "permissions") == [
        "OK: permissions: you may create, get, list and delete jobs.batch; list pods; create, patch, list and delete "
        "secrets in namespace tao-jobs",
        "OK: permissions: optional: you may create, get, list, patch and delete pods; list events; create, get and "
        "delete secrets; create and get pods/exec; create and get pods/portforward; get services/proxy in namespace "
        "tao-jobs",
    ]


def test_denied_secret_reads_and_creates_warn_for_tier_c_results_and_submit_does_not_ask(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    cluster(fake_kubectl, deny=("get secrets", "create secrets"))
    code, out, err = cli("preflight", "--gpus", "8", "--pvc", "data")
    assert code == 0, out + err
    [required, optional] = preflight_lines(out, "permissions")
    assert required.startswith("OK: permissions: you may create, get, list and delete jobs.batch")
    assert optional.startswith("WARN: permissions: optional: you may not create and get secrets in namespace "
                               "tao-jobs;")
    assert "Secrets: a storage tier C job's `results` after its Job is gone" in optional
    code, _, err = cli(*SUBMIT_ARGS)  # a job without credentials needs neither
    assert code == 0, err


def test_a_denied_optional_permission_warns_and_submit_does_not_ask_for_it(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    cluster(fake_kubectl, deny=("create pods/exec", "get services/proxy"))
    code, out, err = cli("preflight", "--gpus", "8", "--pvc", "data")
    assert code == 0, out + err
    [required, optional] = preflight_lines(out, "permissions")
    assert required.startswith("OK: permissions: you may create, get, list and delete jobs.batch")
    assert optional.startswith("WARN: permissions: optional: you may not create pods/exec; get services/proxy in "
                               "namespace tao-jobs;")
    assert optional.endswith("-- ask a cluster admin for a Role that grants them")
    before = len(fake_kubectl.calls)
    code, _, err = cli(*SUBMIT_ARGS)
    assert code == 0, err
    asked = [call for call in fake_kubectl.calls[before:] if "SelfSubjectAccessReview" in (call.stdin or "")]
    assert asked and not any("subresource" in (call.stdin or "") for call in asked)


def test_a_denied_permission_is_the_line_submit_refuses_with(cli: Any, fake_kubectl: FakeKubectl) -> None:
    cluster(fake_kubectl, deny=("delete jobs.batch",))
    code, _, err = cli(*SUBMIT_ARGS)
    assert code == 1
    refused = error_text(err)
    code, out, _ = cli("preflight", "--gpus", "8", "--pvc", "data")
    assert code == 1
    [line] = preflight_lines(out, "permissions")
    message, fix = line.removeprefix("MISSING: permissions: ").split(" -- ")
    assert f"{message}; {fix}" == refused
    assert "you may not delete jobs.batch in namespace tao-jobs" in refused


def test_a_missing_pvc_is_the_line_submit_refuses_with(cli: Any, fake_kubectl: FakeKubectl) -> None:
    cluster(fake_kubectl, pvc="")
    fake_kubectl.on("get", "persistentvolumeclaim/data", stderr='Error from server (NotFound): "data" not found',
                    rc=1)
    code, _, err = cli(*SUBMIT_ARGS)
    assert code == 1
    code, out, _ = cli("preflight", "--gpus", "8", "--pvc", "data")
    assert code == 1
    [line] = preflight_lines(out, "references")
    message, fix = line.removeprefix("MISSING: references: ").split(" -- ")
    assert f"{message}; {fix}" == error_text(err)


def test_never_fits_is_the_same_verdict_in_submit_fit_and_preflight(cli: Any, fake_kubectl: FakeKubectl) -> None:
    cluster(fake_kubectl)
    fake_kubectl.on(*DRA_READ[:2], data={"kind": "List", "items": []})
    fake_kubectl.on("get", "localqueues.kueue.x-k8s.io", stderr='error: the server doesn\'t have a resource type '
                    '"localqueues"', rc=1)
    code, _, err = cli(*[a if a != "8" else "12" for a in SUBMIT_ARGS])
    assert code == 4
    code, out, _ = cli("fit", "--gpus", "12")
    assert code == 4 and out.strip() == error_text(err)
    code, out, _ = cli("preflight", "--gpus", "12", "--pvc", "data")
    assert code == 1
    assert preflight_lines(out, "capacity") == [f"MISSING: capacity: {error_text(err)}"]


def test_preflight_prints_the_gates_in_the_order_submit_judges_them(cli: Any, fake_kubectl: FakeKubectl) -> None:
    cluster(fake_kubectl)
    fake_kubectl.on(*DRA_READ[:2], data={"kind": "List", "items": []})
    code, out, err = cli("preflight", "--gpus", "8", "--pvc", "data", "-o", "json")
    assert code == 0, err
    names = list(dict.fromkeys(check["check"] for check in json.loads(out)["checks"]))[2:]  # after this machine's
    assert names == ["cluster", "permissions", "gpu-operator", "node-runtime", "references", "capacity", "restarts"]
    order = [gate.name for gate in checks.GATES]
    assert names == sorted(names, key=order.index)


def test_an_unreachable_cluster_is_one_line_and_nothing_else_is_judged(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path
) -> None:
    gone = "The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?"
    fake_kubectl.on(stderr=gone, rc=1)
    code, out, _ = cli("preflight", "--gpus", "8", "--nodes", "2", "--pvc", "data")
    assert code == 3
    [line] = [line for line in out.splitlines() if not line.startswith(("SKIPPED: host-runtime", "OK: kubectl"))]
    assert line == (
        "MISSING: cluster: cannot reach the API server https://127.0.0.1:6443 (context lab in $KUBECONFIG ("
        f"{tao_env / 'kubeconfig'})): {gone} -- start the cluster or pick the right one (`kubectl config "
        "get-contexts`, then --context NAME)"
    )


def test_dra_devices_are_judged_only_where_they_can_change_the_verdict() -> None:
    from kubectl_tao.gates import gpuinventory
    from kubectl_tao.gates.gpufit import QUEUE
    from kubectl_tao.k8s.kubectl import Completed

    first = type("Verdict", (), {"verdict": QUEUE})()
    judged: list[Any] = []

    def judge(devices: Any) -> Any:
        judged.append(devices)
        return first

    none_published = Completed(json.dumps({"kind": "List", "items": []}), "", 0)
    verdict, note = checks.judge_counting_dra(judge, first, lambda: checks.FollowUp(answer=none_published))
    assert (verdict, note, judged) == (first, "", [])  # nothing DRA publishes: the verdict without them stands
    devices = gpuinventory.parse_dra(fixture_json("dra-objects.json"))
    assert gpuinventory.counts_for_fit(devices) and not gpuinventory.counts_for_fit(None)
    published = Completed(json.dumps(fixture_json("dra-objects.json")), "", 0)
    checks.judge_counting_dra(judge, first, lambda: checks.FollowUp(answer=published))
    assert judged == [devices]
