"""The test-only tools the reliability tests trust: the fault-injecting and the call-recording kubectl
wrappers, checked without a cluster (a `sleep` stands in for the API server)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .helpers import FAULT_KUBECTL, REPO
from .inprocess import FAKE_KUBECTL


def _shellcheck() -> str | None:
    local = REPO / ".venv" / "bin" / "shellcheck"
    return str(local) if local.exists() else shutil.which("shellcheck")


def test_the_wrappers_are_shellcheck_clean() -> None:
    shellcheck = _shellcheck()
    if shellcheck is None:
        pytest.skip("shellcheck is not installed")
    result = subprocess.run(
        [shellcheck, "-x", str(FAULT_KUBECTL), str(FAKE_KUBECTL)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture()
def victim() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait(timeout=10)


def _env(tmp_path: Path, victim: subprocess.Popen[bytes], when: str, kind: str = "kill") -> dict[str, str]:
    real = tmp_path / "kubectl"
    real.write_text('#!/bin/sh\necho "real: $*"; cat >/dev/null\n', encoding="utf-8")
    real.chmod(0o755)
    pidfile = tmp_path / "apiserver.pid"
    pidfile.write_text(str(victim.pid), encoding="utf-8")
    return {
        **os.environ,
        "FAULT_REAL_KUBECTL": str(real),
        "FAULT_PIDFILE": str(pidfile),
        "FAULT_MATCH": r" create -f - ",
        "FAULT_WHEN": when,
        "FAULT_KIND": kind,
        "FAULT_DELAY": "0.01",
        "FAULT_FIRED": str(tmp_path / "fired"),
    }


def _call(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FAULT_KUBECTL), *args], env=env, input="{}", capture_output=True, text=True, timeout=30, check=False
    )


@pytest.mark.parametrize("when", ["before", "during", "after"])
def test_fault_kubectl_fires_once_on_the_matching_call(
    tmp_path: Path, victim: subprocess.Popen[bytes], when: str
) -> None:
    env = _env(tmp_path, victim, when)
    passthrough = _call(env, "--namespace=x", "create", "--dry-run=server", "-f", "-")
    assert passthrough.stdout == "real: --namespace=x create --dry-run=server -f -\n"
    assert victim.poll() is None and not (tmp_path / "fired").exists()
    fired = _call(env, "create", "-f", "-", "-n", "x")
    assert fired.returncode == 0 and fired.stdout == "real: create -f - -n x\n"
    assert victim.wait(timeout=10) == -9
    assert (tmp_path / "fired").read_text() == "create -f - -n x\n"
    again = _call(env, "create", "-f", "-", "-n", "x")  # only the first match fires
    assert again.returncode == 0 and again.stdout == "real: create -f - -n x\n"


def test_fault_kubectl_stop_freezes_the_process_and_times_out_later_calls(
    tmp_path: Path, victim: subprocess.Popen[bytes]
) -> None:
    env = {**_env(tmp_path, victim, "before", kind="stop"), "FAULT_TIMEOUT": "2s"}
    assert _call(env, "auth", "can-i", "create", "jobs").stdout == "real: auth can-i create jobs\n"  # before: none
    assert _call(env, "create", "-f", "-").stdout == "real: --request-timeout=2s create -f -\n"
    state = Path(f"/proc/{victim.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    assert state == "T"
    assert _call(env, "patch", "-f", "-").stdout == "real: --request-timeout=2s patch -f -\n"


def test_fake_kubectl_logs_every_call_and_fails(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    env = {**os.environ, "FAKE_KUBECTL_LOG": str(log)}
    result = subprocess.run([str(FAKE_KUBECTL), "get", "pods"], env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 1 and "fake kubectl" in result.stderr
    assert log.read_text() == "get pods\n"
