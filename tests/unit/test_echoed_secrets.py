"""Errors that quote user input never echo a credential (issue 17, item 2): `--env NAME=VALUE`, a value
given where a name belongs, env-file keys that carry a value, and any message through the CLI's handler."""

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
    assert err.startswith("error: --env #2 (not shown: it looks like NAME=VALUE) is not a valid environment variable")


def test_an_unset_conventional_name_is_still_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(UsageError, match=r"^--env HF_TOKEN: the variable is not set"):
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
    assert str(info.value).startswith("creds.env:2: the key is not a valid variable name")
    assert CANARY not in str(info.value) and TOKEN not in str(info.value)


def test_env_file_from_the_cli_never_echoes_the_key(cli: Any, tmp_path: Path) -> None:
    env_file = tmp_path / "c.env"
    env_file.write_text(f"HF_TOKEN:{CANARY}=x\n", encoding="utf-8")
    code, out, err = cli(*SUBMIT, "--env-file", str(env_file))
    assert code == 2 and CANARY not in out + err
    assert "c.env:1: the key is not a valid variable name" in err


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
