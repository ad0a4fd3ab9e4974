"""`logs`: every rank's log, prefixed with its rank; from the record's captured tail once the Job is gone."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from kubectl_tao.core import contract
from kubectl_tao.core.errors import GateError

_PREFIX = re.compile(r"^\[pod/(?P<pod>[^/\]]+)/[^\]]+\] ?(?P<line>.*)$")


def rank_of(pod: str, job_name: str) -> str | None:
    """Indexed Job pods are named <job>-<index>-<suffix>; single-pod Job pods <job>-<suffix>."""
    rest = pod[len(job_name) + 1 :] if pod.startswith(job_name + "-") else ""
    match = re.fullmatch(r"(\d+)-[a-z0-9]{5}", rest)
    return match.group(1) if match else None


def rewrite(lines: Iterable[str], job_name: str, multi: bool) -> Iterator[str]:
    """`kubectl logs --prefix` lines -> `[rank K] line` (multi-node) or the bare line (single pod)."""
    for raw in lines:
        line = raw.rstrip("\n")
        match = _PREFIX.match(line)
        if not match:
            yield line
            continue
        if not multi:
            yield match["line"]
            continue
        rank = rank_of(match["pod"], job_name)
        yield f"[rank {rank if rank is not None else '?'}] {match['line']}"


DEFAULT_TAIL = 200  # the reference's default; --tail -1 prints everything


def kubectl_args(
    namespace: str,
    job_name: str,
    *,
    tail: int | None,
    follow: bool,
    rank: int | None,
    nodes: int,
    selector: str | None = None,
    container: str | None = "tao",
) -> list[str]:
    """`selector` defaults to kubectl-tao's tao-job label; a Job launched another way is selected with
    job-name=<name> and read from its default container (`container=None`)."""
    selector = selector or contract.pod_selector(job_name)
    if rank is not None:
        selector = contract.rank_selector(selector, rank)
    args = ["logs", "-n", namespace, "-l", selector, "--prefix"]
    if container:
        args += ["-c", container]
    args.append(f"--max-log-requests={max(5, nodes)}")
    args.append(f"--tail={tail if tail is not None else DEFAULT_TAIL}")
    if follow:
        args.append("--follow")
    return args


def from_history(history: dict[str, Any] | None, *, rank: int | None, multi: bool) -> list[str]:
    """The captured log tails, one line each (prefixed `[rank K] ` when `multi`), for the caller to print."""
    if not history or not history.get("ranks"):
        raise GateError(
            "the Job is gone (ttlSecondsAfterFinished or deleted) and no log tail was captured for it; "
            "results live in the record's results_dir"
        )
    lines = []
    for entry in history["ranks"]:
        if rank is not None and entry.get("rank") != rank:
            continue
        for line in entry.get("log_tail") or []:
            lines.append(f"[rank {entry.get('rank')}] {line}" if multi else str(line))
    return lines
