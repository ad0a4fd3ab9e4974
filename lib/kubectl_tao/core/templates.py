"""Templates are data: `@@NAME@@` markers replaced by JSON-encoded values.

Every marker in templates/k8s/*.tmpl sits where a YAML value goes, and JSON is a subset of YAML flow
syntax, so whatever a value holds (quotes, newlines, ': ', '---', '{', shell text) it stays one
scalar, list or mapping in that position: it can never become a key, a new document or shell code.
A marker filled with null removes its key when the manifest is parsed (see `prune_nulls`).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from kubectl_tao.core.errors import TaoError, UsageError

MARKER_RE = re.compile(r"@@([A-Z][A-Z0-9_]*)@@")
# Characters that a YAML reader would not keep as they are inside a double-quoted scalar: C1
# controls and DEL (non-printable for YAML), the YAML 1.1 line breaks NEL/LS/PS (folded), the BOM,
# non-characters and lone surrogates. They are written as \\uXXXX escapes, which JSON and YAML share.
_YAML_UNSAFE_RE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")


def yaml_safe_json(value: Any, *, indent: int | None = None) -> str:
    """JSON text that reads back identically as YAML 1.1 and 1.2 (and as JSON)."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, indent=indent, separators=_separators(indent))
    return _YAML_UNSAFE_RE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def _separators(indent: int | None) -> tuple[str, str]:
    return (",", ": ") if indent is not None else (", ", ": ")


def fill(template_text: str, values: dict[str, Any]) -> str:
    """Replace each `@@NAME@@` with `yaml_safe_json(values[NAME])`; every marker and every value must be used."""
    used: set[str] = set()
    missing: set[str] = set()

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            missing.add(name)
            return match.group(0)
        used.add(name)
        return yaml_safe_json(values[name])

    rendered = MARKER_RE.sub(substitute, template_text)
    _check_markers(missing, set(values) - used)
    return rendered


def _check_markers(missing: set[str], unused: set[str]) -> None:
    if missing:
        raise TaoError(f"template has unresolved markers: {', '.join(sorted(missing))}")
    if unused:
        raise TaoError(f"template has no marker for values: {', '.join(sorted(unused))}")


def data_dir(kind: str) -> Path:
    """templates/ or schemas/ of the source checkout, else the installed copy under sys.prefix."""
    checkout = Path(__file__).resolve().parents[3] / kind
    if checkout.is_dir():
        return checkout
    return Path(sys.prefix) / "share" / "kubectl-tao" / kind


def template_path(name: str) -> Path:
    return data_dir("templates") / "k8s" / name


def load_template(name: str) -> str:
    """The text of templates/k8s/<name> (a .tmpl manifest or a fixed POSIX-sh script)."""
    if "/" in name or name.startswith("."):
        raise UsageError(f"template name {name!r} must be a file name inside templates/k8s")
    path = template_path(name)
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaoError(f"cannot read template {path}: {exc.strerror or exc}") from exc


def prune_nulls(value: Any) -> Any:
    """Drop mapping keys whose value is null, at every depth (a null marker means "omit")."""
    if isinstance(value, dict):
        return {key: prune_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [prune_nulls(item) for item in value]
    return value


def parse_documents(text: str) -> list[dict[str, Any]]:
    """Parse a filled template (YAML whose values are JSON flow) into plain objects, nulls pruned."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    yaml = YAML(typ="safe", pure=True)
    try:
        documents = [doc for doc in yaml.load_all(text) if doc is not None]
    except YAMLError as exc:
        raise TaoError(f"rendered template is not valid YAML: {exc}") from exc
    if not all(isinstance(doc, dict) for doc in documents):
        raise TaoError("rendered template must contain only mappings")
    return [prune_nulls(doc) for doc in documents]


def render_template(name: str, values: dict[str, Any]) -> list[dict[str, Any]]:
    """The template's documents with every marker filled: what parse_documents(fill(...)) returns, without
    importing ruamel.yaml (most of a submit's YAML cost) when the template's own text is plain block YAML."""
    text = load_template(name)
    skeleton = _skeleton(text)
    if skeleton is None:
        return parse_documents(fill(text, values))
    used: set[str] = set()
    missing: set[str] = set()

    def filled(node: Any) -> Any:
        if isinstance(node, dict):
            return {key: filled(item) for key, item in node.items()}
        if isinstance(node, list):
            return [filled(item) for item in node]
        marker = MARKER_RE.fullmatch(node) if isinstance(node, str) else None
        if marker is None:
            return node
        if marker.group(1) not in values:
            missing.add(marker.group(1))
            return node
        used.add(marker.group(1))
        # The value as the text path reads it back: JSON is YAML flow, so this is what the parser would make.
        return json.loads(yaml_safe_json(values[marker.group(1)]))

    documents = [filled(doc) for doc in skeleton]
    _check_markers(missing, set(values) - used)
    return [prune_nulls(doc) for doc in documents]


def _skeleton(text: str) -> list[dict[str, Any]] | None:
    """The template's documents with each marker a string "@@NAME@@" in its place, read by blockyaml; None
    when the text is outside blockyaml's plain subset (a marker inside a quoted or block scalar, a flow
    collection, a number...): the caller then fills the text and parses it with ruamel.yaml."""
    from kubectl_tao.core import blockyaml

    quoted = MARKER_RE.sub(lambda match: f'"{match.group(0)}"', text)
    documents = []
    for part in re.split(r"(?m)^---[ \t]*$", quoted):
        if all(not line.strip() or line.lstrip().startswith("#") for line in part.split("\n")):
            continue  # nothing but comments before a first "---"
        doc = blockyaml.load(part)
        if not isinstance(doc, dict):
            return None
        documents.append(doc)
    if _marker_count(documents) != len(MARKER_RE.findall(text)):
        return None  # a marker inside a scalar with more text around it: not a whole value
    return documents or None


def _marker_count(node: Any) -> int:
    if isinstance(node, dict):
        return sum(_marker_count(item) for item in node.values())
    if isinstance(node, list):
        return sum(_marker_count(item) for item in node)
    return 1 if isinstance(node, str) and MARKER_RE.fullmatch(node) else 0
