"""schemas.py and the action-request / staging-map schemas."""

from __future__ import annotations

import json
import sys

import pytest
from jsonschema import Draft202012Validator
from support import ROOT as REPO_ROOT

from kubectl_tao.core import schemas, templates
from kubectl_tao.core.errors import TaoError, UsageError

ROOT = REPO_ROOT
FIXTURES = ROOT / "tests" / "fixtures" / "action"
MINE = ["action-request.v1", "staging-map.v1"]


@pytest.mark.parametrize("name", MINE)
def test_schema_is_a_valid_2020_12_schema_with_id_and_title(name):
    schema = schemas.load_schema(name)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"].endswith(f"{name}.schema.json")
    assert schema["title"]
    assert schema["description"]


@pytest.mark.parametrize(
    ("fixture", "name"),
    [
        ("request-args.json", "action-request.v1"),
        ("request-config.json", "action-request.v1"),
        ("request-config-shell.json", "action-request.v1"),
        ("staging-args.json", "staging-map.v1"),
    ],
)
def test_fixtures_are_valid(fixture, name):
    schemas.validate(json.loads((FIXTURES / fixture).read_text()), name)
    assert schemas.is_valid(json.loads((FIXTURES / fixture).read_text()), name)


def test_error_names_the_document_and_json_path():
    with pytest.raises(UsageError) as info:
        schemas.validate({"schema_version": "1", "sources": [{"source": "/a"}]}, "staging-map.v1")
    assert str(info.value) == "staging map $.sources[0]: 'sub_path' is a required property"
    assert info.value.exit_code == 2


def test_error_label_can_be_chosen():
    with pytest.raises(UsageError, match=r"^receipt \$: 'sources' is a required property$"):
        schemas.validate({"schema_version": "1"}, "staging-map.v1", what="receipt")


def test_a_failed_not_reports_the_description():
    request = json.loads((FIXTURES / "request-config.json").read_text())
    request["spec_bundle"]["args"] = ["x"]
    with pytest.raises(UsageError) as info:
        schemas.validate(request, "action-request.v1.schema.json")
    assert str(info.value).endswith(
        "$.spec_bundle.args: args belong to mode=args; in mode=config the command refers to {config_path}"
    )


def test_messages_are_one_bounded_line():
    request = json.loads((FIXTURES / "request-args.json").read_text())
    request["spec_bundle"]["args"] = "x\n" * 400
    with pytest.raises(UsageError) as info:
        schemas.validate(request, "action-request.v1")
    assert "\n" not in str(info.value)
    assert len(str(info.value)) <= 300


def test_unknown_properties_are_tolerated():
    staging = {"schema_version": "1", "sources": [{"source": "/a", "sub_path": "a", "size": 1}], "mover": "x"}
    assert schemas.is_valid(staging, "staging-map.v1")


def test_non_object_documents_are_refused():
    assert not schemas.is_valid([], "action-request.v1")


def test_unknown_schema_names_fail_clearly():
    with pytest.raises(TaoError, match="cannot load schema"):
        schemas.load_schema("no-such-thing")
    with pytest.raises(TaoError, match="must be a file name inside schemas/"):
        schemas.schema_path("../etc/passwd")


def test_schema_path_finds_the_checkout():
    assert schemas.schema_path("staging-map.v1") == ROOT / "schemas" / "staging-map.v1.schema.json"
    assert schemas.schema_path("staging-map.v1.schema.json") == ROOT / "schemas" / "staging-map.v1.schema.json"


def test_installed_layout_is_under_sys_prefix(monkeypatch, tmp_path):
    monkeypatch.setattr(templates, "__file__", str(tmp_path / "site-packages" / "kubectl_tao" / "templates.py"))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "prefix"))
    assert schemas.schema_path("x") == tmp_path / "prefix" / "share" / "kubectl-tao" / "schemas" / "x.schema.json"
    assert (
        templates.template_path("a.tmpl")
        == tmp_path / "prefix" / "share" / "kubectl-tao" / "templates" / "k8s" / "a.tmpl"
    )
