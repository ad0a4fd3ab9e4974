"""A job that must queue is created while its DRA GPUs are still being read: counting them can only turn the
verdict "queue" into "fits", never refuse the job, so the create does not wait for the read. The verdict and
its warning are settled after the create (in the output and the record); a submit that fails before settling
stops the read unread."""

from __future__ import annotations

import copy
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from support import fake_kubectl as fake_module
from support.fake_kubectl import FakeKubectl, fixture_json, review_answer

from kubectl_tao.gates.gpuinventory import DRA_READ

SUBMIT = ["submit", "--image", "busybox", "--command", "true", "--storage-tier", "C", "--s3-output", "s3://bucket/out"]
UID = "0b9b6c1e-1111-2222-3333-444455556666"
NO_DRA = {"kind": "List", "items": []}


def _gates_pass(fake: FakeKubectl) -> None:
    review, granted = review_answer()
    fake.on(*review, stdout=granted)
    fake.on("create", "--dry-run=server", stdout="job.batch/x created (server dry run)\n")


def _busy_plugin_gpus(fake: FakeKubectl) -> None:
    """Two 8-GPU nodes whose device-plugin GPUs are all taken; dra-node-0 has one DRA GPU free."""
    data = fixture_json("dra-nodes-pods.json")
    filler = next(i for i in data["items"] if i["metadata"]["name"] == "train-plugin")
    for node, count in (("gpu-node-0", 6), ("gpu-node-1", 8)):
        pod = copy.deepcopy(filler)
        pod["metadata"]["name"] = f"fill-{node}"
        pod["spec"]["nodeName"] = node
        pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": str(count)},
                                                     "requests": {"nvidia.com/gpu": str(count)}}
        data["items"].append(pod)
    fake.capacity(data)


def _record(tao_env: Path) -> dict[str, Any]:
    (path,) = (tao_env / "state" / "jobs").glob("*.json")
    return json.loads(path.read_text())


def _extra(tao_env: Path) -> dict[str, Any]:
    """kubectl-tao's additions to the record (warnings among them)."""
    (path,) = (tao_env / "state" / "jobs" / ".kubectl-tao").glob("*.json")
    return json.loads(path.read_text())


def _capacity_warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning: ") and "free now" in line]


def test_a_job_that_must_queue_is_created_while_its_dra_gpus_are_read(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _gates_pass(fake_kubectl)
    _busy_plugin_gpus(fake_kubectl)
    fake_kubectl.on(*DRA_READ[:2], data=NO_DRA)
    fake_kubectl.on("create", "-f", stdout=f"Job x {UID}\n")
    created = threading.Event()
    waited: list[bool] = []
    real_wait = fake_module.FakeRunning.wait

    def wait(self: Any, **kwargs: Any) -> Any:
        if self.args[:2] == ["create", "-f"]:
            created.set()
        if "resourceslices" in " ".join(self.args):
            waited.append(created.is_set())  # read only once the create was answered
        return real_wait(self, **kwargs)

    monkeypatch.setattr(fake_module.FakeRunning, "wait", wait)
    code, out, err = cli(*SUBMIT, "--gpus", "1", "-o", "json")
    assert code == 0, err
    assert waited == [True]
    calls = [" ".join(argv) for argv in fake_kubectl.argvs()]
    dra = next(i for i, c in enumerate(calls) if "resourceslices" in c)
    create = next(i for i, c in enumerate(calls) if c.startswith("create -f"))
    assert dra < create  # started before the create, answered after it
    fit = json.loads(out)["fit"]
    assert fit["verdict"] == "queue"
    (warning,) = _capacity_warnings(err)
    assert err.index("record ") < err.index(warning)  # settled after the record opened and the Job was created
    assert fit["message"] in warning
    assert fit["message"] in _extra(tao_env)["warnings"]


def test_dra_gpus_read_beside_the_create_can_make_the_verdict_fits(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path
) -> None:
    _gates_pass(fake_kubectl)
    _busy_plugin_gpus(fake_kubectl)
    fake_kubectl.on(*DRA_READ[:2], data=fixture_json("dra-objects.json"))
    fake_kubectl.on("create", "-f", stdout=f"Job x {UID}\n")
    code, out, err = cli(*SUBMIT, "--gpus", "1", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["fit"]["verdict"] == "fits"  # dra-node-0's free DRA GPU
    assert _capacity_warnings(err) == []
    assert not any("free now" in w for w in _extra(tao_env).get("warnings", []))


def test_a_failed_create_stops_the_dra_read_unread(cli: Any, fake_kubectl: FakeKubectl, tao_env: Path) -> None:
    _gates_pass(fake_kubectl)
    _busy_plugin_gpus(fake_kubectl)
    fake_kubectl.on(*DRA_READ[:2], data=NO_DRA)
    fake_kubectl.on("create", "-f", stderr='Error from server (Forbidden): jobs.batch "x" is forbidden: quota', rc=1)
    fake_kubectl.on("delete", stdout="")
    fake_kubectl.on("get", stdout="")
    code, _, err = cli(*SUBMIT, "--gpus", "1")
    assert code == 1 and "marked ERROR" in err
    (killed,) = fake_kubectl.killed()
    assert "resourceslices" in " ".join(killed)
    assert _record(tao_env)["terminal_state"] == "ERROR"


def test_require_fit_now_reads_the_dra_gpus_before_refusing(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _gates_pass(fake_kubectl)
    _busy_plugin_gpus(fake_kubectl)
    fake_kubectl.on(*DRA_READ[:2], data=NO_DRA)
    code, _, err = cli(*SUBMIT, "--gpus", "1", "--require-fit-now")
    assert code == 1 and err.strip().endswith("(--require-fit-now)")
    calls = [" ".join(argv) for argv in fake_kubectl.argvs()]
    assert any("resourceslices" in c for c in calls) and not any(c.startswith("create -f") for c in calls)
