"""TAO's status.json tail -> Progress: the three forms of its epoch lines, the lifecycle, the repeated kpi,
torn and partial lines, hostile text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubectl_tao.progress.model import FAILED, RUNNING, STARTED, SUCCEEDED, Progress
from kubectl_tao.progress.statusjson import MAX_METRICS, read_status_json, timedelta_seconds

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "progress"
DINO = (FIXTURES / "status-tao6-dino.json").read_text(encoding="utf-8")


def line(**data: object) -> str:
    """A line as TAO's StatusLogger writes it: the data, then the generic keys, then message and kpi."""
    kpi = data.pop("kpi", None)
    message = data.pop("message", None)
    out = {**data, "date": data.pop("date", "3/7/2024"), "time": data.pop("time", "14:5:9"),
           "status": data.pop("status", "RUNNING"), "verbosity": "INFO"}
    if message:
        out["message"] = message
    if kpi:
        out["kpi"] = kpi
    return json.dumps(out) + "\n"


def test_a_tao6_train_task_reads_as_epoch_of_epochs_with_steps_eta_and_every_metric() -> None:
    progress = read_status_json(DINO)
    assert progress == Progress(
        epoch=2, max_epoch=80, step=1000, total_steps=40000, percent=2.5, eta_seconds=24481,
        kpi={"val_mAP": 0.3771, "val_mAP50": 0.5902, "val_loss": 8.113, "train_loss": 0.412},
        updated="2026-12-06T09:14:58Z", source="status.json", epoch_seconds=313.9, step_seconds=0.6262,
        state=RUNNING, message="Train metrics generated.")


def test_the_json_shape_holds_the_nine_keys() -> None:
    progress = read_status_json(DINO)
    assert progress is not None
    assert progress.as_json() == {
        "epoch": 2, "max_epoch": 80, "step": 1000, "total_steps": 40000, "percent": 2.5, "eta_seconds": 24481,
        "kpi": {"val_mAP": 0.3771, "val_mAP50": 0.5902, "val_loss": 8.113, "train_loss": 0.412},
        "updated": "2026-12-06T09:14:58Z", "source": "status.json"}


def test_tao_5_2_counts_epochs_from_one() -> None:
    text = line(epoch=12, max_epoch=80, time_per_epoch="0:05:00", eta="5:40:00", message="Training loop in progress")
    progress = read_status_json(text)
    assert progress is not None
    assert (progress.epoch, progress.max_epoch, progress.percent, progress.eta_seconds) == (12, 80, 15.0, 20400)
    assert progress.step is None and progress.total_steps is None


def test_tao_5_5_counts_from_zero_once_its_first_epoch_line_is_in_the_tail() -> None:
    first = line(epoch=0, max_epoch=10, time_per_epoch="0:01:00", eta="0:10:00")
    second = line(epoch=1, max_epoch=10, time_per_epoch="0:01:00", eta="0:09:00")
    progress = read_status_json(first + second)
    assert progress is not None and (progress.epoch, progress.max_epoch, progress.percent) == (2, 10, 20.0)


@pytest.mark.parametrize(("lines", "state", "message"), [
    ([line(status="STARTED", message="Starting DINO train.")], STARTED, "Starting DINO train."),
    ([line(message="Training loop complete."), line(message="Train finished successfully.")], SUCCEEDED,
     "Train finished successfully."),
    ([line(message="Train finished successfully."),
      line(message="Job artifacts in results dir are being uploaded to the cloud")], SUCCEEDED,
     "Job artifacts in results dir are being uploaded to the cloud"),
    ([line(status="SUCCESS", message="Export finished.")], SUCCEEDED, "Export finished."),
    ([line(status="FAILURE", message="CUDA out of memory. Tried to allocate 2.00 GiB")], FAILED,
     "CUDA out of memory. Tried to allocate 2.00 GiB"),
    ([line(status="FAILURE", message="Train was interrupted"), line(status="STARTED", message="Starting DINO train.")],
     STARTED, "Starting DINO train."),
])
def test_the_lifecycle_lines_say_how_the_run_stands(lines: list[str], state: str, message: str) -> None:
    progress = read_status_json("".join(lines))
    assert progress is not None and (progress.state, progress.message) == (state, message)


def test_a_tail_that_starts_mid_line_and_ends_in_a_torn_line_reads_its_whole_lines() -> None:
    whole = DINO.splitlines(keepends=True)
    expected = read_status_json("".join(whole[1:-1]))
    first_cut = len(whole[0])
    last_start = len(DINO) - len(whole[-1])
    for start in range(1, first_cut, 7):
        for end in range(last_start + 1, len(DINO) - 1, 11):
            assert read_status_json(DINO[start:end]) == expected, (start, end)


def test_the_last_kpi_repeats_and_the_newest_value_of_each_metric_wins() -> None:
    text = (line(message="Eval metrics generated.", kpi={"val_mAP": "0.1"})
            + line(message="Training loop in progress", kpi={"val_mAP": "0.1"}, epoch=1, max_epoch=5)
            + line(message="Train metrics generated.", kpi={"train_loss": 0.9})
            + line(message="Eval metrics generated.", kpi={"val_mAP": "0.2"}))
    progress = read_status_json(text)
    assert progress is not None and progress.kpi == {"val_mAP": 0.2, "train_loss": 0.9}


def test_metrics_that_are_not_numbers_are_left_out_and_their_count_is_bounded() -> None:
    kpi = {"Mean IOU": 0.61, "note": "n/a", "flag": True, "": 1.0, "x" * 65: 1.0, "nested": {"a": 1}}
    progress = read_status_json(line(kpi=kpi) + line(kpi={f"m{i}": i for i in range(100)}))
    assert progress is not None and progress.kpi is not None
    assert list(progress.kpi)[:1] == ["Mean IOU"] and len(progress.kpi) == MAX_METRICS


@pytest.mark.parametrize(("text", "seconds"), [
    ("0:05:12.300000", 312.3), ("6:51:21.700000", 24681.7), ("1 day, 2:03:04.500000", 93784.5),
    ("3 days, 0:00:00", 259200.0), ("-1 day, 23:59:59", 0.0), ("0:00:00", 0.0),
])
def test_durations_read_as_python_prints_a_timedelta(text: str, seconds: float) -> None:
    assert timedelta_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["5:12", "1:2:3:4", "", "0:05:12.3000001", 312, None, "9" * 100])
def test_other_durations_are_unknown(text: object) -> None:
    assert timedelta_seconds(text) is None


HOSTILE = [
    "9" * 5_000_000,  # one 5 MB line of digits
    "{" + '"a": ' * 10 + "1" + "}" * 10,  # not JSON
    "[" * 100_000 + "]" * 100_000,  # deep nesting
    '{"status": "RUNNING", "date": "' + "\x1b[31m" * 1000 + '"}',
    '{"epoch": true, "max_epoch": 10, "status": "RUNNING", "date": "1/1/2024", "time": "1:1:1"}',
    '{"epoch": 1e400, "max_epoch": 99999999999999, "status": "RUNNING"}',
    '{"status": "BOGUS", "epoch": 3, "max_epoch": 10}',
    "\x00\x01\x02 \r\r\r " * 1000,
]


@pytest.mark.parametrize("hostile", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_lines_are_skipped_and_the_rest_is_read(hostile: str) -> None:
    good = line(epoch=4, max_epoch=8, eta="0:10:00", time_per_epoch="0:02:30")
    progress = read_status_json(hostile + "\n" + good + hostile)
    assert progress is not None and (progress.epoch, progress.max_epoch, progress.eta_seconds) == (4, 8, 600)
    alone = read_status_json(hostile)
    assert alone is None or (alone.epoch is None and alone.kpi is None)


def test_invalid_utf8_bytes_are_read_around() -> None:
    good = line(epoch=2, max_epoch=4, kpi={"train_loss": 0.5}).encode()
    progress = read_status_json(b"\xff\xfe\xc3(" * 1000 + b"\n" + good + b"\x80\x81")
    assert progress is not None and (progress.epoch, progress.kpi) == (2, {"train_loss": 0.5})


def test_bad_dates_leave_the_time_unknown() -> None:
    progress = read_status_json(line(date="13/45/2024", time="25:61:61") + line(date="2024-01-01", time="1:2:3"))
    assert progress is not None and progress.updated is None


def test_text_with_no_status_line_reads_as_nothing() -> None:
    assert read_status_json("") is None
    assert read_status_json('{"loss": 1}\n{"epoch": 1, "max_epoch": 2}\n') is None


def test_a_metric_past_any_float_is_unknown_not_a_crash() -> None:
    line = ('{"date": "12/6/2026", "time": "9:9:44", "status": "RUNNING", "verbosity": "INFO", "epoch": 3, '
            '"max_epoch": 9, "kpi": {"val_mAP": ' + "9" * 400 + ', "train_loss": 0.5}}\n')
    found = read_status_json(line)
    assert found is not None and found.epoch == 3 and found.kpi == {"train_loss": 0.5}
