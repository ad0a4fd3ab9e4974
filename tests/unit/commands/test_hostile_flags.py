"""Flags that look harmless but are not: a key-less toleration (a wildcard), a mount over the service-account
token, and look-alike or direction-control characters in the words record ids are built from. Each is refused
with one `error:` line naming the flag, exit 2, before any kubectl call or record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import FIXTURES as FIXTURES_ROOT
from support.fake_kubectl import FakeKubectl

from kubectl_tao.core.errors import UsageError
from kubectl_tao.manifests import action

FIXTURES = FIXTURES_ROOT / "action"
RENDER = ["render", "--image", "busybox:1.36", "--command", "true", "--gpus", "0", "--pvc", "data"]
SUBMIT = ["submit", "--image", "busybox:1.36", "--command", "true", "--gpus", "0", "--pvc", "data"]


def refused(cli: Any, fake: FakeKubectl, tao_env: Path, *argv: str) -> str:
    code, out, err = cli(*argv)
    assert code == 2, err
    assert out == "" and err.startswith("error: ") and err.count("\n") == 1, err
    assert fake.calls == [], "bad input reached kubectl"
    assert not (tao_env / "state" / "jobs").exists() or not list((tao_env / "state" / "jobs").glob("*.json"))
    return err


@pytest.mark.parametrize("verb", [RENDER, SUBMIT])
@pytest.mark.parametrize("value", [":NoSchedule", ":NoExecute", "=x:NoSchedule", ":"])
def test_a_toleration_without_a_key_is_refused(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path, verb: list[str], value: str
) -> None:
    err = refused(cli, fake_kubectl, tao_env, *verb, "--toleration", value)
    assert "--toleration: the key is empty, which would tolerate every" in err
    assert "name the taint's key" in err


def test_fit_refuses_a_toleration_without_a_key(cli: Any, fake_kubectl: FakeKubectl, tao_env: Path) -> None:
    err = refused(cli, fake_kubectl, tao_env, "fit", "--gpus", "1", "--toleration", ":NoSchedule")
    assert "--toleration: the key is empty, which would tolerate every NoSchedule taint" in err


@pytest.mark.parametrize(
    "path",
    [
        "/var/run/secrets/kubernetes.io",
        "/var/run/secrets/kubernetes.io/serviceaccount",
        "/var/run/secrets",
        "/var/run",
        "/run/secrets/kubernetes.io/serviceaccount",
        "/var/run/secrets/eks.amazonaws.com/serviceaccount",
    ],
)
def test_a_mount_over_the_service_account_token_is_refused(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path, path: str
) -> None:
    err = refused(cli, fake_kubectl, tao_env, *RENDER, "--mount-path", path, "--results-dir", f"{path}/out")
    assert f"mount path {path!r} would cover the service-account token" in err


def test_a_mount_path_next_to_the_token_directory_is_still_fine(cli: Any) -> None:
    code, out, err = cli(*RENDER, "--mount-path", "/var/run/data", "--results-dir", "/var/run/data/out")
    assert code == 0, err
    assert "mountPath: /var/run/data\n" in out


def test_an_action_mount_target_over_the_token_is_refused() -> None:
    request = json.loads((FIXTURES / "request-args.json").read_text(encoding="utf-8"))
    staging = json.loads((FIXTURES / "staging-args.json").read_text(encoding="utf-8"))
    request["mounts"][1]["target"] = "/var/run/secrets/kubernetes.io/serviceaccount"
    with pytest.raises(UsageError, match=r"mounts\[1\].target .* would cover the service-account token"):
        action.render_action_objects(request, staging, job_id="dino-train-1a2b3c", pvc_claim="p")


# U+202E right-to-left override, U+2066 left-to-right isolate, U+200B zero-width space, Cyrillic o and a,
# Greek omicron, fullwidth d: all read (or hide) like ASCII.
HOSTILE = ["di\u202eno", "\u2066dino", "di\u200bno", "din\u043e", "d\u0430no", "din\u03bf", "\uff44ino"]


@pytest.mark.parametrize("flag", ["--network-arch", "--action"])
@pytest.mark.parametrize("value", HOSTILE)
def test_look_alike_and_direction_characters_are_refused_in_id_words(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path, flag: str, value: str
) -> None:
    others = {"--network-arch": "dino", "--action": "train"}
    others[flag] = value
    argv = [*SUBMIT, "--network-arch", others["--network-arch"], "--action", others["--action"]]
    err = refused(cli, fake_kubectl, tao_env, *argv)
    position, bad = next((i, ch) for i, ch in enumerate(value, 1) if not ch.isascii())
    assert f"{flag}: character {position} (U+{ord(bad):04X}) is not plain ASCII" in err
    assert err.isascii(), "the error itself must not carry the character"


@pytest.mark.parametrize("value", HOSTILE)
def test_record_open_refuses_look_alike_network_arch(cli: Any, tao_env: Path, value: str) -> None:
    code, out, err = cli(
        "record", "open", "--image", "busybox", "--network-arch", value, "--action", "train",
        "--storage-tier", "A", "--results-root", "/workspace/results",
    )
    assert (code, out) == (2, "") and "is not plain ASCII" in err and err.count("\n") == 1
    assert not list((tao_env / "state" / "jobs").glob("*.json")) if (tao_env / "state" / "jobs").exists() else True


def test_plain_ascii_words_still_make_ids(cli: Any) -> None:
    code, out, err = cli(*RENDER, "--network-arch", "mask_grounding_dino", "--action", "gen_trt_engine")
    assert code == 0, err
    assert "kubectl-tao.io/record-id: mask_grounding_dino-gen_trt_engine-" in out


@pytest.mark.parametrize("verb", [RENDER, SUBMIT])
@pytest.mark.parametrize("value", ["rack\n:preferred", "example.com/rack\n:required", "example.com\n/rack"])
def test_a_topology_label_with_a_newline_inside_is_refused_never_rendered(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path, verb: list[str], value: str
) -> None:
    err = refused(cli, fake_kubectl, tao_env, *verb, "--nodes", "2", "--topology", value)
    assert err == f"error: --topology {value!r}: not a node label key; use LABEL or LABEL:preferred, e.g. " \
        "topology.kubernetes.io/zone or nvidia.com/gpu.clique\n"
