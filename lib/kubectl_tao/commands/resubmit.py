"""`kubectl tao resubmit JOB`: a new job from the request a record kept, writing to the same results directory."""

from __future__ import annotations

import typer

from kubectl_tao.commands.common import ACTION_FORMATS, VerbCommand, check_seconds, output_option, record_store, session

EPILOG = """\b
Examples:
  kubectl tao resubmit dino-train-3f9a1c                    # the same job again, resuming from its results dir
  kubectl tao resubmit dino-train-3f9a1c --max-restarts 3   # ... and let a crashed rank restart the gang
  kubectl tao resubmit dino-train-3f9a1c --wait

\b
The new job has the old one's image, command, flags and credential references (the --env-secret name, the
--env-file path and --env names, read again now: values are never kept), in the old record's namespace, and
writes to the old job's results directory, so a resume-aware script or TAO picks up its checkpoints
(docs/restarts.md). Works in any state, also after ttlSecondsAfterFinished removed the Job. The new record names
the old one (retry_of), the old one the new (resubmitted_as). Refused in one line when the record keeps no job
request (submitted by another tool or an older kubectl-tao) or is pinned to another cluster (--force: here).
Exit codes as submit's."""


def register(app: typer.Typer) -> None:
    app.command("resubmit", epilog=EPILOG, cls=VerbCommand)(resubmit)


def resubmit(
    job: str = typer.Argument(..., help="Record id of the job to run again (see `kubectl tao list`)."),
    max_restarts: int = typer.Option(
        None, "--max-restarts", help="Restart every rank in place up to N times (default: as the old job)."
    ),
    wait: bool = typer.Option(False, "--wait", help="Wait until the job ends; exit 0 only if it COMPLETEs."),
    timeout: float = typer.Option(None, "--timeout", help="With --wait: stop waiting after SECONDS."),
    dry_run: str = typer.Option("none", "--dry-run", help="none (default), client (render only) or server."),
    force: bool = typer.Option(
        False, "--force", help="Resubmit to the current cluster even if the record names another."
    ),
    output: str = output_option(ACTION_FORMATS, "the new record id"),
) -> int:
    """Run a job again from its record, into the same results directory."""
    from kubectl_tao.cli.output import check_format
    from kubectl_tao.commands.submit import run_submit
    from kubectl_tao.core.errors import UsageError
    from kubectl_tao.jobs import track as tracking

    fmt = check_format(output, ACTION_FORMATS)
    if dry_run not in ("none", "client", "server"):
        raise UsageError(f"--dry-run={dry_run!r}: use none, client or server")
    check_seconds(timeout=timeout)
    if timeout and not wait:
        raise UsageError("--timeout needs --wait")
    store = record_store()
    tracked = tracking.load(store, job)
    tracking.refuse_other_platform(tracked, "resubmit")
    tracking.check_pin(tracked, session().target().server, force=force)
    from kubectl_tao.jobs.resubmit import request_from_record

    request = request_from_record(
        tracked.id, tracked.record, tracked.extra, max_restarts,
        files=(str(store.path(tracked.id)), str(store.extra_path(tracked.id))),
    )

    def link(new_id: str) -> None:
        from kubectl_tao.store.jobrecord import K8sRecord

        earlier = K8sRecord.from_stored(store.get_extra(tracked.id)).resubmitted_as
        store.update_k8s(tracked.id, resubmitted_as=(*earlier, new_id))

    return run_submit(
        request, dry_run=dry_run, wait=wait, timeout=timeout, fmt=fmt,
        namespace=tracked.namespace, record_fields={"retry_of": tracked.id}, on_created=link,
    )
