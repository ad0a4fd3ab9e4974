"""The typer app: wires the verbs and the global flags, maps errors to exit codes. No logic of its own."""

from __future__ import annotations

import importlib
import inspect
import sys
import traceback
from pathlib import Path

import click
import typer

from kubectl_tao.commands.common import GLOBAL_FLAGS_HELP, cluster_params, set_root_options
from kubectl_tao.errors import EXIT_FAILURE, EXIT_USAGE, TaoError

# One module per verb under commands/; each exposes register(app). Order is the order in --help.
VERB_MODULES = (
    "preflight",
    "fit",
    "gpus",
    "submit",
    "status",
    "logs",
    "cancel",
    "list_",
    "explain",
    "render",
    "lint",
    "record",
    "probe",
    "secret",
    "completion",
    "version",
)

app = typer.Typer(
    name="kubectl tao",
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
        from kubectl_tao.commands.version import client_version_line
        from kubectl_tao.output import emit

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


def _register_all() -> None:
    for name in VERB_MODULES:
        try:
            module = importlib.import_module(f".commands.{name}", __package__)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.endswith(f"commands.{name}"):
                continue  # verb not built yet
            raise
        module.register(app)


_register_all()


def _prog_name() -> str:
    base = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "kubectl-tao"
    return "kubectl tao" if base.startswith("kubectl-tao") or base == "__main__.py" else base


def _crash_log() -> Path:
    """The crash log's path, after checking the state directory is private (UsageError otherwise)."""
    from kubectl_tao.store.statedir import check_private, make_private_dirs
    from kubectl_tao.store.statedir import state_dir as default_state_dir

    root = default_state_dir()
    make_private_dirs(root)
    check_private(root)
    return root / "kubectl-tao-crash.log"


def _not_utf8(args: list[str]) -> int | None:
    """The 1-based position of the first argument that was not UTF-8 on the command line (Python hands
    such bytes over as lone surrogates; sent on, the server would turn them into U+FFFD)."""
    for position, arg in enumerate(args, start=1):
        if any("\ud800" <= ch <= "\udfff" for ch in arg):
            return position
    return None


def _scrubbed(message: str) -> str:
    """Every error goes through the redactor: messages quote flags, file lines and kubectl's own words."""
    from kubectl_tao.redact import redact_message

    return redact_message(message)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (see errors.py)."""
    args = list(sys.argv[1:] if argv is None else argv)
    position = _not_utf8(args)
    if position is not None:
        sys.stderr.write(f"error: argument {position} is not valid UTF-8 text; pass UTF-8 values only\n")
        return EXIT_USAGE
    try:
        result = app(args=args, prog_name=_prog_name(), standalone_mode=False)
    except TaoError as exc:
        sys.stderr.write(f"error: {_scrubbed(exc.message)}\n")
        return exc.exit_code
    except click.exceptions.NoArgsIsHelpError as exc:
        sys.stdout.write(exc.ctx.get_help() + "\n" if exc.ctx else "")
        return 0
    except click.exceptions.UsageError as exc:
        where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
        message = exc.format_message()
        head, sep, rest = message.partition(" Did you mean")
        if sep and sep in rest:  # click and typer both add the same suggestion
            message = head + sep + rest.split(sep)[0].rstrip()
        sys.stderr.write(f"error: {_scrubbed(message)}{where}\n")
        return EXIT_USAGE
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        sys.stderr.write("error: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug: short message on the terminal, the traceback in a file
        try:
            from kubectl_tao.redact import redact_text
            from kubectl_tao.store.statedir import write_private

            log = _crash_log()
            write_private(log, redact_text(traceback.format_exc()).encode("utf-8"))
            where = f"; details in {log}"
        except (OSError, TaoError):  # no crash log rather than one written through a planted link
            where = ""
        sys.stderr.write(f"error: internal error ({type(exc).__name__}){where}\n")
        return EXIT_FAILURE
    return result if isinstance(result, int) else 0


def run() -> None:
    raise SystemExit(main())


if __name__ == "__main__":
    run()
