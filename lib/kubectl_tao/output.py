"""Printing data the way kubectl does: tables with upper-case headers, or -o json|yaml|name|wide."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from kubectl_tao.errors import UsageError

FORMATS = ("table", "wide", "json", "yaml", "name")
_STAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}")


def check_format(value: str | None, allowed: Sequence[str] = FORMATS) -> str:
    fmt = (value or "table").lower()
    if fmt not in allowed:
        raise UsageError(f"-o/--output: unknown format {value!r}; use one of {', '.join(allowed[1:])}")
    return fmt


def table(rows: Iterable[Sequence[Any]], headers: Sequence[str], *, no_headers: bool = False) -> str:
    """Left-aligned columns separated by three spaces, like `kubectl get`."""
    body = [["" if cell is None else str(cell) for cell in row] for row in rows]
    grid = body if no_headers else [[h.upper() for h in headers], *body]
    if not grid:
        return ""
    widths = [max(len(row[i]) for row in grid) for i in range(len(headers))]
    lines = ["   ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in grid]
    return "\n".join(lines) + "\n"


def dump_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


def dump_yaml(data: Any) -> str:
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    buffer = io.StringIO()
    yaml.dump(data, buffer)
    return buffer.getvalue()


def emit_data(fmt: str, data: Any) -> bool:
    """Print `data` for -o json|yaml; False for any other format (the caller prints its own)."""
    if fmt == "json":
        emit(dump_json(data))
    elif fmt == "yaml":
        emit(dump_yaml(data))
    else:
        return False
    return True


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


def emit(text: str, stream: TextIO | None = None) -> None:
    out = stream or sys.stdout
    out.write(text)
    out.flush()


def info(message: str) -> None:
    """Diagnostics and progress go to stderr so stdout stays parseable."""
    sys.stderr.write(message.rstrip("\n") + "\n")
    sys.stderr.flush()
