"""The action request's check table (manifests/actionfields.py): the schemas first, then every field beside the
rule that checks it, in the order the renderer uses them; the first broken rule is the one reported."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from support import FIXTURES

from kubectl_tao.core import names
from kubectl_tao.core.errors import UsageError
from kubectl_tao.manifests import actionfields

OPTIONS: dict[str, Any] = {
    "job_id": "dino-train-1a2b3c",
    "namespace": "ml",
    "pvc_claim": "tao-pvc",
    "credential_secret": "tao-creds-dino",
    "image_pull_secret": None,
    "config_source": None,
    "ttl_seconds": 3600,
    "shm_size": "16Gi",
}


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / "action" / name).read_text())


def fields(request: dict[str, Any], staging: dict[str, Any], **options: Any) -> list[str]:
    return [field for _, _, field in actionfields.rules(request, staging, **{**OPTIONS, **options})]


def test_the_schemas_come_first_then_every_field_in_the_renderers_order() -> None:
    request, staging = fixture("request-args.json"), fixture("staging-args.json")
    assert fields(request, staging) == [
        "action request", "staging map", "job id", "namespace", "PVC claim", "credential secret", "ttl seconds",
        "shm size",
        "staging map sources[0].source", "staging map sources[0].sub_path",
        "staging map sources[1].source", "staging map sources[1].sub_path",
        "staging map sources[2].source", "staging map sources[2].sub_path",
        "spec_bundle.command", "spec_bundle.args[0]", "spec_bundle.args[1]", "spec_bundle.args[2]",
        "spec_bundle.image",
        "mounts[0].source", "mounts[0].target", "mounts[0].target",
        "mounts[1].source", "mounts[1].target", "mounts[1].target",
        "mounts[2].source", "mounts[2].target", "mounts[2].target",
        "mounts[3].source", "mounts[3].target", "mounts[3].target",
        "fresh_outputs[0]", "environment.NCCL_DEBUG", "environment.TOKENIZERS_PARALLELISM",
    ]


def test_a_config_source_is_checked_only_for_a_config_mode_request() -> None:
    request, staging = fixture("request-config.json"), fixture("staging-args.json")
    assert "config source" in fields(request, staging, config_source="/data/cfg.yaml")
    assert "config source" not in fields(request, staging)
    assert "config source" not in fields(fixture("request-args.json"), staging, config_source="/data/cfg.yaml")


def test_each_field_has_the_core_rule_of_its_kind() -> None:
    request, staging = fixture("request-args.json"), fixture("staging-args.json")
    rules = {field: rule for rule, _, field in actionfields.rules(request, staging, **OPTIONS)}
    assert rules["namespace"] is names.validate_dns_label
    assert rules["staging map sources[0].sub_path"] is names.validate_sub_path
    assert rules["spec_bundle.image"] is names.validate_image
    assert rules["fresh_outputs[0]"] is names.validate_abs_path


def test_the_first_broken_rule_is_reported() -> None:
    request, staging = fixture("request-args.json"), fixture("staging-args.json")
    broken = copy.deepcopy(request)
    broken["mounts"][1]["target"] = "/workspace//data"
    broken["environment"]["A"] = "x\x00"
    with pytest.raises(UsageError, match=r"^mounts\[1\]\.target must be a normalized path"):
        actionfields.check(broken, staging, **OPTIONS)


def test_a_request_off_its_schema_is_refused_before_any_field_is_read() -> None:
    staging = fixture("staging-args.json")
    with pytest.raises(UsageError, match=r"^action request \$: 'spec_bundle' is a required property"):
        actionfields.check({"schema_version": "1", "platform": "kubernetes"}, staging, **OPTIONS)
    with pytest.raises(UsageError, match=r"^staging map \$\.sources"):
        actionfields.check(fixture("request-args.json"), {"schema_version": "1", "sources": []}, **OPTIONS)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ttl_seconds": True}, "ttl seconds must be a whole number from 0 to 604800, got True"),
        ({"shm_size": "lots"}, "shm size must be a positive whole number"),
        ({"job_id": ""}, "job id must not be empty"),
    ],
)
def test_render_options_are_rows_of_the_table(options: dict[str, Any], message: str) -> None:
    request, staging = fixture("request-args.json"), fixture("staging-args.json")
    with pytest.raises(UsageError, match="^" + message):
        actionfields.check(request, staging, **{**OPTIONS, **options})


def test_a_mount_over_the_token_directory_is_refused_as_its_field() -> None:
    request, staging = fixture("request-args.json"), fixture("staging-args.json")
    request["mounts"][2]["target"] = "/run/secrets"
    with pytest.raises(UsageError, match=r"^mounts\[2\]\.target /run/secrets would cover the service-account token"):
        actionfields.check(request, staging, **OPTIONS)
