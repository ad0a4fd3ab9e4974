"""`kubectl tao cancel JOB`."""

from __future__ import annotations

import typer

from kubectl_tao.commands.common import ACTION_FORMATS, VerbCommand, output_option, record_store, session

EPILOG = """\b
Examples:
  kubectl tao cancel dino-train-3f9a1c
  kubectl tao cancel dino-train-3f9a1c --wait=false

\b
Deletes the Job with a UID precondition and foreground cascade (its pods first), its headless Service and its
credential Secret, then marks the record CANCELED. Cancelling twice is fine; a finished job is refused."""


def register(app: typer.Typer) -> None:
    @app.command("cancel", epilog=EPILOG, cls=VerbCommand)
    def cancel(
        job: str = typer.Argument(..., help="Record id (see `kubectl tao list`)."),
        wait: str = typer.Option(
            "true", "--wait", metavar="true|false", help="Wait until pods, Service and Secret are gone (kubectl style)."
        ),
        no_wait: bool = typer.Option(False, "--no-wait", help="Same as --wait=false."),
        timeout: float = typer.Option(120.0, "--timeout", help="Seconds to wait for the objects to go."),
        force: bool = typer.Option(
            False, "--force", help="Skip the cluster pin (never the check that the Job is this record's)."
        ),
        output: str = output_option(ACTION_FORMATS, "text"),
    ) -> int:
        """Stop a job: delete its Job, Service and Secret, and mark its record CANCELED."""
        from kubectl_tao.cli.output import check_format, emit, emit_data, info
        from kubectl_tao.jobs import track as tracking
        from kubectl_tao.jobs.cancel import cancel as run_cancel

        fmt = check_format(output, ACTION_FORMATS)
        if wait.lower() not in ("true", "false"):
            from kubectl_tao.core.errors import UsageError

            raise UsageError(f"--wait={wait}: use --wait=true (the default) or --wait=false")
        sess = session()
        store = record_store()
        tracked = tracking.load(store, job)
        result = run_cancel(
            sess.kubectl(),
            store,
            tracked,
            server=sess.target().server,
            force=force,
            wait=wait.lower() == "true" and not no_wait,
            timeout=timeout,
        )
        if fmt == "name":
            emit(f"job/{result.record_id}\n")
        elif emit_data(fmt, result.to_dict()):
            pass  # json/yaml
        elif result.already:
            emit(f"job {result.record_id} was already canceled\n")
        else:
            for name in result.deleted:
                info(f"deleted {name}")
            emit(f"job {result.record_id} canceled\n")
        if result.leftovers:
            info("warning: still present: " + ", ".join(result.leftovers))
            return 1
        return 0
