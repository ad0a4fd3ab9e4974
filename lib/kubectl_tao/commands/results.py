"""`kubectl tao results JOB` and `kubectl tao results pull JOB [PATH...]`: a job's results from its record."""

from __future__ import annotations

from typing import Any

import click
import typer
from typer.core import TyperGroup

from kubectl_tao.commands.common import VerbCommand, output_option, record_store, session, verb_group

RESULTS_FORMATS = ("table", "json", "yaml")
PULL_FORMATS = ("text", "json", "yaml")

ABOUT = """Reads the job's results directory on its volume through a short-lived helper pod that mounts the claim
read-only (docs/data.md), with the claim, mount path and placement the record kept: while the job runs and after
its Job is gone. `results JOB` shows the tree: each directory with the total size of the files under it, every
file with its size and time, checkpoints in epoch order, the file each *_latest.pth stands for marked, and the
status.json summary. `results pull` copies files into --dest (default
./<job id>/): one tar stream over kubectl exec, a file already there with the same size and SHA-256 skipped, each
one verified before it gets its final name; links are not copied (--latest takes the file a *_latest.pth names).
A storage tier C job's results are read from its S3 prefix in the same pod, by a second container in the job's S3
client image (--s3-tools-image) with the job's credential Secret as its environment (never printed). A job's
per-job Secret goes with its Job: then give the credentials with --env-file (a Secret owned by the helper pod,
from stdin, deleted with it) or name an existing Secret with --env-secret.
Exit codes: 0 ok, 1 the helper pod or the copy failed, 2 bad input (a record without a volume, a tier C job whose
credential Secret is gone, a PATH escaping the directory), 3 cluster unreachable, 130 interrupted (Ctrl-C: a pull
keeps the files verified by then, no partial file, and removes the pod)."""

EPILOG = f"""\b
Examples:
  kubectl tao results dino-train-3f9a1c
  kubectl tao results dino-train-3f9a1c -o json
  kubectl tao results pull dino-train-3f9a1c --latest

\b
{ABOUT}"""

SHOW_EPILOG = f"""\b
{ABOUT}"""

PULL_EPILOG = f"""\b
Examples:
  kubectl tao results pull dino-train-3f9a1c
  kubectl tao results pull dino-train-3f9a1c --latest
  kubectl tao results pull dino-train-3f9a1c train/status.json --dest ./out
  kubectl tao results pull dino-train-3f9a1c --env-file s3.env

\b
{ABOUT}"""


class _ResultsGroup(TyperGroup):
    """`results JOB` lists, `results pull|... JOB` acts: a first word that is no subcommand means `show`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["show", *args]
        return super().parse_args(ctx, args)


results_app = verb_group(
    "results", "A job's results directory: list it (results JOB) or copy files out (results pull JOB).", EPILOG,
    cls=_ResultsGroup,
)

_HELPER_IMAGE_HELP = "Image of the helper pod [$KUBECTL_TAO_HELPER_IMAGE, else busybox]."
_SELECTOR_HELP = "KEY=VALUE node label for the helper pod (repeat; default: the job's placement)."
_TOLERATION_HELP = "KEY[=VALUE][:EFFECT] for the helper pod (repeat; default: the job's)."


_ENV_FILE_HELP = (
    "Storage tier C: KEY=VALUE file ('-' = stdin) with the S3 credentials, for a Secret that lives as long as the "
    "helper pod (instead of the job's Secret, which goes with its Job)."
)
_EXISTING_HELP = "Storage tier C: an existing Secret with the S3 credentials (instead of the job's)."
_S3_TOOLS_HELP = "Storage tier C: the S3 client image of the helper pod (default: the job's --s3-tools-image)."


def _source(job: str, node_selector: list[str] | None, toleration: list[str] | None, s3_tools_image: str | None,
            env_secret: str | None, env_file: str | None) -> Any:
    from kubectl_tao.jobs import track as tracking
    from kubectl_tao.volumes.results import source_of

    return source_of(tracking.load(record_store(), job), node_selector=node_selector, tolerations=toleration,
                     s3_tools_image=s3_tools_image, env_secret=env_secret, env_file=env_file)


def _credentials(env_file: str | None, env_secret: str | None) -> dict[str, str] | None:
    """The credentials of --env-file (read, checked and named as submit reads them), or None."""
    from kubectl_tao.core.errors import UsageError
    from kubectl_tao.jobs.plan import read_credentials

    if not env_file:
        return None
    if env_secret:
        raise UsageError("--env-file and --env-secret both name the S3 credentials: give one")
    credentials = read_credentials(env_file, None)
    if not credentials:
        raise UsageError(f"--env-file {env_file}: no KEY=VALUE line in it; give the S3 credentials (AWS_ACCESS_KEY_ID, "
                         "AWS_SECRET_ACCESS_KEY, ...)")
    return credentials


@results_app.command("show", epilog=SHOW_EPILOG, cls=VerbCommand, hidden=True)
def show(
    job: str = typer.Argument(..., help="Record id (see `kubectl tao list`)."),
    helper_image: str = typer.Option(None, "--helper-image", help=_HELPER_IMAGE_HELP),
    node_selector: list[str] = typer.Option(None, "--node-selector", help=_SELECTOR_HELP),
    toleration: list[str] = typer.Option(None, "--toleration", help=_TOLERATION_HELP),
    env_file: str = typer.Option(None, "--env-file", help=_ENV_FILE_HELP),
    env_secret: str = typer.Option(None, "--env-secret", help=_EXISTING_HELP),
    s3_tools_image: str = typer.Option(None, "--s3-tools-image", help=_S3_TOOLS_HELP),
    timeout: float = typer.Option(120.0, "--timeout", help="Seconds the helper pod may take to start."),
    output: str = output_option(RESULTS_FORMATS),
) -> int:
    """List a job's results directory: sizes, times, checkpoints by epoch, the latest marked, status.json."""
    from kubectl_tao.cli.output import check_format, emit, emit_data, table
    from kubectl_tao.commands.common import check_seconds
    from kubectl_tao.volumes import results, resultsview, volume_helper

    fmt = check_format(output, RESULTS_FORMATS)
    check_seconds(timeout=timeout)
    image = volume_helper.helper_image(helper_image)
    source = _source(job, node_selector, toleration, s3_tools_image, env_secret, env_file)
    credentials = _credentials(env_file, env_secret)
    listing = results.list_results(session().kubectl(), source, image=image, timeout=timeout,
                                   credentials=credentials, env_secret=bool(env_secret))
    statuses = _statuses(listing.statuses)
    if emit_data(fmt, {
        "job": source.record_id, "pvc": source.pvc or None, "results_dir": source.shown,
        "files": [e.as_dict() for e in listing.entries], "dirs": [d.as_dict() for d in listing.folders],
        "status": statuses,
    }):
        return 0
    emit(f"job {source.record_id}: {source.where}\n")
    rows = [_row(item) for item in resultsview.tree(listing.entries, listing.folders)]
    emit(table(rows, ["PATH", "SIZE", "MODIFIED", "NOTE"]) if rows else "(empty)\n")
    for path, summary in statuses.items():
        emit(f"{path}: {summary['line']}\n")
    return 0


def _row(item: Any) -> tuple[str, str, str, str]:
    """A table row of the tree: a directory is `name/` with the total size and number of files under it."""
    from kubectl_tao.volumes import resultsview, volumecopy

    if isinstance(item, resultsview.Folder):
        return (_tree_name(item.path) + "/", volumecopy.human_bytes(item.size), _when(item.mtime),
                f"{item.files} file(s)")
    size = "-" if item.size is None else volumecopy.human_bytes(item.size)
    return (_tree_name(item.path), size, _when(item.mtime), resultsview.note(item))


def _tree_name(path: str) -> str:
    depth = path.count("/")
    return "  " * depth + path.rsplit("/", 1)[-1] if depth else path


def _when(mtime: int | None) -> str:
    from datetime import UTC, datetime

    return "-" if mtime is None else datetime.fromtimestamp(mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _statuses(tails: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Each status.json as TAO's progress reader sees it: the PROGRESS cell, the last metrics, the state."""
    from kubectl_tao.progress.model import metrics_summary, progress_cell
    from kubectl_tao.progress.statusjson import read_status_json

    out: dict[str, dict[str, Any]] = {}
    for path, text in sorted(tails.items()):
        progress = read_status_json(text)
        if progress is None:
            continue
        cell, metrics = progress_cell(progress), metrics_summary(progress)
        line = " ".join(part for part in (progress.state or "", cell if cell != "-" else "", metrics) if part)
        out[path] = {**progress.as_json(), "state": progress.state, "line": line or "no progress recorded"}
    return out


@results_app.command("pull", epilog=PULL_EPILOG, cls=VerbCommand)
def pull_command(
    job: str = typer.Argument(..., help="Record id (see `kubectl tao list`)."),
    paths: list[str] = typer.Argument(None, help="Files or folders under the results directory (default: all)."),
    dest: str = typer.Option(None, "--dest", help="Local directory (default ./<job id>/)."),
    latest: bool = typer.Option(False, "--latest", help="Only the checkpoint each *_latest.pth stands for."),
    helper_image: str = typer.Option(None, "--helper-image", help=_HELPER_IMAGE_HELP),
    node_selector: list[str] = typer.Option(None, "--node-selector", help=_SELECTOR_HELP),
    toleration: list[str] = typer.Option(None, "--toleration", help=_TOLERATION_HELP),
    env_file: str = typer.Option(None, "--env-file", help=_ENV_FILE_HELP),
    env_secret: str = typer.Option(None, "--env-secret", help=_EXISTING_HELP),
    s3_tools_image: str = typer.Option(None, "--s3-tools-image", help=_S3_TOOLS_HELP),
    timeout: float = typer.Option(120.0, "--timeout", help="Seconds the helper pod may take to start."),
    output: str = output_option(PULL_FORMATS, "text"),
) -> int:
    """Copy a job's results here: skip what is here, verify what arrives."""

    from kubectl_tao.cli.output import check_format
    from kubectl_tao.commands.common import check_seconds
    from kubectl_tao.commands.data import INTERRUPTED_PULL, copy_with_progress
    from kubectl_tao.core.errors import UsageError
    from kubectl_tao.volumes import results, volume_helper

    fmt = check_format(output, PULL_FORMATS)
    check_seconds(timeout=timeout)
    if latest and paths:
        raise UsageError("--latest takes the latest checkpoint only: leave the PATHs out, or --latest")
    image = volume_helper.helper_image(helper_image)
    source = _source(job, node_selector, toleration, s3_tools_image, env_secret, env_file)
    credentials = _credentials(env_file, env_secret)
    return copy_with_progress(
        lambda on_plan, on_bytes: results.pull(
            session().kubectl(), source, paths=list(paths or []), dest=dest or source.record_id, latest=latest,
            image=image, timeout=timeout, on_plan=on_plan, on_bytes=on_bytes, credentials=credentials,
            env_secret=bool(env_secret),
        ),
        fmt,
        INTERRUPTED_PULL,
    )


TENSORBOARD_EPILOG = f"""\b
Examples:
  kubectl tao results tensorboard dino-train-3f9a1c
  kubectl tao results tensorboard dino-train-3f9a1c --port 16006 --image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt

\b
Runs `tensorboard --logdir <results dir>` in a helper pod (the job's own image by default: TAO images ship
TensorBoard; the claim read-only, non-root, no service-account token, listening on the pod's loopback only) and
`kubectl port-forward` on 127.0.0.1:PORT, prints the URL and stays until Ctrl-C, which removes the pod.
{ABOUT}"""


@results_app.command("tensorboard", epilog=TENSORBOARD_EPILOG, cls=VerbCommand)
def tensorboard_command(
    job: str = typer.Argument(..., help="Record id (see `kubectl tao list`)."),
    port: int = typer.Option(6006, "--port", help="Local port on 127.0.0.1."),
    image: str = typer.Option(None, "--image", help="Image with tensorboard on PATH (default: the job's image)."),
    node_selector: list[str] = typer.Option(None, "--node-selector", help=_SELECTOR_HELP),
    toleration: list[str] = typer.Option(None, "--toleration", help=_TOLERATION_HELP),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds the pod may take to start (image pull)."),
) -> int:
    """Open TensorBoard over a job's results on 127.0.0.1 until Ctrl-C."""
    import sys

    from kubectl_tao.cli.output import emit, info
    from kubectl_tao.commands.common import check_seconds
    from kubectl_tao.core.errors import UsageError
    from kubectl_tao.core.names import validate_image
    from kubectl_tao.jobs import track as tracking
    from kubectl_tao.volumes import results

    check_seconds(timeout=timeout)
    if not 1 <= port <= 65535:
        raise UsageError(f"--port {port}: give a port from 1 to 65535")
    tracked = tracking.load(record_store(), job)
    source = results.source_of(tracked, node_selector=node_selector, tolerations=toleration)
    chosen = validate_image(image or tracked.job.image, "--image" if image else "the job's image")

    def output(data: bytes) -> None:
        sys.stderr.write(data.decode("utf-8", errors="replace"))
        sys.stderr.flush()

    try:
        results.tensorboard(
            session().kubectl(), source, image=chosen, port=port, timeout=timeout,
            on_ready=lambda url: emit(f"TensorBoard for job {source.record_id}: {url} (Ctrl-C to stop)\n"),
            on_output=output,
        )
    except KeyboardInterrupt:
        info("stopped")
        return 0
    return 0


def register(app: typer.Typer) -> None:
    app.add_typer(results_app, name="results")
