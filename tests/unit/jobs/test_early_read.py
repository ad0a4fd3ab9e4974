"""status's and explain's prestarted reads (jobs/early_read.py): what they guess from the raw files, when they guess
nothing, and that the verb takes them over, or kills them unread, whatever the guess."""

from __future__ import annotations

import json
import threading
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


# explain's first round (diagnosis/explain.py): the namespace's events and the Job with its pods

EVENTS = ["get", "events", "-n", "tao-jobs", "-o", "json"]
SERVER = "https://127.0.0.1:6443"  # the fake kubeconfig's cluster


def test_explain_guesses_its_first_round_for_a_record_of_this_cluster(tao_env: Path) -> None:
    assert early_read.guess_explain(_record(api_server=SERVER), _state(tao_env), SERVER) == [EVENTS, READ]
    assert early_read.guess_explain(_record(), _state(tao_env), SERVER) == [EVENTS, READ]  # a record pinned nowhere


def test_explain_guesses_nothing_for_a_record_of_another_cluster_unless_forced(tao_env: Path) -> None:
    record_id = _record(api_server="https://elsewhere:6443")
    assert early_read.guess_explain(record_id, _state(tao_env), SERVER) == []
    assert early_read.guess_explain(record_id, _state(tao_env), SERVER, force=True) == [EVENTS, READ]


def test_explain_guesses_nothing_where_status_guesses_nothing(tao_env: Path) -> None:
    canceled = _record()
    _rewrite(tao_env / "state" / "jobs" / f"{canceled}.json", terminal_state="CANCELED")
    assert early_read.guess_explain(canceled, _state(tao_env), SERVER) == []
    assert early_read.guess_explain("../x", _state(tao_env), SERVER) == []


def _failed(fake: FakeKubectl) -> None:
    """The exit-code fixture's failed one-pod Job under JOB's name, its events, its node and its rank's log."""
    job, pods = fixture_json("exit-code.job.json"), fixture_json("exit-code.pods.json")["items"]
    job["metadata"]["name"] = JOB
    for pod in pods:
        pod["metadata"]["labels"]["tao-job"] = JOB
    node = next(n for n in fixture_json("nodes-2x8.json")["items"] if n["metadata"]["name"] == "gpu-node-1")
    fake.on("get", "jobs,pods", data={"kind": "List", "items": [job, *pods]})
    fake.on("get", "events", data={"kind": "List", "items": []})
    fake.on("get", "nodes", "gpu-node-1", data=node)
    name = pods[0]["metadata"]["name"]
    fake.on("logs", stdout=f"[pod/{name}/tao] Traceback (most recent call last):\n"
                           f"[pod/{name}/tao] ValueError: corrupt record in shard 0\n")


def test_explain_takes_its_prestarted_first_round_over(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _failed(fake_kubectl)
    code, out, _ = cli("explain", _record(api_server=SERVER))
    assert code == 1 and "ValueError: corrupt record in shard 0" in out
    assert [call.argv for call in fake_kubectl.calls][:2] == [EVENTS, READ] and fake_kubectl.killed() == []


def test_explain_reads_a_failed_jobs_logs_in_the_same_round_as_its_nodes(cli: Any, fake_kubectl: FakeKubectl) -> None:
    """The record did not know the job failed, so its logs were not in the first round: they are read beside the
    nodes its pods ran on. The nodes' answer waits for the logs' call to start (a read made after the nodes'
    would never start in time)."""
    _failed(fake_kubectl)
    logs_started = threading.Event()
    seen_by_nodes: list[bool] = []
    spawn, settled = fake_kubectl.spawn, fake_kubectl.settled

    def spawn_noted(kc: Any, args: list[str], *rest: Any) -> Any:
        if args[:1] == ["logs"]:
            logs_started.set()
        return spawn(kc, args, *rest)

    def settled_noted(kc: Any, args: list[str], **kwargs: Any) -> Any:
        if args[:2] == ["get", "nodes"]:
            seen_by_nodes.append(logs_started.wait(timeout=30))  # the timeout only stops a hang
        return settled(kc, args, **kwargs)

    fake_kubectl.spawn, fake_kubectl.settled = spawn_noted, settled_noted  # type: ignore[method-assign]
    code, out, _ = cli("explain", _record(api_server=SERVER))
    assert code == 1 and "ValueError: corrupt record in shard 0" in out
    assert seen_by_nodes == [True]
    assert len([argv for argv in fake_kubectl.argvs() if argv[:1] == ["logs"]]) == 1
