"""The TOML document of an action request's mode=config spec, laid out byte for byte as the reference renderer
writes it (the same spec gets the same sha256 name, and so the same file, from either tool)."""

from __future__ import annotations

import math
import re
from typing import Any

from kubectl_tao.core.errors import UsageError

_BARE_TOML_KEY = re.compile(r"[A-Za-z0-9_-]+")
_INT64 = (-(2**63), 2**63 - 1)


def _toml_string(text: str) -> str:
    """A TOML basic string, byte for byte what the reference renderer writes (JSON-style escapes, non-ASCII
    as \\uXXXX) wherever that is valid TOML; DEL and characters beyond U+FFFF, which it would write as
    invalid TOML (a raw DEL, a surrogate pair), are written validly instead (\\u007f, the character itself)."""
    escapes = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
    out = []
    for ch in text:
        code = ord(ch)
        if ch in escapes:
            out.append(escapes[ch])
        elif 0xD800 <= code <= 0xDFFF:
            raise UsageError("spec_bundle.spec holds a string with a lone surrogate; TOML cannot encode it")
        elif code < 0x20 or 0x7F <= code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _toml_key(key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise UsageError(f"spec_bundle.spec has key {key!r}; TOML keys must be non-empty strings")
    return key if _BARE_TOML_KEY.fullmatch(key) else _toml_string(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise UsageError(f"spec_bundle.spec integer {value} does not fit TOML's 64-bit integers")
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UsageError("spec_bundle.spec numbers must be finite for TOML")
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        pairs = (f"{_toml_key(key)} = {_toml_value(value[key])}" for key in sorted(value))
        return "{ " + ", ".join(pairs) + " }"  # an empty table is "{  }", as the reference writes it
    raise UsageError(f"spec_bundle.spec holds {type(value).__name__} (null?), which TOML cannot represent")


def toml_dumps(spec: dict[str, Any]) -> str:
    """A TOML document for a nested mapping, laid out as the reference renderer lays it out (so the same spec
    gets the same sha256 name from either tool): sorted keys, a table's scalars first, then each sub-table
    as a [dotted.header] section; sections apart by one blank line, except that a header is followed at once
    by the first sub-table header of a table with no scalars of its own."""
    return _toml_table(spec, ()) + "\n"


def _toml_table(table: dict[str, Any], path: tuple[str, ...]) -> str:
    keys = sorted(table, key=str)
    scalars = [f"{_toml_key(key)} = {_toml_value(table[key])}" for key in keys if not isinstance(table[key], dict)]
    sections = ["\n".join(scalars)] if scalars else []
    for key in keys:
        if isinstance(table[key], dict):
            sub_path = (*path, _toml_key(key))
            body = _toml_table(table[key], sub_path)
            sections.append("[" + ".".join(sub_path) + "]" + (f"\n{body}" if body else ""))
    return "\n\n".join(sections)
