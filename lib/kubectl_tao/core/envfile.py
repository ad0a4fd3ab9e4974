"""Env-files: the ``KEY=VALUE`` format of ``kubectl create secret generic --from-env-file``.

What ``parse_env_file`` accepts, and where it differs from kubectl:

* one ``KEY=VALUE`` per line; the line is split at the first ``=``; leading whitespace of the line
  is dropped; blank lines and lines starting with ``#`` are skipped; a UTF-8 byte-order mark on the
  first line and a trailing carriage return (CRLF files) are dropped — all as kubectl does;
* the value is kept **verbatim**, as kubectl keeps it: quotes are part of the value
  (``HF_TOKEN="abc"`` stores the five characters ``"abc"``), trailing spaces too, no ``\\n`` escapes;
* an ``export `` prefix is accepted and dropped (kubectl refuses it), so the same file can be
  ``source``d by a shell with ``set -a``;
* keys must be portable environment variable names, ``[A-Za-z_][A-Za-z0-9_]*`` (kubectl also allows
  ``-`` and ``.``, which a shell cannot export);
* refused, with the line number and never the value: a line without ``=`` (kubectl would read the
  value from its own environment), a bad key, a duplicate key, a NUL byte, bytes that are not UTF-8.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kubectl_tao.core.errors import UsageError

ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BOM = "\ufeff"

# Legacy TAO names -> the names the AWS SDKs and CLIs read.
LEGACY_S3_NAMES = {
    "ACCESS_KEY": "AWS_ACCESS_KEY_ID",
    "SECRET_KEY": "AWS_SECRET_ACCESS_KEY",
    "S3_ENDPOINT_URL": "AWS_ENDPOINT_URL",
    "CLOUD_REGION": "AWS_DEFAULT_REGION",
}
# Legacy names that stay next to their modern name (the Kubernetes text of the reference reads it).
_KEEP_LEGACY = frozenset({"S3_ENDPOINT_URL"})


def _decode_lines(data: str | bytes, source: str) -> list[str]:
    if isinstance(data, str):
        return data.split("\n")
    lines = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise UsageError(
                f"{source}:{number}: env-file line is not valid UTF-8; save the file as UTF-8"
            ) from None
    return lines


def parse_env_file(data: str | bytes, source: str = "env-file") -> dict[str, str]:
    """The ``KEY -> VALUE`` mapping of an env-file, in file order (see the module docstring)."""
    result: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for number, raw in enumerate(_decode_lines(data, source), start=1):
        line = raw[:-1] if raw.endswith("\r") else raw
        if number == 1 and line.startswith(_BOM):
            line = line[len(_BOM) :]
        if "\x00" in line:
            raise UsageError(f"{source}:{number}: env-file line contains a NUL byte; remove it")
        if any(0xD800 <= ord(ch) <= 0xDFFF for ch in line):
            raise UsageError(f"{source}:{number}: env-file line is not valid UTF-8; save the file as UTF-8")
        line = line.lstrip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export") and line[6:7] in (" ", "\t"):
            line = line[6:].lstrip()
        key, sep, value = line.partition("=")
        if not sep:
            raise UsageError(  # the line is not shown: it may be a bare credential
                f"{source}:{number}: env-file line has no '=': write KEY=VALUE (values are never read "
                "from the environment)"
            )
        if not ENV_NAME_RE.fullmatch(key):
            raise UsageError(
                f"{source}:{number}: {_describe_key(key)} is not a valid variable name: use letters, "
                "digits and '_', not starting with a digit, no spaces around '='"
            )
        if key in result:
            raise UsageError(
                f"{source}:{number}: the key is set twice (first on line {first_line[key]}); keep one"
            )
        result[key] = value
        first_line[key] = number
    return result


def _describe_key(key: str) -> str:
    """The key by where it breaks the rule, never quoted (a value typed in its place would be printed)."""
    from kubectl_tao.core.names import char_kind, where_bad

    if not key:
        return "the key (empty)"
    if key[0].isdigit():
        return f"the key (it starts with {char_kind(key[0])})"
    return f"the key ({where_bad(key, _KEY_CHARS) or 'not shown'})"


_KEY_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"


def to_env_file(mapping: Mapping[str, str]) -> str:
    """``mapping`` as env-file text for ``kubectl create secret generic NAME --from-env-file=/dev/stdin``.

    Values travel verbatim.  A value with a newline or carriage return is refused: the env-file is
    line-based, so kubectl would cut the value at the line break and read the rest as another key
    (put multi-line credentials such as PEM keys in a file Secret instead).
    """
    lines = []
    for key, value in mapping.items():
        if not isinstance(key, str) or not ENV_NAME_RE.fullmatch(key):
            raise UsageError(
                f"{_describe_key(str(key))} is not a valid variable name for an env-file: use letters, "
                "digits and '_', not starting with a digit"
            )
        if not isinstance(value, str):
            raise UsageError(f"{key}: env-file values must be strings")  # key: a valid name, checked above
        if "\n" in value or "\r" in value:
            raise UsageError(
                f"{key}: value contains a line break, which an env-file cannot carry (kubectl would "
                "split it into two keys); store it with --from-file instead"
            )
        if "\x00" in value:
            raise UsageError(f"{key}: value contains a NUL byte; remove it")
        lines.append(f"{key}={value}\n")
    return "".join(lines)


def map_legacy_s3_names(mapping: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``mapping`` with legacy TAO S3 names moved to the AWS names.

    ACCESS_KEY -> AWS_ACCESS_KEY_ID, SECRET_KEY -> AWS_SECRET_ACCESS_KEY, CLOUD_REGION ->
    AWS_DEFAULT_REGION (the legacy names are dropped); S3_ENDPOINT_URL and AWS_ENDPOINT_URL are both
    set when either is given.  A legacy and a modern name with different values is refused.
    """
    result = dict(mapping)
    for legacy, modern in LEGACY_S3_NAMES.items():
        if legacy not in result:
            continue
        if modern in result and result[modern] != result[legacy]:
            raise UsageError(
                f"both {legacy} and {modern} are set, with different values; keep only {modern}"
            )
        result[modern] = result[legacy]
        if legacy not in _KEEP_LEGACY:
            del result[legacy]
    if "AWS_ENDPOINT_URL" in result and "S3_ENDPOINT_URL" not in result:
        result["S3_ENDPOINT_URL"] = result["AWS_ENDPOINT_URL"]
    return result
