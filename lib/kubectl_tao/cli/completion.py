"""Shell completion: one engine for `kubectl tao <TAB>` (kubectl >= 1.26 runs `kubectl_complete-tao`) and for
the bash, zsh and fish scripts `kubectl tao completion SHELL` prints.

Input: the words typed after `tao`, the last one being the word under the cursor (possibly ""). Output, in
the form kubectl's plugin completion (cobra) reads: one candidate a line, then `:DIRECTIVE`, where 4 means
"no file completion" and 0 lets the shell complete file names (for FILE arguments and file flags).

Verbs and flags come from the typer app itself, so they never drift from the CLI. Record ids are the file
names under $TAO_STATE_DIR/jobs (else ~/.tao/jobs): no file is parsed, no cluster is called. Namespaces
(after -n/--namespace) and contexts (after --context) are the only candidates that start kubectl, through
the kubectl wrapper with a short timeout; on any failure they are simply not offered.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kubectl_tao.core.contract import STATES

NO_FILES = 4
FILES = 0
KUBECTL_TIMEOUT_S = 3.0

# Verbs (paths in the command tree) whose first argument is a record id.
RECORD_ID_VERBS = frozenset(
    {("status",), ("logs",), ("top",), ("cancel",), ("explain",), ("resubmit",), ("record", "mark"), ("record", "show")}
)
FILE_ARG_VERBS = frozenset({("lint",)})
SHELLS = ("bash", "zsh", "fish")
FILE_FLAGS = frozenset(
    {"--kubeconfig", "--env-file", "--action-request", "--staging-map", "--config", "--file", "--from-file"}
)
VALUE_CHOICES: dict[str, tuple[str, ...]] = {
    "--storage-tier": ("A", "C"),
    "--launcher": ("tao", "torchrun"),
    "--dry-run": ("none", "client", "server"),
    "--state": STATES,
    "--source": ("agent", "poller", "backend-hook"),
    "--err-class": ("ERR_INFRA", "ERR_PROGRAM"),
    "--registry": ("nvcr.io",),
}
_ID_FILE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.json")


# ------------------------------------------------------------------------------------------------ sources


def record_ids(state_dir: str | None = None) -> list[str]:
    """Record ids from the store's file names, newest first; [] when the store is missing or unusable."""
    from kubectl_tao.core.errors import UsageError
    from kubectl_tao.store.statedir import state_dir as resolve

    try:
        jobs = resolve(value=state_dir) / "jobs"
    except UsageError:
        return []
    try:
        entries = [e for e in os.scandir(jobs) if _ID_FILE_RE.fullmatch(e.name) and e.is_file()]
    except OSError:
        return []
    entries.sort(key=lambda e: (-_mtime(e), e.name))
    return [e.name[: -len(".json")] for e in entries]


def _mtime(entry: os.DirEntry[str]) -> float:
    try:
        return entry.stat().st_mtime
    except OSError:
        return 0.0


def _kubectl_lines(args: list[str], context: str | None, kubeconfig: str | None, *, cluster: bool) -> list[str]:
    from kubectl_tao.core.errors import TaoError
    from kubectl_tao.k8s.kubectl import ClusterOptions, Kubectl

    options = ClusterOptions(
        context=context, kubeconfig=kubeconfig, request_timeout=f"{int(KUBECTL_TIMEOUT_S) - 1}s" if cluster else None
    )
    try:
        result = Kubectl(options).run(args, namespaced=False, timeout=KUBECTL_TIMEOUT_S, check=False)
    except TaoError:
        return []
    if result.returncode != 0:
        return []
    return [line.strip() for line in result.stdout.splitlines() if line.strip()]


def namespaces(context: str | None = None, kubeconfig: str | None = None) -> list[str]:
    lines = _kubectl_lines(["get", "namespaces", "-o", "name"], context, kubeconfig, cluster=True)
    return [line.split("/", 1)[1] for line in lines if line.startswith("namespace/")]


def contexts(kubeconfig: str | None = None) -> list[str]:
    return _kubectl_lines(["config", "get-contexts", "-o", "name"], None, kubeconfig, cluster=False)


# ------------------------------------------------------------------------------------------------ the tree


def _subcommands(command: Any) -> list[str]:
    """The names of a group's subcommands (none for a plain command), through click's own lookup."""
    import click

    return command.list_commands(click.Context(command)) if isinstance(command, click.Group) else []


def _subcommand(command: Any, name: str) -> Any:
    import click

    return command.get_command(click.Context(command), name)


def _options(command: Any) -> list[Any]:
    import click

    return [p for p in command.params if isinstance(p, click.Option) and not p.hidden]


def _takes_value(option: Any) -> bool:
    return not (option.is_flag or option.count)


def _find_option(commands: Sequence[Any], name: str) -> Any | None:
    for command in reversed(commands):
        for option in _options(command):
            if name in option.opts or name in option.secondary_opts:
                return option
    return None


def _flag_names(command: Any, root: Any) -> list[str]:
    names: list[str] = []
    for cmd in (command, root) if command is not root else (root,):
        for option in _options(cmd):
            names += [n for n in [*option.opts, *option.secondary_opts] if n.startswith("--")]
            names += [n for n in option.opts if not n.startswith("--") and n not in names]
    if "--help" not in names:
        names.append("--help")
    return list(dict.fromkeys(names))


# ------------------------------------------------------------------------------------------------ the engine


class Completer:
    """Candidates for the word under the cursor; the sources are injectable for tests."""

    def __init__(
        self,
        root: Any,
        *,
        ids: Callable[[], list[str]] | None = None,
        namespaces_of: Callable[[str | None, str | None], list[str]] | None = None,
        contexts_of: Callable[[str | None], list[str]] | None = None,
    ) -> None:
        self.root = root
        self.ids = ids or record_ids
        self.namespaces_of = namespaces_of or namespaces
        self.contexts_of = contexts_of or contexts

    def complete(self, words: Sequence[str]) -> tuple[list[str], int]:
        words = list(words) or [""]
        current, before = words[-1], words[:-1]
        chain = [self.root]
        path: list[str] = []
        positionals: list[str] = []
        pending: Any | None = None
        given: dict[str, str] = {}
        only_args = False
        for word in before:
            if pending is not None:
                given[_long(pending)] = word
                pending = None
                continue
            if not only_args and word == "--":
                only_args = True
                continue
            if not only_args and word.startswith("-") and len(word) > 1:
                name, eq, value = word.partition("=")
                option = _find_option(chain, name)
                if option is not None and _takes_value(option):
                    if eq:
                        given[_long(option)] = value
                    else:
                        pending = option
                continue
            subs = _subcommands(chain[-1])
            if not positionals and word in subs:
                chain.append(_subcommand(chain[-1], word))
                path.append(word)
                continue
            positionals.append(word)
        if pending is not None:
            return self._values(pending, current, given)
        if not only_args and current.startswith("-") and "=" in current:
            name, _, value = current.partition("=")
            option = _find_option(chain, name)
            if option is not None and _takes_value(option):
                return self._values(option, value, given)
            return [], NO_FILES
        if not only_args and current.startswith("-"):
            return _prefixed(_flag_names(chain[-1], self.root), current), NO_FILES
        subs = _subcommands(chain[-1])
        if subs and not positionals:
            visible = [name for name in subs if not getattr(_subcommand(chain[-1], name), "hidden", False)]
            return _prefixed(visible, current), NO_FILES
        key = tuple(path)
        if key in RECORD_ID_VERBS and not positionals:
            return _prefixed(self.ids(), current), NO_FILES
        if key == ("completion",) and not positionals:
            return _prefixed(SHELLS, current), NO_FILES
        if key in FILE_ARG_VERBS:
            return [], FILES
        return [], NO_FILES

    def _values(self, option: Any, current: str, given: dict[str, str]) -> tuple[list[str], int]:
        import click

        names = set(option.opts) | set(option.secondary_opts)
        if names & {"--namespace", "-n"}:
            return _prefixed(self.namespaces_of(given.get("--context"), given.get("--kubeconfig")), current), NO_FILES
        if "--context" in names:
            return _prefixed(self.contexts_of(given.get("--kubeconfig")), current), NO_FILES
        if names & FILE_FLAGS or isinstance(option.type, click.Path | click.File):
            return [], FILES
        if isinstance(option.type, click.Choice):
            return _prefixed([str(c) for c in option.type.choices], current), NO_FILES
        # A flag whose verb knows its values (-o: the formats that verb takes) completes them itself.
        offered = [item.value for item in option.shell_complete(click.Context(click.Command(None)), current)]
        if offered:
            return _prefixed(offered, current), NO_FILES
        for name in names:
            if name in VALUE_CHOICES:
                return _prefixed(VALUE_CHOICES[name], current), NO_FILES
        return [], NO_FILES


def _long(option: Any) -> str:
    return next((n for n in option.opts if n.startswith("--")), option.opts[0])


def _prefixed(candidates: Iterable[str], prefix: str) -> list[str]:
    return [c for c in dict.fromkeys(candidates) if c.startswith(prefix)]


def render(candidates: Sequence[str], directive: int) -> str:
    """The helper's output: candidates one a line, then `:DIRECTIVE`."""
    return "".join(f"{c}\n" for c in candidates) + f":{directive}\n"


# ------------------------------------------------------------------------------------------------ scripts

BASH_SCRIPT = r"""# bash completion for kubectl-tao
# Load it now:       source <(kubectl-tao completion bash)
# Or for every shell: kubectl-tao completion bash > ~/.local/share/bash-completion/completions/kubectl-tao
# (`kubectl tao <TAB>` completes through kubectl itself: put kubectl_complete-tao on PATH.)

_kubectl_tao_completion() {
    local line="${COMP_LINE:0:COMP_POINT}"
    local -a words lines
    read -r -a words <<<"$line"
    if [[ -z "$line" || "$line" == *[[:space:]] ]]; then
        words+=("")
    fi
    local out
    out="$(kubectl-tao completion __complete -- "${words[@]:1}" 2>/dev/null)" || return 0
    mapfile -t lines <<<"$out"
    local directive=4
    if ((${#lines[@]} > 0)) && [[ "${lines[${#lines[@]}-1]}" == :* ]]; then
        directive="${lines[${#lines[@]}-1]#:}"
        unset 'lines[${#lines[@]}-1]'
    fi
    COMPREPLY=()
    local candidate
    for candidate in "${lines[@]}"; do
        [[ -n "$candidate" ]] && COMPREPLY+=("$candidate")
    done
    if ((${#COMPREPLY[@]} == 0 && (directive & 4) == 0)); then
        compopt -o default 2>/dev/null || true
    fi
    return 0
}

complete -F _kubectl_tao_completion kubectl-tao
"""

ZSH_SCRIPT = r"""#compdef kubectl-tao
# zsh completion for kubectl-tao
# Load it now:       source <(kubectl-tao completion zsh)      (after compinit)
# Or for every shell: kubectl-tao completion zsh > "${fpath[1]}/_kubectl-tao"
# (`kubectl tao <TAB>` completes through kubectl itself: put kubectl_complete-tao on PATH.)

_kubectl-tao() {
    local out directive=4
    local -a lines candidates
    out="$(kubectl-tao completion __complete -- "${(@)words[2,CURRENT]}" 2>/dev/null)" || return 1
    lines=("${(@f)out}")
    if [[ "${lines[-1]}" == :* ]]; then
        directive="${lines[-1]#:}"
        lines=("${(@)lines[1,-2]}")
    fi
    candidates=("${(@)lines:#}")
    if (( ${#candidates} )); then
        [[ "${words[CURRENT]}" == -*=* ]] && compset -P '*='
        compadd -Q -- "${candidates[@]}"
    elif (( (directive & 4) == 0 )); then
        _files
    fi
}

if [[ "${funcstack[1]}" == "_kubectl-tao" ]]; then
    _kubectl-tao "$@"
else
    compdef _kubectl-tao kubectl-tao
fi
"""

FISH_SCRIPT = r"""# fish completion for kubectl-tao
# Load it now:       kubectl-tao completion fish | source
# Or for every shell: kubectl-tao completion fish > ~/.config/fish/completions/kubectl-tao.fish
# (`kubectl tao <TAB>` completes through kubectl itself: put kubectl_complete-tao on PATH and load
# `kubectl completion fish | source`.)

function __kubectl_tao_complete
    set -l words (commandline -opc)
    set -e words[1]
    set -l current (commandline -ct)
    set -l out (kubectl-tao completion __complete -- $words "$current" 2>/dev/null)
    or return 0
    set -l directive 4
    if test (count $out) -gt 0; and string match -q -- ':*' $out[-1]
        set directive (string sub -s 2 -- $out[-1])
        set -e out[-1]
    end
    # fish replaces the whole token: give back the `--flag=` part of `--flag=value`.
    set -l prefix ''
    if string match -q -r -- '^-[^=]*=' "$current"
        set prefix (string replace -r -- '=.*' '=' "$current")
    end
    set -l shown 0
    for candidate in $out
        if test -n "$candidate"
            echo "$prefix$candidate"
            set shown 1
        end
    end
    if test $shown -eq 0; and test (math "bitand($directive, 4)") -eq 0
        __fish_complete_path "$current"
    end
end

complete -c kubectl-tao -f -a '(__kubectl_tao_complete)'
"""

SCRIPTS = {"bash": BASH_SCRIPT, "zsh": ZSH_SCRIPT, "fish": FISH_SCRIPT}
