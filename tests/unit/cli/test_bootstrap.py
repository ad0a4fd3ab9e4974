"""Start-up before any dependency is imported: a release archive's bundled packages go on sys.path, and a
missing dependency gets a one-line error whose fix fits the way kubectl-tao was installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import ROOT as REPO_ROOT

from kubectl_tao.cli import bootstrap

ROOT = REPO_ROOT


def archive_layout(root: Path, tags: tuple[str, ...] = ("cp311", "cp312", "cp313", "cp314")) -> Path:
    (root / "lib").mkdir(parents=True)
    (root / "vendor" / "common").mkdir(parents=True)
    for tag in tags:
        (root / "vendor" / tag).mkdir()
    (root / "pyproject.toml").write_text("")
    return root


def krew_layout(krew_root: Path, **kwargs: Any) -> Path:
    (krew_root / "receipts").mkdir(parents=True)
    return archive_layout(krew_root / "store" / "tao" / "v0.1.0", **kwargs)


def test_install_method_tells_the_five_ways_apart(tmp_path: Path) -> None:
    assert bootstrap.install_method(krew_layout(tmp_path / "krew"), sys.prefix) == "krew"
    assert bootstrap.install_method(archive_layout(tmp_path / "unpacked"), sys.prefix) == "archive"
    assert bootstrap.install_method(ROOT, sys.prefix) == "checkout"
    assert bootstrap.install_method(None, "/home/u/.local/share/pipx/venvs/kubectl-tao") == "pipx"
    assert bootstrap.install_method(None, "/home/u/venvs/tools") == "pip"


def test_a_store_without_receipts_is_not_krew(tmp_path: Path) -> None:
    assert bootstrap.install_method(archive_layout(tmp_path / "store" / "tao" / "v1"), sys.prefix) == "archive"


@pytest.mark.parametrize(
    ("method", "fix"),
    [
        ("krew", "reinstall: `kubectl krew uninstall tao && kubectl krew install --manifest=tao.yaml "
                 "--archive=kubectl-tao-vVERSION-OS-ARCH.tar.gz` (both from the release)"),
        ("archive", "unpack this platform's release archive (kubectl-tao-vVERSION-OS-ARCH.tar.gz) again"),
        ("checkout", "run `make venv` in "),
        ("pipx", "run `pipx reinstall kubectl-tao`"),
        ("pip", "-m pip install --force-reinstall kubectl-tao` (air-gapped: add `--no-index --find-links WHEELHOUSE`)"),
    ],
)
def test_missing_message_names_the_fix_for_the_install_method(tmp_path: Path, method: str, fix: str) -> None:
    root = archive_layout(tmp_path / "root") if method in ("krew", "archive") else ROOT
    message = bootstrap.missing_message(method, ["typer", "jsonschema"], root, version=(3, 12))
    assert fix in message
    assert "\n" not in message


def test_an_unbundled_python_version_is_named_with_the_supported_ones(tmp_path: Path) -> None:
    root = krew_layout(tmp_path / "krew", tags=("cp311", "cp312", "cp313", "cp314"))
    message = bootstrap.missing_message("krew", ["rpds"], root, version=(3, 15))
    assert message.startswith(
        "kubectl-tao: it bundles compiled packages for Python 3.11, 3.12, 3.13, 3.14, and python3 on PATH is "
        "Python 3.15; put a python3 of a supported version first on PATH, or reinstall:"
    )


def test_pip_and_checkout_messages_name_the_missing_packages_and_the_python() -> None:
    message = bootstrap.missing_message("pip", ["jsonschema"], python="/opt/venv/bin/python")
    assert message.startswith("kubectl-tao was installed without its dependencies (jsonschema missing for "
                              "/opt/venv/bin/python); run `/opt/venv/bin/python -m pip install")
    checkout = bootstrap.missing_message("checkout", ["typer", "sh"], ROOT, python="/usr/bin/python3")
    assert checkout.startswith("kubectl-tao needs its Python packages (typer, sh missing for /usr/bin/python3)")


def test_bundled_packages_go_right_after_lib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = archive_layout(tmp_path / "root")
    lib = str(root / "lib")
    monkeypatch.setattr(sys, "path", ["/first", lib, "/site-packages"])
    bootstrap.add_bundled_packages(root)
    tag = bootstrap.python_tag()
    assert sys.path == ["/first", lib, str(root / "vendor" / "common"), str(root / "vendor" / tag), "/site-packages"]
    bootstrap.add_bundled_packages(root)  # twice is harmless
    assert len(sys.path) == 5


def test_no_vendor_directory_leaves_sys_path_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", ["/a", "/b"])
    bootstrap.add_bundled_packages(ROOT)
    assert sys.path == ["/a", "/b"]


def test_missing_dependencies_finds_without_importing() -> None:
    assert bootstrap.missing_dependencies(("json", "no_such_module_kt", "no_such_pkg.sub")) == [
        "no_such_module_kt", "no_such_pkg.sub"]
    assert bootstrap.missing_dependencies() == []


def test_console_script_refuses_with_the_pip_fix(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(bootstrap, "missing_dependencies", lambda: ["jsonschema"])
    monkeypatch.setattr(sys, "prefix", "/home/u/.local/share/pipx/venvs/kubectl-tao")
    assert bootstrap.console_main() == 2
    err = capsys.readouterr().err
    assert err == "error: kubectl-tao's pipx environment lacks jsonschema; run `pipx reinstall kubectl-tao`\n"


def test_too_old_python_message() -> None:
    assert bootstrap.too_old_message((3, 9), "/usr/bin/python3") == (
        "kubectl-tao needs Python >= 3.11, but /usr/bin/python3 is 3.9; put a newer python3 first on PATH")


def test_a_checkout_without_its_venv_says_make_venv(tmp_path: Path) -> None:
    """The real entrypoint, run by a Python that sees none of the packages (-S: no site-packages), in a checkout
    with no .venv."""
    copy = tmp_path / "checkout"
    shutil.copytree(ROOT / "lib", copy / "lib", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("kubectl-tao", "pyproject.toml"):
        shutil.copy2(ROOT / name, copy / name)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    result = subprocess.run([sys.executable, "-S", str(copy / "kubectl-tao"), "--help"], env=env,
                            capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: kubectl-tao needs its Python packages (typer, click, sh, ruamel.yaml, ")
    assert result.stderr.endswith(f"run `make venv` in {copy} (or `make install`), or `{sys.executable} -m pip "
                                  "install .`\n")
    assert sorted(os.listdir(copy)) == ["kubectl-tao", "lib", "pyproject.toml"]


def test_the_entrypoint_exits_with_the_code_after_flushing_everything(tmp_path: Path) -> None:
    """What was written reaches a pipe, and the exit codes are kept."""
    env = {**os.environ, "TAO_STATE_DIR": str(tmp_path / "state"), "HOME": str(tmp_path)}
    helped = subprocess.run([str(REPO_ROOT / "kubectl-tao"), "submit", "--help"], capture_output=True, text=True,
                            env=env, timeout=60, check=False)
    assert helped.returncode == 0 and len(helped.stdout) > 4096
    assert helped.stdout.rstrip().endswith("never fit this cluster.")
    missing = subprocess.run([str(REPO_ROOT / "kubectl-tao"), "status", "no-such-job"], capture_output=True, text=True,
                             env=env, timeout=60, check=False)
    assert missing.returncode == 1 and missing.stderr.startswith("error: no job record no-such-job")


def test_exit_handlers_a_wrapper_registered_still_run_at_the_entrypoints_exit(tmp_path: Path) -> None:
    """A coverage tool or a wrapper (bench/run.py's peak-RSS report) registers atexit handlers around the
    entrypoint: they run before the process leaves."""
    wrapper = (
        "import atexit, runpy, sys\n"
        f"atexit.register(lambda: open({str(tmp_path / 'ran')!r}, 'w').write('yes'))\n"
        "sys.argv = sys.argv[1:]\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n"
    )
    env = {**os.environ, "TAO_STATE_DIR": str(tmp_path / "state"), "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", wrapper, str(REPO_ROOT / "kubectl-tao"), "version"],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.startswith("kubectl-tao ")
    assert (tmp_path / "ran").read_text() == "yes"
