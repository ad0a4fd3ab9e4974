"""House rules checked against the tree: one process boundary, executable scripts, no stray prints of secrets."""

from __future__ import annotations

import ast
import os
import re
import subprocess
from collections.abc import Callable, Collection
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
# Every module's layer (CONTRIBUTING.md, "Layers"). A layer package holds one layer; a feature package groups what
# a maintainer changes together, so its modules sit at different layers: each is named here.
#   pure      data in, data out: no cluster, no record store, no job lifecycle, no command line
#   cluster   kubectl calls: never the job lifecycle or the command line
#   store     the record store: never the job lifecycle or the command line
#   jobs      the job lifecycle: never the command line
#   commands  the verbs: never the CLI's entrypoint
LAYER_PACKAGES = {"core": "pure", "progress": "pure", "k8s": "cluster", "store": "store", "jobs": "jobs",
                  "commands": "commands", "cli": "cli"}
FEATURE_LAYERS = {
    "gates": {
        "gatefacts": "pure", "gaterequest": "pure", "verdicts": "pure", "gpufit": "pure", "gpuinventory": "pure",
        "gpuhealth": "pure", "quota": "pure", "noderuntime": "pure",
        "capacity": "cluster", "gatelists": "cluster", "gatetypes": "cluster", "permissions": "cluster",
        "queues": "cluster",
        "checks": "jobs", "fit": "jobs", "gpus": "jobs",
    },
    "diagnosis": {
        "causes": "pure", "causefacts": "pure", "jobstate": "pure", "diagnose": "pure", "nccldebug": "pure",
        "kueue": "pure",
        "ranklogs": "jobs", "explain": "jobs",
    },
    "restarts": {"table": "pure", "signs": "pure", "history": "pure", "servercheck": "cluster"},
    "manifests": {"render": "pure", "action": "pure", "actionfields": "pure", "tomlwriter": "pure", "yamltext": "pure",
                  "kubelet_text": "pure"},
    "workflows": {"spec": "pure", "objects": "pure", "runs": "jobs"},
    "volumes": {"volumecopy": "pure", "resultsview": "pure", "volume_helper": "jobs", "datacopy": "jobs",
                "results": "jobs"},
}
# The layers each layer must never import (pure modules: test_pure_modules_use_only_pure_modules).
NEVER_IMPORTS = {
    "cluster": ("jobs", "commands", "cli"),
    "store": ("jobs", "commands", "cli"),
    "jobs": ("commands", "cli"),
}


def layer_of(module: str) -> str:
    """The layer of kubectl_tao module MODULE (a feature package's __init__ is pure)."""
    parts = module.split(".")[1:]
    if not parts:
        return "pure"
    if parts[0] in LAYER_PACKAGES:
        return LAYER_PACKAGES[parts[0]]
    if parts[0] in FEATURE_LAYERS:
        return FEATURE_LAYERS[parts[0]].get(parts[1], "undeclared") if len(parts) > 1 else "pure"
    return "pure"  # a top-level module


def _modules() -> list[tuple[str, Path]]:
    return [(_module_name(path), path) for path in sorted(LIB.rglob("*.py"))]


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


def test_every_package_is_a_layer_or_a_feature_package_and_every_feature_module_has_a_layer() -> None:
    packages = {p.name for p in LIB.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages - set(LAYER_PACKAGES) - set(FEATURE_LAYERS) == set(), "add it to LAYER_PACKAGES or FEATURE_LAYERS"
    missing = [f"{package}/{path.stem}" for package, layers in FEATURE_LAYERS.items()
               for path in sorted((LIB / package).glob("*.py")) if path.stem != "__init__" and path.stem not in layers]
    assert missing == [], "name the layer of each new module in FEATURE_LAYERS"
    gone = [f"{package}/{name}" for package, layers in FEATURE_LAYERS.items() for name in layers
            if not (LIB / package / f"{name}.py").exists()]
    assert gone == []


def test_pure_modules_use_only_pure_modules() -> None:
    """core/, progress/ and the pure modules of the feature packages use no cluster, record store, job lifecycle
    or command line, wherever they sit (imports for annotations only do not count)."""
    offenders = []
    for module, path in _modules():
        if layer_of(module) != "pure":
            continue
        bad = {m for m in _package_imports(path, runtime_only=True) if layer_of(m) != "pure"}
        if bad:
            offenders.append(f"{module}: {sorted(bad)}")
    assert offenders == []


def test_core_uses_no_feature_package() -> None:
    """core/ is the bottom: the feature packages build on it, never the other way round."""
    offenders = []
    for module, path in _modules():
        if module.startswith(f"{PACKAGE}.core"):
            bad = {m for m in _package_imports(path) if m.split(".")[1] != "core"}
            if bad:
                offenders.append(f"{module}: {sorted(bad)}")
    assert offenders == []


def test_lower_layers_never_import_the_layers_above() -> None:
    offenders = []
    entry = (f"{PACKAGE}.cli.main", f"{PACKAGE}.cli.app")
    for module, path in _modules():
        above = NEVER_IMPORTS.get(layer_of(module), ())
        imported = _package_imports(path)
        bad = {m for m in imported if layer_of(m) in above}
        if layer_of(module) == "commands":
            bad |= {m for m in imported if m in entry}
        if bad:
            offenders.append(f"{module}: {sorted(bad)}")
    assert offenders == []


def test_the_layer_check_places_each_module_by_its_package_or_its_own_entry() -> None:
    assert layer_of(f"{PACKAGE}.gates.verdicts") == "pure" and layer_of(f"{PACKAGE}.gates.capacity") == "cluster"
    assert layer_of(f"{PACKAGE}.gates.checks") == "jobs" and layer_of(f"{PACKAGE}.core.names") == "pure"
    assert layer_of(f"{PACKAGE}.diagnosis.explain") == "jobs" and layer_of(f"{PACKAGE}.k8s.kubectl") == "cluster"
    assert layer_of(f"{PACKAGE}.gates.new_module") == "undeclared"


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
    removal of a volume helper pod and its short-lived Secret (`_start_remove`, by name and UID: not a job's
    objects), for this run's own (`_remove_raw`) or those a killed kubectl-tao left (`remove_left_helper_pods`)."""
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
        "k8s/objects.py:_delete_job", "k8s/objects.py:_start_remove", "k8s/objects.py:teardown"
    ]
    raw_callers = {
        func.name
        for func in ast.walk(ast.parse((LIB / "k8s" / "objects.py").read_text(encoding="utf-8")))
        if isinstance(func, ast.FunctionDef)
        for node in ast.walk(func)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("_remove_raw", "_start_remove")
    }
    assert raw_callers == {"remove_helper_pod", "remove_helper_secret", "_remove_raw", "remove_left_helper_pods"}
    objects_tree = ast.parse((LIB / "k8s" / "objects.py").read_text(encoding="utf-8"))
    callers = {
        func.name
        for func in ast.walk(objects_tree)
        if isinstance(func, ast.FunctionDef)
        for node in ast.walk(func)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "_delete_job"
    }
    assert callers == {"teardown"}


# A stored job record is read through store/jobrecord.py's typed values (Tracked.job, Tracked.k8s): a read of
# `record["key"]`, `record.get("key")` (or `rec`, `extra`, `extras`, `x.record`, `x.extra`) outside store/ is a new
# string-key reader. Each module allowed one says why.
RECORD_NAMES = {"record", "rec", "extra", "extras"}
RECORD_READS_ALLOWED = {
    "jobs/early_read.py": "reads the two files raw, before the store checks them, only to prestart the first "
                          "kubectl call of `status` (a guess the checked, typed record then confirms or drops)",
    "jobs/resubmit.py": "turns the request a record kept back into a JobRequest, flag by flag with its own "
                        "errors (the job value's reader, beside the typed record)",
    "jobs/submit.py": "`plan.record` is the fields a record is opened with (recordfields.open_fields), before "
                      "any record exists, not a stored record",
}


def _record_named(node: ast.AST) -> str | None:
    """NODE as the house rules print a record name: the name itself, or `….attr` for an attribute of that name."""
    if isinstance(node, ast.Name) and node.id in RECORD_NAMES:
        return node.id
    if isinstance(node, ast.Attribute) and node.attr in RECORD_NAMES:
        return f"….{node.attr}"
    return None


def _record_key_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of each string-key read of a record: NAME["key"] or NAME.get("key"), NAME a record name or
    an attribute of that name; writes (a subscript assigned to) are not reads."""

    named = _record_named

    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and named(node.value)
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
            found.append((node.lineno, f'{named(node.value)}["{node.slice.value}"]'))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and named(node.func.value) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            found.append((node.lineno, f'{named(node.func.value)}.get("{node.args[0].value}")'))
    return found


def _outside_the_store(
    find: Callable[[ast.AST], list[tuple[int, str]]], allowed: Collection[str]
) -> tuple[list[str], set[str]]:
    """What FIND reports in each package module outside store/ ("path:line: text"), the ALLOWED modules aside;
    and which allowed modules still had something to report."""
    offenders: list[str] = []
    used: set[str] = set()
    for path in sorted(LIB.rglob("*.py")):
        relative = path.relative_to(LIB).as_posix()
        if relative.startswith("store/"):
            continue
        found = find(ast.parse(path.read_text(encoding="utf-8")))
        if found and relative in allowed:
            used.add(relative)
            continue
        offenders += [f"{relative}:{line}: {text}" for line, text in found]
    return offenders, used


def test_records_are_read_typed_outside_the_store() -> None:
    offenders, used = _outside_the_store(_record_key_reads, RECORD_READS_ALLOWED)
    assert offenders == [], "read the record through Tracked.job / Tracked.k8s (store/jobrecord.py)"
    assert used == set(RECORD_READS_ALLOWED), "an allowed module no longer reads keys: drop it from the list"


def test_the_record_read_check_finds_a_planted_read() -> None:
    planted = ast.parse('a = tracked.extra.get("nodes")\nb = record["id"]\nrecord["x"] = 1\nc = rec.get(key)\n'
                        'd = row.get("id")\n')
    assert [text for _line, text in _record_key_reads(planted)] == ['….extra.get("nodes")', 'record["id"]']


# A job record is written through its typed values too: outside store/, a write builds or changes a JobRecord /
# K8sRecord (or a part of one: `K8sRecord.partial(...)`, `.changed(...)`) and the store writes its `to_stored()`.
# A new dict writer is code that, outside store/, sets or deletes a key of a record name (`record["k"] = v`),
# calls a dict method that changes one (`extra.update(...)`), calls the store's stored-form writer
# `update_extra` (for tests and tools), hands a dict display to a store write (`.mark`, `.update_k8s`,
# `.merge_k8s`, `.open`) or to an `extra=` / `k8s=` / `extra_fields=` argument, or puts one into `….record` /
# `….extra`. Each module allowed one says why.
RECORD_WRITES_ALLOWED = {
    "jobs/plan.py": "`record` is the fields a record is opened with (store.open's keyword arguments, checked by "
                    "store/recordfields.open_fields), built before any record exists",
}
_DICT_METHODS = {"setdefault", "update", "pop", "popitem", "clear"}
_STORE_WRITES = {"mark", "update_k8s", "merge_k8s", "open"}
_PART_KEYWORDS = {"extra", "k8s", "extra_fields"}


def _record_dict_writes(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of each place that writes a record as a dict (see above)."""

    named = _record_named

    def a_dict(node: ast.AST) -> bool:
        if isinstance(node, ast.IfExp):
            return a_dict(node.body) or a_dict(node.orelse)
        return isinstance(node, (ast.Dict, ast.DictComp)) or (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict")

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)) and named(node.value):
            found.append((node.lineno, f"{named(node.value)}[…] set"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method = node.func.attr
            if method in _DICT_METHODS and named(node.func.value):
                found.append((node.lineno, f"{named(node.func.value)}.{method}(…)"))
            elif method == "update_extra":
                found.append((node.lineno, "….update_extra(…)"))
            elif method in _STORE_WRITES and (any(a_dict(arg) for arg in node.args) or any(
                    a_dict(kw.value) for kw in node.keywords if kw.arg not in _PART_KEYWORDS)):
                found.append((node.lineno, f"….{method}(a dict)"))
        if isinstance(node, ast.Call):
            found += [(node.lineno, f"{kw.arg}=a dict") for kw in node.keywords
                      if kw.arg in _PART_KEYWORDS and a_dict(kw.value)]
        if isinstance(node, ast.Assign) and a_dict(node.value):
            found += [(node.lineno, f"{named(target)} = a dict") for target in node.targets
                      if isinstance(target, ast.Attribute) and named(target)]
    return sorted(found)


def test_records_are_written_typed_outside_the_store() -> None:
    offenders, used = _outside_the_store(_record_dict_writes, RECORD_WRITES_ALLOWED)
    assert offenders == [], "write the record typed: K8sRecord.partial / .changed, store.update_k8s / merge_k8s"
    assert used == set(RECORD_WRITES_ALLOWED), "an allowed module no longer writes a dict: drop it from the list"


def test_the_record_write_check_finds_a_planted_write() -> None:
    planted = ast.parse(
        'record["x"] = 1\n'
        'del tracked.extra["y"]\n'
        'extra.setdefault("history", {})\n'
        'store.update_extra(rid, job_uid=uid)\n'
        'store.mark(rid, "ERROR", extra={"left_behind": left})\n'
        'store.mark(rid, "ERROR", k8s={"left_behind": left} if left else None)\n'
        'store.update_k8s(rid, **{"ttl_hold": None})\n'
        'launch(kc, plan, k8s=dict(submit_phase="x"))\n'
        'tracked.extra = {**tracked.extra, **fields}\n'
        # typed writes and reads, and other dicts, pass
        'store.update_k8s(rid, ttl_hold=None)\n'
        'store.mark(rid, "ERROR", k8s=K8sRecord.partial(left_behind=()))\n'
        'row["x"] = 1\n'
        'value = record["id"]\n'
        'f.open(mode)\n'
    )
    assert [text for _line, text in _record_dict_writes(planted)] == [
        "record[…] set", "….extra[…] set", "extra.setdefault(…)", "….update_extra(…)", "extra=a dict",
        "k8s=a dict", "….update_k8s(a dict)", "k8s=a dict", "….extra = a dict",
    ]
