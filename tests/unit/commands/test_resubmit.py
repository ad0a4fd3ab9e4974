"""`kubectl tao resubmit JOB`: a new job from the request a record kept (any state, the Job gone or not), into the
same results directory, linked both ways; refused in one line when the record keeps no request."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl, fixture_json, review_answer

from kubectl_tao.store.records import RecordStore

UID = "0b9b6c1e-1111-2222-3333-444455556666"
SUBMIT = ["submit", "--image", "busybox:1.36", "--command", "python3 train.py", "--gpus", "0", "--nodes", "2",
          "--pvc", "data", "--gang", "off", "--env-secret", "creds"]


def cluster(fake: FakeKubectl, *, restarts: bool = True) -> None:
    from kubectl_tao.restarts import servercheck

    args, _ = servercheck.dry_run_call("tao-jobs")
    fake.on(*args, stdout="RestartAllContainers" if restarts else "")
    review, granted = review_answer()
    fake.on(*review, stdout=granted)
    fake.on("version", stdout=json.dumps({"serverVersion": {"major": "1", "minor": "37", "gitVersion": "v1.37.2"}}))
    fake.capacity({"kind": "List", "items": fixture_json("nodes-2x8.json")["items"]})
    fake.on("get", "persistentvolumeclaim/data", stdout="PersistentVolumeClaim data Bound \nSecret creds - KEY,\n")
    fake.on("create", "--dry-run=server", stdout="job.batch/x created (server dry run)\n")
    fake.on("create", "-f", stdout=f"Job x {UID}\n")


def submitted(cli: Any, *extra: str) -> str:
    code, out, err = cli(*SUBMIT, *extra)
    assert code == 0, err
    return out.strip().splitlines()[-1]


def created_job(fake: FakeKubectl) -> dict[str, Any]:
    [call] = [c for c in fake.calls if "create" in c.argv and "--dry-run=server" not in c.argv][-1:]
    items = json.loads(call.stdin or "{}")
    items = items.get("items", [items])
    return next(i for i in items if i.get("kind") == "Job")


def test_resubmit_runs_the_same_request_into_the_same_results_dir_and_links_both_records(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    cluster(fake_kubectl)
    old = submitted(cli)
    store = RecordStore()
    store.mark(old, "ERROR", message="rank 1 crashed", source="poller", err_class="ERR_INFRA")
    code, out, err = cli("resubmit", old, "--max-restarts", "2")
    assert code == 0, err
    new = out.strip().splitlines()[-1]
    assert new != old
    new_record, old_record = store.show(new), store.show(old)
    assert new_record["results_dir"] == old_record["results_dir"] == f"/workspace/results/{old}"
    assert new_record["retry_of"] == old
    assert store.get_extra(old)["resubmitted_as"] == [new]
    kept = store.get_extra(new)["request"]["flags"]
    assert (kept["image"], kept["command"], kept["env_secret_name"], kept["max_restarts"]) == (
        "busybox:1.36", "python3 train.py", "creds", 2)
    job = created_job(fake_kubectl)
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["TAO_RESULTS_ROOT"] == f"/workspace/results/{old}"  # the old job's checkpoints
    assert env["TAO_MAX_RESTARTS"] == "2"
    assert container["envFrom"] == [{"secretRef": {"name": "creds", "optional": False}}]


def test_resubmit_keeps_the_old_max_restarts_unless_told(cli: Any, fake_kubectl: FakeKubectl) -> None:
    cluster(fake_kubectl)
    old = submitted(cli, "--max-restarts", "3")
    code, out, err = cli("resubmit", old)
    assert code == 0, err
    assert RecordStore().get_extra(out.strip().splitlines()[-1])["max_restarts"] == 3


def test_a_record_without_a_request_is_refused_in_one_line(cli: Any, fake_kubectl: FakeKubectl) -> None:
    store = RecordStore()
    record = store.open(platform="kubernetes", image="busybox", network_arch="dino", action="train",
                        storage_tier="A", results_root="/workspace/results")
    store.update_extra(record.id, namespace="tao-jobs", job_name="gone", api_server="https://127.0.0.1:6443")
    code, _, err = cli("resubmit", record.id)
    assert code == 2
    [line] = [line for line in err.splitlines() if line.startswith("error: ")]
    assert line == (f"error: job {record.id}: its record keeps no job request (submitted by another tool or an older "
                    "kubectl-tao), so it cannot be resubmitted; run `kubectl tao submit` with its flags")
    assert fake_kubectl.calls == [] or all("create" not in c.argv for c in fake_kubectl.calls)


def test_resubmit_with_max_restarts_on_a_server_without_restart_rules_is_refused(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    cluster(fake_kubectl, restarts=False)
    old = submitted(cli)
    code, _, err = cli("resubmit", old, "--max-restarts", "1")
    assert code == 2
    assert "--max-restarts 1: Kubernetes v1.37.2 cannot restart a rank's containers in place" in err
    assert RecordStore().get_extra(old).get("resubmitted_as") is None


def test_the_kept_request_holds_credential_references_never_values(
    cli: Any, fake_kubectl: FakeKubectl, monkeypatch: Any, tmp_path: Any
) -> None:
    cluster(fake_kubectl)
    fake_kubectl.on("create", "secret", stdout="secret/x created\n")
    fake_kubectl.on("apply", stdout="secret/x configured\n")
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 34)
    env_file = tmp_path / "creds.env"
    env_file.write_text("WANDB_API_KEY=" + "w" * 40 + "\n")
    args = [a for a in SUBMIT if a not in ("--env-secret", "creds")]
    code, out, err = cli(*args, "--env", "HF_TOKEN", "--env-file", str(env_file))
    assert code == 0, err
    record_id = out.strip().splitlines()[-1]
    kept = RecordStore().get_extra(record_id)["request"]
    assert kept["flags"]["env"] == ["HF_TOKEN"] and kept["flags"]["env_file"] == str(env_file)
    text = json.dumps(kept)
    assert "x" * 34 not in text and "w" * 40 not in text


def test_a_request_whose_command_had_a_credential_redacted_is_refused(cli: Any, fake_kubectl: FakeKubectl) -> None:
    # submit's linter refuses an inline credential, but the record's redactor is wider (long random runs):
    # whatever it replaced cannot be run again
    cluster(fake_kubectl)
    old = submitted(cli)
    store = RecordStore()
    kept = store.get_extra(old)["request"]
    kept["flags"]["command"] = "python3 train.py --run-id ***REDACTED***"
    store.update_extra(old, request=kept)
    code, _, err = cli("resubmit", old)
    assert code == 2
    assert f"error: job {old}: its record keeps --command with a credential redacted" in err


def tampered(store: RecordStore, record_id: str, **flags: Any) -> None:
    kept = store.get_extra(record_id)["request"]
    kept["flags"].update(flags)
    store.update_extra(record_id, request=kept)


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("gpus", "8", 'a string, not a whole number (e.g. 8) (what --gpus takes)'),
        ("gpus", [1], "a list, not a whole number (e.g. 8) (what --gpus takes)"),
        ("gpus", True, "true/false, not a whole number (e.g. 8) (what --gpus takes)"),
        ("max_restarts", "3", "a string, not a whole number (e.g. 8) (what --max-restarts takes)"),
        ("max_restarts", 2.5, "a number with a fraction, not a whole number (e.g. 8) (what --max-restarts takes)"),
        ("keep_until_captured", "false", "a string, not true or false (what --keep-until-captured takes)"),
        ("retries_per_index", "2", "a string, not a whole number or null (what --retries-per-index takes)"),
        ("image", 7, "a whole number, not a string or null (what --image takes)"),
        ("launcher", None, "null, not a string (what --launcher takes)"),
        ("label", "team=ml", "a string, not a list of strings (what --label takes)"),
        ("label", ["team=ml", 3], "a list holding a whole number, not a list of strings (what --label takes)"),
    ],
)
def test_a_hand_edited_request_field_of_the_wrong_type_is_refused_in_one_line_naming_it(
    cli: Any, fake_kubectl: FakeKubectl, field: str, value: Any, problem: str
) -> None:
    cluster(fake_kubectl)
    old = submitted(cli)
    store = RecordStore()
    tampered(store, old, **{field: value})
    created = len(fake_kubectl.calls)
    code, _, err = cli("resubmit", old)
    assert code == 2
    assert err.splitlines() == [
        f"error: job {old}: request.flags.{field} in {store.extra_path(old)} is {problem}; correct it there, or run "
        "`kubectl tao submit` with the job's flags"
    ]
    assert len(fake_kubectl.calls) == created  # refused before any cluster call
    assert store.get_extra(old).get("resubmitted_as") is None


def test_a_hand_edited_given_list_is_refused(cli: Any, fake_kubectl: FakeKubectl) -> None:
    cluster(fake_kubectl)
    old = submitted(cli)
    store = RecordStore()
    kept = store.get_extra(old)["request"]
    kept["given"] = "gpus"
    store.update_extra(old, request=kept)
    code, _, err = cli("resubmit", old)
    assert code == 2
    assert err.splitlines() == [
        f"error: job {old}: request.given in {store.extra_path(old)} is not a list of flag names; correct it there, "
        "or run `kubectl tao submit` with the job's flags"
    ]


def test_keep_until_captured_kept_as_false_stays_false(cli: Any, fake_kubectl: FakeKubectl) -> None:
    cluster(fake_kubectl)
    old = submitted(cli)
    store = RecordStore()
    tampered(store, old, keep_until_captured=False)
    code, out, err = cli("resubmit", old)
    assert code == 0, err
    new = out.strip().splitlines()[-1]
    assert store.get_extra(new)["request"]["flags"]["keep_until_captured"] is False
    assert created_job(fake_kubectl)["spec"]["ttlSecondsAfterFinished"] == 3600


def test_a_results_dir_the_store_redacted_is_refused(cli: Any, fake_kubectl: FakeKubectl) -> None:
    cluster(fake_kubectl)
    old = submitted(cli)
    store = RecordStore()
    path = store.path(old)
    record = json.loads(path.read_text())
    record["results_dir"] = "s3://bucket/run?X-Amz-Signature=***REDACTED***"
    path.write_text(json.dumps(record))
    code, _, err = cli("resubmit", old)
    assert code == 2
    assert err.splitlines() == [
        f"error: job {old}: results_dir in {path} had a credential redacted, so it names no directory to resume "
        "from; run `kubectl tao submit` with the job's flags and --results-dir set to the directory"
    ]
    assert store.get_extra(old).get("resubmitted_as") is None
