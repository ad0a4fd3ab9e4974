"""THE table of the exit codes the pod scripts reserve or decide on: the one place their numbers are written.

Each row: the number, its name (what a script asks the table for), the decision the gang entrypoint
(templates/k8s/gang-restart-entrypoint.sh, --max-restarts) takes when a rank ends with it, and the reason it
records. The render step puts the rows into the pod as TAO_EXIT_CODES (``pod_text``: one row a line,
``NUMBER NAME DECISION REASON``); every pod script reads its numbers from there (templates/k8s/*.sh never
write one), and the Job's restart rule and podFailurePolicy, `status` and `explain` read them from here.
The other half of the decision, the sign rows (what a failed rank printed), is derived from diagnosis/causes.py's
table by signs.py and rendered as TAO_RETRY_SIGNS.

Decisions (what the entrypoint does with a rank's exit code; docs/restarts.md):
- ``final``: the job fails, whatever the rank printed (a program that exits with a reserved code of the
  scripts is never retried: a restart request of its own, a failed upload);
- ``once``: the gang restarts, but the same code ending the attempt before makes it final (the barrier);
- ``infra``: the gang restarts, and the row's reason is the cause (diagnosis/causes.py), an ERR_INFRA one;
- ``retry``: the gang restarts unless the rank's output shows a sign of class ERR_PROGRAM (a device-side
  assert aborts with SIGABRT, yet it fails again);
- any code the table does not hold is a program error: final, unless the output shows an ERR_INFRA sign.

Imports nothing but core/valueclass.py: diagnosis/jobstate.py and manifests/render.py read it at start-up.
"""

from __future__ import annotations

from kubectl_tao.core.valueclass import Value, record

SIGNAL_BASE = 128  # a shell's exit code for a process ended by signal N is 128+N
MAX_RESTARTS = 20  # attempts are recorded in the termination message (4096 bytes): keep the history readable

FINAL, ONCE, INFRA, RETRY = "final", "once", "infra", "retry"
DECISIONS = (FINAL, ONCE, INFRA, RETRY)


@record(frozen=True)
class ExitCode(Value):
    """One row: the code's NUMBER, its NAME, the DECISION the gang entrypoint takes, the REASON it records."""

    number: int
    name: str
    decision: str
    reason: str
    meaning: str


def _signal(number: int, name: str, meaning: str) -> ExitCode:
    return ExitCode(SIGNAL_BASE + number, name, RETRY, name, meaning)


EXIT_CODES: tuple[ExitCode, ...] = (
    ExitCode(85, "restart", FINAL, "restart request",
             "a rank asks for the next attempt: the container restart rule RestartAllContainers matches this code "
             "only, so the kubelet restarts the pod's containers in place"),
    ExitCode(86, "stalled", INFRA, "Stalled",
             "the stall watch (--stall-timeout) ended a program that made no progress"),
    ExitCode(88, "rendezvous-timeout", ONCE, "rendezvous timeout",
             "a rank could not reach its peers before RENDEZVOUS_TIMEOUT (the barrier); the Job's "
             "podFailurePolicy fails the Job on it"),
    ExitCode(89, "upload-failed", FINAL, "tier C upload failed",
             "storage tier C: the command succeeded, the upload of its results did not"),
    # Signals that say the process was killed or crashed, not that the program decided to fail: a lost peer
    # (SIGTERM/SIGKILL from the entrypoint or the kubelet), a native crash (SIGSEGV, SIGBUS, SIGABRT from an NCCL
    # watchdog or a failed CUDA call), a hang-up.
    _signal(1, "SIGHUP", "a hang-up"),
    _signal(2, "SIGINT", "an interrupt"),
    _signal(6, "SIGABRT", "an abort (an NCCL watchdog, a failed CUDA call, a C++ exception)"),
    _signal(7, "SIGBUS", "a bus error (often /dev/shm too small)"),
    _signal(9, "SIGKILL", "killed (out of memory, or a peer's end stopped it)"),
    _signal(11, "SIGSEGV", "a segmentation fault"),
    _signal(15, "SIGTERM", "terminated (a peer's end stopped it, or the pod was stopped)"),
)
BY_NAME = {row.name: row for row in EXIT_CODES}
BY_NUMBER = {row.number: row for row in EXIT_CODES}

EXIT_RESTART = BY_NAME["restart"].number
EXIT_STALLED = BY_NAME["stalled"].number
EXIT_RENDEZVOUS_TIMEOUT = BY_NAME["rendezvous-timeout"].number
EXIT_UPLOAD_FAILED = BY_NAME["upload-failed"].number
EXIT_SIGKILL = BY_NAME["SIGKILL"].number
EXIT_SIGTERM = BY_NAME["SIGTERM"].number
RESERVED = tuple(row.number for row in EXIT_CODES if row.number < SIGNAL_BASE)  # the scripts' own codes


def pod_text() -> str:
    """TAO_EXIT_CODES: one row a line, ``NUMBER NAME DECISION REASON``."""
    return "\n".join(f"{row.number} {row.name} {row.decision} {row.reason}" for row in EXIT_CODES)


def gang_dir(mount_path: str, record_id: str) -> str:
    """Where the ranks of a job keep their shared attempt state and each attempt's output, on the job's volume."""
    return f"{mount_path.rstrip('/')}/.kubectl-tao/restarts/{record_id}"


def restart_rules() -> list[dict[str, object]]:
    """The rank container's restart rule: the entrypoint's restart request (EXIT_RESTART) restarts every container
    of the pod in place (RestartAllContainers); any other exit fails the pod, as restartPolicy Never does."""
    return [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [EXIT_RESTART]}}]
