"""`kubectl tao version`: the plugin's version; with --server, the API server's too."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubectl_tao.commands.session import session

if TYPE_CHECKING:
    import typer


def client_version_line() -> str:
    """What `kubectl tao version` (and `kubectl tao --version`) prints first."""
    from kubectl_tao import __version__

    return f"kubectl-tao {__version__}\n"


def register(app: typer.Typer) -> None:
    import typer

    from kubectl_tao.commands.common import DATA_FORMATS, VerbCommand, output_option

    @app.command(
        "version",
        epilog="\b\nExamples:\n  kubectl tao version\n  kubectl tao version --server -o json",
        cls=VerbCommand,
    )
    def version(
        server: bool = typer.Option(False, "--server", help="Also ask the API server for its version."),
        output: str = output_option(DATA_FORMATS, "text"),
    ) -> None:
        """Print the kubectl-tao version (and the cluster's with --server)."""
        from kubectl_tao import __version__
        from kubectl_tao.cli.output import check_format, emit, emit_data

        fmt = check_format(output, DATA_FORMATS)
        data: dict[str, str] = {"clientVersion": __version__}
        if server:
            from kubectl_tao.core.serverversion import parse_server_version

            raw = session().kubectl().json(["version"], namespaced=False)
            data["serverVersion"] = parse_server_version(raw).text
        if not emit_data(fmt, data):
            emit(client_version_line())
            if server:
                emit(f"server {data['serverVersion']}\n")
