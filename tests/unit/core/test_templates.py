"""templates.py: JSON-encoded marker substitution."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_tao.core import templates
from kubectl_tao.core.errors import TaoError, UsageError

TEMPLATE = 'kind: "Demo"\nvalue: @@VALUE@@\nlist: [@@ITEM@@, "fixed"]\n'


def test_fill_writes_json_values():
    text = templates.fill(TEMPLATE, {"VALUE": {"a": [1, None, True]}, "ITEM": "x"})
    assert text == 'kind: "Demo"\nvalue: {"a": [1, null, true]}\nlist: ["x", "fixed"]\n'


def test_fill_refuses_an_unresolved_marker():
    with pytest.raises(TaoError, match="template has unresolved markers: ITEM"):
        templates.fill(TEMPLATE, {"VALUE": 1})


def test_fill_refuses_an_unused_value():
    with pytest.raises(TaoError, match="template has no marker for values: EXTRA"):
        templates.fill(TEMPLATE, {"VALUE": 1, "ITEM": 2, "EXTRA": 3})


def test_a_value_that_looks_like_a_marker_is_not_substituted_again():
    text = templates.fill(TEMPLATE, {"VALUE": "@@ITEM@@", "ITEM": "x"})
    assert templates.parse_documents(text) == [{"kind": "Demo", "value": "@@ITEM@@", "list": ["x", "fixed"]}]


@settings(deadline=None)  # a timing limit says nothing about the round trip; 2 loaded cores miss 200 ms
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
        max_leaves=20,
    )
)
def test_any_json_value_parses_back_identically_in_yaml_1_1_and_1_2(value):
    text = templates.fill(TEMPLATE, {"VALUE": value, "ITEM": "x"})
    assert yaml.safe_load(text)["value"] == value
    (document,) = templates.parse_documents(text)
    if value is None:  # a null marker removes its key
        assert set(document) == {"kind", "list"}
    else:
        assert document["value"] == templates.prune_nulls(value)
        assert set(document) == {"kind", "value", "list"}


def test_dumps_escapes_characters_yaml_would_change():
    assert templates.yaml_safe_json("a\u2028b\x85c\x7fd\ufeff") == '"a\\u2028b\\u0085c\\u007fd\\ufeff"'
    assert templates.yaml_safe_json("\U0001f680é") == '"\U0001f680é"'


def test_prune_nulls_drops_null_keys_at_every_depth():
    assert templates.prune_nulls({"a": None, "b": {"c": None, "d": [{"e": None, "f": 1}]}}) == {"b": {"d": [{"f": 1}]}}


def test_load_template_reads_the_checkout_and_refuses_paths():
    assert "@@JOB_NAME@@" in templates.load_template("single-pod-job.yaml.tmpl")
    with pytest.raises(UsageError, match="must be a file name inside templates/k8s"):
        templates.load_template("../x")
    with pytest.raises(TaoError, match="cannot read template"):
        templates.load_template("missing.tmpl")


def test_parse_documents_refuses_non_mappings_and_bad_yaml():
    with pytest.raises(TaoError, match="must contain only mappings"):
        templates.parse_documents("- a\n")
    with pytest.raises(TaoError, match="is not valid YAML"):
        templates.parse_documents("a: [\n")


@pytest.mark.parametrize("name", ["single-pod-job.yaml.tmpl", "indexed-job.yaml.tmpl", "action-job.yaml.tmpl"])
def test_every_marker_sits_in_a_value_position(name):
    import re

    for line in templates.load_template(name).splitlines():
        if "@@" in line and not line.lstrip().startswith("#"):
            assert re.fullmatch(r"\s*(- )?[A-Za-z][\w./-]*: @@[A-Z_]+@@", line), line


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda c: st.lists(c) | st.dictionaries(st.text(), c),
    max_leaves=12,
)


@pytest.mark.parametrize("name", ["single-pod-job.yaml.tmpl", "indexed-job.yaml.tmpl"])
def test_the_job_templates_are_filled_without_the_yaml_parser(name, monkeypatch):
    """submit's templates are plain block YAML: filled in place, ruamel.yaml is never asked."""
    monkeypatch.setattr(templates, "parse_documents", lambda _text: pytest.fail("parsed the filled text"))
    markers = set(templates.MARKER_RE.findall(templates.load_template(name)))
    documents = templates.render_template(name, dict.fromkeys(markers, "x"))
    assert documents and all(isinstance(doc, dict) for doc in documents)


@pytest.mark.parametrize("name", ["single-pod-job.yaml.tmpl", "indexed-job.yaml.tmpl", "action-job.yaml.tmpl"])
@settings(deadline=None, max_examples=40)
@given(value=JSON_VALUES, other=JSON_VALUES, shift=st.integers(0, 2))
def test_filling_in_place_gives_what_parsing_the_filled_text_gives(name, value, other, shift):
    """The same documents either way for any JSON values (null removes its key): each marker gets VALUE,
    OTHER or null, in turns."""
    text = templates.load_template(name)
    markers = sorted(set(templates.MARKER_RE.findall(text)))
    values = {marker: (value, other, None)[(i + shift) % 3] for i, marker in enumerate(markers)}
    assert templates.render_template(name, values) == templates.parse_documents(templates.fill(text, values))


def test_filling_in_place_refuses_unresolved_markers_and_unused_values_as_fill_does():
    text = templates.load_template("single-pod-job.yaml.tmpl")
    values = dict.fromkeys(templates.MARKER_RE.findall(text), "x")
    with pytest.raises(TaoError, match=r"template has unresolved markers: IMAGE$"):
        templates.render_template("single-pod-job.yaml.tmpl", {k: v for k, v in values.items() if k != "IMAGE"})
    with pytest.raises(TaoError, match=r"template has no marker for values: EXTRA$"):
        templates.render_template("single-pod-job.yaml.tmpl", {**values, "EXTRA": 1})


def test_a_template_outside_the_plain_subset_is_parsed_after_filling():
    assert templates._skeleton("kind: Demo\nlist: [@@ITEM@@]\n") is None  # a marker in a flow collection
    assert templates._skeleton("kind: Demo\nvalue: 'a @@ITEM@@'\n") is None  # inside a quoted scalar
    assert templates._skeleton("# only\n---\nkind: A\n---\nkind: B\nv: @@V@@\n") == [
        {"kind": "A"}, {"kind": "B", "v": "@@V@@"}]
