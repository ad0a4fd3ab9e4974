"""The job-record store: one JSON file per job, shared with the TAO skill bank's ``tao_job_record``.

Layout (``STATE`` is ``$TAO_STATE_DIR``, which must be absolute, else ``~/.tao``)::

    STATE/jobs/<id>.json                 the record (schemas/job-record.schema.json), reference format
    STATE/jobs/<id>.json.lock            flock(2) held for every read-modify-write of either file
    STATE/jobs/.kubectl-tao/<id>.json    kubectl-tao's additions (schemas/job-record-k8s.schema.json)

States: PENDING RUNNING COMPLETE ERROR CANCELED UNKNOWN.  COMPLETE, ERROR and CANCELED are terminal
and final.  Allowed transitions (``ALLOWED_TRANSITIONS``):

    from \\ to       PENDING RUNNING COMPLETE ERROR CANCELED UNKNOWN
    PENDING         yes     yes     yes      yes   yes      yes
    RUNNING         yes     yes     yes      yes   yes      yes
    UNKNOWN         yes     yes     yes      yes   yes      yes
    COMPLETE/ERROR/CANCELED: only the same state again, which may fill a missing err_class or
    backend_ref and otherwise changes nothing (an idempotent cancel or a late poller is not an error).

RUNNING -> PENDING is allowed because Kubernetes can take a running Job back to having no scheduled
pod (a pod evicted from a drained node and waiting for a new one, or a retry when backoffLimit > 0).
UNKNOWN is not terminal: it means "the cluster could not tell", and the same Job can show up again.
Re-marking the current non-terminal state with the same message is a no-op, so pollers do not grow
the append-only ``transitions`` list.

OPEN is not a stored state: ``effective_state`` reports OPEN for a record that is still PENDING and
has no ``backend_ref`` (opened, never launched).  ``mark --state OPEN`` is refused.

``err_class`` goes only with ERROR: ERR_INFRA (the platform failed the job; retrying can help) or
ERR_PROGRAM (the job itself failed; retrying the same request cannot help).  See ``classify_oom``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubectl_tao.core import contract
from kubectl_tao.core.errors import TaoError, UsageError
from kubectl_tao.core.names import require_ascii_name
from kubectl_tao.core.templates import data_dir
from kubectl_tao.store.locking import exclusive
from kubectl_tao.store.statedir import check_private, make_private_dirs
from kubectl_tao.store.statedir import state_dir as resolve_state_dir

SCHEMA_VERSION = 1
STATES = contract.STATES
TERMINAL_STATES = contract.TERMINAL_STATES
OPEN = "OPEN"
ALLOWED_TRANSITIONS: dict[str, frozenset[str]] = {
    "PENDING": frozenset(STATES),
    "RUNNING": frozenset(STATES),
    "UNKNOWN": frozenset(STATES),
    "COMPLETE": frozenset({"COMPLETE"}),
    "ERROR": frozenset({"ERROR"}),
    "CANCELED": frozenset({"CANCELED"}),
}
SOURCES = ("agent", "poller", "backend-hook")
ERR_CLASSES = ("ERR_INFRA", "ERR_PROGRAM")
STORAGE_TIERS = ("A", "B", "C")
OPENING_MESSAGE = "record opened before launch"
# kubectl-tao's `submit_phase` of a submit that stopped before it finished (the API server went away, Ctrl-C):
# "dry-run" (names written; the Job may or may not have been created), "creating"/"adopting" (older records).
INCOMPLETE_SUBMIT_PHASES = ("dry-run", "creating", "adopting")

ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
ID_MAX = 200
PLATFORM_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
_ID_PART_MAX = 64
_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_K8S_REF_RE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")

MAX_MESSAGE_CHARS = 4096
LOG_TAIL_MAX_LINES = 200
LOG_TAIL_MAX_BYTES = 16 * 1024
LOCK_TIMEOUT_S = 30.0
_OPEN_ATTEMPTS = 20
EXTRAS_DIR = ".kubectl-tao"
_RESERVED_EXTRA_KEYS = frozenset({"schema_version", "id"})


def classify_oom() -> str:
    """The err_class of a container killed for memory (OOMKilled, exit 137): ERR_INFRA.

    The reference contradicts itself here.  We take its Kubernetes status table's answer: an OOM kill
    is the node enforcing a resource limit, and the same program with a bigger memory limit, or on a
    node with more memory, can succeed, so a retry with changed resources is worth offering.  An
    ERR_PROGRAM verdict would forbid every retry, including the one that fixes it.
    """
    return "ERR_INFRA"


# --------------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------------


def utc_now() -> str:
    """UTC ISO-8601 with milliseconds and a Z: ``2025-01-31T12:00:00.123Z``."""
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def _parse_ts(value: object) -> datetime:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)


def _text_field(value: object, flag: str, *, max_len: int = 256, spaces: bool = True) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{flag} is required and must not be empty")
    if not value.isprintable() or (not spaces and any(ch.isspace() for ch in value)):
        raise UsageError(f"{flag} must be one printable word{'' if spaces else ' without spaces'}")
    if len(value) > max_len:
        raise UsageError(f"{flag} is longer than {max_len} characters; shorten it")
    return value


def _id_word(value: object, flag: str, *, example: str) -> str:
    """network_arch / action: they make the record id, so no look-alike or direction-control characters."""
    if isinstance(value, str) and value:
        require_ascii_name(value, flag, example=example)
    return _text_field(value, flag, max_len=128)


def normalize_platform(platform: str) -> str:
    """Lower case, ``_``/space/``.`` to ``-``; must then match ``^[a-z0-9][a-z0-9-]{0,31}$``."""
    _text_field(platform, "--platform", max_len=64)
    value = re.sub(r"[\s_.]+", "-", platform.strip().lower())
    if not PLATFORM_RE.fullmatch(value):
        raise UsageError(
            f"--platform {platform!r} is not a platform name: use 1-32 lower-case letters, digits and '-', "
            "starting with a letter or digit (e.g. kubernetes)"
        )
    return value


def _clean_id_part(value: str, flag: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", value).strip("-")[:_ID_PART_MAX]
    if not re.search(r"[A-Za-z0-9]", cleaned):
        raise UsageError(f"{flag} {value!r} has no letters or digits to build a record id from")
    return cleaned


def _new_suffix() -> str:
    # os.urandom is what secrets.token_hex reads, without importing secrets (hmac, hashlib, random: a few ms)
    return os.urandom(3).hex()


def make_id(network_arch: str, action: str, suffix: str | None = None) -> str:
    """``<network_arch>-<action>-<6 hex>``, each part cleaned to ``[A-Za-z0-9._-]``."""
    arch = _clean_id_part(network_arch, "--network-arch")
    act = _clean_id_part(action, "--action")
    record_id = f"{arch}-{act}-{suffix or _new_suffix()}".lstrip("._-")
    return validate_id(record_id)


def preview_id(network_arch: str, action: str) -> str:
    """An id of the shape ``open`` would mint, for dry runs (nothing is reserved)."""
    return make_id(network_arch, action)


def validate_id(record_id: str, flag: str = "record id") -> str:
    if not isinstance(record_id, str) or not ID_RE.fullmatch(record_id) or len(record_id) > ID_MAX:
        raise UsageError(
            f"{flag} {record_id!r} is not a record id: use letters, digits, '.', '_' and '-', starting "
            "with a letter or digit (`tao_job_record list` shows the ids)"
        )
    return record_id


def normalize_results_dir(value: str, flag: str = "--results-dir") -> str:
    """A normalized absolute POSIX path or ``s3://bucket[/prefix]`` (no ``..``, no trailing ``/``)."""
    _text_field(value, flag, max_len=4096, spaces=False)
    if value.startswith("s3://"):
        bucket, _, prefix = value[5:].partition("/")
        if not _BUCKET_RE.fullmatch(bucket):
            raise UsageError(
                f"{flag}: {bucket!r} is not an S3 bucket name (3-63 lower-case letters, digits, '.', '-'); "
                "use s3://bucket/prefix"
            )
        parts = [p for p in prefix.split("/") if p]
        if any(p in (".", "..") for p in parts):
            raise UsageError(f"{flag}: '.' and '..' are not allowed in an S3 prefix")
        return "s3://" + bucket + "".join(f"/{p}" for p in parts)
    if "://" in value:
        raise UsageError(f"{flag}: only absolute paths and s3:// URLs are supported")
    if not value.startswith("/"):
        raise UsageError(
            f"{flag} must be an absolute path (a mounted volume path such as /results) or s3://bucket/prefix"
        )
    if ".." in value.split("/"):
        raise UsageError(f"{flag} must not contain '..'; give the normalized absolute path")
    normalized = "/" + posixpath.normpath(value).lstrip("/")
    if normalized == "/":
        raise UsageError(f"{flag} must not be / itself; give a directory for results")
    return normalized


def _validate_backend_ref(ref: str, platform: str) -> str:
    _text_field(ref, "--backend-ref", max_len=512, spaces=False)
    if platform in contract.KUBERNETES_PLATFORMS and not _K8S_REF_RE.fullmatch(ref):
        raise UsageError(f"--backend-ref {ref!r} must be <namespace>/<job name> (lower-case DNS names) on Kubernetes")
    return ref


def last_state(record: Mapping[str, Any]) -> str:
    """The stored state: terminal_state if set, else the state of the last transition."""
    terminal = record.get("terminal_state")
    if terminal:
        return str(terminal)
    transitions = record.get("transitions") or []
    return str(transitions[-1].get("state", "PENDING")) if transitions else "PENDING"


def effective_state(record: Mapping[str, Any]) -> str:
    """The state to display: OPEN for a PENDING record never launched (no backend_ref), else
    ``last_state``."""
    state = last_state(record)
    if state == "PENDING" and not record.get("backend_ref"):
        return OPEN
    return state


class Record(dict[str, Any]):
    """A job record (a plain dict, JSON-ready) with a few read-only conveniences."""

    @property
    def id(self) -> str:
        return str(self["id"])

    @property
    def state(self) -> str:
        return last_state(self)

    @property
    def effective_state(self) -> str:
        return effective_state(self)

    @property
    def terminal(self) -> bool:
        return self.get("terminal_state") in TERMINAL_STATES


# --------------------------------------------------------------------------------------------------
# Schema validation
# --------------------------------------------------------------------------------------------------

_VALIDATORS: dict[str, Any] = {}


def schema_errors(instance: object, schema_name: str) -> list[str]:
    """``<json path>: <message>`` for each way ``instance`` fails ``schemas/<schema_name>.schema.json``."""
    validator = _VALIDATORS.get(schema_name)
    if validator is None:
        from jsonschema import Draft202012Validator

        schema = json.loads((data_dir("schemas") / f"{schema_name}.schema.json").read_text(encoding="utf-8"))
        validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
        _VALIDATORS[schema_name] = validator
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    return [f"{e.json_path}: {e.message}" for e in errors]


def _require_valid(instance: object, schema_name: str, what: str) -> None:
    from kubectl_tao.store.shape import certainly_valid

    if certainly_valid(instance, schema_name):  # the common case, without importing jsonschema
        return
    errors = schema_errors(instance, schema_name)
    if errors:
        from kubectl_tao.core.redact import redact_text

        raise TaoError(f"{what} does not match {schema_name}.schema.json at {redact_text(errors[0])}; not written")


_REQUIRED_FIELDS = (
    "schema_version", "id", "platform", "backend_ref", "image", "network_arch", "action", "results_dir",
    "storage_tier", "submitted_at", "transitions", "terminal_state", "redacted", "upload_excludes",
)


def _shape_ok(record: Mapping[str, Any]) -> bool:
    """The schema's types and vocabularies for what readers use, checked in microseconds (the full schema
    costs about a millisecond a record, too much for `list` over hundreds of records)."""
    transitions = record.get("transitions")
    return (
        all(key in record for key in _REQUIRED_FIELDS)
        and record["schema_version"] == SCHEMA_VERSION
        and record["redacted"] is True
        and all(isinstance(record[key], str) and record[key] for key in ("id", "platform", "image", "network_arch",
                                                                         "action", "results_dir", "submitted_at"))
        and (record["backend_ref"] is None or isinstance(record["backend_ref"], str))
        and record["storage_tier"] in STORAGE_TIERS
        and record["terminal_state"] in (None, *TERMINAL_STATES)
        and record.get("err_class") in (None, *ERR_CLASSES)
        and isinstance(record["upload_excludes"], list)
        and isinstance(transitions, list)
        and bool(transitions)
        and all(
            isinstance(t, dict)
            and t.get("state") in STATES
            and t.get("source") in SOURCES
            and isinstance(t.get("ts"), str)
            and isinstance(t.get("message"), str)
            for t in transitions
        )
    )


def record_problem(record: Mapping[str, Any]) -> str | None:
    """Why a record read from disk cannot be used (the first schema error, redacted), or None."""
    if _shape_ok(record):
        return None
    from kubectl_tao.core.redact import redact_text

    errors = schema_errors(record, "job-record")
    return redact_text(errors[0]) if errors else "a field has the wrong type or a value outside the vocabulary"


def _read_record(path: Path, record_id: str) -> dict[str, Any]:
    """The record at ``path``; TaoError (exit 1) when it is not JSON or does not match the schema."""
    data = _read_json(path, f"job record {record_id}")
    problem = record_problem(data)
    if problem is not None:
        raise TaoError(
            f"job record {path} does not match job-record.schema.json at {problem}; restore it or move it aside"
        )
    return data


# --------------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------------


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_temp(directory: Path, name: str, data: bytes) -> Path:
    tmp = directory / f".{name}.{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


def _replace_atomically(path: Path, obj: object) -> None:
    """temp file in the same directory + fsync + os.replace + fsync of the directory."""
    tmp = _write_temp(path.parent, path.name, _dumps(obj))
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _create_exclusively(path: Path, obj: object) -> bool:
    """Publish ``obj`` at ``path`` unless it exists; False when it does.

    The content is written and fsynced to a temp file first and then hard-linked into place: link(2)
    fails with EEXIST exactly like open(O_CREAT|O_EXCL), and no reader ever sees a half-written
    record.  Where hard links are not supported, O_CREAT|O_EXCL on the final name is used directly.
    """
    data = _dumps(obj)
    tmp = _write_temp(path.parent, path.name, data)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        return _create_with_o_excl(path, data)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(path.parent)
    return True


def _create_with_o_excl(path: Path, data: bytes) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    _fsync_dir(path.parent)
    return True


def _dumps(obj: object) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaoError(f"no {what} at {path}; `tao_job_record list` shows the records") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TaoError(f"cannot read {what} {path}: {exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise TaoError(f"{what} {path} is not valid JSON ({exc}); restore it or move it aside") from None
    if not isinstance(data, dict):
        raise TaoError(f"{what} {path} is not a JSON object; restore it or move it aside")
    return data


def _cap_log_tail(tail: object) -> object:
    """The last LOG_TAIL_MAX_LINES lines and LOG_TAIL_MAX_BYTES bytes of a log tail."""
    if isinstance(tail, str):
        lines: list[str] = tail.splitlines()
        as_text = True
    elif isinstance(tail, list) and all(isinstance(x, str) for x in tail):
        lines, as_text = list(tail), False
    else:
        return tail
    lines = lines[-LOG_TAIL_MAX_LINES:]
    while lines and len("\n".join(lines).encode("utf-8")) > LOG_TAIL_MAX_BYTES:
        if len(lines) == 1:
            raw = lines[0].encode("utf-8")[-LOG_TAIL_MAX_BYTES:]
            lines = [raw.decode("utf-8", errors="ignore")]
            break
        lines = lines[1:]
    return "\n".join(lines) if as_text else lines


def _cap_history(history: object) -> object:
    if isinstance(history, dict) and isinstance(history.get("ranks"), list):
        return {**history, "ranks": [_cap_history(r) for r in history["ranks"]]}
    if isinstance(history, list):
        return [_cap_history(r) for r in history]
    if isinstance(history, dict) and "log_tail" in history:
        return {**history, "log_tail": _cap_log_tail(history["log_tail"])}
    return history


# --------------------------------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------------------------------


class RecordStore:
    """Records under ``<state_dir>/jobs``; ``state_dir`` defaults to ``statedir.state_dir()``."""

    def __init__(self, state_dir: Path | str | None = None) -> None:
        root = resolve_state_dir(value=state_dir)
        self.state_dir = root
        self.jobs_dir = root / "jobs"
        self.extras_dir = self.jobs_dir / EXTRAS_DIR
        check_private(root)

    # paths ----------------------------------------------------------------------------------------
    def path(self, record_id: str) -> Path:
        return self.jobs_dir / f"{validate_id(record_id)}.json"

    def extra_path(self, record_id: str) -> Path:
        return self.extras_dir / f"{validate_id(record_id)}.json"

    def lock_path(self, record_id: str) -> Path:
        return self.jobs_dir / f"{validate_id(record_id)}.json.lock"

    def _ensure_dirs(self) -> None:
        try:
            make_private_dirs(self.state_dir, self.jobs_dir, self.extras_dir)
        except OSError as exc:
            raise TaoError(f"cannot create {self.jobs_dir}: {exc.strerror or exc}; check TAO_STATE_DIR") from None
        check_private(self.state_dir)

    @contextlib.contextmanager
    def lock(self, record_id: str, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
        """Hold the record's flock (``<id>.json.lock``) for a read-modify-write of either file."""
        path = self.lock_path(record_id)
        self._ensure_dirs()
        busy = (
            f"job record {record_id} is locked by another process (waited {timeout:.0f}s for {path}); retry when it "
            "has finished"
        )
        with exclusive(path, timeout, busy):
            yield

    # records --------------------------------------------------------------------------------------
    def open(
        self,
        *,
        platform: str,
        image: str,
        network_arch: str,
        action: str,
        storage_tier: str,
        results_dir: str | None = None,
        results_root: str | None = None,
        upload_excludes: Iterable[str] = (),
        parent_job: str | None = None,
        retry_of: str | None = None,
        record_id: str | None = None,
    ) -> Record:
        """Mint an id and create the record, PENDING "record opened before launch" (shown as OPEN).
        `record_id`: an id minted beforehand (`make_id`), e.g. one the manifests already carry; it is not
        re-minted: TaoError when a record of that id exists."""
        from kubectl_tao.core.redact import redact_obj

        fields = _open_fields(
            platform,
            image,
            network_arch,
            action,
            storage_tier,
            results_dir,
            results_root,
            upload_excludes,
            parent_job,
            retry_of,
        )
        self._ensure_dirs()
        given = record_id
        for _ in range(1 if given else _OPEN_ATTEMPTS):
            record_id = validate_id(given) if given else make_id(network_arch, action)
            record = _new_record(record_id, fields)
            redacted = redact_obj(record)
            assert isinstance(redacted, dict)
            _refuse_credential_in_identity(record, redacted)
            _require_valid(redacted, "job-record", f"job record {record_id}")
            if _create_exclusively(self.path(record_id), redacted):
                return Record(redacted)
        if given:
            raise TaoError(f"job record {given} already exists in {self.jobs_dir}; nothing was created, submit again")
        raise TaoError(f"could not mint a free record id in {self.jobs_dir} after {_OPEN_ATTEMPTS} attempts")

    def mark(
        self,
        record_id: str,
        state: str,
        message: str = "",
        source: str = "agent",
        backend_ref: str | None = None,
        err_class: str | None = None,
        *,
        extra: Mapping[str, Any] | None = None,
    ) -> Record:
        """Append a transition under the record's lock; see the module docstring for the rules. `extra` is
        merged into kubectl-tao's additions under the same lock (as `update_extra`), before the transition."""
        from kubectl_tao.core.redact import redact_obj, redact_text

        _check_mark_args(state, source, err_class, message)
        path = self.path(record_id)
        with self.lock(record_id):
            record = _read_record(path, record_id)
            if backend_ref is not None:
                backend_ref = _validate_backend_ref(backend_ref, str(record.get("platform", "")))
                if redact_text(backend_ref) != backend_ref:
                    raise UsageError("--backend-ref looks like it contains a credential; give namespace/name")
            changed = _apply_mark(record, state, redact_text(message), source, backend_ref, err_class)
            redacted = redact_obj(record)
            if changed or redacted != record:
                _require_valid(redacted, "job-record", f"job record {record_id}")
            if extra:
                self._merge_extra(record_id, dict(extra))
            if changed or redacted != record:
                _replace_atomically(path, redacted)
            assert isinstance(redacted, dict)
            return Record(redacted)

    def show(self, record_id: str) -> Record:
        """The record, redacted (whoever wrote it)."""
        from kubectl_tao.core.redact import redact_obj

        record = redact_obj(_read_record(self.path(record_id), record_id))
        assert isinstance(record, dict)
        return Record(record)

    def exists(self, record_id: str) -> bool:
        return self.path(record_id).is_file()

    def list(self, errors: list[str] | None = None) -> list[Record]:
        """All records, newest first by submitted_at; unreadable files are skipped and described in
        ``errors`` when a list is given."""
        from kubectl_tao.core.redact import redact_obj

        if not self.jobs_dir.is_dir():
            return []
        records = []
        for path in sorted(self.jobs_dir.glob("*.json")):
            if path.name.startswith(".") or not ID_RE.fullmatch(path.stem):
                continue
            try:
                data = _read_json(path, "job record")
            except TaoError as exc:
                if errors is not None:
                    errors.append(exc.message)
                continue
            if data.get("id") != path.stem:
                if errors is not None:
                    errors.append(f"job record {path} names id {data.get('id')!r}, not {path.stem!r}; skipped")
                continue
            problem = record_problem(data)
            if problem is not None:
                if errors is not None:
                    errors.append(
                        f"job record {path} does not match job-record.schema.json at {problem}; skipped (restore it "
                        "or move it aside)"
                    )
                continue
            redacted = redact_obj(data)
            assert isinstance(redacted, dict)
            records.append(Record(redacted))
        records.sort(key=lambda r: (_parse_ts(r.get("submitted_at")), r.id), reverse=True)
        return records

    # kubectl-tao additions ------------------------------------------------------------------------
    def get_extra(self, record_id: str) -> dict[str, Any]:
        """kubectl-tao's additions for a record ({} when there are none yet)."""
        if not self.path(record_id).is_file():
            raise TaoError(f"no job record {record_id} in {self.jobs_dir}; `tao_job_record list` shows the records")
        path = self.extra_path(record_id)
        if not path.is_file():
            return {}
        return _read_json(path, f"kubectl-tao data for {record_id}")

    def update_extra(self, record_id: str, **fields: Any) -> dict[str, Any]:
        """Merge ``fields`` (top-level keys replace) into the additions, under the record's lock."""
        with self.lock(record_id):
            if not self.path(record_id).is_file():
                raise TaoError(f"no job record {record_id} in {self.jobs_dir}; `tao_job_record list` shows the records")
            return self._merge_extra(record_id, fields)

    def _merge_extra(self, record_id: str, fields: dict[str, Any]) -> dict[str, Any]:
        """update_extra's write; the caller holds the record's lock."""
        from kubectl_tao.core.redact import redact_obj

        reserved = _RESERVED_EXTRA_KEYS.intersection(fields)
        if reserved:
            raise UsageError(f"{', '.join(sorted(reserved))} of the kubectl-tao data cannot be changed")
        path = self.extra_path(record_id)
        current = (
            _read_json(path, f"kubectl-tao data for {record_id}")
            if path.is_file()
            else {"schema_version": SCHEMA_VERSION, "id": record_id}
        )
        if "history" in fields:
            fields["history"] = _cap_history(fields["history"])
        merged = redact_obj({**current, **fields})
        assert isinstance(merged, dict)
        _require_valid(merged, "job-record-k8s", f"kubectl-tao data for {record_id}")
        _replace_atomically(path, merged)
        return merged


# --------------------------------------------------------------------------------------------------
# Record construction and transitions (pure)
# --------------------------------------------------------------------------------------------------


def _open_fields(
    platform: str,
    image: str,
    network_arch: str,
    action: str,
    storage_tier: str,
    results_dir: str | None,
    results_root: str | None,
    upload_excludes: Iterable[str],
    parent_job: str | None,
    retry_of: str | None,
) -> dict[str, Any]:
    if (results_dir is None) == (results_root is None):
        raise UsageError("give exactly one of --results-dir DIR or --results-root ROOT")
    if storage_tier not in STORAGE_TIERS:
        raise UsageError(f"--storage-tier must be one of A, B, C (got {storage_tier!r})")
    excludes = []
    for pattern in upload_excludes:
        excludes.append(_text_field(pattern, "--upload-exclude", max_len=1024))
    return {
        "platform": normalize_platform(platform),
        "image": _text_field(image, "--image", max_len=1024, spaces=False),
        "network_arch": _id_word(network_arch, "--network-arch", example="dino"),
        "action": _id_word(action, "--action", example="train"),
        "storage_tier": storage_tier,
        "results_dir": normalize_results_dir(results_dir) if results_dir is not None else None,
        "results_root": normalize_results_dir(results_root, "--results-root") if results_root is not None else None,
        "upload_excludes": excludes,
        "parent_job": validate_id(parent_job, "--parent-job") if parent_job is not None else None,
        "retry_of": validate_id(retry_of, "--retry-of") if retry_of is not None else None,
    }


def _new_record(record_id: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    now = utc_now()
    results_dir = fields["results_dir"] or f"{fields['results_root']}/{record_id}"
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "id": record_id,
        "platform": fields["platform"],
        "backend_ref": None,
        "image": fields["image"],
        "network_arch": fields["network_arch"],
        "action": fields["action"],
        "results_dir": results_dir,
        "storage_tier": fields["storage_tier"],
        "submitted_at": now,
        "transitions": [{"ts": now, "state": "PENDING", "message": OPENING_MESSAGE, "source": "agent"}],
        "terminal_state": None,
        "redacted": True,
        "upload_excludes": list(fields["upload_excludes"]),
    }
    if fields["retry_of"] is not None:
        record["retry_of"] = fields["retry_of"]
    if fields["parent_job"] is not None:
        record["parent_job"] = fields["parent_job"]
    return record


def _refuse_credential_in_identity(record: Mapping[str, Any], redacted: Mapping[str, Any]) -> None:
    flags = {
        "id": "--network-arch/--action",
        "platform": "--platform",
        "image": "--image",
        "results_dir": "--results-dir/--results-root",
        "network_arch": "--network-arch",
        "action": "--action",
    }
    for key, flag in flags.items():
        if record.get(key) != redacted.get(key):
            raise UsageError(f"{flag} looks like it contains a credential; records never hold credentials")


def _check_mark_args(state: str, source: str, err_class: str | None, message: str) -> None:
    if state == OPEN:
        raise UsageError("--state OPEN is set only by `open` (a record that was never launched); use PENDING")
    if state not in STATES:
        raise UsageError(f"--state must be one of {', '.join(STATES)} (got {state!r})")
    if source not in SOURCES:
        raise UsageError(f"--source must be one of {', '.join(SOURCES)} (got {source!r})")
    if err_class is not None:
        if err_class not in ERR_CLASSES:
            raise UsageError(f"--err-class must be ERR_INFRA or ERR_PROGRAM (got {err_class!r})")
        if state != "ERROR":
            raise UsageError(f"--err-class goes only with --state ERROR (got --state {state})")
    if not isinstance(message, str):
        raise UsageError("--message must be text")


def _apply_mark(
    record: dict[str, Any],
    state: str,
    message: str,
    source: str,
    backend_ref: str | None,
    err_class: str | None,
) -> bool:
    """Apply one mark to ``record`` in place; True when something changed."""
    record_id = record.get("id")
    current = last_state(record)
    if current in TERMINAL_STATES:
        if state != current:
            raise TaoError(
                f"illegal transition {current} -> {state}: job record {record_id} is final; "
                f"open a new record with --retry-of {record_id} to run it again"
            )
        return _fill_terminal(record, backend_ref, err_class)
    if state not in ALLOWED_TRANSITIONS.get(current, frozenset()):
        raise TaoError(f"illegal transition {current} -> {state} for job record {record_id}")
    changed = _set_backend_ref(record, backend_ref)
    message = message[:MAX_MESSAGE_CHARS]
    transitions = record.setdefault("transitions", [])
    last = transitions[-1] if transitions else {}
    if state == current and last.get("message") == message and state not in TERMINAL_STATES:
        return changed
    transitions.append({"ts": utc_now(), "state": state, "message": message, "source": source})
    if state in TERMINAL_STATES:
        record["terminal_state"] = state
        record["terminal_write_by"] = source
        if err_class is not None:
            record["err_class"] = err_class
    return True


def _fill_terminal(record: dict[str, Any], backend_ref: str | None, err_class: str | None) -> bool:
    changed = _set_backend_ref(record, backend_ref)
    if err_class is not None:
        if record.get("err_class") in (None, ""):
            record["err_class"] = err_class
            changed = True
        elif record["err_class"] != err_class:
            raise TaoError(
                f"job record {record.get('id')} is final with err_class {record['err_class']}; "
                f"it cannot become {err_class}"
            )
    return changed


def _set_backend_ref(record: dict[str, Any], backend_ref: str | None) -> bool:
    if backend_ref is None or record.get("backend_ref") == backend_ref:
        return False
    if record.get("backend_ref"):
        raise TaoError(
            f"job record {record.get('id')} already names {record['backend_ref']}; a record follows one "
            f"launch: open a new record (with --retry-of {record.get('id')}) for {backend_ref}"
        )
    record["backend_ref"] = backend_ref
    return True
