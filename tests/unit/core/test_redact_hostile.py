"""The redactor against hostile text (issue 26, item 2): it sees through what a terminal hides, and its work per
character is bounded whatever a line holds (counted here; the times are bench/run.py's `redaction` phase)."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_tao.core import redact
from kubectl_tao.core.redact import (
    OVERLAP,
    REDACTED,
    WINDOW,
    find_in_text,
    redact_log_line,
    redact_text,
    windows,
)
from kubectl_tao.core.sanitize import SEQUENCE_RE, sanitize

# Fake tokens of the formats the attack pass hid behind colour codes.
TOKENS = {
    "hf": "hf_" + "FakeCanaryHf0123456789abcdefghijkl",
    "github": "ghp_" + "FakeCanaryGh0123456789abcdefghijklmn",
    "ngc": "nvapi-" + "FakeCanaryNgc0123456789abcdefghijklmnopqrs",
    "aws": "AKIA" + "FAKECANARY012345",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJGYWtlQ2FuYXJ5In0.FakeCanarySig0123456789",
    "slack": "xoxb-" + "1234567890-FakeCanarySlack",
    "gitlab": "glpat-" + "FakeCanaryGl0123456789",
}
# What a terminal shows nothing of, raw and as JSON, Python or a shell escape it.
HIDDEN = [
    "\x1b[32m", "\x1b[0m", "\x1b[1;31m", "\x1b[8m", "\x9b1m", "\x1b]0;title\x07", "\x1b]8;;https://x.example/\x1b\\",
    "\x1b_apc\x1b\\", "\x00", "\x7f", "\u200b", "\u200d", "\u202e", "\u2066", "\ufeff", "\u00ad", "\ufe0f", "\u034f",
    "\U000e0101", "\u3164",
    "\\u001b[32m", "\\u001B[0m", "\\x1b[0m", "\\033[1m", "\\e[0m",
]
_ESCAPED_CSI = re.compile(r"(?:\\u001[bB]|\\x1[bB]|\\033|\\e)\[[0-?]*[ -/]*[@-~]")
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u034f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\u3164\ufe00-\ufe0f"
    "\ufeff\U000e0100-\U000e01ef]"
)


def shown(text: str) -> str:
    """What a terminal shows of TEXT (escaped sequences as a viewer of a JSON log would skip them)."""
    return _INVISIBLE.sub("", _ESCAPED_CSI.sub("", SEQUENCE_RE.sub("", text)))


@pytest.mark.parametrize("kind", TOKENS)
@pytest.mark.parametrize("colour", ["\x1b[32m", "\\u001b[32m", "\x9b32m", "\u200b"])
def test_a_colour_code_glued_to_a_token_does_not_hide_it(kind: str, colour: str) -> None:
    line = f"INFO {colour}{TOKENS[kind]}\x1b[0m done"
    for redactor in (redact_text, redact_log_line):
        out = redactor(line)
        assert TOKENS[kind] not in shown(out)
        assert REDACTED in out and out.startswith("INFO ") and out.endswith(" done")
    assert find_in_text(line), kind


def test_a_name_split_by_sequences_is_still_a_name() -> None:
    out = redact_log_line("export HF_TO\x1b[0mKEN=Tr0ub4dorFakeCanary")
    assert "Tr0ub4dor" not in out and REDACTED in out


def test_an_escaped_line_break_in_a_json_log_line_starts_a_name() -> None:
    line = '{"msg": "config dump\\nHF_TOKEN=Tr0ub4dorFakeCanary\\tNGC_API_KEY=FakeCanaryNgc42"}'
    out = redact_log_line(line)
    assert "Tr0ub4dor" not in out and "FakeCanaryNgc42" not in out
    assert out.startswith('{"msg": "config dump\\nHF_TOKEN=')


def test_what_is_not_a_credential_keeps_its_sequences() -> None:
    line = "\x1b[32mepoch 3\x1b[0m loss=0.12 \\u001b[1mok\\u001b[0m"
    assert redact_log_line(line) == line


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(sorted(TOKENS)),
    cuts=st.lists(st.tuples(st.integers(0, 80), st.sampled_from(HIDDEN)), max_size=6),
    before=st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40),
    after=st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40),
)
def test_no_token_survives_any_interleaving_of_sequences(
    kind: str, cuts: list[tuple[int, str]], before: str, after: str
) -> None:
    token = TOKENS[kind]
    pieces = {min(position, len(token)): sequence for position, sequence in cuts}  # between the token's characters
    hidden = "".join(pieces.get(i, "") + ch for i, ch in enumerate(token)) + pieces.get(len(token), "")
    line = f"{before} {hidden} {after}"
    out = redact_log_line(line)
    assert token not in shown(out)
    assert token not in shown(sanitize(out, multiline=True))


def test_windows_cover_a_long_line_with_bounded_overlapping_pieces() -> None:
    for length in (WINDOW + 1, 3 * WINDOW + 17, 1_000_000):
        spans = windows(length)
        assert spans[0][0] == 0 and spans[-1][1] == length
        assert all(end - start <= WINDOW for start, end in spans)
        assert all(b_start <= a_end - OVERLAP for (_, a_end), (b_start, _) in itertools.pairwise(spans))
        assert len(spans) <= length // (WINDOW - OVERLAP) + 1


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every text the rules run over at once (the unit of work of the redactor)."""
    sizes: list[int] = []
    real = redact._hits_in

    def counting(text: str, **kwargs: object) -> list[object]:
        sizes.append(len(text))
        return real(text, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(redact, "_hits_in", counting)
    return sizes


@pytest.mark.parametrize("unit", ["curl -H a: ", "a:", "password: x ", "-Da.", "x=$(", "<<E xoxb- \"a\": \""])
def test_the_work_per_character_is_bounded_whatever_a_line_holds(counted: list[int], unit: str) -> None:
    """Every long line is read in windows: no run of the rules sees more than WINDOW characters of it, and all
    runs together see the line about twice (the windows' overlap, and the rest of the text with it blanked)."""
    line = unit * (400_000 // len(unit))
    redact_log_line(line + " " + TOKENS["hf"])
    windows_seen = [size for size in counted if size != len(line) + 1 + len(TOKENS["hf"])]
    assert max(windows_seen) <= WINDOW
    assert sum(counted) <= 2.5 * len(line)


def test_a_token_across_a_window_edge_is_found(counted: list[int]) -> None:
    token = TOKENS["github"]
    for offset in (WINDOW - 10, WINDOW - OVERLAP + 3, 2 * (WINDOW - OVERLAP) - 5):
        line = "x" * offset + " " + token + " " + "y " * 20_000
        assert token not in redact_log_line(line), offset


def test_a_named_value_across_a_window_edge_is_redacted_whole() -> None:
    value = "Tr0ub4dorFakeCanary" * 20
    line = "w " * (WINDOW // 2 - 40) + f"HF_TOKEN={value} " + "z " * 20_000
    out = redact_log_line(line)
    assert "Tr0ub4dor" not in out


def test_the_view_tries_the_hidden_text_pattern_only_where_a_piece_can_start() -> None:
    """One pass of a class finds where a hidden piece can start; the pieces are those a search from every
    character finds."""
    text = " x ".join([*HIDDEN, "%3D", "%2f", "%zz", "\\n", "\\\n", "\\q", "\\u0022", "\\x3d", "\x1b]8;;u\x07"])
    assert [(m.span(), m.groups()) for m in redact._hidden(text)] == [
        (m.span(), m.groups()) for m in redact._HIDDEN_RE.finditer(text)
    ]


def test_a_long_line_of_blanks_is_read_by_no_rule() -> None:
    assert redact._hits_in(" \t" * WINDOW, loose=True, depth=0, inline=True) == []
    assert redact_log_line("\u2003" * (2 * WINDOW) + " " + TOKENS["hf"]).endswith(REDACTED)


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ('curl -H "X-Api-Key: s3cr3tV4lue  " https://x', f'curl -H "X-Api-Key: {REDACTED}  " https://x'),
        ("curl -H X-Api-Key:s3cr3tV4lue; echo done", f"curl -H X-Api-Key:{REDACTED}; echo done"),
        ("curl --header='Private-Token: s3cr3tV4lue' x", f"curl --header='Private-Token: {REDACTED}' x"),
        # an unquoted value that runs into a quote is none, but a flag right before the quote opens a quoted one
        ('curl -H X-A:b,-H="X-Token: s3cr3tV4lue" https://x', f'curl -H X-A:b,-H="X-Token: {REDACTED}" https://x'),
        ('curl -H "X-Api-Key:   " https://x', 'curl -H "X-Api-Key:   " https://x'),  # a blank value is none
    ],
)
def test_a_header_flag_value_is_read_to_its_end(text: str, redacted: str) -> None:
    assert redact_text(text) == redacted


def test_header_flags_glued_in_one_value_are_read_with_it() -> None:
    """Flags glued into one unquoted value that runs into a quote (each would read to that quote): none is a
    value, and a header after them still is."""
    glued = "-H=X-Auth-Token:x," * 300 + "'"
    text = glued + ' -H "X-Api-Key: s3cr3tV4lue"'
    assert redact_text(text) == glued + f' -H "X-Api-Key: {REDACTED}"'


def test_a_token_split_after_a_run_of_glued_prefixes_is_found() -> None:
    tail = TOKENS["hf"][len("hf_") :]
    text = "model-" + "hf_" * 80 + tail[:12] + "\n   " + tail[12:] + " done"
    out = redact_text(text)
    assert tail[:12] not in out and tail[12:] not in out and out.endswith(" done")


def test_real_failure_texts_print_as_they_are_but_their_credentials() -> None:
    """Every line of the failure-text corpus (real torch, NCCL and driver output) as `logs` prints it: unchanged,
    except the credential a marked case echoes (and a NUL byte one real bus-error log holds, shown escaped)."""
    import json
    from pathlib import Path

    corpus_dir = Path(__file__).resolve().parents[2] / "fixtures" / "failures"
    entries = json.loads((corpus_dir / "corpus.json").read_text(encoding="utf-8"))
    entries = entries if isinstance(entries, list) else entries["entries"]
    lines = changed = 0
    for entry in (e for e in entries if "file" in e):
        for line in (corpus_dir / entry["file"]).read_text(encoding="utf-8").splitlines():
            lines += 1
            shown = sanitize(redact_log_line(line), multiline=True)
            if entry.get("contains_credential") and "FakeCanary" in line:
                assert "FakeCanary" not in shown and REDACTED in shown
                changed += 1
            else:
                assert shown == line.replace("\x00", "\\u0000"), (entry["file"], line)
    assert lines > 1000 and changed >= 1
