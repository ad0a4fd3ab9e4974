"""`kubectl tao completion bash|zsh|fish`: print a shell completion script for `kubectl-tao`."""

from __future__ import annotations

import typer

from kubectl_tao.commands.common import VerbCommand

EPILOG = """\b
Examples:
  # bash, this shell only / every shell
  source <(kubectl-tao completion bash)
  kubectl-tao completion bash > ~/.local/share/bash-completion/completions/kubectl-tao
  # zsh (after compinit)
  kubectl-tao completion zsh > "${fpath[1]}/_kubectl-tao"
  # fish
  kubectl-tao completion fish > ~/.config/fish/completions/kubectl-tao.fish

\b
`kubectl tao <TAB>` completes through kubectl (>= 1.26) when the executable kubectl_complete-tao (shipped in
scripts/, installed by `make install`) is on PATH next to kubectl-tao, with kubectl's own completion loaded
(`source <(kubectl completion bash)`, zsh alike, or `kubectl completion fish | source`). Both complete verbs,
flags, record ids (from the record store, no cluster call) and namespaces after -n (one `kubectl get
namespaces`, 3 s at most)."""


def register(app: typer.Typer) -> None:
    @app.command(
        "completion",
        epilog=EPILOG,
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        cls=VerbCommand,
    )
    def completion(
        ctx: typer.Context,
        shell: str = typer.Argument(..., metavar="SHELL", help="bash, zsh or fish."),
    ) -> int:
        """Print a bash, zsh or fish completion script for kubectl-tao."""
        from kubectl_tao.cli.completion import SCRIPTS, Completer, render
        from kubectl_tao.cli.output import emit
        from kubectl_tao.core.errors import UsageError

        words = list(ctx.args)
        if shell == "__complete":  # what the printed scripts call: candidates for the words typed
            candidates, directive = Completer(ctx.find_root().command).complete(words)
            emit(render(candidates, directive))
            return 0
        if shell not in SCRIPTS:
            raise UsageError(f"SHELL {shell!r}: use one of {', '.join(SCRIPTS)}")
        if words:
            raise UsageError(f"completion takes one SHELL; unexpected {words[0]!r}")
        emit(SCRIPTS[shell])
        return 0
