"""`kubectl tao lint FILE... [-]`: the secret linter over manifests, scripts and config files."""

from __future__ import annotations

from typing import Annotated

import typer

from kubectl_tao.commands.common import VerbCommand

EPILOG = """\b
Examples:
  # A manifest before you apply it
  kubectl tao lint job.yaml
  # What render would apply
  kubectl tao render --image IMG --command CMD --pvc data | kubectl tao lint -
  # Several files; exit 1 when any of them holds a credential
  kubectl tao lint k8s/*.yaml scripts/train.sh

\b
Manifests (YAML or JSON, several documents) are checked field by field, anything else line by line.
Findings go to stderr as `SOURCE:LINE: KIND: PLACE (RULE)` and never show the value.
The KEY=VALUE file given to --env-file holds credentials by design (they go into a Secret from it): lint
finds each of them there, so leave it out of the files you lint.
Exit codes: 0 clean, 1 findings, 2 a file cannot be read."""


def register(app: typer.Typer) -> None:
    @app.command("lint", epilog=EPILOG, cls=VerbCommand)
    def lint(
        files: Annotated[list[str], typer.Argument(help="Files to check; '-' reads stdin (once).", metavar="FILE...")],
    ) -> int:
        """Refuse manifests, scripts and config files that carry an inline credential."""
        import sys
        from pathlib import Path

        from kubectl_tao.cli.output import info
        from kubectl_tao.core.errors import UsageError
        from kubectl_tao.core.lint import FIX_HINT, lint_manifest_text

        if files.count("-") > 1:
            raise UsageError("FILE: '-' (stdin) may be given only once")
        sources: list[tuple[str, str]] = []
        for name in files:  # read everything first: an unreadable file is a usage error, before any finding
            if name == "-":
                sources.append(("<stdin>", sys.stdin.buffer.read().decode("utf-8", errors="replace")))
                continue
            try:
                data = Path(name).read_bytes()
            except OSError as exc:
                raise UsageError(f"FILE: cannot read {name}: {exc.strerror or exc}; check the path") from None
            sources.append((name, data.decode("utf-8", errors="replace")))
        total = 0
        for source, text in sources:
            for finding in lint_manifest_text(text, source):
                info(finding.format())
                total += 1
        if total:
            info(f"error: {total} inline credential(s) found; {FIX_HINT}")
            return 1
        return 0
