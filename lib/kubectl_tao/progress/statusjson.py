"""TAO's `status.json`, read from the tail of the file: one JSON object a line, appended by the rank-0 process.

What TAO writes (nvidia_tao_pytorch/core/loggers/api_logging.py, nvidia_tao_core/loggers/logging.py): every line
has `date` ("M/D/YYYY", not zero-padded), `time` ("H:M:S", not zero-padded, the container's local time: UTC
unless the image sets TZ), `status` (STARTED, RUNNING, SUCCESS, FAILURE, SKIPPED) and `verbosity`; optionally
`message`, `categorical`, `graphical` and `kpi`. The logger keeps the last `kpi` it was given, so a metrics dict
repeats on every later line; each model replaces it whole (train metrics, then validation metrics), so the
reader keeps the last value of every metric seen. The file is `<results_dir>/status.json` of the task (the
workflow decorator sets the results directory to `<results>/<task>`, e.g. `<results>/train/status.json`).

The epoch lines come from the TAOStatusLogger callback (core/callbacks/loggers.py), in three forms:
- TAO 6: `epoch` is Lightning's current epoch (0-based), `max_epoch` is max_epochs - 1, with `step`,
  `max_step`, `time_per_step`;
- TAO 5.5: a 0-based counter, `max_epoch` the number of epochs (its first epoch line says `"epoch": 0`);
- TAO 5.0 and 5.2: a 1-based counter, `max_epoch` the number of epochs.
`time_per_epoch` and `eta` are `str(timedelta)` ("0:05:12.300000", "1 day, 2:03:04"). The workflow decorator
writes the lifecycle: STARTED "Starting <name> <mode>.", RUNNING "<Mode> finished successfully." at the end,
or a FAILURE line with the exception's text.

A tail may start in the middle of a line and end with a torn line (read while TAO appends): a line that is not
one whole JSON object is skipped."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from kubectl_tao.progress.model import (
    FAILED,
    RUNNING,
    SKIPPED,
    SOURCE_STATUS_JSON,
    STARTED,
    SUCCEEDED,
    Progress,
    percent_of,
    rfc3339,
)

MAX_LINE = 65536  # a longer line is not one TAO wrote: skipped unread
MAX_METRICS = 32  # metrics kept (the first seen)
MAX_METRIC_NAME = 64
MAX_MESSAGE = 300

_DATE = re.compile(r"([0-9]{1,2})/([0-9]{1,2})/([0-9]{4})")
_TIME = re.compile(r"([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})")
_TIMEDELTA = re.compile(r"(?:(-?[0-9]{1,9}) days?, )?([0-9]{1,9}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,6}))?")
_STATES = {"STARTED": STARTED, "RUNNING": RUNNING, "SUCCESS": SUCCEEDED, "FAILURE": FAILED, "SKIPPED": SKIPPED}
_FINISHED = re.compile(r"[A-Z][a-z_]{0,40} finished successfully\.")  # the workflow decorator's last line
_LIMIT = 10**9  # an epoch or step count past this is not one a program wrote


def timedelta_seconds(text: object) -> float | None:
    """Seconds of a `str(timedelta)` text ("0:05:12.300000", "2 days, 1:00:00"); None when it is not one.
    A negative duration reads as 0."""
    if not isinstance(text, str) or len(text) > 40:
        return None
    found = _TIMEDELTA.fullmatch(text.strip())
    if found is None:
        return None
    days, hours, minutes, seconds, fraction = found.groups()
    total = (int(days or 0) * 86400 + int(hours) * 3600 + int(minutes) * 60 + int(seconds)
             + (int(fraction.ljust(6, "0")) / 1e6 if fraction else 0.0))
    return max(0.0, total)


def line_time(date: object, time: object) -> str | None:
    """The RFC 3339 time of a line's `date` and `time` (read as UTC); None when either is not TAO's form."""
    if not isinstance(date, str) or not isinstance(time, str):
        return None
    day, clock = _DATE.fullmatch(date), _TIME.fullmatch(time)
    if day is None or clock is None:
        return None
    month, mday, year = (int(part) for part in day.groups())
    hour, minute, second = (int(part) for part in clock.groups())
    try:
        return rfc3339(datetime(year, month, mday, hour, minute, second, tzinfo=UTC))
    except ValueError:
        return None


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _LIMIT:
        return None
    return value


def metric_value(value: object) -> float | None:
    """A metric as a number: TAO writes floats, and some models `str(float)` ("0.377"); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:  # an integer past any float: a program's text, not a metric
            return None
    if isinstance(value, float):
        return value
    if isinstance(value, str) and 0 < len(value) <= 40:
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _merge_kpi(kept: dict[str, float], kpi: object) -> None:
    if not isinstance(kpi, dict):
        return
    for name, value in kpi.items():
        number = metric_value(value)
        if not isinstance(name, str) or not 0 < len(name) <= MAX_METRIC_NAME or number is None:
            continue
        if name in kept or len(kept) < MAX_METRICS:
            kept[name] = number


def _objects(text: str) -> list[dict[str, object]]:
    """The whole JSON objects of TEXT, one a line, in order; partial, torn, long and other lines skipped."""
    found = []
    for line in text.split("\n"):
        line = line.strip()
        if not line or len(line) > MAX_LINE or line[0] != "{" or line[-1] != "}":
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def read_status_json(text: str | bytes) -> Progress | None:
    """The progress a `status.json` tail shows; None when it holds no line TAO's logger would write."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    kpi: dict[str, float] = {}
    state: str | None = None
    message: str | None = None
    updated: str | None = None
    epoch_line: dict[str, object] | None = None
    zero_based = False
    seen = False
    for line in _objects(text):
        status = line.get("status")
        if not isinstance(status, str) or status not in _STATES:
            continue
        seen = True
        updated = line_time(line.get("date"), line.get("time")) or updated
        said = line.get("message")
        if isinstance(said, str) and said:
            message = said[:MAX_MESSAGE]
        new = _STATES[status]
        if new == RUNNING and isinstance(said, str) and _FINISHED.fullmatch(said):
            new = SUCCEEDED
        if new == STARTED or state not in (SUCCEEDED, FAILED) or new != RUNNING:
            state = new
        _merge_kpi(kpi, line.get("kpi"))
        if _count(line.get("epoch")) is not None and _count(line.get("max_epoch")) is not None:
            epoch_line = line
            zero_based = zero_based or (line.get("epoch") == 0 and "max_step" not in line)
    if not seen:
        return None
    progress = Progress(source=SOURCE_STATUS_JSON, kpi=kpi or None, updated=updated, state=state, message=message)
    if epoch_line is None:
        return progress
    epoch, max_epoch = _count(epoch_line["epoch"]) or 0, _count(epoch_line["max_epoch"]) or 0
    step, total_steps = _count(epoch_line.get("step")), _count(epoch_line.get("max_step"))
    if "max_step" in epoch_line:  # TAO 6: Lightning's 0-based epoch of max_epochs - 1
        epoch, max_epoch = epoch + 1, max_epoch + 1
    elif zero_based:  # TAO 5.5: a 0-based counter of max_epoch epochs
        epoch += 1
    eta = timedelta_seconds(epoch_line.get("eta"))
    return progress.replaced(
        epoch=epoch,
        max_epoch=max_epoch or None,
        step=step,
        total_steps=total_steps or None,
        percent=percent_of(epoch, max_epoch),
        eta_seconds=None if eta is None else round(eta),
        epoch_seconds=timedelta_seconds(epoch_line.get("time_per_epoch")) or None,
        step_seconds=timedelta_seconds(epoch_line.get("time_per_step")) or None,
    )
