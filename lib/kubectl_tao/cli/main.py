"""The process entry: runs the typer app (app.py) and maps errors to exit codes."""

from __future__ import annotations

import sys
from pathlib import Path

from kubectl_tao.core.errors import EXIT_FAILURE, EXIT_USAGE, TaoError


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
    """Every error goes through the redactor (messages quote flags, file lines and kubectl's own words) and the
    sanitizer (kubectl's words may quote the cluster's): one line that cannot drive the terminal."""
    from kubectl_tao.core.redact import redact_message
    from kubectl_tao.core.sanitize import sanitize

    return sanitize(redact_message(message))


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (see errors.py)."""
    args = list(sys.argv[1:] if argv is None else argv)
    position = _not_utf8(args)
    if position is not None:
        sys.stderr.write(f"error: argument {position} is not valid UTF-8 text; pass UTF-8 values only\n")
        return EXIT_USAGE
    try:
        return _run_app(args)
    except TaoError as exc:
        # kubectl's own words start with "error: " too: printed once.
        message = exc.message[len("error: "):] if exc.message.lower().startswith("error: ") else exc.message
        sys.stderr.write(f"error: {_scrubbed(message)}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug: short message on the terminal, the traceback in a file
        try:
            import traceback

            from kubectl_tao.core.atomicwrite import write_atomically
            from kubectl_tao.core.redact import redact_text

            log = _crash_log()
            write_atomically(log, redact_text(traceback.format_exc()).encode("utf-8"))
            where = f"; details in {log}"
        except (OSError, TaoError):  # no crash log rather than one written through a planted link
            where = ""
        sys.stderr.write(f"error: internal error ({type(exc).__name__}){where}\n")
        return EXIT_FAILURE


def _run_app(args: list[str]) -> int:
    """The typer app over ARGS: click's usage errors, help and exits become exit codes here; TaoError and
    anything else go up to main."""
    import click

    from kubectl_tao.cli.app import app

    try:
        result = app(args=args, prog_name=_prog_name(), standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        sys.stdout.write(exc.ctx.get_help() + "\n" if exc.ctx else "")
        return 0
    except click.exceptions.UsageError as exc:
        where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
        sys.stderr.write(f"error: {_scrubbed(_usage_message(exc))}{where}\n")
        return EXIT_USAGE
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        sys.stderr.write("error: interrupted\n")
        return 130
    return result if isinstance(result, int) else 0


def _usage_message(exc: Exception) -> str:
    """click's usage error in one line; a mistyped verb or flag gets its close names, the closest first (click
    sorts them by name, and knows no verb of the root group, whose verbs are built only when looked up)."""
    import click

    if isinstance(exc, click.exceptions.NoSuchOption):
        word, candidates = exc.option_name, _option_names(exc.ctx)
    elif isinstance(exc, click.exceptions.NoSuchCommand):
        group = exc.ctx.command if exc.ctx else None
        word = exc.command_name
        candidates = group.list_commands(exc.ctx) if isinstance(group, click.Group) and exc.ctx else []
    else:
        return exc.format_message() if isinstance(exc, click.exceptions.UsageError) else str(exc)
    from kubectl_tao.core.suggest import did_you_mean

    head = exc.message.partition(" Did you mean")[0]  # typer may have added click's suggestion to the message
    return head + did_you_mean(word, candidates)


def _option_names(ctx: object) -> list[str]:
    """The long flags of CTX's command, as click offers them for a mistyped flag."""
    import click

    if not isinstance(ctx, click.Context):
        return []
    return [name for param in ctx.command.get_params(ctx) for name in param.opts if name.startswith("--")]


def run() -> None:
    code = main()
    # The exit would walk every object left in a reference cycle (a big cluster's reduced lists among them:
    # 100 ms at 50,000 pods) only to free memory the process gives back anyway. Frozen objects are left to
    # the exit; atexit handlers, thread joins and the flushing of output still run.
    import gc

    gc.freeze()
    sys.exit(code)


def complete(argv: list[str] | None = None) -> int:
    """Entry point of kubectl_complete-tao (`kubectl_complete-tao WORD... CURRENT`): the candidates, one a line,
    then the directive line; never a traceback into the user's prompt."""
    from kubectl_tao.cli.completion import NO_FILES, Completer, render

    words = list(sys.argv[1:] if argv is None else argv)
    try:
        import typer

        from kubectl_tao.cli.app import app

        candidates, directive = Completer(typer.main.get_command(app)).complete(words)
    except Exception:
        candidates, directive = [], NO_FILES
    sys.stdout.write(render(candidates, directive))
    return 0


if __name__ == "__main__":
    run()
