"""Fixtures for the install tests: release archives and wheelhouses built by scripts/package-release, krew
built from its Go module (scripts/build-krew, cached), and a python3 that has none of kubectl-tao's packages.

The first run fetches wheels from PyPI and builds krew with Go (both cached under ~/.cache/kubectl-tao); later
runs use no network. krew runs with KREW_NO_UPGRADE_CHECK=1 and --manifest/--archive, so it calls nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import BUILD_KREW, DEPENDENCY_PROBE, SYSTEM_PYTHON, Built, package_release


@pytest.fixture(scope="session")
def linux_release(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """dist/ with kubectl-tao-vX-linux-amd64.tar.gz and its tao.yaml."""
    return package_release(tmp_path_factory.mktemp("release"), "--platform", "linux/amd64")


@pytest.fixture(scope="session")
def krew() -> Path:
    result = subprocess.run([str(BUILD_KREW)], capture_output=True, text=True, check=False, timeout=1800)
    assert result.returncode == 0, result.stderr
    return Path(result.stdout.strip())


@pytest.fixture(scope="session")
def kubectl_dir() -> Path:
    """The directory of the kubectl to run plugins with: the local cluster's when built, else the one on PATH."""
    cache = Path(os.environ.get("KUBECTL_TAO_CACHE") or Path.home() / ".cache" / "kubectl-tao")
    built = sorted(cache.glob("k8s-*/bin/kubectl"))
    found = built[-1] if built else shutil.which("kubectl")
    assert found, "no kubectl: build the local cluster (scripts/build-local-cluster) or put kubectl on PATH"
    return Path(found).resolve().parent


@pytest.fixture(scope="session")
def bare_python_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory whose `python3` (>= 3.11) can import none of kubectl-tao's dependencies: Debian's
    /usr/bin/python3 when that is so, else this interpreter's base Python without site-packages (-S)."""
    directory = tmp_path_factory.mktemp("bare-python")
    python3 = directory / "python3"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(directory)}
    system_ok = SYSTEM_PYTHON.exists() and subprocess.run(
        [str(SYSTEM_PYTHON), "-c", "import sys; assert sys.version_info >= (3, 11)"], env=env,
        capture_output=True, check=False).returncode == 0
    if system_ok and subprocess.run([str(SYSTEM_PYTHON), "-c", DEPENDENCY_PROBE], env=env, capture_output=True,
                                    check=False).returncode != 0:
        python3.symlink_to(SYSTEM_PYTHON)
    else:
        base = getattr(sys, "_base_executable", sys.executable)
        python3.write_text(f'#!/bin/sh\nexec "{base}" -S "$@"\n')
        python3.chmod(0o755)
    probe = subprocess.run([str(python3), "-c", DEPENDENCY_PROBE], env=env, capture_output=True, check=False)
    assert probe.returncode != 0, f"{python3} imports kubectl-tao's dependencies; the test needs one that cannot"
    return directory
