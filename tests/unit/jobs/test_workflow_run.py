"""`workflow run` against the fake kubectl: every step's gates before anything is created, then the release RBAC,
the held steps from the last to the first, the RBAC owned by every step Job; a refused create leaves nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.fake_kubectl import FakeKubectl, answer_pvc_submit

from kubectl_tao.k8s.kubectl import Completed

FILE = """\
apiVersion: kubectl-tao/v1
kind: Workflow
metadata: {name: chain}
defaults: {image: "busybox:1.36", pvc: data, gpus: 1, network-arch: real}
steps:
- {name: train, action: train, command: "run ${train.results}"}
- {name: evaluate, action: evaluate, when: train.acc >= 0.5, command: "eval ${train.results}"}
- {name: export, action: export, command: "export ${evaluate.results}"}
"""


def write(tmp_path: Path) -> str:
    path = tmp_path / "chain.yaml"
    path.write_text(FILE, encoding="utf-8")
    return str(path)


def real_creates(fake: FakeKubectl) -> list[Any]:
    return [c for c in fake.calls if c.argv[:2] == ["create", "-f"] and "--dry-run=server" not in c.argv]


def test_run_gates_every_step_then_creates_rbac_and_the_steps_last_first(
    cli: Any, fake_kubectl: FakeKubectl, tmp_path: Path, tao_env: Path
) -> None:
    fake_kubectl.on("create", "-f", stdout="Job x 0b9b6c1e-1111-2222-3333-444455556666\n")
    fake_kubectl.on("patch", "-f", "-", stdout="serviceaccount/x\n")
    answer_pvc_submit(fake_kubectl)
    code, out, err = cli("workflow", "run", write(tmp_path), "-o", "json")
    assert code == 0, err
    created = json.loads(out)
    assert [s["name"] for s in created["steps"]] == ["train", "evaluate", "export"]
    argvs = [c.argv for c in fake_kubectl.calls]
    dry_runs = [i for i, a in enumerate(argvs) if "--dry-run=server" in a]
    creates = real_creates(fake_kubectl)
    first_create = argvs.index(creates[0].argv)
    assert len(dry_runs) == 3 and max(dry_runs) < first_create  # each step gated once, before any create
    kinds = [[o["kind"] for o in json.loads(c.stdin or "{}").get("items", [])] or c.stdin for c in creates]
    assert kinds[0] == ["ServiceAccount", "Role", "RoleBinding"] * 2  # train's and evaluate's release
    jobs = [s["job"].split("/", 1)[1] for s in created["steps"]]
    order = [next(o["metadata"]["name"] for o in json.loads(c.stdin or "")["items"] if o["kind"] == "Job")
             for c in creates[1:]]
    assert order == [jobs[2], jobs[1], jobs[0]]
    (patch,) = [c for c in fake_kubectl.calls if c.argv[:1] == ["patch"] and "ownerReferences" in " ".join(c.argv)]
    owners = json.loads(patch.argv[patch.argv.index("-p") + 1])["metadata"]["ownerReferences"]
    assert sorted(o["name"] for o in owners) == sorted(jobs)
    assert [o["kind"] for o in json.loads(patch.stdin or "")["items"]] == ["ServiceAccount", "Role", "RoleBinding"] * 2
    for step in created["steps"]:
        extra = json.loads((tao_env / "state" / "jobs" / ".kubectl-tao" / f"{step['id']}.json").read_text())
        assert extra["workflow"] == created["name"] and extra["workflow_step"] == step["name"]
        kept = extra["request"]["flags"]["command"]  # the user's command, resolved, without the release
        assert kept.split()[0] == {"train": "run", "evaluate": "eval", "export": "export"}[step["name"]]
        assert "KUBECTL_TAO_WF_RELEASE" not in kept and "${" not in kept
        # Kept until its ending is captured: the TTL is set back then (3600 s, the default).
        assert (extra["keep_until_captured"], extra["ttl_seconds"]) == (True, 3600)


def test_a_refused_gate_creates_nothing(cli: Any, fake_kubectl: FakeKubectl, tmp_path: Path, tao_env: Path) -> None:
    fake_kubectl.on("get", "persistentvolumeclaim/data", stdout="", stderr='persistentvolumeclaims "data" not found',
                    rc=1)
    answer_pvc_submit(fake_kubectl)
    code, _out, err = cli("workflow", "run", write(tmp_path))
    assert code != 0 and "step train:" in err and "(nothing was created)" in err
    assert real_creates(fake_kubectl) == []
    assert not list((tao_env / "state").rglob("*.json"))


def test_a_refused_create_leaves_no_step_and_removes_the_rbac(
    cli: Any, fake_kubectl: FakeKubectl, tmp_path: Path
) -> None:
    fake_kubectl.on("create", "-f", stderr="Error from server (Forbidden): roles.rbac.authorization.k8s.io is "
                    "forbidden", rc=1)
    fake_kubectl.on("delete", stdout="")
    answer_pvc_submit(fake_kubectl)
    code, _out, err = cli("workflow", "run", write(tmp_path))
    assert code != 0 and "forbidden" in err and "(nothing of the run is left)" in err
    deletes = [c.argv for c in fake_kubectl.calls if c.argv[:1] == ["delete"]]
    assert any("serviceaccounts,roles.rbac.authorization.k8s.io,rolebindings.rbac.authorization.k8s.io" in a
               for a in deletes)


def _ran(cli: Any, fake: FakeKubectl, tmp_path: Path) -> dict[str, Any]:
    fake.on("create", "-f", stdout="Job x 0b9b6c1e-1111-2222-3333-444455556666\n")
    fake.on("patch", "-f", "-", stdout="serviceaccount/x\n")
    answer_pvc_submit(fake)
    code, out, err = cli("workflow", "run", write(tmp_path), "-o", "json")
    assert code == 0, err
    return dict(json.loads(out))


def _jobs_read(fake: FakeKubectl, run: str, items: list[dict[str, Any]]) -> None:
    """`workflow status`'s one read of the run's Jobs answers ITEMS (ahead of every other rule)."""
    prefix = ("get", "jobs", "-n", "tao-jobs", "-l", f"kubectl-tao.io/workflow={run},app.kubernetes.io/managed-by="
              "kubectl-tao")
    fake.rules[:] = [rule for rule in fake.rules if rule[0] != prefix]
    fake.rules.insert(0, (prefix, Completed(json.dumps({"items": items}), "", 0)))


def _job(name: str, condition: str | None = None, **more: Any) -> dict[str, Any]:
    status = {"conditions": [{"type": condition, "status": "True"}]} if condition else {}
    return {"metadata": {"name": name, **more}, "spec": {"suspend": condition is None}, "status": status}


def test_resume_runs_again_only_the_steps_that_did_not_complete_into_their_results(
    cli: Any, fake_kubectl: FakeKubectl, tmp_path: Path, tao_env: Path
) -> None:
    first = _ran(cli, fake_kubectl, tmp_path)
    jobs = {s["name"]: s["job"].split("/", 1)[1] for s in first["steps"]}
    ids = {s["name"]: s["id"] for s in first["steps"]}
    _jobs_read(fake_kubectl, first["name"], [_job(jobs["train"], "Complete"), _job(jobs["evaluate"], "Failed")])
    fake_kubectl.calls.clear()
    code, out, err = cli("workflow", "resume", first["name"], "-o", "json")
    assert code == 0, err
    again = json.loads(out)
    assert again["name"] != first["name"] and again["workflow"] == "chain"
    assert [(s["name"], s["held"]) for s in again["steps"]] == [("evaluate", False), ("export", True)]
    state = tao_env / "state" / "jobs"
    for step in again["steps"]:
        extra = json.loads((state / ".kubectl-tao" / f"{step['id']}.json").read_text())
        old = json.loads((state / f"{ids[step['name']]}.json").read_text())
        assert extra["resumed_from"] == first["name"] and extra["workflow"] == again["name"]
        assert extra["request"]["flags"]["results_dir"] == old["results_dir"]
        # the keys in the order the dict writers wrote them (the typed writes keep the file's bytes)
        assert list(extra) == [
            "schema_version", "id", "api_server", "context", "namespace", "job_name", "secret_names", "service_name",
            "gpus", "nodes", "gang", "submit_phase", "warnings", "workflow", "workflow_name", "workflow_step",
            "workflow_index", "workflow_after", "workflow_when", "workflow_file", "results_seen_as",
            "keep_until_captured", "ttl_seconds", "ttl_hold", "request", "resumed_from", "job_uid",
        ]


def test_resume_is_refused_while_running_and_after_a_failed_gate(
    cli: Any, fake_kubectl: FakeKubectl, tmp_path: Path
) -> None:
    first = _ran(cli, fake_kubectl, tmp_path)
    jobs = {s["name"]: s["job"].split("/", 1)[1] for s in first["steps"]}
    _jobs_read(fake_kubectl, first["name"], [_job(jobs["train"], "Complete"), _job(jobs["evaluate"]),
                                              _job(jobs["export"])])
    fake_kubectl.calls.clear()
    code, _out, err = cli("workflow", "resume", first["name"])
    assert code == 1 and "is still running" in err
    gate = [{"step": "evaluate", "gate": "train.acc >= 0.5", "value": 0.1, "passed": False}]
    noted = {"annotations": {"kubectl-tao.io/workflow-gate": json.dumps(gate)}}
    _jobs_read(fake_kubectl, first["name"], [_job(jobs["train"], "Complete", **noted)])
    code, _out, err = cli("workflow", "resume", first["name"])
    assert code == 1 and "stopped at a metric gate" in err
    assert real_creates(fake_kubectl) == [] and not [c for c in fake_kubectl.calls if "--dry-run=server" in c.argv]


def test_status_cancel_and_resume_refuse_a_name_no_run_can_have(cli: Any, fake_kubectl: FakeKubectl) -> None:
    for verb in ("status", "cancel", "resume"):
        code, _out, err = cli("workflow", verb, "x,app=y")
        assert code == 2 and "not a run name" in err
        code, _out, err = cli("workflow", verb, "no-such-run")
        assert code == 1 and "no workflow 'no-such-run'" in err
    assert fake_kubectl.calls == []


GONE = "The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?"


def test_a_rollback_the_api_server_cut_off_leaves_the_created_steps_unknown_and_names_what_is_left(
    cli: Any, fake_kubectl: FakeKubectl, tmp_path: Path, tao_env: Path, monkeypatch: Any
) -> None:
    # The RBAC and the last step are created, then the API server goes away: the next create, and every delete
    # and listing of the rollback after it, is refused.
    fake_kubectl.on("create", "-f", stdout="Job x 0b9b6c1e-1111-2222-3333-444455556666\n")
    answer_pvc_submit(fake_kubectl)
    answered = fake_kubectl.answer
    made = []

    def answer(args: list[str]) -> Completed:
        real = args[:2] == ["create", "-f"] and "--dry-run=server" not in args
        made.extend([1] if real else [])
        if (real and len(made) > 2) or (made and len(made) > 2 and args[:1] in (["delete"], ["get"])):
            return Completed("", GONE, 1)
        return answered(args)

    monkeypatch.setattr(fake_kubectl, "answer", answer)
    code, _out, err = cli("workflow", "run", write(tmp_path))
    assert code == 3 and len([line for line in err.splitlines() if line.startswith("error:")]) == 1, err
    state = tao_env / "state" / "jobs"
    records = {json.loads((state / ".kubectl-tao" / p.name).read_text())["workflow_step"]: json.loads(p.read_text())
               for p in state.glob("*.json")}
    export = records["export"]  # created before the API server went away: its rollback could not finish
    assert export["transitions"][-1]["state"] == "UNKNOWN"
    assert json.loads((state / ".kubectl-tao" / f"{export['id']}.json").read_text())["submit_phase"] == "rolling-back"
    assert f"record {export['id']} is UNKNOWN" in err and "could not remove" in err
    assert "the release RBAC: could not remove serviceaccount/tao-wf-chain-" in err


def test_a_rollback_that_removed_everything_marks_the_created_steps_error(
    cli: Any, fake_kubectl: FakeKubectl, tmp_path: Path, tao_env: Path, monkeypatch: Any
) -> None:
    fake_kubectl.on("create", "-f", stdout="Job x 0b9b6c1e-1111-2222-3333-444455556666\n")
    fake_kubectl.on("delete", stdout="")
    answer_pvc_submit(fake_kubectl)
    answered = fake_kubectl.answer
    made = []

    def answer(args: list[str]) -> Completed:
        real = args[:2] == ["create", "-f"] and "--dry-run=server" not in args
        made.extend([1] if real else [])
        if real and len(made) > 2:
            return Completed("", 'Error from server (Forbidden): jobs.batch is forbidden: exceeded quota: q', 1)
        return answered(args)

    monkeypatch.setattr(fake_kubectl, "answer", answer)
    code, _out, err = cli("workflow", "run", write(tmp_path))
    assert code != 0 and "nothing left running" in err
    state = tao_env / "state" / "jobs"
    states = sorted(json.loads(p.read_text())["transitions"][-1]["state"] for p in state.glob("*.json"))
    assert states == ["ERROR", "ERROR"]  # the step created, and the one refused


def test_a_run_whose_own_objects_are_not_permitted_is_refused_before_anything_is_created(
    cli: Any, fake_kubectl: FakeKubectl, tmp_path: Path, tao_env: Path
) -> None:
    # The steps' own permissions are granted, not the release RBAC's: a Role could not be created, and the
    # steps would run with nothing to release them.
    from support.fake_kubectl import review_answer

    review, denied = review_answer(deny=("create roles.rbac.authorization.k8s.io",
                                         "delete serviceaccounts"))
    fake_kubectl.on(*review, stdout=denied)
    answer_pvc_submit(fake_kubectl)
    code, _out, err = cli("workflow", "run", write(tmp_path))
    assert code == 1 and err.count("\n") == 1, err
    assert err.startswith("error: permission denied: you may not delete serviceaccounts, create "
                          "roles.rbac.authorization.k8s.io in namespace tao-jobs; `workflow run` needs them")
    assert "(nothing was created)" in err
    assert real_creates(fake_kubectl) == []
    assert not list((tao_env / "state").rglob("*.json"))


def test_a_queued_run_asks_for_the_workloads_it_creates_and_removes(fake_kubectl: FakeKubectl) -> None:
    import pytest

    from kubectl_tao.core.errors import GateError
    from kubectl_tao.k8s.kubectl import Kubectl
    from kubectl_tao.workflows.runs import gate_steps

    fake_kubectl.on("create", "-o", stdout="create workloads kueue.x-k8s.io false\n")
    with pytest.raises(GateError) as refused:
        gate_steps(Kubectl(), [], namespace="tao", server="", store=None, own=(False, True))
    assert refused.value.message.startswith(
        "permission denied: you may not create workloads.kueue.x-k8s.io, patch workloads.kueue.x-k8s.io, list "
        "workloads.kueue.x-k8s.io, delete workloads.kueue.x-k8s.io in namespace tao; `workflow run` needs them")
    (asked,) = fake_kubectl.calls
    reviews = json.loads(asked.stdin or "")["items"]
    assert {(r["spec"]["resourceAttributes"]["verb"], r["spec"]["resourceAttributes"]["resource"],
             r["spec"]["resourceAttributes"]["group"], r["spec"]["resourceAttributes"]["namespace"])
            for r in reviews} == {(verb, "workloads", "kueue.x-k8s.io", "tao")
                                  for verb in ("create", "patch", "list", "delete")}
