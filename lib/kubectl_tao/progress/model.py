"""The Progress value both readers return, what `-o json` carries of it, its table cells (PROGRESS, ETA), the
one-line metrics summary and the stall warning.

A Progress counts as users do: `epoch` is the epoch reached (1-based; a TAO epoch line's epoch is finished),
`max_epoch` the number of epochs, `step` / `total_steps` the optimizer steps (or, from a Lightning epoch bar,
the batches of the current epoch), `percent` the share of the whole run when it is known, `eta_seconds` the
time left as the program last estimated it, `kpi` the last value of each metric it reported, `updated` when it
last wrote progress (RFC 3339, UTC; None when the text carries no time) and `source` where it was read
(`status.json` or `log`)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from kubectl_tao.core.ages import age_text
from kubectl_tao.core.valueclass import Value, record

SOURCE_STATUS_JSON = "status.json"
SOURCE_LOG = "log"

# What the program said of its own run (status.json's lifecycle lines): None where nothing was said.
STARTED, RUNNING, SUCCEEDED, FAILED, SKIPPED = "started", "running", "succeeded", "failed", "skipped"

JSON_KEYS = ("epoch", "max_epoch", "step", "total_steps", "percent", "eta_seconds", "kpi", "updated", "source")

# The stall warning: no progress for STALL_FACTOR times the program's own epoch (or step) time, and at least
# STALL_FLOOR_SECONDS (a checkpoint save or a validation pass between two lines is not a stall).
STALL_FACTOR = 3
STALL_FLOOR_SECONDS = 600
SUMMARY_METRICS = 4  # the metrics the one-line summary shows


@record
class Progress(Value):
    epoch: int | None = None
    max_epoch: int | None = None
    step: int | None = None
    total_steps: int | None = None
    percent: float | None = None
    eta_seconds: int | None = None
    kpi: dict[str, float] | None = None
    updated: str | None = None
    source: str = SOURCE_LOG
    epoch_seconds: float | None = None  # how long one epoch took (status.json's time_per_epoch, a bar's span)
    step_seconds: float | None = None  # how long one step took (a bar's elapsed time over its count)
    state: str | None = None  # STARTED ... SKIPPED, from the lifecycle lines
    message: str | None = None  # the last message status.json carried (a FAILURE line's exception)

    def as_json(self) -> dict[str, Any]:
        """The `progress` object of `-o json`: the nine keys, unknown ones null. A metric that is not a finite
        number (a NaN loss) is null there, as JSON has no such number; the metrics summary shows it as `nan`."""
        out = {key: getattr(self, key) for key in JSON_KEYS}
        out["kpi"] = {name: value if math.isfinite(value) else None for name, value in self.kpi.items()} \
            if self.kpi else None
        return out

    def known(self) -> bool:
        """Whether it says anything a user can read (no `progress` key at all otherwise)."""
        return any(getattr(self, key) is not None for key in JSON_KEYS if key != "source") or bool(self.kpi)


def percent_of(done: float, total: float) -> float | None:
    """DONE of TOTAL in per cent, one decimal, clamped to 0..100; None without a positive total."""
    if total <= 0:
        return None
    return round(min(100.0, max(0.0, done * 100.0 / total)), 1)


def progress_cell(progress: Progress | None) -> str:
    """The PROGRESS column: `epoch 12/80 15%`, `step 450/1000 45%`, `epoch 4 45%`; empty when nothing is known."""
    if progress is None:
        return ""
    parts: list[str] = []
    if progress.epoch is not None:
        parts.append(f"epoch {progress.epoch}" + (f"/{progress.max_epoch}" if progress.max_epoch else ""))
    elif progress.step is not None:
        parts.append(f"step {progress.step}" + (f"/{progress.total_steps}" if progress.total_steps else ""))
    if progress.percent is not None:
        parts.append(f"{progress.percent:.0f}%")
    return " ".join(parts)


def duration_text(seconds: float) -> str:
    """A duration as the ETA column shows it: 45s, 12m, 3h12m, 2d5h."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        hours, minutes = divmod(seconds // 60, 60)
        return f"{hours}h{minutes:02d}m" if minutes else f"{hours}h"
    days, hours = divmod(seconds // 3600, 24)
    return f"{days}d{hours}h" if hours else f"{days}d"


def _parse_updated(updated: str | None) -> datetime | None:
    if not updated:
        return None
    try:
        return datetime.fromisoformat(updated.replace("Z", "+00:00"))
    except ValueError:
        return None


def eta_cell(progress: Progress | None, now: datetime | None = None) -> str:
    """The ETA column: the program's own estimate, less the time since it was written when NOW is given and
    the estimate carries a time; empty when unknown or the run said it ended."""
    if progress is None or progress.eta_seconds is None or progress.state in (SUCCEEDED, FAILED, SKIPPED):
        return ""
    left = float(progress.eta_seconds)
    written = _parse_updated(progress.updated)
    if now is not None and written is not None:
        left -= max(0.0, (now - written).total_seconds())
    return duration_text(max(0.0, left))


def _number_text(value: float) -> str:
    if not math.isfinite(value):  # nan, inf: as Python prints them
        return str(value)
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    if 1e-3 <= abs(value) < 1e5:
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return f"{value:.3g}"


def metrics_summary(progress: Progress | None, limit: int = SUMMARY_METRICS) -> str:
    """The last metrics on one line: `train_loss 0.412  val_mAP 0.377` (the first LIMIT, as reported)."""
    if progress is None or not progress.kpi:
        return ""
    return "  ".join(f"{name} {_number_text(value)}" for name, value in list(progress.kpi.items())[:limit])


def stall_warning(progress: Progress | None, now: datetime) -> str | None:
    """`no progress for 41m; epochs took ~5m` when the last progress is older than STALL_FACTOR times the
    run's own epoch time (its step time when no epoch time is known) and at least STALL_FLOOR_SECONDS; None
    when it is not, when the run said it ended, or when the text gave no time or no pace to judge by."""
    if progress is None or progress.state in (SUCCEEDED, FAILED, SKIPPED):
        return None
    written = _parse_updated(progress.updated)
    if written is None:
        return None
    if progress.epoch_seconds:
        unit, label = progress.epoch_seconds, "epochs"
    elif progress.step_seconds:
        unit, label = progress.step_seconds, "steps"
    else:
        return None
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    silent = (now - written).total_seconds()
    if silent < max(STALL_FACTOR * unit, STALL_FLOOR_SECONDS):
        return None
    return f"no progress for {age_text(silent)}; {label} took ~{duration_text(unit)}"


def rfc3339(moment: datetime) -> str:
    """MOMENT (UTC when naive) as RFC 3339 with a Z, to the second."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# What a record keeps of a job's progress (the `progress` of its kubectl-tao data): the `-o json` keys, what the
# stall warning and the ETA need, and where the progress was read.
STORED_EXTRA = ("epoch_seconds", "step_seconds", "state", "where")
_COUNTS = ("epoch", "max_epoch", "step", "total_steps", "eta_seconds")
_SECONDS = ("percent", "epoch_seconds", "step_seconds")
_STATES = (STARTED, RUNNING, SUCCEEDED, FAILED, SKIPPED)
MAX_WHERE = 300


def stored(progress: Progress, where: str | None = None) -> dict[str, Any]:
    """PROGRESS as the record keeps it: the `-o json` keys, the epoch and step times, the program's own state
    and WHERE it was read (`status.json <path>`, `log of pod <name>`)."""
    out = progress.as_json()
    out.update(epoch_seconds=progress.epoch_seconds, step_seconds=progress.step_seconds, state=progress.state,
               where=where[:MAX_WHERE] if where else None)
    return out


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def from_stored(value: object) -> tuple[Progress | None, str | None]:
    """(the Progress, where it was read) of what a record keeps; (None, None) for anything else. Tolerant of
    records written by other versions: unknown keys are passed over, a key of the wrong type reads as unknown."""
    if not isinstance(value, dict):
        return None, None
    fields: dict[str, Any] = {}
    for key in _COUNTS:
        number = value.get(key)
        if isinstance(number, int) and not isinstance(number, bool) and number >= 0:
            fields[key] = number
    for key in _SECONDS:
        number = _finite(value.get(key))
        if number is not None and number >= 0:
            fields[key] = number
    kpi = value.get("kpi")
    if isinstance(kpi, dict):
        kept: dict[str, float] = {}
        for name, number in list(kpi.items())[:64]:
            finite = _finite(number)
            if isinstance(name, str) and (number is None or finite is not None):
                kept[name] = float("nan") if finite is None else finite  # null: a NaN the program reported
        fields["kpi"] = kept or None
    if isinstance(value.get("updated"), str) and _parse_updated(value["updated"]) is not None:
        fields["updated"] = value["updated"]
    if value.get("source") in (SOURCE_STATUS_JSON, SOURCE_LOG):
        fields["source"] = value["source"]
    if value.get("state") in _STATES:
        fields["state"] = value["state"]
    progress = Progress(**fields)
    where = value.get("where")
    return (progress if progress.known() else None), (where[:MAX_WHERE] if isinstance(where, str) else None)


def main_kpi(progress: Progress | None) -> str:
    """The metric `list -o wide` shows: the last validation metric reported (`val_...`), else the first metric;
    `val_mAP 0.512`; empty when there is none."""
    if progress is None or not progress.kpi:
        return ""
    names = list(progress.kpi)
    validation = [name for name in names if name.startswith("val")]
    name = validation[-1] if validation else names[0]
    return f"{name} {_number_text(progress.kpi[name])}"


def final(kept: Progress | None, log: Progress | None) -> Progress | None:
    """The progress a record keeps when its job ends: what was last read while it ran (KEPT), brought up to
    date by the end of rank 0's log (LOG) when the log shows a later epoch or step: the count, the percentage and
    the metrics it shows replace the kept ones, the number of epochs (or steps) is kept."""
    if kept is None:
        return log
    if log is None:
        return kept
    later_epoch = log.epoch is not None and (kept.epoch is None or log.epoch > kept.epoch)
    later_step = log.epoch is None and log.step is not None and kept.epoch is None and (
        kept.step is None or log.step > kept.step)
    if not (later_epoch or later_step):
        return kept
    total = kept.max_epoch if later_epoch else kept.total_steps
    done = log.epoch if later_epoch else log.step
    percent = percent_of(done, total) if total and done is not None else log.percent
    kpi = {**(kept.kpi or {}), **(log.kpi or {})} or None
    if later_epoch:
        return kept.replaced(epoch=log.epoch, max_epoch=kept.max_epoch or log.max_epoch, step=None, total_steps=None,
                             percent=percent, kpi=kpi, eta_seconds=None, updated=log.updated or kept.updated)
    return kept.replaced(step=log.step, total_steps=kept.total_steps or log.total_steps, percent=percent, kpi=kpi,
                         eta_seconds=None, updated=log.updated or kept.updated)
