"""One record that fails its schema never breaks everyone's `list`, `record list` or `status` (issue 17,
item 5): it is named in one warning and skipped, and a state outside the vocabulary is never shown."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from kubectl_tao.store.records import RecordStore


def _store() -> RecordStore:
    return RecordStore(os.environ["TAO_STATE_DIR"])


def _good() -> str:
    store = _store()
    record = store.open(platform="kubernetes", image="busybox", network_arch="dino", action="train",
                        storage_tier="A", results_root="/workspace/results")
    return record.id


CORRUPTIONS = {
    "transitions-not-a-list": lambda r: r.update(transitions="RUNNING"),
    "transition-not-an-object": lambda r: r.update(transitions=["RUNNING"]),
    "state-outside-vocabulary": lambda r: r["transitions"].append(
        {"ts": "2026-01-01T00:00:00Z", "state": "PWNED", "message": "", "source": "agent"}
    ),
    "terminal-state-outside-vocabulary": lambda r: r.update(terminal_state="DONE"),
    "id-not-a-string": lambda r: r.update(platform=["k8s"]),
    "no-transitions": lambda r: r.update(transitions=[]),
}


def _corrupt(how: str) -> tuple[str, Path]:
    bad_id = _good()
    path = _store().path(bad_id)
    record = json.loads(path.read_text(encoding="utf-8"))
    CORRUPTIONS[how](record)
    path.write_text(json.dumps(record), encoding="utf-8")
    return bad_id, path


def _listed_beside_a_bad_record(cli: Any, how: str, *argv: str) -> tuple[Path, str, str]:
    """ARGV run over a good record and one corrupted HOW: it succeeds and lists the good one only; the bad
    record's path, stdout and stderr."""
    good = _good()
    bad_id, path = _corrupt(how)
    code, out, err = cli(*argv)
    assert code == 0
    assert good in out and bad_id not in out
    return path, out, err


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
def test_list_skips_a_bad_record_with_one_warning(cli: Any, how: str) -> None:
    path, out, err = _listed_beside_a_bad_record(cli, how, "list", "--no-live")
    assert "PWNED" not in out and "DONE" not in out
    assert err.startswith(f"warning: job record {path} does not match job-record.schema.json at $.")
    assert err.count("\n") == 1 and "skipped" in err


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
def test_record_list_skips_a_bad_record(cli: Any, how: str) -> None:
    path, _, err = _listed_beside_a_bad_record(cli, how, "record", "list")
    assert err.startswith(f"warning: job record {path} does not match") and err.count("\n") == 1


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
def test_status_of_a_bad_record_is_one_error_line(cli: Any, how: str) -> None:
    bad_id, path = _corrupt(how)
    code, out, err = cli("status", bad_id)
    assert code == 1 and out == ""
    assert err.startswith(f"error: job record {path} does not match job-record.schema.json at $.")
    assert err.endswith("; restore it or move it aside\n") and err.count("\n") == 1


def test_a_bad_kubectl_tao_sibling_file_skips_only_its_job(cli: Any) -> None:
    good, bad_id = _good(), _good()
    store = _store()
    store.extras_dir.mkdir(parents=True, exist_ok=True)
    store.extra_path(bad_id).write_text("[1, 2", encoding="utf-8")
    code, out, err = cli("list", "--no-live")
    assert code == 0
    assert good in out and bad_id not in out
    assert "is not valid JSON" in err and f"job {bad_id} skipped" in err


def test_a_bad_record_cannot_be_marked(cli: Any) -> None:
    bad_id, path = _corrupt("transitions-not-a-list")
    before = path.read_text(encoding="utf-8")
    code, _, err = cli("record", "mark", bad_id, "--state", "RUNNING")
    assert code == 1 and "does not match job-record.schema.json" in err
    assert path.read_text(encoding="utf-8") == before


def test_a_sibling_file_of_a_newer_schema_version_skips_only_its_job_in_list_and_stops_its_status(cli: Any) -> None:
    good, newer = _good(), _good()
    store = _store()
    store.extras_dir.mkdir(parents=True, exist_ok=True)
    store.extra_path(newer).write_text(json.dumps({"schema_version": 2, "id": newer}), encoding="utf-8")
    code, out, err = cli("list", "--no-live")
    assert code == 0 and good in out and newer not in out
    assert err == (f"warning: kubectl-tao data of job record {newer} has schema_version 2, which this kubectl-tao "
                   f"cannot read (it reads 1); upgrade kubectl-tao; job {newer} skipped\n")
    code, out, err = cli("status", newer)
    assert (code, out) == (1, "")
    assert err == (f"error: kubectl-tao data of job record {newer} has schema_version 2, which this kubectl-tao "
                   "cannot read (it reads 1); upgrade kubectl-tao\n")
