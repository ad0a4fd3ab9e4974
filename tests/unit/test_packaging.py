"""Packaging: the krew manifest follows krew's rules, the release archive is reproducible and complete, and
`pip install .` gives a working `kubectl-tao` console script."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "plugins" / "tao.yaml"
PACKAGE_RELEASE = ROOT / "scripts" / "package-release"
KREW_API_VERSION = "krew.googlecontainertools.github.com/v1alpha2"
SEMVER = re.compile(r"^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")


def project_version() -> str:
    match = re.search(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.M)
    assert match
    return match.group(1)


def load_manifest(path: Path = MANIFEST) -> Any:
    return YAML(typ="safe", pure=True).load(path.read_text())


def krew_problems(manifest: Any, file_name: str) -> list[str]:
    """krew's own validation (internal/index/validation) plus the index's naming rules."""
    problems = []
    if manifest.get("apiVersion") != KREW_API_VERSION:
        problems.append(f"apiVersion must be {KREW_API_VERSION}")
    if manifest.get("kind") != "Plugin":
        problems.append("kind must be Plugin")
    name = (manifest.get("metadata") or {}).get("name", "")
    if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name or ""):
        problems.append("metadata.name must be lower case words joined by dashes")
    if name != Path(file_name).stem:
        problems.append("metadata.name must match the file name")
    spec = manifest.get("spec") or {}
    short = spec.get("shortDescription")
    if not isinstance(short, str) or not short or "\n" in short or "\r" in short:
        problems.append("shortDescription must be one non-empty line")
    if not SEMVER.match(str(spec.get("version", ""))):
        problems.append("version must be a semantic version with a leading v")
    if not str(spec.get("homepage", "")).startswith("https://"):
        problems.append("homepage must be an https URL")
    platforms = spec.get("platforms")
    if not isinstance(platforms, list) or not platforms:
        problems.append("platforms must be a non-empty list")
        platforms = []
    for index, platform in enumerate(platforms):
        where = f"platforms[{index}]"
        if not str(platform.get("uri", "")).startswith("https://"):
            problems.append(f"{where}.uri must be an https URL")
        if not re.fullmatch(r"[a-f0-9]{64}", str(platform.get("sha256", ""))):
            problems.append(f"{where}.sha256 must be 64 lower-case hex digits")
        if not platform.get("bin"):
            problems.append(f"{where}.bin must be set")
        files = platform.get("files")
        if files is not None and (not files or any(not f.get("from") or not f.get("to") for f in files)):
            problems.append(f"{where}.files must be absent or non-empty with from and to")
        selector = platform.get("selector") or {}
        keys = list(selector.get("matchLabels") or {}) + [e.get("key") for e in selector.get("matchExpressions") or []]
        if not keys or set(keys) - {"os", "arch"}:
            problems.append(f"{where}.selector must use only os and arch")
    return problems


def test_manifest_follows_krew_rules() -> None:
    assert krew_problems(load_manifest(), MANIFEST.name) == []


def test_manifest_rules_catch_broken_manifests() -> None:
    broken = load_manifest()
    broken["apiVersion"] = "krew.googlecode.com/v1alpha2"
    broken["metadata"]["name"] = "Tao_Plugin"
    broken["spec"]["version"] = "0.1"
    broken["spec"]["platforms"][0]["sha256"] = "abc"
    del broken["spec"]["platforms"][1]["bin"]
    assert krew_problems(broken, "tao.yaml") == [
        f"apiVersion must be {KREW_API_VERSION}",
        "metadata.name must be lower case words joined by dashes",
        "metadata.name must match the file name",
        "version must be a semantic version with a leading v",
        "platforms[0].sha256 must be 64 lower-case hex digits",
        "platforms[1].bin must be set",
    ]


def test_manifest_names_this_version_for_linux_and_darwin() -> None:
    version = project_version()
    spec = load_manifest()["spec"]
    assert spec["version"] == f"v{version}"
    assert sorted(p["selector"]["matchLabels"]["os"] for p in spec["platforms"]) == ["darwin", "linux"]
    for platform in spec["platforms"]:
        assert platform["uri"].endswith(f"/releases/download/v{version}/kubectl-tao-v{version}.tar.gz")
        assert platform["bin"] == "kubectl-tao"


def build(out: Path, *args: str) -> tuple[Path, str]:
    result = subprocess.run(
        [str(PACKAGE_RELEASE), "--out", str(out), *args], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr
    archive, sha = result.stdout.split()
    return Path(archive), sha


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return build(tmp_path_factory.mktemp("release"))


def test_archive_is_reproducible(archive: tuple[Path, str], tmp_path: Path) -> None:
    path, sha = archive
    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha
    assert build(tmp_path)[1] == sha


def test_archive_holds_the_bin_and_what_it_needs(archive: tuple[Path, str]) -> None:
    with tarfile.open(archive[0]) as tar:
        members = {m.name: m for m in tar.getmembers()}
    manifest_bin = load_manifest()["spec"]["platforms"][0]["bin"]
    assert members[manifest_bin].isfile() and members[manifest_bin].mode & 0o111
    assert members["scripts/kubectl_complete-tao"].mode & 0o111
    needed_files = ("lib/kubectl_tao/cli.py", "lib/kubectl_tao/commands/fit.py", "pyproject.toml",
                    "templates/k8s/single-pod-job.yaml.tmpl", "schemas/job-record.schema.json")
    for needed in needed_files:
        assert needed in members
    assert not [n for n in members if "__pycache__" in n or n.startswith((".venv", "tests", "cluster"))]
    assert {(m.uid, m.gid, m.mtime) for m in members.values()} == {(0, 0, 315532800)}


def test_update_then_check_manifest(archive: tuple[Path, str], tmp_path: Path) -> None:
    manifest = tmp_path / "tao.yaml"
    manifest.write_text(MANIFEST.read_text().replace(load_manifest()["spec"]["platforms"][0]["sha256"], "0" * 64))
    _, sha = build(tmp_path / "out", "--update-manifest", str(manifest))
    assert [p["sha256"] for p in load_manifest(manifest)["spec"]["platforms"]] == [sha, sha]
    build(tmp_path / "out", "--check-manifest", str(manifest))


def test_check_manifest_fails_on_a_stale_sha(tmp_path: Path) -> None:
    manifest = tmp_path / "tao.yaml"
    manifest.write_text("spec:\n  platforms:\n  - sha256: " + "0" * 64 + "\n")
    result = subprocess.run(
        [str(PACKAGE_RELEASE), "--out", str(tmp_path), "--check-manifest", str(manifest)],
        capture_output=True, text=True, check=False, timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.startswith(f"ERROR: {manifest}: sha256 {'0' * 64} is not the archive's ")
    assert "run scripts/package-release --update-manifest" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bogus"], "ERROR: unknown argument '--bogus' (see --help)"),
        (["--out"], "ERROR: --out needs a directory"),
        (["--check-manifest", "/no/such/file.yaml"], "ERROR: manifest /no/such/file.yaml does not exist"),
        (["--update-manifest", "a", "--check-manifest", "b"], "ERROR: give --update-manifest or --check-manifest"),
    ],
)
def test_package_release_usage_errors(args: list[str], message: str) -> None:
    result = subprocess.run([str(PACKAGE_RELEASE), *args], capture_output=True, text=True, check=False, timeout=30)
    assert result.returncode == 2
    assert result.stderr.startswith(message)


def _wheel_capable() -> bool:
    """setuptools >= 70.1 builds wheels itself; older ones need the `wheel` package."""
    try:
        import setuptools
    except ImportError:
        return False
    version = tuple(int(p) for p in re.findall(r"\d+", setuptools.__version__)[:2])
    if version >= (70, 1):
        return True
    try:
        import wheel  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.timeout(60)
@pytest.mark.skipif(not _wheel_capable(), reason="the venv's setuptools cannot build wheels (needs >= 70.1 or wheel)")
def test_pip_install_gives_a_working_console_script(tmp_path: Path) -> None:
    """Offline: a fresh venv sees this venv's packages through a .pth file, pip builds without isolation."""
    source = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".*", "build", "dist")
    for part in ("lib", "templates", "schemas"):
        shutil.copytree(ROOT / part, source / part, ignore=ignore)
    (source / "scripts").mkdir()
    for script in ("setup-nvidia-gpu-host.sh", "kubectl_complete-tao"):
        shutil.copy2(ROOT / "scripts" / script, source / "scripts")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=30)
    purelib = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"])
    (purelib / "_project_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet", "--no-index",
         "--no-deps", "--no-build-isolation", str(source)],
        capture_output=True, text=True, check=False, timeout=50,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    console = venv / "bin" / "kubectl-tao"
    assert (venv / "share" / "kubectl-tao" / "templates" / "k8s" / "single-pod-job.yaml.tmpl").is_file()
    assert (venv / "bin" / "kubectl_complete-tao").is_file()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAO_", "KUBECTL_TAO"))}
    env.update(HOME=str(tmp_path), KUBECONFIG=str(tmp_path / "none"), TAO_K8S_NAMESPACE="pkg-test")
    run = {"capture_output": True, "text": True, "env": env, "cwd": tmp_path, "check": False, "timeout": 30}
    helped = subprocess.run([str(console), "--help"], **run)
    assert helped.returncode == 0 and "fit" in helped.stdout and "explain" in helped.stdout
    rendered = subprocess.run(
        [str(console), "render", "--image", "busybox", "--command", "echo hi", "--gpus", "0", "--pvc", "data",
         "-o", "json"],
        **run,
    )
    assert rendered.returncode == 0, rendered.stderr
    assert '"namespace": "pkg-test"' in rendered.stdout
    located = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import kubectl_tao, sys; print(kubectl_tao.__file__)"], **run
    )
    assert located.stdout.startswith(str(venv)), "the installed copy, not the checkout, must be imported"
