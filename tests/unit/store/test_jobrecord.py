"""store/jobrecord.py: a record read back typed, every shape a release wrote, and given back exactly as stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import ROOT

from kubectl_tao.core.errors import TaoError
from kubectl_tao.jobs.track import Tracked
from kubectl_tao.restarts import history
from kubectl_tao.store.jobrecord import (
    CapturedHistory,
    JobRecord,
    K8sRecord,
    ProgressRead,
    RankCapture,
    Transition,
    WorkflowLink,
)
from kubectl_tao.store.records import RecordStore, schema_errors

FIXTURES = ROOT / "tests" / "fixtures" / "records"


def _fixture(name: str) -> dict[str, Any]:
    data = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize(
    ("name", "schema"),
    [("v1-reference.json", "job-record"), ("v1-k8s-first.json", "job-record-k8s"), ("v1-k8s.json", "job-record-k8s")],
)
def test_the_stored_v1_fixtures_are_records_the_schemas_accept(name: str, schema: str) -> None:
    assert schema_errors(_fixture(name), schema) == []


def test_a_stored_v1_record_reads_typed() -> None:
    job = JobRecord.from_stored(_fixture("v1-reference.json"))
    assert (job.id, job.platform, job.backend_ref, job.storage_tier) == (
        "dino-train-3f9a1c", "kubernetes", "tao/dino-train-3f9a1c", "A")
    assert job.upload_excludes == ("*.tmp",) and job.redacted is True and job.retry_of is None
    assert [type(t) for t in job.transitions] == [Transition] * 3
    assert (job.state, job.effective_state, job.terminal, job.err_class) == ("ERROR", "ERROR", True, "ERR_INFRA")
    assert job.last_message == "rank 1 exit 137 (OOMKilled)"
    assert job.transitions[1].other == {"host": "login-1"}  # a key this release does not know, kept
    assert job.other == {"notes": {"written_by": "tao_job_record"}}


@pytest.mark.parametrize("name", ["v1-reference.json", "v1-k8s-first.json", "v1-k8s.json"])
def test_every_stored_shape_round_trips_exactly(name: str) -> None:
    data = _fixture(name)
    reader = JobRecord if name == "v1-reference.json" else K8sRecord
    back = reader.from_stored(data).to_stored()
    assert back == data
    assert json.dumps(back) == json.dumps(data)  # the same keys in the same order: the same bytes


def test_the_first_releases_sibling_file_reads_typed() -> None:
    k8s = K8sRecord.from_stored(_fixture("v1-k8s-first.json"))
    assert (k8s.namespace, k8s.job_name, k8s.gpus, k8s.nodes, k8s.submit_phase) == (
        "tao", "dino-train-3f9a1c", 8, 2, "creating")
    assert k8s.progress is None and k8s.request is None and k8s.flags == {} and k8s.link is None
    kept = k8s.history
    assert isinstance(kept, CapturedHistory) and kept.listed and kept.state is None and not kept.empty
    assert [type(rank) for rank in kept.ranks] == [RankCapture, RankCapture]
    assert kept.ranks[0].tail_lines == ("epoch 3/10", "saving checkpoint")  # one text, read as its lines
    assert kept.ranks[1].exit_code == 137 and kept.cause is None


def test_this_releases_sibling_file_reads_typed() -> None:
    k8s = K8sRecord.from_stored(_fixture("v1-k8s.json"))
    assert k8s.flags == {"launcher": "torchrun", "pvc": "tao-results", "mount_path": "/results"}
    assert k8s.gang == "native" and k8s.secret_names == ("dino-train-3f9a1c-env",) and k8s.max_restarts == 2
    assert k8s.link == WorkflowLink("wf-7c1d2e", "detect", "train", 0, None, None, None, "/results/dino-train-3f9a1c")
    assert k8s.progress_read == ProgressRead(from_="log", why="no status.json", at="2025-01-31T12:30:00Z",
                                             retry_at="2025-01-31T12:35:00Z", other={},
                                             order=("from", "why", "at", "retry_at"))
    kept = k8s.history
    assert kept is not None and not kept.listed and kept.state == "ERROR" and kept.first_failed_rank == 1
    assert kept.cause is not None and kept.cause["cause"] == "OutOfMemory"
    assert kept.ranks[1].errors == ("Killed",) and kept.ranks[0].tail_lines == ("epoch 3/10",)
    found = history.of_job(k8s.max_restarts, k8s.attempts)
    assert found is not None and [end.attempt for end in found.ends] == [1]


def test_no_sibling_file_yet_reads_as_every_field_at_its_default() -> None:
    k8s = K8sRecord.from_stored({})
    assert k8s == K8sRecord(other={}, order=())
    assert (k8s.job_name, k8s.nodes, k8s.history, k8s.attempts, k8s.keep_until_captured) == (None, None, None, (), None)
    assert k8s.to_stored() == {}


def test_a_value_of_another_type_is_kept_as_stored_and_not_typed() -> None:
    data = {"schema_version": 1, "id": "x", "nodes": "2", "gpus": True, "history": "lost", "namespace": 7}
    k8s = K8sRecord.from_stored(data)
    assert (k8s.nodes, k8s.gpus, k8s.history, k8s.namespace) == (None, None, None, None)
    assert k8s.other == {"nodes": "2", "gpus": True, "history": "lost", "namespace": 7}
    assert k8s.to_stored() == data


def test_a_changed_field_is_written_back_under_its_key() -> None:
    job = JobRecord.from_stored(_fixture("v1-reference.json"))
    stored = job.replaced(parent_job="dino-train-000000").to_stored()
    assert stored["parent_job"] == "dino-train-000000" and list(stored)[-1] == "parent_job"
    assert {k: v for k, v in stored.items() if k != "parent_job"} == _fixture("v1-reference.json")


def test_a_newer_schema_version_is_refused_in_one_line_naming_the_fix() -> None:
    with pytest.raises(TaoError, match=r"schema_version 2, which this kubectl-tao cannot read \(it reads 1\); "
                                       r"upgrade kubectl-tao") as caught:
        JobRecord.from_stored({**_fixture("v1-reference.json"), "schema_version": 2})
    assert "\n" not in caught.value.message and caught.value.exit_code == 1
    with pytest.raises(TaoError, match="kubectl-tao data of job record x has schema_version 3"):
        K8sRecord.from_stored({"schema_version": 3, "id": "x"})


def test_the_values_are_immutable() -> None:
    job = JobRecord.from_stored(_fixture("v1-reference.json"))
    with pytest.raises(AttributeError):
        job.image = "other"  # type: ignore[misc]


def test_what_the_store_writes_reads_typed_and_back(tmp_path: Path) -> None:
    store = RecordStore(tmp_path)
    opened = store.open(platform="kubernetes", image="nvcr.io/x:1", network_arch="dino", action="train",
                        storage_tier="A", results_root="/results")
    marked = store.mark(opened.id, "RUNNING", "applied Job tao/j", backend_ref="tao/j")
    extra = store.update_extra(opened.id, namespace="tao", job_name="j", gpus=1, nodes=1, history={"ranks": []})
    job, k8s = JobRecord.from_stored(marked), K8sRecord.from_stored(extra)
    assert (job.state, job.effective_state, job.results_dir) == ("RUNNING", "RUNNING", f"/results/{opened.id}")
    assert job.to_stored() == dict(marked) and k8s.to_stored() == extra
    assert k8s.history is not None and k8s.history.empty is False and k8s.history.ranks == ()
    assert JobRecord.from_stored(opened).effective_state == "OPEN"


def test_tracked_reads_its_files_typed_again_once_they_are_replaced() -> None:
    reference = _fixture("v1-reference.json")
    tracked = Tracked(reference, {"job_name": "a"})
    assert tracked.k8s.job_name == "a" and tracked.job.id == "dino-train-3f9a1c"
    assert tracked.k8s is tracked.k8s  # read once while the file is the same
    tracked.extra = {"job_name": "b"}
    tracked.record = {**reference, "terminal_state": None, "transitions": reference["transitions"][:2]}
    assert tracked.k8s.job_name == "b" and tracked.record_state == "RUNNING" and not tracked.terminal
