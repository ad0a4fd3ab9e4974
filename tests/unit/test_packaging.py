"""Packaging without network: the krew manifest rendered from plugins/tao.yaml.tmpl follows krew's rules, the
release script's archive writer and wheel unpacker are reproducible and safe, and `pip install .` gives a
working `kubectl-tao` console script. Building real archives and installing them: tests/install."""

from __future__ import annotations

import ast
import hashlib
import importlib.machinery
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from ruamel.yaml import YAML
from support import ROOT as REPO_ROOT

ROOT = REPO_ROOT
TEMPLATE = ROOT / "plugins" / "tao.yaml.tmpl"
PACKAGE_RELEASE = ROOT / "scripts" / "package-release"
KREW_API_VERSION = "krew.googlecontainertools.github.com/v1alpha2"
SEMVER = re.compile(r"^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")
PLATFORMS = ["linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"]


def load_release_script() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("package_release", str(PACKAGE_RELEASE))
    spec = importlib.util.spec_from_loader("package_release", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


release = load_release_script()


def project_version() -> str:
    match = re.search(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.M)
    assert match
    return match.group(1)


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


def rendered(platforms: list[str] = PLATFORMS) -> Any:
    version = project_version()
    entries = [
        (p, f"https://example.test/v{version}/kubectl-tao-v{version}-{p.replace('/', '-')}.tar.gz",
         hashlib.sha256(p.encode()).hexdigest())
        for p in platforms
    ]
    text = release.render_manifest(TEMPLATE.read_text(), version, entries)
    return YAML(typ="safe", pure=True).load(text), text


def test_rendered_manifest_follows_krew_rules() -> None:
    manifest, _ = rendered()
    assert krew_problems(manifest, "tao.yaml") == []


def test_manifest_rules_catch_broken_manifests() -> None:
    broken, _ = rendered()
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


def test_manifest_lists_each_platform_with_its_own_archive_and_sha() -> None:
    manifest, text = rendered()
    version = project_version()
    assert manifest["spec"]["version"] == f"v{version}"
    assert "@@" not in text and text.startswith("# Generated by scripts/package-release")
    seen = []
    for platform in manifest["spec"]["platforms"]:
        labels = platform["selector"]["matchLabels"]
        key = f"{labels['os']}/{labels['arch']}"
        seen.append(key)
        assert platform["uri"].endswith(f"/v{version}/kubectl-tao-v{version}-{labels['os']}-{labels['arch']}.tar.gz")
        assert platform["sha256"] == hashlib.sha256(key.encode()).hexdigest()
        assert platform["bin"] == "kubectl-tao"
    assert seen == PLATFORMS


def test_the_tree_holds_a_template_with_no_sha256_to_go_stale() -> None:
    assert not (ROOT / "plugins" / "tao.yaml").exists()
    assert not re.search(r"\b[0-9a-f]{64}\b", TEMPLATE.read_text())
    assert "@@VERSION@@" in TEMPLATE.read_text() and "@@PLATFORMS@@" in TEMPLATE.read_text()


def stage(root: Path, mtime: int, umask_mode: int) -> Path:
    for relative, content, executable in [("b/x.py", b"x", False), ("a.txt", b"a", False), ("run", b"#!", True)]:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod((0o777 if executable else 0o666) & ~umask_mode)
        os.utime(path, (mtime, mtime))
    return root


def test_archive_bytes_depend_only_on_names_contents_and_exec_bits(tmp_path: Path) -> None:
    one, two = tmp_path / "one.tar.gz", tmp_path / "two.tar.gz"
    release.write_tar_gz(stage(tmp_path / "s1", 1_000_000, 0o022), one, 315532800)
    release.write_tar_gz(stage(tmp_path / "s2", 2_000_000, 0o077), two, 315532800)
    assert one.read_bytes() == two.read_bytes()
    with tarfile.open(one) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["a.txt", "b", "b/x.py", "run"]
    assert {(m.uid, m.gid, m.uname, m.gname, m.mtime) for m in members} == {(0, 0, "", "", 315532800)}
    assert {m.name: m.mode for m in members} == {"a.txt": 0o644, "b": 0o755, "b/x.py": 0o644, "run": 0o755}
    assert one.read_bytes()[4:8] == b"\0\0\0\0"  # gzip header without a timestamp


def wheel(path: Path, entries: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return path


def test_unpack_wheel_installs_purelib_and_platlib_and_skips_scripts(tmp_path: Path) -> None:
    built = wheel(tmp_path / "demo-1.0-py3-none-any.whl", {
        "demo/__init__.py": b"",
        "demo-1.0.dist-info/METADATA": b"Name: demo",
        "demo-1.0.data/platlib/fast.so": b"\x7fELF",
        "demo-1.0.data/scripts/demo": b"#!python",
    })
    release.unpack_wheel(built, tmp_path / "out")
    found = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert found == ["demo-1.0.dist-info/METADATA", "demo/__init__.py", "fast.so"]


def test_unpack_wheel_refuses_paths_outside_its_directory(tmp_path: Path) -> None:
    evil = wheel(tmp_path / "evil-1.0-py3-none-any.whl", {"../escape.py": b""})
    with pytest.raises(release.Failure, match=r"evil-1.0-py3-none-any.whl: unsafe path '../escape.py'"):
        release.unpack_wheel(evil, tmp_path / "out")
    assert not (tmp_path / "escape.py").exists()


def test_a_wheel_the_lock_does_not_pin_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECTL_TAO_CACHE", str(tmp_path))
    target = release.wheel_cache("linux/amd64", "3.11", ["demo"])
    target.mkdir(parents=True)
    (target / ".complete").write_text("")
    wheel(target / "surprise-2.0-py3-none-any.whl", {"surprise.py": b""})
    with pytest.raises(release.Failure, match=r"surprise-2.0-py3-none-any.whl is not pinned in "
                                              r"plugins/requirements.lock; add `surprise==2.0` there"):
        release.fetch_wheels("linux/amd64", "3.11", ["demo"], release.pinned())


def test_the_lock_pins_every_runtime_dependency() -> None:
    pins = release.pinned()
    _, requirements = release.project()
    for requirement in requirements:
        name = release.normalize(re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0])
        assert name in pins, f"{name} is not pinned in plugins/requirements.lock"


# A distribution whose import name is not its own name.
IMPORT_NAMES = {"typer-slim": "typer", "ruamel-yaml": "ruamel.yaml"}


def test_every_runtime_dependency_is_imported_by_the_package() -> None:
    """A dependency nothing imports is not declared, pinned, bundled or checked at start-up."""
    imported: set[str] = set()
    for path in (ROOT / "lib" / "kubectl_tao").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module)
    _, requirements = release.project()
    for requirement in requirements:
        name = release.normalize(re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0])
        module = IMPORT_NAMES.get(name, name.replace("-", "_"))
        assert any(m == module or m.startswith(f"{module}.") for m in imported), f"nothing imports {name}"


def test_tree_files_are_what_the_plugin_needs_and_nothing_else() -> None:
    files = release.tree_files()
    for needed in ("kubectl-tao", "lib/kubectl_tao/cli/main.py", "lib/kubectl_tao/cli/bootstrap.py", "pyproject.toml",
                   "templates/k8s/single-pod-job.yaml.tmpl", "schemas/job-record.schema.json",
                   "scripts/kubectl_complete-tao"):
        assert needed in files
    assert not [f for f in files if "__pycache__" in f or f.startswith((".venv", "tests", "cluster", "dist"))]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bogus"], "ERROR: unrecognized arguments: --bogus (see --help)"),
        (["--out"], "ERROR: argument --out: expected one argument (see --help)"),
        (["--platform", "windows/amd64"], "ERROR: --platform 'windows/amd64': use one of linux/amd64, linux/arm64, "
                                          "darwin/amd64, darwin/arm64"),
        (["--base-url", "http://mirror.local/tao"],
         "ERROR: --base-url 'http://mirror.local/tao': give an https:// URL"),
    ],
)
def test_package_release_usage_errors(args: list[str], message: str, tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, str(PACKAGE_RELEASE), "--out", str(tmp_path / "out"), *args],
                            capture_output=True, text=True, check=False, timeout=30)
    assert result.returncode == 2
    assert result.stderr == message + "\n"
    assert not (tmp_path / "out").exists()


def test_bad_source_date_epoch_is_a_usage_error(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, str(PACKAGE_RELEASE), "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, check=False, timeout=30,
                            env={**os.environ, "SOURCE_DATE_EPOCH": "yesterday"})
    assert result.returncode == 2
    assert result.stderr == ("ERROR: SOURCE_DATE_EPOCH must be seconds since 1970, at least 315532800 "
                             "(got 'yesterday')\n")


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
