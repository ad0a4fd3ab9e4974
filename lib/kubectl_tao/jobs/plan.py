"""Turn a job request (the job flags, typed) into the one Job value: every file read and every value checked
before any cluster call, so bad input exits 2 with nothing created. This is where a request is validated, once;
render (Job.render), the gates (gates/gaterequest.asked), submit, the probe, resubmit and a workflow's steps all
take the Job `build` returns. A JobSpec is derived from the request by `job_spec` alone."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubectl_tao.core import contract
from kubectl_tao.core.errors import UsageError
from kubectl_tao.core.valueclass import Factory, Value, record

if TYPE_CHECKING:
    from kubectl_tao.manifests.render import JobSpec

GPU_TOLERATION = contract.GPU_TOLERATION
TIERS = ("A", "C")


@record(frozen=True)
class Job(Value):
    """One job, validated locally before any cluster call (`build`), immutable (`replaced` makes a changed copy).
    The gates read its fields by their own names (gates/gaterequest.asked); `render` gives its objects."""

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
    require_fit_now: bool = False  # --require-fit-now: a job that would queue is refused
    skip_probe_warning: bool = False  # the NCCL probe itself: no warning about the last probe
    notes: list[str] = Factory(list)  # what was decided for the user (printed, not warnings)
    patches_job: bool = False  # --keep-until-captured: `status` sets the Job's TTL once the history is captured
    gang_mode: str = "auto"  # --gang: auto | native | off (gang.py)
    topology: Any = None  # topology.Topology of --topology (None: anywhere)
    max_restarts: int = 0  # --max-restarts: the restarts gate checks the server keeps container restart rules



@record(frozen=True)
class JobRequest(Value):
    """The job flags of `submit` and `render`, typed; jobs/flags.JOB_FLAGS declares them (spellings,
    defaults, help) and builds one (job_request). Repeatable flags are tuples, empty when not given."""

    image: str | None
    command: str | None
    gpus: int
    nodes: int
    network_arch: str
    action: str
    storage_tier: str
    pvc: str | None
    mount_path: str
    results_dir: str | None
    env_file: str | None
    env: tuple[str, ...]
    env_secret: str | None
    image_pull_secret: str | None
    ttl_seconds: int
    shm_size: str
    s3_input: tuple[str, ...]
    s3_output: str | None
    upload_exclude: tuple[str, ...]
    s3_tools_image: str | None
    launcher: str
    master_port: int
    rendezvous_timeout: int
    nccl_socket_ifname: str | None
    nccl_ib_hca: str | None
    nccl_env: tuple[str, ...]
    gpu_product: str | None
    node_selector: tuple[str, ...]
    toleration: tuple[str, ...]
    queue: str | None
    topology: str | None
    gang: str
    retries_per_index: int | None
    max_restarts: int
    termination_grace_period: int | None
    stall_timeout: str | None
    active_deadline: int | None
    annotation: tuple[str, ...]
    label: tuple[str, ...]
    action_request: str | None
    staging_map: str | None
    config_source: str | None
    keep_until_captured: bool
    no_flight_recorder: bool
    given: frozenset[str]  # the flags set on the command line (some are refused where they cannot apply)


def stored(job: JobRequest) -> dict[str, Any]:
    """The request as the record keeps it (`resubmit` builds the job again from it): every job flag's value and
    which flags were given. Credentials are kept as references only: the --env-file path, the --env names, the
    --env-secret name; never a value."""
    from kubectl_tao.core.valueclass import plain

    flags = {_STORED_AS.get(key, key): value for key, value in plain(job).items() if key != "given"}
    return {"flags": flags, "given": sorted(job.given)}


# Flags whose names read as credentials to the record's redactor, kept under names that say what they hold.
_STORED_AS = {"env_secret": "env_secret_name", "image_pull_secret": "image_pull_secret_name"}


def flags_stored(kept: dict[str, Any]) -> dict[str, Any]:
    """The job flags of a request `stored` kept (their own names back)."""
    back = {stored_as: key for key, stored_as in _STORED_AS.items()}
    return {back.get(key, key): value for key, value in kept.items()}


def read_credentials(
    env_file: str | None, env_names: list[str] | None, *, stdin_text: str | None = None
) -> dict[str, str]:
    """Credentials for the per-job Secret: an env-file (or '-' for stdin) plus named environment variables.
    Values are never echoed: errors name the file, line or variable only."""
    from kubectl_tao.core.envfile import map_legacy_s3_names, parse_env_file

    creds: dict[str, str] = {}
    if env_file:
        if env_file == "-":
            data: str | bytes = stdin_text if stdin_text is not None else sys.stdin.buffer.read()
            source = "stdin"
        else:
            path = Path(env_file)
            try:
                data = path.read_bytes()
            except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
                reason = exc.strerror if isinstance(exc, OSError) else "the path contains a NUL character"
                raise UsageError(f"--env-file: cannot read {env_file!r}: {reason}") from None
            source = env_file
        creds.update(parse_env_file(data, source))
    for position, name in enumerate(env_names or [], start=1):
        from kubectl_tao.core.names import shown_env_name, validate_env_name

        validate_env_name(name, f"--env #{position}")
        if name not in os.environ:
            raise UsageError(
                f"{shown_env_name(name, '--env', position)}: the variable is not set in your environment; export "
                "it or use --env-file"
            )
        if name in creds:
            raise UsageError(f"{shown_env_name(name, '--env', position)}: also given in --env-file; give it once")
        creds[name] = os.environ[name]
    for name, value in creds.items():
        if "\n" in value or "\x00" in value:
            raise UsageError(f"credential {name}: values cannot contain newlines or NUL")
    return map_legacy_s3_names(creds) if creds else creds


Objects = list[dict[str, Any]]


def build(
    job: JobRequest,
    namespace: str,
    credentials: dict[str, str],
    *,
    server: str = "",
    finish: Callable[[Objects], Objects] | None = None,
) -> Job:
    """The Job of the request JOB in NAMESPACE with these CREDENTIALS; SERVER (the API server's URL) picks the NCCL
    settings this cluster's last probe passed with, for a multi-node job (none without it). FINISH, when
    given, makes the caller's own additions to the objects each time they are rendered (the NCCL probe's
    label and scratch volume)."""
    if job.action_request:
        if finish is not None:
            raise ValueError("finish applies to a job of --image/--command: an action request's objects are its own")
        return _action_plan(job, namespace, credentials)
    probed = _probe_settings(job, server)
    return _spec_plan(job, namespace, credentials, probed, finish)


def shape(
    gpus: int,
    nodes: int,
    *,
    node_selector: dict[str, str] | None = None,
    tolerations: Sequence[dict[str, Any]] = (),
    gpu_product: str | None = None,
    queue: str | None = None,
    topology: Any = None,
    pvc: str | None = None,
) -> Job:
    """A job known by its shape alone, what `preflight` and `fit` are told (GPUS per node x NODES, where it may
    run, its claim): the gates take it as they take a built Job. The GPU taint is tolerated as a built job
    tolerates it. It has no image, command or record, so it is never rendered."""
    min_version, feature = _min_version(nodes, None)
    return Job(
        record={},
        render=_unrendered,
        image="",
        gpus=gpus,
        nodes=nodes,
        pvc=pvc,
        node_selector=dict(node_selector or {}),
        tolerations=[dict(t) for t in tolerations] + ([dict(GPU_TOLERATION)] if gpus > 0 else []),
        gpu_product=gpu_product,
        queue=queue,
        topology=topology,
        min_version=min_version,
        min_version_feature=feature,
    )


def _unrendered(job_name: str, record_id: str, secret: str | None) -> Objects:
    raise ValueError("a job known by its shape alone (plan.shape) has no objects to render")


def _min_version(nodes: int, retries_per_index: int | None) -> tuple[tuple[int, int] | None, str]:
    """The server version a job needs, and for what (Indexed Jobs' pod failure policy per index; multi-node)."""
    from kubectl_tao.core.serverversion import MULTI_NODE_MIN_VERSION, RETRIES_PER_INDEX_MIN_VERSION

    if retries_per_index is not None:
        return RETRIES_PER_INDEX_MIN_VERSION, "--retries-per-index"
    if nodes > 1:
        return MULTI_NODE_MIN_VERSION, "multi-node jobs"
    return None, ""


def _probe_settings(job: JobRequest, server: str) -> tuple[dict[str, str], str]:
    """For a multi-node job: the NCCL settings this cluster's last probe passed with (read from the local
    probe cache, no cluster call), and when; nothing otherwise."""
    if job.nodes <= 1 or not server:
        return {}, ""
    from kubectl_tao.store.probecache import cached_settings

    return cached_settings(server)


def _common_checks(job: JobRequest) -> None:
    tier = (job.storage_tier or "A").upper()
    if tier not in TIERS:
        raise UsageError(f"--storage-tier {job.storage_tier!r}: use A (a bound PVC) or C (S3 in the pod)")
    from kubectl_tao.core.names import require_ascii_name

    for flag, value, example in (("--network-arch", job.network_arch, "dino"), ("--action", job.action, "train")):
        if not value or any(ch.isspace() for ch in value) or len(value) > 40:
            raise UsageError(f"{flag}: give a short word without spaces (e.g. dino, train)")
        require_ascii_name(value, flag, example=example)


def _check_restarts(job: JobRequest) -> None:
    """--max-restarts and --termination-grace-period, named as the flags (the spec checks them again)."""
    from kubectl_tao.manifests.render import MAX_RESTARTS, MAX_TERMINATION_GRACE

    if not 0 <= job.max_restarts <= MAX_RESTARTS:
        raise UsageError(
            f"--max-restarts {job.max_restarts}: give 0 (no restarts) to {MAX_RESTARTS}; a job that needs more "
            "restarts than that has a problem a restart does not fix"
        )
    grace = job.termination_grace_period
    if grace is not None and not 0 <= grace <= MAX_TERMINATION_GRACE:
        raise UsageError(f"--termination-grace-period {grace}: give 0 to {MAX_TERMINATION_GRACE} seconds")
    if job.max_restarts and job.nodes < 2:
        raise UsageError(
            "--max-restarts restarts the ranks of a multi-node job (--nodes 2 or more); on one node it would only "
            "restart its container in place: drop --max-restarts, and rerun a failed job with "
            "`kubectl tao resubmit JOB`"
        )


@record(frozen=True)
class _Parsed(Value):
    """The job flags of a --image/--command job that take parsing, parsed and checked in one pass (`_parsed`)."""

    tier: str
    results_dir: str | None  # --results-dir, normalized
    results_root: str | None  # without --results-dir: each record's results go to <root>/<record id>
    preview_id: str  # an id of the shape a record gets: the spec checked before submit is named after it
    preview_name: str  # the Job name of that id
    preview_secret: str  # the credential Secret's name of that Job (used where the job has credentials)
    gang_mode: str  # --gang, checked (gang.py)
    topology: Any  # topology.Topology of --topology (None: anywhere)
    topology_warning: str  # '' for none
    topology_annotations: dict[str, str] | None  # what asks Kueue to place the gang so (with --queue only)
    nccl: Any  # core.nccl.Nccl: the flags', with (multi-node) a cached probe's
    stall_timeout_seconds: int  # --stall-timeout in whole seconds (0: off)
    s3_tools_image: str | None  # --s3-tools-image: tier C's fetch step (None: render's default image)


def _parsed(job: JobRequest, probed: tuple[dict[str, str], str], *, with_credentials: bool = False) -> _Parsed:
    """The flags of JOB that take parsing, each refused as its flag. --topology LABEL[:preferred]: with --queue
    Kueue places the gang (the queue gate checks its ResourceFlavor); without it a required one is kept by a
    native gang whose server keeps Job topology constraints, else refused (gang.choose, once the server is
    known). PROBED: the NCCL settings this cluster's last probe passed with, and when. WITH_CREDENTIALS: the job
    has --env-file/--env credentials (then --env-secret is refused)."""
    from kubectl_tao.core import nccl, topology
    from kubectl_tao.core.durations import whole_seconds
    from kubectl_tao.core.names import is_under, kubernetes_job_name, secret_name_for
    from kubectl_tao.k8s.gang import check_mode
    from kubectl_tao.manifests.render import MAX_STALL_TIMEOUT, MIN_STALL_TIMEOUT
    from kubectl_tao.store.recordfields import normalize_results_dir
    from kubectl_tao.store.recordids import preview_id

    # The flags read alone come first, so a typo is named as itself before a check that combines flags (the
    # Secret with the credentials, the storage tier with its output, --results-dir with the mount) can hide it.
    results_dir = normalize_results_dir(job.results_dir) if job.results_dir else None
    gang_mode = check_mode(job.gang, nodes=job.nodes, queue=job.queue)
    placed = topology.parse(job.topology)
    if job.env_secret and with_credentials:
        raise UsageError("--env-secret names an existing Secret: give it or --env-file/--env, not both")
    tier = job.storage_tier.upper()
    mount = job.mount_path or "/workspace"
    results_root = None
    if results_dir is None and tier == "C":
        if not job.s3_output:
            raise UsageError("--storage-tier C needs --s3-output s3://BUCKET/PREFIX (or --results-dir s3://...)")
        results_root = str(job.s3_output).rstrip("/")
    elif results_dir is None:
        results_root = mount.rstrip("/") + "/results"
    if results_dir and tier == "A" and not results_dir.startswith("s3://") and not is_under(results_dir, mount):
        raise UsageError(
            f"--results-dir {results_dir}: must be on the mounted volume (under --mount-path {mount}) or an s3:// "
            "prefix, so results survive the pod"
        )
    preview = preview_id(job.network_arch, job.action)
    preview_name = kubernetes_job_name(preview)
    settings = nccl.settings(job.nccl_socket_ifname, job.nccl_ib_hca, job.nccl_env, job.nodes, probed)
    if job.s3_tools_image and tier != "C":
        raise UsageError("--s3-tools-image is the image of tier C's fetch step: it needs --storage-tier C")
    stall = 0
    if job.stall_timeout is not None:
        stall = whole_seconds(job.stall_timeout, "--stall-timeout", MIN_STALL_TIMEOUT, MAX_STALL_TIMEOUT)
    return _Parsed(
        tier=tier,
        results_dir=results_dir,
        results_root=results_root,
        preview_id=preview,
        preview_name=preview_name,
        preview_secret=secret_name_for(preview_name),
        gang_mode=gang_mode,
        topology=placed,
        topology_warning=topology.unplaced_warning(placed, queue=job.queue, nodes=job.nodes),
        topology_annotations=placed.annotations() if placed is not None and job.queue else None,
        nccl=settings,
        stall_timeout_seconds=stall,
        s3_tools_image=str(job.s3_tools_image) if job.s3_tools_image else None,
    )


# The job flags a JobSpec field of another name takes as they are; a flag whose name is a JobSpec field's is taken
# by that name. What a JobSpec holds in another form than the flag (tier, mount, TTL, NCCL, placement, topology,
# stall watch, flight recorder, tools image) is derived in `job_spec`; the other flags are the record's, the
# Secret's or the gates' (tests/unit/jobs/test_job_value.py checks that every flag reaches one of them).
_SPEC_NAMES = {
    "s3_input": "s3_inputs",
    "upload_exclude": "upload_excludes",
    "label": "labels",
    "annotation": "annotations",
    "active_deadline": "active_deadline_seconds",
    "queue": "queue_name",
    "rendezvous_timeout": "rendezvous_timeout_seconds",
    "termination_grace_period": "termination_grace_seconds",
}


def job_spec(job: JobRequest, namespace: str, *, parsed: _Parsed | None = None, **own: Any) -> JobSpec:
    """The render.JobSpec of the request JOB in NAMESPACE, validated (render.spec_from_options): the one
    derivation of a JobSpec from the job flags. OWN: what the request does not say (name, record id, results
    directory, Secret; render_job's backoff limit and TTL), given last. PARSED: the flags that take parsing
    (`_parsed`, with a cached probe's NCCL settings); else parsed here without a probe's."""
    from kubectl_tao.manifests import render

    flags = parsed or _parsed(job, ({}, ""))
    fields = set(render.JobSpec._fields)
    taken = {
        _SPEC_NAMES.get(key, key): getattr(job, key)
        for key in job._fields
        if _SPEC_NAMES.get(key, key) in fields
    }
    node_selector = list(job.node_selector)
    if job.gpu_product:
        node_selector.append(contract.gpu_product_selector(job.gpu_product))
    tolerations: list[Any] = list(job.toleration)
    if job.gpus > 0:
        tolerations.append(GPU_TOLERATION)
    derived = dict(
        namespace=namespace,
        storage_tier=flags.tier,
        mount_path=job.mount_path or render.DEFAULT_MOUNT_PATH,
        ttl_seconds=None if job.keep_until_captured else job.ttl_seconds,
        nccl_socket_ifname=flags.nccl.socket_ifname,
        nccl_ib_hca=flags.nccl.ib_hca,
        nccl_env=flags.nccl.env,
        node_selector=node_selector,
        tolerations=tolerations,
        topology=flags.topology_annotations,
        flight_recorder=not job.no_flight_recorder,
        stall_timeout_seconds=flags.stall_timeout_seconds,
    )
    if flags.s3_tools_image is not None:
        derived["s3_tools_image"] = flags.s3_tools_image
    else:
        taken.pop("s3_tools_image")  # render's default image
    return render.spec_from_options(**{**taken, **derived, **own})


def _spec_plan(
    job: JobRequest,
    namespace: str,
    credentials: dict[str, str],
    probed: tuple[dict[str, str], str],
    finish: Callable[[Objects], Objects] | None = None,
) -> Job:
    from kubectl_tao.manifests import render

    _common_checks(job)
    _check_restarts(job)
    for value, flag in ((job.staging_map, "--staging-map"), (job.config_source, "--config-source")):
        if value:
            raise UsageError(f"{flag} is only for --action-request; drop it or give the request")
    if not job.image:
        raise UsageError("--image is required (or --action-request)")
    if not job.command:
        raise UsageError("--command is required (or --action-request)")
    existing_secret = job.env_secret
    given = _given(job)
    min_version, feature = _min_version(job.nodes, job.retries_per_index)
    parsed = _parsed(job, probed, with_credentials=bool(credentials))
    tier, results_dir, results_root = parsed.tier, parsed.results_dir, parsed.results_root

    def spec_results(record_id: str) -> str | None:
        # Tier C uploads to <s3-output>/<record id>/ on its own; the spec takes the prefix, not a results dir.
        return None if tier == "C" and not results_dir else results_dir or f"{results_root}/{record_id}"

    spec = job_spec(
        job,
        namespace,
        parsed=parsed,
        name=parsed.preview_name,
        record_id=parsed.preview_id,
        results_dir=spec_results(parsed.preview_id),
        env_secret=existing_secret or (parsed.preview_secret if credentials else None),
    )
    warnings = render.warnings_for(spec) + ([parsed.topology_warning] if parsed.topology_warning else [])

    def render_objects(job_name: str, record_id: str, secret: str | None) -> list[dict[str, Any]]:
        final = spec.replaced(
            name=job_name,
            record_id=record_id,
            results_dir=spec_results(record_id),
            env_secret=existing_secret or secret,
        )
        objects = render.render(final)  # which validates the spec, once
        return finish(objects) if finish is not None else objects

    record = {
        "platform": "kubernetes",
        "image": job.image,
        "network_arch": job.network_arch,
        "action": job.action,
        "storage_tier": tier,
        "upload_excludes": list(job.upload_exclude),
    }
    if results_dir:
        record["results_dir"] = results_dir
    else:
        record["results_root"] = results_root
    decided = dict(
        record=record,
        render=render_objects,
        credentials=credentials,
        pvc=job.pvc if tier == "A" else None,
        secret_refs={existing_secret: []} if existing_secret else {},
        node_selector=dict(spec.node_selector),
        tolerations=list(spec.tolerations),
        min_version=min_version,
        min_version_feature=feature,
        warnings=warnings,
        patches_job=bool(job.keep_until_captured),
        notes=parsed.nccl.notes,
        gang_mode=parsed.gang_mode,
        topology=parsed.topology,
    )
    return Job(**{**given, **decided})


def _given(request: JobRequest) -> dict[str, Any]:
    """Each flag of a Job field's name as given (image, GPUs, nodes, claim, pull Secret, GPU product, queue,
    restarts): the Job of REQUEST takes them, then what build decided (parsed, checked, or the action
    request's own) over them."""
    return {name: getattr(request, name) for name in Job._fields if name in request._fields}


# Job flags an action request cannot take (the request decides these): flag, what decides instead.
_NOT_FOR_ACTION_REQUESTS = {
    "gpus": ("--gpus", "spec_bundle.compute_shape.gpus"),
    "nodes": ("--nodes", "spec_bundle.compute_shape.nodes (an action request runs one pod)"),
    "mount_path": ("--mount-path", "the request's mounts[].target"),
    "s3_input": ("--s3-input", "the staging map (storage tier A only)"),
    "s3_output": ("--s3-output", "--results-dir (storage tier A only)"),
    "s3_tools_image": ("--s3-tools-image", "nothing: action requests use storage tier A"),
    "launcher": ("--launcher", "spec_bundle.command (one pod, no rendezvous)"),
    "master_port": ("--master-port", "nothing: an action request runs one pod"),
    "rendezvous_timeout": ("--rendezvous-timeout", "nothing: an action request runs one pod"),
    "nccl_socket_ifname": ("--nccl-socket-ifname", "the request's environment"),
    "nccl_ib_hca": ("--nccl-ib-hca", "the request's environment"),
    "nccl_env": ("--nccl-env", "the request's environment"),
    "retries_per_index": ("--retries-per-index", "nothing: an action request runs one pod"),
    "gang": ("--gang", "nothing: an action request runs one pod"),
    "topology": ("--topology", "nothing: an action request runs one pod"),
    "max_restarts": ("--max-restarts", "nothing: an action request runs one pod"),
    "termination_grace_period": ("--termination-grace-period", "the action renderer's pod defaults"),
    "no_flight_recorder": ("--no-flight-recorder", "nothing: an action request runs one pod"),
    "stall_timeout": ("--stall-timeout", "nothing: an action request's pod runs its command as given"),
}


def _refuse_flags_the_request_decides(job: JobRequest) -> None:
    tier = (job.storage_tier or "A").upper()
    if tier != "A":
        raise UsageError(
            f"--storage-tier {tier} does not apply to --action-request: its sources are staged on --pvc (tier A)"
        )
    for key, (flag, instead) in _NOT_FOR_ACTION_REQUESTS.items():
        if key in job.given:
            raise UsageError(f"{flag} does not apply to --action-request (set by {instead}); drop {flag}")


def _request_results_dir(request: dict[str, Any], results_dir: str) -> str:
    """--results-dir of an action request (normalized): on a writable mount of the request (container path) or
    s3://."""
    from kubectl_tao.core.names import is_under, validate_abs_path

    if results_dir.startswith("s3://"):
        return results_dir
    # the targets are checked here too: a bad one must be refused as itself, not echoed in this message
    writable = [
        validate_abs_path(row.get("target"), f"mounts[{index}].target")
        for index, row in enumerate(request.get("mounts") or [])
        if row.get("read_only") is False
    ]
    if not any(is_under(results_dir, target) for target in writable):
        raise UsageError(
            f"--results-dir {results_dir}: not on a writable mount of the action request (writable targets: "
            f"{', '.join(writable) or 'none'}); use a path under one, or s3://"
        )
    return results_dir


def _counterparts(name: str) -> set[str]:
    """A credential name with its legacy / AWS twin (read_credentials moves legacy names to the AWS ones)."""
    from kubectl_tao.core.envfile import LEGACY_S3_NAMES

    twins = {name, LEGACY_S3_NAMES.get(name, name)}
    twins.update(legacy for legacy, modern in LEGACY_S3_NAMES.items() if modern == name)
    return twins


def _unforwarded(job: JobRequest, forward: list[str], credentials: dict[str, str]) -> list[str]:
    """Credentials the request does not forward: an `--env NAME` is refused, env-file keys are named in a
    warning (an env-file often holds more than one job needs); none of them reaches the Secret."""
    forwarded = set().union(*(_counterparts(name) for name in forward))
    for name in job.env:
        if not _counterparts(name) & forwarded:
            raise UsageError(
                f"--env {name}: the action request does not forward it (forward_env: {', '.join(forward) or 'none'}); "
                "drop it or add it to the request's forward_env"
            )
    left = sorted(key for key in credentials if not _counterparts(key) & forwarded)
    if not left:
        return []
    return [f"--env-file keys the action request does not forward are left out of the Secret: {', '.join(left)}"]


def _forwarded(forward: list[str], credentials: dict[str, str]) -> dict[str, str]:
    """The forwarded credentials by the names the request uses; a legacy name (ACCESS_KEY, SECRET_KEY, ...)
    is satisfied by the value the env-file gave under it, which read_credentials moved to the AWS name."""
    from kubectl_tao.core.envfile import LEGACY_S3_NAMES

    creds: dict[str, str] = {}
    missing = []
    for name in forward:
        modern = LEGACY_S3_NAMES.get(name)
        if name in credentials:
            creds[name] = credentials[name]
        elif modern and modern in credentials:
            creds[name] = credentials[modern]
        else:
            missing.append(name)
    if missing:
        raise UsageError(
            f"request.forward_env needs {', '.join(missing)}: pass them with --env-file or --env (values never on "
            "the command line), or name an existing Secret holding them with --env-secret"
        )
    return creds


def _action_plan(job: JobRequest, namespace: str, credentials: dict[str, str]) -> Job:
    from kubectl_tao.core.flagvalues import parse_key_values, targeting
    from kubectl_tao.core.names import kubernetes_job_name, secret_name_for
    from kubectl_tao.manifests.action import Placement, load_json_object, render_action_objects, validate_request
    from kubectl_tao.store.recordfields import normalize_results_dir
    from kubectl_tao.store.recordids import preview_id

    _common_checks(job)
    if job.image or job.command:
        raise UsageError("--action-request carries its own image and command; drop --image/--command")
    _refuse_flags_the_request_decides(job)
    if not job.pvc:
        raise UsageError("--action-request needs --pvc (the claim holding the staged sources)")
    if not job.results_dir:
        raise UsageError("--action-request needs --results-dir (a writable mount target of the request or s3://)")
    given = _given(job)
    results_flag = normalize_results_dir(job.results_dir)
    probe = preview_id(job.network_arch, job.action)
    request = load_json_object(Path(str(job.action_request)), "action request")
    if not job.staging_map:
        raise UsageError("--staging-map is required with --action-request")
    staging = load_json_object(Path(job.staging_map), "staging map")
    validate_request(request)
    bundle = request.get("spec_bundle") or {}
    image = str(bundle.get("image") or "")
    gpus = int((bundle.get("compute_shape") or {}).get("gpus") or 0)
    # The placement flags are read with the files, before anything is decided from them.
    node_selector, tolerations = targeting(job.node_selector, job.toleration, job.gpu_product)
    placement = Placement(
        labels=parse_key_values(list(job.label), "label"),
        annotations=parse_key_values(list(job.annotation), "annotation"),
        node_selector=node_selector,
        tolerations=(*tolerations, GPU_TOLERATION) if gpus > 0 else tuple(tolerations),
        active_deadline_seconds=job.active_deadline,
        queue_name=job.queue,
    )
    forward = list(request.get("forward_env") or [])
    existing_secret = job.env_secret
    if existing_secret:
        if credentials:
            raise UsageError("--env-secret names an existing Secret: give it or --env-file/--env, not both")
        if not forward:
            raise UsageError("--env-secret: the action request forwards no credentials (forward_env is empty)")
        creds: dict[str, str] = {}
    else:
        creds = _forwarded(forward, credentials)
    warnings = _unforwarded(job, forward, credentials)
    results_dir = _request_results_dir(request, results_flag)
    ttl = None if job.keep_until_captured else job.ttl_seconds

    def render_objects(job_name: str, record_id: str, secret: str | None) -> list[dict[str, Any]]:
        objects = render_action_objects(
            request,
            staging,
            job_id=record_id,
            namespace=namespace,
            pvc_claim=job.pvc,
            credential_secret=(existing_secret or secret) if forward else None,
            image_pull_secret=job.image_pull_secret,
            config_source=job.config_source,
            ttl_seconds=ttl,
            shm_size=job.shm_size,
            placement=placement,
        )
        if objects and objects[0]["metadata"]["name"] != job_name:
            raise UsageError(f"action renderer named the Job {objects[0]['metadata']['name']}, expected {job_name}")
        return objects

    render_objects(kubernetes_job_name(probe), probe, secret_name_for(kubernetes_job_name(probe)) if creds else None)
    if placement.queue_name is not None:
        warnings.append(f"the Job is created suspended; Kueue starts it when queue {placement.queue_name!r} admits it")
    decided = dict(
        record={
            "platform": "kubernetes",
            "image": image,
            "network_arch": job.network_arch,
            "action": job.action,
            "storage_tier": "A",
            "results_dir": results_dir,
            "upload_excludes": list(job.upload_exclude),
        },
        render=render_objects,
        image=image,
        gpus=gpus,
        nodes=1,
        credentials=creds,
        secret_refs={existing_secret: forward} if existing_secret else {},
        node_selector=dict(placement.node_selector),
        tolerations=[dict(t) for t in placement.tolerations],
        warnings=warnings,
    )
    return Job(**{**given, **decided})
