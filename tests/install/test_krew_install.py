"""The release archive as a new krew user gets it: built by scripts/package-release, installed offline by krew
(built from its Go module) into a fresh KREW_ROOT, and run through kubectl by a python3 that has none of
kubectl-tao's packages."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from .helpers import ROOT, Built, clean_env, package_release

pytestmark = [pytest.mark.install, pytest.mark.timeout(1800)]

VERSION = re.search(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.M).group(1)  # type: ignore[union-attr]
ARCHIVE = f"kubectl-tao-v{VERSION}-linux-amd64.tar.gz"
PYTHONS = ("311", "312", "313", "314")
REPORT_LINE = re.compile(r"^(\S+) ([0-9a-f]{64}) (\d+) \(\d+\.\d MiB\)$")


def by_name(built: Built) -> dict[str, Path]:
    return {path.name: path for path in built.files}


def test_release_build_is_reproducible_offline_and_prints_sizes(linux_release: Built, tmp_path: Path) -> None:
    again = package_release(tmp_path / "again", "--platform", "linux/amd64", offline=True)
    first, second = by_name(linux_release), by_name(again)
    assert sorted(first) == sorted(second) == [ARCHIVE, "tao.yaml"]
    for name in first:
        assert first[name].read_bytes() == second[name].read_bytes(), f"{name} differs between two builds"
    for line in linux_release.stdout.splitlines():
        match = REPORT_LINE.match(line)
        assert match, line
        path = Path(match.group(1))
        assert int(match.group(3)) == path.stat().st_size
        assert match.group(2) == hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_archive_carries_every_imported_package(linux_release: Built) -> None:
    with tarfile.open(by_name(linux_release)[ARCHIVE]) as tar:
        names = set(tar.getnames())
    for package in ("typer", "click", "sh", "ruamel/yaml", "jsonschema", "referencing", "attr"):
        assert any(n.startswith(f"vendor/common/{package}/") for n in names), package
    assert not any(n.startswith("vendor/common/filelock/") for n in names)  # nothing imports it
    for tag in PYTHONS:
        assert f"vendor/cp{tag}/rpds/rpds.cpython-{tag}-x86_64-linux-gnu.so" in names
        assert f"vendor/cp{tag}/msgspec/_core.cpython-{tag}-x86_64-linux-gnu.so" in names  # the fit gate's decoder
    assert not [n for n in names if n.startswith("vendor/") and n.endswith(("-darwin.so", "aarch64-linux-gnu.so"))]


def krew_install(krew: Path, release: Built, krew_root: Path, home: Path) -> subprocess.CompletedProcess[str]:
    files = by_name(release)
    env = clean_env(home, [krew_root / "bin"], KREW_ROOT=str(krew_root))
    return subprocess.run([str(krew), "install", f"--manifest={files['tao.yaml']}", f"--archive={files[ARCHIVE]}"],
                          capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, check=False, timeout=120)


def test_krew_installs_it_offline_and_it_runs_with_a_bare_python3(
    krew: Path, linux_release: Built, kubectl_dir: Path, bare_python_dir: Path, tmp_path: Path
) -> None:
    home, krew_root = tmp_path / "home", tmp_path / "krew"
    home.mkdir()
    installed = krew_install(krew, linux_release, krew_root, home)
    assert installed.returncode == 0, installed.stderr
    assert "Installed plugin: tao" in installed.stderr
    store = krew_root / "store" / "tao" / f"v{VERSION}"
    assert (krew_root / "bin" / "kubectl-tao").resolve() == store / "kubectl-tao"
    completion_bin = tmp_path / "completion-bin"
    completion_bin.mkdir()
    (completion_bin / "kubectl_complete-tao").symlink_to(store / "scripts" / "kubectl_complete-tao")
    env = clean_env(home, [krew_root / "bin", bare_python_dir, kubectl_dir, completion_bin],
                    TAO_STATE_DIR=str(tmp_path / "state"))

    def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["kubectl", *args], capture_output=True, text=True, env=env, check=False, timeout=60)

    helped = kubectl("tao", "--help")
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("Usage: kubectl tao [OPTIONS] COMMAND [ARGS]...")
    assert kubectl("tao", "--version").stdout == kubectl("tao", "version").stdout == f"kubectl-tao {VERSION}\n"
    rendered = kubectl("tao", "render", "--image", "busybox", "--command", "echo hi", "--gpus", "0", "--pvc", "data",
                       "-n", "lab", "-o", "json")
    assert rendered.returncode == 0, rendered.stderr
    assert '"namespace": "lab"' in rendered.stdout and '"kind": "Job"' in rendered.stdout
    # record open validates against the JSON schema: jsonschema and the compiled rpds-py from vendor/cp3XY.
    opened = kubectl("tao", "record", "open", "--platform", "k8s", "--image", "busybox", "--network-arch", "dino",
                     "--action", "train", "--storage-tier", "A", "--results-root", "/workspace/results")
    assert opened.returncode == 0, opened.stderr
    assert re.fullmatch(r"dino-train-[0-9a-f]{6}\n", opened.stdout)
    # the fit gate's typed decoder (msgspec, compiled) loads from vendor/cp3XY under the bare python3
    decoder = subprocess.run(
        [str(bare_python_dir / "python3"), "-c",
         "import sys, pathlib; sys.path.insert(0, sys.argv[1] + '/lib'); from kubectl_tao.cli import bootstrap; "
         "bootstrap.add_bundled_packages(pathlib.Path(sys.argv[1])); from kubectl_tao.gates import gatelists; "
         "print(gatelists._decoders().__name__)", str(store)],
        capture_output=True, text=True, env=env, check=False, timeout=60)
    assert (decoder.returncode, decoder.stdout) == (0, "kubectl_tao.gates.gatetypes\n"), decoder.stderr
    completed = kubectl("__complete", "tao", "su")
    assert completed.stdout.splitlines()[0] == "submit", completed.stdout + completed.stderr


def test_krew_install_under_an_unbundled_python_names_the_krew_fix(
    krew: Path, linux_release: Built, kubectl_dir: Path, bare_python_dir: Path, tmp_path: Path
) -> None:
    home, krew_root = tmp_path / "home", tmp_path / "krew"
    home.mkdir()
    assert krew_install(krew, linux_release, krew_root, home).returncode == 0
    python_tag = subprocess.run([str(bare_python_dir / "python3"), "-c",
                                 "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')"],
                                capture_output=True, text=True, check=True).stdout.strip()
    shutil.rmtree(krew_root / "store" / "tao" / f"v{VERSION}" / "vendor" / python_tag)
    env = clean_env(home, [krew_root / "bin", bare_python_dir, kubectl_dir])
    result = subprocess.run(["kubectl", "tao", "--help"], capture_output=True, text=True, env=env, check=False,
                            timeout=60)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("error: kubectl-tao: it bundles compiled packages for Python ")
    assert result.stderr.endswith("reinstall: `kubectl krew uninstall tao && kubectl krew install --manifest=tao.yaml "
                                  "--archive=kubectl-tao-vVERSION-OS-ARCH.tar.gz` (both from the release)\n")
    assert result.stderr.count("\n") == 1


def test_every_platform_gets_its_own_archive_and_manifest_entry(tmp_path: Path) -> None:
    built = by_name(package_release(tmp_path / "all"))
    platforms = {"linux-amd64": "x86_64-linux-gnu", "linux-arm64": "aarch64-linux-gnu", "darwin-amd64": "darwin",
                 "darwin-arm64": "darwin"}
    shas = {}
    for platform, so_suffix in platforms.items():
        archive = built[f"kubectl-tao-v{VERSION}-{platform}.tar.gz"]
        shas[platform] = hashlib.sha256(archive.read_bytes()).hexdigest()
        with tarfile.open(archive) as tar:
            compiled = [n for n in tar.getnames() if n.endswith(".so")]
        assert compiled and all(n.endswith(f"{so_suffix}.so") for n in compiled), (platform, compiled)
        assert {n.split("/")[1] for n in compiled} == {f"cp{tag}" for tag in PYTHONS}
    assert len(set(shas.values())) == 4
    manifest = built["tao.yaml"].read_text()
    for platform, sha in shas.items():
        os_name, arch = platform.split("-")
        entry = (f"        os: {os_name}\n        arch: {arch}\n    uri: https://github.com/kubectl-tao/kubectl-tao/"
                 f"releases/download/v{VERSION}/kubectl-tao-v{VERSION}-{platform}.tar.gz\n    sha256: {sha}\n")
        assert entry in manifest


def pythons_on_this_machine() -> dict[tuple[int, int], Path]:
    """CPython interpreters found here (Debian's, python3.X on PATH, pyenv's), by version."""
    candidates = [Path("/usr/bin/python3"), *sorted(Path.home().glob(".pyenv/versions/3.*/bin/python3"))]
    candidates += [Path(p) for minor in range(9, 16) if (p := shutil.which(f"python3.{minor}"))]
    found: dict[tuple[int, int], Path] = {}
    for python in candidates:
        probe = subprocess.run([str(python), "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True,
                               text=True, check=False, timeout=30) if python.exists() else None
        if probe and probe.returncode == 0:
            major, minor = map(int, probe.stdout.split())
            found.setdefault((major, minor), python)
    return found


def test_the_unpacked_archive_runs_under_each_python_here_without_site_packages(
    linux_release: Built, tmp_path: Path
) -> None:
    """-S -I: no site-packages and no user site, so only the archive's own packages can be imported."""
    with tarfile.open(by_name(linux_release)[ARCHIVE]) as tar:
        tar.extractall(tmp_path / "plugin", filter="data")
    entrypoint = tmp_path / "plugin" / "kubectl-tao"
    pythons = pythons_on_this_machine()
    supported = {v: p for v, p in pythons.items() if (3, 11) <= v <= (3, 14)}
    assert supported, f"no CPython 3.11-3.14 found (found {sorted(pythons)})"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TAO_STATE_DIR": str(tmp_path / "state")}
    for version, python in sorted(pythons.items()):
        result = subprocess.run(
            [str(python), "-S", "-I", str(entrypoint), "record", "open", "--platform", "k8s", "--image", "busybox",
             "--network-arch", "dino", "--action", "train", "--storage-tier", "A", "--results-root", "/results"],
            capture_output=True, text=True, env=env, check=False, timeout=60,
        )
        if version in supported:
            assert result.returncode == 0, (python, result.stderr)
            assert re.fullmatch(r"dino-train-[0-9a-f]{6}\n", result.stdout)
        elif (3, 7) <= version < (3, 11):  # older ones cannot even parse the check
            assert (result.returncode, result.stderr) == (
                2, f"error: kubectl-tao needs Python >= 3.11, but {python} is {version[0]}.{version[1]}; put a "
                   "newer python3 first on PATH\n")
