"""A job record read back typed: the reference file (`JobRecord`) and kubectl-tao's sibling file (`K8sRecord`),
frozen values with a typed field for each property their schemas name, and the typed parts inside them
(`Transition`, the captured `CapturedHistory` with its `RankCapture`s, `ProgressRead`, `WorkflowLink`).

The files keep their JSON form (schemas/job-record*.schema.json, schema_version 1). Everything that reads a
record reads it through these values (`Tracked.job`, `Tracked.k8s` in jobs/track.py), and everything that
writes one builds or changes them: `partial(...)` makes a part in code (a transition, a change of the sibling
file), `changed(...)` sets fields, `merged(part)` takes a part's keys; the store writes `to_stored()`, which
keeps the bytes a dict writer wrote for the same content (a key stored keeps its place, a new one follows in
the order set). `from_stored(data)` reads every shape a release has written:

- schema_version 1, the only version there is (`READABLE_VERSIONS`); a newer one is refused with one line;
- a sibling file that does not exist yet (`{}`: every field at its default);
- a `history` that is a list of ranks (the first releases captured only the ranks) or an object;
- a rank's `log_tail` as one text or a list of lines;
- properties this release does not know, and a known property holding a value of another type: kept as they
  were stored (`other`) and left out of the typed field, so a record written by another tool or version still
  reads, and `to_stored()` gives back exactly what was read (same keys, same values, same order).

Pure: no file, no process (the store reads and writes the files).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from kubectl_tao.core import contract
from kubectl_tao.core.errors import TaoError
from kubectl_tao.core.valueclass import Factory, Value, record

READABLE_VERSIONS = (1,)
OPEN = "OPEN"  # the state shown for a PENDING record never launched (no backend_ref)

_BAD = object()  # a stored value whose type the field does not take: kept in `other` as it was


def _text(value: object) -> Any:
    return value if isinstance(value, str) else _BAD


def _text_or_none(value: object) -> Any:
    return value if value is None or isinstance(value, str) else _BAD


def _int_or_none(value: object) -> Any:
    return value if value is None or (isinstance(value, int) and not isinstance(value, bool)) else _BAD


def _flag(value: object) -> Any:
    return value if isinstance(value, bool) else _BAD


def _flag_or_none(value: object) -> Any:
    return value if value is None or isinstance(value, bool) else _BAD


def _texts(value: object) -> Any:
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    return _BAD


def _mapping_or_none(value: object) -> Any:
    return value if value is None or isinstance(value, dict) else _BAD


def _mappings(value: object) -> Any:
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        return tuple(value)
    return _BAD


def _as_is(value: Any) -> Any:
    return value


def _listed(value: Any) -> Any:
    return list(value)


def _part(cls: Any) -> Callable[[object], Any]:
    def read(value: object) -> Any:
        return cls.from_stored(value) if isinstance(value, dict) else _BAD

    return read


def _part_or_none(cls: Any) -> Callable[[object], Any]:
    def read(value: object) -> Any:
        if value is None:
            return None
        return cls.from_stored(value) if isinstance(value, dict) else _BAD

    return read


def _parts(cls: Any) -> Callable[[object], Any]:
    def read(value: object) -> Any:
        if isinstance(value, list) and all(isinstance(item, dict) for item in value):
            return tuple(cls.from_stored(item) for item in value)
        return _BAD

    return read


def _stored_part(value: Any) -> Any:
    return None if value is None else value.to_stored()


def _stored_parts(value: Any) -> Any:
    return [item.to_stored() for item in value]


class Stored:
    """What a record class (`@record`, a Value) read from a stored JSON object adds: its reader and writer.
    `KEYS`: each stored key -> (field, reader, writer); a reader returns the typed value or _BAD. Every such
    class has the fields `other` (what it does not know or could not type, as stored) and `order` (the stored
    keys in their order; None for a value made in code)."""

    __slots__ = ()
    KEYS: ClassVar[dict[str, tuple[str, Callable[[object], Any], Callable[[Any], Any]]]] = {}

    @classmethod
    def from_stored(cls, data: Mapping[str, Any]) -> Any:
        fields: dict[str, Any] = {}
        other: dict[str, Any] = {}
        for key, value in data.items():
            spec = cls.KEYS.get(key)
            typed = _BAD if spec is None else spec[1](value)
            if typed is _BAD:
                other[key] = value
            else:
                fields[spec[0]] = typed  # type: ignore[index]
        return cls(**fields, other=other, order=tuple(data))

    @classmethod
    def partial(cls, **fields: Any) -> Any:
        """A value whose stored form holds FIELDS (field=typed value) alone, in the order given: a part made in
        code (a transition, a change of the sibling file for `merged`) whose unset keys are not written."""
        return cls(other={}, order=()).changed(**fields)

    def changed(self, **fields: Any) -> Any:
        """A copy with FIELDS (field=typed value) set, as a dict update sets their keys: a key stored already keeps
        its place, a new one is written after the others in the order given, even with its default value.
        TypeError (a bug, not bad input) for a field the class lacks or a value of a type the field does not take."""
        names = {spec[0]: key for key, spec in self.KEYS.items()}
        entries = []
        for name, value in fields.items():
            key = names.get(name)
            if key is None:
                raise TypeError(f"{type(self).__name__} has no field {name!r}")
            entries.append((key, False, value))
        return self._set(entries)

    def merged(self, part: Any) -> Any:
        """This value with every key PART's stored form holds set to PART's value (typed, or as PART stored it)."""
        part_other: dict[str, Any] = getattr(part, "other")  # noqa: B009 - every subclass has the field
        entries = []
        for key in part.to_stored():
            if key in part_other:
                entries.append((key, True, part_other[key]))
            else:
                entries.append((key, False, getattr(part, self.KEYS[key][0])))
        return self._set(entries)

    def _set(self, entries: list[tuple[str, bool, Any]]) -> Any:
        """(stored key, raw, value) set in order: RAW a value kept as stored (in `other`), else a typed value."""
        other = dict(getattr(self, "other"))  # noqa: B009
        order: tuple[str, ...] | None = getattr(self, "order")  # noqa: B009
        keys = None if order is None else list(order)
        typed: dict[str, Any] = {}
        for key, raw, value in entries:
            spec = self.KEYS.get(key)
            if raw or spec is None:
                other[key] = value
                if spec is not None:  # the typed field goes back to its default, so `other` alone is written
                    typed[spec[0]] = getattr(type(self)(other={}, order=None), spec[0])
            else:
                name, read, write = spec
                try:
                    back = read(write(value))
                except (AttributeError, TypeError):
                    back = _BAD
                if back is _BAD:
                    raise TypeError(f"{type(self).__name__}.{name} cannot hold {type(value).__name__} {value!r:.80}")
                typed[name] = back
                other.pop(key, None)
            if keys is not None and key not in keys:
                keys.append(key)
        made: Any = self.replaced(**typed, other=other, order=None if keys is None else tuple(keys))
        return made

    def to_stored(self) -> dict[str, Any]:
        """The JSON object this value was read from (or, made in code, every field under its stored key)."""
        other: dict[str, Any] = getattr(self, "other")  # noqa: B009 - every subclass has the field
        order: tuple[str, ...] | None = getattr(self, "order")  # noqa: B009
        out: dict[str, Any] = {}
        for key in tuple(self.KEYS) if order is None else order:
            if key in other:
                out[key] = other[key]
            elif key in self.KEYS:
                name, _read, write = self.KEYS[key]
                out[key] = write(getattr(self, name))
        if order is not None:
            made = type(self)(other={}, order=None)  # defaults: a field changed since it was read is written too
            for key, (name, _read, write) in self.KEYS.items():
                if key not in out and getattr(self, name) != getattr(made, name):
                    out[key] = write(getattr(self, name))
        return out


@record(frozen=True)
class Transition(Stored, Value):
    """One entry of the record's append-only `transitions`."""

    ts: str = ""
    state: str = "PENDING"
    message: str = ""
    source: str = "agent"
    other: dict[str, Any] = Factory(dict)
    order: tuple[str, ...] | None = None

    KEYS: ClassVar[dict[str, Any]] = {
        "ts": ("ts", _text, _as_is),
        "state": ("state", _text, _as_is),
        "message": ("message", _text, _as_is),
        "source": ("source", _text, _as_is),
    }


@record(frozen=True)
class JobRecord(Stored, Value):
    """The reference file, jobs/<id>.json (schemas/job-record.schema.json), typed."""

    schema_version: int = 1
    id: str = ""
    platform: str = ""
    backend_ref: str | None = None
    image: str = ""
    network_arch: str = ""
    action: str = ""
    results_dir: str = ""
    storage_tier: str = ""
    submitted_at: str = ""
    transitions: tuple[Transition, ...] = ()
    terminal_state: str | None = None
    terminal_write_by: str | None = None
    redacted: bool = True
    upload_excludes: tuple[str, ...] = ()
    err_class: str | None = None
    retry_of: str | None = None
    parent_job: str | None = None
    other: dict[str, Any] = Factory(dict)
    order: tuple[str, ...] | None = None

    KEYS: ClassVar[dict[str, Any]] = {
        "schema_version": ("schema_version", _int_or_none, _as_is),
        "id": ("id", _text, _as_is),
        "platform": ("platform", _text, _as_is),
        "backend_ref": ("backend_ref", _text_or_none, _as_is),
        "image": ("image", _text, _as_is),
        "network_arch": ("network_arch", _text, _as_is),
        "action": ("action", _text, _as_is),
        "results_dir": ("results_dir", _text, _as_is),
        "storage_tier": ("storage_tier", _text, _as_is),
        "submitted_at": ("submitted_at", _text, _as_is),
        "transitions": ("transitions", _parts(Transition), _stored_parts),
        "terminal_state": ("terminal_state", _text_or_none, _as_is),
        "terminal_write_by": ("terminal_write_by", _text_or_none, _as_is),
        "redacted": ("redacted", _flag, _as_is),
        "upload_excludes": ("upload_excludes", _texts, _listed),
        "err_class": ("err_class", _text_or_none, _as_is),
        "retry_of": ("retry_of", _text_or_none, _as_is),
        "parent_job": ("parent_job", _text_or_none, _as_is),
    }

    @classmethod
    def from_stored(cls, data: Mapping[str, Any]) -> JobRecord:
        version = data.get("schema_version", 1)
        if isinstance(version, int) and version not in READABLE_VERSIONS:
            raise TaoError(
                f"job record {data.get('id')!s:.200} has schema_version {version}, which this kubectl-tao cannot "
                f"read (it reads {', '.join(map(str, READABLE_VERSIONS))}); upgrade kubectl-tao"
            )
        made: JobRecord = super().from_stored(data)
        return made

    @property
    def last(self) -> Transition | None:
        """The last transition (None only for a record without any, which the schema refuses)."""
        return self.transitions[-1] if self.transitions else None

    @property
    def state(self) -> str:
        """The stored state: terminal_state when set, else the last transition's state."""
        if self.terminal_state:
            return self.terminal_state
        return self.last.state if self.last is not None else "PENDING"

    @property
    def effective_state(self) -> str:
        """The state to display: OPEN for a PENDING record never launched (no backend_ref), else `state`."""
        state = self.state
        return OPEN if state == "PENDING" and not self.backend_ref else state

    @property
    def terminal(self) -> bool:
        return self.terminal_state in contract.TERMINAL_STATES

    @property
    def last_message(self) -> str:
        return self.last.message if self.last is not None else ""


@record(frozen=True)
class RankCapture(Stored, Value):
    """One rank of a captured history: its pod, node, exit code, reason and last log lines."""

    rank: int | None = None
    pod: str | None = None
    node: str | None = None
    phase: str | None = None
    exit_code: int | None = None
    reason: str | None = None
    log_tail: str | tuple[str, ...] | None = None  # one text, or its lines (what this release writes)
    errors: tuple[str, ...] | None = None  # a failed rank's first error blocks (diagnosis/ranklogs.first_errors)
    captured_at: str | None = None
    other: dict[str, Any] = Factory(dict)
    order: tuple[str, ...] | None = None

    KEYS: ClassVar[dict[str, Any]] = {
        "rank": ("rank", _int_or_none, _as_is),
        "pod": ("pod", _text_or_none, _as_is),
        "node": ("node", _text_or_none, _as_is),
        "phase": ("phase", _text_or_none, _as_is),
        "exit_code": ("exit_code", _int_or_none, _as_is),
        "reason": ("reason", _text_or_none, _as_is),
        "log_tail": ("log_tail", lambda v: v if v is None or isinstance(v, str) else _texts(v),
                     lambda v: list(v) if isinstance(v, tuple) else v),
        "errors": ("errors", lambda v: None if v is None else _texts(v),
                   lambda v: None if v is None else list(v)),
        "captured_at": ("captured_at", _text_or_none, _as_is),
    }

    @property
    def tail_lines(self) -> tuple[str, ...]:
        """The log tail as lines, whichever way it was stored."""
        if self.log_tail is None:
            return ()
        return tuple(self.log_tail.splitlines()) if isinstance(self.log_tail, str) else self.log_tail


@record(frozen=True)
class CapturedHistory(Stored, Value):
    """What the terminal transition captured (`history` of the sibling file). `listed`: stored as a bare list
    of ranks (the first releases' shape), written back the same way."""

    state: str | None = None
    reason: str | None = None
    message: str | None = None
    err_class: str | None = None
    first_failed_rank: int | None = None
    captured_at: str | None = None
    ranks: tuple[RankCapture, ...] = ()
    progress: dict[str, Any] | None = None
    diagnosis: dict[str, Any] | None = None
    listed: bool = False
    other: dict[str, Any] = Factory(dict)
    order: tuple[str, ...] | None = None

    KEYS: ClassVar[dict[str, Any]] = {
        "state": ("state", _text_or_none, _as_is),
        "reason": ("reason", _text_or_none, _as_is),
        "message": ("message", _text_or_none, _as_is),
        "err_class": ("err_class", _text_or_none, _as_is),
        "first_failed_rank": ("first_failed_rank", _int_or_none, _as_is),
        "captured_at": ("captured_at", _text_or_none, _as_is),
        "ranks": ("ranks", _parts(RankCapture), _stored_parts),
        "progress": ("progress", _mapping_or_none, _as_is),
        "diagnosis": ("diagnosis", _mapping_or_none, _as_is),
    }

    @classmethod
    def read(cls, value: object) -> Any:
        """A stored `history`: an object, a list of ranks, or None; _BAD for anything else."""
        if value is None:
            return None
        if isinstance(value, list):
            ranks = _parts(RankCapture)(value)
            return _BAD if ranks is _BAD else cls(ranks=ranks, listed=True, other={}, order=None)
        return cls.from_stored(value) if isinstance(value, dict) else _BAD

    def to_stored(self) -> Any:  # type: ignore[override]
        return [rank.to_stored() for rank in self.ranks] if self.listed else super().to_stored()

    @property
    def empty(self) -> bool:
        """Nothing was captured (stored as {} or [])."""
        return not self.to_stored()

    @property
    def cause(self) -> dict[str, Any] | None:
        """The diagnosis, when it names a cause (diagnosis/ranklogs.py wrote it), else None."""
        found = self.diagnosis
        return found if isinstance(found, dict) and found.get("cause") else None


@record(frozen=True)
class ProgressRead(Stored, Value):
    """Why the end of rank 0's log stands in for status.json (`progress_read`)."""

    from_: str | None = None
    why: str | None = None
    at: str | None = None
    retry_at: str | None = None
    other: dict[str, Any] = Factory(dict)
    order: tuple[str, ...] | None = None

    KEYS: ClassVar[dict[str, Any]] = {
        "from": ("from_", _text_or_none, _as_is),
        "why": ("why", _text_or_none, _as_is),
        "at": ("at", _text_or_none, _as_is),
        "retry_at": ("retry_at", _text_or_none, _as_is),
    }


@record(frozen=True)
class WorkflowLink(Value):
    """Where a record stands in a workflow run (the sibling file's `workflow*` keys)."""

    run: str
    name: str | None
    step: str | None
    index: int
    after: Any  # the steps this one waits for, as the workflow file gave them
    when: str | None
    not_run: dict[str, Any] | None
    results_seen_as: str | None


@record(frozen=True)
class K8sRecord(Stored, Value):
    """kubectl-tao's sibling file, jobs/.kubectl-tao/<id>.json (schemas/job-record-k8s.schema.json), typed.
    `{}` (no sibling file yet) reads as every field at its default."""

    schema_version: int | None = None
    id: str | None = None
    api_server: str | None = None
    context: str | None = None
    namespace: str | None = None
    job_name: str | None = None
    job_uid: str | None = None
    service_name: str | None = None
    secret_names: tuple[str, ...] = ()
    gpus: int | None = None
    nodes: int | None = None
    gang: str | None = None
    created_objects: tuple[str, ...] = ()
    history: CapturedHistory | None = None
    warnings: tuple[str, ...] = ()
    progress: dict[str, Any] | None = None  # progress/model.from_stored reads it (passing over unknown keys)
    progress_read: ProgressRead | None = None
    submit_phase: str | None = None
    rollback: dict[str, Any] | None = None
    left_behind: tuple[str, ...] = ()
    max_restarts: int | None = None
    attempts: tuple[dict[str, Any], ...] = ()  # restarts/history.AttemptEnd.from_dict reads each
    keep_until_captured: bool | None = None
    ttl_hold: str | None = None
    ttl_seconds: int | None = None
    request: dict[str, Any] | None = None  # the request submit kept (jobs/resubmit.py reads it back)
    resubmitted_as: tuple[str, ...] = ()  # the records `resubmit` made of this one
    workflow: str | None = None
    workflow_name: str | None = None
    workflow_step: str | None = None
    workflow_index: int | None = None
    workflow_after: Any = None
    workflow_when: str | None = None
    workflow_not_run: dict[str, Any] | None = None
    workflow_file: str | None = None
    results_seen_as: str | None = None
    resumed_from: str | None = None  # the workflow run `workflow resume` continued
    other: dict[str, Any] = Factory(dict)
    order: tuple[str, ...] | None = None

    KEYS: ClassVar[dict[str, Any]] = {
        "schema_version": ("schema_version", _int_or_none, _as_is),
        "id": ("id", _text_or_none, _as_is),
        "api_server": ("api_server", _text_or_none, _as_is),
        "context": ("context", _text_or_none, _as_is),
        "namespace": ("namespace", _text_or_none, _as_is),
        "job_name": ("job_name", _text_or_none, _as_is),
        "job_uid": ("job_uid", _text_or_none, _as_is),
        "service_name": ("service_name", _text_or_none, _as_is),
        "secret_names": ("secret_names", _texts, _listed),
        "gpus": ("gpus", _int_or_none, _as_is),
        "nodes": ("nodes", _int_or_none, _as_is),
        "gang": ("gang", _text_or_none, _as_is),
        "created_objects": ("created_objects", _texts, _listed),
        "history": ("history", CapturedHistory.read, _stored_part),
        "warnings": ("warnings", _texts, _listed),
        "progress": ("progress", _mapping_or_none, _as_is),
        "progress_read": ("progress_read", _part_or_none(ProgressRead), _stored_part),
        "submit_phase": ("submit_phase", _text_or_none, _as_is),
        "rollback": ("rollback", _mapping_or_none, _as_is),
        "left_behind": ("left_behind", _texts, _listed),
        "max_restarts": ("max_restarts", _int_or_none, _as_is),
        "attempts": ("attempts", _mappings, _listed),
        "keep_until_captured": ("keep_until_captured", _flag_or_none, _as_is),
        "ttl_hold": ("ttl_hold", _text_or_none, _as_is),
        "ttl_seconds": ("ttl_seconds", _int_or_none, _as_is),
        "request": ("request", _mapping_or_none, _as_is),
        "resubmitted_as": ("resubmitted_as", _texts, _listed),
        "workflow": ("workflow", _text_or_none, _as_is),
        "workflow_name": ("workflow_name", _text_or_none, _as_is),
        "workflow_step": ("workflow_step", _text_or_none, _as_is),
        "workflow_index": ("workflow_index", _int_or_none, _as_is),
        "workflow_after": ("workflow_after", _as_is, _as_is),
        "workflow_when": ("workflow_when", _text_or_none, _as_is),
        "workflow_not_run": ("workflow_not_run", _mapping_or_none, _as_is),
        "workflow_file": ("workflow_file", _text_or_none, _as_is),
        "results_seen_as": ("results_seen_as", _text_or_none, _as_is),
        "resumed_from": ("resumed_from", _text_or_none, _as_is),
    }

    @classmethod
    def from_stored(cls, data: Mapping[str, Any]) -> K8sRecord:
        version = data.get("schema_version")
        if isinstance(version, int) and not isinstance(version, bool) and version not in READABLE_VERSIONS:
            raise TaoError(
                f"kubectl-tao data of job record {data.get('id')!s:.200} has schema_version {version}, which this "
                f"kubectl-tao cannot read (it reads {', '.join(map(str, READABLE_VERSIONS))}); upgrade kubectl-tao"
            )
        made: K8sRecord = super().from_stored(data)
        return made

    @property
    def flags(self) -> dict[str, Any]:
        """The job flags the kept request holds (by name), {} when none was kept."""
        flags = (self.request or {}).get("flags")
        return flags if isinstance(flags, dict) else {}

    @property
    def link(self) -> WorkflowLink | None:
        """Where the job stands in a workflow run; None for a job submitted on its own."""
        if not self.workflow:
            return None
        return WorkflowLink(self.workflow, self.workflow_name, self.workflow_step, self.workflow_index or 0,
                            self.workflow_after, self.workflow_when, self.workflow_not_run, self.results_seen_as)
