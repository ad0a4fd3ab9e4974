"""The verbs that must start fast, parsed by hand before click and typer load (about half of the start-up
of `status`): `status JOB` without --watch, `version` alone, and `submit` with its flags spelled out (no
--help, no positional word).

Only command lines whose every word is understood are taken here, with click's meaning (flags before the
verb are the root's, after it the verb's; the last of a repeated flag wins; an empty environment variable
counts as unset); anything else -- --help, --watch, an unknown, abbreviated or joined flag, a value that
starts with "-", a missing value or argument, `--` -- returns None, and the typer app parses the whole line
with its own errors. tests/unit/commands/test_fastpath.py runs each case both ways and compares.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

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
# submit's own flags besides the job flags (jobflags.JOB_FLAG_SPECS) -> its keyword in commands/submit.run
_SUBMIT_VALUES = {"--dry-run": "dry_run", "--output": "output", "-o": "output"}
_SUBMIT_SECONDS = {"--timeout": "timeout", "--pending-timeout": "pending_timeout",
                   "--image-pull-timeout": "image_pull_timeout"}
_SUBMIT_SWITCHES = {"--wait": "wait", "--require-fit-now": "require_fit_now"}


def _parse(
    words: Sequence[str], values: dict[str, str], switches: dict[str, str], many: frozenset[str] = frozenset()
) -> tuple[dict[str, Any], list[str]] | None:
    """Flags (key -> value or True; a list of every value, in order, for the keys in MANY) and positional
    words, or None when a word is outside this grammar."""
    given: dict[str, Any] = {}
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
            continue
        if name in values and eq and name.startswith("--"):
            pass
        elif name in values and not eq:
            if i >= len(words) or words[i].startswith("-"):
                return None
            value = words[i]
            i += 1
        else:
            return None
        key = values[name]
        if key in many:
            given.setdefault(key, []).append(value)
        else:
            given[key] = value
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
        from kubectl_tao.cli.output import emit
        from kubectl_tao.commands.version import client_version_line

        emit(client_version_line())
        return 0
    if verb == "submit":
        return _submit(root[0], rest)
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


def _number(text: str, *, fraction: bool) -> int | float | None:
    """TEXT as click reads an int (or, with FRACTION, a float) option; None for any spelling but plain digits
    (and one inner dot): click's own conversion and errors take the rest."""
    whole, dot, part = text.partition(".") if fraction else (text, "", "")
    if not (whole.isascii() and whole.isdigit()) or (dot and not (part.isascii() and part.isdigit())):
        return None
    return float(text) if fraction else int(text)


def _submit(root: dict[str, Any], rest: Sequence[str]) -> int | None:
    from kubectl_tao.commands.jobflags import JOB_FLAG_SPECS, job_defaults

    values = {**_CLUSTER_FLAGS, **_SUBMIT_VALUES, **_SUBMIT_SECONDS}
    switches = dict(_SUBMIT_SWITCHES)
    for key, flag in JOB_FLAG_SPECS.items():
        (switches if flag.kind == "switch" else values).update(dict.fromkeys(flag.names, key))
    many = frozenset(key for key, flag in JOB_FLAG_SPECS.items() if flag.kind == "many")
    parsed = _parse(rest, values, switches, many)
    if parsed is None or parsed[1]:
        return None
    flags = parsed[0]
    job = job_defaults()
    for key in JOB_FLAG_SPECS.keys() & flags.keys():
        value = flags[key]
        if JOB_FLAG_SPECS[key].kind in ("int", "optint"):
            value = _number(value, fraction=False)
            if value is None:
                return None
        job[key] = value
    job["given"] = JOB_FLAG_SPECS.keys() & flags.keys()
    options: dict[str, Any] = {key: flags[key] for key in (*_SUBMIT_VALUES.values(), *_SUBMIT_SWITCHES.values())
                               if key in flags}
    for key in set(_SUBMIT_SECONDS.values()) & flags.keys():
        options[key] = _number(flags[key], fraction=True)
        if options[key] is None:
            return None
    set_root_options(**_cluster(root))
    use_verb_options(_cluster(flags))
    from kubectl_tao.commands.submit import run as submit

    return submit(job, **options)
