"""Flag values read the same way by every verb: KEY=VALUE lists, `--toleration KEY[=VALUE][:EFFECT]`, and the
checks of a toleration and of a bounded whole number. Kept apart from the renderer so that `fit` reads its flags
without loading the manifest code (manifests/render.py, which imports the retry rules and their patterns)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubectl_tao.core import contract, names
from kubectl_tao.core.errors import UsageError

# The bounds of a job's shape, the same for submit, render and fit: GPUs per node (rank) and nodes (ranks).
MAX_GPUS_PER_NODE = 64
MAX_NODES = 1024
_TOLERATION_KEYS = {"key", "operator", "value", "effect", "tolerationSeconds"}
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def int_in(value: object, field_name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        shown = value if isinstance(value, int) and not isinstance(value, bool) else type(value).__name__
        raise UsageError(f"{field_name} must be a whole number from {low} to {high}, got {shown}")
    return value


def check_shape(gpus: object, nodes: object) -> None:
    """--gpus and --nodes within the bounds every verb applies (UsageError naming the flag)."""
    int_in(gpus, "--gpus", 0, MAX_GPUS_PER_NODE)
    int_in(nodes, "--nodes", 1, MAX_NODES)


def check_toleration(toleration: Mapping[str, Any], index: int) -> None:
    where = f"toleration {index}"
    unknown = set(toleration) - _TOLERATION_KEYS
    if unknown:
        raise UsageError(f"{where} has unknown fields {sorted(unknown)}; use key, operator, value, effect")
    operator = toleration.get("operator", "Equal")
    if operator not in ("Equal", "Exists"):
        raise UsageError(f"{where} operator must be Equal or Exists")
    key = toleration.get("key", "")
    if key:
        names.validate_qualified_name(key, f"{where} key")
    elif operator != "Exists":
        raise UsageError(f"{where} without a key must use operator Exists")
    value = toleration.get("value", "")
    if operator == "Exists" and value:
        raise UsageError(f"{where} with operator Exists must not have a value")
    names.validate_label_value(value, f"{where} value")
    effect = toleration.get("effect", "")
    if effect and effect not in _TAINT_EFFECTS:
        raise UsageError(f"{where} effect must be one of {', '.join(_TAINT_EFFECTS)}")
    if "tolerationSeconds" in toleration:
        if effect != "NoExecute":
            raise UsageError(f"{where} tolerationSeconds needs effect NoExecute")
        int_in(toleration["tolerationSeconds"], f"{where} tolerationSeconds", 0, 2**31 - 1)


def parse_key_values(items: Mapping[str, str] | Iterable[str] | None, field_name: str) -> dict[str, str]:
    """`["k=v", ...]` (or a mapping) -> dict; a repeated key or a missing '=' is an error."""
    if items is None:
        return {}
    if isinstance(items, Mapping):
        return {str(key): value for key, value in items.items()}
    result: dict[str, str] = {}
    for position, item in enumerate(items, start=1):
        key, sep, value = names.require_string(item, f"{field_name} #{position}").partition("=")
        if not sep or not key:  # not quoted: a bare credential typed here would be printed
            raise UsageError(f"{field_name} #{position} must look like KEY=VALUE (it has no '=' or no KEY)")
        if key in result:
            raise UsageError(f"{field_name} #{position}: its KEY is given twice")
        result[key] = value
    return result


def parse_toleration(text: str) -> dict[str, Any]:
    """`KEY[=VALUE][:EFFECT]` (kubectl taint syntax) -> a toleration (Equal with a value, else Exists)."""
    body, colon, effect = names.require_string(text, "--toleration").rpartition(":")
    if not colon:
        body, effect = text, ""
    key, equals, value = body.partition("=")
    if not key:
        # An empty key with Exists tolerates every taint (of that effect): never what a one-word flag meant.
        which = f"{effect} " if effect in _TAINT_EFFECTS else ""
        raise UsageError(
            f"--toleration: the key is empty, which would tolerate every {which}taint on every node; "
            "name the taint's key (KEY[=VALUE][:EFFECT], e.g. nvidia.com/gpu:NoSchedule)"
        )
    toleration: dict[str, Any] = {"key": key, "operator": "Equal" if equals else "Exists"}
    if equals:
        toleration["value"] = value
    if effect:
        toleration["effect"] = effect
    return toleration


def targeting(
    node_selector: Iterable[str], tolerations: Iterable[str], gpu_product: str | None
) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The node selector (--node-selector, --gpu-product) and the tolerations (--toleration) of the job
    flags, parsed: what every verb that places pods (submit, probe nccl) applies."""
    selector = list(node_selector)
    if gpu_product:
        selector.append(contract.gpu_product_selector(gpu_product))
    return parse_key_values(selector, "node selector"), [parse_toleration(t) for t in tolerations]
