"""The one `kubectl exec` that reads a running job's status.json: a small fixed POSIX sh program and its command
line. Plain data, so `status` can start the call (jobs/early_read.py) before it imports what reads the answer.

The program prints the newest `status.json` at the top of the results directory or one or two directories below
it (TAO writes `<results>/<task>/status.json`) as its path, a NUL byte and the file's last STATUS_JSON_TAIL
bytes; nothing when there is none. The results directory reaches it as a positional argument (used when the
container has no TAO_RESULTS_ROOT), never as shell text.
"""

from __future__ import annotations

STATUS_JSON_TAIL = 65536  # bytes of status.json read: its last lines, whatever its length

PROGRAM = (
    'd=${TAO_RESULTS_ROOT:-$1}; [ -n "$d" ] && [ -d "$d" ] || exit 0; n=; '
    'for f in "$d"/status.json "$d"/*/status.json "$d"/*/*/status.json; do '
    'if [ -f "$f" ] && { [ -z "$n" ] || [ "$f" -nt "$n" ]; }; then n=$f; fi; done; '
    '[ -n "$n" ] || exit 0; printf "%s\\000" "$n"; exec tail -c ' + str(STATUS_JSON_TAIL) + ' -- "$n"'
)
PROGRAM_NAME = "tao-progress"  # $0 of the program


def exec_target(job_name: str, pod: str | None, *, launched_here: bool, nodes: int) -> str:
    """Where the exec goes: a one-pod job kubectl-tao launched by its Job (`job/NAME`: kubectl picks its running
    pod, so the call needs no pod name and can start before the Job and pods are read); else rank 0's POD."""
    return f"job/{job_name}" if launched_here and nodes == 1 else str(pod)


def exec_call(namespace: str, target: str, results: str, *, launched_here: bool) -> list[str]:
    """The kubectl arguments (an S3 prefix for RESULTS is not a path in the container: none is given)."""
    results = "" if "://" in results else results
    container = ["-c", "tao"] if launched_here else []  # a Job made elsewhere: its default container
    return ["exec", "-n", namespace, target, *container, "--", "/bin/sh", "-c", PROGRAM, PROGRAM_NAME, results]
