"""The typer app: wires the verbs and the global flags. No logic of its own.

Start-up time counts (completion and scripts start the program again and again), so a verb's click command,
with its parameters, is built only when that verb is looked up: `kubectl tao status X` builds `status` alone,
and `kubectl tao --help` lists the verbs from their help texts without building any of them.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator, MutableMapping
from typing import Any

import click
import typer
import typer.main
import typer.models
from typer.core import TyperGroup

from kubectl_tao.commands.common import GLOBAL_FLAGS_HELP, cluster_params, set_root_options

# Verb -> its module under commands/ (each exposes register(app)), in --help order: typer lists the plain
# verbs first, then the groups of verbs (record, probe, secret).
VERBS = {
    "preflight": "preflight",
    "fit": "fit",
    "gpus": "gpus",
    "submit": "submit",
    "status": "status",
    "logs": "logs",
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
}


class _Verbs(MutableMapping[str, click.Command]):
    """The root group's commands: every verb's name up front, its click command built on first access."""

    def __init__(self, given: dict[str, click.Command] | None = None) -> None:
        self._built: dict[str, click.Command] = dict(given or {})
        self._names = [*VERBS, *(name for name in self._built if name not in VERBS)]
        self._registered: dict[str, typer.Typer] = {}

    def _registration(self, name: str) -> typer.Typer:
        """The verb's module registered into an app of its own: typer's records of it, no click objects yet."""
        if name not in self._registered:
            module = importlib.import_module(f"kubectl_tao.commands.{VERBS[name]}")
            holder = typer.Typer()
            module.register(holder)
            self._registered[name] = holder
        return self._registered[name]

    def _info(self, name: str) -> Any:
        holder = self._registration(name)
        for info in holder.registered_commands:
            if (info.name or typer.main.get_command_name(info.callback.__name__)) == name:
                return info
        for group in holder.registered_groups:
            if group.name == name:
                return group
        raise LookupError(f"commands/{VERBS[name]}.py registers no verb {name!r}")

    def summary(self, name: str) -> click.Command | None:
        """What --help lists of a verb (its help and visibility) without building its parameters."""
        if name in self._built or name not in VERBS:
            return self._built.get(name)
        info = self._info(name)
        if isinstance(info, typer.models.TyperInfo):
            solved = typer.main.solve_typer_info_defaults(info)
            text, short, hidden, deprecated = solved.help, solved.short_help, solved.hidden, solved.deprecated
        else:
            text = inspect.getdoc(info.callback) if info.help is None else inspect.cleandoc(info.help)
            short, hidden, deprecated = info.short_help, info.hidden, info.deprecated
        return click.Command(name, help=text, short_help=short, hidden=hidden, deprecated=deprecated)

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._built:
            if name not in VERBS:
                raise KeyError(name)
            info = self._info(name)
            if isinstance(info, typer.models.TyperInfo):
                self._built[name] = typer.main.get_group_from_info(
                    info,
                    pretty_exceptions_short=app.pretty_exceptions_short,
                    rich_markup_mode=app.rich_markup_mode,
                    suggest_commands=app.suggest_commands,
                )
            else:
                self._built[name] = typer.main.get_command_from_info(
                    info, pretty_exceptions_short=app.pretty_exceptions_short, rich_markup_mode=app.rich_markup_mode
                )
        return self._built[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._built[name] = command
        if name not in self._names:
            self._names.append(name)

    def __delitem__(self, name: str) -> None:
        self._built.pop(name, None)
        self._names.remove(name)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._names))

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names


class VerbGroup(TyperGroup):
    """The root group, over _Verbs: one verb built per run, --help from the verbs' summaries."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands: _Verbs = _Verbs(self.commands)  # type: ignore[assignment]
        self._listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)  # names only (TyperGroup's own reads every command)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            self._listing = False

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if self._listing:
            return self.commands.summary(cmd_name)
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


_VERSION_FLAG = inspect.Parameter(
    "version",
    inspect.Parameter.KEYWORD_ONLY,
    annotation=bool,
    default=typer.Option(
        False, "--version", is_eager=True, callback=_print_version, help="Print the kubectl-tao version and exit."
    ),
)


def _root(**kwargs: str | bool | None) -> None:
    kwargs.pop("version", None)  # handled by its eager callback
    set_root_options(**{k: v for k, v in kwargs.items() if not isinstance(v, bool)})


_root.__signature__ = inspect.Signature([*cluster_params(), _VERSION_FLAG])  # type: ignore[attr-defined]
_root.__annotations__ = {**{p.name: str | None for p in cluster_params()}, "version": bool}
app.callback()(_root)
