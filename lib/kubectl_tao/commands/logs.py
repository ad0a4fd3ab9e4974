"""`kubectl tao logs JOB`."""

from __future__ import annotations

import typer

from kubectl_tao.commands.common import VerbCommand, record_store, session
from kubectl_tao.core.logs import DEFAULT_TAIL

EPILOG = """\b
Examples:
  kubectl tao logs dino-train-3f9a1c
  kubectl tao logs dino-train-3f9a1c -f
  kubectl tao logs dino-train-3f9a1c --rank 1 --tail 100
  kubectl tao logs dino-train-3f9a1c --tail -1
  kubectl tao logs dino-train-3f9a1c --raw > train.log

\b
Prints the last 200 lines of each rank by default (--tail -1: all of them). Multi-node jobs print every rank,
each line prefixed with [rank K]. Once the Job is gone (TTL), the last lines captured into the record when the
job ended are shown instead. Live or captured, every line is printed the same way: credentials redacted, terminal
escape sequences (colours included) removed, other control characters shown as escapes; --raw prints what kubectl
printed, unredacted and unfiltered (a captured tail was redacted when it was captured)."""


def register(app: typer.Typer) -> None:
    @app.command("logs", epilog=EPILOG, cls=VerbCommand)
    def logs(
        job: str = typer.Argument(..., help="Record id (see `kubectl tao list`)."),
        tail: int = typer.Option(
            DEFAULT_TAIL, "--tail", help="Lines from the end of each rank's log; -1 for all.", show_default=True
        ),
        follow: bool = typer.Option(False, "--follow", "-f", help="Stream new lines."),
        rank: int = typer.Option(None, "--rank", help="Only this rank (JOB_COMPLETION_INDEX)."),
        force: bool = typer.Option(False, "--force", help="Skip the cluster and UID pins."),
        raw: bool = typer.Option(False, "--raw", help="Print the log as kubectl gives it: no redaction, no filtering."),
    ) -> int:
        """Print the logs of every rank of a job."""
        from kubectl_tao.cli.output import emit_raw, info, log_line
        from kubectl_tao.core.errors import UsageError
        from kubectl_tao.core.logs import from_history, kubectl_args, rewrite
        from kubectl_tao.jobs import track as tracking

        if tail < -1:
            raise UsageError(f"--tail {tail}: give a number of lines >= 0, or -1 for the whole log")
        if rank is not None and rank < 0:
            raise UsageError("--rank must be >= 0")
        sess = session()
        kc = sess.kubectl()
        store = record_store()
        tracked = tracking.load(store, job)
        tracking.refuse_other_platform(tracked, "read the logs of")
        tracking.check_pin(tracked, sess.target().server, force=force)
        nodes = int(tracked.extra.get("nodes") or 1)
        if rank is not None and rank >= nodes:
            raise UsageError(f"--rank {rank}: job {tracked.id} has ranks 0..{nodes - 1}")
        multi = nodes > 1
        live_job, pods = tracking.fetch(kc, tracked) if tracked.job_name else (None, [])
        tracking.check_uid(tracked, live_job, force=force)
        if not pods:
            history = tracked.extra.get("history")
            if live_job is not None and not history:
                info(f"job {tracked.id}: no pod has started yet")
                return 0
            info(f"job {tracked.id}: the Job is gone; showing the log tail captured when it ended")
            for line in from_history(history, rank=rank, multi=multi):
                if raw:
                    emit_raw(line + "\n")
                else:
                    log_line(line)
            return 0
        args = kubectl_args(
            tracked.namespace or "default",
            tracked.job_name or "",
            tail=tail,
            follow=follow,
            rank=rank,
            nodes=nodes,
            selector=tracked.pod_selector,
            container="tao" if tracked.launched_here else None,
        )
        if follow and raw and not multi:
            kc.exec([a for a in args if a != "--prefix"], namespaced=False)
        if follow:
            lines = kc.stream(args, namespaced=False)
        else:
            text = kc.run(args, namespaced=False).stdout
            lines = iter(text.removesuffix("\n").split("\n") if text else [])  # \r and \x85 split no line
        for line in rewrite(lines, tracked.job_name or "", multi):
            if raw:
                emit_raw(line + "\n", flush=follow)
            else:
                log_line(line, flush=follow)
        return 0
