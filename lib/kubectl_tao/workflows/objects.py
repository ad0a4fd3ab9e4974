"""A workflow run's objects (docs/workflows.md): pure, from the checked Workflow and each step's Job name.

The mechanism: every step is a Job of its own, created by `workflow run` with its own record; every step but the
first is created held (`spec.suspend: true`). A step with successors runs as a ServiceAccount of its own,
whose Role may only patch and delete its successors' and their descendants' Jobs and patch its own Job
(resourceNames); its command is wrapped so
that, after the user's command, rank 0 runs templates/k8s/workflow-release.py: on exit 0 it judges each
successor's gate from the status.json under the gated step's results and patches the successor's
`spec.suspend` to false, else (or on a failed gate) it deletes the held successors and every step after them.
Steps without successors get no token at all (automountServiceAccountToken: false).

With a Kueue queue (`queue`), holding and releasing go through Kueue's admission instead of `spec.suspend`
(Kueue admits a suspended Job by unsuspending it): a queued step's Job carries Kueue's label
`kueue.x-k8s.io/prebuilt-workload-name` naming a Workload `workflow run` creates from the Job as the API server
stored it (its pod set, as Kueue's Job integration builds it, and the Job as its controller owner), active for a
step that starts at once and inactive (`spec.active: false`: never admitted, no quota) for a held one. The release
patches the held step's Workload `spec.active` to true and Kueue admits it through its queue like any Job; the
Role may patch only those named Workloads.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from kubectl_tao.core import contract
from kubectl_tao.manifests.kubelet_text import escape
from kubectl_tao.workflows.spec import Workflow

RELEASE_ENV = "KUBECTL_TAO_WF_RELEASE"
PLAN_ENV = "KUBECTL_TAO_WF_PLAN"
STATUS_VAR = "kubectl_tao_status"


def account_name(run_id: str, step: str) -> str:
    """The ServiceAccount, Role and RoleBinding of STEP, a step of workflow run RUN_ID that releases another."""
    return f"tao-wf-{run_id}-{step}"


def labels(run_id: str) -> dict[str, str]:
    return {contract.MANAGED_BY_LABEL: contract.MANAGED_BY, contract.WORKFLOW_LABEL: run_id}


def selector(run_id: str) -> str:
    return f"{contract.WORKFLOW_LABEL}={run_id},{contract.MANAGED_SELECTOR}"


CHILD_VAR = "kubectl_tao_child"
SIGNAL_VAR = "kubectl_tao_signal"


def wrap_command(command: str) -> str:
    """The step's shell text: the user's command in a background subshell (its `exit` ends only that), with
    TERM and INT forwarded to it (sh is the container's PID 1 and has no default action for them: without the
    forwarding an eviction or a cancel would SIGKILL the command after the grace period, never TERMed); the
    wrapper waits for it, again whenever a forwarded signal cut the wait short, then runs the release with its
    exit status. The container ends with the release's status (the command's, or 1 if the release failed).
    The traps are set before the command starts (a subshell resets them to the default), so a signal that comes
    at once is not lost: it is kept and sent to the command as soon as it runs."""
    child, signal = f'"${CHILD_VAR}"', SIGNAL_VAR
    forward = f'[ -z "${{{CHILD_VAR}:-}}" ] || kill -SIG {child} 2>/dev/null'
    return (
        f"{CHILD_VAR}=\n{signal}=\n"
        f"trap '{signal}=TERM; {forward.replace('SIG', 'TERM')}' TERM\n"
        f"trap '{signal}=INT; {forward.replace('SIG', 'INT')}' INT\n"
        f"(\n{command}\n) &\n{CHILD_VAR}=$!\n"
        f'[ -z "${signal}" ] || kill -"${signal}" {child} 2>/dev/null\n'
        "while :; do\n"
        f"  {signal}=\n"
        f"  wait {child}\n"
        f"  {STATUS_VAR}=$?\n"
        f'  [ -n "${signal}" ] && kill -0 {child} 2>/dev/null || break\n'
        "done\n"
        f'exec python3 -c "${RELEASE_ENV}" "${STATUS_VAR}"\n'
    )


def workload_name(job_name: str) -> str:
    """The Workload of a queued step: named as its Job (a Job name is a valid Workload name and label value)."""
    return job_name


def release_plan(
    workflow: Workflow, step: str, jobs: Mapping[str, str], results: Mapping[str, str],
    queued: Collection[str] = (),
) -> dict[str, Any]:
    """What STEP's release acts on: its own Job, and per successor its Job, its Workload when it is queued
    (QUEUED: the names of the steps with a Kueue queue), the Jobs after it and its gate."""
    nexts = []
    for name in workflow.successors(step):
        gate = workflow.step(name).when
        nexts.append({
            "name": name,
            "job": jobs[name],
            **({"workload": workload_name(jobs[name])} if name in queued else {}),
            "after": [jobs[later] for later in workflow.descendants(name)],
            "gate": None if gate is None else {
                "step": gate.step, "kpi": gate.kpi, "op": gate.op, "threshold": gate.threshold,
                "results": results[gate.step],
            },
        })
    return {"step": step, "job": jobs[step], "next": nexts}


def rbac_objects(
    run_id: str, namespace: str, workflow: Workflow, jobs: Mapping[str, str], queued: Collection[str] = ()
) -> list[dict[str, Any]]:
    """Per step that releases another (JOBS: each step's Job name): a ServiceAccount, a Role that may patch and
    delete only the Jobs of its successors and of the steps after them (release or remove), patch only its
    own Job (the gate annotation) and, for its successors with a Kueue queue (QUEUED), patch only their
    Workloads (activate), and the RoleBinding of the one to the other. No step's token can touch a step before
    it, another branch, or any other Job or Workload."""
    found: list[dict[str, Any]] = []
    meta = {"namespace": namespace, "labels": labels(run_id)}
    for step in workflow.steps:
        nexts = workflow.successors(step.name)
        if not nexts:
            continue
        name = account_name(run_id, step.name)
        held = sorted({jobs[later] for first in nexts for later in [first, *workflow.descendants(first)]})
        workloads = sorted(workload_name(jobs[first]) for first in nexts if first in queued)
        activate = [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "resourceNames": workloads,
                     "verbs": ["patch"]}] if workloads else []
        found += [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, **meta},
             "automountServiceAccountToken": False},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name, **meta},
             "rules": [{"apiGroups": ["batch"], "resources": ["jobs"], "resourceNames": held,
                        "verbs": ["patch", "delete"]},
                       {"apiGroups": ["batch"], "resources": ["jobs"], "resourceNames": [jobs[step.name]],
                        "verbs": ["patch"]}, *activate]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name, **meta},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
             "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
        ]
    return found


def step_objects(
    objects: list[dict[str, Any]],
    *,
    run_id: str,
    step: str,
    held: bool,
    plan: dict[str, Any] | None,
    release_script: str,
    queued: bool = False,
) -> list[dict[str, Any]]:
    """A step's rendered objects made part of the run (in place): the workflow labels on every object and the
    Job's pods, `spec.suspend` for a held step, and for a releasing step (PLAN not None) its own
    ServiceAccount with its token and the release's environment; every other step gets no token. A QUEUED
    step's Job names its Workload (Kueue's prebuilt-workload label) and is created suspended, held or not:
    Kueue unsuspends it when it admits the Workload."""
    marks = {contract.WORKFLOW_LABEL: run_id, contract.WORKFLOW_STEP_LABEL: step}
    for obj in objects:
        obj.setdefault("metadata", {}).setdefault("labels", {}).update(marks)
        if obj.get("kind") != "Job":
            continue
        spec = obj.setdefault("spec", {})
        if queued:
            obj["metadata"]["labels"][contract.KUEUE_PREBUILT_WORKLOAD_LABEL] = workload_name(
                str(obj["metadata"].get("name")))
        if held or queued:
            spec["suspend"] = True
        template = spec.setdefault("template", {})
        template.setdefault("metadata", {}).setdefault("labels", {}).update(marks)
        pod = template.setdefault("spec", {})
        if plan is None:
            pod["automountServiceAccountToken"] = False
            continue
        pod["serviceAccountName"] = account_name(run_id, step)
        pod["automountServiceAccountToken"] = True
        for container in pod.get("containers") or []:
            container.setdefault("env", []).extend([
                {"name": RELEASE_ENV, "value": escape(release_script)},
                {"name": PLAN_ENV, "value": escape(json.dumps(plan, sort_keys=True))},
            ])
    return objects


PRIORITY_CLASSES = "priorityclasses.scheduling.k8s.io"


def default_priority(listed: Mapping[str, Any] | None) -> tuple[str, int] | None:
    """The PriorityClass Kueue gives a Job's Workload when the Job names none (no WorkloadPriorityClass label, no
    priorityClassName): the global default one, the lowest value when several are (Kueue v0.17.0
    pkg/util/priority getDefaultPriorityClass); None: there is none, and Kueue's priority is 0 with no ref."""
    found: tuple[str, int] | None = None
    for item in (listed or {}).get("items") or []:
        value = item.get("value")
        if item.get("globalDefault") is True and isinstance(value, int) and (found is None or value < found[1]):
            found = (str((item.get("metadata") or {}).get("name")), value)
    return found


def workload_object(
    run_id: str, job: Mapping[str, Any], *, active: bool, priority: tuple[str, int] | None = None
) -> dict[str, Any]:
    """The Workload of a queued step, from its Job as the API server stored it (JOB: `kubectl get job -o json`).

    Its pod set is the one Kueue's Job integration builds (pkg/controller/jobs/job: one pod set `main`, count
    min(parallelism, completions), the Job's pod template; the topology request from the template's
    annotations), so Kueue's check that a prebuilt Workload matches its Job (count, containers, init containers
    and tolerations, compared as stored) holds; the Job is its controller owner, so Kueue adopts it as the
    Job's own and the garbage collector removes it with the Job. ACTIVE false: Kueue neither admits it nor
    counts it against quota until the release activates it. PRIORITY: the global default PriorityClass
    (default_priority), set as Kueue sets it on the Workloads it makes (`spec.priorityClassRef` and
    `spec.priority`; pkg/controller/jobframework ExtractPriority), since Kueue fills neither into a prebuilt one;
    a step's Job names no priority class of its own (no job flag sets one)."""
    meta, spec = job.get("metadata") or {}, job.get("spec") or {}
    template = spec.get("template") or {}
    parallelism = int(spec.get("parallelism") if spec.get("parallelism") is not None else 1)
    completions = spec.get("completions")
    count = min(parallelism, int(completions)) if completions is not None else parallelism
    labels = meta.get("labels") or {}
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    template_meta: dict[str, Any] = {"annotations": dict(annotations)} if annotations else {}
    pod_labels = {key: value for key, value in ((template.get("metadata") or {}).get("labels") or {}).items()
                  if key not in contract.JOB_CONTROLLER_POD_LABELS}
    if pod_labels:
        template_meta["labels"] = pod_labels
    pod_set: dict[str, Any] = {"name": "main", "count": count,
                               "template": {"metadata": template_meta, "spec": template.get("spec") or {}}}
    topology: dict[str, Any] = {}
    if contract.KUEUE_REQUIRED_TOPOLOGY in annotations:
        topology["required"] = annotations[contract.KUEUE_REQUIRED_TOPOLOGY]
    elif contract.KUEUE_PREFERRED_TOPOLOGY in annotations:
        topology["preferred"] = annotations[contract.KUEUE_PREFERRED_TOPOLOGY]
    if topology:
        pod_set["topologyRequest"] = {**topology, "podIndexLabel": contract.COMPLETION_INDEX_ANNOTATION}
    name, uid = str(meta.get("name")), meta.get("uid")
    workload_meta: dict[str, Any] = {"name": workload_name(name), "namespace": meta.get("namespace"),
                                     "labels": labels_of_step(run_id, labels)}
    if uid:  # a Job not created yet (`workflow render`) has none: `run` makes the Workload from the stored Job
        workload_meta["labels"][contract.KUEUE_JOB_UID_LABEL] = str(uid)
        workload_meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid,
                                             "controller": True}]
    spec_out: dict[str, Any] = {"active": active, "queueName": labels.get(contract.QUEUE_LABEL), "podSets": [pod_set]}
    if priority is not None:
        spec_out["priorityClassRef"] = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": priority[0]}
        spec_out["priority"] = priority[1]
    return {"apiVersion": contract.KUEUE_WORKLOAD_API, "kind": "Workload", "metadata": workload_meta,
            "spec": spec_out}


def labels_of_step(run_id: str, job_labels: Mapping[str, Any]) -> dict[str, str]:
    """The run's labels and the step's, as its Job carries them."""
    found = labels(run_id)
    step = job_labels.get(contract.WORKFLOW_STEP_LABEL)
    if step is not None:
        found[contract.WORKFLOW_STEP_LABEL] = str(step)
    return found
