"""YAML as kubectl prints it (block style, keys sorted), written so that every reader gets back exactly the
data: Kubernetes reads YAML 1.1 (sigs.k8s.io/yaml over go-yaml v2), where a plain `yes`, `on`, `y`, `off`,
`n`, `null` or `0123` is not the string it looks like.

A string is written plain only when it is printable (YAML 1.1 breaks lines at NEL and U+2028 too), starts
with a letter, `/`, `_` or `-` and a letter, and is not one of go-yaml's words (YAML 1.1 numbers, timestamps,
`.inf`, `~`, `<<` and `=` all start otherwise); ruamel.yaml then still quotes whatever YAML syntax or its own
YAML 1.2 reading needs. A multi-line string of printable text is a literal block (`|`); anything else is
double-quoted with escapes. Several documents are separated by `---`, as
`kubectl create --dry-run=client -o yaml` separates them. ruamel.yaml is imported on the first dump.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

# go-yaml v2's booleans and nulls, compared lower-cased (quoting `yEs` too costs nothing).
_WORDS = frozenset({"y", "yes", "n", "no", "true", "false", "on", "off", "null", "~"})
_PLAIN_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ/_")
_WIDTH = 1 << 30  # never fold a long line: kubectl does not

_dumper: Any = None


def dumps(data: Any) -> str:
    """One YAML document (no `---`)."""
    buffer = io.StringIO()
    _yaml().dump(data, buffer)
    return buffer.getvalue()


def dumps_all(documents: Iterable[Any]) -> str:
    """Several documents, `---` between them."""
    return "---\n".join(dumps(document) for document in documents)


def _style(text: str) -> str | None:
    """None (plain when YAML allows it), "|" or '"'."""
    if "\n" in text:
        return "|" if all(ch == "\n" or ch.isprintable() for ch in text) else '"'
    first = text[:1]
    plain_start = first in _PLAIN_START or (first == "-" and text[1:2].isalpha())
    return None if plain_start and text.isprintable() and text.lower() not in _WORDS else '"'


def _yaml() -> Any:
    global _dumper
    if _dumper is None:
        from ruamel.yaml import YAML
        from ruamel.yaml.representer import SafeRepresenter

        class Representer(SafeRepresenter):
            pass

        def represent_str(representer: Any, text: str) -> Any:
            return representer.represent_scalar("tag:yaml.org,2002:str", text, style=_style(text))

        Representer.add_representer(str, represent_str)
        dumper = YAML(typ="safe", pure=True)
        dumper.Representer = Representer
        dumper.default_flow_style = False
        dumper.allow_unicode = True
        dumper.width = _WIDTH
        _dumper = dumper
    return _dumper
