"""`status JOB`'s kubectl read, started before the record is validated, redacted and pinned to its cluster:
kubectl (about 70 ms, most of status) then runs while Python imports and checks what it needs.

It is a guess from kubectl-tao's own additions file (STATE/jobs/.kubectl-tao/JOB.json), read raw: the Job's
name and namespace make the one read a launched job needs (contract.job_objects_read). The guess decides
nothing: the verb loads, validates and redacts the record, refuses the wrong cluster, and asks for its read
as before; `Kubectl.start` takes the prestarted process over only when that read is the very same command
line, and the rest is killed unread (k8s.kubectl.prestart). Only Kubernetes names (DNS labels) are put on a
command line this early, and nothing is guessed for another platform's record, a canceled one, a job made
elsewhere or a native gang (which reads its PodGroups too).
"""

from __future__ import annotations

import os

from kubectl_tao.core import contract
from kubectl_tao.core.errors import TaoError
from kubectl_tao.k8s.kubectl import ClusterOptions, prestart
from kubectl_tao.store.safefile import read_json

_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


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


def guess(record_id: str, state_dir: str) -> list[str] | None:
    """The read `status RECORD_ID` will make, from the raw files under STATE_DIR; None: no guess."""
    if not _plain_id(record_id) or not os.path.isabs(state_dir):
        return None
    jobs = os.path.join(state_dir, "jobs")
    extra = _read(os.path.join(jobs, ".kubectl-tao", f"{record_id}.json"))
    record = _read(os.path.join(jobs, f"{record_id}.json"))
    if extra is None or record is None:
        return None
    namespace, name = extra.get("namespace"), extra.get("job_name")
    if not _is_label(namespace) or not _is_label(name) or extra.get("gang") == contract.GANG_NATIVE:
        return None
    if record.get("platform") not in contract.KUBERNETES_PLATFORMS or record.get("terminal_state") == contract.CANCELED:
        return None
    return contract.job_objects_read(str(namespace), str(name))


def start(record_id: str, options: ClusterOptions) -> None:
    """Prestart `status RECORD_ID`'s read when it can be guessed (best effort: never raises)."""
    state_dir = os.environ.get("TAO_STATE_DIR") or os.path.join(os.path.expanduser("~"), ".tao")
    args = guess(record_id, state_dir)
    if args is not None:
        prestart(options, args, namespaced=False)
