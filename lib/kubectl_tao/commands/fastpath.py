"""The verbs that must start fast, parsed by hand before click and typer load (about half of the start-up
of `status`): `status JOB` without --watch, and `version` alone.

Only command lines whose every word is understood are taken here, with click's meaning (flags before the
verb are the root's, after it the verb's; the last of a repeated flag wins; an empty environment variable
counts as unset); anything else -- --help, --watch, an unknown, abbreviated or joined flag, a value that
starts with "-", a missing value or argument, `--` -- returns None, and the typer app parses the whole line
with its own errors. tests/unit/commands/test_fastpath.py runs each case both ways and compares.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from kubectl_tao.commands.session import CLUSTER_ENVVARS, CLUSTER_KEYS, session, set_root_options, use_verb_options

# Flags that take a value, every spelling -> its key; the root accepts the cluster flags only.
_CLUSTER_FLAGS = {
    "--context": "context",
    "--namespace": "namespace",
    "-n": "namespace",
    "--kubeconfig": "kubeconfig",
    "--request-timeout": "request_timeout",
}
_STATUS_VALUES = {**_CLUSTER_FLAGS, "--output": "output", "-o": "output"}
_STATUS_SWITCHES = {"--no-headers": "no_headers", "--force": "force"}


def _parse(
    words: Sequence[str], values: dict[str, str], switches: dict[str, str]
) -> tuple[dict[str, str | bool], list[str]] | None:
    """Flags (key -> value or True) and positional words, or None when a word is outside this grammar."""
    given: dict[str, str | bool] = {}
    positional: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("-"):
            if not word:
                return None
            positional.append(word)
            continue
        name, eq, value = word.partition("=")
        if name in switches and not eq:
            given[switches[name]] = True
        elif name in values and eq and name.startswith("--"):
            given[values[name]] = value
        elif name in values and not eq:
            if i >= len(words) or words[i].startswith("-"):
                return None
            given[values[name]] = words[i]
            i += 1
        else:
            return None
    return given, positional


def _cluster(given: dict[str, str | bool]) -> dict[str, str | None]:
    """A level's global flags as click resolves them: the flag if given (even empty), else its variable."""
    out: dict[str, str | None] = {}
    for key in CLUSTER_KEYS:
        if key in given:
            out[key] = str(given[key])
        else:
            out[key] = os.environ.get(CLUSTER_ENVVARS[key], "") or None if key in CLUSTER_ENVVARS else None
    return out


def _root_end(args: Sequence[str]) -> int | None:
    """Where the verb is: the first word that is neither a root flag nor its value (None: not understood)."""
    i = 0
    while i < len(args):
        name, eq, _ = args[i].partition("=")
        if not args[i].startswith("-"):
            return i
        if name not in _CLUSTER_FLAGS or (eq and not name.startswith("--")):
            return None
        i += 1 if eq else 2
    return None


def run(args: Sequence[str]) -> int | None:
    """The exit code of ARGS run here, or None: the typer app is to parse them."""
    verb_at = _root_end(args)
    if verb_at is None:
        return None
    root = _parse(args[:verb_at], _CLUSTER_FLAGS, {})
    if root is None:
        return None
    verb, rest = args[verb_at], args[verb_at + 1 :]
    if verb == "version" and not rest:
        from kubectl_tao.commands.version import client_version_line
        from kubectl_tao.output import emit

        emit(client_version_line())
        return 0
    if verb != "status":
        return None
    parsed = _parse(rest, _STATUS_VALUES, _STATUS_SWITCHES)
    if parsed is None or len(parsed[1]) != 1:
        return None
    flags, (job,) = parsed
    set_root_options(**_cluster(root[0]))
    use_verb_options(_cluster(flags))
    from kubectl_tao.jobs import early_read
    from kubectl_tao.k8s.kubectl import discard_prestarted

    early_read.start(job, session().options)
    try:
        from kubectl_tao.commands.status import show

        return show(job, str(flags.get("output", "table")), bool(flags.get("no_headers")), bool(flags.get("force")))
    finally:
        discard_prestarted()
