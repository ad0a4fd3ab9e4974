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

import json
from collections.abc import Callable
from typing import Any

from kubectl_tao.core import contract
from kubectl_tao.core.errors import (
    ClusterUnreachableError,
    GateError,
    KubectlError,
    NeverFitsError,
    TaoError,
    UsageError,
)
from kubectl_tao.core.names import kubernetes_job_name, secret_name_for
from kubectl_tao.core.valueclass import Factory, Value, record
from kubectl_tao.k8s import objects
from kubectl_tao.k8s.kubectl import Completed, Kubectl, Running

PRIVATE_REGISTRIES = ("nvcr.io",)


@record
class Plan(Value):
    """Everything submit needs, validated locally before any cluster call."""

    record: dict[str, Any]  # platform, image, network_arch, action, storage_tier, results_dir, upload_excludes
    render: Callable[[str, str, str | None], list[dict[str, Any]]]  # (job_name, record_id, secret) -> objects
    image: str
    gpus: int
    nodes: int
    credentials: dict[str, str] = Factory(dict)
    pvc: str | None = None
    secret_refs: dict[str, list[str]] = Factory(dict)  # existing Secret name -> keys required
    image_pull_secret: str | None = None
    node_selector: dict[str, str] = Factory(dict)
    tolerations: list[dict[str, Any]] = Factory(list)
    gpu_product: str | None = None
    queue: str | None = None  # Kueue LocalQueue (--queue): it must exist; its ClusterQueue quota is gated
    min_version: tuple[int, int] | None = None
    min_version_feature: str = ""
    warnings: list[str] = Factory(list)
    require_fit_now: bool = False
    skip_probe_warning: bool = False  # the NCCL probe itself: no warning about the last probe
    notes: list[str] = Factory(list)  # what was decided for the user (printed, not warnings)
    patches_job: bool = False  # --keep-until-captured: `status` sets the Job's TTL once the history is captured
    gang_mode: str = "auto"  # --gang: auto | native | off (gang.py)


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


def _ref_query(plan: Plan) -> list[str] | None:
    names = []
    if plan.pvc:
        names.append(f"persistentvolumeclaim/{plan.pvc}")
    names += [f"secret/{name}" for name in sorted(plan.secret_refs)]
    if plan.image_pull_secret and plan.image_pull_secret not in plan.secret_refs:
        names.append(f"secret/{plan.image_pull_secret}")
    if not names:
        return None
    # Names and key names only: a go-template never prints a Secret's values. One name gets the object
    # itself back, several a List: the template prints a row for either.
    row = (
        "{{.kind}} {{.metadata.name}} {{if .status}}{{.status.phase}}{{else}}-{{end}} "
        '{{range $k, $v := .data}}{{$k}},{{end}}{{"\\n"}}'
    )
    template = (
        f'{{{{define "row"}}}}{row}{{{{end}}}}'
        '{{if .items}}{{range .items}}{{template "row" .}}{{end}}{{else}}{{template "row" .}}{{end}}'
    )
    return ["get", *names, "-o", f"go-template={template}"]


def parse_refs(text: str) -> dict[tuple[str, str], tuple[str, set[str]]]:
    found: dict[tuple[str, str], tuple[str, set[str]]] = {}
    for line in text.splitlines():
        parts = line.split(" ")
        if len(parts) < 3:
            continue
        kind, name, phase = parts[0], parts[1], parts[2]
        keys = {k for k in (parts[3] if len(parts) > 3 else "").split(",") if k}
        found[(kind, name)] = (phase, keys)
    return found


def check_refs(plan: Plan, namespace: str, result: Completed | TaoError) -> None:
    if isinstance(result, ClusterUnreachableError):
        raise result
    stdout = result.stdout if isinstance(result, Completed) else ""
    if isinstance(result, KubectlError) and result.reason == "Forbidden":
        raise GateError(f"cannot read PVCs/Secrets in namespace {namespace}: {result.message}")
    found = parse_refs(stdout)
    if plan.pvc:
        pvc = found.get(("PersistentVolumeClaim", plan.pvc))
        if pvc is None:
            raise GateError(
                f"--pvc: PersistentVolumeClaim {plan.pvc!r} not found in namespace {namespace}; create it "
                "(storage tier A mounts a Bound claim holding the data) or choose --storage-tier C"
            )
        if pvc[0] != "Bound":
            raise GateError(
                f"--pvc: PersistentVolumeClaim {plan.pvc!r} is {pvc[0]}, not Bound; the pod would stay "
                "Pending until it binds (check its StorageClass / PersistentVolume)"
            )
    for name, keys in sorted(plan.secret_refs.items()):
        secret = found.get(("Secret", name))
        if secret is None:
            raise GateError(
                f"Secret {name!r} not found in namespace {namespace}; create it first "
                "(values from stdin, e.g. `kubectl create secret generic NAME --from-env-file=/dev/stdin`)"
            )
        missing = sorted(set(keys) - secret[1])
        if missing:
            raise GateError(f"Secret {name!r} lacks key(s) {', '.join(missing)}; add them or drop them")
    if plan.image_pull_secret and ("Secret", plan.image_pull_secret) not in found:
        raise GateError(
            f"--image-pull-secret: Secret {plan.image_pull_secret!r} not found in namespace {namespace}; "
            f"create it with `kubectl tao secret image-pull {plan.image_pull_secret} --registry <host>`"
        )


def registry_of(image: str) -> str:
    first = image.split("/", 1)[0]
    if "/" in image and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def image_pull_warning(plan: Plan) -> str | None:
    registry = registry_of(plan.image)
    if registry in PRIVATE_REGISTRIES and not plan.image_pull_secret:
        return (
            f"image {plan.image} is on {registry}, which needs credentials, and no --image-pull-secret was "
            f"given: the pod may stay in ImagePullBackOff (create one with `kubectl tao secret image-pull "
            f"NAME --registry {registry}`)"
        )
    return None


def gang_detected(plan: Plan) -> bool:
    """Whether the gates must find out the gang mechanism (multi-node, no --queue, --gang not off): only then
    are the manifests unknown until the gates have run."""
    return plan.nodes > 1 and not plan.queue and plan.gang_mode != "off"


def run_gates(
    kc: Kubectl, plan: Plan, namespace: str, server: str = "", dry_objects: list[dict[str, Any]] | None = None
) -> Gates:
    """Read-only checks before anything is created. Returns the fit verdict (as a dict), warnings (including a
    cached NCCL probe of this cluster, `server`, that failed or hung, for nodes > 1), the gang.Mechanism and, for
    a job that must queue, the DRA read still to settle (Gates).
    `dry_objects`: the job's objects, dry-run by the server in the same process as the permission reviews
    (GateError when the server refuses them; checked after every other gate, as before)."""
    from kubectl_tao.k8s import gang, permissions

    if plan.queue or plan.gpus > 0 or plan.nodes > 1 or plan.min_version:  # a 0-GPU single-node job needs none
        from kubectl_tao.core import gpufit, gpuinventory, serverversion
        from kubectl_tao.core import quota as quotas
        from kubectl_tao.jobs import fit as fitting
        from kubectl_tao.k8s import capacity

    calls: dict[str, tuple[list[str], dict[str, Any]]] = {}
    if plan.queue:
        calls["queues"] = fitting.queue_call(namespace)
    if plan.gpus > 0 or plan.nodes > 1:
        calls.update(capacity.calls(paged=True))  # DRA only when the device plugins' GPUs do not fit (below)
    if plan.min_version:
        calls["version"] = (["version", "-o", "json"], {"namespaced": False})
    refs = _ref_query(plan)
    if refs:
        calls["refs"] = (refs, {"check": False})
    detect_gang = gang_detected(plan)
    if detect_gang:
        calls["gang"] = gang.DISCOVERY_CALL
    # Permissions first: every verb on every kind this job's objects will need (create, patch, delete, get,
    # list), so a partial role is refused before a record opens instead of leaving objects it cannot remove.
    needed = permissions.needed(
        credentials=bool(plan.credentials), service=plan.nodes > 1, patch_job=plan.patches_job
    )
    if dry_objects is None:
        calls["permissions"] = permissions.review_call(needed, namespace)
    else:
        calls["permissions"] = permissions.with_dry_run(needed, namespace, dry_objects)
    batch = kc.start_many(calls)
    # The capacity first, while the other calls still run: when the device plugins' GPUs do not fit without a
    # queue's quota (which only takes GPUs away), the DRA read starts now instead of after the slowest call.
    # Its error, if any, is raised in its turn below.
    seen: Any = None
    seen_error: TaoError | None = None
    plain: Any = None  # the verdict without DRA devices or quota
    dra_read: Running | None = None
    later: LaterFit | None = None
    try:
        if "nodes" in calls:
            try:
                seen = capacity.view({key: batch.result(key) for key in ("nodes", "pods")}, kc)
            except TaoError as exc:
                seen_error = exc
            if seen is not None and seen.nodes is not None:
                plain = _judge(plan, seen, None, None)
                if plain.verdict != gpufit.FITS:
                    dra_read = kc.start(gpuinventory.DRA_READ, namespaced=False)
        results = batch.results()
        warnings = list(plan.warnings)
        reviews, dry_error = results["permissions"], None
        if dry_objects is not None:
            reviews, dry_error = permissions.split(reviews, kc.error_for)
        permissions.require(needed, reviews, namespace)
        if seen_error is not None:
            raise seen_error
        if seen is not None and seen.warning:
            warnings.append(seen.warning)
        version_error = results.get("version")
        if isinstance(version_error, TaoError):
            raise version_error
        if "version" in results:
            version_result = results["version"]
            assert isinstance(version_result, Completed)
            version = serverversion.parse_server_version(json.loads(version_result.stdout))
            serverversion.require_version(
                version, plan.min_version or (1, 28), plan.min_version_feature or "multi-node jobs"
            )
            if plan.nodes > 1 and server and not plan.skip_probe_warning:
                from kubectl_tao.store.probecache import cached_probe_warning

                probe_warning = cached_probe_warning(server, version.text)
                if probe_warning:
                    warnings.append(probe_warning)
        if "refs" in results:
            check_refs(plan, namespace, results["refs"])
        quota = None
        if plan.queue:
            queues = results["queues"]
            assert isinstance(queues, (Completed, TaoError))
            quota, _, queue_notes = fitting.read_queue(kc, queues, plan.queue, namespace)
            warnings += queue_notes
            if quota is not None and quota.inactive and (seen is None or seen.nodes is None):
                raise NeverFitsError(quotas.inactive_queue_message(quota))  # no fit below says it
        verdict_dict: dict[str, Any] | None = None
        if seen is not None and seen.nodes is not None:

            def judge(dra: Any) -> Any:
                return _judge(plan, seen, dra, quota)

            first = plain if quota is None else judge(None)
            if first.verdict == gpufit.QUEUE and not plan.require_fit_now:
                # DRA GPUs can only turn "queue" into "fits", never refuse the job: the create need not wait
                # for their read, which goes on beside it (the LaterFit's now, to settle or stop).
                later = LaterFit(kc, judge, first, dra_read or kc.start(gpuinventory.DRA_READ, namespaced=False))
                dra_read = None
            else:
                verdict = _noted(*fitting.judge_reading_dra_if_needed(kc, judge, first=first, started=dra_read))
                verdict_dict, capacity_warnings = fit_warnings(verdict)
                warnings += capacity_warnings
                if plan.require_fit_now and verdict.verdict != "fits":
                    raise GateError(f"{verdict.message} (--require-fit-now)")
                if plan.require_fit_now and not seen.usage_known:
                    raise GateError(
                        "--require-fit-now: cannot tell whether the GPUs are free now, as listing pods in all "
                        "namespaces is forbidden; ask for `list pods` cluster-wide, or drop --require-fit-now"
                    )
        support = gang.detect(kc, namespace, results["gang"], plan.nodes) if detect_gang else None
        mechanism = gang.choose(plan.nodes, plan.queue, support, plan.gang_mode)
        if dry_error is not None:
            raise dry_run_refused(dry_error)
    except BaseException:
        if later is not None:
            later.stop()
        raise
    finally:
        if dra_read is not None:
            dra_read.stop()  # not read: a refusal came first
    warning = image_pull_warning(plan)
    if warning:
        warnings.append(warning)
    return Gates(verdict_dict, warnings, mechanism, later)


class Gates:
    """What the gates found: the fit verdict (as a dict; None while `later` settles it or without a capacity
    read), warnings, the gang.Mechanism and, for a job that must queue, the LaterFit still reading DRA GPUs."""

    def __init__(
        self, fit: dict[str, Any] | None, warnings: list[str], mechanism: Any, later: LaterFit | None
    ) -> None:
        self.fit, self.warnings, self.mechanism, self.later = fit, warnings, mechanism, later

    def settle(self) -> list[str]:
        """The fit verdict with DRA GPUs counted, once `later` has them; the warnings that adds."""
        if self.later is None:
            return []
        verdict = _noted(*self.later.settle())
        self.later = None
        self.fit, added = fit_warnings(verdict)
        self.warnings += added
        return added

    def stop(self) -> None:
        """Stop the DRA read of a submit that ends before settling it."""
        if self.later is not None:
            self.later.stop()
            self.later = None


class LaterFit:
    """A "queue" verdict judged without DRA devices and their read, still running: counting them can only
    make it "fits" (gpuinventory.gate_nodes), so it is settled after the create instead of before."""

    def __init__(self, kc: Kubectl, judge: Callable[[Any], Any], first: Any, dra_read: Running) -> None:
        self._kc, self._judge, self._first, self._read = kc, judge, first, dra_read

    def settle(self) -> tuple[Any, str]:
        from kubectl_tao.jobs import fit as fitting

        return fitting.judge_reading_dra_if_needed(self._kc, self._judge, first=self._first, started=self._read)

    def stop(self) -> None:
        self._read.stop()


def _noted(verdict: Any, dra_note: str) -> Any:
    """VERDICT with why DRA GPUs were not counted, where they could have changed it."""
    return verdict.replaced(message=f"{verdict.message} ({dra_note})") if dra_note else verdict


def fit_warnings(verdict: Any) -> tuple[dict[str, Any], list[str]]:
    """The verdict as a dict and the capacity gate's warnings (NeverFitsError for "never")."""
    from kubectl_tao.core import gpufit

    return verdict.to_dict(), gpufit.capacity_gate(verdict)


def _judge(plan: Plan, seen: Any, dra: Any, quota: Any) -> Any:
    """PLAN's fit verdict over what the gate saw, DRA devices and a queue's quota (jobs/fit.py: judge_seen)."""
    from kubectl_tao.jobs.fit import judge_seen

    return judge_seen(seen, dra, plan.gpus, plan.nodes, node_selector=plan.node_selector,
                      tolerations=plan.tolerations, gpu_product=plan.gpu_product, quota=quota)


def dry_run_refused(error: TaoError) -> TaoError:
    """The error of a refused server dry run, before any record opened (unreachable stays exit 3)."""
    if isinstance(error, ClusterUnreachableError):
        return error
    return GateError(
        f"server dry run refused the job: {error.message}; fix that and submit again (nothing was created, no "
        "record opened)"
    )


# ---------------------------------------------------------------- apply


def execute(
    kc: Kubectl,
    plan: Plan,
    *,
    namespace: str,
    target_server: str,
    target_context: str,
    dry_run: str,
    store_factory: Callable[[], Any],
    on_progress: Callable[[str], None] = lambda _msg: None,
    name: str | None = None,
    extra: dict[str, Any] | None = None,
) -> Outcome:
    """Run the submit sequence. dry_run: none | client | server. `extra` goes into the record's kubectl-tao
    data before the Job is created (so whoever first sees the Job end knows, e.g., that its TTL is held).

    After opening it, the record is written twice on success: the Kubernetes names just before the create,
    then the Job's UID with RUNNING. A submit cut off between the two (API server gone, SIGKILL) leaves
    submit_phase "dry-run": `status` finds the Job by its labels and record annotation and finishes the pin and
    the owner references (track.observe), or settles the record when no Job was created."""
    from kubectl_tao.k8s import gang

    if dry_run == "client":
        return _dry(plan, namespace, None, plan.warnings, gang.choose(plan.nodes, plan.queue, None, plan.gang_mode),
                    name=name)
    store = store_factory() if dry_run == "none" else None
    record_id = _new_id(plan, store) if store is not None else (name or _new_id(plan, None))
    job_name = kubernetes_job_name(record_id)
    secret = secret_name_for(job_name) if plan.credentials else None
    payload: list[dict[str, Any]] | None = None
    rendered: list[dict[str, Any]] = []
    if not gang_detected(plan):  # the manifests are known now: dry-run them with the gates, in one process
        rendered = gang.apply(plan.render(job_name, record_id, secret), gang.choose(plan.nodes, plan.queue, None,
                                                                                   plan.gang_mode))
        _lint(rendered)
        payload = _payload(plan, rendered, job_name, namespace, real=store is not None)
        gated = run_gates(kc, plan, namespace, target_server, payload)
    else:
        gated = run_gates(kc, plan, namespace, target_server)
        try:
            rendered = gang.apply(plan.render(job_name, record_id, secret), gated.mechanism)
            _lint(rendered)
        except BaseException:
            gated.stop()
            raise
        payload = _payload(plan, rendered, job_name, namespace, real=store is not None)
    try:
        return _launch(kc, plan, gated, store, record_id, job_name, secret, payload, rendered, namespace=namespace,
                       target_server=target_server, target_context=target_context, on_progress=on_progress,
                       extra=extra)
    finally:
        gated.stop()


def _launch(
    kc: Kubectl,
    plan: Plan,
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
    extra: dict[str, Any] | None,
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
            raise dry_run_refused(exc) from None
    if store is None:
        return Outcome(None, job_name, namespace, rendered, list(warnings), gated.fit, None, "server",
                       mechanism.to_dict())

    record = store.open(**plan.record, record_id=record_id)
    on_progress(f"record {record_id} opened (Kubernetes name {namespace}/{job_name})")
    created_any = False
    try:
        store.update_extra(
            record_id,
            api_server=target_server,
            context=target_context,
            namespace=namespace,
            job_name=job_name,
            secret_names=[secret] if secret else [],
            service_name=job_name if plan.nodes > 1 else None,
            gpus=plan.gpus,
            nodes=plan.nodes,
            gang=mechanism.kind,
            submit_phase="dry-run",
            warnings=warnings,
            **(extra or {}),
        )
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
        store.mark(
            record_id,
            "RUNNING",
            message=f"applied Job {namespace}/{job_name}",
            source="agent",
            backend_ref=f"{namespace}/{job_name}",
            extra={"job_uid": uid, "submit_phase": "created", **({"warnings": warnings} if added else {})},
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
        created = _created_names(plan, job_name, secret) if created_any else None
        note = _roll_back(kc, store, record_id, namespace, job_name, created, f"not launched: {exc.message}", klass)
        raise type(exc)(f"{exc.message} (record {record_id} marked ERROR; {note or 'nothing left running'})") from None
    except BaseException as exc:  # a bug or Ctrl-C mid-submit: still leave nothing half-done
        created = _created_names(plan, job_name, secret) if created_any else None
        interrupted = f"not launched: interrupted ({type(exc).__name__})"
        _roll_back(kc, store, record_id, namespace, job_name, created, interrupted, "ERR_INFRA")
        raise
    assert record.id == record_id
    return Outcome(record_id, job_name, namespace, rendered, warnings, gated.fit, uid, "none", mechanism.to_dict())


def _new_id(plan: Plan, store: Any) -> str:
    """A record id for this submit, minted before the gates so the manifests they dry-run carry it; `open`
    writes it afterwards (O_EXCL: a concurrent submit can never take the same id). Without a store (a server
    dry run) nothing is reserved."""
    from kubectl_tao.store.records import preview_id

    arch, action = plan.record["network_arch"], plan.record["action"]
    for _ in range(20):
        record_id = preview_id(arch, action)
        if store is None or not store.exists(record_id):
            return record_id
    raise TaoError(f"could not mint a free record id in {store.jobs_dir} after 20 attempts")


def _payload(
    plan: Plan, rendered: list[dict[str, Any]], job_name: str, namespace: str, *, real: bool
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


def _roll_back(
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
    the left-behind note, if any."""
    left = objects.teardown(kc, namespace, job_name, created=created).left if created is not None else []
    note = objects.left_behind_note(namespace, left) if left else ""
    store.mark(
        record_id,
        "ERROR",
        message=message + (f"; {note}" if note else ""),
        source="agent",
        err_class=err_class,
        extra={"left_behind": left} if left else None,
    )
    return note


def _created_names(plan: Plan, job_name: str, secret: str | None) -> list[str]:
    """`kind/name` of everything a submit of this plan creates."""
    names = [f"secret/{secret}"] if secret else []
    if plan.nodes > 1:
        names.append(f"service/{job_name}")
    return [*names, f"job.batch/{job_name}"]


def _dry(
    plan: Plan,
    namespace: str,
    verdict: dict[str, Any] | None,
    warnings: list[str],
    mechanism: Any,
    *,
    name: str | None = None,
) -> Outcome:
    from kubectl_tao.k8s.gang import apply
    from kubectl_tao.store.records import preview_id

    record_id = name or preview_id(plan.record["network_arch"], plan.record["action"])
    job_name = kubernetes_job_name(record_id)
    secret = secret_name_for(job_name) if plan.credentials else None
    rendered = apply(plan.render(job_name, record_id, secret), mechanism)
    _lint(rendered)
    return Outcome(None, job_name, namespace, rendered, list(warnings), verdict, None, "client", mechanism.to_dict())


def _lint(objects: list[dict[str, Any]]) -> None:
    from kubectl_tao.core.kubelet_text import as_delivered
    from kubectl_tao.core.lint import lint_documents

    # Judge the text the containers receive: `$$(NAME)` in the manifest is the `$(NAME)` reference the user wrote.
    findings = lint_documents(as_delivered(objects), "rendered manifest")
    if findings:
        first = findings[0]
        raise GateError(
            f"secret lint: the rendered manifest carries an inline credential ({first}); pass credentials "
            "with --env-file/--env so they go into a Secret"
        )
