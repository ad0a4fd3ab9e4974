"""`kubectl tao workflow` on the local cluster's real nodes: a three-step chain of stand-in TAO steps (python3,
writing status.json KPIs and a checkpoint the next step reads through ${STEP.results}).

What runs everywhere: `workflow run` creates the release RBAC and every step with its own record, the first step
running and the rest held (suspended, no pod); `workflow status` says why; `workflow cancel` leaves nothing.
What needs pods that reach the API server (the release runs in the step's pod): the chain runs in order after
`workflow run` returned, a failed metric gate ends it GATE_FAILED and removes the held steps. A cluster whose
pods cannot reach the API server (the local cluster has no kube-proxy and its API server listens on 127.0.0.1)
skips those, saying so.

Skipped when the cluster has no real nodes (KUBECTL_TAO_REAL_NODES=0).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.cluster import Tao, kubectl, wait_for

from .test_real_pods import REAL_NODE_LABEL, images, real  # noqa: F401

pytestmark = pytest.mark.e2e

# A TAO-shaped step: reads the checkpoint named in argv[2] (if any), writes <results>/train/status.json with
# the KPI argv[3] and a checkpoint, and exits argv[4].
STEP = """\
import json, os, sys
results, previous, kpi, code = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
os.makedirs(results + "/train", exist_ok=True)
seen = open(previous).read().strip() if previous != "-" else "none"
print("read checkpoint:", seen, flush=True)
with open(results + "/train/status.json", "a") as f:
    f.write(json.dumps({"date": "12/6/2026", "time": "1:2:3", "status": "RUNNING", "verbosity": "INFO",
                        "kpi": {"val_mAP": kpi}}) + "\\n")
with open(results + "/train/model.pth", "w") as f:
    f.write(os.environ["TAO_JOB_ID"] + " after " + seen)
sys.exit(code)
"""


def workflow_file(t: Tao, image: str, *, gate: float = 0.5, middle_exit: int = 0) -> Path:
    volume: Path = t.volume  # type: ignore[attr-defined]
    (volume / "step.py").write_text(STEP)
    text = f"""\
apiVersion: kubectl-tao/v1
kind: Workflow
metadata: {{name: chain}}
defaults:
  image: {json.dumps(image)}
  pvc: tao-data
  gpus: 0
  network-arch: real
  node-selector: {REAL_NODE_LABEL}=true
  toleration: {REAL_NODE_LABEL}=true:NoSchedule
steps:
- name: train
  action: train
  command: python3 /workspace/step.py ${{train.results}} - 0.7 0
- name: evaluate
  when: train.val_mAP >= {gate}
  action: evaluate
  command: python3 /workspace/step.py ${{evaluate.results}} ${{train.results}}/train/model.pth 0.6 {middle_exit}
- name: export
  action: export
  command: python3 /workspace/step.py ${{export.results}} ${{evaluate.results}}/train/model.pth 0.6 0
"""
    path = volume.parent / f"{volume.name}-workflow.yaml"
    path.write_text(text)
    return path


def run_workflow(t: Tao, path: Path) -> dict[str, Any]:
    result = t("workflow", "run", str(path), "-o", "json", timeout=300)
    assert result.returncode == 0, result.stderr + result.stdout
    return dict(json.loads(result.stdout))


def status(t: Tao, name: str) -> dict[str, Any]:
    result = t("workflow", "status", name, "-o", "json")
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def labelled(t: Tao, name: str) -> list[str]:
    kinds = "jobs,pods,serviceaccounts,roles.rbac.authorization.k8s.io,rolebindings.rbac.authorization.k8s.io"
    out = t.kubectl("get", kinds, "-l", f"kubectl-tao.io/workflow={name}", "-o", "name").stdout
    return [line for line in out.splitlines() if line]


def pods_can_reach_the_api_server() -> bool:
    """Whether the `kubernetes` Service has an endpoint a pod can reach (not loopback, and a kube-proxy or the
    like to route its ClusterIP): the local cluster has neither."""
    slices = json.loads(kubectl("get", "endpointslices", "-n", "default", "-l",
                                "kubernetes.io/service-name=kubernetes", "-o", "json").stdout)["items"]
    addresses = [a for s in slices for e in s.get("endpoints") or [] for a in e.get("addresses") or []]
    proxies = kubectl("get", "pods", "-A", "-l", "k8s-app=kube-proxy", "-o", "name", check=False).stdout.strip()
    return bool(addresses) and not all(a.startswith("127.") for a in addresses) and bool(proxies)


def test_run_creates_every_step_held_behind_the_first_and_cancel_leaves_nothing(
    real: Tao, images: dict[str, str]  # noqa: F811
) -> None:
    path = workflow_file(real, images["TORCH_IMAGE"])
    created = run_workflow(real, path)
    name = created["name"]
    assert [s["name"] for s in created["steps"]] == ["train", "evaluate", "export"]
    assert [s["held"] for s in created["steps"]] == [False, True, True]
    jobs = {s["name"]: s["job"].split("/", 1)[1] for s in created["steps"]}
    for step in created["steps"]:
        extra = real.extra(step["id"])
        assert extra["workflow"] == name and extra["workflow_step"] == step["name"]
    for held in ("evaluate", "export"):
        job = json.loads(real.kubectl("get", "job", jobs[held], "-o", "json").stdout)
        assert job["spec"]["suspend"] is True
        assert real.kubectl("get", "pods", "-l", f"job-name={jobs[held]}", "-o", "name").stdout == ""
    role = json.loads(real.kubectl("get", "role", f"tao-wf-{name}", "-o", "json").stdout)
    assert role["rules"][0]["resourceNames"] == sorted(jobs.values())
    assert role["rules"][0]["verbs"] == ["get", "patch", "delete"]
    owners = {o["name"] for o in role["metadata"]["ownerReferences"]}
    assert owners == set(jobs.values())
    seen = status(real, name)
    assert seen["name"] == name and seen["state"] == "RUNNING"
    assert [s["state"] for s in seen["steps"]][1:] == ["HELD", "HELD"]
    assert seen["steps"][1]["reason"] == "held until train succeeds and train.val_mAP >= 0.5"
    listed = real("workflow", "list", "-o", "json")
    assert listed.returncode == 0 and name in listed.stdout

    cancelled = real("workflow", "cancel", name, "-o", "json")
    assert cancelled.returncode == 0, cancelled.stderr
    wait_for(lambda: labelled(real, name) == [], 120, message="every object of the workflow to go")
    assert status(real, name)["state"] == "CANCELED"


@pytest.fixture()
def releasing(real: Tao) -> Tao:  # noqa: F811
    if not pods_can_reach_the_api_server():
        pytest.skip("this cluster's pods cannot reach the API server (no kube-proxy; the API server listens on "
                    "127.0.0.1), so a step's release cannot run in its pod here")
    return real


def test_the_chain_runs_in_order_after_run_returned(releasing: Tao, images: dict[str, str]) -> None:  # noqa: F811
    created = run_workflow(releasing, workflow_file(releasing, images["TORCH_IMAGE"]))
    name = created["name"]
    wait_for(lambda: status(releasing, name)["state"] != "RUNNING", 300, message="the workflow to end")
    seen = status(releasing, name)
    assert seen["state"] == "COMPLETE", seen
    ids = [s["id"] for s in created["steps"]]
    last = releasing.volume / "results" / ids[2] / "train" / "model.pth"  # type: ignore[attr-defined]
    assert last.read_text() == f"{ids[2]} after {ids[1]} after {ids[0]} after none"


def test_a_failed_gate_ends_the_chain_and_removes_the_held_steps(
    releasing: Tao, images: dict[str, str]  # noqa: F811
) -> None:
    created = run_workflow(releasing, workflow_file(releasing, images["TORCH_IMAGE"], gate=0.9))
    name = created["name"]
    wait_for(lambda: status(releasing, name)["state"] != "RUNNING", 300, message="the workflow to end")
    seen = status(releasing, name)
    assert seen["state"] == "GATE_FAILED" and "train.val_mAP >= 0.9" in seen["reason"] and "0.7" in seen["reason"]
    assert [s["state"] for s in seen["steps"]] == ["COMPLETE", "NOT_RUN", "NOT_RUN"]
    held = [s["job"].split("/", 1)[1] for s in created["steps"][1:]]
    wait_for(lambda: all(releasing.kubectl("get", "job", j, "--ignore-not-found", "-o", "name").stdout == ""
                         for j in held), 60, message="the held steps to be removed")
