"""Every store writer builds or changes the typed record (store/jobrecord.py) and writes its `to_stored()`: the
file it writes is byte for byte the file the dict writers before it wrote for the same record and change.
`_Dicts` below is those dict writers as they were (transitions.new_record / apply_mark and the store's merge of
the sibling file, from the tree before the typed writes), kept here as the reference; each test starts from a
stored shape of tests/fixtures/records (or a record the store opened) and compares the files' bytes."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from support import ROOT

from kubectl_tao.core.redact import redact_obj
from kubectl_tao.store import transitions
from kubectl_tao.store.jobrecord import CapturedHistory, K8sRecord, ProgressRead, RankCapture
from kubectl_tao.store.records import LOG_TAIL_MAX_BYTES, LOG_TAIL_MAX_LINES, RecordStore

FIXTURES = ROOT / "tests" / "fixtures" / "records"
RID = "dino-train-3f9a1c"
NOW = "2026-12-07T01:00:00.000Z"


def _fixture(name: str) -> dict[str, Any]:
    data = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _bytes(obj: object) -> bytes:
    """What the store writes for OBJ (records._dumps)."""
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


class _Dicts:
    """The dict writers the typed ones replaced, as they were."""

    @staticmethod
    def new_record(record_id: str, fields: dict[str, Any]) -> dict[str, Any]:
        now = transitions.utc_now()
        results_dir = fields["results_dir"] or f"{fields['results_root']}/{record_id}"
        record: dict[str, Any] = {
            "schema_version": 1, "id": record_id, "platform": fields["platform"], "backend_ref": None,
            "image": fields["image"], "network_arch": fields["network_arch"], "action": fields["action"],
            "results_dir": results_dir, "storage_tier": fields["storage_tier"], "submitted_at": now,
            "transitions": [{"ts": now, "state": "PENDING", "message": transitions.OPENING_MESSAGE,
                             "source": "agent"}],
            "terminal_state": None, "redacted": True, "upload_excludes": list(fields["upload_excludes"]),
        }
        if fields["retry_of"] is not None:
            record["retry_of"] = fields["retry_of"]
        if fields["parent_job"] is not None:
            record["parent_job"] = fields["parent_job"]
        return record

    @staticmethod
    def apply_mark(record: dict[str, Any], state: str, message: str, source: str, backend_ref: str | None,
                   err_class: str | None) -> bool:
        def set_ref() -> bool:
            if backend_ref is None or record.get("backend_ref") == backend_ref:
                return False
            record["backend_ref"] = backend_ref
            return True

        current = transitions.last_state(record)
        if current in transitions.TERMINAL_STATES:
            changed = set_ref()
            if err_class is not None and record.get("err_class") in (None, ""):
                record["err_class"] = err_class
                changed = True
            return changed
        changed = set_ref()
        steps = record.setdefault("transitions", [])
        last = steps[-1] if steps else {}
        if state == current and last.get("message") == message and state not in transitions.TERMINAL_STATES:
            return changed
        steps.append({"ts": transitions.utc_now(), "state": state, "message": message, "source": source})
        if state in transitions.TERMINAL_STATES:
            record["terminal_state"] = state
            record["terminal_write_by"] = source
            if err_class is not None:
                record["err_class"] = err_class
        return True

    @staticmethod
    def cap_log_tail(tail: object) -> object:
        if isinstance(tail, str):
            lines: list[str] = tail.splitlines()
            as_text = True
        elif isinstance(tail, list) and all(isinstance(x, str) for x in tail):
            lines, as_text = list(tail), False
        else:
            return tail
        lines = lines[-LOG_TAIL_MAX_LINES:]
        while lines and len("\n".join(lines).encode("utf-8")) > LOG_TAIL_MAX_BYTES:
            if len(lines) == 1:
                lines = [lines[0].encode("utf-8")[-LOG_TAIL_MAX_BYTES:].decode("utf-8", errors="ignore")]
                break
            lines = lines[1:]
        return "\n".join(lines) if as_text else lines

    @classmethod
    def cap_history(cls, history: object) -> object:
        if isinstance(history, dict) and isinstance(history.get("ranks"), list):
            return {**history, "ranks": [cls.cap_history(r) for r in history["ranks"]]}
        if isinstance(history, list):
            return [cls.cap_history(r) for r in history]
        if isinstance(history, dict) and "log_tail" in history:
            return {**history, "log_tail": cls.cap_log_tail(history["log_tail"])}
        return history

    @classmethod
    def merge_extra(cls, current: dict[str, Any] | None, fields: dict[str, Any]) -> dict[str, Any]:
        current = current or {"schema_version": 1, "id": RID}
        if "history" in fields:
            fields = {**fields, "history": cls.cap_history(fields["history"])}
        merged = redact_obj({**current, **fields})
        assert isinstance(merged, dict)
        return merged


@pytest.fixture(autouse=True)
def _fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transitions, "utc_now", lambda: NOW)


def _store(tmp_path: Path, record: dict[str, Any] | None, extra: dict[str, Any] | None) -> RecordStore:
    """A store holding RECORD (and EXTRA, the sibling file) under RID, as files a release wrote."""
    store = RecordStore(tmp_path / "state")
    store.jobs_dir.mkdir(mode=0o700, parents=True)
    store.extras_dir.mkdir(mode=0o700)
    if record is not None:
        store.path(RID).write_bytes(_bytes(record))
    if extra is not None:
        store.extra_path(RID).write_bytes(_bytes(extra))
    return store


def _running() -> dict[str, Any]:
    """The reference fixture before its end: RUNNING, no terminal_write_by or err_class yet."""
    record = _fixture("v1-reference.json")
    for key in ("terminal_write_by", "err_class"):
        del record[key]
    return {**record, "terminal_state": None, "transitions": record["transitions"][:2]}


@pytest.mark.parametrize("links", [{}, {"retry_of": "dino-train-000000", "parent_job": "dino-train-111111"}])
def test_open_writes_the_bytes_the_dict_writer_wrote(tmp_path: Path, links: dict[str, str]) -> None:
    store = _store(tmp_path, None, None)
    given = {"platform": "kubernetes", "image": "nvcr.io/nvidia/tao/tao-toolkit:5.5.0-pyt", "network_arch": "dino",
             "action": "train", "storage_tier": "A", "results_root": "/results", "upload_excludes": ["*.tmp"]}
    opened = store.open(**given, **links, record_id=RID)
    fields = {**given, "results_dir": None, "retry_of": None, "parent_job": None, **links}
    assert store.path(RID).read_bytes() == _bytes(_Dicts.new_record(RID, fields))
    assert dict(opened) == json.loads(store.path(RID).read_bytes())


MARKS = [
    # (the stored record, the mark: state, message, source, backend_ref, err_class)
    ("running", ("RUNNING", "step 2", "poller", None, None)),
    ("running", ("RUNNING", "applied Job tao/dino-train-3f9a1c", "poller", None, None)),  # the same: no write
    ("running", ("PENDING", "evicted", "poller", "tao/dino-train-3f9a1c", None)),
    ("running", ("ERROR", "rank 1 exit 137 (OOMKilled)", "poller", None, "ERR_INFRA")),
    ("running", ("COMPLETE", "done", "poller", None, None)),
    ("reference", ("ERROR", "again", "agent", None, "ERR_INFRA")),  # final: nothing changes
    ("opened", ("RUNNING", "applied Job tao/dino-train-3f9a1c", "agent", "tao/dino-train-3f9a1c", None)),
    ("opened", ("CANCELED", "not run", "agent", None, None)),
]


@pytest.mark.parametrize(("shape", "mark"), MARKS)
def test_mark_writes_the_bytes_the_dict_writer_wrote(tmp_path: Path, shape: str, mark: tuple[Any, ...]) -> None:
    if shape == "opened":
        store = _store(tmp_path, None, None)
        store.open(platform="kubernetes", image="img:1", network_arch="dino", action="train", storage_tier="B",
                   results_dir="/results/x", record_id=RID)
    else:
        store = _store(tmp_path, _running() if shape == "running" else _fixture("v1-reference.json"), None)
    before = store.path(RID).read_bytes()
    expected = copy.deepcopy(json.loads(before))
    changed = _Dicts.apply_mark(expected, *mark)
    store.mark(RID, *mark)
    assert store.path(RID).read_bytes() == (_bytes(redact_obj(expected)) if changed else before)


def _long_history() -> dict[str, Any]:
    """A captured history whose first rank's log tail is over the store's caps (lines and bytes)."""
    return {
        "state": "ERROR", "reason": "OutOfMemory", "message": "rank 1 was killed", "err_class": "ERR_INFRA",
        "first_failed_rank": 1,
        "ranks": [
            {"rank": 0, "pod": "p-0", "node": "gpu-1", "phase": "Failed", "exit_code": 1, "reason": "Error",
             "log_tail": [f"line {n} " + "x" * 200 for n in range(400)], "captured_at": "2026-12-07T01:00:00Z"},
            {"rank": 1, "pod": "p-1", "node": "gpu-2", "phase": "Failed", "exit_code": 137, "reason": "OOMKilled",
             "log_tail": "Killed\n", "errors": ["CUDA out of memory"], "captured_at": "2026-12-07T01:00:00Z"},
        ],
        "captured_at": "2026-12-07T01:00:00Z",
        "diagnosis": _fixture("v1-k8s.json")["history"]["diagnosis"],
    }


CHANGES: list[tuple[str, dict[str, Any]]] = [
    ("pin", {"job_uid": "0f0e0d0c-0b0a-4909-8807-060504030201", "submit_phase": "created"}),
    # keys at their default, new to some shapes: written as a dict update wrote them
    ("release", {"keep_until_captured": False, "ttl_hold": None}),
    ("names", {"api_server": "https://10.0.0.1:6443", "context": "lab", "namespace": "tao", "job_name": RID,
               "secret_names": [], "service_name": None, "gpus": 8, "nodes": 2, "gang": "native",
               "submit_phase": "dry-run", "warnings": ["w"], "request": {"version": 1, "flags": {}},
               "max_restarts": 2}),
    ("history", {"history": _long_history(), "progress": {"source": "log", "epoch": 3}, "ttl_hold": None}),
    ("read note", {"progress_read": {"from": "log", "why": "kubectl may not exec", "at": "2026-12-07T01:00:00Z"}}),
    ("rollback", {"left_behind": ["job/x"], "submit_phase": "rolling-back",
                  "rollback": {"message": "not launched: x", "err_class": "ERR_INFRA"}}),
    ("workflow", {"workflow_not_run": {"reason": "r", "run_state": "ERROR", "run_reason": "x"},
                  "attempts": [{"attempt": 1}], "resubmitted_as": ["dino-train-222222"]}),
]


def _typed(fields: dict[str, Any]) -> dict[str, Any]:
    """FIELDS (stored keys and JSON values) as the typed values the package's writers pass."""
    typed: dict[str, Any] = {}
    for key, value in fields.items():
        if key == "history":
            value = CapturedHistory.read(value)
        elif key == "progress_read":
            value = ProgressRead.from_stored(value)
        elif isinstance(value, list):
            value = tuple(value)
        typed[key] = value
    return typed


@pytest.mark.parametrize("sibling", [None, "v1-k8s-first.json", "v1-k8s.json"])
@pytest.mark.parametrize(("change", "fields"), CHANGES, ids=[name for name, _ in CHANGES])
def test_update_k8s_writes_the_bytes_the_dict_writer_wrote(
    tmp_path: Path, sibling: str | None, change: str, fields: dict[str, Any]
) -> None:
    current = _fixture(sibling) if sibling else None
    store = _store(tmp_path, _fixture("v1-reference.json"), current)
    written = store.update_k8s(RID, **_typed(fields))
    expected = _bytes(_Dicts.merge_extra(copy.deepcopy(current), copy.deepcopy(fields)))
    assert store.extra_path(RID).read_bytes() == expected
    assert _bytes(written) == expected
    # the stored-form writer (tests and tools planting a shape) writes the same bytes
    store = _store(tmp_path / "again", _fixture("v1-reference.json"), current)
    store.update_extra(RID, **copy.deepcopy(fields))
    assert store.extra_path(RID).read_bytes() == expected


def test_a_history_of_the_first_releases_shape_is_capped_and_kept_a_list(tmp_path: Path) -> None:
    listed = [{"rank": 0, "pod": "p-0", "log_tail": "\n".join(f"l{n}" for n in range(300))}]
    store = _store(tmp_path, _fixture("v1-reference.json"), _fixture("v1-k8s-first.json"))
    store.update_k8s(RID, history=CapturedHistory.read(listed))
    expected = _Dicts.merge_extra(_fixture("v1-k8s-first.json"), {"history": listed})
    assert store.extra_path(RID).read_bytes() == _bytes(expected)
    assert expected["history"][0]["log_tail"].count("\n") == LOG_TAIL_MAX_LINES - 1


def test_mark_with_a_k8s_part_writes_both_files_as_the_dict_writers_did(tmp_path: Path) -> None:
    store = _store(tmp_path, _running(), _fixture("v1-k8s.json"))
    part = K8sRecord.partial(submit_phase="rolled-back", left_behind=())
    store.mark(RID, "ERROR", "not launched", "poller", None, "ERR_INFRA", k8s=part)
    record = _running()
    _Dicts.apply_mark(record, "ERROR", "not launched", "poller", None, "ERR_INFRA")
    assert store.path(RID).read_bytes() == _bytes(record)
    expected = _Dicts.merge_extra(_fixture("v1-k8s.json"), {"submit_phase": "rolled-back", "left_behind": []})
    assert store.extra_path(RID).read_bytes() == _bytes(expected)


def test_a_part_built_up_in_code_holds_its_keys_in_the_order_given() -> None:
    rank = RankCapture.partial(rank=0, pod="p-0", log_tail=("a",), captured_at="2026-12-07T01:00:00Z")
    assert rank.changed(errors=("e",)).to_stored() == {
        "rank": 0, "pod": "p-0", "log_tail": ["a"], "captured_at": "2026-12-07T01:00:00Z", "errors": ["e"]}
    note = ProgressRead.partial(from_="log", why="forbidden", at="2026-12-07T01:00:00Z")
    assert note.to_stored() == {"from": "log", "why": "forbidden", "at": "2026-12-07T01:00:00Z"}  # no retry_at
    assert K8sRecord.partial(ttl_hold=None).to_stored() == {"ttl_hold": None}  # a default, set: written


def test_a_typed_write_refuses_a_field_the_record_lacks_or_a_value_of_another_type() -> None:
    with pytest.raises(TypeError, match="K8sRecord has no field 'job'"):
        K8sRecord.partial(job="x")
    with pytest.raises(TypeError, match=r"K8sRecord\.history cannot hold dict"):
        K8sRecord.partial(history={"ranks": []})  # a dict is the stored form, not the typed one
    with pytest.raises(TypeError, match=r"K8sRecord\.gpus cannot hold str"):
        K8sRecord.partial(gpus="8")


def test_a_value_kept_as_stored_is_replaced_by_a_typed_one_in_its_place() -> None:
    k8s = K8sRecord.from_stored({"schema_version": 1, "id": "x", "nodes": "2", "gpus": 1})
    assert k8s.changed(nodes=2).to_stored() == {"schema_version": 1, "id": "x", "nodes": 2, "gpus": 1}
    assert k8s.merged(K8sRecord.from_stored({"gpus": "8"})).to_stored() == {
        "schema_version": 1, "id": "x", "nodes": "2", "gpus": "8"}


def test_a_captured_history_is_written_as_the_dict_capture_wrote_it(tmp_path: Path) -> None:
    from kubectl_tao.core.redact import redact_text
    from kubectl_tao.jobs.track import Observation, Tracked, capture_history
    from kubectl_tao.progress.kept import ended

    sibling = {**_fixture("v1-k8s.json"), "ttl_hold": "wait"}
    store = _store(tmp_path, _running(), sibling)
    tracked = Tracked(store.show(RID), store.get_extra(RID))
    live = {"first_failed_rank": 1, "ranks": [
        {"rank": 0, "pod": "p-0", "node": "gpu-1", "phase": "Succeeded", "exit_code": 0, "reason": "Completed"},
        {"rank": 1, "pod": "p-1", "node": None, "phase": "Failed", "exit_code": 137, "reason": "OOMKilled"},
    ]}
    obs = Observation(tracked, "ERROR", "OOMKilled", "rank 1 was killed", "ERR_INFRA", live)
    capture_history(None, store, tracked, obs, [])  # type: ignore[arg-type]  # no pods: no kubectl call
    now = json.loads(store.extra_path(RID).read_bytes())["history"]["captured_at"]
    ranks = [{"rank": r["rank"], "pod": r["pod"], "node": r["node"], "phase": r["phase"], "exit_code": r["exit_code"],
              "reason": r["reason"], "log_tail": [], "captured_at": now} for r in live["ranks"]]
    history = {"state": "ERROR", "reason": "OOMKilled", "message": redact_text("rank 1 was killed"),
               "err_class": "ERR_INFRA", "first_failed_rank": 1, "ranks": ranks, "captured_at": now}
    fields: dict[str, Any] = {"history": history}
    progress = ended(sibling["progress"], None)
    if progress is not None:
        fields["progress"] = progress
    fields["ttl_hold"] = None
    assert store.extra_path(RID).read_bytes() == _bytes(_Dicts.merge_extra(copy.deepcopy(sibling), fields))
    assert tracked.extra == json.loads(store.extra_path(RID).read_bytes())  # the caller holds what was written
