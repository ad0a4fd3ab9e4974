"""What a failed job's ranks printed, read in one round, and the cause it shows (diagnosis/causes.py).

One `kubectl logs` process reads every rank's pod at once: the last READ_LINES lines of each, at most READ_BYTES
each (`--tail`, `--limit-bytes`), `--ignore-errors` so that one pod whose log cannot be read does not hide the
others. Every rank is read, not only the failed ones, because a hang or a timeout is told by the rank that printed
nothing (the one that stopped first). A log that cannot be read (a pod gone, RBAC refusing pods/log) becomes one
note and the diagnosis goes on with what it has.

The end of every log is read, whatever its line lengths. The kubelet seeks to the start of the last `--tail`
lines and stops at `--limit-bytes`, so chatty lines (NCCL's INFO lines) can fill the byte limit before the
traceback at the end. A rank whose answer reached the limit is read again, alone: the lines it did not get
(`--tail` of the lines not seen), then, while those do not fit either, fewer of the last lines (a quarter each
time), at most REREADS times; each read stays within READ_BYTES. Lines are kept whole: the line the limit cut is
dropped once a reread has it whole (only a last line longer than READ_BYTES is kept cut, and a note says so).

kubectl prints the pods one after another (in any order), each line after its pod's `[pod/NAME/CONTAINER] `
prefix; a log cut mid-line (or one that ends without a newline) runs into the next pod's prefix on the same line.
That line is split where the byte limit (or, for a pod the caller names, the next pod's prefix) says the next
pod begins, so every line stays with the pod that printed it. A line's `[rankN]:` is torch's own only when N is
a rank the pod runs (rank_logs, error_blocks); any other is text the program printed, and the line stays the
pod's.

Every line is redacted (core/redact.redact_log_line) as it is read, before anything is derived from it: the cause,
its facts and detail, the record's log tail and first errors, `logs --errors`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from kubectl_tao.core.valueclass import Factory, Value, record
from kubectl_tao.diagnosis import causes
from kubectl_tao.k8s.kubectl import Kubectl

READ_LINES = 300
READ_BYTES = 64 * 1024
REREADS = 5  # reads of one rank after the first: 300 -> 75 -> 18 -> 4 -> 1 lines at most
TAIL_LINES = 50  # the lines per rank the record keeps (core/logs.from_history prints them once the Job is gone)
# job_status reasons the logs may name better: the program failed, no more; the stall watch ended it (its line)
OVERRIDDEN_REASONS = ("ExitCode", "Stalled")
_PREFIX = re.compile(r"^\[pod/(?P<pod>[^/\]]+)/(?P<container>[^\]]+)\] ?(?P<line>.*)$", re.DOTALL)
_NEXT = re.compile(r"\[pod/(?P<pod>[^/\[\]\s]+)/[^/\[\]\s]+\] |error: ")  # what kubectl writes at a pod's start
_PREFIX_CHARS = 32  # torch's `[rankN]: ` fits; a longer run of digits is a program's text, never a rank
_SLACK = 3  # characters a cut UTF-8 sequence may take once decoded (one U+FFFD per byte)


@record
class LogRead(Value):
    """Each pod's output (pod name -> text, every line redacted) and what could not be read, in one line each."""

    texts: dict[str, str] = Factory(dict)
    notes: list[str] = Factory(list)


@record
class Split(Value):
    """`kubectl logs --prefix` output taken apart: each pod's whole lines, the line the byte limit cut (pods
    whose answer reached the limit), and kubectl's own `error: ...` lines."""

    lines: dict[str, list[str]] = Factory(dict)
    cut: dict[str, str] = Factory(dict)
    errors: list[str] = Factory(list)

    def texts(self) -> dict[str, str]:
        return {pod: "\n".join(got) for pod, got in self.lines.items()}


def log_args(
    namespace: str, selector: str, pods: int, *, container: str | None = "tao", lines: int = READ_LINES
) -> list[str]:
    """The one `kubectl logs` call reading every rank of a job, bounded per rank."""
    args = [
        "logs",
        "-n",
        namespace,
        "-l",
        selector,
        "--prefix",
        "--ignore-errors",
        f"--tail={lines}",
        f"--limit-bytes={READ_BYTES}",
        f"--max-log-requests={max(5, pods)}",
    ]
    return [*args, "-c", container] if container else args


def _bytes(text: str) -> int:
    return len(text.encode("utf-8", errors="surrogatepass"))


def _cut_at(line: str, room: int) -> int:
    """The index in LINE where ROOM bytes of it end (within _SLACK characters: a cut sequence decodes wider)."""
    raw = line.encode("utf-8", errors="surrogatepass")
    return len(raw[:room].decode("utf-8", errors="ignore"))


def split_prefixed(text: str, *, limit: int | None = READ_BYTES, pods: Collection[str] = ()) -> Split:
    """`kubectl logs --prefix` output -> each pod's lines, kept whole and with the pod that printed them.

    kubectl writes the pods one after another, in no fixed order (logs.go ranges over a Go map). A pod's answer
    cut by `--limit-bytes` (LIMIT) ends mid-line and the next pod's prefix (or kubectl's `error: ...`) follows on
    the same line: the line is split where the pod's bytes reach the limit, and its part is that pod's cut line.
    A pod that ended without a newline runs into the next one the same way: the line is split at the prefix of
    a pod in PODS that has printed nothing yet (kubectl never comes back to a pod it has finished), found before
    the limit, however long the next pod's first line is. Linear in the text."""
    out = Split()
    used: dict[str, int] = {}
    seen: set[str] = set()
    known = set(pods)
    pending = text.split("\n")
    if pending and pending[-1] == "":
        pending.pop()
    pending.reverse()
    while pending:
        raw = pending.pop()
        match = _PREFIX.match(raw)
        if match is None:
            if raw.startswith("error: "):
                out.errors.append(raw)
            continue
        pod, line = match["pod"], match["line"]
        seen.add(pod)
        room = None if limit is None else limit - used.get(pod, 0)
        over = room is not None and _bytes(line) + 1 > room
        at = _cut_at(line, max(room or 0, 0)) if over else len(line)
        glued = _glued(line, known, seen, at + _SLACK) if known else None
        if glued is not None:
            line, rest = line[:glued], line[glued:]
            over = room is not None and _bytes(line) >= room  # it ended exactly at the limit: more may follow
        elif over:
            cut = next((i for i in range(max(at - _SLACK, 0), min(at + _SLACK, len(line)) + 1)
                        if _NEXT.match(line, i)), len(line))
            line, rest = line[:cut], line[cut:]
        else:
            rest = ""
        if over:
            out.lines.setdefault(pod, [])
            out.cut[pod] = line
            used[pod] = limit or 0
        else:
            out.lines.setdefault(pod, []).append(line)
            used[pod] = used.get(pod, 0) + _bytes(line) + 1
        if rest:
            pending.append(rest)
    for pod, count in used.items():
        if limit is not None and count >= limit:
            out.cut.setdefault(pod, "")  # the limit met a line's end: more may follow
    return out


def _glued(line: str, known: Collection[str], seen: Collection[str], end: int) -> int | None:
    """Where in LINE, up to END (the byte limit), a pod of KNOWN that has printed nothing yet begins: the pod
    before it ended there without a newline, whatever the next pod's first line holds (a line longer than the
    limit included). Past the limit the text is another pod's anyway."""
    for m in _NEXT.finditer(line):
        if m.start() > end:
            return None
        if m["pod"] and m["pod"] in known and m["pod"] not in seen:
            return m.start()
    return None


def _joined(lines: list[str], cut: str, got: list[str]) -> list[str]:
    """LINES (whole lines of the first read, then its CUT line) followed by GOT, a later read of the log's last
    lines: the lines both hold are kept once (a log of fewer lines than asked is read from its start both
    times). The longest overlap wins whose next line goes on with CUT."""
    for m in range(min(len(lines), len(got) - (1 if cut else 0)), 0, -1):
        if got[:m] == lines[len(lines) - m :] and (not cut or got[m].startswith(cut)):
            return lines + got[m:]
    return lines + got


def logs_call(
    namespace: str, selector: str, pods: int, *, container: str | None = "tao", lines: int = READ_LINES
) -> tuple[list[str], dict[str, Any]]:
    """The read as a `Kubectl.run_many` entry, to ride in a round of other reads."""
    args = log_args(namespace, selector, pods, container=container, lines=lines)
    return args, {"namespaced": False, "check": False, "best_effort": True}


def _said(text: str) -> str:
    from kubectl_tao.core.redact import redact_cluster_text
    from kubectl_tao.core.sanitize import cap, sanitize

    return cap(sanitize(redact_cluster_text(text)), 300)


def from_result(result: Any, *, pods: Collection[str] = ()) -> LogRead:
    """A LogRead from the call's answer (a Completed, or the TaoError it raised), without rereads: each
    pod's whole lines (and the line the byte limit cut), redacted."""
    split, notes = _first_read(result, pods)
    return _finished(split, {}, notes)


def _first_read(result: Any, pods: Collection[str]) -> tuple[Split, list[str]]:
    from kubectl_tao.core.errors import TaoError
    from kubectl_tao.k8s.kubectl import first_error_line

    if isinstance(result, TaoError):
        return Split(), [f"logs not read: {_said(result.message)}"]
    split = split_prefixed(result.stdout, pods=pods)
    notes = [f"a log not read: {_said(error.removeprefix('error: '))}" for error in split.errors[:3]]
    if len(split.errors) > 3:
        notes.append(f"{len(split.errors) - 3} more logs not read")
    if result.returncode != 0:
        notes.append(f"logs not read: {_said(first_error_line(result.stderr) or 'kubectl logs failed')}")
    return split, notes


def _finished(split: Split, ends: Mapping[str, list[str]], notes: list[str]) -> LogRead:
    """Each pod's text, every line redacted: its whole lines, then the end a reread got (else its cut line)."""
    from kubectl_tao.core.redact import redact_log_line

    texts = {}
    for pod, lines in split.lines.items():
        if pod in ends:
            got = _joined(lines, split.cut.get(pod, ""), ends[pod])
        else:
            got = [*lines, *([split.cut[pod]] if split.cut.get(pod) else [])]
        texts[pod] = "\n".join(redact_log_line(line) for line in got)
    return LogRead(texts, notes)


def _reread_args(namespace: str, pod: str, container: str | None, lines: int) -> list[str]:
    args = ["logs", "-n", namespace, pod, f"--tail={lines}", f"--limit-bytes={READ_BYTES}"]
    return [*args, "-c", container] if container else args


def read_ends(
    kc: Kubectl, namespace: str, split: Split, *, container: str | None = "tao", lines: int = READ_LINES
) -> tuple[dict[str, list[str]], list[str]]:
    """The end of each log the byte limit cut (see the module's docstring): pod -> the lines that follow its
    whole lines (or its last lines), and notes. The pods are read at once, one kubectl process each."""
    from kubectl_tao.core.errors import TaoError

    ends: dict[str, list[str]] = {}
    notes: list[str] = []
    want = {pod: max(lines - len(split.lines.get(pod, [])), 1) for pod in split.cut}
    first = dict(want)
    for _ in range(REREADS):
        if not want:
            break
        calls = {
            pod: (_reread_args(namespace, pod, container, tail), {"namespaced": False, "check": False,
                                                                   "best_effort": True})
            for pod, tail in want.items()
        }
        answers = kc.run_many(calls)
        again: dict[str, int] = {}
        for pod, tail in want.items():
            answer = answers[pod]
            if isinstance(answer, TaoError) or answer.returncode != 0:
                why = answer.message if isinstance(answer, TaoError) else answer.stderr.strip() or "kubectl failed"
                notes.append(f"the end of pod {pod}'s log not read: {_said(why)}")
                continue
            text = answer.stdout
            got = text.split("\n")
            if got and got[-1] == "":
                got.pop()
            if _bytes(text) < READ_BYTES:
                ends[pod] = got
                if tail < first[pod]:
                    notes.append(
                        f"pod {pod}: its last {lines} lines hold more than {READ_BYTES // 1024} KiB; read its "
                        f"first lines and its last {tail}"
                    )
            elif tail > 1:
                again[pod] = max(tail // 4, 1)
            else:
                ends[pod] = got[:1]
                notes.append(f"pod {pod}: its last line is longer than {READ_BYTES // 1024} KiB; its start is read")
        want = again
    return ends, notes


def read_logs(
    kc: Kubectl,
    namespace: str,
    selector: str,
    pods: int,
    *,
    container: str | None = "tao",
    names: Collection[str] = (),
    lines: int = READ_LINES,
    answer: Any = None,
) -> LogRead:
    """Every rank's bounded output, its end always read (rereads of a log the byte limit cut), every line
    redacted; what could not be read is a note, never an error. ANSWER: the first read, already run (it rode in a
    round of other reads); NAMES: the job's pod names, which tell where a pod's output runs into the next one."""
    from kubectl_tao.core.errors import TaoError

    if answer is None:
        args, kwargs = logs_call(namespace, selector, pods, container=container, lines=lines)
        try:
            answer = kc.run(args, **kwargs)
        except TaoError as exc:
            answer = exc
    split, notes = _first_read(answer, names)
    ends, more = read_ends(kc, namespace, split, container=container, lines=lines) if split.cut else ({}, [])
    return _finished(split, ends, notes + more)


def pod_names(pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """The names of PODS (a read's NAMES: where one pod's output runs into the next)."""
    return [str((pod.get("metadata") or {}).get("name") or "") for pod in pods]


def own_ranks(text: str, rank: int | None, per_pod: int | None) -> str:
    """TEXT of the pod of RANK (its completion index) running PER_POD processes (torchrun's --nproc_per_node:
    global ranks rank*per_pod .. rank*per_pod+per_pod-1): a line whose `[rankN]:` names a rank the pod does not
    run is text the program printed, not torch's prefix, so it is put under the pod's own first rank."""
    if rank is None or per_pod is None or "[rank" not in text:
        return text
    low = rank * per_pod
    lines = text.split("\n")
    for i, line in enumerate(lines):
        m = causes.RANK_PREFIX.match(line[:_PREFIX_CHARS])
        if m and not low <= int(m.group(1)) < low + per_pod:
            lines[i] = f"[rank{low}]: {line}"
    return "\n".join(lines)


def rank_logs(
    read: LogRead, ranks: Sequence[Mapping[str, Any]], *, per_pod: int | None = None
) -> list[causes.RankLog]:
    """The read texts of the ranks `job_status` lists (its latest pod per rank), with their pod and node; PER_POD:
    the processes each pod runs, when known (see own_ranks)."""
    out = []
    for rank in ranks:
        pod = str(rank.get("pod") or "")
        if pod in read.texts:
            code = rank.get("exit_code")
            index = rank.get("rank") if isinstance(rank.get("rank"), int) else None
            out.append(
                causes.RankLog(
                    rank.get("rank"),
                    own_ranks(read.texts[pod], index, per_pod),
                    pod=pod,
                    node=str(rank.get("node") or ""),
                    exit_code=int(code) if isinstance(code, int) else None,
                )
            )
    return out


def ranks_per_pod(flags: Mapping[str, Any], nodes: int | None, gpus: int | None) -> int | None:
    """The torchrun workers each pod of a job runs, when kubectl-tao launched them: a multi-node job with
    `--launcher torchrun` runs max(--gpus, 1) a pod (render.py's NPROC_PER_NODE), global ranks by node rank;
    None for any other job (one pod runs whatever its command starts). FLAGS: the job flags the record kept
    (K8sRecord.flags, {} for a Job launched another way); NODES and GPUS: the record's."""
    if flags.get("launcher") != "torchrun" or not isinstance(nodes, int) or nodes < 2 or not isinstance(gpus, int):
        return None
    return max(gpus, 1)


def diagnose(
    read: LogRead, live: Mapping[str, Any] | None, *, gpus: Any = None, per_pod: int | None = None
) -> causes.Diagnosis | None:
    """The cause the ranks' output shows, or None when nothing was read or nothing was printed. PER_POD: the
    ranks each pod runs, when known (ranks_per_pod): a `[rankN]:` outside a pod's own is the program's text."""
    live = live or {}
    requested = int(gpus) if isinstance(gpus, int) or (isinstance(gpus, str) and gpus.isdigit()) else None
    logs = rank_logs(read, live.get("ranks") or [], per_pod=per_pod)
    if not logs:
        return None
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


def error_blocks(text: str, rank: int | None, per_pod: int | None = None) -> list[tuple[int | None, list[str]]]:
    """The first error block of each rank in the output of the pod of RANK (causes.error_blocks; `logs --errors`).
    Ranks are told apart by torch's `[rankN]:` only where N is a rank the pod runs (own_ranks, PER_POD): a line
    the program printed with another rank's prefix is in the block of the pod's own first rank, shown as the pod
    printed it."""
    blocks = causes.error_blocks(own_ranks(text, rank, per_pod), rank)
    if rank is None or per_pod is None:
        return blocks
    low = rank * per_pod
    added = f"[rank{low}]: "

    def printed(line: str) -> str:
        rest = line[len(added) :] if line.startswith(added) else ""
        m = causes.RANK_PREFIX.match(rest[:_PREFIX_CHARS])
        return rest if m and not low <= int(m.group(1)) < low + per_pod else line

    return [(r, [printed(line) for line in block] if r == low else block) for r, block in blocks]


def first_errors(text: str, rank: int | None, per_pod: int | None = None) -> list[str]:
    """The first error block of each rank in one pod's output, as one list of lines (sanitized, redacted);
    PER_POD as in error_blocks."""
    return [line for _, block in error_blocks(text, rank, per_pod) for line in block][:ERROR_LINES]
