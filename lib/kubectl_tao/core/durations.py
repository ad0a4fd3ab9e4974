"""Durations written as Go writes them (`time.ParseDuration`: `30m`, `1h30m`, `90s`, `1.5h`), for flags that
take one (--stall-timeout). Pure."""

from __future__ import annotations

import re
from fractions import Fraction

from kubectl_tao.core.errors import UsageError

# Go's units (time.ParseDuration's unitMap): µs written with the micro sign or the Greek mu.
_UNITS = {
    "ns": Fraction(1, 10**9),
    "us": Fraction(1, 10**6),
    "\u00b5s": Fraction(1, 10**6),
    "\u03bcs": Fraction(1, 10**6),
    "ms": Fraction(1, 1000),
    "s": Fraction(1),
    "m": Fraction(60),
    "h": Fraction(3600),
}
# One `[0-9]*(\.[0-9]*)?[a-z]+` element of Go's grammar (a number with at least one digit, then a unit).
_ELEMENT = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)([a-z\u00b5\u03bc]+)")  # one way to read each digit run
_MAX_CHARS = 64


def go_duration_seconds(text: str) -> Fraction | None:
    """TEXT as Go's time.ParseDuration reads it, in seconds (a sign allowed, `0` without a unit), or None when
    Go would refuse it."""
    if not isinstance(text, str) or not text or len(text) > _MAX_CHARS:
        return None
    sign = -1 if text[0] == "-" else 1
    body = text[1:] if text[0] in "+-" else text
    if body == "0":
        return Fraction(0)
    if not body:
        return None
    total, at = Fraction(0), 0
    while at < len(body):
        match = _ELEMENT.match(body, at)
        if match is None or match.group(2) not in _UNITS:
            return None
        total += Fraction(match.group(1)) * _UNITS[match.group(2)]
        at = match.end()
    return sign * total


def go_duration_text(seconds: int) -> str:
    """Whole SECONDS as Go prints a duration: `1h30m0s`, `5m0s`, `20s`."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def whole_seconds(text: object, flag: str, low: int, high: int) -> int:
    """FLAG's value TEXT (a Go duration; `0` = off) as whole seconds, 0 or within LOW..HIGH; UsageError naming
    FLAG and the fix otherwise (never quoting the value)."""
    example = (
        f"give a duration as Go writes one, such as 30m, 1h30m or 90s, {go_duration_text(low)} to "
        f"{go_duration_text(high)} (0 = off)"
    )
    seconds = go_duration_seconds(text) if isinstance(text, str) else None
    if seconds is None:
        raise UsageError(f"{flag}: not a duration: {example}")
    if seconds == 0:
        return 0
    if seconds.denominator != 1:
        raise UsageError(f"{flag}: not a whole number of seconds: {example}")
    if not low <= seconds <= high:
        raise UsageError(f"{flag}: {'below' if seconds < low else 'above'} the range: {example}")
    return int(seconds)
