"""Printing data the way kubectl does: tables with upper-case headers, or -o json|yaml|name|wide.

Everything printed here goes through core/sanitize.py: text from the cluster, records, logs and kubectl cannot
move the cursor, retitle the window or reorder what is shown (`logs --raw` is the one way around it). JSON escapes
every control character itself (and -o yaml is written with non-ASCII characters escaped), so what -o json|yaml
print is unchanged by it and parses back to the same values.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from kubectl_tao.core.errors import UsageError
from kubectl_tao.core.sanitize import sanitize

FORMATS = ("table", "wide", "json", "yaml", "name")


def check_format(value: str | None, allowed: Sequence[str] = FORMATS) -> str:
    """The -o value, lower-cased; ALLOWED: the verb's formats, its default first ("table" is the verb's own
    printout, which -o need not name)."""
    fmt = (value or allowed[0]).lower()
    if fmt not in allowed:
        named = ", ".join(name for name in allowed if name != "table")
        raise UsageError(f"-o/--output: unknown format {value!r}; use one of {named}")
    return fmt


def table(rows: Iterable[Sequence[Any]], headers: Sequence[str], *, no_headers: bool = False) -> str:
    """Left-aligned columns separated by three spaces, like `kubectl get`; each cell on one line."""
    body = [["" if cell is None else sanitize(str(cell)) for cell in row] for row in rows]
    grid = body if no_headers else [[h.upper() for h in headers], *body]
    if not grid:
        return ""
    widths = [max(len(row[i]) for row in grid) for i in range(len(headers))]
    lines = ["   ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in grid]
    return "\n".join(lines) + "\n"


def as_list(items: list[Any]) -> dict[str, Any]:
    """Several objects as one, the v1 List `kubectl get -o json|yaml` prints."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


def dump_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


def dump_yaml(data: Any) -> str:
    """Block YAML that a YAML 1.1 reader (Kubernetes) reads back as the same data (manifests/yamltext.py)."""
    from kubectl_tao.manifests.yamltext import dumps

    return dumps(data)


def emit_data(fmt: str, data: Any) -> bool:
    """Print `data` for -o json|yaml; False for any other format (the caller prints its own)."""
    if fmt == "json":
        emit(dump_json(data))
    elif fmt == "yaml":
        emit(dump_yaml(data))
    else:
        return False
    return True


def emit(text: str, stream: TextIO | None = None) -> None:
    out = stream or sys.stdout
    out.write(sanitize(text, multiline=True))
    out.flush()


def emit_raw(text: str, *, flush: bool = False) -> None:
    """TEXT as it is, for `logs --raw` only: the user asked for what kubectl printed."""
    sys.stdout.write(text)
    if flush:
        sys.stdout.flush()


def log_line(line: str, *, flush: bool = False) -> None:
    """One line of a job's log: credentials redacted (through colour codes and other sequences), then
    sanitized; the same for a live log and for the tail a record captured."""
    from kubectl_tao.core.redact import redact_log_line

    sys.stdout.write(sanitize(redact_log_line(line.removesuffix("\r")), multiline=True) + "\n")
    if flush:
        sys.stdout.flush()


def info(message: str) -> None:
    """Diagnostics and progress go to stderr so stdout stays parseable."""
    sys.stderr.write(sanitize(message.rstrip("\n"), multiline=True) + "\n")
    sys.stderr.flush()
