"""blockyaml reads what kubectl writes exactly as ruamel.yaml does, and gives up (None) on anything else."""

from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from kubectl_tao.core import blockyaml

# Written by kubectl v1.37 (`kubectl config set-cluster/set-credentials/set-context/use-context`).
KUBECTL_WRITTEN = """\
apiVersion: v1
clusters:
- cluster:
    insecure-skip-tls-verify: true
    server: https://dev.example.com
  name: dev
- cluster:
    certificate-authority-data: ZmFrZS1jYQo=
    server: https://10.0.0.1:6443
    tls-server-name: api.prod
  name: prod
contexts:
- context:
    cluster: dev
    namespace: "123"
    user: tok
  name: ctx with space
- context:
    cluster: prod
    namespace: tao-jobs
    user: eks
  name: prod
- context:
    cluster: dev
    namespace: "yes"
    user: tok
  name: "true"
current-context: prod
kind: Config
preferences: {}
users:
- name: eks
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      args:
      - eks
      - get-token
      - --cluster-name
      - prod
      command: aws
      env:
      - name: AWS_PROFILE
        value: prod
      interactiveMode: IfAvailable
      provideClusterInfo: false
- name: tok
  user:
    token: abc.def
"""

# scripts/local-cluster's own kubeconfig: the sequences indented under their key, a comment, CRLF endings.
INDENTED = (
    "# written by hand\r\napiVersion: v1\r\nclusters:\r\n  - name: local\r\n    cluster:\r\n"
    "      server: https://127.0.0.1:6443\r\ncontexts:\r\n  -   name: local\r\n      context:\r\n"
    "        cluster: local\r\n        namespace: 'tao'\r\ncurrent-context: local\r\nusers: []\r\nextra:\r\n"
)


def ruamel(text: str) -> Any:
    return YAML(typ="safe", pure=True).load(text)


@pytest.mark.parametrize("text", [KUBECTL_WRITTEN, INDENTED], ids=["kubectl", "indented"])
def test_what_kubectl_writes_reads_as_ruamel_reads_it(text: str) -> None:
    data = blockyaml.load(text)
    assert data is not None
    assert data == ruamel(text)


def test_the_kubectl_written_values_keep_their_types() -> None:
    data = blockyaml.load(KUBECTL_WRITTEN)
    assert data["clusters"][0]["cluster"]["insecure-skip-tls-verify"] is True
    assert data["contexts"][0]["context"]["namespace"] == "123"
    assert data["contexts"][2]["name"] == "true"
    assert data["users"][0]["user"]["exec"]["args"][2] == "--cluster-name"
    assert data["preferences"] == {}
    assert blockyaml.load(INDENTED)["extra"] is None


@pytest.mark.parametrize(
    "text",
    [
        "a: {b: c}\n",  # flow mapping with content
        "a: [b]\n",
        "a: &x b\nc: *x\n",  # anchor, alias
        "a: !!str b\n",  # tag
        "a: |\n  b\n",  # block scalar
        "a: >\n  b\n",
        "a: b\n  c\n",  # plain scalar continued
        "- a\n  b\n",
        "a: 1\n",  # numbers, dates, YAML 1.1 booleans
        "a: -1\n",
        "a: .inf\n",
        "a: 2026-12-03\n",
        "a: yes\n",
        "a: b\na: c\n",  # duplicate key
        "a:\n\tb: c\n",  # tab
        "---\na: b\n",  # document marker
        "a: b\n---\nc: d\n",
        "%YAML 1.1\n---\na: b\n",
        "? a\n: b\n",  # complex key
        "a: b: c\n",
        "a: b #c\n",
        "a: 'it''s'\n",  # quote escapes
        'a: "b\\nc"\n',
        "a: 'b\n",
        "null: a\n",  # keys that are not strings
        "1: a\n",
        "a:\n    b: c\n  d: e\n",  # bad indentation
        "- - a\n",
        "just a scalar\n",
        "",
        "\ufeffa: b\n",
    ],
)
def test_anything_else_is_left_to_ruamel(text: str) -> None:
    assert blockyaml.load(text) is None


def test_a_key_without_a_value_and_an_empty_item_are_null() -> None:
    assert blockyaml.load("a:\nb:\n- \n-\n") == {"a": None, "b": [None, None]} == ruamel("a:\nb:\n- \n-\n")


# Strings kubeconfig files hold: names, URLs, base64, paths, words with spaces and YAML-ish characters.
_text = st.text(
    alphabet=st.sampled_from(list("abcXYZ019-_./:@#=+ '\"!&*{}[],%?|>~")) | st.characters(codec="utf-8"),
    min_size=0,
    max_size=12,
)
_leaf = _text | st.none() | st.booleans() | st.integers(-5, 5)
_documents = st.recursive(
    _leaf,
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.from_regex(r"[A-Za-z_][A-Za-z0-9_./-]{0,8}", fullmatch=True), children, max_size=3),
    max_leaves=12,
)


def _dump(data: Any, *, indent: tuple[int, int]) -> str:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.indent(mapping=indent[0], sequence=indent[0] + indent[1], offset=indent[1])
    buffer = io.StringIO()
    yaml.dump(data, buffer)
    return buffer.getvalue()


@settings(max_examples=150, deadline=None)
@given(data=st.dictionaries(st.from_regex(r"[a-z][a-z-]{0,8}", fullmatch=True), _documents, min_size=1, max_size=4),
       indent=st.sampled_from([(2, 0), (2, 2), (4, 2)]))
def test_never_reads_a_document_otherwise_than_ruamel(data: dict[str, Any], indent: tuple[int, int]) -> None:
    text = _dump(data, indent=indent)
    got = blockyaml.load(text)
    if got is not None:
        assert got == ruamel(text)


# Keys and values as kubeconfig files have them (no "- - x": a sequence directly in a sequence is left to ruamel).
_word = st.sampled_from(["a", "dev", "prod-1", "https://10.0.0.1:6443", "ZmFrZS1jYQo=", "/home/me/.kube/ca.crt",
                         "client.authentication.k8s.io/v1beta1", "--cluster-name", "my context", "x#y", "a:b"])
_key = st.sampled_from(["name", "cluster", "context", "server", "user", "args", "exec", "env", "value", "a-b"])
_values = st.recursive(
    _word,
    lambda c: st.lists(_word | st.dictionaries(_key, c, min_size=1, max_size=3), min_size=1, max_size=3)
    | st.dictionaries(_key, c, min_size=1, max_size=3),
    max_leaves=10,
)


@settings(max_examples=100, deadline=None)
@given(data=st.dictionaries(_key, _values, min_size=1, max_size=4), indent=st.sampled_from([(2, 0), (2, 2), (4, 2)]))
def test_reads_block_documents_of_plain_strings_itself(data: dict[str, Any], indent: tuple[int, int]) -> None:
    text = _dump(data, indent=indent)
    assert blockyaml.load(text) == data
