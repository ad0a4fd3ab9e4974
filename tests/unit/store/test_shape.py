"""store/shape.certainly_valid may only say yes where the schema files say yes (it spares record writes the
jsonschema import), and it knows every property the schemas constrain."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fake_kubectl import open_kubernetes_record

from kubectl_tao.core.errors import TaoError
from kubectl_tao.store import records, shape
from kubectl_tao.store.records import RecordStore, schema_errors

SCHEMAS = Path(__file__).resolve().parents[3] / "schemas"

RECORD: dict[str, Any] = {
    "schema_version": 1,
    "id": "dino-train-0a1b2c",
    "platform": "kubernetes",
    "backend_ref": "tao-jobs/dino-train-0a1b2c",
    "image": "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt",
    "network_arch": "dino",
    "action": "train",
    "results_dir": "/workspace/results/dino-train-0a1b2c",
    "storage_tier": "A",
    "submitted_at": "2026-12-03T10:00:00.123Z",
    "transitions": [
        {"ts": "2026-12-03T10:00:00.123Z", "state": "PENDING", "message": "record opened before launch",
         "source": "agent"},
        {"ts": "2026-12-03T10:00:01.000Z", "state": "ERROR", "message": "not launched", "source": "agent"},
    ],
    "terminal_state": "ERROR",
    "terminal_write_by": "agent",
    "redacted": True,
    "upload_excludes": [".tao/*"],
    "err_class": "ERR_INFRA",
    "retry_of": None,
    "parent_job": "dino-train-ffffff",
}
EXTRA: dict[str, Any] = {
    "schema_version": 1,
    "id": "dino-train-0a1b2c",
    "api_server": "https://127.0.0.1:6443",
    "context": "lab",
    "namespace": "tao-jobs",
    "job_name": "dino-train-0a1b2c",
    "job_uid": "0b9b6c1e-1111-2222-3333-444455556666",
    "service_name": None,
    "secret_names": ["tao-creds-dino-train-0a1b2c"],
    "gpus": 8,
    "nodes": 1,
    "gang": "none",
    "created_objects": ["job.batch/dino-train-0a1b2c"],
    "history": None,
    "warnings": ["a warning"],
    "submit_phase": "created",
}
BASES = {"job-record": RECORD, "job-record-k8s": EXTRA}

# Values that break one rule or another of the schemas (and a few that do not), to put into any property.
ODD_VALUES = [
    None, True, False, 0, 1, 1.0, -1, 2, "", " ", "x y", "a\n", "\n", "A", "PENDING", "agent", "none",
    "2026-13-03T10:00:00Z", "2026-12-03T10:00:00Z", "2026-12-03 10:00:00Z", "/abs", "s3://b/x", "s3://B/x",
    "relative", "https://h", "ftp://h", "UPPER", "-lead", "a" * 64, "a" * 201, [], [""], ["ok"], [1], {},
    {"ts": "2026-12-03T10:00:00Z"}, [{"ts": "2026-12-03T10:00:00Z", "state": "PENDING", "message": "",
                                      "source": "agent"}],
    [{"ts": "x", "state": "PENDING", "message": "", "source": "agent"}],
]


def schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(BASES))
def test_the_checks_cover_exactly_the_schemas_properties_and_required_fields(name: str) -> None:
    properties, required = shape.schema_properties(schema(name))
    checks = shape.CHECKS[name]
    assert set(checks) == properties
    assert {key for key, (needed, _) in checks.items() if needed} == required


@pytest.mark.parametrize("name", sorted(BASES))
def test_the_written_shapes_are_recognised_without_jsonschema(name: str) -> None:
    assert schema_errors(BASES[name], name) == []
    assert shape.certainly_valid(BASES[name], name)


@pytest.mark.parametrize("name", sorted(BASES))
@pytest.mark.parametrize("value", ODD_VALUES, ids=repr)
def test_a_yes_is_never_wrong_whatever_one_property_holds(name: str, value: Any) -> None:
    for key in [*BASES[name], "unknown_key"]:
        instance = copy.deepcopy(BASES[name])
        instance[key] = value
        if shape.certainly_valid(instance, name):
            assert schema_errors(instance, name) == [], (key, value)


@pytest.mark.parametrize("name", sorted(BASES))
def test_a_missing_required_property_is_never_waved_through(name: str) -> None:
    for key in shape.schema_properties(schema(name))[1]:
        instance = {k: v for k, v in BASES[name].items() if k != key}
        assert not shape.certainly_valid(instance, name) and schema_errors(instance, name) != []


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(name=st.sampled_from(sorted(BASES)), data=st.data())
def test_random_changes_never_get_a_wrong_yes(name: str, data: st.DataObject) -> None:
    instance = copy.deepcopy(BASES[name])
    for key in data.draw(st.lists(st.sampled_from(sorted(instance)), max_size=3)):
        instance[key] = data.draw(st.sampled_from(ODD_VALUES) | json_values)
    if shape.certainly_valid(instance, name):
        assert schema_errors(instance, name) == []


def test_an_unknown_schema_or_a_non_object_is_left_to_jsonschema() -> None:
    assert not shape.certainly_valid(RECORD, "plugin-config")
    assert not shape.certainly_valid([RECORD], "job-record")
    assert not shape.certainly_valid({**EXTRA, "history": {"state": "ERROR"}}, "job-record-k8s")


def test_a_write_the_quick_check_doubts_still_gets_the_schemas_message(
    tao_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RecordStore()
    record = open_kubernetes_record(store)
    with pytest.raises(TaoError, match=r"does not match job-record-k8s.schema.json at \$.gpus: -1 is less than"):
        store.update_extra(record.id, gpus=-1)
    asked: list[str] = []
    real = records.schema_errors
    monkeypatch.setattr(records, "schema_errors", lambda i, n: asked.append(n) or real(i, n))
    store.update_extra(record.id, gpus=8, job_name="x")
    store.mark(record.id, "RUNNING", message="applied", backend_ref="tao-jobs/x")
    assert asked == []  # the usual writes never ask jsonschema
