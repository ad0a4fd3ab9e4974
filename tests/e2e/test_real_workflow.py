"""`kubectl tao workflow` on the local cluster's real nodes: a three-step chain of stand-in TAO steps (python3,
writing status.json KPIs and a checkpoint the next step reads through ${STEP.results}).

What runs everywhere: `workflow run` creates the release RBAC and every step with its own record, the first step
running and the rest held (suspended, no pod); `workflow status` says why; `workflow cancel` leaves nothing. The
release script, run on the host with the step's own ServiceAccount token against the real API server (the calls a
step's pod makes): a passed gate unsuspends the next step, whose pod then starts; a failed gate or a failed step
removes the held steps (GATE_FAILED); the token may do nothing else (list, read pods or Secrets, create Jobs,
touch another Job: forbidden).
What needs pods that reach the API server (the release runs in the step's pod): the chain runs by itself in order
after `workflow run` returned. The local cluster's pods reach it at the `kubernetes` Service's address (its relay
and nat chain: docs/local-cluster.md); a cluster whose pods cannot fails those tests, saying so, instead of
skipping them.

Skipped when the cluster has no real nodes (KUBECTL_TAO_REAL_NODES=0).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.cluster import Tao, kubectl, wait_for

from .test_real_api_relay import api_from_a_pod
from .test_real_pods import REAL_NODE_LABEL, images, real  # noqa: F401

pytestmark = pytest.mark.e2e

# A TAO-shaped step: reads the checkpoint named in argv[2] (if any), writes <results>/train/status.json with
# the KPI argv[3] and a checkpoint, and exits argv[4]; given argv[5], it first waits until that file exists (a step
# the test holds running, so the steps after it are seen held however fast the nodes start pods).
STEP = """\
import json, os, sys, time
results, previous, kpi, code = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
while len(sys.argv) > 5 and not os.path.exists(sys.argv[5]):
    time.sleep(0.2)
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


def workflow_file(t: Tao, image: str, *, gate: float = 0.5, middle_exit: int = 0, hold_train: bool = False) -> Path:
    """The chain's file; HOLD_TRAIN: the first step runs until the test cancels the run (it waits for a file that
    is never made)."""
    volume: Path = t.volume  # type: ignore[attr-defined]
    hold = " /workspace/never-made" if hold_train else ""
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
  command: python3 /workspace/step.py ${{train.results}} - 0.7 0{hold}
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


def pods_can_reach_the_api_server(t: Tao, image: str) -> tuple[bool, str]:
    """Whether a pod of T's namespace on a real node reads the API server at KUBERNETES_SERVICE_HOST:PORT with its
    ServiceAccount token and CA, as a step's release does (tried for real, in a pod); what the pod said."""
    return api_from_a_pod(t, image)


def test_run_creates_every_step_held_behind_the_first_and_cancel_leaves_nothing(
    real: Tao, images: dict[str, str]  # noqa: F811
) -> None:
    path = workflow_file(real, images["TORCH_IMAGE"], hold_train=True)
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
    role = json.loads(real.kubectl("get", "role", f"tao-wf-{name}-train", "-o", "json").stdout)
    assert role["rules"][0]["resourceNames"] == sorted([jobs["evaluate"], jobs["export"]])
    assert role["rules"][0]["verbs"] == ["patch", "delete"]
    assert role["rules"][1]["resourceNames"] == [jobs["train"]] and role["rules"][1]["verbs"] == ["patch"]
    owners = {o["name"] for o in role["metadata"]["ownerReferences"]}
    assert owners == set(jobs.values())
    later = json.loads(real.kubectl("get", "role", f"tao-wf-{name}-evaluate", "-o", "json").stdout)
    assert later["rules"][0]["resourceNames"] == [jobs["export"]]
    seen = status(real, name)
    assert seen["name"] == name and seen["state"] == "RUNNING"
    assert [s["state"] for s in seen["steps"]][1:] == ["HELD", "HELD"]
    assert seen["steps"][1]["reason"] == "held until train succeeds and train.val_mAP >= 0.5"
    listed = real("workflow", "list", "-o", "json")
    assert listed.returncode == 0 and name in listed.stdout
    jobs_listed = real("list")
    assert jobs_listed.returncode == 0 and jobs_listed.stdout.splitlines()[0].split()[-1] == "WORKFLOW"
    assert f"{name}/evaluate" in jobs_listed.stdout
    table = real("workflow", "status", name)
    assert table.returncode == 0 and table.stdout.startswith(f"workflow {name}: RUNNING\nSTEP")

    cancelled = real("workflow", "cancel", name, "-o", "json")
    assert cancelled.returncode == 0, cancelled.stderr
    wait_for(lambda: labelled(real, name) == [], 120, message="every object of the workflow to go")
    assert status(real, name)["state"] == "CANCELED"


@pytest.fixture()
def releasing(real: Tao, images: dict[str, str]) -> Tao:  # noqa: F811
    reached, said = pods_can_reach_the_api_server(real, images["TORCH_IMAGE"])
    if not reached:
        pytest.fail("this cluster's pods cannot reach the API server at the kubernetes Service's address, so a "
                    f"step's release cannot run in its pod (the pod said: {said}); see docs/local-cluster.md")
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
    # The release removes the held steps (GATE_FAILED) in the first step's pod, before that step has ended.
    wait_for(lambda: (seen := status(releasing, name))["state"] != "RUNNING" and seen["steps"][0]["state"] != "RUNNING",
             300, message="the workflow and its first step to end")
    seen = status(releasing, name)
    assert seen["state"] == "GATE_FAILED" and "train.val_mAP >= 0.9" in seen["reason"] and "0.7" in seen["reason"]
    assert [s["state"] for s in seen["steps"]] == ["COMPLETE", "NOT_RUN", "NOT_RUN"]
    held = [s["job"].split("/", 1)[1] for s in created["steps"][1:]]
    wait_for(lambda: all(releasing.kubectl("get", "job", j, "--ignore-not-found", "-o", "name").stdout == ""
                         for j in held), 60, message="the held steps to be removed")


def test_resume_after_a_failed_middle_step_runs_only_the_rest(
    releasing: Tao, images: dict[str, str]  # noqa: F811
) -> None:
    path = workflow_file(releasing, images["TORCH_IMAGE"])
    volume: Path = releasing.volume  # type: ignore[attr-defined]
    # The middle step fails (exit 3) until /workspace/evaluate-fixed exists: the fix made before the resume.
    failing = ("if [ -e /workspace/evaluate-fixed ]; then code=0; else code=3; fi; "
               "python3 /workspace/step.py ${evaluate.results} ${train.results}/train/model.pth 0.6 $code")
    text = path.read_text()
    path.write_text(text.replace(
        "python3 /workspace/step.py ${evaluate.results} ${train.results}/train/model.pth 0.6 0", failing))
    created = run_workflow(releasing, path)
    name = created["name"]
    ids = {s["name"]: s["id"] for s in created["steps"]}
    wait_for(lambda: status(releasing, name)["state"] != "RUNNING", 300, message="the workflow to end")
    seen = status(releasing, name)
    assert seen["state"] == "ERROR" and seen["reason"].startswith("step evaluate failed"), seen
    assert [s["state"] for s in seen["steps"]] == ["COMPLETE", "ERROR", "NOT_RUN"]
    train_results = volume / "results" / ids["train"] / "train"
    checkpoint = (train_results / "model.pth").read_text()
    assert checkpoint == f"{ids['train']} after none"
    written = (train_results / "model.pth").stat().st_mtime_ns

    (volume / "evaluate-fixed").write_text("fixed\n")
    resumed = releasing("workflow", "resume", name, "-o", "json", timeout=300)
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    again = json.loads(resumed.stdout)
    assert [s["name"] for s in again["steps"]] == ["evaluate", "export"]  # train is not run again
    assert [s["held"] for s in again["steps"]] == [False, True]  # evaluate starts at once: train finished
    new = {s["name"]: s["id"] for s in again["steps"]}
    assert releasing.extra(new["evaluate"])["resumed_from"] == name
    wait_for(lambda: status(releasing, again["name"])["state"] != "RUNNING", 300, message="the resumed run to end")
    done = status(releasing, again["name"])
    assert done["state"] == "COMPLETE", done
    assert [s["state"] for s in done["steps"]] == ["COMPLETE", "COMPLETE"]
    # The first step ran once: its checkpoint untouched, one status.json line, one Job of step train.
    assert (train_results / "model.pth").read_text() == checkpoint
    assert (train_results / "model.pth").stat().st_mtime_ns == written
    assert len((train_results / "status.json").read_text().splitlines()) == 1
    trains = releasing.kubectl("get", "jobs", "-l", "kubectl-tao.io/workflow-step=train", "-o", "name").stdout
    assert trains.split() == [f"job.batch/{created['steps'][0]['job'].split('/', 1)[1]}"]
    # The resumed steps wrote into their old results directories, reading the finished step's checkpoint.
    last = volume / "results" / ids["export"] / "train" / "model.pth"
    assert last.read_text() == f"{new['export']} after {new['evaluate']} after {ids['train']} after none"


def test_once_status_captured_every_ending_nothing_of_the_run_is_left_and_status_still_tells(
    releasing: Tao, images: dict[str, str]  # noqa: F811
) -> None:
    path = workflow_file(releasing, images["TORCH_IMAGE"])
    path.write_text(path.read_text().replace("  network-arch: real\n", "  network-arch: real\n  ttl-seconds: 0\n"))
    created = run_workflow(releasing, path)
    name = created["name"]
    for step in created["steps"]:  # kept until its ending is captured: created without a TTL
        job = json.loads(releasing.kubectl("get", "job", step["job"].split("/", 1)[1], "-o", "json").stdout)
        assert "ttlSecondsAfterFinished" not in job["spec"]
    wait_for(lambda: status(releasing, name)["state"] != "RUNNING", 300, message="the workflow to end")
    # Each `status` that saw a step finished wrote its ending into the step's record, then set its TTL (0 here):
    # the Jobs go, and the release RBAC, which they own, goes with the last of them.
    wait_for(lambda: labelled(releasing, name) == [], 120, message="every object of the workflow to go")
    seen = status(releasing, name)
    assert seen["state"] == "COMPLETE", seen
    assert [s["state"] for s in seen["steps"]] == ["COMPLETE", "COMPLETE", "COMPLETE"]
    for step in created["steps"]:
        shown = releasing("status", step["id"], "-o", "json")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["state"] == "COMPLETE"


# ---------------------------------------------------------------- the release against the real API server
# Here the release script runs on the host, with the run's own ServiceAccount token (TokenRequest), against the
# real API server: the same HTTP calls a step's pod makes, while the test holds the first step running.

RELEASE = Path(__file__).resolve().parents[2] / "templates" / "k8s" / "workflow-release.py"


def long_first_step(t: Tao, image: str, *, gate: float) -> Path:
    """The chain, with a first step that stays running while the test acts as its release."""
    path = workflow_file(t, image, gate=gate)
    path.write_text(path.read_text().replace("python3 /workspace/step.py ${train.results} - 0.7 0", "sleep 600"))
    return path


def release_as_the_step(t: Tao, cluster: Any, run: str, job: str, status: int, tmp_path: Path) -> Any:
    """Run the release of step Job JOB on the host: its plan from the Job, the gate's results directory mapped
    onto the claim's directory, the step's ServiceAccount token, the cluster's CA."""
    import base64
    import os
    import subprocess

    spec = json.loads(t.kubectl("get", "job", job, "-o", "json").stdout)["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value", "") for e in spec["containers"][0]["env"]}
    plan = json.loads(env["KUBECTL_TAO_WF_PLAN"].replace("$$", "$"))
    volume: Path = t.volume  # type: ignore[attr-defined]
    for step in plan["next"]:
        if step["gate"]:
            step["gate"]["results"] = str(volume / step["gate"]["results"].removeprefix("/workspace/"))
    sa = tmp_path / "sa"
    sa.mkdir(exist_ok=True)
    token = t.kubectl("create", "token", spec["serviceAccountName"], "--duration", "10m").stdout.strip()
    (sa / "token").write_text(token)
    (sa / "namespace").write_text(t.namespace)
    config = json.loads(kubectl("config", "view", "--raw", "-o", "json").stdout)
    server = config["clusters"][0]["cluster"]["server"]
    (sa / "ca.crt").write_bytes(base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]))
    host, port = server.removeprefix("https://").rsplit(":", 1)
    run_env = {**os.environ, "KUBECTL_TAO_WF_SA_DIR": str(sa), "KUBECTL_TAO_WF_PLAN": json.dumps(plan),
               "KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}
    run_env.pop("JOB_COMPLETION_INDEX", None)
    released = subprocess.run(["python3", str(RELEASE), str(status)], env=run_env, capture_output=True, text=True,
                              timeout=60, check=False)
    released.token = token  # type: ignore[attr-defined]
    released.server = server  # type: ignore[attr-defined]
    released.ca = str(sa / "ca.crt")  # type: ignore[attr-defined]
    return released


def kpi(t: Tao, record_id: str, value: float) -> None:
    results = t.volume / "results" / record_id / "train"  # type: ignore[attr-defined]
    results.mkdir(parents=True, exist_ok=True)
    (results / "status.json").write_text(json.dumps({"status": "RUNNING", "kpi": {"val_mAP": value}}) + "\n")


def test_the_release_unsuspends_the_next_step_with_the_runs_token_and_that_token_may_do_nothing_else(
    real: Tao, images: dict[str, str], cluster: Any, tmp_path: Path  # noqa: F811
) -> None:
    created = run_workflow(real, long_first_step(real, images["TORCH_IMAGE"], gate=0.5))
    name, steps = created["name"], {s["name"]: s for s in created["steps"]}
    jobs = {n: s["job"].split("/", 1)[1] for n, s in steps.items()}
    kpi(real, steps["train"]["id"], 0.7)
    released = release_as_the_step(real, cluster, name, jobs["train"], 0, tmp_path)
    assert released.returncode == 0, released.stdout + released.stderr
    assert f"released step evaluate (Job {jobs['evaluate']})" in released.stdout
    evaluate = json.loads(real.kubectl("get", "job", jobs["evaluate"], "-o", "json").stdout)
    assert evaluate["spec"]["suspend"] is False
    export = json.loads(real.kubectl("get", "job", jobs["export"], "-o", "json").stdout)
    assert export["spec"]["suspend"] is True
    wait_for(lambda: real.kubectl("get", "pods", "-l", f"job-name={jobs['evaluate']}", "-o", "name").stdout != "",
             60, message="the released step's pod")
    noted = json.loads(real.kubectl("get", "job", jobs["train"], "-o", "json").stdout)["metadata"]["annotations"]
    assert json.loads(noted["kubectl-tao.io/workflow-gate"])[0]["passed"] is True

    as_run = ["--token", released.token, "--server", released.server, "--certificate-authority", released.ca,
              "--kubeconfig", "/dev/null", "-n", real.namespace]
    for verbs in (["get", "jobs"], ["get", "pods"], ["get", "secrets"], ["delete", "pvc", "tao-data"],
                  ["create", "job", "x", "--image", "busybox"]):
        denied = real.kubectl(*as_run, *verbs, check=False)
        assert denied.returncode != 0 and "forbidden" in denied.stderr.lower(), (verbs, denied.stderr)
    real.kubectl("create", "job", "outsider", "--image", images["TORCH_IMAGE"], "--", "true")
    denied = real.kubectl(*as_run, "patch", "job", "outsider", "--type=merge", "-p", '{"spec":{"suspend":true}}',
                          check=False)
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower()
    real.kubectl("delete", "job", "outsider", "--wait=false")
    assert real("workflow", "cancel", name).returncode == 0
    wait_for(lambda: labelled(real, name) == [], 120, message="every object of the workflow to go")


def test_a_failed_gate_removes_the_held_steps_and_status_says_gate_failed(
    real: Tao, images: dict[str, str], cluster: Any, tmp_path: Path  # noqa: F811
) -> None:
    created = run_workflow(real, long_first_step(real, images["TORCH_IMAGE"], gate=0.9))
    name, steps = created["name"], {s["name"]: s for s in created["steps"]}
    jobs = {n: s["job"].split("/", 1)[1] for n, s in steps.items()}
    kpi(real, steps["train"]["id"], 0.7)
    released = release_as_the_step(real, cluster, name, jobs["train"], 0, tmp_path)
    assert released.returncode == 0, released.stdout + released.stderr
    for held in ("evaluate", "export"):
        wait_for(lambda held=held: real.kubectl("get", "job", jobs[held], "--ignore-not-found", "-o", "name").stdout
                 == "", 60, message=f"held step {held} to be removed")
    seen = status(real, name)
    assert seen["state"] == "GATE_FAILED", seen
    assert seen["reason"] == "step evaluate: gate train.val_mAP >= 0.9 failed: the value was 0.7"
    assert [s["state"] for s in seen["steps"]] == ["RUNNING", "NOT_RUN", "NOT_RUN"]
    assert real("workflow", "cancel", name).returncode == 0
    wait_for(lambda: labelled(real, name) == [], 120, message="every object of the workflow to go")


def test_a_failed_step_removes_the_held_ones(
    real: Tao, images: dict[str, str], cluster: Any, tmp_path: Path  # noqa: F811
) -> None:
    created = run_workflow(real, long_first_step(real, images["TORCH_IMAGE"], gate=0.5))
    name, steps = created["name"], {s["name"]: s for s in created["steps"]}
    jobs = {n: s["job"].split("/", 1)[1] for n, s in steps.items()}
    released = release_as_the_step(real, cluster, name, jobs["train"], 3, tmp_path)
    assert released.returncode == 3, released.stdout + released.stderr
    assert "ended with exit status 3" in released.stdout
    for held in ("evaluate", "export"):
        assert real.kubectl("get", "job", jobs[held], "--ignore-not-found", "-o", "name").stdout == ""
    assert real("workflow", "cancel", name).returncode == 0
    wait_for(lambda: labelled(real, name) == [], 120, message="every object of the workflow to go")
