"""`kubectl tao list`."""

from __future__ import annotations

import typer

from kubectl_tao.commands.common import NoHeadersOption, OutputOption, VerbCommand, record_store, session

DEFAULT_LIMIT = 100  # the newest records `list` shows; --all shows every one

EPILOG = """\b
Examples:
  kubectl tao list
  kubectl tao list -o wide
  kubectl tao list --no-live -o json
  kubectl tao list --all
  kubectl tao list --limit 20

\b
Records live in $TAO_STATE_DIR/jobs (else ~/.tao/jobs). The newest 100 are shown unless --all or --limit N.
Live state comes from two kubectl calls at once whatever the number of records; records of other clusters show their
last recorded state. --no-live asks no cluster: every record shows its last recorded state (exit 3 when a live
read finds the cluster unreachable: --no-live still lists)."""


def register(app: typer.Typer) -> None:
    @app.command("list", epilog=EPILOG, cls=VerbCommand)
    def list_(
        output: str = OutputOption,
        no_headers: bool = NoHeadersOption,
        live: bool = typer.Option(
            True, "--live/--no-live", help="Ask the cluster for live state (default); --no-live: the recorded state."
        ),
        limit: int = typer.Option(DEFAULT_LIMIT, "--limit", help="Show the newest N records (default 100)."),
        all_: bool = typer.Option(False, "--all", help="Show every record."),
    ) -> int:
        """List job records, newest first, with their live state."""
        from kubectl_tao.cli.output import check_format, info
        from kubectl_tao.commands import present
        from kubectl_tao.core.errors import ClusterUnreachableError, UsageError
        from kubectl_tao.jobs.listing import observe_all

        if limit < 1:
            raise UsageError(f"--limit must be at least 1 (got {limit}); use --all to show every record")
        fmt = check_format(output)
        sess = session()
        problems: list[str] = []
        try:
            observations, total = observe_all(
                sess.kubectl(),
                record_store(),
                sess.target().server,
                live=live,
                limit=None if all_ else limit,
                full=fmt in ("json", "yaml"),
                errors=problems,
            )
        except ClusterUnreachableError as exc:  # the records are still there to see without the cluster
            raise type(exc)(f"{exc.message}; `kubectl tao list --no-live` shows the recorded states") from None
        for problem in problems:
            info(f"warning: {problem}")
        present.show(observations, output, no_headers)
        if len(observations) < total:
            info(f"note: showing the newest {len(observations)} of {total} records; --all shows every one")
        return 0
