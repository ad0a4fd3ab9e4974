"""The job-record store and the tao_job_record command (store/records.py and the modules it is made of)."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from kubectl_tao.core.errors import TaoError, UsageError
from kubectl_tao.core.redact import REDACTED
from kubectl_tao.store import recordids, records, transitions
from kubectl_tao.store.recordcli import main
from kubectl_tao.store.recordfields import normalize_platform, normalize_results_dir
from kubectl_tao.store.recordids import make_id
from kubectl_tao.store.records import LOG_TAIL_MAX_BYTES, LOG_TAIL_MAX_LINES, RecordStore, schema_errors
from kubectl_tao.store.statedir import state_dir as default_state_dir
from kubectl_tao.store.transitions import ALLOWED_TRANSITIONS, STATES, TERMINAL_STATES, effective_state, oom_error_class

OPEN_ARGS: dict[str, Any] = {
    "platform": "kubernetes",
    "image": "nvcr.io/nvidia/tao/tao-toolkit:5.5.0-pyt",
    "network_arch": "dino",
    "action": "train",
    "storage_tier": "A",
    "results_root": "/results",
}
TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture
def store(tmp_path: Path) -> RecordStore:
    return RecordStore(tmp_path / "state")


def _open(store: RecordStore, **overrides: Any) -> str:
    return store.open(**{**OPEN_ARGS, **overrides}).id


# ------------------------------------------------------------------------------------------------
# open
# ------------------------------------------------------------------------------------------------


def test_open_under_an_id_minted_beforehand_never_takes_an_existing_record(store: RecordStore) -> None:
    minted = make_id("dino", "train")
    record = store.open(**OPEN_ARGS, record_id=minted)
    assert record.id == minted and record["results_dir"] == f"/results/{minted}"
    before = store.path(minted).read_bytes()
    with pytest.raises(TaoError, match=f"job record {minted} already exists in .*; nothing was created, submit again"):
        store.open(**OPEN_ARGS, record_id=minted)
    assert store.path(minted).read_bytes() == before
    with pytest.raises(UsageError, match="is not a record id"):
        store.open(**OPEN_ARGS, record_id="../escape")


def test_open_writes_the_reference_fields(store: RecordStore) -> None:
    record = store.open(**OPEN_ARGS, upload_excludes=["*.ckpt"], parent_job="dino-train-aaaaaa")
    assert re.fullmatch(r"dino-train-[0-9a-f]{6}", record.id)
    on_disk = json.loads((store.jobs_dir / f"{record.id}.json").read_text())
    assert on_disk == record
    assert list(on_disk) == [
        "schema_version", "id", "platform", "backend_ref", "image", "network_arch", "action", "results_dir",
        "storage_tier", "submitted_at", "transitions", "terminal_state", "redacted", "upload_excludes", "parent_job",
    ]
    assert on_disk["schema_version"] == 1
    assert on_disk["backend_ref"] is None
    assert on_disk["results_dir"] == f"/results/{record.id}"
    assert on_disk["terminal_state"] is None
    assert on_disk["redacted"] is True
    assert on_disk["upload_excludes"] == ["*.ckpt"]
    assert TS_RE.match(on_disk["submitted_at"])
    assert on_disk["transitions"] == [
        {"ts": on_disk["submitted_at"], "state": "PENDING", "message": "record opened before launch", "source": "agent"}
    ]
    assert schema_errors(on_disk, "job-record") == []
    assert effective_state(on_disk) == "OPEN" == record.effective_state


def test_open_with_results_dir_and_s3(store: RecordStore) -> None:
    rec = store.open(**{**OPEN_ARGS, "results_root": None, "results_dir": "/mnt/out//run1/"})
    assert rec["results_dir"] == "/mnt/out/run1"
    rec = store.open(**{**OPEN_ARGS, "results_root": "s3://my-bucket/results/"})
    assert rec["results_dir"] == f"s3://my-bucket/results/{rec.id}"


def test_ids_are_cleaned_and_platforms_normalized(store: RecordStore) -> None:
    rec = store.open(**{**OPEN_ARGS, "network_arch": "Mask Grounding/DINO", "action": "train:v2", "platform": "My_K8s"})
    assert re.fullmatch(r"Mask-Grounding-DINO-train-v2-[0-9a-f]{6}", rec.id)
    assert rec["network_arch"] == "Mask Grounding/DINO"
    assert rec["platform"] == "my-k8s"
    assert make_id("_x", "y", "abcdef") == "x-y-abcdef"


def test_open_retries_with_a_new_suffix_on_collision(store: RecordStore, monkeypatch: pytest.MonkeyPatch) -> None:
    suffixes = iter(["aaaaaa", "aaaaaa", "bbbbbb"])
    monkeypatch.setattr(recordids, "_new_suffix", lambda: next(suffixes))
    assert _open(store) == "dino-train-aaaaaa"
    assert _open(store) == "dino-train-bbbbbb"
    assert not list(store.jobs_dir.glob(".*.tmp"))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"results_dir": "/x"}, "give exactly one of --results-dir DIR or --results-root ROOT"),
        ({"results_root": None}, "give exactly one of --results-dir DIR or --results-root ROOT"),
        ({"storage_tier": "D"}, "--storage-tier must be one of A, B, C (got 'D')"),
        ({"platform": "Kube!"}, "--platform 'Kube!' is not a platform name: use 1-32 lower-case letters, digits"),
        ({"platform": ""}, "--platform is required and must not be empty"),
        ({"image": "a b"}, "--image must be one printable word without spaces"),
        ({"network_arch": "///"}, "--network-arch '///' has no letters or digits to build a record id from"),
        ({"action": "\n"}, "--action is required and must not be empty"),
        ({"results_root": "results"}, "--results-root must be an absolute path (a mounted volume path"),
        ({"results_root": "/a/../b"}, "--results-root must not contain '..'; give the normalized absolute path"),
        ({"results_root": "/"}, "--results-root must not be / itself; give a directory for results"),
        ({"results_root": "gs://b/p"}, "--results-root: only absolute paths and s3:// URLs are supported"),
        ({"results_root": "s3://B_ad/p"}, "--results-root: 'B_ad' is not an S3 bucket name"),
        ({"results_root": "s3://bucket/a/../b"}, "--results-root: '.' and '..' are not allowed in an S3 prefix"),
        ({"parent_job": "../etc"}, "--parent-job '../etc' is not a record id"),
        ({"retry_of": "-x"}, "--retry-of '-x' is not a record id"),
        ({"upload_excludes": [""]}, "--upload-exclude is required and must not be empty"),
        (
            {"network_arch": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567"},
            "--network-arch/--action looks like it contains a credential",
        ),
    ],
)
def test_open_refuses_bad_input(store: RecordStore, overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError) as info:
        store.open(**{**OPEN_ARGS, **overrides})
    assert str(info.value).startswith(message)
    assert not store.jobs_dir.exists() or not list(store.jobs_dir.glob("*.json"))


def test_normalizers() -> None:
    assert normalize_platform(" Slurm Cluster ") == "slurm-cluster"
    assert normalize_results_dir("/a/./b/") == "/a/b"
    assert normalize_results_dir("s3://bucket") == "s3://bucket"


def test_state_dir_comes_from_the_environment(tmp_path: Path) -> None:
    assert default_state_dir({"TAO_STATE_DIR": str(tmp_path)}) == tmp_path
    assert default_state_dir({"TAO_STATE_DIR": ""}) == Path.home() / ".tao"
    with pytest.raises(UsageError, match=r"^TAO_STATE_DIR must be an absolute path \(got 'rel/dir'\)"):
        default_state_dir({"TAO_STATE_DIR": "rel/dir"})
    with pytest.raises(UsageError, match=r"^TAO_STATE_DIR must be an absolute path"):
        RecordStore("relative")


def test_store_defaults_to_tao_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAO_STATE_DIR", str(tmp_path))
    assert RecordStore().jobs_dir == tmp_path / "jobs"
    monkeypatch.delenv("TAO_STATE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert RecordStore().jobs_dir == tmp_path / "home" / ".tao" / "jobs"


# ------------------------------------------------------------------------------------------------
# mark: the transition table
# ------------------------------------------------------------------------------------------------


def _record_in(store: RecordStore, state: str) -> str:
    record_id = _open(store)
    if state != "PENDING":
        store.mark(record_id, state, "setup", backend_ref="ns/job-1")
    return record_id


@pytest.mark.parametrize("current", STATES)
@pytest.mark.parametrize("target", STATES)
def test_transition_table(store: RecordStore, current: str, target: str) -> None:
    record_id = _record_in(store, current)
    if target in ALLOWED_TRANSITIONS[current]:
        record = store.mark(record_id, target, "next")
        assert record.state == target
    else:
        with pytest.raises(TaoError) as info:
            store.mark(record_id, target, "next")
        assert str(info.value).startswith(f"illegal transition {current} -> {target}: job record {record_id} is final")
        assert info.value.exit_code == 1
        assert store.show(record_id).state == current


def test_table_matches_the_documented_rules() -> None:
    for state in STATES:
        if state in TERMINAL_STATES:
            assert ALLOWED_TRANSITIONS[state] == {state}
        else:
            assert ALLOWED_TRANSITIONS[state] == set(STATES)


def test_terminal_mark_sets_terminal_fields(store: RecordStore) -> None:
    record_id = _open(store)
    store.mark(record_id, "RUNNING", "applied", backend_ref="ns/job-1")
    record = store.mark(record_id, "ERROR", "OOMKilled", source="poller", err_class="ERR_INFRA")
    assert record["terminal_state"] == "ERROR"
    assert record["terminal_write_by"] == "poller"
    assert record["err_class"] == "ERR_INFRA"
    assert [t["state"] for t in record["transitions"]] == ["PENDING", "RUNNING", "ERROR"]
    assert all(TS_RE.match(t["ts"]) for t in record["transitions"])
    assert schema_errors(dict(record), "job-record") == []


def test_same_terminal_state_only_fills_missing_fields(store: RecordStore) -> None:
    record_id = _open(store)
    store.mark(record_id, "ERROR", "not launched")
    record = store.mark(record_id, "ERROR", "again", err_class="ERR_PROGRAM", backend_ref="ns/job-1")
    assert record["err_class"] == "ERR_PROGRAM"
    assert record["backend_ref"] == "ns/job-1"
    assert [t["message"] for t in record["transitions"]] == ["record opened before launch", "not launched"]
    assert store.mark(record_id, "ERROR", "third time") == record  # idempotent, nothing changes


def test_terminal_err_class_cannot_change(store: RecordStore) -> None:
    record_id = _open(store)
    store.mark(record_id, "ERROR", "x", err_class="ERR_INFRA")
    expected = rf"^job record {record_id} is final with err_class ERR_INFRA; it cannot become ERR_PROGRAM$"
    with pytest.raises(TaoError, match=expected):
        store.mark(record_id, "ERROR", "x", err_class="ERR_PROGRAM")


def test_canceled_twice_is_idempotent(store: RecordStore) -> None:
    record_id = _record_in(store, "RUNNING")
    first = store.mark(record_id, "CANCELED", "canceled by user")
    assert store.mark(record_id, "CANCELED", "canceled by user") == first


def test_backend_ref_is_set_once(store: RecordStore) -> None:
    record_id = _open(store)
    store.mark(record_id, "RUNNING", "applied", backend_ref="ns/job-1")
    store.mark(record_id, "RUNNING", "still", backend_ref="ns/job-1")
    with pytest.raises(TaoError, match=rf"^job record {record_id} already names ns/job-1; a record follows one launch"):
        store.mark(record_id, "RUNNING", "other", backend_ref="ns/job-2")


def test_backend_ref_must_be_namespace_slash_name_on_kubernetes(store: RecordStore) -> None:
    record_id = _open(store)
    with pytest.raises(UsageError, match=r"^--backend-ref 'Job_1' must be <namespace>/<job name>"):
        store.mark(record_id, "RUNNING", backend_ref="Job_1")
    other = _open(store, platform="slurm")
    assert store.mark(other, "RUNNING", backend_ref="123456")["backend_ref"] == "123456"


def test_repeating_a_state_with_the_same_message_is_a_no_op(store: RecordStore) -> None:
    record_id = _record_in(store, "RUNNING")
    before = store.show(record_id)
    assert store.mark(record_id, "RUNNING", "setup", source="poller") == before
    after = store.mark(record_id, "RUNNING", "2/2 ranks running", source="poller")
    assert len(after["transitions"]) == len(before["transitions"]) + 1


def test_pending_message_updates_keep_the_record_open(store: RecordStore) -> None:
    record_id = _open(store)
    record = store.mark(record_id, "PENDING", "creating the credential Secret")
    assert record.effective_state == "OPEN"
    record = store.mark(record_id, "PENDING", "Insufficient nvidia.com/gpu", backend_ref="ns/j")
    assert record.effective_state == "PENDING"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"state": "OPEN"}, "--state OPEN is set only by `open` (a record that was never launched); use PENDING"),
        ({"state": "DONE"}, "--state must be one of PENDING, RUNNING, COMPLETE, ERROR, CANCELED, UNKNOWN (got 'DONE')"),
        ({"state": "ERROR", "source": "user"}, "--source must be one of agent, poller, backend-hook (got 'user')"),
        ({"state": "ERROR", "err_class": "ERR_X"}, "--err-class must be ERR_INFRA or ERR_PROGRAM (got 'ERR_X')"),
        (
            {"state": "UNKNOWN", "err_class": "ERR_INFRA"},
            "--err-class goes only with --state ERROR (got --state UNKNOWN)",
        ),
    ],
)
def test_mark_refuses_bad_arguments(store: RecordStore, kwargs: dict[str, Any], message: str) -> None:
    record_id = _open(store)
    with pytest.raises(UsageError) as info:
        store.mark(record_id, **kwargs)
    assert str(info.value) == message


def test_mark_of_a_missing_record_names_it(store: RecordStore) -> None:
    with pytest.raises(TaoError) as info:
        store.mark("dino-train-000000", "RUNNING")
    assert str(info.value).startswith("no job record dino-train-000000 at ")
    assert info.value.exit_code == 1


def test_ids_cannot_escape_the_jobs_dir(store: RecordStore) -> None:
    with pytest.raises(UsageError, match=r"^record id '\.\./x' is not a record id"):
        store.show("../x")


def test_messages_are_redacted_and_capped(store: RecordStore) -> None:
    record_id = _open(store)
    record = store.mark(record_id, "RUNNING", "kubectl said: export HF_TOKEN=abc123 " + "x" * 10000, backend_ref="ns/j")
    message = record["transitions"][-1]["message"]
    assert "abc123" not in message and f"HF_TOKEN={REDACTED}" in message
    assert len(message) == transitions.MAX_MESSAGE_CHARS
    assert "abc123" not in (store.jobs_dir / f"{record_id}.json").read_text()


def test_oom_is_an_infrastructure_error() -> None:
    assert oom_error_class() == "ERR_INFRA"


# ------------------------------------------------------------------------------------------------
# reading, records from other writers, schema
# ------------------------------------------------------------------------------------------------


def _reference_record(record_id: str = "yolo-export-abcdef") -> dict[str, Any]:
    return {
        "schema_version": 1, "id": record_id, "platform": "slurm", "backend_ref": None, "image": "img:1",
        "network_arch": "yolo", "action": "export", "results_dir": "/lustre/out", "storage_tier": "B",
        "submitted_at": "2025-01-02T03:04:05Z",
        "transitions": [{"ts": "2025-01-02T03:04:05Z", "state": "PENDING", "message": "record opened before launch",
                         "source": "agent"}],
        "terminal_state": None, "redacted": True, "upload_excludes": [], "reference_only_field": {"kept": True},
    }


def test_records_written_by_the_reference_are_read_and_marked(store: RecordStore) -> None:
    store.jobs_dir.mkdir(parents=True)
    (store.jobs_dir / "yolo-export-abcdef.json").write_text(json.dumps(_reference_record()))
    record = store.mark("yolo-export-abcdef", "RUNNING", "sbatch 42", backend_ref="42")
    assert record["reference_only_field"] == {"kept": True}
    assert [r.id for r in store.list()] == ["yolo-export-abcdef"]


def test_a_record_that_fails_its_schema_is_never_written(store: RecordStore) -> None:
    bad = _reference_record()
    bad["storage_tier"] = "Z"
    store.jobs_dir.mkdir(parents=True)
    path = store.jobs_dir / "yolo-export-abcdef.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(TaoError) as info:
        store.mark("yolo-export-abcdef", "RUNNING")
    assert str(info.value) == (
        f"job record {path} does not match job-record.schema.json at $.storage_tier: "
        "'Z' is not one of ['A', 'B', 'C']; restore it or move it aside"
    )
    assert json.loads(path.read_text()) == bad


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"schema_version": 2}, "$.schema_version"),
        ({"id": "-bad"}, "$.id"),
        ({"platform": "Bad"}, "$.platform"),
        ({"submitted_at": "2025-01-02 03:04:05"}, "$.submitted_at"),
        ({"redacted": False}, "$.redacted"),
        ({"results_dir": "relative/dir"}, "$.results_dir"),
        ({"transitions": [{"ts": "2025-01-02T03:04:05Z", "state": "OPEN", "message": "", "source": "agent"}]},
         "$.transitions[0].state"),
        ({"err_class": "ERR_X"}, "$.err_class"),
    ],
)
def test_schema_errors_name_the_json_path(change: dict[str, Any], path: str) -> None:
    errors = schema_errors({**_reference_record(), **change}, "job-record")
    assert errors and errors[0].startswith(f"{path}: ")


def test_schema_requires_the_reference_fields() -> None:
    record = _reference_record()
    del record["upload_excludes"]
    assert schema_errors(record, "job-record") == ["$: 'upload_excludes' is a required property"]


def test_show_redacts_records_written_by_others(store: RecordStore) -> None:
    rec = _reference_record()
    rec["transitions"][0]["message"] = "token=abc123"
    store.jobs_dir.mkdir(parents=True)
    (store.jobs_dir / "yolo-export-abcdef.json").write_text(json.dumps(rec))
    assert store.show("yolo-export-abcdef")["transitions"][0]["message"] == f"token={REDACTED}"


def test_corrupt_records_are_reported(store: RecordStore) -> None:
    record_id = _open(store)
    (store.jobs_dir / f"{record_id}.json").write_text("{not json")
    with pytest.raises(TaoError, match=rf"^job record .*/{record_id}.json is not valid JSON \(at line 1 column 2\)"):
        store.show(record_id)
    (store.jobs_dir / "zz-other-000000.json").write_text(json.dumps(_reference_record()))
    errors: list[str] = []
    assert store.list(errors) == []
    assert len(errors) == 2
    assert "is not valid JSON" in errors[0]
    assert errors[1].endswith("zz-other-000000.json holds the id of another record, not the one its file name gives; "
                              "skipped (restore it or move it aside)")
    assert "yolo-export-abcdef" not in errors[1]


def test_list_is_newest_first(store: RecordStore) -> None:
    store.jobs_dir.mkdir(parents=True)
    old = _reference_record("old-one-aaaaaa")
    (store.jobs_dir / "old-one-aaaaaa.json").write_text(json.dumps(old))
    new_id = _open(store)
    assert [r.id for r in store.list()] == [new_id, "old-one-aaaaaa"]
    assert RecordStore(store.state_dir / "nowhere").list() == []


# ------------------------------------------------------------------------------------------------
# the sibling file
# ------------------------------------------------------------------------------------------------


def test_extras_live_in_the_sibling_file(store: RecordStore) -> None:
    record_id = _open(store)
    assert store.get_extra(record_id) == {}
    store.update_extra(record_id, api_server="https://127.0.0.1:6443", context="kind", namespace="tao",
                       job_name="dino-train-abc", gpus=2, nodes=1, secret_names=["tao-creds-x"], service_name=None)
    extra = store.update_extra(record_id, job_uid="0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b", submit_phase="created")
    path = store.extras_dir / f"{record_id}.json"
    assert json.loads(path.read_text()) == extra == store.get_extra(record_id)
    assert extra["schema_version"] == 1 and extra["id"] == record_id
    assert extra["namespace"] == "tao" and extra["submit_phase"] == "created"
    assert schema_errors(extra, "job-record-k8s") == []
    assert "api_server" not in json.loads((store.jobs_dir / f"{record_id}.json").read_text())


def test_history_log_tails_are_redacted_and_capped(store: RecordStore) -> None:
    record_id = _open(store)
    lines = [f"step {i}" for i in range(LOG_TAIL_MAX_LINES + 50)] + ["HF_TOKEN=abc123"]
    history = {
        "state": "ERROR", "reason": "OOMKilled", "err_class": "ERR_INFRA", "captured_at": "2025-01-02T03:04:05Z",
        "ranks": [
            {"rank": 0, "pod": "p-0", "node": "n1", "exit_code": 137, "reason": "OOMKilled", "log_tail": lines,
             "captured_at": "2025-01-02T03:04:05Z"},
            {"rank": 1, "pod": "p-1", "node": None, "exit_code": None, "reason": None,
             "log_tail": "x" * (LOG_TAIL_MAX_BYTES * 2), "captured_at": "2025-01-02T03:04:05Z"},
        ],
    }
    extra = store.update_extra(record_id, history=history)
    tail0 = extra["history"]["ranks"][0]["log_tail"]
    assert len(tail0) == LOG_TAIL_MAX_LINES and tail0[-1] == f"HF_TOKEN={REDACTED}"
    assert len(extra["history"]["ranks"][1]["log_tail"].encode()) == LOG_TAIL_MAX_BYTES


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"namespace": "Bad_NS"}, "{prefix} at $.namespace:"),
        ({"gpus": -1}, "{prefix} at $.gpus:"),
        ({"job_uid": "not-a-uid"}, "{prefix} at $.job_uid:"),
        ({"id": "other"}, "id of the kubectl-tao data cannot be changed"),
    ],
)
def test_extras_are_validated(store: RecordStore, fields: dict[str, Any], message: str) -> None:
    record_id = _open(store)
    with pytest.raises(TaoError) as info:
        store.update_extra(record_id, **fields)
    prefix = f"kubectl-tao data for {record_id} does not match job-record-k8s.schema.json"
    assert str(info.value).startswith(message.format(prefix=prefix))
    assert store.get_extra(record_id) == {}


def test_extras_of_a_missing_record_are_refused(store: RecordStore) -> None:
    with pytest.raises(TaoError, match=r"^no job record nope-x-000000 in "):
        store.update_extra("nope-x-000000", gpus=1)
    with pytest.raises(TaoError, match=r"^no job record nope-x-000000 in "):
        store.get_extra("nope-x-000000")


# ------------------------------------------------------------------------------------------------
# concurrency
# ------------------------------------------------------------------------------------------------


def test_lock_times_out_with_a_message(store: RecordStore) -> None:
    record_id = _open(store)
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with store.lock(record_id):
            held.set()
            release.wait(5)

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(5)
    try:
        expected = rf"^job record {record_id} is locked by another process \(waited 0s"
        with pytest.raises(TaoError, match=expected), store.lock(record_id, timeout=0.05):
            pass
    finally:
        release.set()
        thread.join()


_MARKS = ["RUNNING", "PENDING", "RUNNING", "UNKNOWN", "COMPLETE", "ERROR", "CANCELED"]


def _mark_worker(args: tuple[str, str, int]) -> str:
    state_dir, record_id, n = args
    store = RecordStore(state_dir)
    state = _MARKS[n % len(_MARKS)]
    try:
        store.mark(record_id, state, f"worker {n}", source="poller", backend_ref="ns/job-1")
    except TaoError as exc:
        return "refused" if exc.message.startswith("illegal transition") else exc.message
    return "ok"


def _open_worker(state_dir: str) -> str:
    return _open(RecordStore(state_dir))


def _assert_legal_sequence(record: dict[str, Any]) -> None:
    states = [t["state"] for t in record["transitions"]]
    assert states[0] == "PENDING"
    for prev, nxt in itertools.pairwise(states):
        assert nxt in ALLOWED_TRANSITIONS[prev], states
        assert prev not in TERMINAL_STATES, states
    assert record["terminal_state"] == (states[-1] if states[-1] in TERMINAL_STATES else None)


@pytest.mark.timeout(60)
def test_fifty_processes_marking_one_record(tmp_path: Path) -> None:
    state_dir = str(tmp_path)
    record_id = _open(RecordStore(state_dir))
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(10) as pool:
        results = pool.map(_mark_worker, [(state_dir, record_id, n) for n in range(50)])
    assert set(results) <= {"ok", "refused"}, results
    record = RecordStore(state_dir).show(record_id)
    _assert_legal_sequence(record)
    assert schema_errors(dict(record), "job-record") == []
    assert results.count("ok") >= len(record["transitions"]) - 1
    assert not list((tmp_path / "jobs").glob(".*.tmp"))


@pytest.mark.timeout(60)
def test_fifty_threads_marking_one_record(store: RecordStore) -> None:
    record_id = _open(store)
    results: list[str] = []
    threads = [
        threading.Thread(target=lambda n=n: results.append(_mark_worker((str(store.state_dir), record_id, n))))
        for n in range(50)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(results) <= {"ok", "refused"}
    _assert_legal_sequence(store.show(record_id))


@pytest.mark.timeout(60)
def test_fifty_concurrent_opens_give_fifty_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state_dir = str(tmp_path)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(10) as pool:
        ids = pool.map(_open_worker, [state_dir] * 50)
    assert len(set(ids)) == 50
    files = sorted(p.stem for p in (tmp_path / "jobs").glob("*.json"))
    assert files == sorted(ids)
    for record_id in ids:
        assert schema_errors(json.loads((tmp_path / "jobs" / f"{record_id}.json").read_text()), "job-record") == []


@pytest.mark.timeout(60)
def test_concurrent_opens_survive_suffix_collisions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # only 64 possible suffixes: 50 opens collide often and must still all succeed with distinct ids
    monkeypatch.setattr(recordids, "_new_suffix", lambda: f"{os.urandom(1)[0] % 64:06x}")
    monkeypatch.setattr(records, "_OPEN_ATTEMPTS", 500)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(10) as pool:
        ids = pool.map(_open_worker, [str(tmp_path)] * 50)
    assert len(set(ids)) == 50


# ------------------------------------------------------------------------------------------------
# tao_job_record (main)
# ------------------------------------------------------------------------------------------------


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_open_writes_the_id_and_its_newline_in_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Concurrent `open >> ids` appenders must never interleave an id with another's newline (PYTHONUNBUFFERED
    makes print() write them apart)."""
    writes: list[str] = []

    class Recorder:
        def write(self, text: str) -> int:
            writes.append(text)
            return len(text)

        def flush(self) -> None:
            pass

    monkeypatch.setenv("TAO_STATE_DIR", str(tmp_path))
    monkeypatch.setattr("sys.stdout", Recorder())
    code = main(["open", "--platform", "kubernetes", "--image", "img:1", "--network-arch", "dino", "--action",
                 "train", "--storage-tier", "A", "--results-root", "/results"])
    assert code == 0
    assert len(writes) == 1 and re.fullmatch(r"dino-train-[0-9a-f]{6}\n", writes[0]), writes


def test_cli_open_mark_show_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TAO_STATE_DIR", str(tmp_path))
    code, out, _ = _cli(capsys, "open", "--platform", "kubernetes", "--image", "img:1", "--network-arch", "dino",
                        "--action", "train", "--storage-tier", "C", "--results-dir", "s3://bkt/out",
                        "--upload-exclude", "*.ckpt", "--upload-exclude", "logs/*", "--retry-of", "dino-train-000000")
    assert code == 0
    record_id = out.strip()
    code, out, _ = _cli(capsys, "list")
    assert out.splitlines() == [
        "ID                  PLATFORM     STATE   RESULTS_DIR",
        f"{record_id}   kubernetes   OPEN    s3://bkt/out",
    ]
    assert _cli(capsys, "mark", record_id, "--state", "RUNNING", "--backend-ref", "tao/dino-train-x")[0] == 0
    assert _cli(capsys, "mark", record_id, "--state", "ERROR", "--source", "poller", "--err-class", "ERR_INFRA",
                "--message", "OOMKilled")[0] == 0
    code, out, _ = _cli(capsys, "show", record_id)
    shown = json.loads(out)
    assert shown["terminal_state"] == "ERROR" and shown["err_class"] == "ERR_INFRA"
    assert shown["upload_excludes"] == ["*.ckpt", "logs/*"] and shown["retry_of"] == "dino-train-000000"
    code, out, _ = _cli(capsys, "list", "--json")
    assert [r["id"] for r in json.loads(out)] == [record_id]


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["frob"], 2, "ERROR: unknown verb 'frob': use open, mark, show or list"),
        (["open", "--platform", "k"], 2, "ERROR: the following arguments are required: --image, --network-arch, "
                                         "--action, --storage-tier"),
        (["mark", "x-y-000000"], 2, "ERROR: the following arguments are required: --state"),
        (["mark", "x-y-000000", "--state", "OPEN"], 2, "ERROR: --state OPEN is set only by `open`"),
        (["mark", "x-y-000000", "--state", "RUNNING"], 1, "ERROR: no job record x-y-000000 at "),
        (["show", "../etc/passwd"], 2, "ERROR: record id '../etc/passwd' is not a record id"),
        (["list", "--wide"], 2, "ERROR: unrecognized arguments: --wide"),
    ],
)
def test_cli_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                    argv: list[str], code: int, message: str) -> None:
    monkeypatch.setenv("TAO_STATE_DIR", str(tmp_path))
    got, out, err = _cli(capsys, *argv)
    assert (got, out) == (code, "")
    assert err.startswith(message), err


def test_cli_relative_state_dir_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TAO_STATE_DIR", "relative/state")
    code, _, err = _cli(capsys, "list")
    assert code == 2
    assert err.startswith("ERROR: TAO_STATE_DIR must be an absolute path (got 'relative/state')")


def test_cli_usage(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys)
    assert code == 2 and err.startswith("usage: tao_job_record open")
    code, out, _ = _cli(capsys, "--help")
    assert code == 0 and "exit codes: 0 ok, 1 illegal transition" in out
