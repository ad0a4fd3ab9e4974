"""Air-gapped install: the wheelhouse scripts/package-release builds for a platform installs with
`pip install --no-index` into a fresh virtualenv, with no network, and the plugin runs."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from .helpers import ROOT, Built, clean_env, package_release

pytestmark = [pytest.mark.install, pytest.mark.timeout(1200)]

VERSION = re.search(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.M).group(1)  # type: ignore[union-attr]
NAME = f"kubectl-tao-v{VERSION}-wheelhouse-linux-amd64"


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return package_release(tmp_path_factory.mktemp("wheelhouse"), "--wheelhouse", "--platform", "linux/amd64")


def test_wheelhouse_is_reproducible_and_holds_wheels_for_each_python(wheelhouse: Built, tmp_path: Path) -> None:
    [archive] = wheelhouse.files
    assert archive.name == f"{NAME}.tar.gz"
    assert re.fullmatch(rf"{re.escape(str(archive))} [0-9a-f]{{64}} {archive.stat().st_size} \(\d+\.\d MiB\)\n",
                        wheelhouse.stdout)
    [again] = package_release(tmp_path / "again", "--wheelhouse", "--platform", "linux/amd64", offline=True).files
    assert hashlib.sha256(again.read_bytes()).digest() == hashlib.sha256(archive.read_bytes()).digest()
    with tarfile.open(archive) as tar:
        names = [Path(n).name for n in tar.getnames()]
    assert f"kubectl_tao-{VERSION}-py3-none-any.whl" in names
    for tag in ("cp311", "cp312", "cp313", "cp314"):
        assert any(n.startswith("rpds_py-") and f"-{tag}-{tag}-manylinux" in n for n in names), tag
        assert any(n.startswith("msgspec-") and f"-{tag}-{tag}-manylinux" in n for n in names), tag


def test_pip_installs_it_offline_into_a_fresh_venv_and_the_plugin_runs(
    wheelhouse: Built, kubectl_dir: Path, bare_python_dir: Path, tmp_path: Path
) -> None:
    """Like pipx: only the two console scripts are linked onto PATH, whose python3 has none of the packages."""
    home = tmp_path / "home"
    home.mkdir()
    with tarfile.open(wheelhouse.files[0]) as tar:
        tar.extractall(tmp_path, filter="data")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300,
                   env=clean_env(home, []))
    user_bin = home / ".local" / "bin"
    user_bin.mkdir(parents=True)
    for script in ("kubectl-tao", "kubectl_complete-tao"):
        (user_bin / script).symlink_to(venv / "bin" / script)
    env = clean_env(home, [user_bin, bare_python_dir, kubectl_dir], TAO_STATE_DIR=str(tmp_path / "state"),
                    PIP_NO_INDEX="1", PIP_CONFIG_FILE="/dev/null")
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index", "--find-links",
         str(tmp_path / NAME), "kubectl-tao"],
        capture_output=True, text=True, env=env, check=False, timeout=300,
    )
    assert install.returncode == 0, install.stderr

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), capture_output=True, text=True, env=env, check=False, timeout=60)

    assert run("kubectl", "tao", "--version").stdout == f"kubectl-tao {VERSION}\n"
    rendered = run("kubectl", "tao", "render", "--image", "busybox", "--command", "echo hi", "--gpus", "0", "--pvc",
                   "data", "-n", "lab", "-o", "json")
    assert rendered.returncode == 0, rendered.stderr
    assert '"namespace": "lab"' in rendered.stdout
    opened = run("kubectl", "tao", "record", "open", "--platform", "k8s", "--image", "busybox", "--network-arch",
                 "dino", "--action", "train", "--storage-tier", "A", "--results-root", "/workspace/results")
    assert opened.returncode == 0, opened.stderr
    completed = run("kubectl", "__complete", "tao", "record", "show", "")
    assert completed.stdout.splitlines()[0] == opened.stdout.strip(), completed.stdout + completed.stderr

    # A dependency removed afterwards: the console script names the pip fix, in one line.
    assert run(str(venv / "bin" / "python"), "-m", "pip", "uninstall", "--quiet", "--yes", "jsonschema").returncode == 0
    broken = run("kubectl", "tao", "--help")
    assert (broken.returncode, broken.stdout) == (2, "")
    assert broken.stderr.startswith("error: kubectl-tao was installed without its dependencies (jsonschema missing "
                                    f"for {venv}/bin/")
    assert "-m pip install --force-reinstall kubectl-tao` (air-gapped: add `--no-index --find-links WHEELHOUSE`)" \
        in broken.stderr
    assert broken.stderr.count("\n") == 1
