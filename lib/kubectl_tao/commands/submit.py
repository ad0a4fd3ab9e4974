"""`kubectl tao submit`: the job flags (commands/jobflags.py) plus submit's own, then jobs/submit.submit_request."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer

from kubectl_tao.commands.common import ACTION_FORMATS, check_seconds, lazy_record_store, output_option, session
from kubectl_tao.commands.jobflags import JobCommand, request_of

if TYPE_CHECKING:
    from kubectl_tao.jobs.plan import JobRequest
    from kubectl_tao.store.jobrecord import K8sRecord

EPILOG = """\b
Examples:
  # One node, 8 GPUs, data and results on a bound PVC (storage tier A)
  kubectl tao submit --image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt --network-arch dino --action train \\
      --gpus 8 --pvc tao-data --command "dino train -e /workspace/specs/train.yaml" --image-pull-secret ngc
  # Two nodes x 8 GPUs: an Indexed Job plus a headless Service, rendezvous env set for each rank
  kubectl tao submit --image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt --network-arch dino --action train \\
      --gpus 8 --nodes 2 --pvc tao-data --command "dino train -e /workspace/specs/train.yaml" --wait
  # Credentials go into a per-job Secret through stdin, never into the manifest or argv
  kubectl tao submit ... --env-file .env          # or: --env HF_TOKEN (taken from your environment)
  # See what would be applied, checked by the API server, without creating anything
  kubectl tao submit ... --dry-run=server -o yaml

\b
Order: render and secret lint; then at once: permissions, fit gate (GPUs x nodes, per node), version gate
(multi-node), PVC/Secret checks, gang mechanism (multi-node: native where the API server gang-schedules Jobs,
Kueue with --queue, else none) and create --dry-run=server; then open the record, create, mark RUNNING (a job
that will queue is created while its DRA GPUs are read: they can only make it fit now). A refused gate leaves
no record; a failure after the record opens marks it ERROR and removes what was created.
Exit codes: 0 ok, 1 gate/job failure, 2 bad input, 3 cluster unreachable, 4 the job can never fit this cluster."""


def register(app: typer.Typer) -> None:
    app.command("submit", epilog=EPILOG, cls=JobCommand)(submit)


def submit(
    ctx: typer.Context,
    dry_run: str = typer.Option("none", "--dry-run", help="none (default), client (render only) or server."),
    wait: bool = typer.Option(False, "--wait", help="Wait until the job ends; exit 0 only if it COMPLETEs."),
    timeout: float = typer.Option(None, "--timeout", help="With --wait: stop waiting after SECONDS."),
    pending_timeout: float = typer.Option(
        None, "--pending-timeout", help="With --wait: cancel and fail the job if Pending for SECONDS."
    ),
    image_pull_timeout: float = typer.Option(
        None,
        "--image-pull-timeout",
        help="With --wait: cancel and fail the job if its image pull fails for SECONDS.",
    ),
    require_fit_now: bool = typer.Option(
        False, "--require-fit-now", help="Refuse when the GPUs are not free now (instead of queueing)."
    ),
    output: str = output_option(ACTION_FORMATS, "the record id"),
) -> int:
    """Launch a TAO (or any PyTorch-style) GPU job after every gate passes."""
    from kubectl_tao.cli.output import check_format
    from kubectl_tao.core.errors import UsageError

    fmt = check_format(output, ACTION_FORMATS)
    if dry_run not in ("none", "client", "server"):
        raise UsageError(f"--dry-run={dry_run!r}: use none, client or server")
    check_seconds(timeout=timeout, pending_timeout=pending_timeout, image_pull_timeout=image_pull_timeout)
    if (timeout or pending_timeout or image_pull_timeout) and not wait:
        raise UsageError("--timeout/--pending-timeout/--image-pull-timeout need --wait")
    job = request_of(ctx)
    return run_submit(job, dry_run=dry_run, wait=wait, timeout=timeout, pending_timeout=pending_timeout,
                      image_pull_timeout=image_pull_timeout, require_fit_now=require_fit_now, fmt=fmt)


def run_submit(
    job: JobRequest,
    *,
    dry_run: str = "none",
    wait: bool = False,
    timeout: float | None = None,
    pending_timeout: float | None = None,
    image_pull_timeout: float | None = None,
    require_fit_now: bool = False,
    fmt: str = "table",
    extra_fields: K8sRecord | None = None,
    on_created: Callable[[str], None] | None = None,
    namespace: str | None = None,
    record_fields: dict[str, Any] | None = None,
) -> int:
    """submit's work once its flags are read (`resubmit` runs it with a request built from a record): one call
    into the job layer (jobs/submit.submit_request), its outcome printed, then the wait."""
    from kubectl_tao.cli.output import dump_json, dump_yaml, emit, info
    from kubectl_tao.jobs.submit import submit_request

    sess = session()
    namespace = namespace or sess.namespace()
    target = sess.target()
    store = lazy_record_store()
    outcome = submit_request(
        sess.kubectl(), job, namespace=namespace, target_server=target.server, target_context=target.context,
        store_factory=store, on_progress=info, dry_run=dry_run, wait=wait, require_fit_now=require_fit_now,
        extra_fields=extra_fields, record_fields=record_fields,
    )
    if on_created is not None and outcome.record_id and dry_run == "none":
        on_created(outcome.record_id)
    if dry_run != "none":
        from kubectl_tao.manifests.render import to_json, to_yaml

        for warning in outcome.warnings if dry_run == "client" else []:
            info(f"warning: {warning}")
        emit(to_json(outcome.objects) if fmt == "json" else to_yaml(outcome.objects))
        return 0
    if fmt == "name":
        emit(f"job/{outcome.record_id}\n")
    elif fmt in ("json", "yaml"):
        data = {
            "id": outcome.record_id,
            "job": f"{namespace}/{outcome.job_name}",
            "uid": outcome.job_uid,
            "fit": outcome.fit,
            "gang": outcome.gang,
            "warnings": outcome.warnings,
        }
        emit(dump_json(data) if fmt == "json" else dump_yaml(data))
    else:
        emit(f"{outcome.record_id}\n")
        info(
            f"submitted job {outcome.record_id} as {namespace}/{outcome.job_name}; follow it with "
            f"`kubectl tao status {outcome.record_id} --watch`"
        )
    if not wait:
        return 0
    from kubectl_tao.jobs.wait import Watchdogs, follow

    obs = follow(sess.kubectl(), store(), outcome.record_id, server=target.server,
                 dogs=Watchdogs(pending_timeout, image_pull_timeout, timeout))
    info(ended_line(outcome.record_id, obs))
    return 0 if obs.state == "COMPLETE" else 1


def ended_line(record_id: str, obs: Any) -> str:
    """`submit --wait`'s last line: the state the job ended in, and its message (the cause its logs showed, told
    from lines redacted as they were read; else the cluster's words, redacted when observed)."""
    from kubectl_tao.jobs import track as tracking

    told = obs.state == "ERROR" and tracking.cause_told(obs.tracked) is not None
    see = f"; `kubectl tao explain {record_id}` shows the evidence" if told else ""
    return f"job {record_id} ended {obs.state}" + (f": {obs.message}" if obs.message else "") + see
