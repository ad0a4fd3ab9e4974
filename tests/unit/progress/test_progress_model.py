"""The Progress value's cells, metrics summary and stall warning."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kubectl_tao.progress.model import (
    FAILED,
    SUCCEEDED,
    Progress,
    duration_text,
    eta_cell,
    metrics_summary,
    percent_of,
    progress_cell,
    stall_warning,
)

WRITTEN = "2026-12-06T09:00:00Z"


def at(minutes: float) -> datetime:
    return datetime(2026, 12, 6, 9, 0, tzinfo=UTC) + timedelta(minutes=minutes)


@pytest.mark.parametrize(("progress", "cell"), [
    (Progress(epoch=12, max_epoch=80, percent=15.0), "epoch 12/80 15%"),
    (Progress(step=450, total_steps=1000, percent=45.0), "step 450/1000 45%"),
    (Progress(epoch=4, step=450, total_steps=1000, percent=45.0), "epoch 4 45%"),
    (Progress(step=450), "step 450"),
    (Progress(kpi={"loss": 1.0}), ""),
    (None, ""),
])
def test_the_progress_cell(progress: Progress | None, cell: str) -> None:
    assert progress_cell(progress) == cell


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (59, "59s"), (60, "1m"), (3599, "59m"), (3600, "1h"),
                                               (11520, "3h12m"), (86400, "1d"), (190000, "2d4h"), (-5, "0s")])
def test_durations_as_the_eta_column_shows_them(seconds: int, text: str) -> None:
    assert duration_text(seconds) == text


def test_the_eta_cell_counts_down_from_when_it_was_written() -> None:
    progress = Progress(eta_seconds=11520, updated=WRITTEN)
    assert eta_cell(progress) == "3h12m"
    assert eta_cell(progress, at(60)) == "2h12m"
    assert eta_cell(progress, at(600)) == "0s"
    assert eta_cell(Progress(eta_seconds=600), at(60)) == "10m"  # no time written: as estimated
    assert eta_cell(progress.replaced(state=SUCCEEDED)) == "" and eta_cell(Progress()) == "" and eta_cell(None) == ""


def test_the_metrics_summary_shows_the_first_metrics_as_reported() -> None:
    progress = Progress(kpi={"train_loss": 0.41234, "val_mAP": 0.377, "epoch_count": 3.0, "lr": 4.5e-05,
                             "val_loss": float("nan")})
    assert metrics_summary(progress) == "train_loss 0.412  val_mAP 0.377  epoch_count 3  lr 4.5e-05"
    assert metrics_summary(progress, limit=5).endswith("lr 4.5e-05  val_loss nan")
    assert metrics_summary(Progress()) == "" and metrics_summary(None) == ""


def test_percent_is_clamped_and_needs_a_total() -> None:
    assert (percent_of(12, 80), percent_of(5, 4), percent_of(-1, 4), percent_of(1, 0)) == (15.0, 100.0, 0.0, None)


def test_no_progress_for_three_epochs_warns() -> None:
    progress = Progress(epoch=12, max_epoch=80, updated=WRITTEN, epoch_seconds=300)
    assert stall_warning(progress, at(14)) is None
    assert stall_warning(progress, at(41)) == "no progress for 41m; epochs took ~5m"
    assert stall_warning(progress, at(41).replace(tzinfo=None)) == "no progress for 41m; epochs took ~5m"


def test_short_epochs_wait_for_the_floor_and_steps_stand_in_for_epochs() -> None:
    quick = Progress(step=10, total_steps=100, updated=WRITTEN, step_seconds=2.0)
    assert stall_warning(quick, at(9)) is None
    assert stall_warning(quick, at(10)) == "no progress for 10m; steps took ~2s"


@pytest.mark.parametrize("progress", [
    Progress(epoch=80, max_epoch=80, updated=WRITTEN, epoch_seconds=300, state=SUCCEEDED),
    Progress(epoch=3, updated=WRITTEN, epoch_seconds=300, state=FAILED),
    Progress(epoch=3, epoch_seconds=300),  # no time written
    Progress(epoch=3, updated=WRITTEN),  # no pace to judge by
    Progress(epoch=3, updated="not a time", epoch_seconds=300),
    None,
])
def test_no_stall_warning_without_a_time_a_pace_or_a_running_program(progress: Progress | None) -> None:
    assert stall_warning(progress, at(600)) is None


def test_progress_is_known_when_any_value_is() -> None:
    assert not Progress().known() and Progress(kpi={"loss": 1.0}).known() and Progress(epoch=1).known()


def test_a_metric_that_is_not_a_number_is_null_in_json_and_nan_in_the_summary() -> None:
    progress = Progress(kpi={"loss": float("nan"), "grad": float("inf"), "val_loss": 0.5})
    assert progress.as_json()["kpi"] == {"loss": None, "grad": None, "val_loss": 0.5}
    assert metrics_summary(progress) == "loss nan  grad inf  val_loss 0.5"
    assert Progress().as_json() == dict.fromkeys(
        ("epoch", "max_epoch", "step", "total_steps", "percent", "eta_seconds", "kpi", "updated"), None) | {
        "source": "log"}
