"""JSON Schema (draft 2020-12) validation of kubectl-tao's file formats.

Schemas live in schemas/<name>.schema.json. Errors are UsageError with one line: the document, the
JSON path of the most relevant error (`jsonschema.exceptions.best_match`) and what is wrong there.
A subschema that forbids something carries a "description" saying why; that description is the
message when the subschema is a `not` that failed.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from kubectl_tao.core.errors import TaoError, UsageError

_SUFFIX = ".schema.json"
_MAX_MESSAGE = 300


def schema_path(name: str) -> Path:
    """schemas/<name>.schema.json of the checkout, else of the installed data (like templates)."""
    from kubectl_tao.core.templates import data_dir

    base = name[: -len(_SUFFIX)] if name.endswith(_SUFFIX) else name
    if not base or "/" in base or base.startswith("."):
        raise TaoError(f"schema name {name!r} must be a file name inside schemas/")
    return data_dir("schemas") / f"{base}{_SUFFIX}"


@lru_cache(maxsize=16)
def load_schema(name: str) -> dict[str, Any]:
    path = schema_path(name)
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TaoError(f"cannot load schema {path}: {exc}") from exc
    if not isinstance(schema, dict):
        raise TaoError(f"schema {path} is not a JSON object")
    return schema


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _MAX_MESSAGE else flat[: _MAX_MESSAGE - 3] + "..."


def _message(error: Any) -> str:
    schema = error.schema
    if error.validator == "not" and isinstance(schema, dict) and schema.get("description"):
        return str(schema["description"])
    return str(error.message)


def validate(instance: Any, schema_name: str, *, what: str | None = None) -> None:
    """Raise UsageError `<what> <json path>: <message>` unless `instance` is valid."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    schema = load_schema(schema_name)
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    error = best_match(validator.iter_errors(instance))
    if error is None:
        return
    label = what or str(schema.get("title") or schema_name)
    raise UsageError(_one_line(f"{label} {error.json_path}: {_message(error)}"))


def is_valid(instance: Any, schema_name: str) -> bool:
    try:
        validate(instance, schema_name)
    except UsageError:
        return False
    return True
