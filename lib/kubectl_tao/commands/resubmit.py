"""`kubectl tao resubmit JOB`: a new job from the request a record kept, writing to the same results directory."""

from __future__ import annotations

from typing import Any

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
    request = request_from_record(
        tracked.id, tracked.record, tracked.extra, max_restarts,
        files=(str(store.path(tracked.id)), str(store.extra_path(tracked.id))),
    )

    def link(new_id: str) -> None:
        earlier = list(store.get_extra(tracked.id).get("resubmitted_as") or [])
        store.update_extra(tracked.id, resubmitted_as=[*earlier, new_id])

    return run_submit(
        request, dry_run=dry_run, wait=wait, timeout=timeout, fmt=fmt,
        namespace=tracked.namespace, record_fields={"retry_of": tracked.id}, on_created=link,
    )


def request_from_record(
    record_id: str, record: dict[str, Any], extra: dict[str, Any], max_restarts: int | None,
    files: tuple[str, str] = ("its record", "its record's additions"),
) -> Any:
    """The job request a record kept, bound to the record's results directory; MAX_RESTARTS (not None) replaces
    the kept one. UsageError (one line) when the record keeps no request, one this version cannot read, or a
    value of another type than `submit`'s parser gives the flag (a hand-edited record): each names the field,
    in FILES (the record's file, the file of its additions), and the fix. Then `submit`'s own checks follow."""
    from kubectl_tao.commands.jobflags import JOB_FLAGS, job_request, kept_value_problem
    from kubectl_tao.core.errors import UsageError

    kept = extra.get("request")
    flags = kept.get("flags") if isinstance(kept, dict) else None
    if not isinstance(flags, dict):
        raise UsageError(
            f"job {record_id}: its record keeps no job request (submitted by another tool or an older kubectl-tao), "
            "so it cannot be resubmitted; run `kubectl tao submit` with its flags"
        )
    from kubectl_tao.jobs.plan import flags_stored

    flags = flags_stored(flags)
    unknown = sorted(set(flags) - set(JOB_FLAGS))
    if unknown:
        raise UsageError(
            f"job {record_id}: its record's request has flags this kubectl-tao does not know ({', '.join(unknown)}); "
            "resubmit it with the kubectl-tao that submitted it"
        )
    record_file, extra_file = files
    fix = "correct it there, or run `kubectl tao submit` with the job's flags"
    for key, value in flags.items():
        problem = kept_value_problem(key, value)
        if problem is not None:
            raise UsageError(
                f"job {record_id}: request.flags.{key} in {extra_file} is {problem} (what {JOB_FLAGS[key].names[0]} "
                f"takes); {fix}"
            )
    kept_given = kept.get("given")
    if kept_given is not None and not (
        isinstance(kept_given, list) and all(isinstance(name, str) for name in kept_given)
    ):
        raise UsageError(f"job {record_id}: request.given in {extra_file} is not a list of flag names; {fix}")
    from kubectl_tao.core.redact import REDACTED

    for key, value in flags.items():
        texts = value if isinstance(value, list) else [value]
        if any(isinstance(text, str) and REDACTED in text for text in texts):
            flag = JOB_FLAGS[key].names[0]
            raise UsageError(
                f"job {record_id}: its record keeps {flag} with a credential redacted, so the job cannot be rebuilt "
                f"from it; submit it again with the credential in a Secret (--env NAME, --env-file or --env-secret)"
            )
    given = set(kept_given or []) & set(JOB_FLAGS)
    flags = dict(flags)
    results = record.get("results_dir")
    if not isinstance(results, str) or not results:
        raise UsageError(f"job {record_id}: its record names no results directory to resume from")
    if REDACTED in results:
        raise UsageError(
            f"job {record_id}: results_dir in {record_file} had a credential redacted, so it names no directory to "
            "resume from; run `kubectl tao submit` with the job's flags and --results-dir set to the directory"
        )
    if not flags.get("action_request"):  # an action request's results dir is a flag of its own, kept as given
        flags["results_dir"] = results
        given.add("results_dir")
        if str(flags.get("storage_tier") or "A").upper() == "C":
            flags["s3_output"] = None  # the old upload destination is the results dir now
            given.discard("s3_output")
    if max_restarts is not None:
        flags["max_restarts"] = max_restarts
        given.add("max_restarts")
    return job_request(frozenset(given), **flags)
