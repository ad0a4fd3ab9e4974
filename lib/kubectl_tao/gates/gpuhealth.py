"""Which GPU nodes say their GPUs are unhealthy: the signal list and its judge (pure).

A node whose GPU reported an Xid or an uncorrectable ECC error stays Ready and schedulable unless some tool
cordons or taints it, so the scheduler keeps choosing it. The tools that watch GPUs leave one of these marks
(docs/placement.md says where each comes from):

- a node condition: GKE's `XidCriticalError`, NVSentinel's syslog checks `SysLogsXIDError`, `SysLogsSXIDError`
  and `SysLogsGPUFallenOff` (status True = unhealthy), the EKS node monitoring agent's `AcceleratedHardwareReady`
  (status False = unhealthy);
- a taint whose key the user names (NVSentinel's taints are user-configured, there is no fixed key);
- the device plugin's own mark: allocatable nvidia.com/gpu below capacity (it withdrew the GPUs it found
  unhealthy, k8s-device-plugin's health checks).

More signals come from the KUBECTL_TAO_GPU_HEALTH_SIGNALS setting (`parse_signals`): `condition:TYPE`,
`condition:TYPE=False`, `taint:KEY`, comma-separated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubectl_tao.core.errors import UsageError
from kubectl_tao.core.valueclass import Value, plain, record

SETTING = "KUBECTL_TAO_GPU_HEALTH_SIGNALS"
CONDITION, TAINT, ALLOCATABLE = "condition", "taint", "allocatable"


@record(frozen=True)
class Signal(Value):
    """One mark a node can carry: a condition TYPE at status BAD, or a taint KEY."""

    kind: str  # CONDITION | TAINT
    name: str
    bad: str = "True"  # the condition status that means unhealthy


# Condition type -> the status that means "unhealthy".
DEFAULT_SIGNALS: tuple[Signal, ...] = (
    Signal(CONDITION, "XidCriticalError"),  # GKE GPU node health (name not found in public GKE docs: docs/placement.md)
    Signal(CONDITION, "SysLogsXIDError"),  # NVSentinel syslog-health-monitor
    Signal(CONDITION, "SysLogsSXIDError"),  # NVSentinel syslog-health-monitor (NVSwitch)
    Signal(CONDITION, "SysLogsGPUFallenOff"),  # NVSentinel syslog-health-monitor
    Signal(CONDITION, "AcceleratedHardwareReady", "False"),  # EKS node monitoring agent
)


@record(frozen=True)
class Unhealthy(Value):
    """Why a node is left out: the signal's name, its kind and since when (a timestamp, '' when unknown)."""

    signal: str
    kind: str
    since: str = ""
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return plain(self)


def parse_signals(text: str | None) -> tuple[Signal, ...]:
    """The signals of the setting's value (DEFAULT_SIGNALS plus these); UsageError for an entry it cannot read."""
    added: list[Signal] = []
    for raw in (text or "").split(","):
        entry = raw.strip()
        if not entry:
            continue
        kind, _, rest = entry.partition(":")
        name, _, bad = rest.partition("=")
        name, bad = name.strip(), bad.strip() or "True"
        if kind not in (CONDITION, TAINT) or not name or (kind == TAINT and "=" in rest) or bad not in (
            "True", "False", "Unknown"
        ):
            raise UsageError(
                f"{SETTING}: cannot read {entry!r}; use condition:TYPE, condition:TYPE=False or taint:KEY, "
                "comma-separated"
            )
        added.append(Signal(kind, name, bad))
    return DEFAULT_SIGNALS + tuple(added)


def judge(
    conditions: Iterable[Mapping[str, Any]],
    taints: Iterable[Mapping[str, Any]],
    allocatable: int,
    capacity: int | None,
    signals: Sequence[Signal] = DEFAULT_SIGNALS,
) -> list[Unhealthy]:
    """Every unhealthy mark of one node, in the order: conditions, taints, allocatable < capacity."""
    wanted = {s.name: s.bad for s in signals if s.kind == CONDITION}
    taint_keys = {s.name for s in signals if s.kind == TAINT}
    found: list[Unhealthy] = []
    for condition in conditions:
        kind = str(condition.get("type") or "")
        if kind in wanted and condition.get("status") == wanted[kind]:
            found.append(Unhealthy(kind, CONDITION, str(condition.get("lastTransitionTime") or ""),
                                   str(condition.get("reason") or "")))
    for taint in taints:
        key = str(taint.get("key") or "")
        if key in taint_keys:
            found.append(Unhealthy(key, TAINT, str(taint.get("timeAdded") or ""), str(taint.get("effect") or "")))
    if capacity is not None and allocatable < capacity:
        found.append(Unhealthy(ALLOCATABLE, ALLOCATABLE, "", f"{capacity - allocatable} of {capacity}"))
    return found


def condition_types(signals: Sequence[Signal]) -> frozenset[str]:
    """The condition types worth keeping when a node is reduced to what the gate reads."""
    return frozenset(s.name for s in signals if s.kind == CONDITION)


def taint_keys(signals: Sequence[Signal]) -> frozenset[str]:
    """The taint keys that mark a node unhealthy."""
    return frozenset(s.name for s in signals if s.kind == TAINT)


def text(mark: Unhealthy, age: str = "") -> str:
    """`XidCriticalError since 10m`, `taint KEY`, `2 of 8 GPUs unhealthy (device plugin)`."""
    if mark.kind == ALLOCATABLE:
        return f"{mark.detail} GPUs unhealthy (device plugin)"
    name = f"taint {mark.signal}" if mark.kind == TAINT else mark.signal
    return f"{name} since {age}" if age and age != "<unknown>" else name
