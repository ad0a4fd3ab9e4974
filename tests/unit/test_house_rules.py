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
# Pure modules (core/): data in, data out. They may use each other, never the cluster (k8s/), the record store,
# the job lifecycle or the command line.
PURE = tuple(sorted(p.stem for p in (LIB / "core").glob("*.py") if p.stem != "__init__"))
PURE_MAY_USE = {f"{PACKAGE}.core", *(f"{PACKAGE}.core.{name}" for name in PURE)}
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


def _dynamic_import_target(node: ast.Call) -> str:
    """The module an `importlib.import_module(...)` / `__import__(...)` call names: the whole name of a constant,
    the constant head of an f-string ("kubectl_tao.commands." stands for every module under it); "" otherwise."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name not in ("import_module", "__import__") or not node.args:
        return ""
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value if arg.value.startswith(PACKAGE) else ""
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        head = str(arg.values[0].value)
        return head if head.startswith(f"{PACKAGE}.") else ""
    return ""


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
        elif isinstance(node, ast.Call) and _dynamic_import_target(node):
            head = _dynamic_import_target(node)
            targets = [m for m in modules if m == head or (head.endswith(".") and m.startswith(head))]
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
        path = LIB / "core" / f"{name}.py"
        bad = _package_imports(path, runtime_only=True) - PURE_MAY_USE
        if bad:
            offenders.append(f"{name}: {sorted(bad)}")
    assert offenders == []


# Feature packages held to core/'s rules: pure, and they may use core/ and their own modules only.
PURE_PACKAGES = ("progress",)


def test_pure_feature_packages_use_only_core_and_their_own_modules() -> None:
    offenders = []
    for package in PURE_PACKAGES:
        own = {f"{PACKAGE}.{package}", *(_module_name(p) for p in (LIB / package).glob("*.py"))}
        for path in sorted((LIB / package).glob("*.py")):
            bad = _package_imports(path, runtime_only=True) - PURE_MAY_USE - own
            if bad:
                offenders.append(f"{_module_name(path)}: {sorted(bad)}")
    assert offenders == []


def test_core_uses_no_feature_package() -> None:
    offenders = []
    for name in PURE:
        used = _package_imports(LIB / "core" / f"{name}.py")
        bad = {m for m in used if m.startswith(tuple(f"{PACKAGE}.{package}" for package in PURE_PACKAGES))}
        if bad:
            offenders.append(f"{name}: {sorted(bad)}")
    assert offenders == []


# Each layer and the layers above it that it must never import (CONTRIBUTING.md, "Layers").
NEVER_IMPORTS = {
    "k8s": ("jobs", "commands", "cli"),
    "store": ("jobs", "commands", "cli"),
    "jobs": ("commands", "cli"),
    "commands": ("cli.main", "cli.app"),
}


def test_lower_layers_never_import_the_layers_above() -> None:
    offenders = []
    for path in sorted(LIB.rglob("*.py")):
        module = _module_name(path)
        for layer, above in NEVER_IMPORTS.items():
            if module.startswith(f"{PACKAGE}.{layer}"):
                bad = {m for m in _package_imports(path) if m.startswith(tuple(f"{PACKAGE}.{a}" for a in above))}
                if bad:
                    offenders.append(f"{module}: {sorted(bad)}")
    assert offenders == []


def test_a_dynamic_import_counts_as_an_import() -> None:
    call = ast.parse('importlib.import_module(f"kubectl_tao.commands.{name}")').body[0].value
    plain = ast.parse('__import__("kubectl_tao.jobs.submit")').body[0].value
    other = ast.parse('importlib.import_module("json")').body[0].value
    assert [_dynamic_import_target(c) for c in (call, plain, other)] == [  # type: ignore[arg-type]
        "kubectl_tao.commands.",
        "kubectl_tao.jobs.submit",
        "",
    ]


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
        if path == LIB / "core" / "contract.py":
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
    """Only k8s/objects.py deletes, and there only `teardown` (with its helper for the Job by name) and the
    removal of a volume helper pod (by name and UID: not a job's object)."""
    deleting: list[str] = []
    for path in sorted(LIB.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.List) and node.elts and getattr(node.elts[0], "value", None) == "delete":
                    deleting.append(f"{path.relative_to(LIB)}:{func.name}")
    assert sorted(set(deleting)) == [
        "k8s/objects.py:_delete_job", "k8s/objects.py:remove_helper_pod", "k8s/objects.py:teardown"
    ]
    objects_tree = ast.parse((LIB / "k8s" / "objects.py").read_text(encoding="utf-8"))
    callers = {
        func.name
        for func in ast.walk(objects_tree)
        if isinstance(func, ast.FunctionDef)
        for node in ast.walk(func)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "_delete_job"
    }
    assert callers == {"teardown"}
