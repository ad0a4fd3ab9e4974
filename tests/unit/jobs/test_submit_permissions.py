"""A partial role must not leave a credential Secret or a Job behind: submit checks every verb it will need
before anything is created, and when a cleanup does fail it names what was left, in the error and the record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl

from kubectl_tao.gates import permissions
from kubectl_tao.gates.permissions import Permission
from kubectl_tao.store.records import RecordStore

CANARY = "hf_PermCanary0123456789abcdefghijklmn"
SUBMIT = ["submit", "--image", "busybox:1.36", "--command", "true", "--gpus", "0", "--pvc", "data", "--env-file", "-"]
SSAR = ("create", "-o", permissions.REVIEW_TEMPLATE)


def answer(granted: list[Permission]) -> str:
    return "".join(f"{p.verb} {p.resource} {p.group or '-'} true\n" for p in granted)


def cluster(fake: FakeKubectl, *, deny: tuple[str, ...] = ()) -> None:
    every = permissions.needed(credentials=True, service=True)
    rows = answer([p for p in every if p.text not in deny])
    rows += "".join(f"{p.verb} {p.resource} {p.group or '-'} false\n" for p in every if p.text in deny)
    fake.on(*SSAR, stdout=rows)
    fake.on("get", "persistentvolumeclaim/data", stdout="PersistentVolumeClaim data Bound \n")
    fake.on("create", "--dry-run=server", stdout="secret/x\njob.batch/x\n")


def creates(fake: FakeKubectl) -> list[list[str]]:
    return [c.argv for c in fake.calls if c.argv[:1] == ["create"] and "--dry-run=server" not in c.argv
            and permissions.REVIEW_TEMPLATE not in c.argv]


def error_line(err: str) -> str:
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    return line


def records(tao_env: Path) -> list[Path]:
    jobs = tao_env / "state" / "jobs"
    return sorted(jobs.glob("*.json")) if jobs.exists() else []


def test_needed_covers_every_verb_of_every_kind_submit_touches() -> None:
    texts = [p.text for p in permissions.needed(credentials=True, service=True)]
    for kind in ("jobs.batch", "secrets", "services"):
        for verb in ("create", "list", "delete"):
            assert f"{verb} {kind}" in texts
    assert {"patch secrets", "patch services", "get jobs.batch", "list pods"} <= set(texts)
    plain = [p.text for p in permissions.needed(credentials=False, service=False)]
    assert not any("secrets" in t or "services" in t for t in plain) and "patch jobs.batch" not in plain


def test_keep_until_captured_also_needs_to_patch_the_job(cli: Any, fake_kubectl: FakeKubectl, tao_env: Path) -> None:
    cluster(fake_kubectl)  # grants everything but patch jobs.batch
    code, _, err = cli(*SUBMIT, "--keep-until-captured", stdin=f"HF_TOKEN={CANARY}\n")
    assert code == 1 and err.startswith("error: permission denied: you may not patch jobs.batch in namespace")
    assert creates(fake_kubectl) == [] and records(tao_env) == []


def test_the_reviews_ask_about_the_namespace_and_parse_back() -> None:
    wanted = [Permission("delete", "jobs", "batch"), Permission("patch", "secrets")]
    items = json.loads(permissions.review_stream(wanted, "team-a"))["items"]
    assert [i["kind"] for i in items] == ["SelfSubjectAccessReview"] * 2
    assert items[0]["spec"]["resourceAttributes"] == {
        "namespace": "team-a", "verb": "delete", "group": "batch", "resource": "jobs"
    }
    assert permissions.denied(wanted, "delete jobs batch true\npatch secrets - false\n") == [wanted[1]]
    assert permissions.denied(wanted, "patch secrets <no value> true\n") == [wanted[0]]  # unanswered = denied
    assert permissions.denied(wanted, "") == wanted


@pytest.mark.parametrize(
    "deny",
    [("delete jobs.batch",), ("patch secrets", "delete secrets"), ("create secrets",), ("list pods",)],
)
def test_a_partial_role_is_refused_before_anything_exists(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path, deny: tuple[str, ...]
) -> None:
    cluster(fake_kubectl, deny=deny)
    code, out, err = cli(*SUBMIT, stdin=f"HF_TOKEN={CANARY}\n")
    assert (code, out) == (1, ""), err
    assert err.startswith(f"error: permission denied: you may not {', '.join(deny)} in namespace tao-jobs")
    assert err.count("\n") == 1 and CANARY not in err
    assert creates(fake_kubectl) == [] and records(tao_env) == []


def test_an_unreachable_server_during_the_permission_check_is_exit_3(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path
) -> None:
    fake_kubectl.on(*SSAR, stderr="The connection to the server 127.0.0.1:6443 was refused", rc=1)
    fake_kubectl.on("get", "persistentvolumeclaim/data", stdout="PersistentVolumeClaim data Bound \n")
    code, _, err = cli(*SUBMIT, stdin=f"HF_TOKEN={CANARY}\n")
    assert code == 3 and "permission denied" not in err
    assert records(tao_env) == []


def _fail_after_create(fake: FakeKubectl) -> None:
    cluster(fake)
    fake.on("create", "-f", "-", "-n", stdout="Secret tao-creds-j 1111\nJob j 2222\n")
    forbidden = 'Error from server (Forbidden): secrets "tao-creds-j" is forbidden: admission webhook denied it'
    fake.on("patch", stderr=forbidden, rc=1)
    fake.on("delete", "jobs,services,secrets", stderr=forbidden, rc=1)


def test_a_failed_cleanup_names_what_was_left_in_the_error_and_the_record(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path
) -> None:
    _fail_after_create(fake_kubectl)
    fake_kubectl.on("get", "jobs,services,secrets", stdout="Secret/tao-creds-j\nJob/j\n")
    code, _, err = cli(*SUBMIT, stdin=f"HF_TOKEN={CANARY}\n")
    err = error_line(err)
    assert code == 1 and CANARY not in err
    assert "nothing left" not in err
    assert "could not remove secret/tao-creds-j, job.batch/j in namespace tao-jobs (the Job may still run)" in err
    assert "`kubectl delete -n tao-jobs secret/tao-creds-j job.batch/j`" in err
    [path] = records(tao_env)
    store = RecordStore()
    record = store.show(path.stem)
    assert record["terminal_state"] == "ERROR"
    assert "could not remove secret/tao-creds-j, job.batch/j" in record["transitions"][-1]["message"]
    assert store.get_extra(path.stem)["left_behind"] == ["secret/tao-creds-j", "job.batch/j"]


def test_when_nothing_can_be_listed_every_created_object_is_named(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path
) -> None:
    _fail_after_create(fake_kubectl)
    fake_kubectl.on("get", "jobs,services,secrets", stderr="Error from server (Forbidden): cannot list", rc=1)
    code, _, err = cli(*SUBMIT, stdin=f"HF_TOKEN={CANARY}\n")
    err = error_line(err)
    [path] = records(tao_env)
    rid = path.stem
    assert code == 1 and "nothing left" not in err
    assert f"could not remove secret/tao-creds-{rid}, job.batch/{rid} in namespace tao-jobs" in err


def test_a_server_gone_during_rollback_still_settles_the_record_and_names_what_was_created(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path
) -> None:
    cluster(fake_kubectl)
    fake_kubectl.on("create", "-f", "-", "-n", stdout="Secret tao-creds-j 1111\nJob j 2222\n")
    refused = "The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?"
    fake_kubectl.on("patch", stderr=refused, rc=1)
    fake_kubectl.on("delete", "jobs,services,secrets", stderr=refused, rc=1)
    fake_kubectl.on("get", "jobs,services,secrets", stderr=refused, rc=1)
    code, _, err = cli(*SUBMIT, stdin=f"HF_TOKEN={CANARY}\n")
    [path] = records(tao_env)
    rid = path.stem
    assert code in (1, 3) and "nothing left" not in error_line(err)
    assert f"secret/tao-creds-{rid}, job.batch/{rid}" in error_line(err)
    assert f"record {rid} is UNKNOWN" in error_line(err) and f"`kubectl tao status {rid}`" in error_line(err)
    record = RecordStore().show(rid)
    assert record["terminal_state"] is None and record["transitions"][-1]["state"] == "UNKNOWN"
    assert RecordStore().get_extra(rid)["submit_phase"] == "rolling-back"


def test_a_cleanup_that_worked_still_says_nothing_is_left(cli: Any, fake_kubectl: FakeKubectl, tao_env: Path) -> None:
    cluster(fake_kubectl)
    fake_kubectl.on("create", "-f", "-", "-n", stdout="Secret tao-creds-j 1111\nJob j 2222\n")
    fake_kubectl.on("patch", stderr='Error from server (Forbidden): secrets "x" is forbidden: no', rc=1)
    fake_kubectl.on("delete", "jobs,services,secrets", stdout="")
    code, _, err = cli(*SUBMIT, stdin=f"HF_TOKEN={CANARY}\n")
    assert code == 1 and error_line(err).endswith("marked ERROR; nothing left running)")


# ------------------------------------------------------------------ the reviews ride in the server dry run


def test_the_reviews_travel_in_the_gates_dry_run_first_and_no_review_call_of_their_own(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path
) -> None:
    cluster(fake_kubectl)
    uid = "0b9b6c1e-1111-2222-3333-444455556666"
    fake_kubectl.on("create", "-f", "-", "-n", stdout=f"Secret tao-creds-j 1111\nJob j {uid}\n")
    fake_kubectl.on("patch", stdout="secret/tao-creds-j\n")
    code, _, err = cli(*SUBMIT, stdin=f"HF_TOKEN={CANARY}\n")
    assert code == 0, err
    dry = [c for c in fake_kubectl.calls if "--dry-run=server" in c.argv]
    assert len(dry) == 1 and permissions.COMBINED_TEMPLATE in dry[0].argv
    assert not any(permissions.REVIEW_TEMPLATE in c.argv for c in fake_kubectl.calls)
    kinds = [item["kind"] for item in json.loads(dry[0].stdin or "")["items"]]
    reviews = len(permissions.needed(credentials=True, service=False))
    assert kinds == ["SelfSubjectAccessReview"] * reviews + ["Secret", "Job"]
    # the dry run carries the real stream that create sends next (the Secret through stdin, never argv)
    [create] = [c for c in fake_kubectl.calls if c.argv[:2] == ["create", "-f"]]
    assert json.loads(create.stdin or "")["items"] == json.loads(dry[0].stdin or "")["items"][reviews:]
    assert not any(CANARY in " ".join(c.argv) for c in fake_kubectl.calls)


def test_a_denied_verb_wins_over_the_dry_runs_own_forbidden(cli: Any, fake_kubectl: FakeKubectl, tao_env: Path) -> None:
    cluster(fake_kubectl, deny=("create jobs.batch",))
    fake_kubectl.on("create", "--dry-run=server", rc=1, stdout="Secret/x\n",
                    stderr='Error from server (Forbidden): error when creating "STDIN": jobs.batch is forbidden')
    code, _, err = cli(*SUBMIT, stdin=f"HF_TOKEN={CANARY}\n")
    assert code == 1
    assert error_line(err).startswith("error: permission denied: you may not create jobs.batch in namespace tao-jobs")
    assert creates(fake_kubectl) == [] and records(tao_env) == []


def test_a_dry_run_that_failed_before_any_review_was_answered_could_not_check_permissions(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path
) -> None:
    cluster(fake_kubectl)
    fake_kubectl.rules.insert(0, (SSAR, permissions.Completed("", "error: unable to decode \"STDIN\"", 1)))
    code, _, err = cli(*SUBMIT, stdin=f"HF_TOKEN={CANARY}\n")
    assert code == 1
    assert error_line(err).startswith("error: could not check your permissions in namespace tao-jobs (")
    assert records(tao_env) == []


def test_split_tells_the_reviews_from_the_dry_runs_error() -> None:
    from kubectl_tao.core.errors import ClusterUnreachableError, KubectlError
    from kubectl_tao.k8s.kubectl import Completed, Kubectl

    kc = Kubectl()
    rows = "create jobs batch true\nJob/x\n"
    ok = Completed(rows, "", 0)
    assert permissions.split(ok, kc.error_for) == (ok, None)
    refused = Completed(rows, 'Error from server (Invalid): Job.batch "x" is invalid', 1)
    reviews, error = permissions.split(refused, kc.error_for)
    assert reviews is refused and isinstance(error, KubectlError) and error.reason == "Invalid"
    silent = Completed("", "error: something broke before the server answered", 1)
    reviews, error = permissions.split(silent, kc.error_for)
    assert reviews is error and isinstance(error, KubectlError)
    gone = ClusterUnreachableError("cluster unreachable")
    assert permissions.split(gone, kc.error_for) == (gone, gone)
    assert permissions.answered("get pods - false\n") and not permissions.answered("Job/x\nSecret/y\n")


def test_the_combined_call_lists_the_reviews_before_the_objects_in_the_namespace() -> None:
    wanted = [Permission("create", "jobs", "batch")]
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}}
    args, kwargs = permissions.with_dry_run(wanted, "team-a", [job])
    assert args[:4] == ["create", "--dry-run=server", "-f", "-"] and args[args.index("-n") + 1] == "team-a"
    assert kwargs["check"] is False and kwargs["namespaced"] is False
    items = json.loads(kwargs["stdin"])["items"]
    assert items[0]["spec"]["resourceAttributes"]["namespace"] == "team-a" and items[1] == job


def test_an_unknown_field_the_server_warns_about_refuses_the_dry_run_as_strict_validation_would(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path
) -> None:
    from kubectl_tao.k8s import objects

    cluster(fake_kubectl)
    fake_kubectl.rules.insert(0, (("create", "--dry-run=server"), permissions.Completed(
        "secret/x\njob.batch/x\n", 'Warning: unknown field "spec.template.spec.bogus"\n', 0)))
    code, _, err = cli(*SUBMIT, stdin=f"HF_TOKEN={CANARY}\n")
    assert code == 1 and records(tao_env) == [] and creates(fake_kubectl) == []
    assert error_line(err).startswith(
        'error: server dry run refused the job: the API server does not accept unknown field "spec.template.spec.bogus"'
    )
    [dry] = [c.argv for c in fake_kubectl.calls if "--dry-run=server" in c.argv]
    assert objects.VALIDATE in dry  # the server validates; kubectl does not load the OpenAPI document
    assert objects.field_problems("Warning: duplicate field \"a\"\nWarning: would violate PodSecurity\n") == [
        'duplicate field "a"'
    ]
