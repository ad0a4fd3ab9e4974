"""Materialized TOML configs are byte-identical to what the reference renderer writes wherever its output is
valid TOML, so the same spec gets the same content-addressed name from either tool. The expected texts are
the reference writer's output for each spec, worked out from its rules (JSON string escapes, sections apart
by one blank line, a table of sub-tables alone followed at once by its first sub-table, `{  }`)."""

from __future__ import annotations

import hashlib
import tomllib

import pytest

from kubectl_tao.core import action


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
    assert action.toml_dumps(spec) == expected
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
    assert action.toml_dumps(spec) == ours
    assert tomllib.loads(ours) == spec
