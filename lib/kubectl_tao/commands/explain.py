"""`kubectl tao explain JOB`: why a job is pending or failed, with the evidence and a fix."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import typer

from kubectl_tao.commands.common import DATA_FORMATS, Session, VerbCommand, output_option, record_store, session

if TYPE_CHECKING:
    from kubectl_tao.diagnosis.explain import Explanation

EPILOG = """\b
Examples:
  kubectl tao explain dino-train-3f9a1c
  kubectl tao explain dino-train-3f9a1c -o json

\b
Reads the Job, its pods and their events (two kubectl calls at once; a third, nodes, when the scheduler
refused a pod) and names each cause with the cluster's own words as evidence and what to do. When the program
failed, what its ranks printed is read too (the last lines of every rank, in the same round when the record
knows the job failed) and the cause named with the rank and line that show it, its class (ERR_INFRA: a retry
can help; ERR_PROGRAM: it cannot) and the fix; see docs/diagnosis.md. A Job deleted by its TTL is explained
from the history its record captured (with the cause its logs showed). Exit codes: 0 nothing wrong found, 1
findings printed (or an error)."""


def _text(explanation: object) -> str:
    """The explanation as text; each field the cluster or a record wrote stays on its line (`one`)."""
    from kubectl_tao.core.sanitize import sanitize as one
    from kubectl_tao.diagnosis.explain import Explanation

    assert isinstance(explanation, Explanation)
    e = explanation
    where = f" ({e.namespace}/{e.job})" if e.namespace and e.job else ""
    why = f" - {one(e.reason)}" if e.reason else ""
    lines = [f"job {e.id}{where}: {e.state}{why}"]
    if e.gang:
        from kubectl_tao.k8s.gang import describe

        lines.append(f"gang: {one(describe(e.gang))}")
    for line in e.restarts:
        lines.append(f"restarts: {one(line)}")
    if not e.findings:
        lines.append(f"nothing wrong found ({one(e.message)})" if e.message else "nothing wrong found")
    for number, finding in enumerate(e.findings, start=1):
        lines.append(f"{number}. {one(finding.cause)}")
        if finding.evidence:
            lines.append(f"   evidence: {one(finding.evidence)}")
        cause = e.diagnosis or {}
        if cause and finding.code == f"log:{cause.get('cause')}":
            lines += [f"   then: {one(str(line))}" for line in cause.get("context") or []]
            if cause.get("detail"):
                lines.append(f"   details: {one(str(cause['detail']))}")
        lines.append(f"   fix: {one(finding.fix)}")
    return "\n".join(lines) + "\n"


def _explain(sess: Session, job: str, force: bool) -> Explanation:
    """JOB explained. Its first round of kubectl reads starts first, guessed from the raw record files
    (jobs/early_read.py), so kubectl runs while the record is loaded and checked and the diagnosis imported."""
    from kubectl_tao.core.errors import TaoError
    from kubectl_tao.jobs import early_read
    from kubectl_tao.k8s.kubectl import discard_prestarted

    with contextlib.suppress(TaoError):  # a kubeconfig that cannot be read: no guess; its error comes in turn
        early_read.start_explain(job, sess.options, sess.target().server, force=force)
    try:
        from kubectl_tao.diagnosis.explain import explain_job
        from kubectl_tao.jobs import track as tracking

        tracked = tracking.load(record_store(), job)
        return explain_job(sess.kubectl(), tracked, server=sess.target().server, force=force)
    finally:
        discard_prestarted()


def register(app: typer.Typer) -> None:
    @app.command("explain", epilog=EPILOG, cls=VerbCommand)
    def explain(
        job: str = typer.Argument(..., help="Record id (see `kubectl tao list`)."),
        output: str = output_option(DATA_FORMATS, "text"),
        force: bool = typer.Option(False, "--force", help="Look even if kubectl points at another cluster or Job UID."),
    ) -> int:
        """Explain why a job is pending or failed: cause, evidence, fix."""
        from kubectl_tao.cli.output import check_format

        fmt = check_format(output, DATA_FORMATS)
        sess = session()
        result = _explain(sess, job, force)
        from kubectl_tao.cli.output import emit, emit_data, info
        from kubectl_tao.core.sanitize import sanitize as one

        if not emit_data(fmt, result.to_dict()):
            for note in result.notes:
                info(f"note: {one(note)}")
            emit(_text(result))
        return 1 if result.findings else 0
