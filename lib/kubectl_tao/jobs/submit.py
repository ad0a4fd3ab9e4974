"""`submit`: gates, record, Secret, render, lint, server dry-run, create, pin, mark RUNNING.

Order (each step only after the previous one passed):
  1. local validation of every flag and file (bad input: exit 2, nothing touched);
  2. mint the record id (not yet written), render the manifests for its Kubernetes name, lint them for
     inline credentials;
  3. gates, read-only and run at once: permissions, fit verdict over nodes and pods, server version
     (multi-node), referenced PVC / Secrets / keys (names only, never values), and `kubectl create
     --dry-run=server` of the credential Secret (stdin) plus the manifests -- the permission reviews ride in
     that same dry run, one process for both (a multi-node job whose gang mechanism is detected here gets its
     dry run once the mechanism is known, still before the record opens);
  4. open the job record under that id -- "record opened before launch";
  5. `kubectl create` of the dry-run stream; owner references so the Secret and Service go with the Job;
  6. mark the record RUNNING with backend_ref=<namespace>/<job name> and pin cluster, context and UID.
A gate that refuses (the server dry run included) leaves no record and nothing on the cluster. Any failure
after 4 marks the record ERROR with the reason and deletes what this submit created. When the API server
vanishes while creating, the outcome is unknown: the record is marked UNKNOWN (not terminal) and
`status`/`cancel` settle it once the server is back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kubectl_tao.core import contract
from kubectl_tao.core.errors import (
    ClusterUnreachableError,
    GateError,
    KubectlError,
    TaoError,
    UsageError,
)
from kubectl_tao.core.names import kubernetes_job_name, secret_name_for
from kubectl_tao.core.valueclass import Value, record
from kubectl_tao.jobs.plan import Job
from kubectl_tao.k8s import objects
from kubectl_tao.k8s.kubectl import Kubectl
from kubectl_tao.store.jobrecord import K8sRecord

if TYPE_CHECKING:
    from kubectl_tao.gates.checks import Gates
    from kubectl_tao.jobs.plan import JobRequest


@record
class Outcome(Value):
    record_id: str | None
    job_name: str
    namespace: str
    objects: list[dict[str, Any]]
    warnings: list[str]
    fit: dict[str, Any] | None = None
    job_uid: str | None = None
    dry_run: str = "none"
    gang: dict[str, Any] | None = None  # gang.Mechanism.to_dict()


# ---------------------------------------------------------------- gates


def gang_detected(plan: Job) -> bool:
    """Whether the gates must find out the gang mechanism (multi-node, no --queue, --gang not off): only then
    are the manifests unknown until the gates have run."""
    return plan.nodes > 1 and not plan.queue and plan.gang_mode != "off"


def run_gates(
    kc: Kubectl, plan: Job, namespace: str, server: str = "", dry_objects: list[dict[str, Any]] | None = None
) -> Gates:
    """The gate list (gates/checks.py) over this plan, read-only, before anything is created: the first refusal is
    raised. Returns the fit verdict (as a dict), the plan's warnings and the gates' (including a cached NCCL
    probe of this cluster, `server`, that failed or hung, for nodes > 1), the gang.Mechanism and, for a job
    that must queue, the DRA read still to settle (Gates). `dry_objects`: the job's objects, dry-run by the
    server in the same process as the permission reviews."""
    from kubectl_tao.gates import checks

    return checks.for_submit(kc, gate_request(plan, namespace, server, dry_objects), list(plan.warnings))


def gate_request(plan: Job, namespace: str, server: str, dry_objects: list[dict[str, Any]] | None) -> Any:
    """What the gates are asked for this job (gates/gaterequest.GateRequest)."""
    from kubectl_tao.gates.gaterequest import SUBMIT, asked

    return asked(SUBMIT, namespace, plan, server=server, objects=dry_objects)


# ---------------------------------------------------------------- apply


def plan_request(
    job: JobRequest, namespace: str, *, server: str, on_progress: Callable[[str], None], values: bool = True
) -> Job:
    """The Job of a job request: the refusals that name a flag first (jobs/flags.checked_warnings), the
    credentials read (VALUES False: their names only, for a manifest that names the Secret), the plan built; then
    the image warnings and the plan's notes said through ON_PROGRESS."""
    from kubectl_tao.jobs import plan as planning
    from kubectl_tao.jobs.flags import checked_warnings

    image_warnings = checked_warnings(job)  # refusals now, warnings once the whole request is known good
    credentials = planning.read_credentials(job.env_file, job.env)
    if not values:
        credentials = dict.fromkeys(credentials, "placeholder")
    the_plan = planning.build(job, namespace, credentials, server=server)
    for warning in image_warnings:
        on_progress(f"warning: {warning}")
    for note in the_plan.notes:
        on_progress(note)
    return the_plan


def submit_request(
    kc: Kubectl,
    job: JobRequest,
    *,
    namespace: str,
    target_server: str,
    target_context: str,
    store_factory: Callable[[], Any],
    on_progress: Callable[[str], None],
    dry_run: str = "none",
    wait: bool = False,
    require_fit_now: bool = False,
    extra_fields: K8sRecord | None = None,
    record_fields: dict[str, Any] | None = None,
) -> Outcome:
    """`submit` (and `resubmit`) once the flags are read: plan the request, then `execute`. The record keeps the
    request (jobs/plan.stored) so `resubmit` can rebuild it. With WAIT the Job is created without a TTL and gets
    it back once the wait has captured its ending (or gives up), so a short --ttl-seconds can never delete the
    outcome before it is seen."""
    from kubectl_tao.jobs import plan as planning

    kept = K8sRecord.partial(request=planning.stored(job))
    if job.max_restarts:
        kept = kept.changed(max_restarts=job.max_restarts)
    if extra_fields is not None:
        kept = kept.merged(extra_fields)
    held = None
    if wait and dry_run == "none" and not job.keep_until_captured:
        job = job.replaced(keep_until_captured=True)
        held = "wait"
    the_plan = plan_request(job, namespace, server=target_server, on_progress=on_progress)
    the_plan = the_plan.replaced(
        require_fit_now=require_fit_now, record={**the_plan.record, **(record_fields or {})}
    )
    if dry_run == "none":
        store_factory()  # a bad TAO_STATE_DIR is bad input: refuse before any cluster call
    return execute(
        kc,
        the_plan,
        namespace=namespace,
        target_server=target_server,
        target_context=target_context,
        dry_run=dry_run,
        store_factory=store_factory,
        on_progress=on_progress,
        extra=kept.changed(keep_until_captured=True, ttl_seconds=job.ttl_seconds, ttl_hold=held)
        if job.keep_until_captured else kept,
    )


def execute(
    kc: Kubectl,
    plan: Job,
    *,
    namespace: str,
    target_server: str,
    target_context: str,
    dry_run: str,
    store_factory: Callable[[], Any],
    on_progress: Callable[[str], None] = lambda _msg: None,
    name: str | None = None,
    extra: K8sRecord | None = None,
) -> Outcome:
    """Run the submit sequence. dry_run: none | client | server. `extra` goes into the record's kubectl-tao
    data before the Job is created (so whoever first sees the Job end knows, e.g., that its TTL is held).

    After opening it, the record is written twice on success: the Kubernetes names just before the create,
    then the Job's UID with RUNNING. A submit cut off between the two (API server gone, SIGKILL) leaves
    submit_phase "dry-run": `status` finds the Job by its labels and record annotation and finishes the pin and
    the owner references (track.observe), or settles the record when no Job was created."""
    from kubectl_tao.k8s import gang

    if dry_run == "client":
        return _dry(plan, namespace, None, plan.warnings,
                    gang.choose(plan.nodes, plan.queue, None, plan.gang_mode, plan.topology), name=name)
    store = store_factory() if dry_run == "none" else None
    prepared = prepare(kc, plan, namespace=namespace, target_server=target_server, store=store, name=name)
    return launch(kc, plan, prepared, store, namespace=namespace, target_server=target_server,
                  target_context=target_context, on_progress=on_progress, extra=extra)


@record
class Prepared(Value):
    """A submit whose gates passed (and whose manifests the server dry-ran), not yet created."""

    record_id: str
    job_name: str
    secret: str | None
    payload: list[dict[str, Any]]
    rendered: list[dict[str, Any]]
    gated: Any  # gates/checks.Gates: launch() stops it; a caller that does not launch must stop() it


def prepare(
    kc: Kubectl, plan: Job, *, namespace: str, target_server: str, store: Any, name: str | None = None
) -> Prepared:
    """execute()'s first half: the record id (NAME when given), the manifests, the gates and the server dry run,
    read-only. STORE None: a server dry run of its own (placeholder credentials, nothing reserved)."""
    return finish_prepare(begin_prepare(kc, plan, namespace=namespace, target_server=target_server, store=store,
                                        name=name))


@record
class Begun(Value):
    """prepare() with its gates' reads on their way (finish_prepare judges them)."""

    plan: Job
    namespace: str
    record_id: str
    job_name: str
    secret: str | None
    payload: list[dict[str, Any]] | None
    rendered: list[dict[str, Any]]
    run: Any  # gates/checks.Run
    real: bool


def begin_prepare(
    kc: Kubectl, plan: Job, *, namespace: str, target_server: str, store: Any, name: str | None = None,
    shared: Any = None,
) -> Begun:
    """prepare()'s reads started, not judged: the record id, the manifests (when known before the gates) and
    the gates' Run. SHARED (gates/checks.SharedReads): the reads other plans' gates started already are read
    from theirs (a workflow's steps)."""
    from kubectl_tao.gates import checks
    from kubectl_tao.k8s import gang

    record_id = _new_id(plan, store, name) if store is not None else (name or _new_id(plan, None))
    job_name = kubernetes_job_name(record_id)
    secret = secret_name_for(job_name) if plan.credentials else None
    payload: list[dict[str, Any]] | None = None
    rendered: list[dict[str, Any]] = []
    if not gang_detected(plan):  # the manifests are known now: dry-run them with the gates, in one process
        rendered = gang.apply(plan.render(job_name, record_id, secret),
                              gang.choose(plan.nodes, plan.queue, None, plan.gang_mode, plan.topology))
        _lint(rendered)
        payload = _payload(plan, rendered, job_name, namespace, real=store is not None)
    run = checks.Run(kc, gate_request(plan, namespace, target_server, payload), shared)
    return Begun(plan, namespace, record_id, job_name, secret, payload, rendered, run, store is not None)


def finish_prepare(begun: Begun) -> Prepared:
    """begin_prepare()'s gates judged (the first refusal raised) and, for a job whose manifests wait for the gang
    mechanism, the manifests."""
    from kubectl_tao.gates import checks
    from kubectl_tao.k8s import gang

    plan, rendered, payload = begun.plan, begun.rendered, begun.payload
    gated = checks.judge_submit(begun.run, list(plan.warnings))
    if payload is None:
        try:
            rendered = gang.apply(plan.render(begun.job_name, begun.record_id, begun.secret), gated.mechanism)
            _lint(rendered)
        except BaseException:
            gated.stop()
            raise
        payload = _payload(plan, rendered, begun.job_name, begun.namespace, real=begun.real)
    return Prepared(begun.record_id, begun.job_name, begun.secret, payload, rendered, gated)


def launch(
    kc: Kubectl,
    plan: Job,
    prepared: Prepared,
    store: Any,
    *,
    namespace: str,
    target_server: str,
    target_context: str,
    on_progress: Callable[[str], None] = lambda _msg: None,
    extra: K8sRecord | None = None,
) -> Outcome:
    """execute()'s second half, once prepare() passed: open the record, create, mark RUNNING (STORE None: the
    server dry run ends here). Stops the prepared gates."""
    try:
        return _launch(kc, plan, prepared.gated, store, prepared.record_id, prepared.job_name, prepared.secret,
                       prepared.payload, prepared.rendered, namespace=namespace, target_server=target_server,
                       target_context=target_context, on_progress=on_progress, extra=extra)
    finally:
        prepared.gated.stop()


def _launch(
    kc: Kubectl,
    plan: Job,
    gated: Gates,
    store: Any,
    record_id: str,
    job_name: str,
    secret: str | None,
    payload: list[dict[str, Any]],
    rendered: list[dict[str, Any]],
    *,
    namespace: str,
    target_server: str,
    target_context: str,
    on_progress: Callable[[str], None],
    extra: K8sRecord | None,
) -> Outcome:
    """execute() once the gates passed: open the record, create, mark RUNNING (a server dry run stops before)."""
    if store is None:  # a server dry run creates nothing: the DRA GPUs are counted at once
        gated.settle()
    warnings, mechanism = gated.warnings, gated.mechanism
    for warning in warnings:
        on_progress(f"warning: {warning}")
    if plan.nodes > 1:
        on_progress(mechanism.line())
    if gang_detected(plan):
        try:
            objects.dry_run(kc, payload, namespace)
        except KubectlError as exc:
            from kubectl_tao.gates.verdicts import dry_run_refused

            raise dry_run_refused(exc) from None
    if store is None:
        return Outcome(None, job_name, namespace, rendered, list(warnings), gated.fit, None, "server",
                       mechanism.to_dict())

    record = store.open(**plan.record, record_id=record_id)
    on_progress(f"record {record_id} opened (Kubernetes name {namespace}/{job_name})")
    created_any = False
    try:
        names = K8sRecord.partial(
            api_server=target_server,
            context=target_context,
            namespace=namespace,
            job_name=job_name,
            secret_names=(secret,) if secret else (),
            service_name=job_name if plan.nodes > 1 else None,
            gpus=plan.gpus,
            nodes=plan.nodes,
            gang=mechanism.kind,
            submit_phase="dry-run",
            warnings=tuple(warnings),
        )
        store.merge_k8s(record_id, names if extra is None else names.merged(extra))
        # Still submit_phase "dry-run" while creating and adopting: a cut-off submit is settled from the
        # cluster (see the docstring), so the record is not written again until the Job is whole.
        created_any = True
        created = objects.create(kc, payload, namespace)
        job = objects.created_job(created)
        dependents = [o for o in created if o.get("kind") in ("Secret", "Service")]
        uid = job["metadata"]["uid"]
        if dependents:
            objects.adopt(kc, job, dependents, namespace)
        # A job that must queue: its DRA GPUs were read beside the create, for the verdict and its warning only.
        added = gated.settle()
        for warning in added:
            on_progress(f"warning: {warning}")
        pinned = K8sRecord.partial(job_uid=uid, submit_phase="created")
        store.mark(
            record_id,
            "RUNNING",
            message=f"applied Job {namespace}/{job_name}",
            source="agent",
            backend_ref=f"{namespace}/{job_name}",
            k8s=pinned.changed(warnings=tuple(warnings)) if added else pinned,
        )
    except ClusterUnreachableError as exc:
        if created_any:
            store.mark(
                record_id,
                "UNKNOWN",
                message=f"API server unreachable while creating; the Job may or may not exist: {exc.message}",
                source="agent",
                backend_ref=f"{namespace}/{job_name}",
            )
            raise ClusterUnreachableError(
                f"{exc.message}; record {record_id} is UNKNOWN: run `kubectl tao status {record_id}` when the "
                "cluster is back (it settles the record and removes leftovers)"
            ) from None
        store.mark(record_id, "ERROR", message=f"not launched: {exc.message}", source="agent", err_class="ERR_INFRA")
        raise
    except TaoError as exc:
        klass = "ERR_PROGRAM" if isinstance(exc, (UsageError, GateError)) else "ERR_INFRA"
        created = created_names(plan, job_name, secret) if created_any else None
        note = roll_back(kc, store, record_id, namespace, job_name, created, f"not launched: {exc.message}", klass)
        raise type(exc)(f"{exc.message} ({note})") from None
    except BaseException as exc:  # a bug or Ctrl-C mid-submit: still leave nothing half-done
        created = created_names(plan, job_name, secret) if created_any else None
        interrupted = f"not launched: interrupted ({type(exc).__name__})"
        roll_back(kc, store, record_id, namespace, job_name, created, interrupted, "ERR_INFRA")
        raise
    assert record.id == record_id
    return Outcome(record_id, job_name, namespace, rendered, warnings, gated.fit, uid, "none", mechanism.to_dict())


def _new_id(plan: Job, store: Any, wanted: str | None = None) -> str:
    """A record id for this submit, minted before the gates so the manifests they dry-run carry it; `open`
    writes it afterwards (O_EXCL: a concurrent submit can never take the same id). Without a store (a server
    dry run) nothing is reserved. WANTED: an id minted earlier (a workflow names its steps' Jobs in each
    other's manifests): that one, or a refusal when a record has it."""
    from kubectl_tao.store.recordids import preview_id

    if wanted is not None and store is not None:
        if store.exists(wanted):
            raise TaoError(f"record id {wanted} is taken in {store.jobs_dir}; run the command again for new ids")
        return wanted

    arch, action = plan.record["network_arch"], plan.record["action"]
    for _ in range(20):
        record_id = preview_id(arch, action)
        if store is None or not store.exists(record_id):
            return record_id
    raise TaoError(f"could not mint a free record id in {store.jobs_dir} after 20 attempts")


def _payload(
    plan: Job, rendered: list[dict[str, Any]], job_name: str, namespace: str, *, real: bool
) -> list[dict[str, Any]]:
    """What `create` (and its dry run) receive: the credential Secret first, then the manifests. A dry run
    of its own (`real` False) sends placeholder values: the shape is checked, the credentials never leave."""
    items = list(rendered)
    if plan.credentials:
        data = plan.credentials if real else dict.fromkeys(plan.credentials, "dry-run")
        items.insert(
            0, objects.secret_object(secret_name_for(job_name), namespace, contract.job_labels(job_name), data)
        )
    return items


def roll_back(
    kc: Kubectl,
    store: Any,
    record_id: str,
    namespace: str,
    job_name: str,
    created: list[str] | None,
    message: str,
    err_class: str,
) -> str:
    """Remove what this submit may have `created` (None: nothing yet) and mark the record ERROR (one write);
    the note for the error line. A workflow run's rollback calls it for each step it created.

    When the removal itself fails (the API server went away or froze mid-create), the Job may exist after all:
    the record is UNKNOWN with submit_phase "rolling-back", and the next `status` finishes the removal and marks
    it ERROR (track.finish_rollback), so no record says ERROR while its Job runs."""
    from kubectl_tao.store.records import ROLLING_BACK

    done = objects.teardown(kc, namespace, job_name, created=created) if created is not None else None
    left = done.left if done is not None else []
    note = objects.left_behind_note(namespace, left) if left else ""
    if done is None or not done.unreachable:
        store.mark(
            record_id,
            "ERROR",
            message=message + (f"; {note}" if note else ""),
            source="agent",
            err_class=err_class,
            k8s=K8sRecord.partial(left_behind=tuple(left)) if left else None,
        )
        return f"record {record_id} marked ERROR; {note or 'nothing left running'}"
    store.mark(
        record_id,
        "UNKNOWN",
        message=f"{message}; the API server stopped answering before the rollback finished: {note}",
        source="agent",
        backend_ref=f"{namespace}/{job_name}",
        k8s=K8sRecord.partial(left_behind=tuple(left), submit_phase=ROLLING_BACK,
                              rollback={"message": message, "err_class": err_class}),
    )
    return (
        f"record {record_id} is UNKNOWN: the API server stopped answering before the rollback finished ({note}); "
        f"run `kubectl tao status {record_id}` when the cluster is back: it removes them and marks the record ERROR"
    )


def created_names(plan: Job, job_name: str, secret: str | None) -> list[str]:
    """`kind/name` of everything a submit of this plan creates."""
    names = [f"secret/{secret}"] if secret else []
    if plan.nodes > 1:
        names.append(f"service/{job_name}")
    return [*names, f"job.batch/{job_name}"]


def _dry(
    plan: Job,
    namespace: str,
    verdict: dict[str, Any] | None,
    warnings: list[str],
    mechanism: Any,
    *,
    name: str | None = None,
) -> Outcome:
    from kubectl_tao.k8s.gang import apply
    from kubectl_tao.store.recordids import preview_id

    record_id = name or preview_id(plan.record["network_arch"], plan.record["action"])
    job_name = kubernetes_job_name(record_id)
    secret = secret_name_for(job_name) if plan.credentials else None
    rendered = apply(plan.render(job_name, record_id, secret), mechanism)
    _lint(rendered)
    return Outcome(None, job_name, namespace, rendered, list(warnings), verdict, None, "client", mechanism.to_dict())


def _lint(objects: list[dict[str, Any]]) -> None:
    from kubectl_tao.core.lint import lint_documents
    from kubectl_tao.manifests.kubelet_text import as_delivered

    # Judge the text the containers receive: `$$(NAME)` in the manifest is the `$(NAME)` reference the user wrote.
    delivered = as_delivered(objects)
    findings = lint_documents(delivered, "rendered manifest")
    if findings:
        from kubectl_tao.core.lint import lint_manifest_text
        from kubectl_tao.manifests.render import to_yaml

        # Plain objects carry no lines: read back from the YAML `render` prints, the finding names its line.
        placed = [f for f in lint_manifest_text(to_yaml(delivered), "rendered manifest") if f.line]
        first = placed[0] if placed else findings[0]
        raise GateError(
            f"secret lint: the rendered manifest carries an inline credential ({first}); pass credentials "
            "with --env-file/--env so they go into a Secret"
        )
