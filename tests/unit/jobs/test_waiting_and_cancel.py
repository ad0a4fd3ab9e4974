"""Waiting never loses a job's ending to its TTL; cancel of a Job that ended unseen is refused as finished;
`status --watch --force` passes --force on; `logs` defaults to 200 lines."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl, fixture_json, open_kubernetes_record

from kubectl_tao.jobs import track as tracking
from kubectl_tao.jobs.wait import WaitTimeout, Watchdogs, watch
from kubectl_tao.k8s.kubectl import Kubectl
from kubectl_tao.store.records import RecordStore

SERVER = "https://127.0.0.1:6443"  # the kubeconfig of the cli fixture


def _launched(job_name: str, uid: str, **extra: Any) -> tuple[RecordStore, str]:
    """A record as kubectl-tao's submit leaves it: sibling data pinned to a Job, marked RUNNING."""
    store = RecordStore()
    record = open_kubernetes_record(store)
    store.update_extra(
        record.id,
        api_server=SERVER,
        namespace="tao-jobs",
        job_name=job_name,
        job_uid=uid,
        nodes=1,
        submit_phase="created",
        **extra,
    )
    store.mark(record.id, "RUNNING", message="applied", backend_ref=f"tao-jobs/{job_name}")
    return store, record.id


def _list(*items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(items)}


def _patches(fake: FakeKubectl) -> list[dict[str, Any]]:
    out = []
    for argv in fake.argvs():
        if "patch" in argv:
            out.append(json.loads(argv[argv.index("-p") + 1]))
    return out


# ------------------------------------------------------------------ item 8: the TTL is held while waiting


def test_watch_holds_the_ttl_and_gives_it_back_only_after_the_history_is_captured(
    tao_env: Path, fake_kubectl: FakeKubectl
) -> None:
    running = fixture_json("running.job.json")
    running["spec"]["ttlSecondsAfterFinished"] = 0
    store, record_id = _launched(running["metadata"]["name"], running["metadata"]["uid"])
    complete = json.loads(json.dumps(running))
    complete["spec"]["ttlSecondsAfterFinished"] = None
    complete["status"] = fixture_json("complete.job.json")["status"]
    pods = fixture_json("running.pods.json")["items"]
    done_pods = fixture_json("complete.pods.json")["items"]
    answers = iter([_list(running, *pods), _list(complete, *done_pods)])
    fake_kubectl.on("patch", stdout="job.batch/patched\n")
    fake_kubectl.on("logs", stdout="")
    original_spawn = fake_kubectl.spawn

    def spawn(kc: Kubectl, args: list[str], *rest: Any) -> Any:
        if args[:2] == ["get", "jobs,pods"]:
            fake_kubectl.rules.insert(0, (("get", "jobs,pods"), _completed(json.dumps(next(answers)))))
        return original_spawn(kc, args, *rest)

    fake_kubectl.spawn = spawn  # type: ignore[method-assign]
    obs = _watch(store, record_id, Watchdogs(interval=0))
    assert obs.state == "COMPLETE"
    # Removed while running, set back to the user's 0 (not a default) once the history was in the record.
    assert [p["spec"]["ttlSecondsAfterFinished"] for p in _patches(fake_kubectl)] == [None, 0]
    assert all(p["metadata"]["uid"] == running["metadata"]["uid"] for p in _patches(fake_kubectl))
    extra = store.get_extra(record_id)
    assert extra["history"]["state"] == "COMPLETE" and not extra.get("ttl_hold")
    assert store.show(record_id)["terminal_state"] == "COMPLETE"


def _watch(store: Any, record_id: str, dogs: Watchdogs, **clock: Any) -> Any:
    """watch() of RECORD_ID on the fake cluster with DOGS, printing to no terminal and never sleeping; CLOCK
    (clock=) where the test moves the time itself."""
    return watch(
        Kubectl(),
        store,
        tracking.load(store, record_id),
        server=SERVER,
        dogs=dogs,
        out=io.StringIO(),
        tty=False,
        sleep=lambda _s: None,
        **clock,
    )


def _completed(stdout: str) -> Any:
    from kubectl_tao.k8s.kubectl import Completed

    return Completed(stdout, "", 0)


def test_a_wait_that_ends_without_an_ending_gives_the_ttl_back(tao_env: Path, fake_kubectl: FakeKubectl) -> None:
    running = fixture_json("running.job.json")
    store, record_id = _launched(running["metadata"]["name"], running["metadata"]["uid"])
    fake_kubectl.on("get", "jobs,pods", data=_list(running, *fixture_json("running.pods.json")["items"]))
    fake_kubectl.on("patch", stdout="job.batch/patched\n")
    clock = iter(range(0, 100, 5))
    with pytest.raises(WaitTimeout, match="gave up waiting after 4s"):
        _watch(store, record_id, Watchdogs(timeout=4, interval=0), clock=lambda: float(next(clock)))
    assert [p["spec"]["ttlSecondsAfterFinished"] for p in _patches(fake_kubectl)] == [None, 3600]
    extra = store.get_extra(record_id)
    assert not extra.get("ttl_hold") and not extra.get("keep_until_captured")


def test_keep_until_captured_with_ttl_zero_sets_zero_not_the_default(tao_env: Path, fake_kubectl: FakeKubectl) -> None:
    job = fixture_json("complete.job.json")
    store, record_id = _launched(
        job["metadata"]["name"], job["metadata"]["uid"], keep_until_captured=True, ttl_seconds=0
    )
    fake_kubectl.on("get", "jobs,pods", data=_list(job, *fixture_json("complete.pods.json")["items"]))
    fake_kubectl.on("logs", stdout="")
    fake_kubectl.on("patch", stdout="job.batch/patched\n")
    tracking.observe(Kubectl(), store, tracking.load(store, record_id), server=SERVER)
    assert [p["spec"]["ttlSecondsAfterFinished"] for p in _patches(fake_kubectl)] == [0]


# ------------------------------------------------------------------ item 9


def test_cancel_of_a_job_that_ended_unseen_captures_it_and_is_refused(cli: Any, fake_kubectl: FakeKubectl) -> None:
    job = fixture_json("complete.job.json")
    store, record_id = _launched(job["metadata"]["name"], job["metadata"]["uid"])
    fake_kubectl.on("get", "jobs,pods", data=_list(job, *fixture_json("complete.pods.json")["items"]))
    fake_kubectl.on("logs", stdout=f"[pod/{job['metadata']['name']}-p0o9i/tao] epoch 10 done\n")
    code, out, err = cli("cancel", record_id)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "already finished (COMPLETE)" in err
    assert not [a for a in fake_kubectl.argvs() if "delete" in a]
    record = store.show(record_id)
    assert record["terminal_state"] == "COMPLETE"
    assert store.get_extra(record_id)["history"]["ranks"][0]["log_tail"] == ["epoch 10 done"]


def test_status_watch_force_looks_past_the_cluster_pin(cli: Any, fake_kubectl: FakeKubectl) -> None:
    job = fixture_json("complete.job.json")
    store, record_id = _launched(job["metadata"]["name"], job["metadata"]["uid"])
    store.update_extra(record_id, api_server="https://elsewhere.example:6443")
    fake_kubectl.on("get", "jobs,pods", data=_list(job, *fixture_json("complete.pods.json")["items"]))
    fake_kubectl.on("logs", stdout="")
    code, _, err = cli("status", record_id, "--watch")
    assert code == 1 and "pass --force to look anyway" in err
    code, out, err = cli("status", record_id, "--watch", "--force")
    assert code == 0, err
    assert "COMPLETE" in out


def test_logs_default_to_200_lines_and_tail_minus_one_means_all(cli: Any, fake_kubectl: FakeKubectl) -> None:
    job = fixture_json("running.job.json")
    _, record_id = _launched(job["metadata"]["name"], job["metadata"]["uid"])
    fake_kubectl.on("get", "jobs,pods", data=_list(job, *fixture_json("running.pods.json")["items"]))
    fake_kubectl.on("logs", stdout="")
    assert cli("logs", record_id)[0] == 0
    assert cli("logs", record_id, "--tail", "-1")[0] == 0
    tails = [next(x for x in a if x.startswith("--tail=")) for a in fake_kubectl.argvs() if "logs" in a]
    assert tails == ["--tail=200", "--tail=-1"]
    code, _, err = cli("logs", record_id, "--tail", "-2")
    assert code == 2 and err.count("\n") == 1 and "--tail -2" in err and "-1 for the whole log" in err


def test_cancel_accepts_kubectl_style_wait_values(cli: Any, fake_kubectl: FakeKubectl) -> None:
    code, _, err = cli("cancel", "dino-train-abc123", "--wait=maybe")
    assert code == 2 and err.count("\n") == 1 and "--wait=maybe: use --wait=true" in err


def test_without_permission_to_patch_the_wait_goes_on_as_before(tao_env: Path, fake_kubectl: FakeKubectl) -> None:
    running = fixture_json("running.job.json")
    store, record_id = _launched(running["metadata"]["name"], running["metadata"]["uid"])
    fake_kubectl.on("get", "jobs,pods", data=_list(running, *fixture_json("running.pods.json")["items"]))
    fake_kubectl.on("patch", stderr='Error from server (Forbidden): jobs.batch "x" is forbidden', rc=1)
    clock = iter(range(0, 100, 1))
    with pytest.raises(WaitTimeout):
        _watch(store, record_id, Watchdogs(timeout=3, interval=0), clock=lambda: float(next(clock)))
    assert len(_patches(fake_kubectl)) == 1  # tried once, not at every poll
    extra = store.get_extra(record_id)
    assert not extra.get("keep_until_captured") and not extra.get("ttl_hold")


def test_a_job_gone_after_another_process_captured_it_reads_as_that_ending(
    tao_env: Path, fake_kubectl: FakeKubectl
) -> None:
    job = fixture_json("complete.job.json")
    store, record_id = _launched(job["metadata"]["name"], job["metadata"]["uid"])
    stale = tracking.load(store, record_id)  # a waiter read the record while the Job ran
    store.mark(record_id, "COMPLETE", message="Completed", source="poller")  # another process settled it
    fake_kubectl.on("get", "jobs,pods", data=_list())  # ... and the TTL deleted the Job
    obs = tracking.observe(Kubectl(), store, stale, server=SERVER)
    assert obs.state == "COMPLETE"
    assert store.show(record_id)["terminal_state"] == "COMPLETE"
