"""What a record keeps of a job's progress, and the text read from a pod made fit to parse.

Text from a pod (a status.json tail, a log) is redacted and sanitized before a reader sees it, as every text
kubectl-tao takes from a cluster; carriage returns stay, as the log reader takes the last update of a bar
redrawn in place."""

from __future__ import annotations

from typing import Any

from kubectl_tao.progress.model import Progress, final, from_stored, stored


def clean(text: str) -> str:
    """TEXT with every credential redacted and every terminal sequence or control character made harmless; its
    line breaks and carriage returns kept."""
    from kubectl_tao.core.redact import redact_cluster_text
    from kubectl_tao.core.sanitize import sanitize

    text = redact_cluster_text(text)
    return "\r".join(sanitize(piece, multiline=True) for piece in text.split("\r"))


def from_log(text: str | None) -> Progress | None:
    """The progress at the end of a log (raw text from the cluster)."""
    if not text:
        return None
    from kubectl_tao.progress.logtext import read_log

    return read_log(clean(text))


def ended(kept: object, rank0_log: str | None) -> dict[str, Any] | None:
    """What a record keeps once its job ended: KEPT (the record's progress, last read while the job ran) brought
    up to date by the end of rank 0's log (model.final); None when nothing is known."""
    before, where = from_stored(kept)
    log = from_log(rank0_log)
    after = final(before, log)
    if after is None:
        return None
    if after is not before:
        where = f"{where} and the log of rank 0" if before is not None and where else "the log of rank 0"
    return stored(after, where)
