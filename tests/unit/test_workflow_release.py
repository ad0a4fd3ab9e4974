"""templates/k8s/workflow-release.py, the script a step's rank 0 runs after its command: which Jobs it releases
or removes, judged from the status.json TAO writes, with the API calls recorded instead of sent."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "templates" / "k8s" / "workflow-release.py"


def load(monkeypatch: pytest.MonkeyPatch, plan: dict[str, Any]) -> tuple[ModuleType, list[tuple[str, str, Any]]]:
    spec = importlib.util.spec_from_file_location("workflow_release", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    calls: list[tuple[str, str, Any]] = []
    monkeypatch.setattr(module, "api", lambda method, job, body, patch="": calls.append((method, job, body)) or 200)
    monkeypatch.setenv("KUBECTL_TAO_WF_PLAN", json.dumps(plan))
    monkeypatch.delenv("JOB_COMPLETION_INDEX", raising=False)
    return module, calls


def status_json(results: Path, *kpis: dict[str, float]) -> None:
    (results / "train").mkdir(parents=True)
    lines = [json.dumps({"date": "12/6/2026", "time": "1:2:3", "status": "RUNNING", "kpi": kpi}) for kpi in kpis]
    (results / "train" / "status.json").write_text("\n".join([*lines, '{"torn'] ) + "\n")


def plan(results: Path, threshold: float = 0.5) -> dict[str, Any]:
    return {"step": "train", "job": "j-train", "next": [{
        "name": "evaluate", "job": "j-eval", "after": ["j-export"],
        "gate": {"step": "train", "kpi": "val_mAP", "op": ">=", "threshold": threshold, "results": str(results)},
    }]}


def run(module: ModuleType, monkeypatch: pytest.MonkeyPatch, status: int) -> int:
    monkeypatch.setattr("sys.argv", ["release", str(status)])
    return int(module.main())


def test_a_passed_gate_releases_the_successor_and_notes_the_outcome(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    status_json(tmp_path, {"val_mAP": 0.2}, {"val_mAP": 0.61})
    module, calls = load(monkeypatch, plan(tmp_path))
    assert run(module, monkeypatch, 0) == 0
    assert calls[0] == ("PATCH", "j-eval", {"spec": {"suspend": False}})
    method, job, body = calls[1]
    assert (method, job) == ("PATCH", "j-train")
    noted = json.loads(body["metadata"]["annotations"]["kubectl-tao.io/workflow-gate"])
    assert noted == [{"step": "evaluate", "gate": "train.val_mAP >= 0.5", "value": 0.61, "passed": True}]


def test_a_failed_gate_removes_the_held_steps_and_notes_the_value(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    status_json(tmp_path, {"val_mAP": 0.3})
    module, calls = load(monkeypatch, plan(tmp_path))
    assert run(module, monkeypatch, 0) == 0
    assert [(m, j) for m, j, _ in calls] == [("PATCH", "j-train"), ("DELETE", "j-eval"), ("DELETE", "j-export"),
                                             ("PATCH", "j-train")]
    noted = json.loads(calls[0][2]["metadata"]["annotations"]["kubectl-tao.io/workflow-gate"])
    assert noted[0]["passed"] is False and noted[0]["value"] == 0.3


def test_a_missing_kpi_fails_the_gate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    module, calls = load(monkeypatch, plan(tmp_path))
    run(module, monkeypatch, 0)
    assert ("DELETE", "j-eval") in [(m, j) for m, j, _ in calls]
    assert ("PATCH", "j-eval") not in [(m, j) for m, j, _ in calls]


def test_a_failed_command_removes_the_held_steps_and_keeps_its_exit_status(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    status_json(tmp_path, {"val_mAP": 0.9})
    module, calls = load(monkeypatch, plan(tmp_path))
    assert run(module, monkeypatch, 3) == 3
    assert [(m, j) for m, j, _ in calls] == [("DELETE", "j-eval"), ("DELETE", "j-export")]


def test_only_rank_zero_releases(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    status_json(tmp_path, {"val_mAP": 0.9})
    module, calls = load(monkeypatch, plan(tmp_path))
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "1")
    assert run(module, monkeypatch, 0) == 0 and calls == []


def test_a_step_without_gate_is_released(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    module, calls = load(monkeypatch, {"step": "a", "job": "j-a", "next": [
        {"name": "b", "job": "j-b", "after": [], "gate": None}]})
    assert run(module, monkeypatch, 0) == 0
    assert calls == [("PATCH", "j-b", {"spec": {"suspend": False}})]


def test_a_successor_already_removed_is_said_and_not_a_failure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status_json(tmp_path, {"val_mAP": 0.9})
    module, calls = load(monkeypatch, plan(tmp_path))
    monkeypatch.setattr(module, "api", lambda method, job, body, patch="": calls.append((method, job, body)) or 404)
    assert run(module, monkeypatch, 0) == 0
    assert "step evaluate (Job j-eval) was already removed; nothing to release" in capsys.readouterr().out
    assert run(module, monkeypatch, 2) == 2
    assert "held Job j-eval was already removed" in capsys.readouterr().out


@pytest.mark.parametrize("method", ["PATCH", "DELETE"])
def test_the_api_answers_404_for_a_job_that_is_gone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, method: str
) -> None:
    import urllib.error

    spec = importlib.util.spec_from_file_location("workflow_release", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (tmp_path / "namespace").write_text("tao\n")
    (tmp_path / "token").write_text("t\n")
    monkeypatch.setattr(module, "SA", str(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setattr(module.ssl, "create_default_context", lambda cafile: None)

    def gone(request: Any, **_: Any) -> Any:
        raise urllib.error.HTTPError(request.full_url, 404, "Not Found", None, None)  # type: ignore[arg-type]

    monkeypatch.setattr(module.urllib.request, "urlopen", gone)
    assert module.api(method, "j-eval", {"spec": {"suspend": False}}) == 404


@pytest.mark.parametrize(("op", "value", "passed"), [(">", 0.5, False), ("<", 0.4, True), ("==", 0.5, True),
                                                      ("<=", 0.6, False)])
def test_each_comparison(monkeypatch: pytest.MonkeyPatch, op: str, value: float, passed: bool) -> None:
    module, _calls = load(monkeypatch, {"step": "a", "job": "j", "next": []})
    assert module.passes(value, op, 0.5) is passed


@pytest.mark.parametrize(
    ("command", "printed", "status"),
    [
        ("exit 3", "", 3),
        ("case x in x) echo case-ok;; esac", "case-ok", 0),
        ("cat <<EOF\nheredoc-ok\nEOF", "heredoc-ok", 0),
        ("echo hi # a trailing comment", "hi", 0),
        ("set -e; false; echo never", "", 1),
        ("echo $(echo sub-ok)", "sub-ok", 0),
    ],
)
def test_the_wrapped_command_runs_as_written_and_hands_its_status_to_the_release(
    command: str, printed: str, status: int
) -> None:
    import subprocess

    from kubectl_tao.workflows.objects import RELEASE_ENV, wrap_command

    stand_in = 'import sys; print("release got", sys.argv[1])'
    ran = subprocess.run(["/bin/sh", "-c", wrap_command(command).replace("python3", sys.executable)],
                         env={RELEASE_ENV: stand_in, "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                         check=False)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [*([printed] if printed else []), f"release got {status}"]


@pytest.mark.parametrize("sh", ["/bin/sh", "bash"])
def test_the_wrapper_forwards_term_to_the_command_and_hands_its_status_to_the_release(sh: str) -> None:
    import shutil
    import signal
    import subprocess

    from kubectl_tao.workflows.objects import RELEASE_ENV, wrap_command

    found = shutil.which(sh)
    assert found is not None, f"{sh} is not installed"
    command = ("trap 'echo command got TERM; exit 7' TERM\necho started\n"
               "i=0; while [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done\necho never TERMed")
    stand_in = 'import sys; print("release got", sys.argv[1])'
    wrapper = subprocess.Popen([found, "-c", wrap_command(command).replace("python3", sys.executable)],
                               env={RELEASE_ENV: stand_in, "PATH": "/usr/bin:/bin"}, stdout=subprocess.PIPE,
                               text=True)
    assert wrapper.stdout is not None
    assert wrapper.stdout.readline() == "started\n"
    wrapper.send_signal(signal.SIGTERM)  # the kubelet's TERM to the container's PID 1
    out = wrapper.stdout.read()
    assert wrapper.wait() == 0
    assert out.splitlines() == ["command got TERM", "release got 7"]


def queued_plan(results: Path) -> dict[str, Any]:
    found = plan(results)
    found["next"][0]["workload"] = "j-eval"
    return found


def test_a_queued_successor_is_released_by_activating_its_kueue_workload_not_by_unsuspending_its_job(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status_json(tmp_path, {"val_mAP": 0.7})
    module, _calls = load(monkeypatch, queued_plan(tmp_path))
    calls: list[tuple[str, str, Any, dict[str, Any]]] = []
    monkeypatch.setattr(module, "api", lambda method, name, body, patch="", **where: calls.append(
        (method, name, body, where)) or 200)
    assert run(module, monkeypatch, 0) == 0
    assert calls[0] == ("PATCH", "j-eval", {"spec": {"active": True}},
                        {"group": "/apis/kueue.x-k8s.io/v1beta2", "resource": "workloads"})
    assert all(body != {"spec": {"suspend": False}} for _m, _n, body, _w in calls)  # Kueue unsuspends it
    assert "released step evaluate (Workload j-eval active" in capsys.readouterr().out


def test_a_failed_command_removes_a_queued_successors_job_which_takes_its_workload_with_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    module, calls = load(monkeypatch, queued_plan(tmp_path))
    assert run(module, monkeypatch, 3) == 3
    assert [(m, j) for m, j, _ in calls] == [("DELETE", "j-eval"), ("DELETE", "j-export")]


def test_the_workload_patch_goes_to_kueues_workload_api_with_a_merge_patch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    spec = importlib.util.spec_from_file_location("workflow_release", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (tmp_path / "namespace").write_text("tao\n")
    (tmp_path / "token").write_text("t\n")
    monkeypatch.setattr(module, "SA", str(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setattr(module.ssl, "create_default_context", lambda cafile: None)
    sent: list[Any] = []

    class Answer:
        status = 200

        def __enter__(self) -> Any:
            return self

        def __exit__(self, *_: Any) -> None:
            return None

    monkeypatch.setattr(module.urllib.request, "urlopen", lambda request, **_: sent.append(request) or Answer())
    assert module.api("PATCH", "w-1", {"spec": {"active": True}}, group=module.WORKLOADS, resource="workloads") == 200
    request = sent[0]
    assert request.full_url == "https://10.0.0.1:443/apis/kueue.x-k8s.io/v1beta2/namespaces/tao/workloads/w-1"
    assert request.get_method() == "PATCH" and json.loads(request.data) == {"spec": {"active": True}}
    assert request.get_header("Content-type") == "application/merge-patch+json"
