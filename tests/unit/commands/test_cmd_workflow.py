"""`workflow render`: every step checked as submit checks its flags, and the run's objects as `run` creates them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

HEAD = "apiVersion: kubectl-tao/v1\nkind: Workflow\nmetadata: {name: dino}\n"
THREE = HEAD + """defaults:
  {image: "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt", pvc: tao-data, gpus: 8, network-arch: dino}
steps:
- name: train
  action: train
  command: dino train -e /workspace/specs/train.yaml results_dir=${train.results}
- name: evaluate
  when: train.val_mAP >= 0.5
  action: evaluate
  command: dino evaluate evaluate.checkpoint=${train.results}/train/dino_model_latest.pth
- name: export
  action: export
  gpus: 1
  command: dino export export.checkpoint=${train.results}/train/dino_model_latest.pth
"""


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "wf.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def rendered(cli: Any, tmp_path: Path, text: str) -> list[dict[str, Any]]:
    code, out, err = cli("workflow", "render", write(tmp_path, text), "-n", "tao", "-o", "json")
    assert code == 0, err
    data = json.loads(out)
    return list(data["items"]) if isinstance(data, dict) and "items" in data else list(data)


def jobs_of(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["labels"]["kubectl-tao.io/workflow-step"]: o for o in objects if o["kind"] == "Job"}


def test_render_holds_every_step_but_the_first_and_resolves_results(cli: Any, tmp_path: Path) -> None:
    objects = rendered(cli, tmp_path, THREE)
    jobs = jobs_of(objects)
    assert list(jobs) == ["train", "evaluate", "export"]
    assert "suspend" not in jobs["train"]["spec"] or jobs["train"]["spec"]["suspend"] is None
    assert jobs["evaluate"]["spec"]["suspend"] is True and jobs["export"]["spec"]["suspend"] is True
    train_id = jobs["train"]["metadata"]["annotations"]["kubectl-tao.io/record-id"]
    args = jobs["evaluate"]["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert f"evaluate.checkpoint=/workspace/results/{train_id}/train/dino_model_latest.pth" in args
    assert "${train.results}" not in json.dumps(objects)


def test_render_with_a_queue_holds_the_steps_through_inactive_kueue_workloads(cli: Any, tmp_path: Path) -> None:
    objects = rendered(cli, tmp_path, THREE.replace("network-arch: dino}", "network-arch: dino, queue: team}"))
    jobs = jobs_of(objects)
    for job in jobs.values():  # every step waits for Kueue's admission of the Workload its label names
        assert job["spec"]["suspend"] is True
        assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team"
        assert job["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] == job["metadata"]["name"]
    workloads = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Workload"}
    assert set(workloads) == {job["metadata"]["name"] for job in jobs.values()}
    active = {step: workloads[job["metadata"]["name"]]["spec"]["active"] for step, job in jobs.items()}
    assert active == {"train": True, "evaluate": False, "export": False}
    evaluate = workloads[jobs["evaluate"]["metadata"]["name"]]
    assert evaluate["apiVersion"] == "kueue.x-k8s.io/v1beta2" and evaluate["spec"]["queueName"] == "team"
    assert evaluate["spec"]["podSets"][0]["name"] == "main" and evaluate["spec"]["podSets"][0]["count"] == 1
    assert evaluate["spec"]["podSets"][0]["template"]["spec"] == jobs["evaluate"]["spec"]["template"]["spec"]
    role = next(o for o in objects if o["kind"] == "Role" and o["metadata"]["name"].endswith("-train"))
    assert role["rules"][-1] == {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"],
                                 "resourceNames": [jobs["evaluate"]["metadata"]["name"]], "verbs": ["patch"]}
    env = {e["name"]: e["value"] for e in jobs["train"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    plan = json.loads(env["KUBECTL_TAO_WF_PLAN"])
    assert plan["next"][0]["workload"] == jobs["evaluate"]["metadata"]["name"]


def test_render_gives_each_releasing_step_its_own_token_whose_role_reaches_only_the_steps_after_it(
    cli: Any, tmp_path: Path
) -> None:
    objects = rendered(cli, tmp_path, THREE)
    jobs = jobs_of(objects)
    name = {step: job["metadata"]["name"] for step, job in jobs.items()}
    roles = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Role"}
    bindings = {o["metadata"]["name"]: o for o in objects if o["kind"] == "RoleBinding"}
    accounts = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ServiceAccount"}
    assert len(roles) == len(bindings) == len(accounts) == 2  # train and evaluate release; export does not

    def rule(names: list[str], verbs: list[str]) -> dict[str, Any]:
        return {"apiGroups": ["batch"], "resources": ["jobs"], "resourceNames": names, "verbs": verbs}

    reach = {"train": sorted([name["evaluate"], name["export"]]), "evaluate": [name["export"]]}
    for step in ("train", "evaluate"):
        pod = jobs[step]["spec"]["template"]["spec"]
        account = pod["serviceAccountName"]
        assert pod["automountServiceAccountToken"] and accounts[account]["automountServiceAccountToken"] is False
        assert roles[account]["rules"] == [rule(reach[step], ["patch", "delete"]), rule([name[step]], ["patch"])]
        assert bindings[account]["subjects"] == [{"kind": "ServiceAccount", "name": account,
                                                  "namespace": accounts[account]["metadata"]["namespace"]}]
        assert bindings[account]["roleRef"]["name"] == account
    assert jobs["train"]["spec"]["template"]["spec"]["serviceAccountName"] != (
        jobs["evaluate"]["spec"]["template"]["spec"]["serviceAccountName"])
    for step in ("train", "evaluate"):
        pod = jobs[step]["spec"]["template"]["spec"]
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        plan = json.loads(env["KUBECTL_TAO_WF_PLAN"])
        assert plan["job"] == jobs[step]["metadata"]["name"]
        assert 'exec python3 -c "$KUBECTL_TAO_WF_RELEASE"' in pod["containers"][0]["args"][0]
    last = jobs["export"]["spec"]["template"]["spec"]
    assert last["automountServiceAccountToken"] is False and "serviceAccountName" not in last
    assert "KUBECTL_TAO_WF_RELEASE" not in json.dumps(last)
    plan = json.loads({e["name"]: e.get("value") for e in
                       jobs["train"]["spec"]["template"]["spec"]["containers"][0]["env"]}["KUBECTL_TAO_WF_PLAN"])
    train_id = jobs["train"]["metadata"]["annotations"]["kubectl-tao.io/record-id"]
    assert plan["next"] == [{
        "name": "evaluate", "job": jobs["evaluate"]["metadata"]["name"], "after": [jobs["export"]["metadata"]["name"]],
        "gate": {"step": "train", "kpi": "val_mAP", "op": ">=", "threshold": 0.5,
                 "results": f"/workspace/results/{train_id}"},
    }]


def test_every_object_carries_the_workflow_label(cli: Any, tmp_path: Path) -> None:
    for obj in rendered(cli, tmp_path, THREE):
        assert obj["metadata"]["labels"]["kubectl-tao.io/workflow"] == "dino-preview"
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kubectl-tao"


@pytest.mark.parametrize(
    ("step", "words"),
    [
        ("gpus: eight", "step 'a': gpus is a string, not a whole number (e.g. 8) (what --gpus takes)"),
        ("gpus: -1", "step 'a': "),
        ("ttl-seconds: -5", "step 'a': "),
        ("queue: Team_A", "step 'a': "),
        ("action-request: r.json", "step 'a': action-request: an action request names its own command"),
        ("max-restarts: 2", "step 'a': "),
        ("stall-timeout: soon", "step 'a': "),
    ],
)
def test_a_bad_flag_value_is_refused_as_submit_refuses_it(cli: Any, tmp_path: Path, step: str, words: str) -> None:
    text = HEAD + f"steps:\n- name: a\n  image: busybox:1\n  pvc: d\n  command: x\n  {step}\n- {{name: b, image: " \
        "busybox:1, pvc: d, command: y}\n"
    code, out, err = cli("workflow", "render", write(tmp_path, text), "-n", "tao")
    assert code == 2 and out == ""
    line = err.strip()
    assert "\n" not in line and words in line, line


def test_the_same_flags_refused_by_submit_are_refused_with_the_same_words(cli: Any, tmp_path: Path) -> None:
    code, _out, submit_err = cli("render", "--image", "busybox:1", "--pvc", "d", "--command", "x",
                                 "--stall-timeout", "soon", "-n", "tao")
    assert code == 2
    text = HEAD + "steps:\n- {name: a, image: 'busybox:1', pvc: d, command: x, stall-timeout: soon}\n"
    code, _out, err = cli("workflow", "render", write(tmp_path, text), "-n", "tao")
    assert code == 2
    assert submit_err.strip().removeprefix("error: ") in err


def test_a_reference_to_a_tier_c_step_is_refused(cli: Any, tmp_path: Path) -> None:
    text = HEAD + ("steps:\n- {name: a, image: 'busybox:1', command: x, storage-tier: C, s3-output: 's3://bucket/p',"
                   " s3-tools-image: 'aws:1'}\n- {name: b, image: 'busybox:1', pvc: d, command: 'y ${a.results}'}\n")
    code, _out, err = cli("workflow", "render", write(tmp_path, text), "-n", "tao")
    assert code == 2 and "step 'b': command: references the results of a storage-tier C step" in err


def test_torchrun_is_refused_on_a_releasing_step(cli: Any, tmp_path: Path) -> None:
    text = HEAD + ("steps:\n- {name: a, image: 'busybox:1', pvc: d, command: t.py, nodes: 2, launcher: torchrun}\n"
                   "- {name: b, image: 'busybox:1', pvc: d, command: y}\n")
    code, _out, err = cli("workflow", "render", write(tmp_path, text), "-n", "tao")
    assert code == 2 and "step 'a': launcher torchrun" in err


def test_an_unreadable_file_is_bad_input(cli: Any, tmp_path: Path) -> None:
    code, _out, err = cli("workflow", "render", str(tmp_path / "missing.yaml"))
    assert code == 2 and "missing.yaml" in err and "name a readable file" in err


def test_the_examples_render(cli: Any) -> None:
    root = Path(__file__).resolve().parents[3] / "examples" / "workflows"
    files = sorted(root.glob("*.yaml"))
    assert len(files) >= 2
    for path in files:
        code, _out, err = cli("workflow", "render", str(path), "-n", "tao", "-o", "json")
        assert code == 0, f"{path.name}: {err}"


def test_the_schema_file_is_the_one_the_job_flag_table_makes() -> None:
    from kubectl_tao.commands.workflow import schema_document

    path = Path(__file__).resolve().parents[3] / "schemas" / "workflow.v1.schema.json"
    assert json.loads(path.read_text(encoding="utf-8")) == schema_document()


def test_every_job_flag_is_a_step_key_of_the_schema_but_the_refused_ones() -> None:
    from kubectl_tao.commands.workflow import _REFUSED, schema_document
    from kubectl_tao.core.flagtable import JOB_FLAGS

    keys = set(schema_document()["properties"]["steps"]["items"]["properties"])
    assert keys == {"name", "after", "when"} | {f.names[0][2:] for k, f in JOB_FLAGS.items() if k not in _REFUSED}


def test_the_examples_are_valid_against_the_schema() -> None:
    from kubectl_tao.core.schemas import validate
    from kubectl_tao.workflows.spec import parse_text

    for path in sorted((Path(__file__).resolve().parents[3] / "examples" / "workflows").glob("*.yaml")):
        validate(parse_text(path.read_text(encoding="utf-8"), str(path)), "workflow.v1")


def test_a_gate_read_from_a_pod_without_the_gated_steps_volume_is_refused(cli: Any, tmp_path: Path) -> None:
    text = HEAD + ("steps:\n- {name: a, image: 'busybox:1', pvc: one, command: x}\n"
                   "- {name: b, image: 'busybox:1', pvc: two, command: y}\n"
                   "- {name: c, image: 'busybox:1', pvc: two, command: z, when: a.acc > 0.5}\n")
    code, _out, err = cli("workflow", "render", write(tmp_path, text), "-n", "tao")
    assert code == 2 and "step 'c': when reads 'a''s status.json in the pod of 'b', which mounts another volume" in err


@pytest.mark.parametrize(("key", "value"), [("max-restarts", 2), ("retries-per-index", 1)])
def test_retries_are_refused_on_a_releasing_step(cli: Any, tmp_path: Path, key: str, value: int) -> None:
    text = HEAD + (f"steps:\n- {{name: a, image: 'busybox:1', pvc: d, command: t.py, {key}: {value}}}\n"
                   "- {name: b, image: 'busybox:1', pvc: d, command: t.py}\n")
    code, _out, err = cli("workflow", "render", write(tmp_path, text), "-n", "tao")
    assert code == 2 and f"step 'a': {key}: a step that releases the next one" in err
    assert f"leave {key} out of this step" in err and len(err.strip().splitlines()) == 1


def test_a_run_whose_steps_release_nothing_gets_no_service_account_or_role(cli: Any, tmp_path: Path) -> None:
    text = HEAD + "steps:\n- {name: a, image: 'busybox:1', pvc: d, command: t.py}\n"
    code, out, err = cli("workflow", "render", write(tmp_path, text), "-n", "tao", "-o", "json")
    assert code == 0, err
    job = json.loads(out)  # the one object, alone
    assert job["kind"] == "Job" and job["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    assert "serviceAccountName" not in job["spec"]["template"]["spec"]


def test_every_step_job_is_kept_until_its_ending_is_captured(cli: Any, tmp_path: Path) -> None:
    jobs = jobs_of(rendered(cli, tmp_path, THREE.replace("gpus: 8,", "gpus: 8, ttl-seconds: 600,")))
    assert [job["spec"].get("ttlSecondsAfterFinished") for job in jobs.values()] == [None, None, None]
