"""`cancel --force` skips the cluster pin, never the ownership check: a Job kubectl-tao did not make for the
record (no managed-by label, another record's annotation, another UID) is never deleted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl, open_kubernetes_record

from kubectl_tao.core.errors import GateError
from kubectl_tao.jobs import track as tracking
from kubectl_tao.jobs.cancel import cancel
from kubectl_tao.k8s.kubectl import Kubectl
from kubectl_tao.store.records import RecordStore

PINNED = "11111111-1111-4111-8111-111111111111"
OTHER = "22222222-2222-4222-8222-222222222222"


def _record(job_uid: str | None) -> tuple[RecordStore, str]:
    store = RecordStore()
    record = open_kubernetes_record(store)
    extra: dict[str, Any] = {"namespace": "ns", "job_name": record.id, "api_server": "https://a:6443"}
    if job_uid:
        extra["job_uid"] = job_uid
    store.update_extra(record.id, **extra)
    store.mark(record.id, "RUNNING", message="applied", backend_ref=f"ns/{record.id}")
    return store, record.id


def _job(name: str, uid: str, labels: dict[str, str] | None, record_id: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": uid}
    if labels is not None:
        meta["labels"] = labels
    if record_id is not None:
        meta["annotations"] = {"kubectl-tao.io/record-id": record_id}
    return {"kind": "Job", "apiVersion": "batch/v1", "metadata": meta}


def _deletes(fake: FakeKubectl) -> list[list[str]]:
    return [call.argv for call in fake.calls if "delete" in call.argv]


MANAGED = {"app.kubernetes.io/managed-by": "kubectl-tao"}


@pytest.fixture(autouse=True)
def _no_labelled_objects(fake_kubectl: FakeKubectl) -> None:
    """cancel first looks for the record's labelled Job and pods (a job that ended unseen is settled, not
    canceled): none carries this record's label here."""
    fake_kubectl.on("get", "jobs,pods", data={"kind": "List", "items": []})


@pytest.mark.parametrize(
    ("labels", "owner"),
    [(None, None), ({"app": "theirs"}, None), (MANAGED, None), (MANAGED, "other-train-abcdef"), ({}, "SAME")],
)
@pytest.mark.parametrize("force", [False, True])
def test_a_job_not_made_for_the_record_is_never_deleted(
    tao_env: Path, fake_kubectl: FakeKubectl, labels: dict[str, str] | None, owner: str | None, force: bool
) -> None:
    store, rid = _record(job_uid=None)  # e.g. a submit cut off before it pinned the UID
    fake_kubectl.on("get", "job", rid, data=_job(rid, OTHER, labels, rid if owner == "SAME" else owner))
    tracked = tracking.load(store, rid)
    server = "https://elsewhere:6443" if force else "https://a:6443"
    with pytest.raises(GateError, match=f"Job ns/{rid} was not made by kubectl-tao for record {rid}"):
        cancel(Kubectl(), store, tracked, server=server, force=force, wait=False)
    assert _deletes(fake_kubectl) == []
    assert store.show(rid)["terminal_state"] is None


def test_force_still_deletes_only_the_pinned_uid(tao_env: Path, fake_kubectl: FakeKubectl) -> None:
    store, rid = _record(job_uid=PINNED)
    fake_kubectl.on(
        "delete", "--raw", stderr='Error from server (Conflict): Precondition failed: UID in precondition', rc=1
    )
    tracked = tracking.load(store, rid)
    with pytest.raises(GateError, match="different Job with the same name; it was not deleted"):
        cancel(Kubectl(), store, tracked, server="https://elsewhere:6443", force=True, wait=False)
    [delete] = [call for call in fake_kubectl.calls if "--raw" in call.argv]
    assert json.loads(delete.stdin or "{}")["preconditions"] == {"uid": PINNED}
    assert store.show(rid)["terminal_state"] is None


def test_our_job_without_a_pinned_uid_is_deleted_with_its_own_uid(tao_env: Path, fake_kubectl: FakeKubectl) -> None:
    store, rid = _record(job_uid=None)
    fake_kubectl.on("get", "job", rid, data=_job(rid, OTHER, dict(MANAGED), rid))
    fake_kubectl.on("delete", "--raw", stdout="{}")
    fake_kubectl.on("delete", "services,secrets", stdout=f"secret/tao-creds-{rid}\n")
    tracked = tracking.load(store, rid)
    result = cancel(Kubectl(), store, tracked, server="https://a:6443", force=True, wait=False)
    assert result.deleted == [f"job.batch/{rid}", f"secret/tao-creds-{rid}"]
    [delete] = [call for call in fake_kubectl.calls if "--raw" in call.argv]
    assert json.loads(delete.stdin or "{}")["preconditions"] == {"uid": OTHER}
    assert store.show(rid)["terminal_state"] == "CANCELED"


def test_cli_cancel_force_of_a_foreign_job_is_one_line_exit_1(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _, rid = _record(job_uid=None)
    fake_kubectl.on("get", "job", rid, data=_job(rid, OTHER, None, None))
    code, out, err = cli("cancel", rid, "--force")
    assert (code, out) == (1, "")
    assert err.startswith(f"error: Job ns/{rid} was not made by kubectl-tao for record {rid}") and err.count("\n") == 1
    assert _deletes(fake_kubectl) == []
