"""`logs`: every rank's log, prefixed with its rank; from the record's captured tail once the Job is gone."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator, Sequence

from kubectl_tao.core import contract
from kubectl_tao.core.errors import GateError

_PREFIX = re.compile(r"^\[pod/(?P<pod>[^/\]]+)/[^\]]+\] ?(?P<line>.*)$")


def rank_of(pod: str, job_name: str) -> str | None:
    """Indexed Job pods are named <job>-<index>-<suffix>; single-pod Job pods <job>-<suffix>."""
    rest = pod[len(job_name) + 1 :] if pod.startswith(job_name + "-") else ""
    match = re.fullmatch(r"(\d+)-[a-z0-9]{5}", rest)
    return match.group(1) if match else None


_GLUED = re.compile(r"\[pod/(?P<pod>[^/\[\]\s]+)/[^/\[\]\s]+\] ")


def _unglued(line: str, pods: Collection[str]) -> list[str]:
    """A `--prefix` line split where another pod of PODS begins: kubectl writes a log that ends without a newline
    (or a piece of a line, while following) and the next pod's prefix goes on the same line. Linear."""
    if not pods or line.count("[pod/") < 2:
        return [line]
    out: list[str] = []
    own = _PREFIX.match(line)
    start, mine = (own.start("line"), own["pod"]) if own else (0, None)
    for glued in _GLUED.finditer(line, start):
        if glued["pod"] in pods and glued["pod"] != mine:
            out.append(line[start:glued.start()] if out else line[: glued.start()])
            start, mine = glued.start(), glued["pod"]
    out.append(line[start:] if out else line)
    return out


def rewrite(lines: Iterable[str], job_name: str, multi: bool, pods: Collection[str] = ()) -> Iterator[str]:
    """`kubectl logs --prefix` lines -> `[rank K] line` (multi-node) or the bare line (single pod); a line where
    one pod of PODS runs into another is two lines, each with its own pod's rank."""
    for raw in lines:
        for line in _unglued(raw.rstrip("\n"), pods):
            match = _PREFIX.match(line)
            if not match:
                yield line
            elif not multi:
                yield match["line"]
            else:
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


def from_history(
    ranks: Sequence[tuple[int | None, Sequence[str]]], *, rank: int | None, multi: bool
) -> list[str]:
    """The captured log tails, one line each (prefixed `[rank K] ` when `multi`), for the caller to print.
    RANKS: (rank, its log tail's lines) for each rank the record's history captured."""
    if not ranks:
        raise GateError(
            "the Job is gone (ttlSecondsAfterFinished or deleted) and no log tail was captured for it; "
            "results live in the record's results_dir"
        )
    lines = []
    for number, tail in ranks:
        if rank is not None and number != rank:
            continue
        for line in tail:
            lines.append(f"[rank {number}] {line}" if multi else str(line))
    return lines
