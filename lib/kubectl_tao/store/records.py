"""The job-record store: one JSON file per job, shared with the TAO skill bank's ``tao_job_record``.

Layout (``STATE`` is ``$TAO_STATE_DIR``, which must be absolute, else ``~/.tao``)::

    STATE/jobs/<id>.json                 the record (schemas/job-record.schema.json), reference format
    STATE/jobs/<id>.json.lock            flock(2) held for every read-modify-write of either file
    STATE/jobs/.kubectl-tao/<id>.json    kubectl-tao's additions (schemas/job-record-k8s.schema.json)

Ids: store/recordids.py. The fields a record is opened with: store/recordfields.py. States and the
transitions a mark may make: store/transitions.py. Every file is written with core/atomicwrite.py.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from kubectl_tao.core.atomicwrite import write_atomically
from kubectl_tao.core.errors import TaoError, UsageError
from kubectl_tao.core.templates import data_dir
from kubectl_tao.store import recordfields, safefile, transitions
from kubectl_tao.store.jobrecord import CapturedHistory, JobRecord, K8sRecord
from kubectl_tao.store.locking import exclusive
from kubectl_tao.store.recordfields import SCHEMA_VERSION, STORAGE_TIERS
from kubectl_tao.store.recordids import ID_RE, make_id, validate_id
from kubectl_tao.store.statedir import check_private, make_private_dirs
from kubectl_tao.store.statedir import state_dir as resolve_state_dir
from kubectl_tao.store.transitions import ERR_CLASSES, SOURCES, STATES, TERMINAL_STATES, effective_state, last_state

# kubectl-tao's `submit_phase` of a submit that stopped before it finished (the API server went away, Ctrl-C):
# "dry-run" (names written; the Job may or may not have been created), "creating"/"adopting" (older records).
INCOMPLETE_SUBMIT_PHASES = ("dry-run", "creating", "adopting")
# The submit failed after its create and its rollback was cut off (API server gone): the next `status` removes
# what it may have created and marks the record ERROR with the submit's own reason (extra `rollback`).
ROLLING_BACK = "rolling-back"

LOG_TAIL_MAX_LINES = 200
LOG_TAIL_MAX_BYTES = 16 * 1024
LOCK_TIMEOUT_S = 30.0
_OPEN_ATTEMPTS = 20
EXTRAS_DIR = ".kubectl-tao"
_RESERVED_EXTRA_KEYS = frozenset({"schema_version", "id"})


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


# The command that lists the records, named when one is missing (the plugin names its own: `kubectl tao list`).
LIST_HINT = "`tao_job_record list`"

def record_problem(record: Mapping[str, Any]) -> str | None:
    """Why a record read from disk cannot be used (the first schema error, redacted), or None."""
    if _shape_ok(record):
        return None
    from kubectl_tao.core.redact import redact_text

    errors = schema_errors(record, "job-record")
    return redact_text(errors[0]) if errors else "a field has the wrong type or a value outside the vocabulary"


def _read_record(path: Path, record_id: str, hint: str = LIST_HINT) -> dict[str, Any]:
    """The record at ``path``; TaoError (exit 1) when it cannot be read (store/safefile.py), is not a record,
    or holds another id than its file name says (a copied or planted file)."""
    data = _read_json(path, "job record", f"no job record {record_id}", hint)
    problem = _problem(data, record_id)
    if problem is not None:
        raise TaoError(f"job record {path} {problem}; restore it or move it aside")
    return data


def _problem(data: Mapping[str, Any], record_id: str) -> str | None:
    """What makes DATA, read from <record_id>.json, no usable record; the id it holds is never quoted."""
    if data.get("id") != record_id:
        return "holds the id of another record, not the one its file name gives"
    problem = record_problem(data)
    return None if problem is None else f"does not match job-record.schema.json at {problem}"


# --------------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------------


def _dumps(obj: object) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _replace_atomically(path: Path, obj: object) -> None:
    write_atomically(path, _dumps(obj))


def _read_json(path: Path, what: str, missing: str | None = None, hint: str = LIST_HINT) -> dict[str, Any]:
    """The JSON object at PATH; TaoError naming the file (never its content) when it is missing (MISSING says
    so, else its absence is an error like any other), not a regular file, too large, too deep or not JSON."""
    try:
        return safefile.read_json(path, what)
    except FileNotFoundError:
        raise TaoError(f"{missing or f'no {what}'} at {path}; {hint} shows the records") from None
    except TaoError as exc:
        raise TaoError(f"{exc.message}; restore it or move it aside") from None


def _read_json_if_there(path: Path, what: str) -> dict[str, Any] | None:
    """As _read_json; None when nothing is at PATH."""
    try:
        return safefile.read_json(path, what)
    except FileNotFoundError:
        return None
    except TaoError as exc:
        raise TaoError(f"{exc.message}; restore it or move it aside") from None


def _cap_log_tail(tail: str | tuple[str, ...]) -> str | tuple[str, ...]:
    """The last LOG_TAIL_MAX_LINES lines and LOG_TAIL_MAX_BYTES bytes of a log tail."""
    lines = tail.splitlines() if isinstance(tail, str) else list(tail)
    lines = lines[-LOG_TAIL_MAX_LINES:]
    while lines and len("\n".join(lines).encode("utf-8")) > LOG_TAIL_MAX_BYTES:
        if len(lines) == 1:
            raw = lines[0].encode("utf-8")[-LOG_TAIL_MAX_BYTES:]
            lines = [raw.decode("utf-8", errors="ignore")]
            break
        lines = lines[1:]
    return "\n".join(lines) if isinstance(tail, str) else tuple(lines)


def _cap_history(history: CapturedHistory) -> CapturedHistory:
    """HISTORY with each rank's log tail capped."""
    ranks = tuple(
        rank if rank.log_tail is None else rank.changed(log_tail=_cap_log_tail(rank.log_tail))
        for rank in history.ranks
    )
    if ranks == history.ranks:
        return history
    if history.listed:
        return history.replaced(ranks=ranks)
    capped: CapturedHistory = history.changed(ranks=ranks)
    return capped


# --------------------------------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------------------------------


class RecordStore:
    """Records under ``<state_dir>/jobs``; ``state_dir`` defaults to ``statedir.state_dir()``."""

    def __init__(self, state_dir: Path | str | None = None, list_hint: str = LIST_HINT) -> None:
        """LIST_HINT: the command a user runs to see the records (named when one is missing)."""
        self.list_hint = list_hint
        root = resolve_state_dir(value=state_dir)
        self.state_dir = root
        self.jobs_dir = root / "jobs"
        self.extras_dir = self.jobs_dir / EXTRAS_DIR
        check_private(root)

    # paths ----------------------------------------------------------------------------------------
    def path(self, record_id: str) -> Path:
        return self.jobs_dir / f"{validate_id(record_id, lister=self.list_hint)}.json"

    def extra_path(self, record_id: str) -> Path:
        return self.extras_dir / f"{validate_id(record_id, lister=self.list_hint)}.json"

    def lock_path(self, record_id: str) -> Path:
        return self.jobs_dir / f"{validate_id(record_id, lister=self.list_hint)}.json.lock"

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

        fields = recordfields.open_fields(
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
            record = transitions.new_record(record_id, fields).to_stored()
            redacted = redact_obj(record)
            assert isinstance(redacted, dict)
            recordfields.refuse_credential_in_identity(record, redacted)
            _require_valid(redacted, "job-record", f"job record {record_id}")
            if write_atomically(self.path(record_id), _dumps(redacted), replace=False):
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
        k8s: K8sRecord | None = None,
    ) -> Record:
        """Append a transition under the record's lock; see the module docstring for the rules. `k8s`, a part
        of kubectl-tao's additions (`K8sRecord.partial(...)`), is merged into them under the same lock (as
        `update_k8s`), before the transition."""
        from kubectl_tao.core.redact import redact_obj, redact_text

        transitions.check_mark_args(state, source, err_class, message)
        path = self.path(record_id)
        with self.lock(record_id):
            record = _read_record(path, record_id, self.list_hint)
            job = JobRecord.from_stored(record)
            if backend_ref is not None:
                backend_ref = recordfields.validate_backend_ref(backend_ref, job.platform)
                if redact_text(backend_ref) != backend_ref:
                    raise UsageError("--backend-ref looks like it contains a credential; give namespace/name")
            job, changed = transitions.apply_mark(job, state, redact_text(message), source, backend_ref, err_class)
            stored = job.to_stored() if changed else record
            redacted = redact_obj(stored)
            if changed or redacted != stored:
                _require_valid(redacted, "job-record", f"job record {record_id}")
            if k8s is not None:
                self._merge_extra(record_id, k8s)
            if changed or redacted != stored:
                _replace_atomically(path, redacted)
            assert isinstance(redacted, dict)
            return Record(redacted)

    def show(self, record_id: str) -> Record:
        """The record, redacted (whoever wrote it)."""
        from kubectl_tao.core.redact import redact_obj

        record = redact_obj(_read_record(self.path(record_id), record_id, self.list_hint))
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
                data = safefile.read_json(path, "job record")
            except (OSError, TaoError) as exc:  # OSError: gone since it was listed
                if errors is not None and isinstance(exc, TaoError):
                    errors.append(f"{exc.message}; skipped (restore it or move it aside)")
                continue
            problem = _problem(data, path.stem)
            if problem is not None:
                if errors is not None:
                    errors.append(f"job record {path} {problem}; skipped (restore it or move it aside)")
                continue
            redacted = redact_obj(data)
            assert isinstance(redacted, dict)
            records.append(Record(redacted))
        records.sort(key=lambda r: (transitions.parse_ts(r.get("submitted_at")), r.id), reverse=True)
        return records

    # kubectl-tao additions ------------------------------------------------------------------------
    def get_extra(self, record_id: str) -> dict[str, Any]:
        """kubectl-tao's additions for a record ({} when there are none yet)."""
        if not self.path(record_id).is_file():
            raise TaoError(f"no job record {record_id} in {self.jobs_dir}; {self.list_hint} shows the records")
        return _read_json_if_there(self.extra_path(record_id), "kubectl-tao data") or {}

    def update_k8s(self, record_id: str, **fields: Any) -> dict[str, Any]:
        """Set FIELDS (K8sRecord's fields, typed values: a CapturedHistory, a ProgressRead, ...) in kubectl-tao's
        additions under the record's lock; what was written (redacted), the dict `Tracked.extra` holds."""
        return self.merge_k8s(record_id, K8sRecord.partial(**fields))

    def merge_k8s(self, record_id: str, part: K8sRecord) -> dict[str, Any]:
        """As update_k8s, with the fields a part holds (`K8sRecord.partial(...)`, built up with `changed`)."""
        with self.lock(record_id):
            if not self.path(record_id).is_file():
                raise TaoError(f"no job record {record_id} in {self.jobs_dir}; {self.list_hint} shows the records")
            return self._merge_extra(record_id, part)

    def update_extra(self, record_id: str, **stored: Any) -> dict[str, Any]:
        """As update_k8s, from the stored form (JSON keys and values, read as a sibling file is read: a value of
        the wrong type is written as given, for the schema check to refuse): for tests and tools that plant a
        shape some release wrote. The package writes through update_k8s (tests/unit/test_house_rules.py)."""
        _refuse_reserved(stored)
        return self.merge_k8s(record_id, K8sRecord.from_stored(stored))

    def _merge_extra(self, record_id: str, part: K8sRecord) -> dict[str, Any]:
        """The additions with PART merged in, written; the caller holds the record's lock."""
        from kubectl_tao.core.redact import redact_obj

        _refuse_reserved(part.to_stored())
        path = self.extra_path(record_id)
        current = _read_json_if_there(path, "kubectl-tao data") or {"schema_version": SCHEMA_VERSION, "id": record_id}
        if part.history is not None:
            part = part.changed(history=_cap_history(part.history))
        merged = redact_obj(K8sRecord.from_stored(current).merged(part).to_stored())
        assert isinstance(merged, dict)
        _require_valid(merged, "job-record-k8s", f"kubectl-tao data for {record_id}")
        _replace_atomically(path, merged)
        return merged


def _refuse_reserved(keys: Iterable[str]) -> None:
    reserved = _RESERVED_EXTRA_KEYS.intersection(keys)
    if reserved:
        raise UsageError(f"{', '.join(sorted(reserved))} of the kubectl-tao data cannot be changed")
