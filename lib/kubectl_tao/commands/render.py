"""`kubectl tao render`: print the manifests submit would apply, touching no cluster."""

from __future__ import annotations

import typer

from kubectl_tao.commands.common import MANIFEST_FORMATS, output_option, session
from kubectl_tao.commands.jobflags import JobCommand, request_of

EPILOG = """\b
Examples:
  kubectl tao render --image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt --gpus 8 --pvc tao-data \\
      --command "dino train -e /workspace/specs/train.yaml"
  kubectl tao render ... --nodes 2 --launcher torchrun -o json
  kubectl tao render --action-request req.json --staging-map staged.json --pvc tao-data --results-dir /workspace/out

\b
The same flags as submit; the record id is a preview (submit mints the real one). Equivalent to
`submit --dry-run=client`. Credentials are not read: the Secret name appears, never values."""


def register(app: typer.Typer) -> None:
    app.command("render", epilog=EPILOG, cls=JobCommand)(render)


def render(
    ctx: typer.Context,
    name: str = typer.Option(None, "--name", help="Kubernetes Job name (default: a preview record id)."),
    output: str = output_option(MANIFEST_FORMATS),
) -> int:
    """Print the Kubernetes manifests for a job without contacting the cluster."""
    from kubectl_tao.cli.output import check_format, emit, info
    from kubectl_tao.core.names import validate_job_name
    from kubectl_tao.jobs.submit import execute, plan_request
    from kubectl_tao.manifests.render import to_json, to_yaml

    fmt = check_format(output, MANIFEST_FORMATS)
    job = request_of(ctx)
    sess = session()
    namespace = sess.namespace()
    # Only the names matter here: the manifest references the Secret by name, values stay out of it.
    the_plan = plan_request(job, namespace, server=sess.target().server, on_progress=info, values=False)
    outcome = execute(
        sess.kubectl(),
        the_plan,
        namespace=namespace,
        target_server="",
        target_context="",
        dry_run="client",
        store_factory=lambda: None,
        name=validate_job_name(name, "--name") if name else None,
    )
    for warning in outcome.warnings:
        info(f"warning: {warning}")
    emit(to_json(outcome.objects) if fmt == "json" else to_yaml(outcome.objects))
    return 0
