"""The secret-linter corpora under tests/fixtures/secrets/ (credentials.txt must all be refused, honest.txt
must all pass), and how a case is linted: as a file (`kubectl tao lint`, `redact_secrets lint`) and as the
command of a rendered Job (what `submit` lints)."""

from __future__ import annotations

from pathlib import Path

from kubectl_tao.core.lint import lint_documents, lint_manifest_text
from kubectl_tao.core.redact import Finding

CORPUS_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "secrets"


def cases(name: str) -> list[tuple[int, str]]:
    """(line number, case) for every case of a corpus file: one a line, or a '>>>' ... '<<<' block."""
    out: list[tuple[int, str]] = []
    block: list[str] | None = None
    start = 0
    for number, line in enumerate((CORPUS_DIR / name).read_text(encoding="utf-8").splitlines(), start=1):
        if block is not None:
            if line == "<<<":
                out.append((start, "\n".join(block) + "\n"))
                block = None
            else:
                block.append(line)
        elif line == ">>>":
            block, start = [], number
        elif line.strip() and not line.startswith("## "):
            out.append((number, line))
    assert block is None, f"{name}: a '>>>' block is not closed"
    return out


def as_command(case: str) -> dict[str, object]:
    """A Job whose container runs `case` the way submit renders a --command."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "corpus"},
        "spec": {"template": {"spec": {"containers": [{
            "name": "tao", "image": "busybox", "command": ["/bin/sh", "-c", 'exec "$@"', "tao", "/bin/sh", "-c", case],
        }]}}},
    }


def findings(case: str) -> tuple[list[Finding], list[Finding]]:
    """(findings linting the case as a file, findings linting it as a Job's command)."""
    return lint_manifest_text(case, "corpus"), lint_documents([as_command(case)], "corpus")
