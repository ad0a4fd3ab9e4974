"""House rules checked against the tree: one process boundary, executable scripts, no stray prints of secrets."""

from __future__ import annotations

import ast
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "lib" / "kubectl_tao"
PROCESS_MODULES = {"subprocess", "sh", "pty", "multiprocessing"}
PROCESS_CALLS = {"system", "popen", "execv", "execvp", "execve", "spawnv", "spawnvp", "fork", "posix_spawn"}


def _imports_and_os_calls(path: Path) -> tuple[set[str], set[str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported: set[str] = set()
    os_calls: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
            and node.attr in PROCESS_CALLS
        ):
            os_calls.add(node.attr)
    return imported, os_calls


def test_only_the_kubectl_wrapper_starts_processes() -> None:
    offenders = []
    for path in sorted(LIB.rglob("*.py")):
        if path == LIB / "k8s" / "kubectl.py":
            continue
        imported, os_calls = _imports_and_os_calls(path)
        bad = (imported & PROCESS_MODULES) | os_calls
        if bad:
            offenders.append(f"{path.relative_to(ROOT)}: {sorted(bad)}")
    assert offenders == []


def test_kubectl_wrapper_is_where_processes_start() -> None:
    imported, os_calls = _imports_and_os_calls(LIB / "k8s" / "kubectl.py")
    assert "sh" in imported
    assert "execvp" in os_calls


def test_every_script_is_tracked_executable() -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-s", "scripts", "kubectl-tao", ".ci/run"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    modes = {line.split()[-1]: line.split()[0] for line in listed}
    on_disk = [p for p in (ROOT / "scripts").iterdir() if p.is_file()]
    assert on_disk, "scripts/ is empty"
    for path in on_disk:
        assert os.access(path, os.X_OK), f"{path} is not executable"
        rel = str(path.relative_to(ROOT))
        if path.is_symlink():  # another name for a script next to it (the reference's tao_job_record.py, ...)
            target = path.resolve()
            assert target.parent == ROOT / "scripts" and not target.is_symlink(), f"{rel} -> {target}"
            continue
        if rel in modes:
            assert modes[rel] == "100755", f"{rel} is tracked as {modes[rel]}"


def test_shell_scripts_use_strict_mode() -> None:
    for path in sorted((ROOT / "scripts").iterdir()):
        text = path.read_text(encoding="utf-8", errors="replace")
        if text.startswith("#!/usr/bin/env bash"):
            assert "set -euo pipefail" in text, f"{path.name} lacks set -euo pipefail"
