"""kubectl-style ages: 45s, 12m, 5h, 3d."""

from __future__ import annotations

import re
from datetime import UTC, datetime

_STAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}")


def age_text(seconds: float) -> str:
    """kubectl-style age of a duration: 45s, 12m, 5h, 3d."""
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def age(timestamp: str | None, now: datetime | None = None) -> str:
    """kubectl-style age of a UTC timestamp (ISO 8601); <unknown> when there is none."""
    if not timestamp:
        return "<unknown>"
    try:
        if _STAMP.match(timestamp):  # the usual form, without strptime (its import and parse, once per row)
            ts = timestamp
            then = datetime(int(ts[:4]), int(ts[5:7]), int(ts[8:10]), int(ts[11:13]), int(ts[14:16]),
                            int(ts[17:19]), tzinfo=UTC)
        else:
            then = datetime.strptime(timestamp.replace("Z", "+0000")[:19] + "+0000", "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        return "<unknown>"
    return age_text(((now or datetime.now(UTC)) - then).total_seconds())
