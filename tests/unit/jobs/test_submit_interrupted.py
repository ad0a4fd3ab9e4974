"""A submit cut off after its Job was created (the API server went away mid-create or mid-adopt): the next
`status` that finds the Job pins its UID and gives the Secret/Service the owner reference they missed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl, open_kubernetes_record

from kubectl_tao.core.errors import GateError
from kubectl_tao.jobs import track as tracking
from kubectl_tao.k8s.kubectl import Kubectl
from kubectl_tao.store.records import RecordStore

UID = "0b7c5e4a-1f0e-4d6b-9a49-2b2f3c4d5e6f"


def _interrupted(phase: str) -> tuple[RecordStore, str]:
    store = RecordStore()
    record = open_kubernetes_record(store)
    store.update_extra(
        record.id,
        namespace="ns",
        job_name=record.id,
        secret_names=[f"tao-creds-{record.id}"],
        submit_phase=phase,
    )
    store.mark(record.id, "UNKNOWN", message="API server unreachable while creating", backend_ref=f"ns/{record.id}")
    return store, record.id


def _job(name: str, record_id: str) -> dict[str, Any]:
    return {
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": UID,
            "annotations": {"kubectl-tao.io/record-id": record_id},
        },
        "spec": {},
        "status": {},
    }


def test_status_finishes_an_interrupted_submit(tao_env: Path, fake_kubectl: FakeKubectl) -> None:
    store, record_id = _interrupted("creating")
    fake_kubectl.on("get", "secrets,services", stdout=f"Secret tao-creds-{record_id} \nService {record_id} {UID},\n")
    fake_kubectl.on("patch", stdout=f"secret/tao-creds-{record_id}\n")
    tracked = tracking.load(store, record_id)
    obs = tracking.observe(Kubectl(), store, tracked, server="", job=_job(record_id, record_id), pods=[], fetched=True)
    patches = [call for call in fake_kubectl.calls if "patch" in call.argv]
    assert len(patches) == 1
    targets = json.loads(patches[0].stdin or "{}")["items"]
    assert [t["kind"] for t in targets] == ["Secret"]  # the Service already had the Job as owner
    owner = json.loads(patches[0].argv[patches[0].argv.index("-p") + 1])["metadata"]["ownerReferences"][0]
    assert owner["uid"] == UID and owner["kind"] == "Job"
    extra = store.get_extra(record_id)
    assert extra["job_uid"] == UID and extra["submit_phase"] == "created"
    assert obs.state != "UNKNOWN" and store.show(record_id)["transitions"][-1]["state"] == obs.state


def test_a_job_of_another_record_is_not_adopted(tao_env: Path, fake_kubectl: FakeKubectl) -> None:
    store, record_id = _interrupted("adopting")
    tracked = tracking.load(store, record_id)
    with pytest.raises(GateError, match="belongs to record someone-else"):
        tracking.observe(
            Kubectl(), store, tracked, server="", job=_job(record_id, "someone-else"), pods=[], fetched=True
        )
    assert fake_kubectl.calls == []
    assert store.get_extra(record_id)["submit_phase"] == "adopting"


def test_a_finished_submit_is_left_alone(tao_env: Path, fake_kubectl: FakeKubectl) -> None:
    store, record_id = _interrupted("created")
    tracked = tracking.load(store, record_id)
    tracking.observe(Kubectl(), store, tracked, server="", job=_job(record_id, record_id), pods=[], fetched=True)
    assert not [call for call in fake_kubectl.calls if "patch" in call.argv or "secrets,services" in call.argv]
