"""Errors that quote user input never echo a credential (issue 17, item 2; issue 26, item 3): a rejected value is
named by its position (`--env #2`, `label #1 value`, `creds.env:4: the key`) and where it breaks the rule, never
quoted, for every flag a credential can be pasted into by mistake; and any message goes through the redactor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubectl_tao.core.envfile import parse_env_file
from kubectl_tao.core.errors import UsageError
from kubectl_tao.core.names import validate_env_name
from kubectl_tao.core.redact import safe_to_show
from kubectl_tao.jobs.plan import read_credentials

CANARY = "s3cr3tCanaryValue"  # fake; shaped like a password nobody's detector knows
TOKEN = "hf_" + "FakeCanaryToken0123456789abcdefXY"
SUBMIT = ["submit", "--image", "busybox", "--command", "true", "--gpus", "0", "--pvc", "data"]


@pytest.mark.parametrize(
    "argv",
    [
        ["--env", f"HF_TOKEN={CANARY}"],
        ["--env", f"HF_TOKEN={TOKEN}"],
        ["--env", "HOME", "--env", CANARY.lower()],
        ["--env", f"hf:{CANARY}"],
        ["--env", TOKEN],
    ],
)
def test_env_flag_errors_name_the_position_not_the_value(cli: Any, argv: list[str]) -> None:
    code, out, err = cli(*SUBMIT, *argv)
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith("error: --env")
    assert CANARY not in out + err and CANARY.lower() not in out + err and TOKEN not in out + err


def test_env_flag_position_is_named(cli: Any) -> None:
    code, _, err = cli(*SUBMIT, "--env", "HOME", "--env", f"HF_TOKEN={CANARY}")
    assert code == 2
    assert err.startswith("error: --env #2 is not a valid environment variable name (it holds '=' at character 9; not "
                          "shown)")


def test_an_unset_conventional_name_is_still_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(UsageError, match=r"^--env #1 \(HF_TOKEN\): the variable is not set"):
        read_credentials(None, ["HF_TOKEN"])


def test_an_unset_lower_case_word_is_named_by_position(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CANARY, raising=False)
    with pytest.raises(UsageError) as info:
        read_credentials(None, [CANARY])
    assert str(info.value).startswith("--env #1 (name not shown")
    assert CANARY not in str(info.value)


@pytest.mark.parametrize(
    "line", [f"HF_TOKEN:{CANARY}=x", f"HF_TOKEN {CANARY}=x", f"{CANARY}/x=1", f"-{TOKEN}=1", f"A.{TOKEN}=1"]
)
def test_env_file_keys_that_may_hold_a_value_are_not_echoed(line: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_env_file(f"A=1\n{line}\n", "creds.env")
    assert str(info.value).startswith("creds.env:2: the key (character ")
    assert "is not a valid variable name" in str(info.value)
    assert CANARY not in str(info.value) and TOKEN not in str(info.value)


def _submit_refusing_env_file(cli: Any, path: Path, text: str) -> tuple[str, str]:
    """submit --env-file PATH holding TEXT: refused as bad input (exit 2); its stdout and stderr."""
    path.write_text(text, encoding="utf-8")
    code, out, err = cli(*SUBMIT, "--env-file", str(path))
    assert code == 2
    return out, err


def test_env_file_from_the_cli_never_echoes_the_key(cli: Any, tmp_path: Path) -> None:
    out, err = _submit_refusing_env_file(cli, tmp_path / "c.env", f"HF_TOKEN:{CANARY}=x\n")
    assert CANARY not in out + err
    assert "c.env:1: the key (character 9 (':')) is not a valid variable name" in err


@pytest.mark.parametrize("name", [f"A={CANARY}", f"a:{CANARY}", f"x {CANARY}"])
def test_forward_env_names_are_not_echoed(name: str) -> None:
    with pytest.raises(UsageError) as info:
        validate_env_name(name, "forward_env")
    assert CANARY not in str(info.value)
    assert "is not a valid environment variable name" in str(info.value)


@pytest.mark.parametrize("name", ["1BAD", "my.key", "KEY ", "A-B"])
def test_harmless_bad_names_are_still_quoted(name: str) -> None:
    assert safe_to_show(name)


def test_every_cli_error_goes_through_the_redactor(cli: Any) -> None:
    code, out, err = cli(*SUBMIT, "--storage-tier", f"PASSWORD={CANARY}")
    assert code == 2
    assert CANARY not in out + err


def test_secret_from_env_does_not_echo_a_value(cli: Any) -> None:
    code, out, err = cli("secret", "image-pull", "ngc", "--registry", "nvcr.io", "--from-env", f"NGC_KEY={CANARY}")
    assert code == 2
    assert CANARY not in out + err


def test_error_lines_keep_a_field_and_its_complaint() -> None:
    from kubectl_tao.cli.main import _scrubbed

    message = '--image-pull-secret: Secret "absent" not found in namespace tao-jobs; create it first'
    assert _scrubbed(message) == message
    assert CANARY not in _scrubbed(f"--storage-tier 'HF_TOKEN={CANARY}': use A or C")


# ------------------------------------------------------------------ issue 26: every flag a value can be pasted into

PASTED = "Tr0ub4dor-CanaryPw-42"  # the attack pass's canary: a password shaped like a name


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--env", PASTED], "--env #1 is not a valid environment variable name (character 10 ('-')"),
        (["--env", "HOME", "--env", PASTED.upper()], "--env #2"),
        (["--env-secret", PASTED], "env secret is not a valid Kubernetes name: character 1 (an upper-case letter)"),
        (["--image-pull-secret", PASTED], "image pull secret is not a valid Kubernetes name"),
        (["--nccl-env", PASTED], "--nccl-env #1 must look like KEY=VALUE"),
        (["--nccl-env", f"NCCL_DEBUG={PASTED}#"], "nccl env #1 (NCCL_DEBUG) value (character 22 ('#'))"),
        (["--nccl-env", f"NCCL_{PASTED}=1"], "nccl env #1: the name is not an NCCL_* variable"),
        (["--annotation", PASTED], "annotation #1 must look like KEY=VALUE"),
        (["--annotation", f"{PASTED}#=1"], "annotation #1 key is not a valid key: character 22 ('#')"),
        (["--label", "a=b", "--label", f"c={PASTED}#"], "label #2 value is not a valid label value: character 22"),
        (["--label", f"{PASTED}#=1"], "label #1 key is not a valid key"),
        (["--node-selector", f"a={PASTED}#"], "node selector #1 value is not a valid label value"),
        (["--node-selector", PASTED], "node selector #1 must look like KEY=VALUE"),
        (["--gpu-product", f"{PASTED}#"], "node selector #1 value is not a valid label value"),
        (["--toleration", f"{PASTED}#"], "toleration 0 key is not a valid key"),
        (["--toleration", f"a={PASTED}#"], "toleration 0 value is not a valid label value"),
        (["--toleration", f":{PASTED}"], "--toleration: the key is empty, which would tolerate every taint"),
        (["--queue", PASTED], "queue name is not a valid DNS label: character 1 (an upper-case letter)"),
        (["--pvc", PASTED], "pvc is not a valid Kubernetes name"),
        (["--mount-path", f"/{PASTED}\x01"], "mount path must not contain control characters or backslashes"),
        (["--shm-size", PASTED], "shm size"),
        (["--image", f"{PASTED} x"], "image must not contain whitespace or control characters (character 22 is"),
        (["--nccl-socket-ifname", f"{PASTED}#"], "nccl socket ifname (character 22 ('#')) must be"),
        (["--launcher", PASTED, "--nodes", "2"], "launcher must be tao or torchrun"),
    ],
)
def test_a_value_pasted_into_a_flag_is_named_by_position_never_quoted(
    cli: Any, argv: list[str], named: str
) -> None:
    code, out, err = cli(*SUBMIT, *argv)
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert named in err
    for shown in (PASTED, PASTED.upper(), PASTED.lower()):
        assert shown not in out + err


def test_an_env_file_key_holding_a_pasted_value_is_named_by_line(cli: Any, tmp_path: Path) -> None:
    out, err = _submit_refusing_env_file(cli, tmp_path / "creds.env", f"A=1\n{PASTED}=x\n")
    assert PASTED not in out + err
    assert "creds.env:2: the key (character 10 ('-')) is not a valid variable name" in err


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--from-env", PASTED], "--from-env is not a valid environment variable name (character 10 ('-')"),
        (["--username", f"user:{PASTED}"], "--username: give one word without ':'"),
        (["--registry", f"{PASTED}#"], "--registry: not a registry host"),
    ],
)
def test_the_registry_secret_flags_never_quote_a_value(cli: Any, argv: list[str], named: str) -> None:
    code, out, err = cli("secret", "image-pull", "ngc", *argv, stdin="key\n")
    assert code == 2
    assert named in err and PASTED not in out + err
