"""`kubectl tao list`."""

from __future__ import annotations

import typer

from .common import NoHeadersOption, OutputOption, record_store, session, with_cluster_flags

EPILOG = """\b
Examples:
  kubectl tao list
  kubectl tao list -o wide
  kubectl tao list --no-live -o json

\b
Records live in $TAO_STATE_DIR/jobs (else ~/.tao/jobs). Live state comes from one kubectl call whatever the
number of records; records of other clusters show their last recorded state."""


def register(app: typer.Typer) -> None:
    @app.command("list", epilog=EPILOG)
    @with_cluster_flags
    def list_(
        output: str = OutputOption,
        no_headers: bool = NoHeadersOption,
        live: bool = typer.Option(True, "--live/--no-live", help="Ask the cluster for live state (default)."),
    ) -> int:
        """List job records, newest first, with their live state."""
        from .. import present
        from ..listing import observe_all
        from ..output import info

        sess = session()
        problems: list[str] = []
        observations = observe_all(sess.kubectl(), record_store(), sess.target().server, live=live, errors=problems)
        for problem in problems:
            info(f"warning: {problem}")
        present.show(observations, output, no_headers)
        return 0
