"""status's prestarted read (jobs/early_read.py): what it guesses from the raw files, when it guesses nothing,
and that the verb takes it over, or kills it unread, whatever the guess."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl, fixture_json

from kubectl_tao.jobs import early_read
from kubectl_tao.progress import execread
from kubectl_tao.store.records import RecordStore

JOB = "dino-train-3f9a1c"  # the fixtures' Job
READ = ["get", "jobs,pods", "-n", "tao-jobs", "-l", f"tao-job={JOB}", "-o", "json"]
PROGRESS = ["exec", "-n", "tao-jobs", f"job/{JOB}", "-c", "tao", "--", "/bin/sh", "-c", execread.PROGRAM,
            execread.PROGRAM_NAME, "/workspace/results/x"]


def _record(**extra: Any) -> str:
    store = RecordStore()
    record = store.open(platform="kubernetes", image="busybox", network_arch="dino", action="train",
                        storage_tier="A", results_dir="/workspace/results/x")
    store.mark(record.id, "RUNNING", message="applied", backend_ref=f"tao-jobs/{JOB}")
    store.update_extra(record.id, **{"namespace": "tao-jobs", "job_name": JOB, "gpus": 8, "nodes": 1, **extra})
    return record.id


def _state(tao_env: Path) -> str:
    return str(tao_env / "state")


def _rewrite(path: Path, **changes: Any) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def test_a_launched_record_guesses_the_one_read_status_makes(tao_env: Path) -> None:
    assert early_read.guess(_record(), _state(tao_env)) == READ


@pytest.mark.parametrize(
    "extra",
    [
        {"gang": "native"},  # a native gang reads its PodGroups too
        {"namespace": "Tao-Jobs"},  # not a Kubernetes name: never on a command line before redaction
        {"job_name": "hf_" + "a" * 34},
        {"job_name": "x" * 64},
        {"namespace": "-tao"},
    ],
)
def test_nothing_is_guessed_from_names_that_are_not_kubernetes_names_or_a_gang(
    tao_env: Path, extra: dict[str, Any]
) -> None:
    record_id = _record()
    # Written past the store (whose schema refuses such names): the guess reads the file raw, before any check.
    _rewrite(tao_env / "state" / "jobs" / ".kubectl-tao" / f"{record_id}.json", **extra)
    assert early_read.guess(record_id, _state(tao_env)) is None


def test_nothing_is_guessed_for_a_job_made_elsewhere_another_platform_or_a_canceled_record(tao_env: Path) -> None:
    state = tao_env / "state" / "jobs"
    foreign = _record()
    (state / ".kubectl-tao" / f"{foreign}.json").unlink()
    assert early_read.guess(foreign, _state(tao_env)) is None
    other = _record()
    _rewrite(state / f"{other}.json", platform="slurm")
    assert early_read.guess(other, _state(tao_env)) is None
    canceled = _record()
    _rewrite(state / f"{canceled}.json", terminal_state="CANCELED")
    assert early_read.guess(canceled, _state(tao_env)) is None


@pytest.mark.parametrize("record_id", ["../x", ".hidden", "a/b", "", "x" * 201, "bad id!"])
def test_nothing_is_guessed_for_an_id_that_is_not_a_plain_record_id(tao_env: Path, record_id: str) -> None:
    assert early_read.guess(record_id, _state(tao_env)) is None


def test_nothing_is_guessed_from_unreadable_files_or_a_relative_state_dir(tao_env: Path) -> None:
    record_id = _record()
    assert early_read.guess(record_id, "state") is None
    (tao_env / "state" / "jobs" / f"{record_id}.json").write_text("{not json")
    assert early_read.guess(record_id, _state(tao_env)) is None
    (tao_env / "state" / "jobs" / f"{record_id}.json").write_text("[]")
    assert early_read.guess(record_id, _state(tao_env)) is None


def _answer(fake: FakeKubectl) -> None:
    fake.on("get", "jobs,pods", data={"kind": "List", "items": [
        fixture_json("running.job.json"), *fixture_json("running.pods.json")["items"]]})


def test_status_takes_the_prestarted_read_over_and_adds_only_the_progress_read(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    _answer(fake_kubectl)
    fake_kubectl.on("exec", stdout="/workspace/results/x/train/status.json\0")
    record_id = _record()
    code, out, _ = cli("status", record_id)
    assert code == 0 and "RUNNING" in out
    calls = [call.argv for call in fake_kubectl.calls]
    # both started before the record was loaded, and both taken over: one round trip for a running job
    assert calls == [READ, PROGRESS] and fake_kubectl.killed() == []


def test_a_one_pod_job_not_yet_final_guesses_its_status_json_read_too(tao_env: Path) -> None:
    assert early_read.guess_progress(_record(), _state(tao_env)) == PROGRESS


@pytest.mark.parametrize(
    ("extra", "record"),
    [
        ({"nodes": 2}, {}),  # rank 0's pod is named only by the read
        ({"progress_read": {"from": "log", "why": "forbidden"}}, {}),  # told to read the log instead
        ({}, {"terminal_state": "COMPLETE"}),  # the record answers
        ({}, {"results_dir": "/workspace/$(reboot)"}),  # not plain path characters: never on a command line early
        ({}, {"results_dir": "relative/x"}),
        ({}, {"results_dir": 7}),
    ],
)
def test_no_status_json_read_is_guessed_for_a_gang_a_final_record_or_an_odd_results_dir(
    tao_env: Path, extra: dict[str, Any], record: dict[str, Any]
) -> None:
    record_id = _record(**extra)
    if record:
        _rewrite(tao_env / "state" / "jobs" / f"{record_id}.json", **record)
    assert early_read.guess_progress(record_id, _state(tao_env)) is None


def test_no_status_json_read_is_guessed_for_a_job_last_seen_pending(tao_env: Path) -> None:
    record_id = _record()
    RecordStore().mark(record_id, "PENDING", message="Unschedulable", source="poller")
    assert early_read.guess(record_id, _state(tao_env)) == READ
    assert early_read.guess_progress(record_id, _state(tao_env)) is None


def test_a_pending_job_kills_the_prestarted_status_json_read_unread(cli: Any, fake_kubectl: FakeKubectl) -> None:
    """Last seen RUNNING, pending now (a pod evicted and made again): the guess was wrong, the call goes unread."""
    job = fixture_json("imagepull.job.json")
    job["metadata"]["name"] = JOB
    pods = fixture_json("imagepull.pods.json")["items"]
    fake_kubectl.on("get", "jobs,pods", data={"kind": "List", "items": [job, *pods]})
    fake_kubectl.on("get", "events", data={"kind": "List", "items": []})
    record_id = _record()
    code, out, err = cli("status", record_id)
    assert code == 0, err
    assert "PENDING" in out
    assert fake_kubectl.killed() == [PROGRESS] and PROGRESS not in fake_kubectl.argvs()
