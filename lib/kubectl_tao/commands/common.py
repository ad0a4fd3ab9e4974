"""Plumbing shared by the verbs: the global cluster flags, the output flag, the session."""

from __future__ import annotations

from typing import Any

import click
import typer
from typer.core import TyperCommand

from kubectl_tao.commands.session import (  # noqa: F401  (re-exported: the verbs import them from here)
    CLUSTER_ENVVARS,
    CLUSTER_KEYS,
    GLOBAL_FLAGS_HELP,
    Session,
    lazy_record_store,
    record_store,
    reset_session,
    session,
    set_root_options,
    use_verb_options,
)


def cluster_options() -> list[click.Option]:
    """The global flags as click options (every verb takes them, and so does the root)."""
    return [
        click.Option(
            ["context", "--context"], envvar=CLUSTER_ENVVARS["context"], show_envvar=True,
            help="kubeconfig context to use.",
        ),
        click.Option(
            ["namespace", "--namespace", "-n"], envvar=CLUSTER_ENVVARS["namespace"], show_envvar=True,
            help="Namespace of the job.",
        ),
        click.Option(["kubeconfig", "--kubeconfig"], help="Path to the kubeconfig file."),
        click.Option(["request_timeout", "--request-timeout"], help="Passed to every kubectl call (e.g. 30s)."),
    ]


class VerbCommand(TyperCommand):
    """A verb's command (`@app.command(cls=VerbCommand)`): typer's, plus the global flags; values given after
    the verb win over those given before it. The verb's function receives none of them (see session())."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cluster_params = cluster_options()
        self.params.extend(self.cluster_params)

    def invoke(self, ctx: click.Context) -> Any:
        use_verb_options({key: ctx.params.pop(key, None) for key in CLUSTER_KEYS})
        return super().invoke(ctx)


OutputOption = typer.Option("table", "--output", "-o", help="Output format: table (default), wide, json, yaml, name.")
NoHeadersOption = typer.Option(False, "--no-headers", help="Omit the table header line.")
