"""A workflow run (docs/workflows.md): render, run, status, cancel and list over its steps' records and Jobs.

`run` checks every step before creating anything (each step's gates and server dry run, as `submit` runs
them), then creates the release RBAC (workflows/objects.py), the held steps from the last to the first (so a
step never ends before the Job it releases exists), and the first step last; then it makes every step Job an
owner of the RBAC objects, so the garbage collector removes them with the last step Job (TTL or cancel). A
failure while creating removes what this run created and settles the created steps' records as a failed submit's
(jobs/submit.roll_back: ERROR, or UNKNOWN until `status` can finish the removal).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

from kubectl_tao.core import contract
from kubectl_tao.core.errors import GateError, TaoError
from kubectl_tao.core.names import secret_name_for
from kubectl_tao.core.valueclass import Factory, Value, record
from kubectl_tao.k8s.kubectl import Kubectl
from kubectl_tao.store.jobrecord import JobRecord, K8sRecord
from kubectl_tao.workflows.objects import (
    PRIORITY_CLASSES,
    rbac_objects,
    release_plan,
    selector,
    step_objects,
    workload_object,
)
from kubectl_tao.workflows.spec import Workflow

# Workflow and step states (`workflow status`).
RUNNING, COMPLETE, ERROR, GATE_FAILED, CANCELED = "RUNNING", "COMPLETE", "ERROR", "GATE_FAILED", "CANCELED"
HELD, PENDING, NOT_RUN = "HELD", "PENDING", "NOT_RUN"


@record
class StepPlan(Value):
    name: str
    record_id: str
    job_name: str
    results: str | None  # the results directory its pods see (None: tier C, uploaded to S3)
    plan: Any  # jobs/plan.Job
    warnings: list[str] = Factory(list)
    request: Any = None  # the step's JobRequest before the release wrapped its command (the record keeps it)


def new_run_id(workflow: Workflow) -> str:
    import secrets

    return f"{workflow.name}-{secrets.token_hex(3)}"


def _made_part(
    workflow: Workflow, steps: list[StepPlan], run_id: str, known: dict[str, str] | None = None
) -> list[StepPlan]:
    """The steps' plans whose render makes the Job part of the run (labels, hold, release). KNOWN: the results
    directories of steps outside this run that a gate reads (a resumed run's finished steps)."""
    from kubectl_tao.core.templates import load_template

    script = load_template("workflow-release.py")
    jobs = {step.name: step.job_name for step in steps}
    results = {**(known or {}), **{step.name: step.results or "" for step in steps}}
    queued = _queued(steps)
    made = []
    for step in steps:
        releases = bool(workflow.successors(step.name))
        plan = release_plan(workflow, step.name, jobs, results, queued) if releases else None
        inner = step.plan.render

        def render(job_name: str, record_id: str, secret: str | None, *, _inner: Any = inner,
                   _name: str = step.name, _plan: Any = plan) -> list[dict[str, Any]]:
            return step_objects(_inner(job_name, record_id, secret), run_id=run_id, step=_name,
                                held=workflow.step(_name).after is not None, plan=_plan,
                                release_script=script, queued=_name in queued)

        made.append(step.replaced(plan=step.plan.replaced(render=render)))
    return made


def _queued(steps: list[StepPlan]) -> set[str]:
    """The steps submitted to a Kueue LocalQueue (`queue`): held and released through their Workloads."""
    return {step.name for step in steps if getattr(step.plan, "queue", None)}


def render_run(kc: Kubectl, workflow: Workflow, steps: list[StepPlan], namespace: str, *, run_id: str) -> list[Any]:
    """Every object `run` would create, offline: the release RBAC, then each step's (first step first)."""
    from kubectl_tao.jobs.submit import execute

    queued = _queued(steps)
    objects: list[Any] = rbac_objects(run_id, namespace, workflow, {step.name: step.job_name for step in steps},
                                      queued)
    for step in _made_part(workflow, steps, run_id):
        outcome = execute(kc, step.plan, namespace=namespace, target_server="", target_context="",
                          dry_run="client", store_factory=lambda: None, name=step.record_id)
        objects.extend(outcome.objects)
        if step.name in queued:  # `run` makes it from the Job as stored (its UID, the server's defaults)
            objects.extend(workload_object(run_id, {**job, "metadata": {"namespace": namespace, **job["metadata"]}},
                                           active=workflow.step(step.name).after is None)
                           for job in outcome.objects if job.get("kind") == "Job")
    return objects


def run(
    kc: Kubectl,
    workflow: Workflow,
    steps: list[StepPlan],
    *,
    namespace: str,
    server: str,
    context: str,
    store_factory: Callable[[], Any],
    source: str,
    on_progress: Callable[[str], None] = lambda _msg: None,
    extra_fields: K8sRecord | None = None,
    results: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Check every step, then create the run; what was created (run id, each step's record and Job).
    EXTRA_FIELDS go into every step's record additions (`resume`: the run it resumes)."""
    from kubectl_tao.jobs.submit import launch
    from kubectl_tao.k8s import objects

    run_id = new_run_id(workflow)
    made = _made_part(workflow, steps, run_id, results)
    store = store_factory()
    queued = _queued(steps)
    rbac = rbac_objects(run_id, namespace, workflow, {step.name: step.job_name for step in steps}, queued)
    # Kueue gives a Job that names no priority the global default PriorityClass, but fills no prebuilt Workload:
    # the run reads them beside the gates and sets it itself.
    classes = kc.start(["get", PRIORITY_CLASSES, "-o", "json"], namespaced=False) if queued else None
    try:
        prepared = gate_steps(kc, made, namespace=namespace, server=server, store=store,
                              own=(bool(rbac), bool(queued)))
    except BaseException:
        if classes is not None:
            classes.stop()
        raise
    on_progress(f"workflow {run_id}: every step's gates passed; creating {len(made)} steps")
    created: list[StepPlan] = []
    uids: dict[str, str] = {}
    try:
        priority = _priority(kc, classes, on_progress) if classes is not None else None
        if rbac:  # a run with one step releases nothing
            objects.create(kc, rbac, namespace)
        # The held steps first (the last first), then the first step: a step never ends before what it releases
        # exists. A queued step's Workload is made from its stored Job, so after it; a first step without a queue
        # runs at once, so the held steps' Workloads come before it (its release activates them), while a queued
        # first step waits for its own Workload and lets all of them come in one create after it.
        held = [step for step in reversed(made) if workflow.step(step.name).after is not None]
        first = [step for step in made if workflow.step(step.name).after is None]
        early = [step for step in held if step.name in queued] if any(s.name not in queued for s in first) else []
        for step in [*held, *first]:
            if early and step.name == first[0].name:
                _create_workloads(kc, workflow, run_id, namespace, early, uids, priority)
            index = [s.name for s in workflow.steps].index(step.name)
            outcome = launch(
                kc, step.plan, prepared.pop(step.name), store, namespace=namespace, target_server=server,
                target_context=context, on_progress=on_progress,
                extra=_step_fields(workflow, run_id, step, index, source, extra_fields),
            )
            created.append(step)
            uids[step.job_name] = str(outcome.job_uid)
        late = [s for s in made if s.name in queued and s.name not in {e.name for e in early}]
        if late:
            _create_workloads(kc, workflow, run_id, namespace, late, uids, priority)
        _own_rbac(kc, namespace, uids, rbac)
    except TaoError as exc:
        for ready in prepared.values():
            ready.gated.stop()
        note = _remove(kc, store, run_id, namespace, created, rbac, f"workflow {run_id} not created: {exc.message}")
        raise type(exc)(f"{exc.message} ({note})") from None
    except BaseException as exc:
        for ready in prepared.values():
            ready.gated.stop()
        _remove(kc, store, run_id, namespace, created, rbac, f"workflow {run_id} not created: {_why(exc)}")
        raise
    return {
        "name": run_id,
        "workflow": workflow.name,
        "namespace": namespace,
        "steps": [{"name": step.name, "id": step.record_id, "job": f"{namespace}/{step.job_name}",
                   "held": workflow.step(step.name).after is not None} for step in made],
    }


def _step_fields(workflow: Workflow, run_id: str, step: StepPlan, index: int, source: str,
                 extra_fields: K8sRecord | None) -> K8sRecord:
    """What a step's record additions hold of its run: its place in it, its TTL hold and kept request."""
    from kubectl_tao.jobs import plan as planning

    spec = workflow.step(step.name)
    part = K8sRecord.partial(
        workflow=run_id, workflow_name=workflow.name, workflow_step=step.name, workflow_index=index,
        workflow_after=spec.after, workflow_when=spec.when.text() if spec.when else None, workflow_file=source,
        results_seen_as=step.results,
    )
    if step.plan.patches_job and step.request is not None:
        part = part.changed(keep_until_captured=True, ttl_seconds=step.request.ttl_seconds, ttl_hold=None)
    if step.request is not None:
        part = part.changed(request=planning.stored(step.request))
    return part if extra_fields is None else part.merged(extra_fields)


def gate_steps(
    kc: Kubectl, steps: list[StepPlan], *, namespace: str, server: str, store: Any,
    own: tuple[bool, bool] = (False, False),
) -> dict[str, Any]:
    """Every step's gates and server dry run (jobs/submit.prepare), before anything is created: the reads of
    every step start at once, each distinct read once (gates/checks.SharedReads: one read of the nodes, the pods,
    the version, a PVC several steps mount), then each step is judged from them in order, as `submit` judges it,
    so the first step refused is the one named. OWN (the release RBAC, the queued steps' Workloads): the
    permissions the run's own objects need are asked beside those reads (one review call) and judged after the
    steps. The Prepared steps, by name."""
    from kubectl_tao.gates import permissions
    from kubectl_tao.gates.checks import SharedReads
    from kubectl_tao.jobs.submit import begin_prepare, finish_prepare

    shared = SharedReads(kc)
    begun: dict[str, Any] = {}
    prepared: dict[str, Any] = {}
    failed: tuple[str, TaoError] | None = None
    wanted = permissions.workflow_needed(release=own[0], workloads=own[1])
    review = None
    if wanted:
        args, options = permissions.review_call(wanted, namespace)
        review = kc.start(args, **options)
    try:
        for step in steps:  # every step's reads on their way
            try:
                begun[step.name] = begin_prepare(kc, step.plan, namespace=namespace, target_server=server,
                                                 store=store, name=step.record_id, shared=shared)
            except TaoError as exc:  # the steps before it are judged first: their refusal comes first
                failed = (step.name, exc)
                break
        for step in steps:
            if step.name not in begun:
                break
            try:
                prepared[step.name] = finish_prepare(begun.pop(step.name))
            except TaoError as exc:
                failed = (step.name, exc)
                break
        if failed is not None:
            name, exc = failed
            raise type(exc)(f"step {name}: {exc.message} (nothing was created)") from None
        if review is not None:
            _judge_own(kc, review.wait(check=False), wanted, namespace)
            review = None
    except BaseException:
        if review is not None:
            review.stop()
        for left in begun.values():
            left.run.close()
        for ready in prepared.values():
            ready.gated.stop()
        raise
    return prepared


def _judge_own(kc: Kubectl, answer: Any, wanted: list[Any], namespace: str) -> None:
    """The review of the run's own permissions (gate_steps): a GateError naming what is missing, or that they
    could not be checked (the API server unreachable: its own error, exit 3)."""
    from kubectl_tao.core.errors import ClusterUnreachableError
    from kubectl_tao.gates import permissions

    if answer.returncode != 0 and not permissions.answered(answer.stdout):
        error = kc.error_for(answer.stderr)
        if isinstance(error, ClusterUnreachableError):
            raise type(error)(f"{error.message} (nothing was created)")
        raise GateError(f"could not check your permissions in namespace {namespace} ({error.message}); "
                        "`workflow run` needs to know it may create and remove its release RBAC and Workloads "
                        "before it creates anything (nothing was created)")
    missing = permissions.denied(wanted, answer.stdout)
    if missing:
        names = ", ".join(p.text for p in missing)
        raise GateError(f"permission denied: you may not {names} in namespace {namespace}; `workflow run` needs "
                        "them for the run's release RBAC and its queued steps' Kueue Workloads, and to remove "
                        f"them (check with `kubectl auth can-i {missing[0].text} -n {namespace}`); ask a cluster "
                        "admin for a Role that grants them, or use -n (nothing was created)")


def _why(exc: BaseException) -> str:
    return exc.message if isinstance(exc, TaoError) else f"interrupted ({type(exc).__name__})"


def _priority(kc: Kubectl, classes: Any, on_progress: Callable[[str], None]) -> tuple[str, int] | None:
    """The global default PriorityClass from the read CLASSES (objects.default_priority); a read that failed
    (PriorityClasses are cluster-scoped: a namespace's user often may not list them) is a warning, and the
    Workloads get Kueue's default priority 0."""
    import json as jsonlib

    from kubectl_tao.workflows.objects import default_priority

    answer = classes.wait(check=False)
    if answer.returncode == 0:
        with contextlib.suppress(ValueError):
            return default_priority(jsonlib.loads(answer.stdout or "{}"))
    said = kc.error_for(answer.stderr).message if answer.returncode else "not JSON"
    on_progress(f"warning: could not read the cluster's {PRIORITY_CLASSES} ({said}); the queued steps' Kueue "
                "Workloads get priority 0, which is Kueue's only when no PriorityClass is the global default "
                f"(ask for `list {PRIORITY_CLASSES}` to have it read)")
    return None


def _create_workloads(
    kc: Kubectl, workflow: Workflow, run_id: str, namespace: str, steps: list[StepPlan], uids: dict[str, str],
    priority: tuple[str, int] | None = None,
) -> None:
    """The Workloads of the queued STEPS (one read of their Jobs as stored, one create): Kueue keeps each such Job
    suspended until its Workload exists and is admitted; a held step's Workload is created inactive."""
    from kubectl_tao.k8s import objects

    jobs = read_jobs(kc, namespace, run_id)
    made = []
    for step in steps:
        job = jobs.get(step.job_name)
        if job is None or str((job.get("metadata") or {}).get("uid")) != uids.get(step.job_name):
            raise GateError(f"step {step.name}: its Job {namespace}/{step.job_name} was not found as created, so "
                               "its Kueue Workload could not be made from it")
        made.append(workload_object(run_id, job, active=workflow.step(step.name).after is None, priority=priority))
    objects.create(kc, made, namespace)


def _own_rbac(kc: Kubectl, namespace: str, uids: dict[str, str], rbac: list[dict[str, Any]]) -> None:
    """Every step Job an owner of each object of RBAC, the run's ServiceAccounts, Roles and RoleBindings (one
    patch call): they go with the last of them."""
    from kubectl_tao.k8s.objects import stream

    if not rbac:
        return

    owners = [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid} for name, uid in sorted(uids.items())]
    targets = [{"apiVersion": obj["apiVersion"], "kind": obj["kind"],
                "metadata": {"name": obj["metadata"]["name"], "namespace": namespace}}
               for obj in rbac]
    kc.run(["patch", "-f", "-", "--type=merge", "-p", json.dumps({"metadata": {"ownerReferences": owners}}),
            "-o", "name"], stdin=stream(targets), namespaced=False)


def _remove(
    kc: Kubectl, store: Any, run_id: str, namespace: str, steps: list[StepPlan], rbac: list[dict[str, Any]],
    message: str,
) -> str:
    """Remove the run's objects and settle the created steps' records as a failed submit's (jobs/submit.roll_back:
    ERROR, or UNKNOWN "rolling-back" when the API server stopped answering, which the next `workflow status`
    finishes); the note for the error line: each step's outcome and what could not be removed."""
    from kubectl_tao.jobs.submit import created_names, roll_back
    from kubectl_tao.k8s import objects

    notes = []
    for step in steps:
        secret = secret_name_for(step.job_name) if step.plan.credentials else None
        notes.append(roll_back(kc, store, step.record_id, namespace, step.job_name,
                               created_names(step.plan, step.job_name, secret), message, "ERR_INFRA"))
    made = [f"{_RESOURCE[obj['kind']]}/{obj['metadata']['name']}" for obj in rbac]
    done = _teardown_rbac(kc, run_id, namespace, made)
    if done.left:
        notes.append(f"the release RBAC: {objects.left_behind_note(namespace, done.left)}")
    return "; ".join(notes) or "nothing of the run is left"


_RESOURCE = {"ServiceAccount": "serviceaccount", "Role": "role.rbac.authorization.k8s.io",
             "RoleBinding": "rolebinding.rbac.authorization.k8s.io"}


def _teardown_rbac(kc: Kubectl, run_id: str, namespace: str, made: list[str] | None = None) -> Any:
    """Remove the run's release RBAC (by the run's label); MADE: `kind/name` of what this run created, named
    when the removal fails."""
    from kubectl_tao.k8s import objects

    kinds = "serviceaccounts,roles.rbac.authorization.k8s.io,rolebindings.rbac.authorization.k8s.io"
    return objects.teardown(kc, namespace, f"tao-wf-{run_id}", job="keep", selector=selector(run_id), kinds=kinds,
                            created=made)


def _delete_rbac(kc: Kubectl, run_id: str, namespace: str) -> list[str]:
    return list(_teardown_rbac(kc, run_id, namespace).deleted)


# ---------------------------------------------------------------- status


def step_records(store: Any, run_id: str) -> list[tuple[JobRecord, K8sRecord]]:
    """The records of run RUN_ID's steps, typed, in the order they run (GateError when there are none;
    UsageError for a name no run can have)."""
    import re

    from kubectl_tao.core.errors import UsageError

    if not re.fullmatch(r"[a-z0-9][-a-z0-9]{0,62}", run_id):
        raise UsageError(f"workflow run {run_id!r}: not a run name (lower-case letters, digits and '-'); "
                         "`kubectl tao workflow list` shows them")
    found = []
    for rec in store.list():
        extra = K8sRecord.from_stored(store.get_extra(rec.id))
        if extra.workflow == run_id:
            found.append((extra.workflow_index or 0, JobRecord.from_stored(rec), extra))
    if not found:
        raise GateError(f"no workflow {run_id!r} in this state directory; `kubectl tao workflow list` shows them")
    return [(rec, extra) for _index, rec, extra in sorted(found, key=lambda item: item[0])]


def _job_state(job: dict[str, Any] | None) -> str | None:
    if job is None:
        return None
    spec, status = job.get("spec") or {}, job.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in ("Complete", "SuccessCriteriaMet"):
            return COMPLETE
        if condition.get("status") == "True" and condition.get("type") in ("Failed", "FailureTarget"):
            return ERROR
    if spec.get("suspend"):
        return HELD
    return RUNNING if (status.get("active") or status.get("ready")) else PENDING


def _queue_state(
    job: dict[str, Any] | None, workloads: dict[str, dict[str, Any]]
) -> tuple[str | None, str]:
    """The step's state and Kueue's word on it, for a step whose Job names a Workload (held or released through
    Kueue): a suspended Job whose Workload is inactive is HELD; one whose Workload is active waits in the queue
    (PENDING, with Kueue's reason); otherwise the Job's own state."""
    from kubectl_tao.diagnosis import kueue

    live = _job_state(job)
    name = ((job or {}).get("metadata") or {}).get("labels", {}).get(contract.KUEUE_PREBUILT_WORKLOAD_LABEL)
    if live != HELD or not name:
        return live, ""
    workload = workloads.get(str(name))
    seen = kueue.admission(job, {"items": [workload] if workload else []})
    if seen is None or seen.state == kueue.WORKFLOW_HELD:
        return HELD, ""
    if seen.state == kueue.NO_WORKLOAD:
        return PENDING, f"its Kueue Workload {name} is missing; `kubectl tao workflow cancel` and run it again"
    return PENDING, seen.line()


def _failed_message(job: dict[str, Any] | None) -> str:
    """The Job's Failed condition, as `reason: message` (the record says more once `status` has read it)."""
    for condition in ((job or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Failed" and condition.get("status") == "True":
            return ": ".join(str(part) for part in (condition.get("reason"), condition.get("message")) if part)
    return ""


def _released(
    rows: list[tuple[JobRecord, K8sRecord]], jobs: dict[str, dict[str, Any]], workloads: dict[str, dict[str, Any]]
) -> set[str]:
    """The steps that released a successor: only a step whose command succeeded (and whose gate passed) lets
    the step after it run, so a successor whose Job runs unsuspended, or that completed, says its predecessor
    completed even once the predecessor's Job is gone (its TTL) and its record was never settled."""
    ran: set[str] = set()
    for rec, extra in reversed(rows):  # the steps in run order: a successor comes after its predecessor
        name = str(extra.workflow_step)
        live = _queue_state(jobs.get(str(extra.job_name)), workloads)[0]
        if name in ran or (live is not None and live != HELD) or rec.state == "COMPLETE":
            after = extra.workflow_after
            if isinstance(after, str):
                ran.add(after)
    return ran


def judge(
    rows: list[tuple[JobRecord, K8sRecord]], jobs: dict[str, dict[str, Any]],
    workloads: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The run's state from its steps' records and the Jobs read now (by Job name) and, for a run with a Kueue
    queue, its steps' Workloads (by name): `workflow status -o json`."""
    from kubectl_tao.progress.model import from_stored, main_kpi, progress_cell

    steps, gates = [], {}
    for _rec, extra in rows:
        job = jobs.get(str(extra.job_name))
        if job is not None:
            raw = ((job.get("metadata") or {}).get("annotations") or {}).get(contract.WORKFLOW_GATE_ANNOTATION)
            try:
                for outcome in json.loads(raw) if raw else []:
                    gates[outcome["step"]] = outcome
            except (ValueError, TypeError, KeyError):
                pass
    workloads = workloads or {}
    released = _released(rows, jobs, workloads)
    state, reason = COMPLETE, ""
    for rec, extra in rows:
        name, job = str(extra.workflow_step), jobs.get(str(extra.job_name))
        live, queued_reason = _queue_state(job, workloads)
        row_reason = queued_reason
        not_run = extra.workflow_not_run
        if not_run is not None and live is None:  # closed by an earlier `workflow status` (below)
            step_state, row_reason = NOT_RUN, str(not_run.get("reason") or "")
            if not_run.get("run_state") in (ERROR, GATE_FAILED) and state not in (ERROR, CANCELED):
                state, reason = str(not_run["run_state"]), str(not_run.get("run_reason") or row_reason)
        elif rec.state == "CANCELED":
            step_state = CANCELED
        elif live is not None:
            step_state = live
        elif rec.state in ("COMPLETE", "ERROR"):
            step_state = rec.state
        elif name in released:  # its Job is gone, but a step after it was released: it succeeded
            step_state = COMPLETE
        else:
            step_state = NOT_RUN
        gate = gates.get(name)
        if gate is not None and gate.get("passed"):
            row_reason = f"gate {gate.get('gate')} passed: the value was {gate.get('value'):g}" + (
                f"; {queued_reason}" if queued_reason else "")
        if step_state == HELD:
            row_reason = f"held until {extra.workflow_after} succeeds" + (
                f" and {extra.workflow_when}" if extra.workflow_when else "")
        if gate is not None and not gate.get("passed"):
            value = gate.get("value")
            seen = "no value in status.json" if value is None else f"the value was {value:g}"
            row_reason = f"gate {gate.get('gate')} failed: {seen}"
            step_state = NOT_RUN
            if state not in (ERROR, CANCELED):
                state, reason = GATE_FAILED, f"step {name}: {row_reason}"
        if step_state == ERROR and state != CANCELED:
            said = rec.last_message if rec.state == "ERROR" else ""
            said = said or _failed_message(job)
            state, reason = ERROR, f"step {name} failed" + (f": {said}" if said else "") + (
                f"; `kubectl tao explain {rec.id}` shows the cause")
        if step_state == CANCELED:
            state, reason = CANCELED, "canceled"
        kept = from_stored(extra.progress)[0]  # what the step's record keeps (`status` writes it)
        steps.append({"name": name, "state": step_state, "job": extra.job_name, "id": rec.id,
                      "reason": row_reason, "progress": progress_cell(kept), "kpi": main_kpi(kept)})
    if state == COMPLETE and any(s["state"] != COMPLETE for s in steps):
        if any(s["state"] in (HELD, PENDING, RUNNING) for s in steps):
            state = RUNNING
        else:
            state, reason = ERROR, reason or "a step neither ran nor was released"
    if state in (ERROR, GATE_FAILED):
        for row in steps:
            if row["state"] in (HELD, PENDING) and not row["reason"].startswith("gate"):
                row["state"] = NOT_RUN
    name = str(rows[0][1].workflow)
    return {"name": name, "state": state, "reason": reason, "steps": steps}


def read_workloads(kc: Kubectl, namespace: str, run_id: str) -> dict[str, dict[str, Any]]:
    """The Kueue Workloads of a run's queued steps (by name; they carry the run's label)."""
    from kubectl_tao.diagnosis.kueue import WORKLOADS

    listed = kc.json(["get", WORKLOADS, "-n", namespace, "-l", selector(run_id), "-o", "json"], namespaced=False)
    return {str(item["metadata"]["name"]): item for item in (listed or {}).get("items") or []}


def _queued_jobs(jobs: dict[str, dict[str, Any]]) -> bool:
    return any(contract.KUEUE_PREBUILT_WORKLOAD_LABEL in ((job.get("metadata") or {}).get("labels") or {})
               for job in jobs.values())


def read_jobs(kc: Kubectl, namespace: str, run_id: str) -> dict[str, dict[str, Any]]:
    listed = kc.json(["get", "jobs", "-n", namespace, "-l", selector(run_id), "-o", "json"], namespaced=False)
    return {str(item["metadata"]["name"]): item for item in (listed or {}).get("items") or []}


def _settle_finished(
    kc: Kubectl, store: Any, rows: list[tuple[JobRecord, K8sRecord]], jobs: dict[str, dict[str, Any]], server: str
) -> list[tuple[JobRecord, K8sRecord]]:
    """Each step whose Job is seen finished while its record is still open gets its ending written, as `status`
    writes a job's (jobs/track.observe: COMPLETE or ERROR, the ranks' history, the cause), so the record keeps it
    once the Job's TTL removes the Job; a step whose rollback the API server cut off has it finished (observe's
    finish_rollback). The rows as read again."""
    from kubectl_tao.jobs import track as tracking
    from kubectl_tao.store.records import ROLLING_BACK

    settled = []
    for rec, extra in rows:
        job = jobs.get(str(extra.job_name))
        finished = job is not None and _job_state(job) in (COMPLETE, ERROR)
        if not rec.terminal and (finished or extra.submit_phase == ROLLING_BACK):
            # Not settled now when it fails (a read failed, another Job took the name): the live Job shows it.
            with contextlib.suppress(TaoError):
                tracking.observe(kc, store, tracking.load(store, rec.id), server=server)
            rec, extra = JobRecord.from_stored(store.show(rec.id)), K8sRecord.from_stored(store.get_extra(rec.id))
        settled.append((rec, extra))
    return settled


def status(kc: Kubectl, store: Any, run_id: str, *, server: str = "") -> dict[str, Any]:
    """judge() over the records and the Jobs read now. A step whose Job finished has its record settled
    (_settle_finished); a step the run removed (its Job gone, its record still open) has its record closed
    CANCELED with why it did not run."""
    rows = step_records(store, run_id)
    namespace = str(rows[0][1].namespace)
    jobs = read_jobs(kc, namespace, run_id)
    workloads = read_workloads(kc, namespace, run_id) if _queued_jobs(jobs) else {}
    rows = _settle_finished(kc, store, rows, jobs, server)
    seen = judge(rows, jobs, workloads)
    records = {rec.id: rec for rec, _extra in rows}
    parents = {str(extra.workflow_step): extra.workflow_after for _rec, extra in rows}

    def after(name: str, top: str) -> bool:
        at = parents.get(name)
        for _ in range(len(parents)):
            if at is None:
                return False
            if at == top:
                return True
            at = parents.get(at)
        return False

    # Where the run ended, as the Jobs read now show it: a failed step (the steps after it were removed), or a
    # failed gate (its step and the steps after it were removed).
    failed = [s["name"] for s in seen["steps"] if s["state"] == ERROR and s["job"] in jobs]
    gated = [s["name"] for s in seen["steps"] if s["reason"].startswith("gate ") and s["state"] == NOT_RUN]
    for step in seen["steps"]:
        rec = records[step["id"]]
        removed = any(after(step["name"], top) for top in failed + gated) or step["name"] in gated
        if removed and step["state"] == NOT_RUN and step["job"] not in jobs and not rec.terminal:
            why = step["reason"] or seen["reason"] or "the workflow ended before it"
            ended = GATE_FAILED if seen["state"] == GATE_FAILED else ERROR
            not_run = {"reason": why, "run_state": ended, "run_reason": seen["reason"]}
            store.mark(rec.id, "CANCELED", message=f"not run: {why}"[:300], source="agent",
                       k8s=K8sRecord.partial(workflow_not_run=not_run))
    return seen


def cancel(kc: Kubectl, store: Any, run_id: str, *, server: str) -> dict[str, Any]:
    """Remove every step's objects (held ones included, each Job with its pinned UID) and the release RBAC;
    the records of the steps not finished are marked CANCELED."""
    from kubectl_tao.jobs import cancel as canceling
    from kubectl_tao.jobs import track as tracking
    from kubectl_tao.k8s import objects

    rows = step_records(store, run_id)
    namespace = str(rows[0][1].namespace)
    pinned = _workloads_of(kc, namespace, run_id, rows)  # read before their Jobs go (the GC may take them)
    deleted: list[str] = []
    for rec, extra in rows:
        tracked = tracking.load(store, rec.id)
        if tracked.terminal:  # its outcome stays in the record; its objects still go
            done = objects.teardown(kc, namespace, str(extra.job_name), job="name", uid=extra.job_uid)
            deleted += done.deleted
            continue
        result = canceling.cancel(kc, store, tracked, server=server, wait=False,
                                  message=f"workflow {run_id} canceled by user")
        deleted += result.deleted
    if pinned:
        deleted += objects.teardown(kc, namespace, run_id, job="keep", labelled=False, workloads=pinned).deleted
    deleted += _delete_rbac(kc, run_id, namespace)
    return {"name": run_id, "state": CANCELED, "deleted": deleted}


def _workloads_of(
    kc: Kubectl, namespace: str, run_id: str, rows: list[tuple[JobRecord, K8sRecord]]
) -> list[tuple[str, str]]:
    """Name and UID of each Kueue Workload of the run's queued steps that belongs to a step's pinned Job (its
    controller owner or Kueue's job-uid label is that Job's UID); none for a run without a queue."""
    if not any(extra.flags.get("queue") for _rec, extra in rows):
        return []
    uids = {str(extra.job_uid) for _rec, extra in rows if extra.job_uid}
    found = []
    for name, item in sorted(read_workloads(kc, namespace, run_id).items()):
        meta = item.get("metadata") or {}
        owners = {str(ref.get("uid")) for ref in meta.get("ownerReferences") or [] if ref.get("controller")}
        owner = (meta.get("labels") or {}).get(contract.KUEUE_JOB_UID_LABEL)
        if uids & (owners | {str(owner)}) and meta.get("uid"):
            found.append((name, str(meta["uid"])))
    return found


def runs(store: Any) -> list[dict[str, Any]]:
    """Every workflow run in the store, from its steps' records (no cluster read)."""
    found: dict[str, dict[str, Any]] = {}
    for rec in store.list():
        extra = K8sRecord.from_stored(store.get_extra(rec.id))
        run_id = extra.workflow
        if run_id is None:
            continue
        row = found.setdefault(run_id, {"name": run_id, "workflow": extra.workflow_name,
                                        "namespace": extra.namespace, "steps": 0,
                                        "submitted": JobRecord.from_stored(rec).submitted_at})
        row["steps"] += 1
    return sorted(found.values(), key=lambda row: row["name"])


def resumable(seen: dict[str, Any]) -> list[str]:
    """The steps `workflow resume` runs again (every step that did not COMPLETE), from `status`'s view of the
    run; GateError (exit 1) when there is nothing to resume or the run must not be resumed."""
    name, state = seen["name"], seen["state"]
    if state == RUNNING:
        raise GateError(f"workflow {name} is still running; wait for it to end, or `kubectl tao workflow cancel "
                        f"{name}` first")
    if state == GATE_FAILED:
        raise GateError(f"workflow {name} stopped at a metric gate ({seen['reason']}); a resume would run the steps "
                        "the gate stopped: change the workflow and `kubectl tao workflow run` it")
    left = [step["name"] for step in seen["steps"] if step["state"] != COMPLETE]
    if not left:
        raise GateError(f"workflow {name} is COMPLETE: every step succeeded, there is nothing to resume")
    return left


def resumed_workflow(rows: list[tuple[JobRecord, K8sRecord]], left: list[str]) -> Workflow:
    """The steps LEFT as a workflow of their own: a step whose predecessor finished starts at once (its gate
    passed when that step released it), the others keep their predecessor and gate."""
    from kubectl_tao.workflows.spec import Step, parse_gate

    steps = []
    for _rec, extra in rows:
        name = str(extra.workflow_step)
        if name not in left:
            continue
        after = extra.workflow_after
        keeps = isinstance(after, str) and after in left
        when = extra.workflow_when if keeps else None
        steps.append(Step(name, after if keeps else None,
                          parse_gate(when, f"step {name}: when") if isinstance(when, str) else None))
    return Workflow(str(rows[0][1].workflow_name or rows[0][1].workflow), steps)
