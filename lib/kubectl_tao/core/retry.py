"""Which failures of a multi-node rank restart the gang (`--max-restarts`), and the exit codes of that protocol.

Pure: exit codes and signals in, a decision out. The rank entrypoint (templates/k8s/gang-restart-entrypoint.sh)
decides in the pod from the codes this module renders into TAO_RETRY_EXIT_CODES; `status` and `explain` read an
attempt's recorded end back through `classify` and `parse_history`. A finer classification (a diagnosis class
such as ERR_INFRA / ERR_PROGRAM from the job's log) can be fed in through `classify(..., diagnosis=...)`.

Protocol (see docs/restarts.md):
- EXIT_RESTART (85): a rank asks for the next attempt; the container restart rule RestartAllContainers matches
  this code only, so the kubelet restarts the pod's containers in place (same pod, IP and DNS name);
- the rendezvous barrier's 88 is retried once; when it repeats it ends the job (the Job's podFailurePolicy);
- any other non-zero code is final: the pod fails and the Job fails (backoffLimit 0).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from kubectl_tao.core.valueclass import Value, record

EXIT_RESTART = 85
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
# diagnosis classes (issue 27's ERR_* classes) that override the exit code
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
    """The exit codes the entrypoint retries (TAO_RETRY_EXIT_CODES), barrier timeout included."""
    return sorted([EXIT_SIGNAL_BASE + number for number in RETRYABLE_SIGNALS] + [EXIT_RENDEZVOUS_TIMEOUT])


def classify(code: int, *, previous_code: int | None = None, diagnosis: str | None = None) -> Decision:
    """One rank's exit CODE (a shell's 128+N for signal N). PREVIOUS_CODE: the code that ended the attempt
    before (a repeated barrier timeout is final). DIAGNOSIS: an ERR_* class of the failure, when known,
    decides over the exit code (a device-side assert ends in SIGABRT yet fails again)."""
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
    if diagnosis in _DIAGNOSIS:
        return Decision(_DIAGNOSIS[diagnosis], f"exit {code} ({diagnosis})")
    signal = code - EXIT_SIGNAL_BASE
    if signal in RETRYABLE_SIGNALS:
        return Decision(RETRY, f"exit {code} ({RETRYABLE_SIGNALS[signal]})")
    return Decision(FINAL, f"exit {code} (a program error: it would fail again)")


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
        return f"attempt {self.attempt} ended: rank {self.rank} exit {self.exit_code} ({self.reason}); {then}"


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
