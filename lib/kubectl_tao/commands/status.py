"""`kubectl tao status JOB`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubectl_tao.commands.session import record_store, session

if TYPE_CHECKING:
    import typer

EPILOG = """\b
Examples:
  # One job's state, with the reason when it is not running
  kubectl tao status dino-train-3f9a1c
  # Follow it until it ends; give up on a pod Pending for 5 minutes
  kubectl tao status dino-train-3f9a1c --watch --pending-timeout 300
  # For scripts
  kubectl tao status dino-train-3f9a1c -o json

\b
States: PENDING, RUNNING, COMPLETE, ERROR (with ERR_INFRA / ERR_PROGRAM), CANCELED, UNKNOWN (the Job is gone;
the record keeps its history). A running job also shows its PROGRESS, ETA and last metrics, read from rank 0
(TAO's status.json through one `kubectl exec`, else its log) and kept in the record. Exit 0 when the state was
read; with --watch, 0 only for COMPLETE; 1 when the record cannot be used (a bad file, another record's id, a
backend_ref that is not NAMESPACE/NAME)."""


def show(job: str, output: str, no_headers: bool, force: bool) -> int:
    """One observation of JOB, printed (status without --watch). The kubectl read starts first, guessed from
    the raw record files (jobs/early_read.py): the record is loaded and checked, and what reads and prints the
    answer imported, while kubectl runs."""
    from kubectl_tao.jobs import early_read
    from kubectl_tao.k8s.kubectl import discard_prestarted

    sess = session()
    early_read.start(job, sess.options)
    try:
        from kubectl_tao.jobs import track as tracking

        store = record_store()
        tracked = tracking.load(store, job)
        target = sess.target()
        started = tracking.start_fetch(sess.kubectl(), tracked, server=target.server, force=force)
        from kubectl_tao.commands import present

        obs = tracking.observe(sess.kubectl(), store, tracked, server=target.server, force=force, started=started)
        if obs.state == "RUNNING":
            from kubectl_tao.jobs import liveprogress

            liveprogress.read(sess.kubectl(), store, obs)  # one more kubectl call, into rank 0
        present.show([obs], output, no_headers, ranks=True)
        return 0
    finally:
        discard_prestarted()


def register(app: typer.Typer) -> None:
    import typer

    from kubectl_tao.commands.common import NoHeadersOption, OutputOption, VerbCommand, check_seconds

    @app.command("status", epilog=EPILOG, cls=VerbCommand)
    def status(
        job: str = typer.Argument(..., help="Record id printed by submit (see `kubectl tao list`)."),
        output: str = OutputOption,
        no_headers: bool = NoHeadersOption,
        watch: bool = typer.Option(False, "--watch", "-w", help="Stream state changes until the job ends."),
        timeout: float = typer.Option(None, "--timeout", help="With --watch: stop waiting after SECONDS."),
        pending_timeout: float = typer.Option(
            None, "--pending-timeout", help="With --watch: cancel and fail the job when Pending for SECONDS."
        ),
        image_pull_timeout: float = typer.Option(
            None,
            "--image-pull-timeout",
            help="With --watch: cancel and fail the job when its image pull fails for SECONDS.",
        ),
        force: bool = typer.Option(False, "--force", help="Look even if kubectl points at another cluster or Job UID."),
    ) -> int:
        """Show a job's state (PENDING/RUNNING/COMPLETE/ERROR/UNKNOWN) and why."""
        check_seconds(timeout=timeout, pending_timeout=pending_timeout, image_pull_timeout=image_pull_timeout)
        if not watch:
            return show(job, output, no_headers, force)
        from kubectl_tao.commands import present
        from kubectl_tao.jobs import track as tracking
        from kubectl_tao.jobs.wait import Watchdogs
        from kubectl_tao.jobs.wait import watch as run_watch

        sess = session()
        store = record_store()
        tracked = tracking.load(store, job)
        target = sess.target()
        obs = run_watch(
            sess.kubectl(),
            store,
            tracked,
            server=target.server,
            dogs=Watchdogs(pending_timeout, image_pull_timeout, timeout),
            force=force,
        )
        present.show([obs], output, no_headers, ranks=True)
        return 0 if obs.state == "COMPLETE" else 1
