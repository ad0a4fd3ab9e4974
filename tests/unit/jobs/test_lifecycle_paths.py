"""Lifecycle paths that otherwise run only against the cluster, driven with the fake kubectl: a submit that fails
before and after creating objects, cancel, the record write-back of an ended Job, list and preflight."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl, fixture_json, open_kubernetes_record, review_answer

from kubectl_tao.core import contract
from kubectl_tao.core.errors import GateError
from kubectl_tao.jobs import track
from kubectl_tao.jobs.cancel import cancel
from kubectl_tao.k8s.kubectl import Kubectl
from kubectl_tao.store.records import RecordStore

SERVER = "https://127.0.0.1:6443"  # the kubeconfig of the cli fixture
UID = "0b9b6c1e-1111-2222-3333-444455556666"
SUBMIT = ["submit", "--image", "busybox:1.36", "--command", "true", "--storage-tier", "C", "--s3-output", "s3://bucket/out",
          "--gpus", "0"]


def _granted(fake: FakeKubectl) -> None:
    review, granted = review_answer()
    fake.on(*review, stdout=granted)


def _only_record() -> tuple[RecordStore, str]:
    store = RecordStore()
    [record] = store.list()
    return store, record.id


def _deletes(fake: FakeKubectl) -> list[list[str]]:
    return [argv for argv in fake.argvs() if "delete" in argv]


# ------------------------------------------------------------------ submit's failure paths


def test_a_refused_server_dry_run_is_a_gate_no_record_opens_and_nothing_is_created(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path
) -> None:
    _granted(fake_kubectl)
    fake_kubectl.on(
        "create", "--dry-run=server",
        stderr='Error from server (Invalid): Job.batch "x" is invalid: spec.template: Required value', rc=1,
    )  # fmt: skip
    code, _, err = cli(*SUBMIT)
    assert code == 1
    [line] = err.strip().splitlines()
    assert line.startswith("error: server dry run refused the job: Error from server (Invalid)")
    assert line.endswith("fix that and submit again (nothing was created, no record opened)")
    jobs = tao_env / "state" / "jobs"
    assert RecordStore().list() == [] and (not jobs.exists() or list(jobs.glob("*.json")) == [])
    assert [argv for argv in fake_kubectl.argvs() if "create" in argv and "--dry-run=server" not in argv] == []
    assert _deletes(fake_kubectl) == []


def test_a_create_without_a_pinnable_uid_rolls_back_by_label(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _granted(fake_kubectl)
    fake_kubectl.on("create", "--dry-run=server", stdout="job.batch/x created (server dry run)\n")
    fake_kubectl.on("create", "-f", stdout="Job x not-a-uid\n")
    fake_kubectl.on("delete", "jobs,services,secrets", stdout="job.batch/x deleted\n")
    code, _, err = cli(*SUBMIT)
    store, rid = _only_record()
    job_name = store.get_extra(rid)["job_name"]
    assert code == 1 and "which is not a UID" in err
    [delete] = _deletes(fake_kubectl)
    assert delete[delete.index("-l") + 1] == contract.job_selector(job_name)
    assert "--cascade=foreground" in delete
    record = store.show(rid)
    assert record["terminal_state"] == "ERROR" and "left_behind" not in store.get_extra(rid)


def test_what_a_rollback_could_not_remove_is_recorded_with_the_error(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _granted(fake_kubectl)
    fake_kubectl.on("create", "--dry-run=server", stdout="job.batch/x created (server dry run)\n")
    fake_kubectl.on("create", "-f", stdout=f"Job x {UID}\nService x {UID}\n")
    forbidden = 'Error from server (Forbidden): services "x" is forbidden: cannot patch'
    fake_kubectl.on("patch", stderr=forbidden, rc=1)
    fake_kubectl.on("delete", "jobs,services,secrets", stderr=forbidden, rc=1)
    fake_kubectl.on("get", "jobs,services,secrets", stdout="Service/x\n")
    code, _, err = cli(*SUBMIT)
    store, rid = _only_record()
    assert code == 1 and "could not remove service/x" in err
    assert store.get_extra(rid)["left_behind"] == ["service/x"]
    assert "could not remove service/x" in store.show(rid)["transitions"][-1]["message"]


UNREACHABLE = "Unable to connect to the server: dial tcp 127.0.0.1:6443: connect: connection refused"


def test_a_rollback_cut_off_by_the_server_leaves_unknown_and_status_finishes_it(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    """The create failed, then the API server went away before the rollback could remove anything: the Job may
    exist, so the record is not a final ERROR (status would show a live Job under it) but UNKNOWN, and the next
    status removes what is left and settles it ERROR with the submit's own reason."""
    _granted(fake_kubectl)
    fake_kubectl.on("create", "--dry-run=server", stdout="job.batch/x created (server dry run)\n")
    fake_kubectl.on(
        "create", "-f", rc=1,
        stderr='Error from server (InternalError): an error on the server ("") has prevented the request from '
        "succeeding (post jobs.batch)",
    )  # fmt: skip
    fake_kubectl.on("delete", stderr=UNREACHABLE, rc=1)
    fake_kubectl.on("get", stderr=UNREACHABLE, rc=1)
    code, _, err = cli(*SUBMIT)
    store, rid = _only_record()
    [line] = [x for x in err.splitlines() if x.startswith("error:")]
    assert code == 1 and f"record {rid} is UNKNOWN" in line and f"`kubectl tao status {rid}`" in line
    record, extra = store.show(rid), store.get_extra(rid)
    assert record["terminal_state"] is None and record["transitions"][-1]["state"] == "UNKNOWN"
    assert extra["submit_phase"] == "rolling-back" and extra["left_behind"] == [f"job.batch/{extra['job_name']}"]

    # The server is back and the Job was created after all: status removes it (by label) and settles ERROR.
    fake_kubectl.rules.clear()
    deletes_before = len(_deletes(fake_kubectl))
    fake_kubectl.on("delete", "jobs,services,secrets", stdout=f"job.batch/{extra['job_name']} deleted\n")
    job = fixture_json("complete.job.json")
    job["metadata"]["name"] = extra["job_name"]
    obs = track.observe(Kubectl(), store, track.load(store, rid), server=SERVER, job=job, pods=[], fetched=True)
    record = store.show(rid)
    assert obs.state == record["terminal_state"] == "ERROR" and record["err_class"] == "ERR_INFRA"
    assert record["transitions"][-1]["message"].startswith("not launched: Error from server (InternalError)")
    [delete] = _deletes(fake_kubectl)[deletes_before:]
    assert delete[delete.index("-l") + 1] == contract.job_selector(extra["job_name"])
    assert store.get_extra(rid)["submit_phase"] == "rolled-back"


def test_a_rollback_still_cut_off_keeps_the_record_unknown(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _granted(fake_kubectl)
    fake_kubectl.on("create", "--dry-run=server", stdout="job.batch/x created (server dry run)\n")
    fake_kubectl.on("create", "-f", rc=1, stderr="Error from server (InternalError): etcdserver: request timed out")
    fake_kubectl.on("delete", stderr=UNREACHABLE, rc=1)
    fake_kubectl.on("get", stderr=UNREACHABLE, rc=1)
    cli(*SUBMIT)
    store, rid = _only_record()
    before = json.dumps(store.show(rid))
    obs = track.observe(Kubectl(), store, track.load(store, rid), server=SERVER, job=None, pods=[], fetched=True)
    assert obs.state == "UNKNOWN" and obs.reason == "RollbackIncomplete" and "could not remove" in obs.message
    assert json.dumps(store.show(rid)) == before


# ------------------------------------------------------------------ cancel


def _launched(uid: str | None = UID) -> tuple[RecordStore, str]:
    store = RecordStore()
    record = open_kubernetes_record(store)
    extra: dict[str, Any] = {"api_server": SERVER, "namespace": "tao-jobs", "job_name": record.id, "nodes": 1,
                             "submit_phase": "created"}
    if uid:
        extra["job_uid"] = uid
    store.update_extra(record.id, **extra)
    store.mark(record.id, "RUNNING", message="applied", backend_ref=f"tao-jobs/{record.id}")
    return store, record.id


def test_cancel_deletes_the_pinned_job_then_its_objects_and_waits_until_they_are_gone(
    tao_env: Path, fake_kubectl: FakeKubectl
) -> None:
    store, rid = _launched()
    fake_kubectl.on("get", "jobs,pods", data={"kind": "List", "items": []})
    fake_kubectl.on("delete", "--raw", stdout="{}")
    fake_kubectl.on("delete", "services,secrets", stdout=f"secret/tao-creds-{rid}\n")
    fake_kubectl.on("get", "jobs,pods,services,secrets", stdout="")
    fake_kubectl.on("get", "pods", stdout="")
    result = cancel(Kubectl(), store, track.load(store, rid), server=SERVER, wait=True, timeout=5)
    assert result.deleted == [f"job.batch/{rid}", f"secret/tao-creds-{rid}"] and result.leftovers == []
    raw, labelled = _deletes(fake_kubectl)
    assert raw[raw.index("--raw") + 1] == f"/apis/batch/v1/namespaces/tao-jobs/jobs/{rid}"
    assert labelled[labelled.index("-l") + 1] == contract.job_selector(rid)
    assert store.show(rid)["terminal_state"] == "CANCELED"
    again = cancel(Kubectl(), store, track.load(store, rid), server=SERVER, wait=True)
    assert again.already and len(_deletes(fake_kubectl)) == 2  # idempotent: nothing deleted the second time


def test_cancel_on_another_cluster_is_refused_before_any_call(tao_env: Path, fake_kubectl: FakeKubectl) -> None:
    store, rid = _launched()
    with pytest.raises(GateError, match=r"was submitted to https://127\.0\.0\.1:6443"):
        cancel(Kubectl(), store, track.load(store, rid), server="https://elsewhere:6443")
    assert fake_kubectl.calls == [] and store.show(rid)["terminal_state"] is None


# ------------------------------------------------------------------ the record write-back


def test_an_ended_job_is_written_back_once_with_its_history(tao_env: Path, fake_kubectl: FakeKubectl) -> None:
    job = fixture_json("complete.job.json")
    pods = fixture_json("complete.pods.json")["items"]
    store, rid = _launched(job["metadata"]["uid"])
    job["metadata"]["name"] = rid
    fake_kubectl.on("logs", stdout="")
    tracked = track.load(store, rid)
    obs = track.observe(Kubectl(), store, tracked, server=SERVER, job=job, pods=pods, fetched=True)
    record = store.show(rid)
    assert obs.state == record["terminal_state"] == "COMPLETE"
    assert store.get_extra(rid)["history"]["state"] == "COMPLETE"
    before = json.dumps(store.show(rid))
    again = track.observe(Kubectl(), store, track.load(store, rid), server=SERVER, job=job, pods=pods, fetched=True)
    assert again.state == "COMPLETE" and json.dumps(store.show(rid)) == before


# ------------------------------------------------------------------ list and preflight


def test_list_shows_every_record_from_one_cluster_read(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _store, rid = _launched()
    fake_kubectl.on("get", "--raw", data={"kind": "List", "items": []})
    code, out, err = cli("list", "-o", "name")
    assert code == 0, err
    assert out == f"job/{rid}\n"
    reads = [argv for argv in fake_kubectl.argvs() if "--raw" in argv]
    assert reads and all(contract.MANAGED_SELECTOR_QUERY in argv[argv.index("--raw") + 1] for argv in reads)


def test_preflight_without_a_cluster_is_one_missing_check(cli: Any, fake_kubectl: FakeKubectl,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from kubectl_tao.jobs import preflight

    monkeypatch.setattr(preflight, "host_runtime_check", lambda: preflight.Check("host", preflight.OK, "ok"))
    monkeypatch.setattr(preflight, "kubectl_check", lambda _binary: preflight.Check("kubectl", preflight.OK, "ok"))
    refused = "The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?"
    fake_kubectl.on("version", stderr=refused, rc=1)
    code, out, _ = cli("preflight", "-o", "json")
    checks = {check["check"]: check for check in json.loads(out)["checks"]}
    assert code == 3
    assert checks["cluster"]["status"] == preflight.MISSING
    assert checks["cluster"]["message"].startswith("cannot reach the API server https://127.0.0.1:6443 (context lab")
