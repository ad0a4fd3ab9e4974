"""House rules checked against the tree: one process boundary, executable scripts, no stray prints of secrets."""

from __future__ import annotations

import ast
import os
import re
import subprocess
from pathlib import Path

from support import ROOT as REPO_ROOT

ROOT = REPO_ROOT
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


# ---------------------------------------------------------------- layers (see CONTRIBUTING.md)

PACKAGE = "kubectl_tao"
# Pure modules: data in, data out. They may use each other, errors and k8s.contract, never the cluster
# (k8s.kubectl, k8s.objects and the other k8s readers), the record store or the job lifecycle.
PURE = (
    "action", "blockyaml", "classify", "diagnose", "envfile", "errors", "gates", "gpuinventory", "kubelet_text",
    "kueue", "lint", "logs", "names", "output", "quantities", "redact", "render", "schemas", "templates", "valueclass",
    "k8s.contract",
)
PURE_MAY_USE = {f"{PACKAGE}.{name}" for name in PURE}
# Label/annotation keys, selectors and the GPU resource, spelled as values (no whitespace: prose may name them).
CONTRACT_WORDS = re.compile(
    r"app\.kubernetes\.io/|kubectl-tao\.io/|batch\.kubernetes\.io/|kueue\.x-k8s\.io/|nvidia\.com/gpu|"
    r"^tao-job(=|$)|(^|,)job-name(=|$)"
)
# A value that only looks like a key: the fallback slug of a record id with no letters (names.kubernetes_job_name).
CONTRACT_EXEMPT = {("names.py", "tao-job")}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(LIB.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _under_type_checking(tree: ast.AST) -> set[int]:
    """ids of import nodes inside `if TYPE_CHECKING:` (annotations only, nothing imported at run time)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING":
            skipped |= {id(inner) for stmt in node.body for inner in ast.walk(stmt)}
    return skipped


def _package_imports(path: Path, *, runtime_only: bool = False) -> set[str]:
    """The kubectl_tao modules `path` imports, anywhere in the file (function bodies too)."""
    modules = {_module_name(p) for p in LIB.rglob("*.py")}
    here = _module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _under_type_checking(tree) if runtime_only else set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        found |= {t for t in targets if t in modules and t != here and not (LIB.parent / t.replace(".", "/")).is_dir()}
    return found


def _import_graph() -> dict[str, set[str]]:
    return {_module_name(path): _package_imports(path) for path in sorted(LIB.rglob("*.py"))}


def test_no_import_cycles_counting_imports_inside_functions() -> None:
    graph = _import_graph()
    cycles = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for imported in sorted(graph[module]):
            if state.get(imported) == 1:
                cycles.append(" -> ".join([*path[path.index(imported):], imported]))
            elif imported not in state:
                visit(imported)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    assert cycles == []


def test_pure_modules_use_neither_the_cluster_the_store_nor_the_job_lifecycle() -> None:
    offenders = []
    for name in PURE:
        path = LIB / f"{name.replace('.', '/')}.py"
        bad = _package_imports(path, runtime_only=True) - PURE_MAY_USE
        if bad:
            offenders.append(f"{name}: {sorted(bad)}")
    assert offenders == []


def test_lower_layers_never_import_the_job_lifecycle_or_the_commands() -> None:
    offenders = []
    for path in sorted(LIB.rglob("*.py")):
        module = _module_name(path)
        if module.startswith((f"{PACKAGE}.k8s", f"{PACKAGE}.store")):
            bad = {m for m in _package_imports(path) if m.startswith((f"{PACKAGE}.jobs", f"{PACKAGE}.commands"))}
            if bad:
                offenders.append(f"{module}: {sorted(bad)}")
    assert offenders == []


def _string_values(tree: ast.AST) -> list[ast.Constant]:
    """String constants that are not docstrings."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_labels_annotations_selectors_and_the_gpu_resource_are_spelled_only_in_the_contract() -> None:
    offenders = []
    for path in sorted(LIB.rglob("*.py")):
        if path == LIB / "k8s" / "contract.py":
            continue
        for node in _string_values(ast.parse(path.read_text(encoding="utf-8"))):
            value = node.value
            if any(ch.isspace() for ch in value) or not CONTRACT_WORDS.search(value):
                continue
            if (path.name, value) not in CONTRACT_EXEMPT:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {value!r}")
    assert offenders == []


def test_the_contract_check_finds_a_planted_label() -> None:
    planted = ast.parse('LABEL = "tao-job"\nSEL = f"{x},job-name={y}"\nOK = "no node offers nvidia.com/gpu to pods"\n')
    found = [n.value for n in _string_values(planted) if not any(c.isspace() for c in n.value)
             and CONTRACT_WORDS.search(n.value)]
    assert found == ["tao-job", ",job-name="]


def test_one_teardown_removes_a_jobs_objects() -> None:
    """Only k8s/objects.py deletes, and there only `teardown` (with its helper for the Job by name)."""
    deleting: list[str] = []
    for path in sorted(LIB.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.List) and node.elts and getattr(node.elts[0], "value", None) == "delete":
                    deleting.append(f"{path.relative_to(LIB)}:{func.name}")
    assert sorted(set(deleting)) == ["k8s/objects.py:_delete_job", "k8s/objects.py:teardown"]
    objects_tree = ast.parse((LIB / "k8s" / "objects.py").read_text(encoding="utf-8"))
    callers = {
        func.name
        for func in ast.walk(objects_tree)
        if isinstance(func, ast.FunctionDef)
        for node in ast.walk(func)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "_delete_job"
    }
    assert callers == {"teardown"}
