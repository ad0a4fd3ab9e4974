"""`status JOB`'s kubectl read, started before the record is validated, redacted and pinned to its cluster:
kubectl (about 70 ms, most of status) then runs while Python imports and checks what it needs. For a one-pod
job whose record is not final, the status.json read (progress/execread.py, `kubectl exec job/NAME`) starts
beside it: a running job's status then costs one round trip, not two in a row.

It is a guess from kubectl-tao's own additions file (STATE/jobs/.kubectl-tao/JOB.json), read raw: the Job's
name and namespace make the one read a launched job needs (contract.job_objects_read). The guess decides
nothing: the verb loads, validates and redacts the record, refuses the wrong cluster, and asks for its read
as before; `Kubectl.start` takes the prestarted process over only when that read is the very same command
line, and the rest is killed unread (k8s.kubectl.prestart). Only Kubernetes names (DNS labels) are put on a
command line this early, and `status` guesses nothing for another platform's record, a canceled one, a job made
elsewhere or a native gang (which reads its PodGroups too). `explain` has its own guess (`guess_explain`): its
first round's events and Job reads, a native gang's included (its PodGroups are read beside them, unguessed).
"""

from __future__ import annotations

import os

from kubectl_tao.core import contract
from kubectl_tao.core.errors import TaoError
from kubectl_tao.k8s.kubectl import ClusterOptions, prestart
from kubectl_tao.progress.execread import exec_call, exec_target
from kubectl_tao.store.safefile import read_json

_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
_PATH_CHARS = _ID_CHARS | {"/"}


def _is_label(value: object) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= 63
        and set(value) <= _LABEL_CHARS
        and value[0] != "-"
        and value[-1] != "-"
    )


def _plain_id(record_id: str) -> bool:
    return 0 < len(record_id) <= 200 and set(record_id) <= _ID_CHARS and record_id[0].isalnum()


def _read(path: str) -> dict[str, object] | None:
    """The JSON object at PATH, or None: never a link, a FIFO or anything else read_json refuses."""
    try:
        return read_json(path, "job record")
    except (OSError, TaoError):
        return None


def _files(record_id: str, state_dir: str) -> tuple[dict[str, object], dict[str, object]] | None:
    """The raw record and kubectl-tao's additions of a launched Kubernetes job that is not canceled, with
    Kubernetes names for its namespace and Job; None otherwise."""
    if not _plain_id(record_id) or not os.path.isabs(state_dir):
        return None
    jobs = os.path.join(state_dir, "jobs")
    extra = _read(os.path.join(jobs, ".kubectl-tao", f"{record_id}.json"))
    record = _read(os.path.join(jobs, f"{record_id}.json"))
    if extra is None or record is None:
        return None
    if not _is_label(extra.get("namespace")) or not _is_label(extra.get("job_name")):
        return None
    if record.get("platform") not in contract.KUBERNETES_PLATFORMS or record.get("terminal_state") == contract.CANCELED:
        return None
    return record, extra


def guess(record_id: str, state_dir: str) -> list[str] | None:
    """The read `status RECORD_ID` will make, from the raw files under STATE_DIR; None: no guess."""
    found = _files(record_id, state_dir)
    if found is None or found[1].get("gang") == contract.GANG_NATIVE:
        return None
    return contract.job_objects_read(str(found[1]["namespace"]), str(found[1]["job_name"]))


def guess_progress(record_id: str, state_dir: str) -> list[str] | None:
    """The status.json read `status RECORD_ID` makes when the job runs: for a one-pod job last seen RUNNING (a job
    that is not running gets no call into it) that has not been told to read its log instead, with a results
    directory of plain path characters (or none); None: no guess."""
    found = _files(record_id, state_dir)
    if found is None:
        return None
    record, extra = found
    if record.get("terminal_state") is not None or extra.get("nodes", 1) != 1 or extra.get("progress_read"):
        return None
    transitions = record.get("transitions")
    last = transitions[-1] if isinstance(transitions, list) and transitions else None
    if not isinstance(last, dict) or last.get("state") != "RUNNING":  # last seen pending: most likely still so
        return None
    results = record.get("results_dir") or ""
    if not isinstance(results, str) or len(results) > 1024 or (results and not (
        results.startswith("/") and set(results) <= _PATH_CHARS
    )):
        return None
    name = str(extra["job_name"])
    return exec_call(str(extra["namespace"]), exec_target(name, None, launched_here=True, nodes=1), results,
                     launched_here=True)


def guess_explain(record_id: str, state_dir: str, server: str, *, force: bool = False) -> list[list[str]]:
    """The first round `explain RECORD_ID` will make (diagnosis/explain.py): the namespace's events and the Job
    with its pods, from the raw files under STATE_DIR; []: no guess, nor for a record pinned to a cluster other
    than SERVER (unless FORCE), which explain refuses before any call (jobs/track.check_pin)."""
    found = _files(record_id, state_dir)
    if found is None:
        return []
    pinned = found[1].get("api_server")
    if not (force or not pinned or not server or pinned == server):
        return []
    namespace, name = str(found[1]["namespace"]), str(found[1]["job_name"])
    return [contract.events_read(namespace), contract.job_objects_read(namespace, name)]


def _state_dir() -> str:
    return os.environ.get("TAO_STATE_DIR") or os.path.join(os.path.expanduser("~"), ".tao")


def start(record_id: str, options: ClusterOptions) -> None:
    """Prestart `status RECORD_ID`'s read, and its status.json read, when they can be guessed (best effort:
    never raises)."""
    state_dir = _state_dir()
    for args in (guess(record_id, state_dir), guess_progress(record_id, state_dir)):
        if args is not None:
            prestart(options, args, namespaced=False)


def start_explain(record_id: str, options: ClusterOptions, server: str, *, force: bool = False) -> None:
    """Prestart `explain RECORD_ID`'s first round, against SERVER (the cluster kubectl points at), when it can be
    guessed (best effort: never raises)."""
    for args in guess_explain(record_id, _state_dir(), server, force=force):
        prestart(options, args, namespaced=False)
