"""The secret linter: refuses manifests, scripts and env-files that carry a credential.

Kubernetes manifests (multi-document YAML or JSON) are walked field by field; anything else (shell
scripts, env-files, text) is checked line by line with the text rules of ``redact``.  A finding names
the place and the kind of credential, never the value::

    <source>:<line>: <kind>: <doc#>/<field.path> (<rule>)     manifests (doc# counts from 0)
    <source>:<line>: <kind>: <name> (<rule>)                   text

Manifest rules, on top of the text rules applied to every string:

* ``env-literal``: a ``{name: <credential-like>, value: <literal>}`` entry (use valueFrom.secretKeyRef
  or envFrom.secretRef instead);
* ``named-key``: a mapping key with a credential-like name bound to a literal string (configmap data,
  annotations, labels, any custom resource);
* ``inline-secret``: any ``kind: Secret`` with ``data`` or ``stringData`` values: a manifest that
  kubectl-tao applies never carries Secret data, whatever it holds;
* ``flag-literal``: an argv list with ``--password``/``--token``/``--api-key``... followed by a literal;
* strings holding JSON (``last-applied-configuration``) are walked as documents too.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kubectl_tao.core.redact import (
    FLAG_ONLY_RE,
    REDACTED,
    Finding,
    find_in_text,
    find_split_tokens,
    is_credential_name,
    is_placeholder,
    redact_text,
)

_PLAIN_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_KEY_WITH_SPACE_RE = re.compile(r"\S\s+\S")
_JSON_MARK = "(json)"
FIX_HINT = (
    "move each credential into a Secret created from stdin and reference it by name "
    "(envFrom.secretRef or valueFrom.secretKeyRef)"
)


# --------------------------------------------------------------------------------------------------
# Walking documents
# --------------------------------------------------------------------------------------------------


def _path_str(path: Sequence[str | int]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == _JSON_MARK:  # the rest of the path is inside a string holding JSON
            out += f".{part}"
        elif _PLAIN_KEY_RE.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part)}]"
    return out


def _value_line(container: object, key: object) -> int:
    """1-based line of ``container[key]`` when the container came from ruamel's round-trip loader."""
    lc = getattr(container, "lc", None)
    if lc is None:
        return 0
    try:
        pos = lc.item(key) if isinstance(key, int) else lc.value(key)
    except (KeyError, IndexError, TypeError, AttributeError):
        return 0
    return int(pos[0]) + 1 if pos else 0


def _is_block_scalar(value: object) -> bool:
    return type(value).__name__ in ("LiteralScalarString", "FoldedScalarString")


class _Walker:
    def __init__(self, source: str) -> None:
        self.source = source
        self.findings: list[Finding] = []

    def add(self, line: int, kind: str, doc: int, path: Sequence[str | int], rule: str) -> None:
        self.findings.append(Finding(line, kind, f"{doc}/{_path_str(path)}", rule, self.source))

    def walk(self, node: object, doc: int, path: list[str | int], line: int) -> None:
        if isinstance(node, dict):
            self._mapping(node, doc, path)
        elif isinstance(node, list):
            self._sequence(node, doc, path)
        elif isinstance(node, str):
            self._string(node, doc, path, line)

    def _mapping(self, node: dict, doc: int, path: list[str | int]) -> None:
        secret = node.get("kind") == "Secret"
        pair_name = node.get("name") if isinstance(node.get("value"), str) else None
        for key, value in node.items():
            line = _value_line(node, key)
            sub = [*path, str(key)]
            if secret and key in ("data", "stringData") and isinstance(value, dict):
                for data_key in value:
                    self.add(_value_line(value, data_key), "secret-data", doc, [*sub, str(data_key)],
                             "inline-secret")
                continue
            if isinstance(value, str) and not is_placeholder(value):
                if key == "value" and isinstance(pair_name, str) and is_credential_name(pair_name):
                    self.add(line, "credential", doc, sub, f"env-literal {pair_name}")
                    continue
                if isinstance(key, str) and is_credential_name(key):
                    self.add(line, "credential", doc, sub, f"named-key {key}")
                    continue
            self.walk(value, doc, sub, line)

    def _sequence(self, node: list, doc: int, path: list[str | int]) -> None:
        for i, item in enumerate(node):
            prev = node[i - 1] if i else None
            line = _value_line(node, i)
            if (
                isinstance(item, str)
                and isinstance(prev, str)
                and FLAG_ONLY_RE.fullmatch(prev)
                and not item.startswith("-")
                and not is_placeholder(item)
            ):
                self.add(line, "credential", doc, [*path, i], f"flag-literal {prev}")
                continue
            self.walk(item, doc, [*path, i], line)

    def _string(self, value: str, doc: int, path: list[str | int], line: int) -> None:
        if self._json_string(value, doc, path, line):
            return
        base = line + 1 if _is_block_scalar(value) and line else line
        for f in find_in_text(value):
            rule = f.rule if f.name.startswith("col ") else f"{f.rule} {f.name}"
            self.add(base + f.line - 1 if base else 0, f.kind, doc, path, rule)

    def _json_string(self, value: str, doc: int, path: list[str | int], line: int) -> bool:
        """Walk a string holding a JSON object or array as a document (last-applied-configuration)."""
        stripped = value.strip()
        if stripped[:1] not in ("{", "[") or len(stripped) < 2:
            return False
        try:
            inner = json.loads(stripped)
        except ValueError:
            return False
        if not isinstance(inner, dict | list):
            return False
        before = len(self.findings)
        self.walk(inner, doc, [*path, _JSON_MARK], 0)
        for i in range(before, len(self.findings)):  # point the findings at the string's own line
            f = self.findings[i]
            self.findings[i] = Finding(line, f.kind, f.name, f.rule, f.source)
        return True


def _dedupe(findings: Iterable[Finding]) -> list[Finding]:
    seen: set[Finding] = set()
    out = []
    for f in findings:
        if f not in seen:
            seen.add(f)
            out.append(f)
    return out


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def lint_documents(docs: Iterable[object], source: str = "-") -> list[Finding]:
    """Findings in already-parsed manifest documents (dicts/lists; ruamel round-trip objects keep
    their line numbers, plain Python objects report line 0)."""
    walker = _Walker(source)
    for doc_index, doc in enumerate(docs):
        if doc is not None:
            walker.walk(doc, doc_index, [], 0)
    return _dedupe(walker.findings)


def lint_text(text: str, source: str = "-") -> list[Finding]:
    """Findings in plain text (shell scripts, env-files, logs) by the line-based text rules."""
    return find_in_text(text, source=source)


def _comment_findings(text: str, source: str) -> list[Finding]:
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("#"):
            out += [
                Finding(number, f.kind, f.name, f.rule, source) for f in find_in_text(line, source=source)
            ]
    return out


def _rt_yaml() -> Any:  # a ruamel.yaml.YAML, imported lazily
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = True
    yaml.preserve_quotes = True
    yaml.width = 1 << 16  # never fold long lines when writing back
    return yaml


def load_manifest_documents(text: str) -> list[object] | None:
    """The documents of a YAML/JSON manifest, or None when ``text`` is not one (a script, an
    env-file, prose): every non-empty document must be a mapping or a list."""
    from ruamel.yaml.error import YAMLError

    yaml = _rt_yaml()
    try:
        docs = list(yaml.load_all(text))
    except (YAMLError, ValueError):
        try:
            docs = [json.loads(text)]
        except ValueError:
            return None
    present = [d for d in docs if d is not None]
    if not present or not all(isinstance(d, dict | list) for d in present):
        return None
    if any(isinstance(d, dict) and any(_KEY_WITH_SPACE_RE.search(str(k)) for k in d) for d in present):
        return None  # `curl -H "Authorization: ..."` parses as a mapping; it is a command line
    return docs


def lint_manifest_text(text: str, source: str = "-") -> list[Finding]:
    """Findings in a manifest file's text; falls back to ``lint_text`` when it is not YAML/JSON."""
    docs = load_manifest_documents(text)
    if docs is None:
        return lint_text(text, source)
    split = find_split_tokens(text, source=source)  # the parser joins a folded scalar's lines with a blank
    return _dedupe(lint_documents(docs, source) + _comment_findings(text, source) + split)


def _redact_node(node: object) -> object:
    """Redact a round-trip loaded document in place (comments and layout survive)."""
    if isinstance(node, dict):
        secret = node.get("kind") == "Secret"
        pair_name = node.get("name") if isinstance(node.get("value"), str) else None
        for key in list(node):
            value = node[key]
            if secret and key in ("data", "stringData") and isinstance(value, dict):
                for data_key in value:
                    value[data_key] = REDACTED
            elif isinstance(value, str) and not is_placeholder(value) and (
                (isinstance(key, str) and is_credential_name(key))
                or (key == "value" and isinstance(pair_name, str) and is_credential_name(pair_name))
            ):
                node[key] = REDACTED
            else:
                node[key] = _redact_node(value)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            prev = node[i - 1] if i else None
            if (isinstance(item, str) and isinstance(prev, str) and FLAG_ONLY_RE.fullmatch(prev)
                    and not item.startswith("-") and not is_placeholder(item)):
                node[i] = REDACTED
            else:
                node[i] = _redact_node(item)
    elif isinstance(node, str):
        redacted = redact_text(node)
        if redacted != node:
            try:
                return type(node)(redacted)  # keep ruamel's scalar style (literal block, quoted)
            except TypeError:
                return redacted
    return node


def redact_manifest_text(text: str) -> str:
    """``text`` with credentials replaced by ``***REDACTED***``: manifests field by field (env
    pairs, Secret data, credential-like keys), then every line by the text rules (comments too)."""
    docs = load_manifest_documents(text)
    if docs is None:
        return redact_text(text)
    import io

    buf = io.StringIO()
    redacted_docs = [_redact_node(d) for d in docs]
    if text.lstrip().startswith(("{", "[")) and len(redacted_docs) == 1:
        buf.write(json.dumps(redacted_docs[0], indent=2) + "\n")
    else:
        _rt_yaml().dump_all(redacted_docs, buf)
    return redact_text(buf.getvalue())


# --------------------------------------------------------------------------------------------------
# The redact_secrets command
# --------------------------------------------------------------------------------------------------

USAGE = """\
usage: redact_secrets lint FILE...     report inline credentials (FILE '-' reads stdin)
       redact_secrets redact [FILE]    print FILE (default stdin) with credentials replaced

lint checks Kubernetes manifests (multi-document YAML or JSON) field by field and any other file
(shell scripts, env-files) line by line. Findings go to stderr as
  <source>:<line>: <kind>: <doc#>/<field.path> (<rule>)   or   <source>:<line>: <kind>: <name> (<rule>)
and never include the value.

exit codes: 0 clean (or redacted), 1 findings, 2 usage error or unreadable file
"""


class _UsageExit(Exception):
    pass


def _read(path: str, stdin_text: str | None) -> tuple[str, str]:
    if path == "-":
        if stdin_text is not None:
            return "<stdin>", stdin_text
        return "<stdin>", sys.stdin.buffer.read().decode("utf-8", errors="replace")
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise _UsageExit(f"cannot read {path}: {exc.strerror or exc}") from None
    return path, data.decode("utf-8", errors="replace")


def main(argv: Sequence[str] | None = None, *, stdin_text: str | None = None) -> int:
    """Entry point of scripts/redact_secrets; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        (sys.stdout if args else sys.stderr).write(USAGE)
        return 0 if args else 2
    verb, files = args[0], args[1:]
    try:
        if verb == "lint":
            return _lint_files(files, stdin_text)
        if verb == "redact":
            return _redact_file(files, stdin_text)
        raise _UsageExit(f"unknown verb {verb!r}: use 'lint FILE...' or 'redact [FILE]'")
    except _UsageExit as exc:
        sys.stderr.write(f"ERROR: {exc}\n")
        return 2


def _lint_files(files: list[str], stdin_text: str | None) -> int:
    if not files:
        raise _UsageExit("lint needs at least one FILE ('-' for stdin)")
    if files.count("-") > 1:
        raise _UsageExit("'-' (stdin) may be given only once")
    sources = [_read(f, stdin_text) for f in files]  # read all first: an unreadable file is exit 2
    total = 0
    for source, text in sources:
        for finding in lint_manifest_text(text, source):
            sys.stderr.write(finding.format() + "\n")
            total += 1
    if total:
        sys.stderr.write(f"redact_secrets: {total} inline credential(s) found; {FIX_HINT}\n")
        return 1
    return 0


def _redact_file(files: list[str], stdin_text: str | None) -> int:
    if len(files) > 1:
        raise _UsageExit("redact takes one FILE (or '-' / nothing for stdin)")
    _, text = _read(files[0] if files else "-", stdin_text)
    sys.stdout.write(redact_manifest_text(text))
    return 0
