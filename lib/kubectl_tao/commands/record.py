"""`kubectl tao record open|mark|show|list`: the job-record store, as `scripts/tao_job_record` offers it."""

from __future__ import annotations

from typing import Annotated

import typer

from kubectl_tao.commands.common import (
    ACTION_FORMATS,
    NoHeadersOption,
    VerbCommand,
    output_option,
    record_store,
    verb_group,
)

EPILOG = """\b
Examples:
  id=$(kubectl tao record open --image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt --network-arch dino \\
      --action train --storage-tier A --results-root /workspace/results)
  kubectl tao record mark "$id" --state RUNNING --backend-ref tao/"$id"
  kubectl tao record show "$id" -o yaml
  kubectl tao record list -o json

\b
Records live in $TAO_STATE_DIR/jobs (TAO_STATE_DIR must be absolute), else ~/.tao/jobs, in the format the
TAO skill bank's tao_job_record reads and writes. Exit codes: 0 ok, 1 illegal transition, missing record or a
record file that cannot be used (not a regular file, over 16 MiB, nested too deep, not a record, another
record's id: `list` skips such a file with a warning), 2 bad flags or values."""

record_app = verb_group("record", "Open, mark, show and list job records (the store tao_job_record shares).", EPILOG)


def _format(value: str, allowed: tuple[str, ...]) -> str:
    from kubectl_tao.core.errors import UsageError

    fmt = (value or allowed[0]).lower()
    if fmt not in allowed:
        raise UsageError(f"-o/--output: unknown format {value!r}; use one of {', '.join(allowed)}")
    return fmt


def _emit_record(record: dict, fmt: str) -> None:
    from kubectl_tao.cli.output import dump_json, dump_yaml, emit

    emit(dump_yaml(dict(record)) if fmt == "yaml" else dump_json(dict(record)))


@record_app.command(
    "open",
    epilog="\b\nExamples:\n  kubectl tao record open --image IMG --network-arch dino --action train "
    "--storage-tier A --results-root /workspace/results\n  kubectl tao record open ... -o json",
    cls=VerbCommand,
)
def open_(
    image: str = typer.Option(..., "--image", help="Container image the job runs."),
    network_arch: str = typer.Option(..., "--network-arch", help="TAO network architecture (id prefix)."),
    action: str = typer.Option(..., "--action", help="TAO action, e.g. train (id part)."),
    storage_tier: str = typer.Option(..., "--storage-tier", help="A, B or C."),
    platform: str = typer.Option("kubernetes", "--platform", help="Platform the job runs on."),
    results_dir: str = typer.Option(None, "--results-dir", help="Results directory (or s3:// prefix)."),
    results_root: str = typer.Option(None, "--results-root", help="Results go to ROOT/<id>."),
    upload_exclude: Annotated[
        list[str] | None, typer.Option("--upload-exclude", help="Glob left out of uploads (repeat).")
    ] = None,
    parent_job: str = typer.Option(None, "--parent-job", help="Record id of the parent job."),
    retry_of: str = typer.Option(None, "--retry-of", help="Record id this job retries."),
    output: str = output_option(("name", "json", "yaml"), about="name prints the new id"),
) -> int:
    """Open a record (state OPEN until launched) and print its new id."""
    from kubectl_tao.cli.output import emit

    fmt = _format(output, ("name", "json", "yaml"))
    record = record_store().open(
        platform=platform,
        image=image,
        network_arch=network_arch,
        action=action,
        storage_tier=storage_tier,
        results_dir=results_dir,
        results_root=results_root,
        upload_excludes=upload_exclude or [],
        parent_job=parent_job,
        retry_of=retry_of,
    )
    if fmt == "name":
        emit(record.id + "\n")
    else:
        _emit_record(record, fmt)
    return 0


@record_app.command(
    "mark",
    epilog="\b\nExamples:\n  kubectl tao record mark ID --state RUNNING --backend-ref tao/JOB\n"
    "  kubectl tao record mark ID --state ERROR --err-class ERR_INFRA --message 'node lost'",
    cls=VerbCommand,
)
def mark(
    record_id: str = typer.Argument(..., metavar="ID", help="Record id."),
    state: str = typer.Option(..., "--state", help="PENDING, RUNNING, COMPLETE, ERROR, CANCELED or UNKNOWN."),
    message: str = typer.Option("", "--message", help="Why (redacted before it is stored)."),
    source: str = typer.Option("agent", "--source", help="agent, poller or backend-hook."),
    backend_ref: str = typer.Option(None, "--backend-ref", help="NAMESPACE/NAME of the Kubernetes Job."),
    err_class: str = typer.Option(None, "--err-class", help="With --state ERROR: ERR_INFRA or ERR_PROGRAM."),
    output: str = output_option(("none", "json", "yaml"), about="the record after the mark"),
) -> int:
    """Append a state transition to a record (final states stay final)."""
    fmt = _format(output, ("none", "json", "yaml"))
    record = record_store().mark(record_id, state, message, source, backend_ref, err_class)
    if fmt != "none":
        _emit_record(record, fmt)
    return 0


@record_app.command(
    "show", epilog="\b\nExamples:\n  kubectl tao record show ID\n  kubectl tao record show ID -o yaml", cls=VerbCommand
)
def show(
    record_id: str = typer.Argument(..., metavar="ID", help="Record id."),
    output: str = output_option(("json", "yaml")),
) -> int:
    """Print a record (redacted) as JSON or YAML."""
    fmt = _format(output, ("json", "yaml"))
    _emit_record(record_store().show(record_id), fmt)
    return 0


@record_app.command(
    "list",
    epilog="\b\nExamples:\n  kubectl tao record list\n  kubectl tao record list -o json --no-headers",
    cls=VerbCommand,
)
def list_(output: str = output_option(ACTION_FORMATS), no_headers: bool = NoHeadersOption) -> int:
    """List records, newest first, without asking the cluster."""
    from kubectl_tao.cli.output import as_list, check_format, emit, emit_data, info, table

    fmt = check_format(output, ACTION_FORMATS)
    errors: list[str] = []
    records = record_store().list(errors)
    for problem in errors:
        info(f"warning: {problem}")
    if fmt == "name":
        emit("".join(f"{r.id}\n" for r in records))
    elif not emit_data(fmt, as_list([dict(r) for r in records])):
        from kubectl_tao.store.jobrecord import JobRecord

        typed = [JobRecord.from_stored(r) for r in records]
        rows = [[r.id, r.platform, r.effective_state, r.results_dir] for r in typed]
        emit(table(rows, ["ID", "PLATFORM", "STATE", "RESULTS_DIR"], no_headers=no_headers))
    return 0


def register(app: typer.Typer) -> None:
    app.add_typer(record_app, name="record")
