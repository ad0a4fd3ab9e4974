"""quantities.py: Kubernetes quantities."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubectl_tao.core import quantities
from kubectl_tao.core.errors import UsageError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("16Gi", 16 * 2**30),
        ("512Mi", 512 * 2**20),
        ("1Ei", 2**60),
        ("500m", Decimal("0.5")),
        ("100u", Decimal("0.0001")),
        ("3n", Decimal("3e-9")),
        ("1e3", 1000),
        ("1E-3", Decimal("0.001")),
        ("2", 2),
        ("1.5G", 1_500_000_000),
        ("2k", 2000),
        ("+1Ki", 1024),
        ("-1", -1),
        (".5", Decimal("0.5")),
        ("1.", 1),
        ("4T", 4 * 10**12),
    ],
)
def test_parse_quantity(text, expected):
    assert quantities.parse_quantity(text) == Decimal(expected)


def test_parse_quantity_takes_an_int_as_is():
    assert quantities.parse_quantity(8) == 8


@pytest.mark.parametrize("text", ["16GB", "", "Gi", "1.2.3", "1 Gi", "0x10", "1e", "1Ki2", "e3"])
def test_parse_quantity_rejects_malformed_text(text):
    with pytest.raises(UsageError, match="is not a Kubernetes quantity"):
        quantities.parse_quantity(text, "memory")


@pytest.mark.parametrize("value", [True, None, 1.5, [1]])
def test_parse_quantity_rejects_non_strings(value):
    with pytest.raises(UsageError, match="memory must be a Kubernetes quantity string"):
        quantities.parse_quantity(value, "memory")


def test_parse_quantity_rejects_an_exponent_out_of_range():
    with pytest.raises(UsageError, match="out of range"):
        quantities.parse_quantity("1e99999999999", "memory")


@given(st.integers(min_value=0, max_value=10**12), st.sampled_from(["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]))
def test_binary_suffixes_multiply_by_powers_of_1024(number, suffix):
    factor = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}[suffix]
    assert quantities.parse_quantity(f"{number}{suffix}") == number * factor


@pytest.mark.parametrize("text", ["16Gi", "512Mi", "1Ki", "2Ti", "64Ti", "65536Gi"])
def test_binary_quantity_accepts_positive_whole_binary_sizes(text):
    assert quantities.validate_binary_quantity(text, "shm size") == text


@pytest.mark.parametrize("value", ["0Gi", "16G", "1.5Gi", "016Gi", "16", "-1Gi", 16, None, "16gi"])
def test_binary_quantity_rejects_others(value):
    with pytest.raises(UsageError, match=r"^shm size must be a positive whole number with a binary suffix"):
        quantities.validate_binary_quantity(value, "shm size")


@pytest.mark.parametrize("value", ["99999999999999999999Ei", "65Ti", "1Pi", "1Ei", "9" * 400 + "Ki"])
def test_binary_quantity_is_bounded_by_any_node_memory(value):
    with pytest.raises(UsageError, match=r"^shm size is more than 64Ti, more memory than any node has"):
        quantities.validate_binary_quantity(value, "shm size")


def test_quantity_bytes_rounds_up():
    assert quantities.quantity_bytes("1.5Ki") == 1536
    assert quantities.quantity_bytes("500m") == 1
    assert quantities.quantity_bytes("16Gi") == 16 * 2**30
