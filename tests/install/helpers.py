"""Helpers of the install tests (see conftest.py for the fixtures)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_RELEASE = ROOT / "scripts" / "package-release"
BUILD_KREW = ROOT / "scripts" / "build-krew"
SYSTEM_PYTHON = Path("/usr/bin/python3")
DEPENDENCY_PROBE = "import typer, click, sh, ruamel.yaml, jsonschema"


@dataclass
class Built:
    files: list[Path]
    stdout: str


def package_release(out: Path, *args: str, offline: bool = False) -> Built:
    """Run scripts/package-release; the files it reports, in order, and its stdout. OFFLINE: pip may use no
    index, so the build must come from the wheel cache alone."""
    env = {**os.environ, **({"PIP_NO_INDEX": "1"} if offline else {})}
    result = subprocess.run([sys.executable, str(PACKAGE_RELEASE), "--out", str(out), *args],
                            capture_output=True, text=True, check=False, timeout=1200, env=env)
    assert result.returncode == 0, result.stderr
    return Built([Path(line.split()[0]) for line in result.stdout.splitlines()], result.stdout)


def clean_env(home: Path, path: list[Path], **extra: str) -> dict[str, str]:
    """Only what a new user's shell would have: no virtualenv, no PYTHONPATH, no TAO_* settings."""
    env = {"HOME": str(home), "PATH": os.pathsep.join([*map(str, path), "/usr/bin", "/bin"]), "LANG": "C.UTF-8",
           "KUBECONFIG": str(home / "kubeconfig"), "KREW_NO_UPGRADE_CHECK": "1"}
    env.update(extra)
    return env
