"""core/sanitize.py: text from the cluster, records and logs cannot drive the terminal (issue 26, item 1)."""

from __future__ import annotations

import json
import re
import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_tao.core.sanitize import _FORMAT, SEQUENCE_RE, cap, sanitize

# What a terminal acts on instead of showing: none of it may reach the output.
C0 = {chr(c) for c in range(0x20)} | {"\x7f"}
C1 = {chr(c) for c in range(0x80, 0xA0)}
JOINERS = {"\u200c", "\u200d"}  # kept: scripts and emoji need them


def acted_on(text: str, *, multiline: bool) -> list[str]:
    kept = {"\n", "\t"} if multiline else set()
    return [
        ch for ch in text
        if (ch in C0 and ch not in kept) or ch in C1 or ch in "\u2028\u2029"
        or (unicodedata.category(ch) in ("Cf", "Cs") and ch not in JOINERS)
    ]


def test_the_format_list_is_every_invisible_format_character_but_the_joiners() -> None:
    listed = re.compile(f"[{_FORMAT}]")
    for code in range(sys.maxunicode + 1):
        ch = chr(code)
        if unicodedata.category(ch) == "Cf":
            assert bool(listed.fullmatch(ch)) == (ch not in JOINERS), f"U+{code:04X}"
        else:
            assert not listed.fullmatch(ch), f"U+{code:04X} is listed but is not a format character"


# The reproductions of the attack pass: each is what a pod message or a log line held.
ATTACKS = {
    "window title": ("build \x1b]0;pwned\x07done", "build done"),
    "window title, ST": ("a\x1b]2;pwned\x1b\\b", "ab"),
    "hidden hyperlink": ("see \x1b]8;;https://evil.example/\x1b\\docs.nvidia.com\x1b]8;;\x1b\\ now",
                         "see docs.nvidia.com now"),
    "erase the line above and fake a result": ("OOM\x1b[1A\x1b[2K\rkubectl-tao: job COMPLETE",
                                               "OOM\\rkubectl-tao: job COMPLETE"),
    "invisible text": ("\x1b[8msecret note\x1b[0m visible", "secret note visible"),
    "C1 CSI": ("red \x9b31mtext\x9b0m", "red \\u009b31mtext\\u009b0m"),
    "C1 OSC": ("a\x9d0;title\x9cb", "a\\u009d0;title\\u009cb"),
    "lone C1 and NUL": ("a\x85b\x00c", "a\\u0085b\\u0000c"),
    "bidi override": ("file\u202egpj.exe", "file\\u202egpj.exe"),
    "bidi isolate": ("x\u2066y\u2069z", "x\\u2066y\\u2069z"),
    "DCS string": ("a\x1bP1$r0m\x1b\\b", "ab"),
    "APC string": ("a\x1b_payload\x1b\\b", "ab"),
    "short sequences": ("a\x1bcb\x1b7c\x1b(Bd", "abcd"),
    "unterminated OSC shows its text": ("a\x1b]0;rest", "a\\u001b]0;rest"),
    "a sequence made by removing another is escaped": ("\x1b\x1b[0m[31mred", "\\u001b[31mred"),
    "a tag character, as JSON escapes it": ("flag\U000e0041", "flag\\udb40\\udc41"),
}


@pytest.mark.parametrize("name", ATTACKS)
def test_each_reproduction_is_neutralized(name: str) -> None:
    text, shown = ATTACKS[name]
    assert sanitize(text) == shown
    assert acted_on(sanitize(text), multiline=False) == []
    assert acted_on(sanitize(text, multiline=True), multiline=True) == []


def test_single_line_escapes_line_breaks_and_turns_tabs_into_spaces() -> None:
    assert sanitize("a\nb\r\nc\td") == "a\\nb\\r\\nc d"


def test_multiline_keeps_lines_and_tabs_and_makes_a_carriage_return_a_line_break() -> None:
    assert sanitize("a\nb\r\nc\td", multiline=True) == "a\nb\nc\td"
    assert sanitize("50%\r100%", multiline=True) == "50%\n100%"  # nothing overwrites the start of a line


def test_printable_text_of_any_script_is_unchanged() -> None:
    text = "Température 21°C, 東京, Ελληνικά, עברית, emoji 👩‍👩‍👧 ok"
    assert sanitize(text) is text
    assert sanitize(text, multiline=True) is text


def test_cap_says_how_much_was_left_out() -> None:
    assert cap("abcdef", 6) == "abcdef"
    assert cap("abcdefgh", 3) == "abc... [5 more characters]"
    with pytest.raises(ValueError, match="limit"):
        cap("x", -1)


HOSTILE = st.lists(
    st.one_of(
        st.characters(),
        st.sampled_from(["\x1b", "\x1b[", "\x1b]", "\x1b]8;;", "\x9b", "\x9d", "\x07", "\x1b\\", "\r", "\n", "\t",
                         "\u202e", "\u2066", "\u200b", "\ufeff", "\U000e0041", "\x00", "\x7f", "\x85", "31m", ";"]),
    ),
    max_size=80,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(HOSTILE, st.booleans())
def test_nothing_a_terminal_acts_on_survives(text: str, multiline: bool) -> None:
    out = sanitize(text, multiline=multiline)
    assert acted_on(out, multiline=multiline) == []
    assert SEQUENCE_RE.search(out) is None
    assert "\x1b" not in out


@settings(max_examples=300, deadline=None)
@given(HOSTILE, st.booleans())
def test_sanitizing_twice_changes_nothing_more(text: str, multiline: bool) -> None:
    once = sanitize(text, multiline=multiline)
    assert sanitize(once, multiline=multiline) == once


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Zl", "Zp")), max_size=200))
def test_text_without_controls_is_returned_as_it_is(text: str) -> None:
    assert sanitize(text) == text
    assert sanitize(text, multiline=True) == text


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=5), HOSTILE, max_size=4))
def test_json_text_stays_valid_and_equal_once_sanitized(data: dict[str, str]) -> None:
    """JSON written with its non-ASCII characters raw (render's -o json) means the same after the output layer."""
    text = json.dumps(data, ensure_ascii=False, indent=2)
    assert json.loads(sanitize(text, multiline=True)) == data
