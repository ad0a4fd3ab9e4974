"""Kubernetes resource quantities (`16Gi`, `500m`, `1e3`, `2`) as exact numbers."""

from __future__ import annotations

import math
import re
from decimal import ROUND_CEILING, Decimal, localcontext
from typing import Any

from kubectl_tao.core.errors import UsageError

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
# The grammar of k8s.io/apimachinery/pkg/api/resource: a signed decimal number, then a binary
# suffix, a decimal suffix, or a decimal exponent (e/E followed by a signed integer).
_QUANTITY_RE = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exponent>[eE][+-]?[0-9]+)|(?P<decimal>[numkMGTPE]?))"
)
# What a size limit such as /dev/shm accepts here: a positive whole number of Ki..Ei, at most MAX_BINARY_SIZE.
_BINARY_SIZE_RE = re.compile(r"[1-9][0-9]*(?:Ki|Mi|Gi|Ti|Pi|Ei)")
MAX_BINARY_SIZE = 64 * _BINARY["Ti"]  # more memory than any node has: a larger size is a typing slip


def parse_quantity(value: object, field: str = "quantity") -> Decimal:
    """The exact value of a Kubernetes quantity string (an int is taken as a plain number)."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise UsageError(f"{field} must be a Kubernetes quantity string such as 16Gi or 500m")
    if isinstance(value, int):
        return Decimal(value)
    match = _QUANTITY_RE.fullmatch(value)
    if match is None:
        raise UsageError(f"{field} {value!r} is not a Kubernetes quantity (examples: 16Gi, 500m, 2, 1e3)")
    try:
        with localcontext() as context:
            context.prec = len(match["number"]) + 40  # exact: no digit of the number is rounded away
            number = Decimal(match["number"])
            if match["binary"]:
                return number * _BINARY[match["binary"]]
            if match["exponent"]:
                return number.scaleb(int(match["exponent"][1:]))
            return number * _DECIMAL[match["decimal"] or ""]
    except (ArithmeticError, ValueError) as exc:  # exponent out of range
        raise UsageError(f"{field} {value!r} is out of range for a Kubernetes quantity") from exc


def validate_binary_quantity(value: object, field: str = "shm size") -> str:
    """A positive whole number with a binary suffix (Ki, Mi, Gi, Ti, Pi, Ei), e.g. 16Gi, at most 64Ti."""
    if not isinstance(value, str) or _BINARY_SIZE_RE.fullmatch(value) is None:
        raise UsageError(
            f"{field} must be a positive whole number with a binary suffix Ki, Mi, Gi, Ti, Pi "
            "or Ei (for example 16Gi)"
        )
    if len(value) > 24 or int(value[:-2]) * _BINARY[value[-2:]] > MAX_BINARY_SIZE:
        raise UsageError(f"{field} is more than 64Ti, more memory than any node has: give a size such as 16Gi")
    return value


def quantity_bytes(value: str, field: str = "quantity") -> int:
    """A byte count (rounded up, as Kubernetes does for memory) from a quantity string."""
    number = parse_quantity(value, field)
    return int(number.to_integral_value(rounding="ROUND_CEILING"))


MAX_COUNT = 2**63 - 1  # Kubernetes keeps a resource count in an int64: no node or pod has more
_MAX_COUNT_TEXT = 64  # characters: more than any spelling of a count up to MAX_COUNT takes


def gpu_quantity(value: Any) -> int:
    """A whole count from a Kubernetes quantity ("8", 8, "1k", "2000m"). Malformed, missing, or past MAX_COUNT
    (count_problem says why) -> 0.

    Extended resources such as nvidia.com/gpu only take whole numbers (the API server rejects fractions),
    so a fraction here can only be a hand-written fixture; it is rounded up, as a request would be.
    """
    count = _count(value)
    return count if count <= MAX_COUNT else 0


def count_problem(value: Any) -> str | None:
    """Why VALUE, a resource count as an answer holds it (a string or a number), is one no API server sends: of
    another type, longer than any count, or past MAX_COUNT. None when it reads (a malformed string reads as 0)."""
    if value is None or (type(value) is str and len(value) <= 18 and value.isdigit()):
        return None  # nearly every count: "8"
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        kinds = {bool: "true or false", list: "a list", dict: "an object"}
        return f"{next((n for t, n in kinds.items() if isinstance(value, t)), 'a value')}, not a quantity"
    if isinstance(value, str) and len(value) > _MAX_COUNT_TEXT:
        return f"a quantity of {len(value)} characters, longer than any count"
    if isinstance(value, float) and not math.isfinite(value):
        return "not a number" if math.isnan(value) else "a number past any count"
    return f"a count past {MAX_COUNT}" if _count(value) > MAX_COUNT else None


def _count(value: Any) -> int:
    """gpu_quantity without the upper bound (MAX_COUNT + 1 for any count past it that is costly to build)."""
    if isinstance(value, bool) or value is None:
        return 0
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, float):
        if math.isnan(value):
            return 0
        return max(math.ceil(value), 0) if math.isfinite(value) else MAX_COUNT + 1
    if not isinstance(value, str) or len(value) > _MAX_COUNT_TEXT:
        return 0 if not isinstance(value, str) else MAX_COUNT + 1
    if value.isascii() and value.strip().isdigit():
        return int(value)  # "8", what the API server sends: no Decimal needed (the fit gate reads thousands)
    try:
        number = parse_quantity(value.strip())
    except UsageError:
        return 0
    if number <= 0:
        return 0
    if number.adjusted() > 19:  # past MAX_COUNT: never turned into a huge int
        return MAX_COUNT + 1
    return max(int(number.to_integral_value(rounding=ROUND_CEILING)), 0)

