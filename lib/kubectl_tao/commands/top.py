"""`kubectl tao top JOB`: the GPU use of each rank of a running job."""

from __future__ import annotations

import typer

from kubectl_tao.commands.common import DATA_FORMATS, VerbCommand, output_option, record_store, session

EPILOG = """\b
Examples:
  kubectl tao top dino-train-3f9a1c
  kubectl tao top dino-train-3f9a1c --watch --interval 5
  kubectl tao top dino-train-3f9a1c -o json
  kubectl tao top dino-train-3f9a1c --source nvidia-smi

\b
One row per GPU of each running rank: its node, index and UUID, utilization and memory used/total, and flags:
idle (below 5% busy over the sample) and low-memory (the rank holds GPUs but every one of them has less than
5% of its memory in use). Where the cluster runs NVIDIA's DCGM exporter (the GPU Operator's default), its
metrics are read through the API server's service proxy in one call (needs `get services` cluster-wide and
`get services/proxy` in the exporter's namespace); a rank its answer does not name is read with nvidia-smi in
its container through `kubectl exec` (needs `create pods/exec`), all ranks at once, each within --timeout
seconds. A rank that could not be read says why. Exit codes: 0 read (whatever the GPUs do; a --watch that
sees the job end), 1 no such record, 2 the job is not running, 3 the cluster is unreachable; see
docs/progress.md."""


def register(app: typer.Typer) -> None:
    @app.command("top", epilog=EPILOG, cls=VerbCommand)
    def top(
        job: str = typer.Argument(..., help="Record id (see `kubectl tao list`)."),
        output: str = output_option(DATA_FORMATS, "a table"),
        watch: bool = typer.Option(False, "--watch", "-w", help="Read again every --interval until Ctrl-C."),
        interval: float = typer.Option(2.0, "--interval", help="With --watch: seconds between reads.",
                                       show_default=True),
        source: str = typer.Option("auto", "--source", help="auto (DCGM exporter, else nvidia-smi), dcgm or "
                                   "nvidia-smi.", show_default=True),
        timeout: float = typer.Option(10.0, "--timeout", help="Seconds each read may take.", show_default=True),
        force: bool = typer.Option(False, "--force", help="Look even if kubectl points at another cluster or Job UID."),
    ) -> int:
        """Show the GPU use (utilization, memory) of each rank of a running job."""
        import time

        from kubectl_tao.cli.output import check_format, emit, emit_data, info, table
        from kubectl_tao.core.errors import UsageError
        from kubectl_tao.jobs.top import top as read_top
        from kubectl_tao.progress import gpuuse

        fmt = check_format(output, DATA_FORMATS)
        if not interval > 0 or interval > 86400:
            raise UsageError(f"--interval {interval:g}: give seconds between reads, above 0 and at most 86400")
        if not timeout > 0 or timeout > 600:
            raise UsageError(f"--timeout {timeout:g}: give seconds each read may take, above 0 and at most 600")
        sess = session()
        kc, store, server = sess.kubectl(), record_store(), sess.target().server
        first, told = True, set[str]()
        while True:
            try:
                result = read_top(kc, store, job, server=server, force=force, source=source, timeout=timeout)
            except UsageError as exc:
                if first:
                    raise
                info(str(exc))  # the job ended while watched: said, and the watch is over
                return 0
            if not emit_data(fmt, result.to_list()):
                if not first:
                    emit("\n")
                emit(table(gpuuse.table_rows(result.ranks), gpuuse.HEADERS))
                said = gpuuse.summary(result.ranks)
                if said:
                    info(f"warning: {said}")
            for note in result.notes:
                if note not in told:  # a watch says each note once
                    told.add(note)
                    info(f"note: {note}")
            if not watch:
                return 0
            first = False
            time.sleep(interval)
