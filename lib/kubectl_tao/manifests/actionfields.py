"""What an action request, its staging map and the render options must meet, each beside the rule that checks
it: one table (`rules`: the two schemas first, then every field), checked in one pass (`check`) before the
renderer builds anything from them. A rule is a core validator (or a bound of the renderer's own) called as
`rule(value, field)`: it raises UsageError naming the field, or returns."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from kubectl_tao.core import names, quantities, schemas
from kubectl_tao.core.errors import UsageError

REQUEST_SCHEMA = "action-request.v1"
STAGING_SCHEMA = "staging-map.v1"
MAX_TTL_SECONDS = 604800

Rule = Callable[[Any, str], object]
Row = tuple[Rule, object, str]


def _matching(schema_name: str) -> Rule:
    def rule(value: object, field: str) -> None:
        schemas.validate(value, schema_name, what=field)

    return rule


def _ttl(ttl_seconds: object, field: str) -> None:
    if ttl_seconds is None:  # kept until deleted (--keep-until-captured sets the TTL after capture)
        return
    if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int) or not 0 <= ttl_seconds <= MAX_TTL_SECONDS:
        raise UsageError(f"{field} must be a whole number from 0 to {MAX_TTL_SECONDS}, got {ttl_seconds!r}")


def _clear_of_token_dirs(target: str, field: str) -> None:
    if names.covers_token_dir(target):
        raise UsageError(
            f"{field} {target} would cover the service-account token the kubelet mounts under /var/run/secrets; "
            "mount it elsewhere"
        )


_text_or_empty: Rule = partial(names.require_string, allow_empty=True)


def config_source_path(config_source: str | Path) -> str:
    """The config source as the renderer reads it (a leading ~ is the user's home)."""
    return os.path.expanduser(str(config_source))


def rules(
    request: dict[str, Any],
    staging_map: dict[str, Any],
    *,
    job_id: str,
    namespace: str,
    pvc_claim: str,
    credential_secret: str | None,
    image_pull_secret: str | None,
    config_source: str | Path | None,
    ttl_seconds: int | None,
    shm_size: str,
) -> Iterator[Row]:
    """(rule, value, field): REQUEST and STAGING_MAP against their schemas, then (the rows read what the schemas
    made sure of) every field of theirs and every render option, in the order the renderer uses them."""
    yield _matching(REQUEST_SCHEMA), request, "action request"
    yield _matching(STAGING_SCHEMA), staging_map, "staging map"
    yield names.require_string, job_id, "job id"
    yield names.validate_dns_label, namespace, "namespace"
    yield names.validate_dns_subdomain, pvc_claim, "PVC claim"
    if credential_secret is not None:
        yield names.validate_dns_subdomain, credential_secret, "credential secret"
    if image_pull_secret is not None:
        yield names.validate_dns_subdomain, image_pull_secret, "image pull secret"
    yield _ttl, ttl_seconds, "ttl seconds"
    yield quantities.validate_binary_quantity, shm_size, "shm size"
    for index, row in enumerate(staging_map["sources"]):
        yield names.validate_abs_path, row["source"], f"staging map sources[{index}].source"
        yield names.validate_sub_path, row["sub_path"], f"staging map sources[{index}].sub_path"
    bundle = request["spec_bundle"]
    if bundle["mode"] == "config" and config_source is not None:
        yield names.validate_abs_path, config_source_path(config_source), "config source"
    yield names.require_string, bundle["command"], "spec_bundle.command"
    if bundle["mode"] == "args":
        for index, arg in enumerate(bundle["args"]):
            yield _text_or_empty, arg, f"spec_bundle.args[{index}]"
    yield names.validate_image, bundle["image"], "spec_bundle.image"
    for index, row in enumerate(request["mounts"]):
        yield names.validate_abs_path, row["source"], f"mounts[{index}].source"
        yield names.validate_abs_path, row["target"], f"mounts[{index}].target"
        yield _clear_of_token_dirs, row["target"], f"mounts[{index}].target"
    for index, raw in enumerate(request.get("fresh_outputs", [])):
        yield names.validate_abs_path, raw, f"fresh_outputs[{index}]"
    environment = request.get("environment", {})
    for name in sorted(environment):
        yield _text_or_empty, environment[name], f"environment.{name}"


def check(request: dict[str, Any], staging_map: dict[str, Any], **options: Any) -> None:
    """Every field of `rules` checked: the first that breaks its rule raises UsageError naming it."""
    for rule, value, field in rules(request, staging_map, **options):
        rule(value, field)
