"""What an evidence line tells, read off it: the fact readers the table of causes (diagnosis/causes.py) names.

Each reader takes one line (already cut to ``causes.LINE_CHARS``) and returns the facts it found as a dict
(``{}`` when the line says none of them): torch's out-of-memory sizes, the ranks that joined a store, the
collective that timed out, a kernel's failed assert, the peer a rank lost, the CUDA error a line names. A
``Diagnosis`` carries them in ``facts``; `explain` words them. Pure: text in, a dict out.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kubectl_tao.core.valueclass import Value, record


def rx(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """A pattern over job text. ASCII: ``\\w \\d \\s \\b`` mean what the pod's `grep -E` reads in the C locale
    (restarts/signs.py), whatever script or digits a line holds."""
    return re.compile(pattern, flags | re.ASCII)


_SIZE = r"(\d+(?:\.\d+)? [KMGT]?i?B)"
_OOM_FACTS = (
    ("tried", rx(r"Tried to allocate " + _SIZE)),
    ("gpu", rx(r"\. GPU (\d+) has a total")),
    ("capacity", rx(r"has a total capac\w* of " + _SIZE)),
    ("free", rx(r"of which " + _SIZE + " is free")),
    ("allocated_by_pytorch", rx(r"Of the allocated memory " + _SIZE + " is allocated by PyTorch")),
    ("reserved_unallocated", rx(r"and " + _SIZE + " is reserved by PyTorch but unallocated")),
)
_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "KB": 10**3, "MB": 10**6, "GB": 10**9}


def size_bytes(text: str) -> float | None:
    """``20.00 GiB`` -> bytes; None when it is not a size torch prints."""
    number, _, unit = text.partition(" ")
    try:
        return float(number) * _UNITS[unit]
    except (KeyError, ValueError):
        return None


def oom_facts(line: str) -> dict[str, Any]:
    """torch's out-of-memory message: the sizes it names, the GPU, and whether the memory reserved but unallocated
    would have held the allocation (``fragmented``)."""
    facts: dict[str, Any] = {}
    for key, pattern in _OOM_FACTS:
        m = pattern.search(line)
        if m:
            facts[key] = int(m.group(1)) if key == "gpu" else m.group(1)
    tried, reserved = size_bytes(facts.get("tried", "")), size_bytes(facts.get("reserved_unallocated", ""))
    if tried is not None and reserved is not None:
        facts["fragmented"] = reserved >= tried
    return facts


def first(pattern: re.Pattern[str], key: str, convert: Callable[[str], Any] = str) -> Callable[[str], dict[str, Any]]:
    """A reader of one fact: KEY is PATTERN's first group, converted, where the line matches."""

    def read(line: str) -> dict[str, Any]:
        m = pattern.search(line)
        return {key: convert(m.group(1))} if m else {}

    return read


# A run of digits or word characters at a pattern's start is read from the run's start only (`\b`): a search
# tries every position, and from each one inside a long run the run would be read again to its end.
_CLIENTS_JOINED = rx(r"\b(\d+)/(\d+) clients joined")
_CLIENT_TIMEOUT = rx(r"timed out after (\d+)(ms|s) while trying to connect to \(([^,()]+), (\d+)\)")


def store_facts(line: str) -> dict[str, Any]:
    m = _CLIENTS_JOINED.search(line)
    if m:
        return {"joined": int(m.group(1)), "expected": int(m.group(2))}
    m = _CLIENT_TIMEOUT.search(line)
    if m:
        ms = int(m.group(1)) * (1 if m.group(2) == "ms" else 1000)
        return {"timeout_ms": ms, "master": f"{m.group(3)}:{m.group(4)}"}
    return {}


_WAITED = rx(r"Timed out waiting (\d+)ms for (\w+) operation")
_SEQ_OP = rx(r"SeqNum=(\d+), OpType=(\w+)")
_TIMEOUT_MS = rx(r"Timeout\(ms\)=(\d+)")


def collective_facts(line: str) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    m = _WAITED.search(line)
    if m:
        facts["timeout_ms"], facts["op"] = int(m.group(1)), m.group(2)
    m = _SEQ_OP.search(line)
    if m:
        facts["seq"], facts["op"] = int(m.group(1)), m.group(2)
    m = _TIMEOUT_MS.search(line)
    if m:
        facts["timeout_ms"] = int(m.group(1))
    return facts


_KERNEL_ASSERT = rx(r"\b(\w+): block: \[[\d,]+\], thread: \[[\d,]+\] Assertion `([^`]{1,300})` failed")


def assert_facts(line: str) -> dict[str, Any]:
    m = _KERNEL_ASSERT.search(line)
    return {"kernel_assert": f"{m.group(1)}: {m.group(2)}"} if m else {}


_PEER = rx(r"(?:peer|remote peer|connect to) \[?([A-Za-z0-9_.:-]+?)\]?(?:[:<]\d+>?)")
_POD_INDEX = rx(r"^[a-z0-9-]*?-(\d+)\.")


def peer_facts(line: str) -> dict[str, Any]:
    m = _PEER.search(line)
    if not m:
        return {}
    facts: dict[str, Any] = {"peer": m.group(1)}
    rank = _POD_INDEX.match(m.group(1))  # an Indexed Job pod's name: <job>-<index>.<svc>
    if rank:
        facts["peer_rank"] = int(rank.group(1))
    return facts


@record
class CudaError(Value):
    """One of CUDA's errors, as every API names it: programs print torch's wording (``CUDA error: `` and the
    text), the runtime's name (CuPy, cuda-samples' checks), the driver's (CuPy's driver calls, JAX and XLA,
    Numba) or the text alone (TensorRT's ``Cuda Runtime (...)``, Triton)."""

    code: int  # its value in both enumerations
    runtime: str  # its name in the runtime API's cudaError_t (driver_types.h): cudaGetErrorName
    driver: str  # its name in the driver API's CUresult (cuda.h): cuGetErrorName
    text: str  # cudaGetErrorString and cuGetErrorString


# The CUDA errors the causes name, checked against CUDA's own enumerations (tests/unit/core/test_causes.py).
CUDA_ERRORS: tuple[CudaError, ...] = (
    CudaError(2, "cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"),
    CudaError(100, "cudaErrorNoDevice", "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"),
    CudaError(214, "cudaErrorECCUncorrectable", "CUDA_ERROR_ECC_UNCORRECTABLE", "uncorrectable ECC error encountered"),
    CudaError(700, "cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"),
    CudaError(710, "cudaErrorAssert", "CUDA_ERROR_ASSERT", "device-side assert triggered"),
    CudaError(719, "cudaErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"),
)
CUDA_BY_NAME: dict[str, CudaError] = {name: e for e in CUDA_ERRORS for name in (e.runtime, e.driver)}
_CUDA_NAME = rx(r"\b(cudaError[A-Za-z]{1,40}|CUDA_ERROR_[A-Z_]{1,40})\b")


def cuda_facts(line: str) -> dict[str, Any]:
    """The CUDA error a line names, with its code (``cuda_error``: the runtime's name)."""
    m = _CUDA_NAME.search(line)
    error = CUDA_BY_NAME.get(m.group(1)) if m else None
    return {"cuda_error": error.runtime, "cuda_code": error.code} if error else {}


def merged(*readers: Callable[[str], dict[str, Any]]) -> Callable[[str], dict[str, Any]]:
    """One reader of what READERS read, the first reader's value kept where two read the same key."""

    def read(line: str) -> dict[str, Any]:
        facts: dict[str, Any] = {}
        for reader in readers:
            for key, value in reader(line).items():
                facts.setdefault(key, value)
        return facts

    return read
