"""Go's duration format (time.ParseDuration) as --stall-timeout reads it."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kubectl_tao.core.durations import go_duration_seconds, go_duration_text


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30m", 1800), ("1h30m", 5400), ("90s", 90), ("1.5h", 5400), ("0", 0), ("+20s", 20), ("-5s", -5),
        (".5m", 30), ("1.m", 60), ("1h2m3s", 3723), ("1500ms", Fraction(3, 2)), ("2us", Fraction(2, 10**6)),
        ("2\u00b5s", Fraction(2, 10**6)), ("3ns", Fraction(3, 10**9)),
    ],
)
def test_what_go_reads_is_read_the_same(text: str, seconds: Fraction | int) -> None:
    assert go_duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "1800", "30 m", "m", "1d", "1h 2m", ".m", "-", "5M", "1" * 65 + "s"])
def test_what_go_refuses_is_none(text: str) -> None:
    assert go_duration_seconds(text) is None


def test_whole_seconds_print_as_go_prints_a_duration() -> None:
    assert [go_duration_text(s) for s in (5, 60, 300, 3600, 5400, 604800)] == [
        "5s", "1m0s", "5m0s", "1h0m0s", "1h30m0s", "168h0m0s"]


def test_only_ascii_digits_are_read_as_go_reads_them() -> None:
    assert go_duration_seconds("\u0661\u0660s") is None  # Arabic-Indic digits: Go's parser refuses them
