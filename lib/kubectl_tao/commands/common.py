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


# The -o formats of each kind of verb, the default first (cli/output.check_format reads them the same way).
TABLE_FORMATS = ("table", "wide", "json", "yaml", "name")  # list, status
DATA_FORMATS = ("table", "json", "yaml")  # version, explain, preflight, fit, probe nccl: text by default
ACTION_FORMATS = ("table", "json", "yaml", "name")  # submit, resubmit, cancel: text by default
MANIFEST_FORMATS = ("yaml", "json")  # render


def _one_of(names: tuple[str, ...]) -> str:
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


def output_option(allowed: tuple[str, ...] = TABLE_FORMATS, printout: str = "a table", about: str = "") -> Any:
    """The -o/--output flag of a verb taking ALLOWED, its help generated from them (PRINTOUT: what the verb
    prints without -o; ABOUT: what the formats show, when that needs saying)."""
    if allowed[0] == "table":  # the verb's own printout, which -o need not name
        text = f"Output format: {_one_of(allowed[1:])} (default: {printout})."
    else:
        text = f"Output format: {_one_of((f'{allowed[0]} (default)', *allowed[1:]))}."
    text = f"{text[:-1]}: {about}." if about else text
    offered = tuple(name for name in allowed if name != "table")

    def complete(_ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
        return [name for name in offered if name.startswith(incomplete)]  # shell completion offers the same

    return typer.Option(allowed[0], "--output", "-o", help=text, shell_complete=complete)


OutputOption = output_option()


def check_seconds(**given: float | None) -> None:
    """The waiting limits given (flag spelled with underscores -> seconds): each a positive, finite number of
    seconds, or UsageError naming the flag (before any cluster call)."""
    import math

    from kubectl_tao.core.errors import UsageError

    for key, value in given.items():
        if value is not None and not (math.isfinite(value) and value > 0):
            flag = "--" + key.replace("_", "-")
            raise UsageError(f"{flag} {value:g}: give a positive number of seconds (leave {flag} out for no limit)")
NoHeadersOption = typer.Option(False, "--no-headers", help="Omit the table header line.")


def verb_group(name: str, help: str, epilog: str, cls: Any = None) -> typer.Typer:
    """The typer app of a verb with subcommands (`probe nccl`, `record open`, `secret image-pull`): its help
    when called bare, no completion of its own, plain-text help; CLS, a click group class of its own."""
    return typer.Typer(
        name=name, cls=cls, help=help, no_args_is_help=True, add_completion=False, rich_markup_mode=None,
        epilog=epilog,
    )
