"""The block-style YAML that kubectl writes (kubeconfig files), read without ruamel.yaml (pure).

Importing ruamel.yaml and parsing a kubeconfig with its pure-Python loader cost `kubectl tao status` about
as much as its one kubectl call's start. This reads only a strict subset whose meaning is plain: block
mappings and sequences indented with spaces, keys of letters, digits and `-_./`, plain scalars that are
strings (or null/true/false), quoted scalars without escapes, `{}` and `[]`. Anything else -- flow
collections with content, anchors, tags, block scalars, multi-line or numeric-looking scalars, duplicate
keys, tabs, a second document -- returns None, and the caller parses the text with ruamel.yaml.
"""

from __future__ import annotations

import re
from typing import Any

_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]*")
_NULL = ("~", "null", "Null", "NULL")
_TRUE = ("true", "True", "TRUE")
_FALSE = ("false", "False", "FALSE")
# Plain scalars that some YAML schema reads as something else than the same string (numbers, dates,
# YAML 1.1 booleans, merge keys, special floats): left to ruamel.
_AMBIGUOUS = re.compile(r"[-+]?[.0-9]|(?i:y|n|yes|no|on|off)$|<<|=$")
# A plain scalar cannot start with these; "-", "?" and ":" only when a space or nothing follows.
_INDICATORS = tuple(",[]{}#&*!|>'\"%@`")


class _Unsupported(Exception):
    """The text leaves the subset this module reads."""


def load(text: str) -> Any:
    """The document TEXT holds, or None when TEXT is outside the subset (then ask ruamel.yaml)."""
    lines: list[tuple[int, str]] = []
    for raw in text.split("\n"):
        line = raw.rstrip(" \r")
        stripped = line.lstrip(" ")
        if not stripped or stripped.startswith("#"):
            continue
        if "\t" in line or not line.isprintable():
            return None
        lines.append((len(line) - len(stripped), stripped))
    if not lines:
        return None  # empty: what ruamel makes of it is its business
    try:
        value, end = _block(lines, 0, lines[0][0])
    except _Unsupported:
        return None
    return value if end == len(lines) else None


def _block(lines: list[tuple[int, str]], at: int, indent: int) -> tuple[Any, int]:
    if lines[at][0] != indent:
        raise _Unsupported
    if _is_item(lines[at][1]):
        return _sequence(lines, at, indent)
    return _mapping(lines, at, indent, {})


def _is_item(content: str) -> bool:
    return content == "-" or content.startswith("- ")


def _sequence(lines: list[tuple[int, str]], at: int, indent: int) -> tuple[list[Any], int]:
    items: list[Any] = []
    while at < len(lines) and lines[at][0] == indent and _is_item(lines[at][1]):
        rest = lines[at][1][1:].lstrip(" ")
        column = indent + len(lines[at][1]) - len(rest)
        if not rest:
            at += 1
            if at < len(lines) and lines[at][0] > indent:
                value, at = _block(lines, at, lines[at][0])
            else:
                value = None
        elif _is_item(rest):
            raise _Unsupported  # "- - x": a nested sequence on one line
        elif _split_key(rest) is not None:
            lines[at] = (column, rest)  # "- key: value": a mapping whose first key sits after the dash
            value, at = _mapping(lines, at, column, {})
        else:
            value, at = _scalar(rest), at + 1
        items.append(value)
    if at < len(lines) and lines[at][0] > indent:
        raise _Unsupported  # e.g. "- a" continued on the next line
    return items, at


def _mapping(lines: list[tuple[int, str]], at: int, indent: int, out: dict[str, Any]) -> tuple[dict[str, Any], int]:
    while at < len(lines) and lines[at][0] == indent and not _is_item(lines[at][1]):
        split = _split_key(lines[at][1])
        if split is None:
            raise _Unsupported
        key, rest = split
        if key in out:
            raise _Unsupported  # duplicate key: ruamel refuses it
        at += 1
        if rest:
            out[key] = _scalar(rest)
        elif at < len(lines) and (
            lines[at][0] > indent or (lines[at][0] == indent and _is_item(lines[at][1]))
        ):
            out[key], at = _block(lines, at, lines[at][0])
        else:
            out[key] = None
    if at < len(lines) and lines[at][0] > indent:
        raise _Unsupported  # a deeper line nothing opened (e.g. a plain scalar continued on the next line)
    return out, at


def _split_key(content: str) -> tuple[str, str] | None:
    """(key, the rest after ": ") of a "key: value" or "key:" line, or None."""
    match = _KEY.match(content)
    if not match or content[match.end() : match.end() + 1] != ":":
        return None
    if match.group() in (*_NULL, *_TRUE, *_FALSE) or _AMBIGUOUS.match(match.group()):
        raise _Unsupported  # a key some schema reads as null, a bool or a number
    rest = content[match.end() + 1 :]
    if rest and not rest.startswith(" "):
        return None
    return match.group(), rest.strip(" ")


def _scalar(text: str) -> Any:
    if text == "{}":
        return {}
    if text == "[]":
        return []
    if text[0] in "\"'":
        body = text[1:-1]
        if len(text) < 2 or text[-1] != text[0] or text[0] in body or "\\" in body:
            raise _Unsupported
        return body
    if text.startswith(_INDICATORS) or (text[0] in "-?:" and text[1:2] in ("", " ")):
        raise _Unsupported
    if ": " in text or " #" in text or text.endswith(":") or _AMBIGUOUS.match(text):
        raise _Unsupported
    if text in _NULL:
        return None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return text
