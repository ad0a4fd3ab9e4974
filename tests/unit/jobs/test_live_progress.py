"""A running job's progress in `status`, `status --watch` and `list -o wide`: one kubectl call into rank 0
(status.json through exec, else the log), none for a job that is not running, the Forbidden fallback said once,
the `-o json` shape, and what the record keeps (written, read back by other versions, brought up to date when the
job ends)."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl, fixture_json, open_kubernetes_record

from kubectl_tao.jobs import liveprogress
from kubectl_tao.jobs import track as tracking
from kubectl_tao.jobs.wait import WaitTimeout, Watchdogs, watch
from kubectl_tao.k8s.kubectl import Kubectl
from kubectl_tao.progress import execread
from kubectl_tao.progress.model import JSON_KEYS, Progress, from_stored, stored
from kubectl_tao.store.records import RecordStore, schema_errors

SERVER = "https://127.0.0.1:6443"
RUNNING_JOB = fixture_json("running.job.json")
RUNNING_PODS = fixture_json("running.pods.json")["items"]
POD = RUNNING_PODS[0]["metadata"]["name"]
STATUS_JSON = "/workspace/results/x/train/status.json"
FORBIDDEN = (
    'Error from server (Forbidden): pods "dino-train-3f9a1c-x7k2p" is forbidden: User "alice" cannot create '
    'resource "pods/exec" in API group "" in the namespace "tao-jobs"\n'
)


def _launched(job: dict[str, Any] = RUNNING_JOB, **extra: Any) -> tuple[RecordStore, str]:
    store = RecordStore()
    record = open_kubernetes_record(store)
    name = job["metadata"]["name"]
    store.update_extra(record.id, api_server=SERVER, namespace="tao-jobs", job_name=name,
                       job_uid=job["metadata"]["uid"], nodes=1, gpus=8, submit_phase="created", **extra)
    store.mark(record.id, "RUNNING", message="applied", backend_ref=f"tao-jobs/{name}")
    return store, record.id


def _list(*items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(items)}


def _line(when: datetime, **data: Any) -> str:
    """A status.json line as TAO's StatusLogger writes it (date and time not zero-padded)."""
    out = {**data, "date": f"{when.month}/{when.day}/{when.year}",
           "time": f"{when.hour}:{when.minute}:{when.second}", "status": data.pop("status", "RUNNING"),
           "verbosity": "INFO"}
    return json.dumps(out) + "\n"


def _status_json(written: datetime, *, epoch: int = 11) -> str:
    """TAO 6's lines: the start, an epoch line (Lightning's 0-based epoch of max_epochs - 1), metrics lines."""
    return (
        _line(written - timedelta(hours=1), status="STARTED", message="Starting dino train.")
        + _line(written, epoch=epoch, max_epoch=79, step=450, max_step=8000, time_per_epoch="0:05:12.300000",
                time_per_step="0:00:00.626200", eta="3:12:30", message="Training loop in progress")
        + _line(written, kpi={"train_loss": 0.412}, message="Train metrics generated.")
        + _line(written, kpi={"val_loss": 8.1, "val_mAP": 0.377}, message="Eval metrics generated.")
    )


def _exec_answer(text: str, path: str = STATUS_JSON) -> str:
    return f"{path}\0{text}"


def _extra_calls(fake: FakeKubectl) -> list[list[str]]:
    """The calls beyond status's own read of the Job and its pods."""
    return [argv for argv in fake.argvs() if "exec" in argv or "logs" in argv]


def _verb(argv: list[str]) -> str:
    return "exec" if "exec" in argv else "logs"


def _running_with_status_json(fake: FakeKubectl) -> tuple[RecordStore, str]:
    """A launched record whose Job runs, its rank's status.json written just now (what the exec reads)."""
    store, record_id = _launched()
    fake.on("get", "jobs,pods", data=_list(RUNNING_JOB, *RUNNING_PODS))
    fake.on("exec", stdout=_exec_answer(_status_json(datetime.now(UTC).replace(microsecond=0))))
    return store, record_id


# ------------------------------------------------------------------ status of a running job


def test_status_of_a_running_tao_job_shows_epoch_eta_metrics_and_source_with_one_exec(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    store, record_id = _running_with_status_json(fake_kubectl)
    code, out, err = cli("status", record_id)
    assert code == 0, err
    assert [_verb(argv) for argv in _extra_calls(fake_kubectl)] == ["exec"]
    header, row = out.splitlines()[:2]
    assert header.split()[-2:] == ["PROGRESS", "ETA"]
    # the ETA counts down from when status.json was written: a loaded machine may cross a second in between
    assert row.split()[-4:-1] == ["epoch", "12/80", "15%"] and row.split()[-1] in ("3h12m", "3h11m")
    assert re.search(r"Progress: epoch 12/80 15%, ETA 3h1[12]m, written [0-5]s ago", out), out
    assert f"(from status.json {STATUS_JSON} in pod {POD})" in out
    assert "Metrics: train_loss 0.412  val_loss 8.1  val_mAP 0.377" in out
    assert "Warning:" not in out
    kept = store.get_extra(record_id)["progress"]
    assert (kept["epoch"], kept["max_epoch"], kept["source"], kept["kpi"]["val_mAP"]) == (12, 80, "status.json", 0.377)
    assert schema_errors(store.get_extra(record_id), "job-record-k8s") == []


def test_the_exec_runs_a_fixed_program_and_hands_the_results_directory_as_an_argument(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    _, record_id = _launched()
    fake_kubectl.on("get", "jobs,pods", data=_list(RUNNING_JOB, *RUNNING_PODS))
    fake_kubectl.on("exec", stdout="")
    fake_kubectl.on("logs", stdout="")
    cli("status", record_id)
    argv = _extra_calls(fake_kubectl)[0]
    tail = argv[argv.index("exec"):]
    # a one-pod job: by its Job (kubectl picks the running pod), so status can start the call beside its read
    assert tail == ["exec", "-n", "tao-jobs", f"job/{RUNNING_JOB['metadata']['name']}", "-c", "tao", "--",
                    "/bin/sh", "-c", execread.PROGRAM, "tao-progress", "/workspace/results/x"]
    assert "/workspace/results/x" not in execread.PROGRAM


def test_status_json_text_is_redacted_and_sanitized_before_it_is_read_and_shown(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    _, record_id = _launched()
    now = datetime.now(UTC).replace(microsecond=0)
    hostile = _status_json(now) + _line(now, message="\x1b]0;owned\x07 api_key: sk-live-0123456789abcdefghij",
                                        kpi={"val_mAP": 0.377})
    fake_kubectl.on("get", "jobs,pods", data=_list(RUNNING_JOB, *RUNNING_PODS))
    fake_kubectl.on("exec", stdout=_exec_answer(hostile, "/workspace/results/x/\x1b[2Jtrain/status.json"))
    code, out, _ = cli("status", record_id)
    assert code == 0 and "\x1b" not in out and "sk-live" not in out
    assert "epoch 12/80" in out


def test_a_stalled_run_is_warned_about_in_its_own_pace(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _, record_id = _launched()
    written = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=41)
    fake_kubectl.on("get", "jobs,pods", data=_list(RUNNING_JOB, *RUNNING_PODS))
    fake_kubectl.on("exec", stdout=_exec_answer(_status_json(written)))
    code, out, _ = cli("status", record_id)
    assert code == 0
    assert "Warning: no progress for 41m; epochs took ~5m" in out


def test_without_permission_to_exec_the_log_answers_and_says_so_once(cli: Any, fake_kubectl: FakeKubectl) -> None:
    store, record_id = _launched()
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000000000Z")
    bar = "Epoch 3:  45%|####5     | 450/1000 [01:02<01:16,  7.20it/s, v_num=0, train_loss=0.430]"
    fake_kubectl.on("get", "jobs,pods", data=_list(RUNNING_JOB, *RUNNING_PODS))
    fake_kubectl.on("exec", stderr=FORBIDDEN, rc=1)
    fake_kubectl.on("logs", stdout=f"{stamp} {bar}\n")
    code, out, _ = cli("status", record_id)
    assert code == 0
    assert [_verb(argv) for argv in _extra_calls(fake_kubectl)] == ["exec", "logs"]
    assert out.count("kubectl may not exec into pods (Forbidden)") == 1
    assert "Progress: epoch 4 45%" in out and f"(from log of pod {POD})" in out
    assert "Metrics: train_loss 0.43" in out
    logs = _extra_calls(fake_kubectl)[1]
    assert logs[logs.index("logs"):] == ["logs", "-n", "tao-jobs", POD, "-c", "tao", "--tail=100", "--timestamps"]
    assert store.get_extra(record_id)["progress_read"]["why"] == "forbidden"

    fake_kubectl.calls.clear()
    code, out, _ = cli("status", record_id)
    assert code == 0 and "Forbidden" not in out
    assert [_verb(argv) for argv in _extra_calls(fake_kubectl)] == ["logs"]  # one call, the log's


def test_a_job_without_status_json_reads_its_log_and_the_next_look_reads_only_the_log(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    store, record_id = _launched()
    fake_kubectl.on("get", "jobs,pods", data=_list(RUNNING_JOB, *RUNNING_PODS))
    fake_kubectl.on("exec", stdout="")  # the program found no status.json
    fake_kubectl.on("logs", stdout="{'loss': 0.43, 'grad_norm': 1.2, 'learning_rate': 4.5e-05, 'epoch': 1.5}\n")
    code, out, _ = cli("status", record_id)
    assert code == 0 and "Note:" not in out
    assert [_verb(argv) for argv in _extra_calls(fake_kubectl)] == ["exec", "logs"]
    assert "Metrics: loss 0.43" in out
    fake_kubectl.calls.clear()
    cli("status", record_id)
    assert [_verb(argv) for argv in _extra_calls(fake_kubectl)] == ["logs"]
    hint = store.get_extra(record_id)["progress_read"]
    assert hint["why"] == "no status.json"
    assert hint["retry_at"] > hint["at"]
    store.update_extra(record_id, progress_read={**hint, "retry_at": "2020-01-01T00:00:00Z"})  # time to try again
    fake_kubectl.calls.clear()
    cli("status", record_id)
    assert [_verb(argv) for argv in _extra_calls(fake_kubectl)] == ["exec", "logs"]


def test_a_failed_exec_reads_the_log_without_a_note_and_never_loses_what_status_json_said(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    store, record_id = _running_with_status_json(fake_kubectl)
    cli("status", record_id)
    fake_kubectl.rules.clear()
    gone = 'error: unable to upgrade connection: container not found ("tao")\n'
    bar = "Epoch 12: 100%|##########| 5/5 [00:06<00:00,  0.83it/s, v_num=0, train_loss=0.139]"
    fake_kubectl.on("get", "jobs,pods", data=_list(RUNNING_JOB, *RUNNING_PODS))
    fake_kubectl.on("exec", stderr=gone, rc=1)
    fake_kubectl.on("logs", stdout=bar + "\n")
    fake_kubectl.calls.clear()
    code, out, _ = cli("status", record_id)
    assert code == 0 and "Note:" not in out
    assert [_verb(argv) for argv in _extra_calls(fake_kubectl)] == ["exec", "logs"]
    assert "Progress: epoch 13/80 16%" in out  # the log's later epoch, status.json's number of epochs
    assert "Metrics: train_loss 0.139  val_loss 8.1  val_mAP 0.377" in out
    assert f"(from status.json {STATUS_JSON} in pod {POD} and the log of pod {POD})" in out
    hint = store.get_extra(record_id)["progress_read"]
    assert hint["why"] == "exec failed" and hint["retry_at"] > hint["at"]
    kept, _ = from_stored(store.get_extra(record_id)["progress"])
    assert kept is not None and (kept.epoch, kept.max_epoch) == (13, 80)


def test_a_pending_job_makes_no_progress_call_and_has_no_progress_key(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _, record_id = _launched()
    pending = json.loads(json.dumps(RUNNING_PODS))
    for pod in pending:
        pod["status"]["phase"] = "Pending"
        pod["status"].pop("containerStatuses", None)
    job = json.loads(json.dumps(RUNNING_JOB))
    job["status"].pop("ready", None)
    fake_kubectl.on("get", "jobs,pods", data=_list(job, *pending))
    code, out, _ = cli("status", record_id, "-o", "json")
    assert code == 0
    assert json.loads(out)["state"] == "PENDING" and "progress" not in json.loads(out)
    assert _extra_calls(fake_kubectl) == []


def test_json_carries_the_nine_progress_keys(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _, record_id = _launched()
    written = datetime.now(UTC).replace(microsecond=0)
    fake_kubectl.on("get", "jobs,pods", data=_list(RUNNING_JOB, *RUNNING_PODS))
    fake_kubectl.on("exec", stdout=_exec_answer(_status_json(written)))
    code, out, _ = cli("status", record_id, "-o", "json")
    assert code == 0
    progress = json.loads(out)["progress"]
    assert list(progress) == list(JSON_KEYS)
    assert progress == {"epoch": 12, "max_epoch": 80, "step": 450, "total_steps": 8000, "percent": 15.0,
                        "eta_seconds": 11550, "kpi": {"train_loss": 0.412, "val_loss": 8.1, "val_mAP": 0.377},
                        "updated": written.strftime("%Y-%m-%dT%H:%M:%SZ"), "source": "status.json"}


@pytest.mark.parametrize(("ran", "wait"), [(3, 15), (40, 40), (3600, 300), (None, 300)])
def test_without_status_json_exec_is_tried_again_after_as_long_as_rank_0_has_run(ran: int | None, wait: int) -> None:
    now = datetime(2026, 12, 6, 9, 0, 0, tzinfo=UTC)
    started = None if ran is None else (now - timedelta(seconds=ran)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert liveprogress.retry_after(started, now) == wait


# ------------------------------------------------------------------ after the job: the record answers


def _finished(store: RecordStore, record_id: str, progress: Progress, where: str) -> None:
    store.update_extra(record_id, progress=stored(progress, where))
    store.mark(record_id, "COMPLETE", message="done", source="poller")


FINAL = Progress(epoch=80, max_epoch=80, percent=100.0, kpi={"train_loss": 0.2, "val_mAP": 0.512},
                 updated="2026-12-06T09:14:58Z", source="status.json", epoch_seconds=300.0, state="succeeded")


def test_after_the_job_is_gone_status_shows_the_kept_progress_without_a_progress_call(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    store, record_id = _launched()
    _finished(store, record_id, FINAL, f"status.json {STATUS_JSON} in pod {POD}")
    fake_kubectl.on("get", "jobs,pods", data=_list())
    code, out, _ = cli("status", record_id)
    assert code == 0 and _extra_calls(fake_kubectl) == []
    assert out.splitlines()[1].split()[-4:] == ["epoch", "80/80", "100%", "-"]  # no ETA for a job that ended
    assert "Metrics: train_loss 0.2  val_mAP 0.512" in out
    assert f"(from status.json {STATUS_JSON} in pod {POD}, as last seen)" in out
    code, out, _ = cli("status", record_id, "-o", "json")
    assert json.loads(out)["progress"]["epoch"] == 80


def test_list_wide_shows_progress_and_the_main_kpi_from_the_records_alone(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    store, record_id = _launched()
    _finished(store, record_id, FINAL, "status.json")
    fake_kubectl.on("get", "--raw", data=_list())
    for _ in range(2):  # the index built, then read
        fake_kubectl.calls.clear()
        code, out, _ = cli("list", "-o", "wide")
        assert code == 0 and _extra_calls(fake_kubectl) == []
        header, row = out.splitlines()[:2]
        assert header.split()[-2:] == ["PROGRESS", "KPI"]
        assert row.split()[-5:] == ["epoch", "80/80", "100%", "val_mAP", "0.512"]


def test_the_ending_brings_the_kept_progress_up_to_date_from_rank_0s_last_lines(
    tao_env: Path, fake_kubectl: FakeKubectl
) -> None:
    complete = fixture_json("complete.job.json")
    pods = fixture_json("complete.pods.json")["items"]
    store, record_id = _launched(complete)
    kept = FINAL.replaced(epoch=2, max_epoch=3, percent=66.7, kpi={"train_loss": 0.5, "val_mAP": 0.3},
                          state="running")
    store.update_extra(record_id, progress=stored(kept, "status.json"))
    pod = pods[0]["metadata"]["name"]
    bar = "Epoch 2: 100%|##########| 5/5 [00:01<00:00,  4.90it/s, v_num=0, train_loss=0.210]"
    fake_kubectl.on("get", "jobs,pods", data=_list(complete, *pods))
    fake_kubectl.on("logs", stdout=f"[pod/{pod}/tao] {bar}\n[pod/{pod}/tao] Train finished\n")
    obs = tracking.observe(Kubectl(), store, tracking.load(store, record_id), server=SERVER)
    assert obs.state == "COMPLETE"
    progress, where = from_stored(store.get_extra(record_id)["progress"])
    assert progress is not None
    assert (progress.epoch, progress.max_epoch, progress.percent) == (3, 3, 100.0)
    assert progress.kpi == {"train_loss": 0.21, "val_mAP": 0.3}
    assert where == "status.json and the log of rank 0"
    assert [_verb(argv) for argv in _extra_calls(fake_kubectl)] == ["logs"]  # the history's own read


# ------------------------------------------------------------------ --watch / --wait


def test_watch_shows_the_progress_on_its_line_and_keeps_it(tao_env: Path, fake_kubectl: FakeKubectl) -> None:
    store, record_id = _launched()
    fake_kubectl.on("get", "jobs,pods", data=_list(RUNNING_JOB, *RUNNING_PODS))
    fake_kubectl.on("patch", stdout="job.batch/patched\n")
    fake_kubectl.on("exec", stdout=_exec_answer(_status_json(datetime.now(UTC).replace(microsecond=0))))
    out = io.StringIO()
    clock = iter(range(0, 100, 5))
    with pytest.raises(WaitTimeout):
        watch(Kubectl(), store, tracking.load(store, record_id), server=SERVER, dogs=Watchdogs(timeout=9, interval=0),
              out=out, tty=False, sleep=lambda _s: None, clock=lambda: float(next(clock)))
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and "RUNNING" in lines[0] and re.search(r"epoch 12/80 15%  ETA 3h1[12]m", lines[0])
    assert sum(1 for argv in fake_kubectl.argvs() if "exec" in argv) == 2  # one a poll
    assert store.get_extra(record_id)["progress"]["epoch"] == 12


# ------------------------------------------------------------------ the record's progress, read by any version


def test_the_kept_progress_reads_back_as_written() -> None:
    progress = FINAL.replaced(step=7, total_steps=9, eta_seconds=5, step_seconds=0.5,
                              kpi={"train_loss": 0.2, "nan_loss": float("nan")})
    back, where = from_stored(json.loads(json.dumps(stored(progress, "log of pod p"))))
    assert where == "log of pod p"
    assert back is not None and back.as_json() == progress.as_json()
    assert (back.epoch_seconds, back.step_seconds, back.state) == (300.0, 0.5, "succeeded")


@pytest.mark.parametrize("value", [
    None, [], "epoch 3", 7,
    {"epoch": "3", "max_epoch": True, "percent": "x", "kpi": ["a"], "updated": "yesterday", "source": "s3"},
    {"epoch": -1, "kpi": {"val_mAP": "0.5"}, "state": "RUNNING", "future_key": {"any": "thing"}},
])
def test_kept_progress_of_another_shape_reads_as_unknown_never_as_an_error(value: Any) -> None:
    progress, _ = from_stored(value)
    assert progress is None


def test_a_newer_versions_keys_are_passed_over() -> None:
    progress, _ = from_stored({"epoch": 3, "max_epoch": 9, "source": "log", "gpu_util": 0.9, "phase": "eval"})
    assert progress is not None and (progress.epoch, progress.max_epoch, progress.source) == (3, 9, "log")


def test_the_record_schema_takes_the_kept_progress_and_refuses_a_wrong_type(tao_env: Path) -> None:
    store, record_id = _launched()
    extra = store.update_extra(record_id, progress=stored(FINAL, "status.json"),
                               progress_read={"from": "log", "why": "forbidden", "at": "2026-12-06T09:14:58Z"})
    assert schema_errors(extra, "job-record-k8s") == []
    assert schema_errors({**extra, "progress": {"epoch": "12"}}, "job-record-k8s") != []


# ------------------------------------------------------------------ the program run in rank 0


SHELLS = [shell for shell in ("sh", "dash", "bash", "busybox") if shutil.which(shell)]


def _run_program(shell: str, results: Path, env: dict[str, str] | None = None) -> bytes:
    argv = [shutil.which(shell) or shell, *(["sh"] if shell == "busybox" else []), "-c", execread.PROGRAM,
            "tao-progress", str(results)]
    return subprocess.run(argv, capture_output=True, check=True, env=env or {"PATH": "/usr/bin:/bin"}).stdout


@pytest.mark.parametrize("shell", SHELLS)
def test_the_program_prints_the_newest_status_json_under_the_results_as_path_nul_tail(
    shell: str, tmp_path: Path
) -> None:
    results = tmp_path / "results with space;$(touch x)"
    (results / "evaluate").mkdir(parents=True)
    (results / "train").mkdir()
    old, new = results / "evaluate" / "status.json", results / "train" / "status.json"
    old.write_text('{"old": 1}\n')
    new.write_bytes(b"x" * 70000 + b'\n{"new": 1}\n')
    os.utime(old, (1_000_000_000, 1_000_000_000))
    out = _run_program(shell, results)
    path, nul, tail = out.partition(b"\0")
    assert nul and path.decode() == str(new)
    assert len(tail) == execread.STATUS_JSON_TAIL and tail.endswith(b'{"new": 1}\n')
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("shell", SHELLS)
def test_the_program_prints_nothing_without_status_json_and_prefers_tao_results_root(
    shell: str, tmp_path: Path
) -> None:
    assert _run_program(shell, tmp_path / "missing") == b""
    (tmp_path / "empty").mkdir()
    assert _run_program(shell, tmp_path / "empty") == b""
    root = tmp_path / "root" / "train"
    root.mkdir(parents=True)
    (root / "status.json").write_text("{}\n")
    out = _run_program(shell, tmp_path / "empty", {"PATH": "/usr/bin:/bin", "TAO_RESULTS_ROOT": str(tmp_path / "root")})
    assert out.partition(b"\0")[0].decode() == str(root / "status.json")
