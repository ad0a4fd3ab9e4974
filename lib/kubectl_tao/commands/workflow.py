"""`kubectl tao workflow render|run|status|cancel|list`: several jobs run in order in the cluster (docs/workflows.md).

A step's flags are submit's job flags (core/flagtable.JOB_FLAGS, by their long names): typed as submit's
parser types them, then checked by the same code submit runs (checked_warnings, jobs/plan.build).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from kubectl_tao.commands.common import MANIFEST_FORMATS, VerbCommand, output_option, session, verb_group

if TYPE_CHECKING:
    from kubectl_tao.workflows.runs import StepPlan
    from kubectl_tao.workflows.spec import Workflow

EPILOG = """\b
Examples:
  kubectl tao workflow render examples/workflows/tao-detection.yaml     # every step's manifests, offline
  kubectl tao workflow run examples/workflows/tao-detection.yaml        # check all, create all, return
  kubectl tao workflow status dino-detect-3f9a1c
  kubectl tao workflow cancel dino-detect-3f9a1c

\b
A workflow file lists steps, each with submit's long flag names; every step but the first is created held
(spec.suspend) and released from inside the cluster by the step before it, once that step exits 0 and the
step's `when` gate passes (docs/workflows.md: the mechanism and its RBAC).
Exit codes: 0 ok, 1 a gate refused or a step failed, 2 bad workflow file or flags, 3 cluster unreachable,
4 a step can never fit this cluster."""

workflow_app = verb_group(
    "workflow", "Run several jobs in order in the cluster (train -> evaluate -> prune -> ...), from one file.", EPILOG
)

RENDER_EPILOG = """\b
Examples:
  kubectl tao workflow render examples/workflows/tao-detection.yaml
  kubectl tao workflow render examples/workflows/pytorch-two-step.yaml -n ml -o json

\b
The release ServiceAccount, Role and RoleBinding, then each step's objects as `submit --dry-run=client` prints
them (the record ids are previews; run mints the real ones). Exit codes: 0 ok, 2 a bad workflow file."""

RUN_EPILOG = """\b
Examples:
  kubectl tao workflow run examples/workflows/tao-detection.yaml -n tao
  kubectl tao workflow run examples/workflows/pytorch-two-step.yaml -o json

\b
Every step's gates and server dry run pass before anything is created; then the release RBAC, the held steps
and the first step are created, and the command returns: the chain runs in the cluster with no client.
Exit codes: 0 created, 1 a gate refused, 2 a bad workflow file, 3 cluster unreachable, 4 a step never fits."""

STATUS_EPILOG = """\b
Examples:
  kubectl tao workflow status dino-detect-3f9a1c
  kubectl tao workflow status dino-detect-3f9a1c -o json

\b
Workflow states: RUNNING, COMPLETE, ERROR, GATE_FAILED, CANCELED; step states: HELD, PENDING, RUNNING,
COMPLETE, ERROR, NOT_RUN, CANCELED. One cluster read (the run's Jobs)."""

CANCEL_EPILOG = """\b
Examples:
  kubectl tao workflow cancel dino-detect-3f9a1c

\b
Every step's Job (by its pinned UID), held ones included, its Service and Secret, and the release
ServiceAccount, Role and RoleBinding are deleted; the steps not finished are marked CANCELED."""

RESUME_EPILOG = """\b
Examples:
  kubectl tao workflow resume dino-detect-3f9a1c
  kubectl tao workflow resume dino-detect-3f9a1c -o json

\b
Runs again every step of an ended run that did not COMPLETE (failed, removed, canceled), as a new run: each
from the request its record kept, into its old results directory (the finished steps' results are where the
steps read them), the first of them at once and the rest held as before. Refused while the run is running
and after a failed metric gate (change the workflow and run it). Exit codes as run's."""

LIST_EPILOG = """\b
Examples:
  kubectl tao workflow list
  kubectl tao workflow list -o json

\b
From the records of this state directory alone (no cluster read); `workflow status NAME` reads the cluster."""

# The flags a workflow step cannot take, and why.
_REFUSED = {
    "action_request": "an action request names its own command; give the step `image` and `command`",
    "staging_map": "it belongs to --action-request, which a workflow step does not take",
    "config_source": "it belongs to --action-request, which a workflow step does not take",
    "keep_until_captured": "every workflow step is kept until its ending is captured; leave it out",
}


def register(app: typer.Typer) -> None:
    app.add_typer(workflow_app)


def spellings() -> dict[str, str]:
    """Each job flag's long name without the dashes -> its key in JOB_FLAGS."""
    from kubectl_tao.core.flagtable import JOB_FLAGS

    return {flag.names[0].removeprefix("--"): key for key, flag in JOB_FLAGS.items()}


_JSON_TYPES = {
    "int": {"type": "integer"},
    "optint": {"type": ["integer", "null"]},
    "switch": {"type": "boolean"},
    "many": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
    "text": {"type": ["string", "number", "null"]},
    "word": {"type": ["string", "number"]},
}


def schema_document() -> dict[str, Any]:
    """schemas/workflow.v1.schema.json as JOB_FLAGS makes it (a unit test keeps the file equal to this)."""
    from kubectl_tao.core.flagtable import JOB_FLAGS
    from kubectl_tao.workflows.spec import API_VERSION, KIND, MAX_STEP_NAME, MAX_STEPS, MAX_WORKFLOW_NAME

    name = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
    flags = {
        flag.names[0].removeprefix("--"): {"description": flag.help, **_JSON_TYPES[flag.kind]}
        for key, flag in JOB_FLAGS.items() if key not in _REFUSED
    }
    step_keys = {
        "name": {"description": "The step's name: lower-case letters, digits and '-'.", "type": "string",
                 "pattern": name, "maxLength": MAX_STEP_NAME},
        "after": {"description": "The one step this one runs after (default: the step above).", "type": "string",
                  "pattern": name},
        "when": {"description": "A metric gate: STEP.KPI OP NUMBER, OP one of >= > <= < ==, read from the "
                                "status.json under STEP's results.", "type": "string"},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://github.com/kubectl-tao/kubectl-tao/schemas/workflow.v1.schema.json",
        "title": "workflow",
        "description": "A kubectl-tao workflow file (docs/workflows.md): steps run in order in the cluster, each a "
                       "job with submit's long flag names. Generated from the job flag table (core/flagtable.py).",
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "steps"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": API_VERSION},
            "kind": {"const": KIND},
            "metadata": {"type": "object", "required": ["name"], "additionalProperties": False,
                         "properties": {"name": {"type": "string", "pattern": name,
                                                 "maxLength": MAX_WORKFLOW_NAME}}},
            "defaults": {"type": "object", "additionalProperties": False, "properties": flags},
            "steps": {"type": "array", "minItems": 1, "maxItems": MAX_STEPS, "items": {
                "type": "object", "required": ["name"], "additionalProperties": False,
                "properties": {**step_keys, **flags}}},
        },
    }


def read_workflow(path: str) -> Workflow:
    """The checked workflow of the file at PATH (UsageError: one line naming the step and field)."""
    from kubectl_tao.core.errors import UsageError
    from kubectl_tao.workflows.spec import MAX_BYTES, load, parse_text

    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"workflow file {path}: {exc.strerror or exc}; name a readable file") from None
    if len(data) > MAX_BYTES:
        raise UsageError(f"{path}: larger than {MAX_BYTES // 1024} KiB; a workflow file is a short list of steps")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text; save the workflow file as UTF-8") from None
    from kubectl_tao.core.schemas import validate

    doc = parse_text(text, path)
    workflow = load(doc, path, spellings())  # its own refusals first: they name the step and the fix
    for step in workflow.steps:
        for key, value in step.flags.items():
            _typed(step.name, key, value, path)
    validate(doc, "workflow.v1", what=path)  # then the schema, for anything the checks above let through
    return workflow


def _typed(step: str, key: str, value: Any, path: str) -> Any:
    """VALUE as submit's parser types job flag KEY (a single string for a repeatable flag becomes a list)."""
    from kubectl_tao.core.errors import UsageError
    from kubectl_tao.core.flagtable import JOB_FLAGS
    from kubectl_tao.jobs.flags import kept_value_problem

    flag = JOB_FLAGS[key]
    if key in _REFUSED:
        raise UsageError(f"{path}: step {step!r}: {flag.names[0].removeprefix('--')}: {_REFUSED[key]}")
    if flag.kind == "many" and isinstance(value, str):
        value = [value]
    if flag.kind in ("text", "word") and isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)  # `shm-size: 16` or `network-arch: 1` read as numbers by YAML; submit reads text
    problem = kept_value_problem(key, value)
    if problem is not None:
        raise UsageError(
            f"{path}: step {step!r}: {flag.names[0].removeprefix('--')} is {problem} (what {flag.names[0]} takes)"
        )
    return value


def plan_steps(path: str, workflow: Workflow, namespace: str, server: str, *, credentials: bool) -> list[StepPlan]:
    """Every step's Job (jobs/plan.build), checked as submit checks its flags, with its record id minted and its
    references resolved. CREDENTIALS False: only the credential names are read (render)."""
    from kubectl_tao.core.errors import UsageError
    from kubectl_tao.core.flagtable import JOB_FLAGS
    from kubectl_tao.core.flagvalues import int_in
    from kubectl_tao.core.names import kubernetes_job_name
    from kubectl_tao.jobs import plan as planning
    from kubectl_tao.jobs.flags import checked_warnings, job_request
    from kubectl_tao.manifests.render import MAX_TTL_SECONDS
    from kubectl_tao.store.recordfields import normalize_results_dir
    from kubectl_tao.store.recordids import preview_id
    from kubectl_tao.workflows.objects import wrap_command
    from kubectl_tao.workflows.runs import StepPlan
    from kubectl_tao.workflows.spec import resolve

    typed: dict[str, dict[str, Any]] = {}
    ids: dict[str, str] = {}
    results: dict[str, str] = {}
    for step in workflow.steps:
        flags = {key: _typed(step.name, key, value, path) for key, value in step.flags.items()}
        typed[step.name] = flags
        arch = flags.get("network_arch", JOB_FLAGS["network_arch"].default)
        action = flags.get("action", JOB_FLAGS["action"].default)
        ids[step.name] = preview_id(str(arch), str(action))
        tier = str(flags.get("storage_tier") or "A").upper()
        own = flags.get("results_dir")
        if isinstance(own, str) and own:
            results[step.name] = normalize_results_dir(own)
        elif tier != "C":
            mount = str(flags.get("mount_path") or JOB_FLAGS["mount_path"].default).rstrip("/")
            results[step.name] = f"{mount}/results/{ids[step.name]}"
    jobs = {name: kubernetes_job_name(record_id) for name, record_id in ids.items()}
    for step in workflow.steps:  # a gate is read by the pod of the step before it, from the gated step's results
        gate = step.when
        if gate is None or step.after is None:
            continue
        if gate.step not in results:
            raise UsageError(
                f"{path}: step {step.name!r}: when reads {gate.step!r}, a storage-tier C step whose status.json goes "
                "to S3; give that step a results-dir on a volume"
            )
        seen_from, gated = typed[step.after], typed[gate.step]
        mount = JOB_FLAGS["mount_path"].default
        if (seen_from.get("pvc"), seen_from.get("mount_path") or mount) != (gated.get("pvc"),
                                                                           gated.get("mount_path") or mount):
            raise UsageError(
                f"{path}: step {step.name!r}: when reads {gate.step!r}'s status.json in the pod of {step.after!r}, "
                "which mounts another volume; give both steps the same pvc and mount-path"
            )
    plans = []
    for step in workflow.steps:
        flags = typed[step.name]
        for key, value in list(flags.items()):
            texts = value if isinstance(value, list) else [value]
            for text in texts:
                if isinstance(text, str) and "${" in text:
                    missing = [name for name in workflow.steps if name.name not in results]
                    if any(f"${{{name.name}.results}}" in text for name in missing):
                        raise UsageError(
                            f"{path}: step {step.name!r}: {key.replace('_', '-')}: references the results of a "
                            "storage-tier C step, which go to S3 and are no directory its pods see; give that step "
                            "a results-dir on a volume"
                        )
            if isinstance(value, str):
                flags[key] = resolve(value, results)
            elif isinstance(value, list):
                flags[key] = [resolve(item, results) if isinstance(item, str) else item for item in value]
        plain = job_request(frozenset(step.given), **flags)  # what the record keeps: `resubmit`, `resume`
        releases = bool(workflow.successors(step.name))
        if releases:
            for key in ("max_restarts", "retries_per_index"):
                if flags.get(key):
                    spelled = key.replace("_", "-")
                    raise UsageError(
                        f"{path}: step {step.name!r}: {spelled}: a step that releases the next one runs its release "
                        "after each attempt, so a failed attempt would remove the steps after it; leave "
                        f"{spelled} out of this step (retry inside its command)"
                    )
            if flags.get("launcher") == "torchrun":
                raise UsageError(
                    f"{path}: step {step.name!r}: launcher torchrun: a step that releases the next one runs its "
                    "command through the shell; use the tao launcher and put torchrun in the command"
                )
            if isinstance(flags.get("command"), str):
                flags["command"] = wrap_command(flags["command"])
        # Every step's Job keeps its TTL off until its ending is in its record (`workflow status` or `status`
        # writes it, then sets the TTL): a step the TTL removed unseen would look as if it never ran.
        request = job_request(frozenset(step.given), **flags).replaced(keep_until_captured=True)
        try:
            warnings = checked_warnings(request)
            int_in(request.ttl_seconds, "ttl seconds", 0, MAX_TTL_SECONDS)  # set once the ending is captured
            creds = planning.read_credentials(request.env_file, request.env)
            if not credentials:  # only the names: the manifests name the Secret, values stay out
                creds = dict.fromkeys(creds, "placeholder")
            the_plan = planning.build(request, namespace, creds, server=server)
        except UsageError as exc:
            raise UsageError(f"{path}: step {step.name!r}: {exc.message}") from None
        plans.append(StepPlan(step.name, ids[step.name], jobs[step.name], results.get(step.name), the_plan, warnings,
                              plain))
    return plans


@workflow_app.command("render", cls=VerbCommand, epilog=RENDER_EPILOG)
def render(
    file: str = typer.Argument(..., help="The workflow file (docs/workflows.md)."),
    output: str = output_option(MANIFEST_FORMATS),
) -> int:
    """Print every step's manifests and the release RBAC, offline."""
    from kubectl_tao.cli.output import check_format, emit, info
    from kubectl_tao.manifests.render import to_json, to_yaml
    from kubectl_tao.workflows.runs import render_run

    fmt = check_format(output, MANIFEST_FORMATS)
    workflow = read_workflow(file)
    sess = session()
    namespace = sess.namespace()
    steps = plan_steps(file, workflow, namespace, sess.target().server, credentials=False)
    for step in steps:
        for warning in step.warnings:
            info(f"warning: step {step.name}: {warning}")
    objects = render_run(sess.kubectl(), workflow, steps, namespace, run_id=f"{workflow.name}-preview")
    emit(to_json(objects) if fmt == "json" else to_yaml(objects))
    return 0


@workflow_app.command("run", cls=VerbCommand, epilog=RUN_EPILOG)
def run(
    file: str = typer.Argument(..., help="The workflow file (docs/workflows.md)."),
    output: str = output_option(("table", "json", "yaml", "name"), "the workflow run's name"),
) -> int:
    """Check every step, then create them all (the first runs, the rest held)."""
    from kubectl_tao.cli.output import check_format, emit, emit_data, info
    from kubectl_tao.commands.common import lazy_record_store
    from kubectl_tao.workflows import runs

    fmt = check_format(output, ("table", "json", "yaml", "name"))
    workflow = read_workflow(file)
    sess = session()
    namespace = sess.namespace()
    target = sess.target()
    steps = plan_steps(file, workflow, namespace, target.server, credentials=True)
    for step in steps:
        for warning in step.warnings:
            info(f"warning: step {step.name}: {warning}")
    store = lazy_record_store()
    store()  # a bad TAO_STATE_DIR is bad input: refuse before any cluster call
    created = runs.run(sess.kubectl(), workflow, steps, namespace=namespace, server=target.server,
                            context=target.context, store_factory=store, source=file, on_progress=info)
    if fmt == "name":
        emit(f"workflow/{created['name']}\n")
    elif not emit_data(fmt, created):
        emit(f"{created['name']}\n")
        info(f"workflow {created['name']} created; follow it with `kubectl tao workflow status {created['name']}`")
    return 0


@workflow_app.command("status", cls=VerbCommand, epilog=STATUS_EPILOG)
def status(
    name: str = typer.Argument(..., help="The workflow run (`kubectl tao workflow list`)."),
    output: str = output_option(("table", "json", "yaml")),
) -> int:
    """Every step of a workflow run: state, record, why it is held, the gate outcome."""
    from kubectl_tao.cli.output import check_format, emit, emit_data, table
    from kubectl_tao.commands.common import record_store
    from kubectl_tao.workflows import runs

    fmt = check_format(output, ("table", "json", "yaml"))
    sess = session()
    seen = runs.status(sess.kubectl(), record_store(), name, server=sess.target().server)
    if not emit_data(fmt, seen):
        emit(f"workflow {seen['name']}: {seen['state']}" + (f" ({seen['reason']})" if seen["reason"] else "") + "\n")
        emit(table([(s["name"], s["state"], s["id"], s["progress"] or "-", s["kpi"] or "-", s["reason"])
                    for s in seen["steps"]], ("STEP", "STATE", "RECORD", "PROGRESS", "KPI", "REASON")))
    return 0


@workflow_app.command("cancel", cls=VerbCommand, epilog=CANCEL_EPILOG)
def cancel(
    name: str = typer.Argument(..., help="The workflow run (`kubectl tao workflow list`)."),
    output: str = output_option(("table", "json", "yaml")),
) -> int:
    """Remove every step's objects (held ones too) and the release RBAC."""
    from kubectl_tao.cli.output import check_format, emit, emit_data
    from kubectl_tao.commands.common import record_store
    from kubectl_tao.workflows import runs

    fmt = check_format(output, ("table", "json", "yaml"))
    sess = session()
    done = runs.cancel(sess.kubectl(), record_store(), name, server=sess.target().server)
    if not emit_data(fmt, done):
        emit(f"workflow {name} canceled; deleted: {', '.join(done['deleted']) or 'nothing left'}\n")
    return 0


@workflow_app.command("resume", cls=VerbCommand, epilog=RESUME_EPILOG)
def resume(
    name: str = typer.Argument(..., help="The workflow run (`kubectl tao workflow list`)."),
    output: str = output_option(("table", "json", "yaml", "name"), "the new run's name"),
) -> int:
    """Run again the steps of an ended run that did not succeed."""
    from kubectl_tao.cli.output import check_format, emit, emit_data, info
    from kubectl_tao.commands.common import lazy_record_store
    from kubectl_tao.core.errors import UsageError
    from kubectl_tao.core.names import kubernetes_job_name
    from kubectl_tao.jobs import plan as planning
    from kubectl_tao.jobs.resubmit import request_from_record
    from kubectl_tao.store.jobrecord import K8sRecord
    from kubectl_tao.store.recordids import preview_id
    from kubectl_tao.workflows import runs
    from kubectl_tao.workflows.objects import wrap_command

    fmt = check_format(output, ("table", "json", "yaml", "name"))
    sess = session()
    target = sess.target()
    store = lazy_record_store()
    rows = runs.step_records(store(), name)
    namespace = str(rows[0][1].namespace)
    left = runs.resumable(runs.status(sess.kubectl(), store(), name, server=target.server))
    workflow = runs.resumed_workflow(rows, left)
    results = {str(extra.workflow_step): extra.results_seen_as or rec.results_dir for rec, extra in rows}
    steps = []
    for rec, extra in rows:
        step = str(extra.workflow_step)
        if step not in left:
            continue
        plain = request_from_record(rec.id, rec.to_stored(), extra.to_stored(), None)  # into its old results dir
        request = plain
        if workflow.successors(step):
            request = plain.replaced(command=wrap_command(plain.command))
        request = request.replaced(keep_until_captured=True)  # as `workflow run` holds it (plan_steps)
        try:
            the_plan = planning.build(request, namespace, planning.read_credentials(request.env_file, request.env),
                                      server=target.server)
        except UsageError as exc:
            raise UsageError(f"step {step!r} (record {rec.id}): {exc.message}") from None
        record_id = preview_id(plain.network_arch, plain.action)
        steps.append(runs.StepPlan(step, record_id, kubernetes_job_name(record_id), results[step] or None,
                                        the_plan, [], plain))
    created = runs.run(sess.kubectl(), workflow, steps, namespace=namespace, server=target.server,
                            context=target.context, store_factory=store,
                            source=rows[0][1].workflow_file or "", on_progress=info,
                            extra_fields=K8sRecord.partial(resumed_from=name), results=results)
    if fmt == "name":
        emit(f"workflow/{created['name']}\n")
    elif not emit_data(fmt, created):
        emit(f"{created['name']}\n")
        info(f"workflow {name} resumed as {created['name']} ({', '.join(left)}); follow it with "
             f"`kubectl tao workflow status {created['name']}`")
    return 0


@workflow_app.command("list", cls=VerbCommand, epilog=LIST_EPILOG)
def list_(output: str = output_option(("table", "json", "yaml"))) -> int:
    """The workflow runs of this state directory (from their steps' records)."""
    from kubectl_tao.cli.output import as_list, check_format, emit, emit_data, table
    from kubectl_tao.commands.common import record_store
    from kubectl_tao.workflows import runs

    fmt = check_format(output, ("table", "json", "yaml"))
    rows = runs.runs(record_store())
    if not emit_data(fmt, as_list(rows)):
        emit(table([(r["name"], r["workflow"], r["namespace"], r["steps"], r["submitted"]) for r in rows],
                   ("NAME", "WORKFLOW", "NAMESPACE", "STEPS", "SUBMITTED")))
    return 0
