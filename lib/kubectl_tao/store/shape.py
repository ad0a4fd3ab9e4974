"""Does a record (or its sibling file) certainly match its schema? Answered in microseconds, without jsonschema.

Every record write is validated against schemas/job-record*.schema.json; importing jsonschema and building its
validator costs more than the rest of a submit's Python. `certainly_valid` checks each property the schema
constrains with the schema's own patterns (`re.search`, as jsonschema applies `pattern`) and stricter types
(`int` never `bool` or `1.0`, timestamps parsed as dates). True means the schema accepts the instance; False
means "not sure": the caller then asks jsonschema, which also words the error. So this can only save time,
never let through what the schema refuses. tests/unit/store/test_shape.py holds it to the schema files.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

_RECORD_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
_NO_SPACE = r"^[^\s]+$"
_RESULTS_DIR = r"^(/[^\s]*|s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?)$"
_TIMESTAMP = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z$"
_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
_UID = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
_API_SERVER = r"^(https?://[^\s]+)?$"
_OBJECT_NAME = r"^[a-z0-9.]+/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
STATES = ("PENDING", "RUNNING", "COMPLETE", "ERROR", "CANCELED", "UNKNOWN")
SOURCES = ("agent", "poller", "backend-hook")


def _text(value: object, pattern: str | None = None, *, min_len: int = 0, max_len: int | None = None) -> bool:
    return (
        isinstance(value, str)
        and len(value) >= min_len
        and (max_len is None or len(value) <= max_len)
        and (pattern is None or re.search(pattern, value) is not None)
    )


def _one_of(value: object, choices: tuple[object, ...]) -> bool:
    return (value is None or isinstance(value, str)) and value in choices


def _timestamp(value: object) -> bool:
    if not _text(value, _TIMESTAMP):
        return False
    assert isinstance(value, str)
    try:
        datetime.strptime(value[:19], "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return False
    return True


def _count(value: object, minimum: int) -> bool:
    return value is None or (type(value) is int and value >= minimum)


def _record_id(value: object) -> bool:
    return _text(value, _RECORD_ID, max_len=200)


def _transition(value: object) -> bool:
    return (
        isinstance(value, dict)
        and all(key in value for key in ("ts", "state", "message", "source"))
        and _timestamp(value["ts"])
        and _one_of(value["state"], STATES)
        and isinstance(value["message"], str)
        and _one_of(value["source"], SOURCES)
    )


def _strings(value: object, check: Callable[[object], bool]) -> bool:
    return isinstance(value, list) and all(check(item) for item in value)


# property -> (required, check of its value); every property the schema names is here
RECORD: dict[str, tuple[bool, Callable[[object], bool]]] = {
    "schema_version": (True, lambda v: type(v) is int and v == 1),
    "id": (True, _record_id),
    "platform": (True, lambda v: _text(v, r"^[a-z0-9][a-z0-9-]{0,31}$")),
    "backend_ref": (True, lambda v: v is None or _text(v, _NO_SPACE, min_len=1)),
    "image": (True, lambda v: _text(v, _NO_SPACE, min_len=1)),
    "network_arch": (True, lambda v: _text(v, min_len=1)),
    "action": (True, lambda v: _text(v, min_len=1)),
    "results_dir": (True, lambda v: _text(v, _RESULTS_DIR)),
    "storage_tier": (True, lambda v: _one_of(v, ("A", "B", "C"))),
    "submitted_at": (True, _timestamp),
    "transitions": (True, lambda v: isinstance(v, list) and len(v) >= 1 and all(_transition(t) for t in v)),
    "terminal_state": (True, lambda v: _one_of(v, ("COMPLETE", "ERROR", "CANCELED", None))),
    "terminal_write_by": (False, lambda v: _one_of(v, (*SOURCES, None))),
    "redacted": (True, lambda v: v is True),
    "upload_excludes": (True, lambda v: _strings(v, lambda item: _text(item, min_len=1))),
    "err_class": (False, lambda v: _one_of(v, ("ERR_INFRA", "ERR_PROGRAM", None))),
    "retry_of": (False, lambda v: v is None or _record_id(v)),
    "parent_job": (False, lambda v: v is None or _record_id(v)),
}


def _dns_label(value: object) -> bool:
    return value is None or _text(value, _DNS_LABEL, max_len=63)


def _number(value: object, maximum: float | None = None) -> bool:
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or value in (
            float("inf"), float("-inf")):
        return False
    return value >= 0 and (maximum is None or value <= maximum)


_PROGRESS_STATES = ("started", "running", "succeeded", "failed", "skipped", None)
PROGRESS: dict[str, Callable[[object], bool]] = {
    "epoch": lambda v: _count(v, 0),
    "max_epoch": lambda v: _count(v, 0),
    "step": lambda v: _count(v, 0),
    "total_steps": lambda v: _count(v, 0),
    "percent": lambda v: _number(v, 100),
    "eta_seconds": lambda v: _count(v, 0),
    "kpi": lambda v: v is None or (isinstance(v, dict) and all(
        isinstance(k, str) and (n is None or (not isinstance(n, bool) and isinstance(n, int | float) and n == n
                                              and n not in (float("inf"), float("-inf"))))
        for k, n in v.items())),
    "updated": lambda v: v is None or _text(v, max_len=64),
    "source": lambda v: isinstance(v, str) and v in ("status.json", "log"),
    "epoch_seconds": _number,
    "step_seconds": _number,
    "state": lambda v: _one_of(v, _PROGRESS_STATES),
    "where": lambda v: v is None or _text(v, max_len=300),
}


def _progress(value: object) -> bool:
    return value is None or (isinstance(value, Mapping) and all(
        check(value[key]) for key, check in PROGRESS.items() if key in value))


def _progress_read(value: object) -> bool:
    if value is None:
        return True
    if not isinstance(value, Mapping):
        return False
    return (("from" not in value or value["from"] == "log")
            and ("why" not in value or _text(value["why"], max_len=64))
            and ("at" not in value or _timestamp(value["at"]))
            and ("retry_at" not in value or _timestamp(value["retry_at"])))


RECORD_K8S: dict[str, tuple[bool, Callable[[object], bool]]] = {
    "schema_version": (True, lambda v: type(v) is int and v == 1),
    "id": (True, _record_id),
    "api_server": (False, lambda v: v is None or _text(v, _API_SERVER)),
    "context": (False, lambda v: v is None or isinstance(v, str)),
    "namespace": (False, _dns_label),
    "job_name": (False, _dns_label),
    "job_uid": (False, lambda v: v is None or _text(v, _UID)),
    "service_name": (False, _dns_label),
    "secret_names": (False, lambda v: _strings(v, lambda item: _text(item, _DNS_SUBDOMAIN, max_len=253))),
    "gpus": (False, lambda v: _count(v, 0)),
    "nodes": (False, lambda v: _count(v, 1)),
    "gang": (False, lambda v: _one_of(v, ("native", "kueue", "none", None))),
    "created_objects": (False, lambda v: _strings(v, lambda item: _text(item, _OBJECT_NAME))),
    "history": (False, lambda v: v is None),  # a captured history: left to jsonschema
    "warnings": (False, lambda v: _strings(v, lambda item: isinstance(item, str))),
    "progress": (False, _progress),
    "progress_read": (False, _progress_read),
}

CHECKS = {"job-record": RECORD, "job-record-k8s": RECORD_K8S}


def certainly_valid(instance: object, schema_name: str) -> bool:
    """True only when `instance` matches schemas/<schema_name>.schema.json; False: ask jsonschema."""
    checks = CHECKS.get(schema_name)
    if checks is None or not isinstance(instance, Mapping):
        return False
    for key, (required, check) in checks.items():
        if key in instance:
            if not check(instance[key]):
                return False
        elif required:
            return False
    return True


def schema_properties(schema: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """(properties, required) of a schema document, to hold CHECKS to the schema files in the tests."""
    return set(schema.get("properties") or {}), set(schema.get("required") or [])
