"""`kubectl tao data push LOCAL... --pvc NAME [--to DIR]`: files and folders onto a job's volume."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from kubectl_tao.commands.common import VerbCommand, output_option, session, verb_group

PUSH_FORMATS = ("text", "json", "yaml")

EPILOG = """\b
Examples:
  kubectl tao data push specs/ data/ --pvc tao-data
  kubectl tao data push train.yaml --pvc tao-data --to specs
  kubectl tao data push data/ --pvc tao-data --node-selector pool=gpu --toleration nvidia.com/gpu:NoSchedule

\b
Copies through a short-lived helper pod that mounts the claim (docs/data.md): one tar stream over
`kubectl exec -i`, no temporary archive. A file already there with the same size and SHA-256 is skipped, so an
interrupted push resumes; every file sent is verified on the volume before it gets its final name. The pod runs
as UID 1000 (fsGroup 1000) with no service-account token and is deleted on every exit, Ctrl-C included.
Exit codes: 0 pushed, 1 the copy or the helper pod failed, 2 bad input (a missing file, a path escaping the
target, a claim missing or not Bound; nothing created), 3 cluster unreachable."""

INTERRUPTED = (
    "error: interrupted; nothing unverified got a final name and the staging directory was removed; the batches "
    "already verified and moved are kept: push again to resume (they are skipped)"
)

INTERRUPTED_PULL = (
    "error: interrupted; {kept} file(s) that arrived whole and verified are kept, no partial file: pull again to "
    "resume (they are skipped)"
)

data_app = verb_group("data", "Put specs and data onto a job's volume (a helper pod and kubectl exec).", EPILOG)


@data_app.command("push", epilog=EPILOG, cls=VerbCommand)
def push(
    local: list[str] = typer.Argument(..., help="Files and folders to copy (a folder keeps its name)."),
    pvc: str = typer.Option(..., "--pvc", help="The PersistentVolumeClaim (Bound) to copy onto."),
    to: str = typer.Option(None, "--to", help="Directory under the mount path (relative, or absolute under it)."),
    mount_path: str = typer.Option("/workspace", "--mount-path", help="Where jobs mount the claim (as submit's)."),
    helper_image: str = typer.Option(
        None, "--helper-image", help="Image of the helper pod [$KUBECTL_TAO_HELPER_IMAGE, else busybox]."
    ),
    node_selector: list[str] = typer.Option(None, "--node-selector", help="KEY=VALUE node label (repeat)."),
    toleration: list[str] = typer.Option(None, "--toleration", help="KEY[=VALUE][:EFFECT] to tolerate (repeat)."),
    timeout: float = typer.Option(120.0, "--timeout", help="Seconds the helper pod may take to start."),
    output: str = output_option(PUSH_FORMATS, "text"),
) -> int:
    """Copy files and folders onto a volume: skip what is there, verify what was sent."""

    from kubectl_tao.cli.output import check_format
    from kubectl_tao.commands.common import check_seconds
    from kubectl_tao.core.flagvalues import parse_key_values, parse_toleration
    from kubectl_tao.core.names import validate_abs_path, validate_dns_subdomain
    from kubectl_tao.volumes import datacopy, volume_helper

    fmt = check_format(output, PUSH_FORMATS)
    check_seconds(timeout=timeout)
    validate_dns_subdomain(pvc, "--pvc")
    validate_abs_path(mount_path, "--mount-path")
    request = datacopy.PushRequest(
        sources=list(local),
        pvc=pvc,
        to=to,
        mount_path=mount_path,
        image=volume_helper.helper_image(helper_image),
        node_selector=parse_key_values(list(node_selector or []), "node selector"),
        tolerations=[parse_toleration(t) for t in toleration or []],
        start_timeout=timeout,
    )
    sess = session()
    return copy_with_progress(
        lambda on_plan, on_bytes: datacopy.push(
            sess.kubectl(), sess.namespace(), request, on_plan=on_plan, on_bytes=on_bytes
        ),
        fmt,
        INTERRUPTED,
    )


def copy_with_progress(copy: Callable[[Any, Any], Any], fmt: str, interrupted: str) -> int:
    """Run COPY(on_plan, on_bytes) with a progress line on a terminal stderr, then print its result in FMT (a
    one-line summary as text); Ctrl-C: the INTERRUPTED line (`{kept}` in it: the files the interrupt kept, its
    `kept`, else 0) and exit 130. `data push` and `results pull`."""
    import sys

    from kubectl_tao.cli.output import emit, emit_data, info

    bar = Progress(sys.stderr) if sys.stderr.isatty() else None
    try:
        result = copy(bar.plan if bar else None, bar.add if bar else None)
    except KeyboardInterrupt as exc:
        if bar is not None:
            sys.stderr.write("\n")  # off the progress line
        info(interrupted.replace("{kept}", str(getattr(exc, "kept", 0))))
        return 130
    if bar is not None:
        bar.done()
    if not emit_data(fmt, result.as_dict()):
        emit(result.summary() + "\n")
    return 0


class Progress:
    """Bytes, rate and ETA on one terminal line, redrawn at most five times a second."""

    def __init__(self, stream: object) -> None:
        import time

        self.stream, self.total, self.count, self.files = stream, 0, 0, 0
        self.started = self.drawn = time.monotonic()

    def plan(self, files: int, total: int) -> None:
        self.files, self.total = files, total

    def add(self, count: int) -> None:
        import time

        self.count += count
        now = time.monotonic()
        if now - self.drawn >= 0.2:
            self.drawn = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        from kubectl_tao.volumes.volumecopy import human_bytes

        elapsed = max(now - self.started, 1e-6)
        rate = self.count / elapsed
        left = (self.total - self.count) / rate if rate > 0 else 0
        line = (f"\r{human_bytes(self.count)} / {human_bytes(self.total)} ({self.files} files)  "
                f"{human_bytes(int(rate))}/s  ETA {int(left) // 60}:{int(left) % 60:02d}")
        self.stream.write(line + "\x1b[K")  # type: ignore[attr-defined]
        self.stream.flush()  # type: ignore[attr-defined]

    def done(self) -> None:
        import time

        if self.total:
            self._draw(time.monotonic())
            self.stream.write("\n")  # type: ignore[attr-defined]


def register(app: typer.Typer) -> None:
    app.add_typer(data_app, name="data")
