"""Which failures of a multi-node rank restart the gang (`--max-restarts`), and the exit codes of that protocol.

Pure: exit codes, signals and the tail of a rank's output in, a decision out. The rank entrypoint
(templates/k8s/gang-restart-entrypoint.sh) decides in the pod from what this module renders: the retried codes
(TAO_RETRY_EXIT_CODES) and the signs of each diagnosis class (TAO_RETRY_SIGNS, derived from core/causes.py's
table: one row per cause and class, its signs as one POSIX ERE that `grep -E` matches). The class a failed
rank's output shows decides over its exit code (`classify(..., diagnosis=...)`): ERR_PROGRAM is final (a
device-side assert fails again though it ends in SIGABRT), ERR_INFRA restarts (an NCCL system error is worth a
retry though Python exits 1). `status` and `explain` read an attempt's recorded end back through
`parse_history`.

Protocol (see docs/restarts.md):
- EXIT_RESTART (85): a rank asks for the next attempt; the container restart rule RestartAllContainers matches
  this code only, so the kubelet restarts the pod's containers in place (same pod, IP and DNS name);
- the rendezvous barrier's 88 is retried once; when it repeats it ends the job (the Job's podFailurePolicy);
- the stall watch's EXIT_STALLED (86): the program made no progress for --stall-timeout and was ended; retried
  (cause ``Stalled``, ERR_INFRA);
- a sign of a cause in the tail of the failed rank's output: its class decides (``output_cause``);
- else any other non-zero code is final: the pod fails and the Job fails (backoffLimit 0).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from kubectl_tao.core import causes, ere
from kubectl_tao.core.valueclass import Value, record

EXIT_RESTART = 85
EXIT_STALLED = 86  # the stall watch (--stall-timeout, templates/k8s/stall-watch.sh) ended a program that stalled
EXIT_RENDEZVOUS_TIMEOUT = 88
EXIT_SIGNAL_BASE = 128
MAX_RESTARTS = 20  # attempts are recorded in the termination message (4096 bytes): keep the history readable

# Signals that say the process was killed or crashed, not that the program decided to fail: a lost peer
# (SIGTERM/SIGKILL from the entrypoint or the kubelet), a native crash (SIGSEGV, SIGBUS, SIGABRT from a NCCL
# watchdog or a failed CUDA call), a hang-up.
RETRYABLE_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 7: "SIGBUS", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM"}
# Codes the pod's scripts reserve: never a program's failure to retry.
RESERVED = {EXIT_RESTART: "restart request", 89: "tier C upload failed"}

RETRY, FINAL, DONE = "retry", "final", "done"
STALLED = "Stalled"  # the cause (core/causes.py) of EXIT_STALLED
# diagnosis classes (core/causes.py's ERR_* classes) that override the exit code
_DIAGNOSIS = {"ERR_INFRA": RETRY, "ERR_PROGRAM": FINAL}


@record(frozen=True)
class Decision(Value):
    """What one rank's exit means for the gang: retry (another attempt), final (the job fails) or done."""

    verdict: str
    reason: str


def gang_dir(mount_path: str, record_id: str) -> str:
    """Where the ranks of a job keep their shared attempt state and each attempt's output, on the job's volume."""
    return f"{mount_path.rstrip('/')}/.kubectl-tao/restarts/{record_id}"


def restart_rules() -> list[dict[str, Any]]:
    """The rank container's restart rule: the entrypoint's restart request (EXIT_RESTART) restarts every container
    of the pod in place (RestartAllContainers); any other exit fails the pod, as restartPolicy Never does."""
    return [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [EXIT_RESTART]}}]


def retryable_exit_codes() -> list[int]:
    """The exit codes the entrypoint retries (TAO_RETRY_EXIT_CODES), barrier timeout and stall included."""
    return sorted(
        [EXIT_SIGNAL_BASE + number for number in RETRYABLE_SIGNALS] + [EXIT_STALLED, EXIT_RENDEZVOUS_TIMEOUT]
    )


def classify(
    code: int, *, previous_code: int | None = None, diagnosis: str | None = None, cause: str | None = None
) -> Decision:
    """One rank's exit CODE (a shell's 128+N for signal N). PREVIOUS_CODE: the code that ended the attempt
    before (a repeated barrier timeout is final). DIAGNOSIS: an ERR_* class of the failure, when known,
    decides over the exit code (a device-side assert ends in SIGABRT yet fails again); CAUSE (its name in
    core/causes.py) is then the reason, as the entrypoint records it."""
    if isinstance(code, bool) or not isinstance(code, int) or not 0 <= code <= 255:
        raise ValueError(f"an exit code is 0..255, got {code!r}")
    if code == 0:
        return Decision(DONE, "exit 0")
    if code == EXIT_RENDEZVOUS_TIMEOUT:
        if previous_code == EXIT_RENDEZVOUS_TIMEOUT:
            return Decision(FINAL, "rendezvous timeout (exit 88) twice in a row")
        return Decision(RETRY, "rendezvous timeout (exit 88)")
    if code in RESERVED:
        return Decision(FINAL, f"exit {code} ({RESERVED[code]})")
    if code == EXIT_STALLED:
        return Decision(RETRY, f"{STALLED} (exit {code})")
    if diagnosis in _DIAGNOSIS:
        return Decision(_DIAGNOSIS[diagnosis], cause or f"exit {code} ({diagnosis})")
    signal = code - EXIT_SIGNAL_BASE
    if signal in RETRYABLE_SIGNALS:
        return Decision(RETRY, f"exit {code} ({RETRYABLE_SIGNALS[signal]})")
    return Decision(FINAL, f"exit {code} (a program error: it would fail again)")


# ------------------------------------------------------------------------------ the signs the pod matches
TAIL_LINES = 400  # the entrypoint reads this many last lines of the failed attempt's output
RANK_PREFIX_ERE = r"^(\[rank[0-9]+\]: ?)?"  # torch's `[rankN]: ` before a line, which causes.py drops first
# Signs that say a peer went away (tier FOLLOWER): the rank that printed them waits longer before it ends the
# attempt, so that the peer's own failure (it may be final) decides.
FOLLOWER = causes.FOLLOWER


@record(frozen=True)
class SignRow(Value):
    """One cause's signs of one class, as the entrypoint matches them: ``ere`` finds a line that one of
    ``patterns`` (causes.py's own) finds, after causes.py's `[rankN]: ` prefix is dropped."""

    err_class: str
    tier: str
    cause: str
    ere: str
    patterns: tuple[re.Pattern[str], ...]

    def line(self) -> str:
        return f"{self.err_class} {self.tier} {self.cause} {self.ere}"


def _sign_ere(pattern: re.Pattern[str]) -> str | None:
    text = ere.to_ere(pattern.pattern, pattern.flags)
    if text is None:
        return None
    return RANK_PREFIX_ERE + text[1:] if text.startswith("^") else text


GENERIC = causes.GENERIC
NOT_AN_ERROR = "ChildFailedError"  # torchrun's closing banner: never the catch-all's line (causes._NOT_AN_ERROR)


def sign_rows() -> list[SignRow]:
    """The signs the entrypoint matches, in the order a rank's own output is judged in causes.py (tier:
    primary, killed, timeout, generic, follower; then the table's order): the first row that finds a line
    decides. One row per run of a cause's signs of one class, every sign that ERE says exactly (the others:
    ``untranslated_signs``). The catch-all ProgramError (tier generic: an exception the table does not name)
    only counts on a line that no other row finds and that is not torchrun's ChildFailedError banner, as in
    causes.py, where a line belongs to the first cause of the table that finds it."""
    rows: list[SignRow] = []
    for cause in sorted(causes.CAUSES, key=lambda c: causes.RANK_ORDER[c.tier]):
        run: list[tuple[str, re.Pattern[str]]] = []
        run_class = ""
        for sign in cause.signs:
            text = _sign_ere(sign.pattern)
            if text is None:
                continue
            klass = sign.err_class or cause.err_class
            if run and klass != run_class:
                rows.append(_row(run_class, cause, run))
                run = []
            run_class = klass
            run.append((text, sign.pattern))
        if run:
            rows.append(_row(run_class, cause, run))
    return rows


def _row(klass: str, cause: causes.Cause, run: list[tuple[str, re.Pattern[str]]]) -> SignRow:
    text = run[0][0] if len(run) == 1 else "|".join(f"({text})" for text, _ in run)
    return SignRow(klass, cause.tier, cause.name, text, tuple(pattern for _, pattern in run))


def untranslated_signs() -> list[tuple[str, str]]:
    """(cause, pattern) of the signs ERE cannot say exactly: causes.py still reads them (`explain`); the
    entrypoint does not."""
    return [
        (cause.name, sign.pattern.pattern)
        for cause in causes.CAUSES
        for sign in cause.signs
        if _sign_ere(sign.pattern) is None
    ]


def signs_text() -> str:
    """TAO_RETRY_SIGNS: one row a line, ``CLASS TIER CAUSE ERE``."""
    return "\n".join(row.line() for row in sign_rows())


def output_cause(text: str) -> SignRow | None:
    """The row the entrypoint picks for a failed attempt's output TEXT: the first row (``sign_rows`` order)
    whose signs find one of its last TAIL_LINES lines (NUL bytes dropped), each read as causes.py reads it
    (``causes.matched_lines``: cut to causes.LINE_CHARS bytes, colours removed), `[rankN]: ` dropped (the
    generic row: among the lines no other row finds)."""
    lines = causes.matched_lines(text.replace("\0", ""))
    if lines and lines[-1] == "":
        lines.pop()
    tail = [causes.RANK_PREFIX.sub("", line, count=1) for line in lines[-TAIL_LINES:]]
    rows = sign_rows()
    specific = [pattern for row in rows if row.tier != GENERIC for pattern in row.patterns]
    unnamed = [line for line in tail if NOT_AN_ERROR not in line and not any(p.search(line) for p in specific)]
    for row in rows:
        if any(pattern.search(line) for line in (unnamed if row.tier == GENERIC else tail) for pattern in row.patterns):
            return row
    return None


def within_budget(restarts_used: int, max_restarts: int) -> bool:
    """May one more counted restart happen?"""
    return restarts_used < max_restarts


# ------------------------------------------------------------------------------ the attempt history
# Each attempt's end, one line in the rank container's termination message (written by the entrypoint):
#   kubectl-tao attempt=2 rank=1 exit=137 decision=restart counted=1 reason=SIGKILL
_LINE_RE = re.compile(
    r"kubectl-tao attempt=(?P<attempt>\d{1,4}) rank=(?P<rank>\d{1,5}) exit=(?P<exit>\d{1,3}) "
    r"decision=(?P<decision>restart|fail|disrupted) counted=(?P<counted>[01]) "
    r"reason=(?P<reason>[A-Za-z0-9_ ()-]{0,80})$"
)


@record(frozen=True)
class AttemptEnd(Value):
    """How one attempt of a gang ended: which rank ended it first, with what, and what followed."""

    attempt: int
    rank: int
    exit_code: int
    decision: str  # restart | fail | disrupted (a restart that does not count: eviction, preemption)
    counted: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "rank": self.rank,
            "exit_code": self.exit_code,
            "decision": self.decision,
            "counted": self.counted,
            "reason": self.reason,
            "said": self.sentence(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AttemptEnd:
        return cls(
            attempt=int(data["attempt"]),
            rank=int(data["rank"]),
            exit_code=int(data["exit_code"]),
            decision=str(data["decision"]),
            counted=bool(data["counted"]),
            reason=str(data["reason"]),
        )

    def sentence(self) -> str:
        then = {
            "restart": "the gang restarted (counted)",
            "disrupted": "the gang restarted (not counted: the pod was evicted or preempted)",
            "fail": "the job failed",
        }[self.decision]
        why = self.reason
        cause = causes.BY_NAME.get(why.split(" (", 1)[0])
        if cause is not None:  # a cause the rank printed (core/causes.py): what it means
            why = f"{why}: {cause.summary}"
        return f"attempt {self.attempt} ended: rank {self.rank} exit {self.exit_code} ({why}); {then}"


def rank_restarts(pods: Iterable[Mapping[str, Any]], container: str = "tao") -> tuple[int, list[str]]:
    """From a job's pods: the most in-place restarts of the rank container in any pod (the kubelet keeps the count
    across RestartAllContainers), and the termination messages its containers left (the attempt history)."""
    most, messages = 0, []
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            if status.get("name") != container:
                continue
            count = status.get("restartCount")
            if isinstance(count, int) and not isinstance(count, bool):
                most = max(most, count)
            for key in ("state", "lastState"):
                message = ((status.get(key) or {}).get("terminated") or {}).get("message")
                if isinstance(message, str) and message:
                    messages.append(message)
    return most, messages


def restart_view(max_restarts: int, ends: Iterable[AttemptEnd], in_place: int = 0) -> dict[str, Any]:
    """What `status` shows of a job with --max-restarts: restarts so far (the kubelet's count IN_PLACE, or the
    attempt ends known, whichever is more), those counted against MAX_RESTARTS, the attempt now, and why each
    attempt ended."""
    known = sorted(ends, key=lambda end: end.attempt)
    restarted = sum(1 for end in known if end.decision != "fail")
    restarts = max(in_place, restarted)
    failed = [end for end in known if end.decision == "fail"]
    return {
        "restarts": restarts,
        "counted": sum(1 for end in known if end.counted),
        "max_restarts": max_restarts,
        "attempt": failed[-1].attempt if failed else restarts + 1,
        "attempts": [end.to_dict() for end in known],
    }


def parse_history(messages: Iterable[str]) -> list[AttemptEnd]:
    """The attempt ends found in termination messages (any pods', in any order), one per attempt, sorted."""
    found: dict[int, AttemptEnd] = {}
    for message in messages:
        for line in (message or "").splitlines():
            match = _LINE_RE.match(line.strip())
            if match is None:
                continue
            end = AttemptEnd(
                attempt=int(match["attempt"]),
                rank=int(match["rank"]),
                exit_code=int(match["exit"]),
                decision=match["decision"],
                counted=match["counted"] == "1",
                reason=match["reason"].strip(),
            )
            found.setdefault(end.attempt, end)
    return [found[key] for key in sorted(found)]
