"""Env-files as kubectl create secret --from-env-file reads them (kubectl_tao.core.envfile)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_tao.core.envfile import map_legacy_s3_names, parse_env_file, to_env_file
from kubectl_tao.core.errors import UsageError


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        pytest.param(
            "# credentials\n\nAWS_ACCESS_KEY_ID=AKIA0\n   HF_TOKEN=hf_x\nEMPTY=\nURL=https://h/?a=b=c\n",
            {"AWS_ACCESS_KEY_ID": "AKIA0", "HF_TOKEN": "hf_x", "EMPTY": "", "URL": "https://h/?a=b=c"},
            id="keys values comments and blank lines",
        ),
        pytest.param(
            "Q=\"quoted\"\nS='single'\nT=trailing  \nH=a # not a comment\nE=a\\nb\n",
            {"Q": '"quoted"', "S": "'single'", "T": "trailing  ", "H": "a # not a comment", "E": "a\\nb"},
            id="values kept verbatim like kubectl",
        ),
    ],
)
def test_parses_keys_and_values_as_kubectl_does(text: str, parsed: dict[str, str]) -> None:
    assert parse_env_file(text) == parsed


def test_bom_crlf_and_export_prefix_are_tolerated() -> None:
    assert parse_env_file("\ufeffA=1\r\nexport B=2\r\nexport\tC=3\n") == {"A": "1", "B": "2", "C": "3"}


def test_bytes_input_is_decoded_as_utf8() -> None:
    assert parse_env_file("NAME=café\n".encode()) == {"NAME": "café"}


def test_keys_order_is_file_order() -> None:
    assert list(parse_env_file("Z=1\nA=2\nM=3\n")) == ["Z", "A", "M"]


_BAD_NAME = "is not a valid variable name: use letters, digits and '_', not starting with a digit, no spaces around '='"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "A=1\nhunter2\n",
            "creds.env:2: env-file line has no '=': write KEY=VALUE (values are never read from the environment)",
        ),
        ("1BAD=x\n", f"creds.env:1: the key (it starts with a digit) {_BAD_NAME}"),
        ("A B=x\n", f"creds.env:1: the key (character 2 (a space)) {_BAD_NAME}"),
        ("KEY =x\n", f"creds.env:1: the key (character 4 (a space)) {_BAD_NAME}"),
        ("my.key=x\n", f"creds.env:1: the key (character 3 ('.')) {_BAD_NAME}"),
        ("A=1\nB=2\nA=3\n", "creds.env:3: the key is set twice (first on line 1); keep one"),
        ("A=1\nB=x\x00y\n", "creds.env:2: env-file line contains a NUL byte; remove it"),
    ],
)
def test_bad_lines_are_refused_naming_the_line(text: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_env_file(text, "creds.env")
    assert str(info.value) == message
    assert info.value.exit_code == 2


def test_non_utf8_bytes_are_refused_naming_the_line() -> None:
    with pytest.raises(UsageError, match=r"^creds.env:2: env-file line is not valid UTF-8; save the file as UTF-8$"):
        parse_env_file(b"A=1\nB=\xff\xfe\n", "creds.env")


def test_surrogate_escaped_text_is_refused_naming_the_line() -> None:
    text = b"A=1\nB=\xff\n".decode("utf-8", errors="surrogateescape")
    with pytest.raises(UsageError, match=r"^env-file:2: env-file line is not valid UTF-8"):
        parse_env_file(text)


def test_errors_never_echo_values() -> None:
    token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    for text in (f"TOKEN=ok\n{token}\n", f"{token}-x=1\n", f"user:{token}=1\n"):
        with pytest.raises(UsageError) as info:
            parse_env_file(text)
        assert token not in str(info.value)


def test_to_env_file_writes_one_line_per_key() -> None:
    assert to_env_file({"A": "1", "B": "", "C": "x=y \"q\""}) == 'A=1\nB=\nC=x=y "q"\n'
    assert to_env_file({}) == ""


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        (
            {"PEM": "line1\nline2"},
            "PEM: value contains a line break, which an env-file cannot carry (kubectl would split it into "
            "two keys); store it with --from-file instead",
        ),
        ({"R": "a\rb"}, "R: value contains a line break"),
        ({"N": "a\x00b"}, "N: value contains a NUL byte; remove it"),
        ({"bad-key": "v"}, "the key (character 4 ('-')) is not a valid variable name for an env-file"),
        ({"K": 5}, "K: env-file values must be strings"),
    ],
)
def test_to_env_file_refuses_what_kubectl_would_mangle(mapping: dict, message: str) -> None:
    with pytest.raises(UsageError) as info:
        to_env_file(mapping)
    assert str(info.value).startswith(message)


_KEYS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True)
_VALUES = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r\x00"), max_size=40)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_KEYS, _VALUES, max_size=8))
def test_round_trip_through_an_env_file(mapping: dict[str, str]) -> None:
    text = to_env_file(mapping)
    parsed = parse_env_file(text)
    # kubectl (and parse_env_file) drop leading whitespace of a line, never of a value after '='.
    assert parsed == mapping


def test_legacy_s3_names_are_mapped() -> None:
    legacy = {"ACCESS_KEY": "id", "SECRET_KEY": "sk", "S3_ENDPOINT_URL": "https://s3", "CLOUD_REGION": "us-1", "X": "1"}
    assert map_legacy_s3_names(legacy) == {
        "AWS_ACCESS_KEY_ID": "id",
        "AWS_SECRET_ACCESS_KEY": "sk",
        "S3_ENDPOINT_URL": "https://s3",
        "AWS_ENDPOINT_URL": "https://s3",
        "AWS_DEFAULT_REGION": "us-1",
        "X": "1",
    }
    assert legacy["ACCESS_KEY"] == "id"  # the input is not changed


def test_modern_endpoint_name_also_sets_the_s3_name() -> None:
    assert map_legacy_s3_names({"AWS_ENDPOINT_URL": "https://e"}) == {
        "AWS_ENDPOINT_URL": "https://e",
        "S3_ENDPOINT_URL": "https://e",
    }


def test_legacy_and_modern_with_the_same_value_agree() -> None:
    assert map_legacy_s3_names({"ACCESS_KEY": "a", "AWS_ACCESS_KEY_ID": "a"}) == {"AWS_ACCESS_KEY_ID": "a"}


def test_legacy_and_modern_with_different_values_are_refused() -> None:
    with pytest.raises(UsageError) as info:
        map_legacy_s3_names({"SECRET_KEY": "one", "AWS_SECRET_ACCESS_KEY": "two"})
    assert str(info.value) == (
        "both SECRET_KEY and AWS_SECRET_ACCESS_KEY are set, with different values; keep only AWS_SECRET_ACCESS_KEY"
    )
