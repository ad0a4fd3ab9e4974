"""manifests/tomlwriter.py: materialized TOML configs are byte-identical to what the reference renderer writes
wherever its output is valid TOML, so the same spec gets the same content-addressed name from either tool. The
expected texts are the reference writer's output for each spec, worked out from its rules (JSON string escapes,
sections apart by one blank line, a table of sub-tables alone followed at once by its first sub-table, `{  }`)."""

from __future__ import annotations

import hashlib
import tomllib

import pytest

from kubectl_tao.core.errors import UsageError
from kubectl_tao.manifests import action, tomlwriter


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"a": {"b": {"x": 1}}}, "[a]\n[a.b]\nx = 1\n"),
        ({"z": 1, "a": {"k": "v"}, "m": {"n": {}}}, 'z = 1\n\n[a]\nk = "v"\n\n[m]\n[m.n]\n'),
        ({"t": {"s": 1, "u": {"v": 2}}}, "[t]\ns = 1\n\n[t.u]\nv = 2\n"),
        ({"name": "caf\u00e9 \u2603"}, 'name = "caf\\u00e9 \\u2603"\n'),
        ({"cl\u00e9": 1}, '"cl\\u00e9" = 1\n'),
        ({"opts": [{}], "o": [{"k": {}}]}, 'o = [{ k = {  } }]\nopts = [{  }]\n'),
        ({"c": "tab\tnl\nbell\x07"}, 'c = "tab\\tnl\\nbell\\u0007"\n'),
        ({}, "\n"),
    ],
)
def test_toml_matches_the_reference_layout_byte_for_byte(spec: dict, expected: str) -> None:
    assert tomlwriter.toml_dumps(spec) == expected
    assert tomllib.loads(expected) == spec


def test_the_same_spec_gets_the_reference_sha256_name() -> None:
    bundle = {"config_format": "toml", "spec": {"model": {"backbone": {"name": "r\u00e9snet"}}, "epochs": 3}}
    content, extension, digest = action.config_document(bundle)
    expected = 'epochs = 3\n\n[model]\n[model.backbone]\nname = "r\\u00e9snet"\n'
    assert content == expected and extension == "toml"
    assert digest == hashlib.sha256(expected.encode("utf-8")).hexdigest()


@pytest.mark.parametrize(
    ("spec", "ours"),
    [
        # The reference writes a UTF-16 surrogate pair (\ud83d\ude80), which TOML forbids: keep the character.
        ({"e": "\U0001f680"}, 'e = "\U0001f680"\n'),
        # The reference writes DEL raw, which TOML forbids in a basic string: escape it.
        ({"d": "\x7f"}, 'd = "\\u007f"\n'),
    ],
)
def test_where_the_reference_writes_invalid_toml_ours_stays_valid(spec: dict, ours: str) -> None:
    assert tomlwriter.toml_dumps(spec) == ours
    assert tomllib.loads(ours) == spec


def test_toml_round_trips_through_tomllib():
    spec = {
        "title": 'quote " backslash \\ newline \n tab \t del \x7f bell \x07 unicode é 🚀',
        "plain-key_1": 1,
        "needs quoting": True,
        "float": 1.5e-07,
        "big": 2**62,
        "negative": -3,
        "list": [1, "two", [3.0], {"inline": {"deep": False}}],
        "empty_list": [],
        "empty_inline": [{}],
        "section": {"a": 1, "nested": {"b": "c", "deeper": {"d": []}}, "only_tables": {"x": {"y": 1}}},
        "empty_table": {},
    }
    assert tomllib.loads(tomlwriter.toml_dumps(spec)) == spec


def test_toml_of_an_empty_spec_is_an_empty_document():
    assert tomlwriter.toml_dumps({}) == "\n"
    assert tomllib.loads(tomlwriter.toml_dumps({})) == {}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"a": None}, "which TOML cannot represent"),
        ({"a": float("nan")}, "must be finite for TOML"),
        ({"a": 2**64}, "does not fit TOML's 64-bit integers"),
        ({"a": "\ud800"}, "lone surrogate"),
        ({"": 1}, "TOML keys must be non-empty strings"),
    ],
)
def test_toml_refuses_what_it_cannot_write(spec, message):
    with pytest.raises(UsageError, match=message):
        tomlwriter.toml_dumps(spec)
