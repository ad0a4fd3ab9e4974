"""`kubectl tao logs JOB`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from kubectl_tao.commands.common import VerbCommand, record_store, session
from kubectl_tao.core.logs import DEFAULT_TAIL

if TYPE_CHECKING:
    from kubectl_tao.jobs.track import Tracked
    from kubectl_tao.k8s.kubectl import Kubectl

EPILOG = """\b
Examples:
  kubectl tao logs dino-train-3f9a1c
  kubectl tao logs dino-train-3f9a1c -f
  kubectl tao logs dino-train-3f9a1c --rank 1 --tail 100
  kubectl tao logs dino-train-3f9a1c --tail -1
  kubectl tao logs dino-train-3f9a1c --raw > train.log
  kubectl tao logs dino-train-3f9a1c --attempt 1     # a --max-restarts job: where attempt 1's output is
  kubectl tao logs dino-train-3f9a1c --errors

\b
Prints the last 200 lines of each rank by default (--tail -1: all of them). Multi-node jobs print every rank,
each line prefixed with [rank K]. Once the Job is gone (TTL), the last lines captured into the record when the
job ended are shown instead. Live or captured, every line is printed the same way: credentials redacted, terminal
escape sequences (colours included) removed, other control characters shown as escapes; --raw prints what kubectl
printed, unredacted and unfiltered (a captured tail was redacted when it was captured). --errors prints only
the first error block of each rank (its traceback, or the lines of the first error; ranks of one pod told apart
by torch's [rankN]: prefix), read from the last 300 lines of every rank at once; see docs/diagnosis.md."""


def _check_attempt(tracked: Any, pods: list[dict[str, Any]], attempt: int | None, previous: bool) -> None:
    """--attempt K / --previous: the current attempt is the live log; an earlier one ran in containers the
    kubelet removed (RestartAllContainers keeps no previous container): say where its output is kept."""
    from kubectl_tao.core.errors import TaoError, UsageError
    from kubectl_tao.restarts import history, table

    if attempt is not None and previous:
        raise UsageError("give --attempt K or --previous, not both")
    found = history.of_job(tracked.k8s.max_restarts, tracked.k8s.attempts, pods)
    if found is None:
        raise UsageError(
            f"--attempt/--previous: job {tracked.id} was not submitted with --max-restarts, so it has one attempt; "
            "drop the flag"
        )
    current = found.attempt
    wanted = current - 1 if previous else int(attempt or 0)
    if not 1 <= wanted <= current:
        raise UsageError(
            f"--{'previous' if previous else f'attempt {attempt}'}: job {tracked.id} has attempts 1..{current}"
            + (" (it is in its first)" if current == 1 else "")
        )
    if wanted == current:
        return
    request = tracked.k8s.flags  # mount_path, pvc: stored by name
    where = table.gang_dir(str(request.get("mount_path") or "/workspace"), tracked.id)
    pvc = request.get("pvc") or "the job's PVC"
    raise TaoError(
        f"attempt {wanted} of job {tracked.id} ran in containers the kubelet removed when the gang restarted in "
        f"place (RestartAllContainers keeps no previous container); each rank's output of it is on {pvc} at "
        f"{where}/attempt-{wanted}/rank-R.log"
    )


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
        attempt: int = typer.Option(
            None, "--attempt", help="--max-restarts jobs: the log of attempt K (default: the current attempt)."
        ),
        previous: bool = typer.Option(False, "--previous", "-p", help="--max-restarts jobs: the attempt before."),
        errors: bool = typer.Option(False, "--errors", help="Only the first error block of each rank."),
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
        if errors and (raw or follow):
            raise UsageError("--errors prints redacted excerpts of finished output: drop --raw and --follow")
        sess = session()
        kc = sess.kubectl()
        store = record_store()
        tracked = tracking.load(store, job)
        tracking.refuse_other_platform(tracked, "read the logs of")
        tracking.check_pin(tracked, sess.target().server, force=force)
        nodes = int(tracked.k8s.nodes or 1)
        if rank is not None and rank >= nodes:
            raise UsageError(f"--rank {rank}: job {tracked.id} has ranks 0..{nodes - 1}")
        multi = nodes > 1
        live_job, pods = tracking.fetch(kc, tracked) if tracked.job_name else (None, [])
        tracking.check_uid(tracked, live_job, force=force)
        if attempt is not None or previous:
            _check_attempt(tracked, pods, attempt, previous)
        if errors:
            return _errors(kc, tracked, pods, rank=rank, multi=multi)
        if not pods:
            history = tracked.k8s.history
            if live_job is not None and (history is None or history.empty):
                info(f"job {tracked.id}: no pod has started yet")
                return 0
            info(f"job {tracked.id}: the Job is gone; showing the log tail captured when it ended")
            captured = [(kept.rank, kept.tail_lines) for kept in history.ranks] if history is not None else []
            for line in from_history(captured, rank=rank, multi=multi):
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
        names = {str((pod.get("metadata") or {}).get("name")) for pod in pods}  # where one pod runs into the next
        for line in rewrite(lines, tracked.job_name or "", multi, names):
            if raw:
                emit_raw(line + "\n", flush=follow)
            else:
                log_line(line, flush=follow)
        return 0


def _errors(kc: Kubectl, tracked: Tracked, pods: list[dict[str, object]], *, rank: int | None, multi: bool) -> int:
    """`logs --errors`: the first error block of each rank, live (one bounded read of every rank) or from the
    tails the record captured once the Job is gone."""
    from kubectl_tao.cli.output import info, log_line
    from kubectl_tao.core.logs import rank_of
    from kubectl_tao.diagnosis import ranklogs

    job_name = tracked.job_name or ""
    texts: list[tuple[int | None, str]] = []
    if pods:
        read = ranklogs.read_logs(
            kc,
            tracked.namespace or "default",
            tracked.pod_selector,
            len(pods),
            container="tao" if tracked.launched_here else None,
            names=ranklogs.pod_names(pods),
        )
        for note in read.notes:
            info(f"note: {note}")
        for pod, text in read.texts.items():
            found = rank_of(pod, job_name)
            texts.append((int(found) if found is not None else (0 if not multi else None), text))
    else:
        history = tracked.k8s.history
        if history is None or not history.ranks:
            info(f"job {tracked.id}: no pod has started yet" if tracked.job_name else f"job {tracked.id}: no logs")
            return 0
        info(f"job {tracked.id}: the Job is gone; reading the log tail captured when it ended")
        kept = [entry for entry in history.ranks if entry.errors]
        if kept:  # the blocks found in what was read when it ended: print them as kept
            for entry in kept:
                if rank is None or entry.rank == rank:
                    for line in entry.errors or ():
                        log_line(f"[rank {entry.rank}] {line}" if multi else str(line))
            return 0
        texts = [(entry.rank, "\n".join(entry.tail_lines)) for entry in history.ranks]
    shown = 0
    # a [rankN]: outside a pod's own ranks is its program's text
    per_pod = ranklogs.ranks_per_pod(tracked.k8s.flags, tracked.k8s.nodes, tracked.k8s.gpus)
    for pod_rank, text in sorted(texts, key=lambda item: -1 if item[0] is None else item[0]):
        for block_rank, block in ranklogs.error_blocks(text, pod_rank, per_pod):
            if rank is not None and block_rank != rank and pod_rank != rank:
                continue
            shown += 1
            for line in block:
                log_line(f"[rank {block_rank if block_rank is not None else '?'}] {line}" if multi else line)
    if not shown:
        info(f"job {tracked.id}: no error in the ranks' output")
    return 0
