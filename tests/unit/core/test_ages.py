"""ages.age reads the usual time stamp without strptime and gives what the strptime reading gave."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_tao.core.ages import age, age_text

NOW = datetime(2026, 12, 3, 16, 0, 0, tzinfo=UTC)


def by_strptime(timestamp: str | None) -> str:
    """The reading before the fast form (kept here as the reference)."""
    if not timestamp:
        return "<unknown>"
    try:
        then = datetime.strptime(timestamp.replace("Z", "+0000")[:19] + "+0000", "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        return "<unknown>"
    return age_text((NOW - then).total_seconds())


def test_the_usual_forms() -> None:
    for stamp in ("2026-12-03T15:58:00Z", "2026-12-03T15:58:00.123Z", "2026-12-03T15:58:00+00:00"):
        assert age(stamp, NOW) == by_strptime(stamp) == "2m"
    assert age("2026-12-03T15:59:15.5Z", NOW) == "45s"
    assert age("2026-13-03T15:59:15Z", NOW) == age("garbage", NOW) == age(None, NOW) == "<unknown>"


@settings(max_examples=300, deadline=None)
@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(2026, 12, 3)),
       st.sampled_from(["Z", ".5Z", ".123456Z", "+00:00", "", "x", "Zjunk"]))
def test_agrees_with_strptime_on_real_stamps(when: datetime, tail: str) -> None:
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S") if when.year >= 1000 else f"{when.year:04d}" + when.strftime(
        "-%m-%dT%H:%M:%S")
    assert age(stamp + tail, NOW) == by_strptime(stamp + tail)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789-T:Z.+ ", max_size=26))
def test_agrees_with_strptime_on_anything(text: str) -> None:
    assert age(text, NOW) == by_strptime(text)
