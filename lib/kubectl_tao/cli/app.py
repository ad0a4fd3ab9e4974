"""The typer app: wires the verbs and the global flags. No logic of its own.

Start-up time counts (completion and scripts start the program again and again), so a verb's module is
imported, and its click command built, only when that verb is looked up: `kubectl tao status X` builds
`status` alone. The root group does it through click's own hooks (list_commands / get_command); a verb's
command is what typer's public `typer.main.get_command` makes of the verb's registration.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

import click
import typer
import typer.main
from typer.core import TyperGroup

from kubectl_tao.commands.common import CLUSTER_KEYS, GLOBAL_FLAGS_HELP, cluster_options, set_root_options

# Verb -> its module under commands/ (each exposes register(app)), in --help order: the plain verbs first,
# then the groups of verbs (record, probe, secret, data, results).
VERBS = {
    "preflight": "preflight",
    "fit": "fit",
    "gpus": "gpus",
    "submit": "submit",
    "resubmit": "resubmit",
    "status": "status",
    "logs": "logs",
    "top": "top",
    "cancel": "cancel",
    "list": "list_",
    "explain": "explain",
    "render": "render",
    "lint": "lint",
    "completion": "completion",
    "version": "version",
    "record": "record",
    "probe": "probe",
    "secret": "secret",
    "workflow": "workflow",
    "data": "data",
    "results": "results",
}


@functools.cache
def verb_command(name: str) -> click.Command:
    """The click command of verb NAME: its module registered into a Typer of its own, made a click command."""
    module = importlib.import_module(f"kubectl_tao.commands.{VERBS[name]}")
    holder = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)
    module.register(holder)
    command = typer.main.get_command(holder)
    if isinstance(command, click.Group):  # a group of verbs (record, probe, secret) sits under a nameless group
        found = command.get_command(click.Context(command), name)
        if found is None:
            raise LookupError(f"commands/{VERBS[name]}.py registers no verb {name!r}")
        return found
    return command


class VerbGroup(TyperGroup):
    """The root group: every verb's name up front, a verb's command built when it is looked up; the global
    flags given before the verb (the verb's own copies of them win: commands/common.VerbCommand)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params[:0] = cluster_options()  # before --version, as --help lists them

    def invoke(self, ctx: click.Context) -> Any:
        set_root_options(**{key: ctx.params.pop(key, None) for key in CLUSTER_KEYS})
        return super().invoke(ctx)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*VERBS, *(name for name in super().list_commands(ctx) if name not in VERBS)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in VERBS:
            return verb_command(cmd_name)
        return super().get_command(ctx, cmd_name)


app = typer.Typer(
    name="kubectl tao",
    cls=VerbGroup,
    help=(
        "Run NVIDIA TAO and PyTorch-style GPU container jobs on Kubernetes with kubectl: single-pod Jobs "
        "for one node, Indexed Jobs plus a headless Service for several.\n\n" + GLOBAL_FLAGS_HELP
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)


def _print_version(value: bool) -> None:
    if value:
        from kubectl_tao.cli.output import emit
        from kubectl_tao.commands.version import client_version_line

        emit(client_version_line())
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_print_version, help="Print the kubectl-tao version and exit."
    ),
) -> None:
    pass  # --version is handled by its eager callback; the global flags by VerbGroup
