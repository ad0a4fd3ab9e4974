"""workflows/objects.py and runs.py with a Kueue queue: a queued step's Job names its Workload (Kueue's
prebuilt-workload label), the Workload is made from the Job as the API server stored it (the pod set Kueue's Job
integration builds), inactive while the step is held; the Role may patch only the successors' Workloads; cancel
removes the Workloads of the run's pinned Jobs only."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from kubectl_tao.core.errors import GateError
from kubectl_tao.workflows.objects import rbac_objects, step_objects, workload_object
from kubectl_tao.workflows.spec import Step, Workflow

PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"

# A two-rank Indexed Job as the API server stores it: the Job controller's labels on the pod template, the
# server's defaults on the container, Kueue's topology annotation on the template.
STORED = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {
        "name": "chain-evaluate-1a2b3c", "namespace": "tao", "uid": "7d0e7c1a-0000-4000-8000-000000000001",
        "labels": {"kueue.x-k8s.io/queue-name": "team", PREBUILT: "chain-evaluate-1a2b3c",
                   "kubectl-tao.io/workflow": "chain-1a2b3c", "kubectl-tao.io/workflow-step": "evaluate",
                   "app.kubernetes.io/managed-by": "kubectl-tao"},
    },
    "spec": {
        "parallelism": 2, "completions": 2, "completionMode": "Indexed", "suspend": True,
        "template": {
            "metadata": {
                "labels": {"batch.kubernetes.io/controller-uid": "7d0e7c1a-0000-4000-8000-000000000001",
                           "batch.kubernetes.io/job-name": "chain-evaluate-1a2b3c",
                           "controller-uid": "7d0e7c1a-0000-4000-8000-000000000001",
                           "job-name": "chain-evaluate-1a2b3c", "tao-job": "chain-evaluate-1a2b3c"},
                "annotations": {"kueue.x-k8s.io/podset-required-topology": "kubernetes.io/hostname"},
            },
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "tao", "image": "busybox:1.36", "imagePullPolicy": "IfNotPresent",
                                "terminationMessagePath": "/dev/termination-log",
                                "terminationMessagePolicy": "FallbackToLogsOnError",
                                "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            },
        },
    },
}


def chain(*names: str) -> Workflow:
    return Workflow("chain", [Step(name, names[i - 1] if i else None, None) for i, name in enumerate(names)])


def test_the_workload_is_the_pod_set_kueues_job_integration_builds_from_the_stored_job() -> None:
    made = workload_object("chain-1a2b3c", STORED, active=False)
    assert made["apiVersion"] == "kueue.x-k8s.io/v1beta2" and made["kind"] == "Workload"
    assert made["metadata"]["name"] == STORED["metadata"]["name"]  # what the Job's prebuilt label names
    assert made["spec"]["active"] is False and made["spec"]["queueName"] == "team"
    (pod_set,) = made["spec"]["podSets"]
    assert pod_set["name"] == "main" and pod_set["count"] == 2
    # Kueue compares count, containers, init containers and tolerations with the Job's: the stored spec as is.
    assert pod_set["template"]["spec"] == STORED["spec"]["template"]["spec"]  # type: ignore[index]
    assert pod_set["template"]["metadata"]["labels"] == {"batch.kubernetes.io/job-name": "chain-evaluate-1a2b3c",
                                                         "tao-job": "chain-evaluate-1a2b3c"}
    assert pod_set["topologyRequest"] == {"required": "kubernetes.io/hostname",
                                          "podIndexLabel": "batch.kubernetes.io/job-completion-index"}
    (owner,) = made["metadata"]["ownerReferences"]
    assert owner == {"apiVersion": "batch/v1", "kind": "Job", "name": "chain-evaluate-1a2b3c",
                     "uid": "7d0e7c1a-0000-4000-8000-000000000001", "controller": True}
    labels = made["metadata"]["labels"]
    assert labels["kubectl-tao.io/workflow"] == "chain-1a2b3c" and labels["kubectl-tao.io/workflow-step"] == "evaluate"
    assert labels["kueue.x-k8s.io/job-uid"] == "7d0e7c1a-0000-4000-8000-000000000001"


def test_the_pod_count_is_the_smaller_of_parallelism_and_completions_as_kueue_counts_it() -> None:
    job = copy.deepcopy(STORED)
    job["spec"]["parallelism"], job["spec"]["completions"] = 4, 3  # type: ignore[index]
    assert workload_object("r", job, active=True)["spec"]["podSets"][0]["count"] == 3
    del job["spec"]["completions"]  # type: ignore[attr-defined]
    assert workload_object("r", job, active=True)["spec"]["podSets"][0]["count"] == 4


def test_a_queued_steps_job_names_its_workload_and_stays_suspended_for_kueue_even_when_not_held() -> None:
    objects = [{"kind": "Job", "metadata": {"name": "j-train"}, "spec": {"template": {"spec": {"containers": []}}}}]
    made = step_objects(objects, run_id="r", step="train", held=False, plan=None, release_script="", queued=True)
    job = made[0]
    assert job["metadata"]["labels"][PREBUILT] == "j-train" and job["spec"]["suspend"] is True
    assert PREBUILT not in job["spec"]["template"]["metadata"]["labels"]  # on the Job only, not its pods
    plain = [{"kind": "Job", "metadata": {"name": "j-a"}, "spec": {"template": {"spec": {"containers": []}}}}]
    step_objects(plain, run_id="r", step="a", held=False, plan=None, release_script="")
    assert PREBUILT not in plain[0]["metadata"]["labels"] and "suspend" not in plain[0]["spec"]


def test_the_role_may_patch_only_the_workloads_of_the_queued_steps_it_releases() -> None:
    jobs = {"train": "j-train", "evaluate": "j-evaluate", "export": "j-export"}
    rbac = rbac_objects("r", "tao", chain("train", "evaluate", "export"), jobs, queued={"evaluate", "export"})
    roles = {o["metadata"]["name"]: o for o in rbac if o["kind"] == "Role"}
    assert roles["tao-wf-r-train"]["rules"][-1] == {
        "apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "resourceNames": ["j-evaluate"],
        "verbs": ["patch"]}
    assert roles["tao-wf-r-evaluate"]["rules"][-1]["resourceNames"] == ["j-export"]
    plain = rbac_objects("r", "tao", chain("train", "evaluate"), jobs)
    assert all(rule["apiGroups"] == ["batch"] for o in plain if o["kind"] == "Role" for rule in o["rules"])


class Recorder:
    """A Kubectl double for runs' Kueue helpers: answers `get` with LISTED (by resource), records the rest."""

    def __init__(self, listed: dict[str, Any], fail: dict[str, Any] | None = None) -> None:
        self.listed, self.fail, self.calls = listed, fail or {}, []  # type: ignore[var-annotated]

    def json(self, args: list[str], **_: Any) -> Any:
        self.calls.append(args)
        return self.listed.get(args[1])

    def run(self, args: list[str], **kwargs: Any) -> Any:
        from kubectl_tao.core.errors import KubectlError
        from kubectl_tao.k8s.kubectl import Completed

        self.calls.append([*args, kwargs.get("stdin")])
        path = args[2] if args[:2] == ["delete", "--raw"] else ""
        if path in self.fail:
            raise KubectlError("failed", reason=self.fail[path])
        created = json.loads(kwargs["stdin"])["items"] if args[:1] == ["create"] else []
        return Completed("".join(f"{o['kind']} {o['metadata']['name']} u-{i}\n" for i, o in enumerate(created)),
                         "", 0)


def _planned(name: str, job: str) -> Any:
    from kubectl_tao.workflows.runs import StepPlan

    return StepPlan(name=name, record_id=f"id-{name}", job_name=job, results=None, plan=None)


def test_run_makes_each_queued_steps_workload_from_its_job_as_stored_held_ones_inactive() -> None:
    from kubectl_tao.workflows.runs import _create_workloads

    train = copy.deepcopy(STORED)
    train["metadata"].update(name="chain-train-1a2b3c", uid="u-train")  # type: ignore[attr-defined]
    kc = Recorder({"jobs": {"items": [train, STORED]}})
    uids = {"chain-train-1a2b3c": "u-train", "chain-evaluate-1a2b3c": "7d0e7c1a-0000-4000-8000-000000000001"}
    steps = [_planned("train", "chain-train-1a2b3c"), _planned("evaluate", "chain-evaluate-1a2b3c")]
    _create_workloads(kc, chain("train", "evaluate"), "chain-1a2b3c", "tao", steps, uids)  # type: ignore[arg-type]
    (create,) = [c for c in kc.calls if c[:1] == ["create"]]
    items = json.loads(create[-1])["items"]
    assert [(o["metadata"]["name"], o["spec"]["active"]) for o in items] == [
        ("chain-train-1a2b3c", True), ("chain-evaluate-1a2b3c", False)]


def test_run_refuses_to_make_a_workload_for_a_job_it_did_not_create() -> None:
    from kubectl_tao.workflows.runs import _create_workloads

    kc = Recorder({"jobs": {"items": [STORED]}})
    with pytest.raises(GateError, match="step evaluate: its Job tao/chain-evaluate-1a2b3c was not found as created"):
        _create_workloads(kc, chain("train", "evaluate"), "chain-1a2b3c", "tao",  # type: ignore[arg-type]
                          [_planned("evaluate", "chain-evaluate-1a2b3c")], {"chain-evaluate-1a2b3c": "another-uid"})
    assert not [c for c in kc.calls if c[:1] == ["create"]]


def test_cancel_removes_only_the_workloads_of_the_runs_pinned_jobs_each_by_its_uid() -> None:
    from kubectl_tao.k8s import objects
    from kubectl_tao.store.jobrecord import JobRecord, K8sRecord
    from kubectl_tao.workflows.runs import _workloads_of

    ours = workload_object("chain-1a2b3c", STORED, active=False)
    ours["metadata"]["uid"] = "w-1"
    other = copy.deepcopy(ours)
    other["metadata"].update(name="elsewhere", uid="w-2", ownerReferences=[{"uid": "x", "controller": True}],
                             labels={})
    kc = Recorder({"workloads.kueue.x-k8s.io": {"items": [ours, other]}})
    rows = [(JobRecord.from_stored({"id": "a"}), K8sRecord.from_stored({
        "job_uid": STORED["metadata"]["uid"], "request": {"flags": {"queue": "team"}}}))]  # type: ignore[index]
    assert _workloads_of(kc, "tao", "chain-1a2b3c", rows) == [("chain-evaluate-1a2b3c", "w-1")]  # type: ignore[arg-type]
    unqueued = [(JobRecord.from_stored({"id": "a"}), K8sRecord.from_stored({"request": {"flags": {}}}))]
    assert _workloads_of(kc, "tao", "chain-1a2b3c", unqueued) == []

    path = "/apis/kueue.x-k8s.io/v1beta2/namespaces/tao/workloads/chain-evaluate-1a2b3c"
    done = objects.teardown(kc, "tao", "chain-1a2b3c", job="keep", labelled=False,  # type: ignore[arg-type]
                            workloads=[("chain-evaluate-1a2b3c", "w-1")])
    assert done.deleted == ["workload.kueue.x-k8s.io/chain-evaluate-1a2b3c"] and done.left == []
    delete = kc.calls[-1]
    assert delete[:3] == ["delete", "--raw", path] and json.loads(delete[-1])["preconditions"] == {"uid": "w-1"}
    gone = objects.teardown(Recorder({}, {path: "NotFound"}), "tao", "r", job="keep",  # type: ignore[arg-type]
                            labelled=False, workloads=[("chain-evaluate-1a2b3c", "w-1")])
    assert (gone.deleted, gone.left) == ([], [])  # the garbage collector took it with its Job
    other = objects.teardown(Recorder({}, {path: "Conflict"}), "tao", "r", job="keep",  # type: ignore[arg-type]
                             labelled=False, workloads=[("chain-evaluate-1a2b3c", "w-1")])
    assert other.deleted == [] and other.left == [
        "workload.kueue.x-k8s.io/chain-evaluate-1a2b3c (another Workload has the name now)"]


class _Plan:
    def __init__(self, queue: str | None) -> None:
        self.queue, self.patches_job, self.credentials = queue, False, False


def _ordered_run(monkeypatch: Any, queues: dict[str, str | None], fail_on: str | None = None) -> list[Any]:
    """workflow run's creates in the order they happen, for a three-step chain whose steps have QUEUES; FAIL_ON:
    the event that is refused (a Workload create, a step's launch)."""
    import types

    from kubectl_tao.jobs import submit
    from kubectl_tao.k8s import objects
    from kubectl_tao.workflows import runs

    events: list[Any] = []

    def happen(event: Any) -> None:
        events.append(event)
        if event == fail_on:
            raise GateError(f"refused {event}")

    def launch(_kc: Any, _plan: Any, _ready: Any, _store: Any, **kw: Any) -> Any:
        happen(("job", kw["extra"].workflow_step))
        return types.SimpleNamespace(job_uid=f"u-{kw['extra'].workflow_step}")

    def workloads(_kc: Any, _wf: Any, _run: str, _ns: str, steps: list[Any], uids: dict[str, str],
                  priority: Any) -> None:
        assert all(step.job_name in uids for step in steps)  # only of Jobs already created
        assert priority == ("tao-default", 100)
        happen(("workloads", [step.name for step in steps]))

    classes = {"items": [{"metadata": {"name": "tao-default"}, "value": 100, "globalDefault": True}]}
    kc = types.SimpleNamespace(start=lambda args, **_kw: types.SimpleNamespace(
        wait=lambda **_w: types.SimpleNamespace(returncode=0, stdout=json.dumps(classes)), stop=lambda: None))

    def removed(_kc: Any, _store: Any, _run: str, _ns: str, steps: list[Any], _rbac: Any, _message: str) -> str:
        events.append(("removed", [step.name for step in steps]))
        return "nothing of the run is left"

    monkeypatch.setattr(runs, "_made_part", lambda _wf, steps, _run, _known=None: steps)
    monkeypatch.setattr(runs, "gate_steps", lambda _kc, steps, **_kw: {
        s.name: types.SimpleNamespace(gated=types.SimpleNamespace(stop=lambda: None)) for s in steps})
    monkeypatch.setattr(submit, "launch", launch)
    monkeypatch.setattr(objects, "create", lambda _kc, objs, _ns: happen(("rbac", len(objs))))
    monkeypatch.setattr(runs, "_create_workloads", workloads)
    monkeypatch.setattr(runs, "_own_rbac", lambda *_a: None)
    monkeypatch.setattr(runs, "_remove", removed)
    steps = [runs.StepPlan(name=name, record_id=f"id-{name}", job_name=f"chain-{name}-1a2b3c", results=None,
                           plan=_Plan(queue)) for name, queue in queues.items()]
    try:
        runs.run(kc, chain(*queues), steps, namespace="tao", server="", context="",  # type: ignore[arg-type]
                 store_factory=lambda: None, source="chain.yaml")
    except GateError as exc:
        events.append(("error", exc.message))
    return events


def test_a_first_step_without_a_queue_starts_only_once_the_held_steps_workloads_exist(monkeypatch: Any) -> None:
    # It runs at once: were its successor's Workload made after it, a quick first step's release would find no
    # Workload to activate, and the queued step would stay held for ever.
    events = _ordered_run(monkeypatch, {"train": None, "evaluate": "team", "export": "team"})
    assert events == [("rbac", 6), ("job", "export"), ("job", "evaluate"), ("workloads", ["export", "evaluate"]),
                      ("job", "train")]


def test_a_queued_first_step_has_every_workload_made_in_one_create_after_it(monkeypatch: Any) -> None:
    # Kueue keeps a queued first step suspended until its Workload exists: one create of all of them suffices.
    events = _ordered_run(monkeypatch, {"train": "team", "evaluate": "team", "export": None})
    assert events == [("rbac", 6), ("job", "export"), ("job", "evaluate"), ("job", "train"),
                      ("workloads", ["train", "evaluate"])]


def test_a_refused_workload_create_removes_every_step_created_and_the_rbac(monkeypatch: Any) -> None:
    for queues, refused in (({"train": "team", "evaluate": "team", "export": "team"},
                             ("workloads", ["train", "evaluate", "export"])),
                            ({"train": None, "evaluate": "team", "export": "team"},
                             ("workloads", ["export", "evaluate"]))):
        events = _ordered_run(monkeypatch, queues, fail_on=refused)  # type: ignore[arg-type]
        made = [name for kind, name in events if kind == "job"]
        assert events[-2:] == [("removed", made), ("error", f"refused {refused} (nothing of the run is left)")]


def test_the_workload_gets_the_global_default_priority_class_as_kueue_gives_a_job_naming_none() -> None:
    from kubectl_tao.workflows.objects import default_priority

    listed = {"items": [
        {"metadata": {"name": "system-node-critical"}, "value": 2000001000},
        {"metadata": {"name": "team-default"}, "value": 1000, "globalDefault": True},
        {"metadata": {"name": "raced-default"}, "value": 500, "globalDefault": True},  # Kueue takes the lowest
    ]}
    assert default_priority(listed) == ("raced-default", 500)
    assert default_priority({"items": [{"metadata": {"name": "high"}, "value": 9}]}) is None
    made = workload_object("chain-1a2b3c", STORED, active=False, priority=("raced-default", 500))
    assert made["spec"]["priorityClassRef"] == {"group": "scheduling.k8s.io", "kind": "PriorityClass",
                                                "name": "raced-default"}
    assert made["spec"]["priority"] == 500
    # No global default: Kueue's priority 0 without a ref, which is what a Workload without either means to it.
    bare = workload_object("chain-1a2b3c", STORED, active=False)
    assert "priorityClassRef" not in bare["spec"] and "priority" not in bare["spec"]


def test_priority_classes_that_cannot_be_read_are_a_warning_and_kueues_default() -> None:
    import types

    from kubectl_tao.k8s.kubectl import Kubectl
    from kubectl_tao.workflows.runs import _priority

    said: list[str] = []
    denied = types.SimpleNamespace(wait=lambda **_kw: types.SimpleNamespace(
        returncode=1, stdout="", stderr='Error from server (Forbidden): priorityclasses.scheduling.k8s.io is '
        'forbidden: User "alice" cannot list resource "priorityclasses" in API group "scheduling.k8s.io" at the '
        "cluster scope"))
    assert _priority(Kubectl(), denied, said.append) is None
    (line,) = said
    assert line.startswith("warning: could not read the cluster's priorityclasses.scheduling.k8s.io (")
    assert "priority 0" in line and "list priorityclasses.scheduling.k8s.io" in line


def test_ctrl_c_while_the_priority_classes_are_read_stops_every_steps_gates_and_creates_nothing(
    monkeypatch: Any,
) -> None:
    import types

    from kubectl_tao.jobs import submit
    from kubectl_tao.workflows import runs

    stopped: list[str] = []
    removed: list[Any] = []

    def interrupted(**_kw: Any) -> Any:
        raise KeyboardInterrupt

    kc = types.SimpleNamespace(start=lambda args, **_kw: types.SimpleNamespace(wait=interrupted, stop=lambda: None))
    monkeypatch.setattr(runs, "_made_part", lambda _wf, steps, _run, _known=None: steps)
    monkeypatch.setattr(runs, "gate_steps", lambda _kc, steps, **_kw: {
        s.name: types.SimpleNamespace(gated=types.SimpleNamespace(stop=lambda s=s: stopped.append(s.name)))
        for s in steps})
    monkeypatch.setattr(submit, "launch", lambda *_a, **_kw: pytest.fail("nothing may be created"))
    monkeypatch.setattr(runs, "_remove", lambda _kc, _st, _run, _ns, steps, _rbac, _msg: removed.append(steps))
    steps = [runs.StepPlan(name=name, record_id=f"id-{name}", job_name=f"chain-{name}-1a2b3c", results=None,
                           plan=_Plan("team")) for name in ("train", "evaluate")]
    with pytest.raises(KeyboardInterrupt):
        runs.run(kc, chain("train", "evaluate"), steps, namespace="tao", server="", context="",  # type: ignore[arg-type]
                 store_factory=lambda: None, source="chain.yaml")
    assert sorted(stopped) == ["evaluate", "train"] and removed == [[]]
