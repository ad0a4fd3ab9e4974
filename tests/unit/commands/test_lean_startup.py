"""What each start-up path imports, in a fresh interpreter (sys.modules at exit): `--help` imports none of the
heavy dependencies and no lifecycle module, `version` only its own verb, and status reads the kubeconfig without
ruamel.yaml and runs kubectl without sh. Not a timing test: BENCHMARKS.md has the times; this keeps the paths from
growing back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import ROOT
from support.fake_kubectl import fixture_json

from kubectl_tao.store.records import RecordStore

ENTRY = ROOT / "kubectl-tao"
HEAVY = {"jsonschema", "ruamel.yaml", "sh", "asyncio"}
RUN = """\
import json, os, runpy, sys
sys.argv = [os.environ["LEAN_ENTRY"], *json.loads(os.environ["LEAN_ARGS"])]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as exc:
    code = exc.code
with open(os.environ["LEAN_OUT"], "w") as out:
    json.dump({"code": code, "modules": sorted(sys.modules)}, out)
"""


def _run(tmp_path: Path, *argv: str, **env: str) -> tuple[int, set[str], str]:
    python = ROOT / ".venv" / "bin" / "python"
    result_file = tmp_path / "modules.json"
    full_env = {
        **os.environ,
        "HOME": str(tmp_path),
        "TAO_STATE_DIR": str(tmp_path / "state"),
        "KUBECONFIG": str(tmp_path / "kubeconfig"),
        "LEAN_ENTRY": str(ENTRY),
        "LEAN_ARGS": json.dumps(argv),
        "LEAN_OUT": str(result_file),
        **env,
    }
    for name in ("TAO_K8S_CONTEXT", "TAO_K8S_NAMESPACE", "KUBECTL_TAO_TRACE"):
        full_env.pop(name, None)
    proc = subprocess.run([str(python) if python.exists() else sys.executable, "-c", RUN], env=full_env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert result_file.exists(), proc.stderr[-2000:]
    result = json.loads(result_file.read_text())
    return result["code"], set(result["modules"]), proc.stdout


def _verbs(modules: set[str]) -> set[str]:
    return {m for m in modules if m.startswith("kubectl_tao.commands.")} - {
        "kubectl_tao.commands.common", "kubectl_tao.commands.session", "kubectl_tao.commands.jobflags",
    }


@pytest.mark.parametrize("argv", [["--help"], [], ["submit", "--help"]], ids=["--help", "no-args", "submit-help"])
def test_help_imports_no_heavy_dependency(tmp_path: Path, argv: list[str]) -> None:
    code, modules, out = _run(tmp_path, *argv)
    assert code == 0 and "Usage: kubectl tao" in out
    assert HEAVY & modules == set()
    assert not {m for m in modules if m.startswith(("kubectl_tao.jobs", "kubectl_tao.store"))}


def test_version_builds_only_its_own_verb(tmp_path: Path) -> None:
    code, modules, out = _run(tmp_path, "version")
    assert code == 0 and out.startswith("kubectl-tao ")
    assert HEAVY & modules == set()
    assert _verbs(modules) == {"kubectl_tao.commands.version"}


# The kubeconfig as kubectl writes it (block style).
KUBECTL_WRITTEN = """\
apiVersion: v1
clusters:
- cluster:
    server: https://127.0.0.1:6443
  name: lab
contexts:
- context:
    cluster: lab
    namespace: tao-jobs
    user: lab
  name: lab
current-context: lab
kind: Config
preferences: {}
users:
- name: lab
  user:
    token: placeholder
"""


def _job_answered_by(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fixture: str
) -> tuple[RecordStore, Any, Path]:
    """A store with one opened record, and a kubectl that answers every call with the FIXTURE job and its pods
    (`<fixture>.job.json`, `<fixture>.pods.json`)."""
    (tmp_path / "kubeconfig").write_text(KUBECTL_WRITTEN)
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps({"kind": "List", "items": [fixture_json(f"{fixture}.job.json"),
                                                            *fixture_json(f"{fixture}.pods.json")["items"]]}))
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(f"#!/bin/sh\ncat '{answer}'\n")
    kubectl.chmod(0o755)
    monkeypatch.setenv("TAO_STATE_DIR", str(tmp_path / "state"))
    store = RecordStore()
    record = store.open(platform="kubernetes", image="busybox", network_arch="dino", action="train",
                        storage_tier="A", results_dir="/workspace/results/x")
    return store, record, kubectl


def test_status_imports_neither_ruamel_jsonschema_nor_sh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, record, kubectl = _job_answered_by(tmp_path, monkeypatch, "running")
    store.mark(record.id, "RUNNING", message="applied", backend_ref="tao-jobs/dino-train-3f9a1c")
    store.update_extra(record.id, namespace="tao-jobs", job_name="dino-train-3f9a1c")
    _run(tmp_path, "status", record.id, KUBECTL_TAO_KUBECTL=str(kubectl))  # writes the state it saw (validated)
    before = store.path(record.id).read_bytes()
    code, modules, out = _run(tmp_path, "status", record.id, KUBECTL_TAO_KUBECTL=str(kubectl))
    assert code == 0 and record.id in out and "RUNNING" in out
    assert store.path(record.id).read_bytes() == before  # nothing new to write: no schema to load
    assert HEAVY & modules == set()
    assert _verbs(modules) == {"kubectl_tao.commands.status", "kubectl_tao.commands.present"}


def test_status_of_a_finished_job_imports_no_diagnosis_of_its_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job that completed has no cause to show: the table of causes (compiled at import) stays unloaded."""
    store, record, kubectl = _job_answered_by(tmp_path, monkeypatch, "complete")
    name = fixture_json("complete.job.json")["metadata"]["name"]
    store.mark(record.id, "RUNNING", message="applied", backend_ref=f"tao-jobs/{name}")
    store.update_extra(record.id, namespace="tao-jobs", job_name=name)
    _run(tmp_path, "status", record.id, KUBECTL_TAO_KUBECTL=str(kubectl))  # captures the ending
    assert store.show(record.id)["terminal_state"] == "COMPLETE"
    code, modules, out = _run(tmp_path, "status", record.id, KUBECTL_TAO_KUBECTL=str(kubectl))
    assert code == 0 and "COMPLETE" in out
    assert {"kubectl_tao.diagnosis.causes", "kubectl_tao.diagnosis.ranklogs"} & modules == set()


def test_submit_imports_neither_ruamel_jsonschema_nor_sh(tmp_path: Path) -> None:
    (tmp_path / "kubeconfig").write_text(KUBECTL_WRITTEN)
    job = ["submit", "--image", "busybox", "--command", "true", "--pvc", "data"]
    code, modules, out = _run(tmp_path, *job, "--gpus", "0", "--dry-run=client", "-o", "json")
    assert code == 0 and json.loads(out)["kind"] == "Job"
    assert HEAVY & modules == set()
    # With the gates: here kubectl is refused at once, after every gate's module was loaded and its call started.
    kubectl = tmp_path / "kubectl"
    kubectl.write_text("#!/bin/sh\necho 'The connection to the server 127.0.0.1:6443 was refused' >&2\nexit 1\n")
    kubectl.chmod(0o755)
    code, modules, _ = _run(tmp_path, *job, "--gpus", "8", KUBECTL_TAO_KUBECTL=str(kubectl))
    assert code == 3
    assert {"kubectl_tao.gates.checks", "kubectl_tao.gates.capacity", "kubectl_tao.gates.permissions"} <= modules
    assert (HEAVY | {"concurrent.futures", "logging"}) & modules == set()
