"""What a failed job's ranks printed, read in one round, and the cause it shows (core/causes.py).

One `kubectl logs` process reads every rank's pod at once (kubectl's own parallel requests, `--max-log-requests`
as many as the ranks): the last READ_LINES lines of each, at most READ_BYTES each (`--tail`, `--limit-bytes`),
`--ignore-errors` so that one pod whose log cannot be read does not hide the others. Every rank is read, not only
the failed ones, because a hang or a timeout is told by the rank that printed nothing (the one that stopped
first). A log that cannot be read (a pod gone, RBAC refusing pods/log) becomes one note and the diagnosis goes
on with what it has. Excerpts are sanitized and redacted by core/causes.py before anyone shows them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from kubectl_tao.core import causes
from kubectl_tao.core.valueclass import Factory, Value, record
from kubectl_tao.k8s.kubectl import Kubectl

READ_LINES = 300
READ_BYTES = 64 * 1024
TAIL_LINES = 50  # the lines per rank the record keeps (core/logs.from_history prints them once the Job is gone)
OVERRIDDEN_REASONS = ("ExitCode",)  # a classify reason the logs may name better (the program failed, no more)
_PREFIX = re.compile(r"^\[pod/(?P<pod>[^/\]]+)/(?P<container>[^\]]+)\] ?(?P<line>.*)$")


@record
class LogRead(Value):
    """Each pod's output (pod name -> text) and what could not be read, in one line each."""

    texts: dict[str, str] = Factory(dict)
    notes: list[str] = Factory(list)


def log_args(namespace: str, selector: str, pods: int, *, container: str | None = "tao") -> list[str]:
    """The one `kubectl logs` call reading every rank of a job, bounded per rank."""
    args = [
        "logs",
        "-n",
        namespace,
        "-l",
        selector,
        "--prefix",
        "--ignore-errors",
        f"--tail={READ_LINES}",
        f"--limit-bytes={READ_BYTES}",
        f"--max-log-requests={max(5, pods)}",
    ]
    return [*args, "-c", container] if container else args


def split_prefixed(text: str) -> tuple[dict[str, str], list[str]]:
    """`kubectl logs --prefix` output -> text per pod, and kubectl's own `error: ...` lines (a log that
    could not be read, with --ignore-errors)."""
    lines: dict[str, list[str]] = {}
    errors: list[str] = []
    for raw in text.split("\n"):
        match = _PREFIX.match(raw)
        if match:
            lines.setdefault(match["pod"], []).append(match["line"])
        elif raw.startswith("error: "):
            errors.append(raw)
    return {pod: "\n".join(got) for pod, got in lines.items()}, errors


def logs_call(
    namespace: str, selector: str, pods: int, *, container: str | None = "tao"
) -> tuple[list[str], dict[str, Any]]:
    """The read as a `Kubectl.run_many` entry, to ride in a round of other reads."""
    args = log_args(namespace, selector, pods, container=container)
    return args, {"namespaced": False, "check": False, "best_effort": True}


def from_result(result: Any) -> LogRead:
    """A LogRead from the call's answer (a Completed, or the TaoError it raised)."""
    from kubectl_tao.core.errors import TaoError
    from kubectl_tao.core.redact import redact_cluster_text
    from kubectl_tao.core.sanitize import cap, sanitize
    from kubectl_tao.k8s.kubectl import first_error_line

    def said(text: str) -> str:
        return cap(sanitize(redact_cluster_text(text)), 300)

    if isinstance(result, TaoError):
        return LogRead({}, [f"logs not read: {said(result.message)}"])
    texts, errors = split_prefixed(result.stdout)
    notes = [f"a log not read: {said(error.removeprefix('error: '))}" for error in errors[:3]]
    if len(errors) > 3:
        notes.append(f"{len(errors) - 3} more logs not read")
    if result.returncode != 0:
        notes.append(f"logs not read: {said(first_error_line(result.stderr) or 'kubectl logs failed')}")
    return LogRead(texts, notes)


def read_logs(kc: Kubectl, namespace: str, selector: str, pods: int, *, container: str | None = "tao") -> LogRead:
    """Every rank's bounded output in one kubectl process; what could not be read is a note, never an error."""
    from kubectl_tao.core.errors import TaoError

    args, kwargs = logs_call(namespace, selector, pods, container=container)
    try:
        return from_result(kc.run(args, **kwargs))
    except TaoError as exc:
        return from_result(exc)


def rank_logs(read: LogRead, ranks: Sequence[Mapping[str, Any]]) -> list[causes.RankLog]:
    """The read texts of the ranks `classify` lists (its latest pod per rank), with their pod and node."""
    out = []
    for rank in ranks:
        pod = str(rank.get("pod") or "")
        if pod in read.texts:
            code = rank.get("exit_code")
            out.append(
                causes.RankLog(
                    rank.get("rank"),
                    read.texts[pod],
                    pod=pod,
                    node=str(rank.get("node") or ""),
                    exit_code=int(code) if isinstance(code, int) else None,
                )
            )
    return out


def diagnose(read: LogRead, live: Mapping[str, Any] | None, *, gpus: Any = None) -> causes.Diagnosis | None:
    """The cause the ranks' output shows, or None when nothing was read or nothing was printed."""
    live = live or {}
    logs = rank_logs(read, live.get("ranks") or [])
    if not logs:
        return None
    requested = int(gpus) if isinstance(gpus, int) or (isinstance(gpus, str) and gpus.isdigit()) else None
    found = causes.diagnose(logs, first_failed_rank=live.get("first_failed_rank"), gpus_requested=requested)
    if found is not None and found.cause == "GpuHardware" and found.node:
        found = found.replaced(fix=found.fix.replace("kubectl cordon NODE", f"kubectl cordon {found.node}"))
    return found


def flight_recorder_dir(pods: Sequence[Mapping[str, Any]]) -> str | None:
    """Where the job's flight recorder dumps go (the directory of TORCH_FR_DUMP_TEMP_FILE in the pods'
    container env, as render.py sets it for multi-node torchrun jobs), or None."""
    for pod in pods:
        for container in ((pod.get("spec") or {}).get("containers") or []):
            for env in container.get("env") or []:
                if env.get("name") == "TORCH_FR_DUMP_TEMP_FILE" and isinstance(env.get("value"), str):
                    return env["value"].rsplit("/", 1)[0] or None
    return None


def with_dumps(found: causes.Diagnosis, pods: Sequence[Mapping[str, Any]]) -> causes.Diagnosis:
    """A collective timeout of a job that ran with the flight recorder: where its dumps are and the command
    that reads them, in the facts and the fix."""
    where = flight_recorder_dir(pods)
    nccl = found.cause == "NcclRemoteError" or (found.cause == "CollectiveTimeout" and "Watchdog" in found.evidence)
    if where is None or not nccl:  # the recorder is NCCL's: a gloo timeout leaves no dump
        return found
    fix = (
        f"{found.fix}; the NCCL flight recorder dumped each rank's last collectives into {where}/ on the job's "
        f"volume (nccl_trace_rank_N, written when the watchdog timed out): `torchfrtrace {where}` names the rank "
        "and collective that stopped first"
    )
    return found.replaced(fix=fix, facts={**found.facts, "flight_recorder": where})


def message(found: causes.Diagnosis) -> str:
    """The one line a record's ERROR transition, status's Message and submit --wait's last line carry."""
    where = f"rank {found.rank}: " if found.rank is not None else ""
    detail = f"; {found.detail}" if found.detail else ""
    return f"{where}{found.summary} ({found.cause}, {found.err_class}){detail}"


def tail(text: str, lines: int = TAIL_LINES) -> list[str]:
    """The last `lines` lines of a read text, for the record's per-rank log tail."""
    got = text.split("\n")
    return got[-lines:] if lines else []


ERROR_LINES = 40  # the lines of first error blocks the record keeps per rank (`logs --errors` once the Job is gone)


def first_errors(text: str, rank: int | None) -> list[str]:
    """The first error block of each rank in one pod's output, as one list of lines (sanitized, redacted)."""
    return [line for _, block in causes.error_blocks(text, rank) for line in block][:ERROR_LINES]
