"""Keep the kubelet from rewriting the text a container runs.

Before it starts a container, the kubelet expands `$(NAME)` in `command`, `args` and `env[].value` with the
container's variables, and turns `$$` into `$`. A shell command such as `echo $$` (the shell's PID) or
`x=$(NAME)` would reach the shell changed. Doubling every run of `$` that the kubelet would act on (a run of
two or more, or one followed by `(`) makes it hand back exactly the original text; a lone `$` before anything
else (`$HOME`, `${X}`, `$1`) is left alone, since the kubelet leaves it alone too.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from typing import Any

_EXPANDED = re.compile(r"(?<!\$)(?:\$+(?=\()|\${2,})")  # a run of dollars, read from its start


def escape(text: str) -> str:
    """`text` written so that the kubelet's expansion gives back `text` itself."""
    return _EXPANDED.sub(lambda match: match.group() * 2, text)


def expand(text: str, env: Mapping[str, str]) -> str:
    """What the kubelet makes of `text` (Kubernetes' third_party/forked/golang/expansion, same rules):
    `$$` -> `$`; `$(NAME)` -> env[NAME], or left as it is when NAME is not defined; any other `$` stays."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "$" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            close = text.find(")", i + 2)
            if close < 0:
                out.append("$(")
                i += 2
            else:
                name = text[i + 2 : close]
                out.append(env.get(name, f"$({name})"))
                i = close + 1
        else:
            out.append("$" + nxt)
            i += 2
    return "".join(out)


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    if obj.get("kind") != "Job":
        return []
    pod = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    return [c for key in ("initContainers", "containers") for c in pod.get(key) or [] if isinstance(c, dict)]


def _apply(container: dict[str, Any], change: Callable[[str], str]) -> None:
    for key in ("command", "args"):
        if isinstance(container.get(key), list):
            container[key] = [change(item) if isinstance(item, str) else item for item in container[key]]
    for entry in container.get("env") or []:
        if isinstance(entry, dict) and isinstance(entry.get("value"), str):
            entry["value"] = change(entry["value"])


def escape_workloads(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Escape command, args and env values of every container of every Job in `objects` (in place)."""
    for obj in objects:
        for container in _containers(obj):
            _apply(container, escape)
    return objects


def as_delivered(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of `objects` with the text each container receives (no variable defined): what the secret
    linter must judge, since `$$(NAME)` in a manifest is the `$(NAME)` the user wrote."""
    copies = copy.deepcopy(objects)
    for obj in copies:
        for container in _containers(obj):
            _apply(container, lambda text: expand(text, {}))
    return copies
