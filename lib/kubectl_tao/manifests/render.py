"""Kubernetes manifests for a TAO / PyTorch-style GPU job (pure: no cluster, no processes).

`JobSpec` holds every knob; `spec_from_options` builds and validates one from CLI-style values;
`render` returns the objects to apply: one Job for one node, a headless Service and an Indexed Job
for several. Templates live in templates/k8s and are filled with JSON-encoded values (templates.py);
the shell that runs in the pod is a fixed script from templates/k8s, and the user's command reaches
it only as a positional argument.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubectl_tao.core import contract, names, quantities, templates
from kubectl_tao.core.errors import UsageError
from kubectl_tao.core.flagvalues import (
    MAX_GPUS_PER_NODE,
    MAX_NODES,
    check_toleration,
    int_in,
    parse_key_values,
    parse_toleration,
)
from kubectl_tao.core.valueclass import Factory, Value, record
from kubectl_tao.manifests import kubelet_text
from kubectl_tao.restarts import table as exit_codes

MANAGED_BY_LABEL = contract.MANAGED_BY_LABEL
MANAGED_BY = contract.MANAGED_BY
JOB_LABEL = contract.JOB_LABEL
RECORD_ID_KEY = contract.RECORD_ID_ANNOTATION
QUEUE_LABEL = contract.QUEUE_LABEL
COMPLETION_INDEX_ANNOTATION = contract.COMPLETION_INDEX_ANNOTATION
GPU_RESOURCE = contract.GPU_RESOURCE
CONTAINER_NAME = "tao"

# Exit codes the fixed pod scripts reserve (restarts/table.py, rendered into the pod as TAO_EXIT_CODES).
EXIT_RENDEZVOUS_TIMEOUT = exit_codes.EXIT_RENDEZVOUS_TIMEOUT
EXIT_UPLOAD_FAILED = exit_codes.EXIT_UPLOAD_FAILED
EXIT_SIGKILL = exit_codes.EXIT_SIGKILL

# Image of the tier C fetch step: a pinned release of the AWS CLI v2 (override with s3_tools_image).
DEFAULT_S3_TOOLS_IMAGE = "docker.io/amazon/aws-cli:2.22.0"
DEFAULT_MOUNT_PATH = "/workspace"
DEFAULT_SHM_SIZE = "16Gi"
DEFAULT_TTL_SECONDS = 3600
DEFAULT_MASTER_PORT = 29500
DEFAULT_RENDEZVOUS_TIMEOUT = 300

MAX_TTL_SECONDS = 604800
MAX_RETRIES = 100
MAX_RENDEZVOUS_TIMEOUT = 86400
MAX_RESTARTS = exit_codes.MAX_RESTARTS
MAX_TERMINATION_GRACE = 86400
# --max-restarts without --termination-grace-period: time for a rank to save a checkpoint on SIGTERM
DEFAULT_RESTART_GRACE_SECONDS = 120
# --stall-timeout: the bounds of the watch (templates/k8s/stall-watch.sh), and the TERM-to-KILL time of a stalled
# program without a grace period of its own (Kubernetes' default terminationGracePeriodSeconds)
MIN_STALL_TIMEOUT = 10
MAX_STALL_TIMEOUT = 7 * 86400
DEFAULT_STALL_GRACE_SECONDS = 30

TIERS = ("A", "C")
LAUNCHERS = ("tao", "torchrun")
RECORD_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
NCCL_VALUE_RE = re.compile(r"[A-Za-z0-9_.,:=^+-]{1,256}")
NCCL_ENV_RE = re.compile(r"NCCL_[A-Z0-9_]+")
_RESERVED_KEY_PREFIXES = contract.RESERVED_KEY_PREFIXES
_RESERVED_LABELS = contract.RESERVED_LABELS
# Mount paths that would hide the image's own system directories.
_SYSTEM_DIRS = ("/bin", "/boot", "/etc", "/lib", "/lib32", "/lib64", "/run", "/sbin", "/usr", "/var")
_KERNEL_DIRS = ("/dev", "/proc", "/sys")


@record(frozen=True)
class JobSpec(Value):
    """Everything a rendered job depends on. Build with `spec_from_options`, or directly and let
    `render` validate it."""

    name: str  # Kubernetes Job name (DNS label, <= 52)
    record_id: str  # job-record id (annotation, label when valid, TAO_JOB_ID)
    image: str
    command: str  # the user's shell command; for launcher torchrun: script + arguments
    namespace: str = "default"
    gpus: int = 1  # per node; 0 = lifecycle-only (no nvidia.com/gpu limit)
    nodes: int = 1
    storage_tier: str = "A"  # A: bound PVC; C: S3 fetch into an emptyDir + upload at the end
    pvc: str | None = None  # claim name, tier A
    mount_path: str = DEFAULT_MOUNT_PATH
    results_dir: str | None = None  # tier A: path under mount_path or s3://; tier C: s3:// destination
    env_secret: str | None = None  # credential Secret -> envFrom.secretRef
    image_pull_secret: str | None = None
    ttl_seconds: int = DEFAULT_TTL_SECONDS
    keep_ttl: bool = True  # False: no ttlSecondsAfterFinished (the Job stays until deleted)
    shm_size: str = DEFAULT_SHM_SIZE
    s3_inputs: tuple[str, ...] = ()  # tier C
    s3_output: str | None = None  # tier C: results go to <s3_output>/<record_id>/
    upload_excludes: tuple[str, ...] = ()  # tier C: extra `aws s3 cp --exclude` patterns
    s3_tools_image: str = DEFAULT_S3_TOOLS_IMAGE
    labels: Mapping[str, str] = Factory(dict)  # extra, on the Job and its pods
    annotations: Mapping[str, str] = Factory(dict)  # extra, on the pod template
    master_port: int = DEFAULT_MASTER_PORT
    launcher: str = "tao"  # multi-node: tao (sh -c COMMAND) or torchrun (torchrun ... COMMAND-ARGV)
    nccl_socket_ifname: str | None = None
    nccl_ib_hca: str | None = None
    nccl_env: Mapping[str, str] = Factory(dict)  # other NCCL_* settings (e.g. NCCL_IB_DISABLE)
    backoff_limit: int = 0
    active_deadline_seconds: int | None = None
    node_selector: Mapping[str, str] = Factory(dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    queue_name: str | None = None  # Kueue LocalQueue: label + suspend: true
    topology: Mapping[str, str] = Factory(dict)  # Kueue's topology annotation on the pod template (--topology)
    retries_per_index: int | None = None  # multi-node: backoffLimitPerIndex + FailIndex on 137
    rendezvous_timeout_seconds: int = DEFAULT_RENDEZVOUS_TIMEOUT  # multi-node barrier; 0 disables
    max_restarts: int = 0  # multi-node: gang restarts in place (docs/restarts.md); 0 = none
    termination_grace_seconds: int | None = None  # None: Kubernetes' default (with restarts: 120)
    flight_recorder: bool = True  # multi-node torchrun: PyTorch's NCCL flight recorder, dumped on a timeout
    stall_timeout_seconds: int = 0  # the pod's stall watch (templates/k8s/stall-watch.sh); 0 = off

    @property
    def multi_node(self) -> bool:
        return self.nodes > 1

    @property
    def gang_dir(self) -> str:
        """Where the ranks of a job with restarts keep their shared attempt state: on the job's volume."""
        return exit_codes.gang_dir(self.mount_path, self.record_id)

    @property
    def termination_grace(self) -> int | None:
        """terminationGracePeriodSeconds: the flag, else 120 s with restarts, else Kubernetes' own default."""
        if self.termination_grace_seconds is not None:
            return self.termination_grace_seconds
        return DEFAULT_RESTART_GRACE_SECONDS if self.max_restarts else None

    @property
    def upload_destination(self) -> str | None:
        """Tier C: the S3 prefix the results are uploaded to."""
        if self.storage_tier != "C":
            return None
        if self.results_dir is not None:
            return self.results_dir
        return _output_destination(self)

    @property
    def effective_results_dir(self) -> str:
        """What the job record binds as results_dir: a path on the mounted volume or an S3 prefix."""
        if self.storage_tier == "C":
            return self.upload_destination or ""
        if self.results_dir is not None:
            return self.results_dir
        return f"{self.mount_path}/results/{self.record_id}"

    @property
    def results_root_in_pod(self) -> str | None:
        """TAO_RESULTS_ROOT: where the container writes (None when results go straight to S3)."""
        if self.storage_tier == "C":
            return f"{self.mount_path}/results"
        results = self.effective_results_dir
        return None if results.startswith("s3://") else results


def _output_destination(spec: JobSpec) -> str | None:
    """Tier C: `<s3_output>/<record id>/`, the default upload destination."""
    if spec.s3_output is None:
        return None
    return f"{spec.s3_output.rstrip('/')}/{spec.record_id}/"


# --------------------------------------------------------------------------- validation helpers


def _text(value: object, field_name: str) -> str:
    """A non-empty string without control characters."""
    text = names.require_string(value, field_name)
    bad = next((i for i, ch in enumerate(text, 1) if ord(ch) < 32 or ord(ch) == 127), None)
    if bad is not None:
        raise UsageError(f"{field_name} must not contain control characters (character {bad} is one)")
    return text


def _check_reserved_key(key: str, field_name: str, reserved: set[str]) -> None:
    if key in reserved or key.startswith(_RESERVED_KEY_PREFIXES):
        raise UsageError(f"{field_name} {key!r} is set by kubectl-tao itself; choose another key")


def _check_labels(labels: Mapping[str, str], field_name: str) -> None:
    """Keys and values named by their position (`label #2 value`), never quoted: a value may be a credential."""
    for position, (key, value) in enumerate(labels.items(), start=1):
        names.validate_qualified_name(key, f"{field_name} #{position} key")
        names.validate_label_value(value, f"{field_name} #{position} value")
        _check_reserved_key(key, f"{field_name} #{position} key", _RESERVED_LABELS)


def _check_annotations(annotations: Mapping[str, str]) -> None:
    for position, (key, value) in enumerate(annotations.items(), start=1):
        names.validate_qualified_name(key, f"annotation #{position} key")
        names.require_string(value, f"annotation #{position} value", allow_empty=True)
        _check_reserved_key(key, f"annotation #{position} key", set())


def _check_mount_path(path: str) -> None:
    names.validate_abs_path(path, "mount path")
    if any(names.is_under(path, root) for root in _KERNEL_DIRS) or path in _SYSTEM_DIRS:
        raise UsageError(f"mount path {path!r} would hide a system directory; use a path such as /workspace")
    if names.covers_token_dir(path):
        raise UsageError(
            f"mount path {path!r} would cover the service-account token the kubelet mounts under /var/run/secrets "
            "(the job's API credentials); use a path such as /workspace"
        )


def _check_s3_inputs(inputs: Sequence[str]) -> None:
    seen: dict[str, str] = {}
    for uri in inputs:
        _, key = names.split_s3_uri(uri, "s3 input")
        if not key:
            raise UsageError(f"s3 input {uri!r} names no object: write {uri}/ to fetch the whole bucket")
        name = names.s3_input_name(uri)
        if name in seen:
            raise UsageError(
                f"s3 inputs {seen[name]!r} and {uri!r} would both be fetched to inputs/{name}; "
                "fetch a common parent prefix instead"
            )
        seen[name] = uri


def _check_storage(spec: JobSpec) -> None:
    if spec.storage_tier not in TIERS:
        raise UsageError("storage tier must be A (a bound PVC) or C (S3 into an emptyDir)")
    _check_mount_path(spec.mount_path)
    if spec.storage_tier == "A":
        _check_tier_a(spec)
    else:
        _check_tier_c(spec)


def _check_tier_a(spec: JobSpec) -> None:
    if spec.pvc is None:
        raise UsageError("storage tier A needs --pvc: the name of a bound PersistentVolumeClaim holding the data")
    names.validate_dns_subdomain(spec.pvc, "pvc")
    if spec.s3_inputs or spec.s3_output is not None or spec.upload_excludes:
        raise UsageError("--s3-input, --s3-output and --upload-exclude need --storage-tier C")
    results = spec.results_dir
    if results is None:
        names.validate_abs_path(spec.effective_results_dir, "results dir (from the record id)")
        return
    if isinstance(results, str) and results.startswith("s3://"):
        names.validate_s3_uri(results, "results dir")
        return
    names.validate_abs_path(results, "results dir")
    if not names.is_under(results, spec.mount_path):
        raise UsageError(
            f"results dir {results!r} is not on the mounted volume: use a path under the mount path "
            f"{spec.mount_path!r} (or an s3:// prefix), so results outlive the pod"
        )


def _check_tier_c(spec: JobSpec) -> None:
    if spec.pvc is not None:
        raise UsageError("--pvc is for storage tier A; tier C fetches inputs from S3 into an emptyDir")
    if spec.multi_node:
        raise UsageError(
            "storage tier C supports one node only; for multi-node jobs use tier A with a ReadWriteMany PVC"
        )
    _check_s3_inputs(spec.s3_inputs)
    if spec.s3_output is not None:
        names.validate_s3_uri(spec.s3_output, "s3 output")
    if spec.results_dir is not None:
        if not str(spec.results_dir).startswith("s3://"):
            raise UsageError(
                f"results dir {spec.results_dir!r} must be an s3:// prefix in storage tier C: the pod's "
                "emptyDir is deleted with the pod"
            )
        names.validate_s3_uri(spec.results_dir, "results dir")
        if spec.s3_output is not None and spec.results_dir != _output_destination(spec):
            raise UsageError("give --s3-output or an s3:// --results-dir, not both")
    elif spec.s3_output is None:
        raise UsageError("storage tier C needs --s3-output (or an s3:// --results-dir) to upload the results to")
    for pattern in spec.upload_excludes:
        _text(pattern, "upload exclude pattern")
    names.validate_image(spec.s3_tools_image, "s3 tools image")


def _check_multi_node(spec: JobSpec) -> None:
    int_in(spec.master_port, "master port", 1, 65535)
    int_in(spec.rendezvous_timeout_seconds, "rendezvous timeout", 0, MAX_RENDEZVOUS_TIMEOUT)
    if spec.launcher not in LAUNCHERS:
        raise UsageError("launcher must be tao or torchrun")
    if spec.launcher == "torchrun" and not spec.multi_node:
        raise UsageError("--launcher torchrun is for multi-node jobs; on one node put torchrun in --command")
    if spec.launcher == "torchrun":
        _torchrun_argv(spec.command)
    if spec.retries_per_index is not None:
        if not spec.multi_node:
            raise UsageError("retries per index apply to multi-node jobs; use --backoff-limit on one node")
        int_in(spec.retries_per_index, "retries per index", 0, MAX_RETRIES)
    if spec.multi_node:
        names.validate_service_name(spec.name, "job name")
    _check_restarts(spec)


def _check_restarts(spec: JobSpec) -> None:
    int_in(spec.max_restarts, "max restarts", 0, MAX_RESTARTS)
    if spec.termination_grace_seconds is not None:
        int_in(spec.termination_grace_seconds, "termination grace period", 0, MAX_TERMINATION_GRACE)
    if not spec.max_restarts:
        return
    if not spec.multi_node:
        raise UsageError(
            "--max-restarts restarts the ranks of a multi-node job (--nodes 2 or more); on one node it would only "
            "restart its container in place: drop --max-restarts, and rerun a failed job with "
            "`kubectl tao resubmit JOB`"
        )
    if spec.retries_per_index is not None:
        raise UsageError(
            "--max-restarts and --retries-per-index both retry failed ranks: give --max-restarts (the whole gang "
            "restarts) or --retries-per-index (one index is recreated), not both"
        )


def _check_scheduling(spec: JobSpec) -> None:
    int_in(spec.backoff_limit, "backoff limit", 0, MAX_RETRIES)
    if spec.stall_timeout_seconds != 0:
        int_in(spec.stall_timeout_seconds, "stall timeout seconds", MIN_STALL_TIMEOUT, MAX_STALL_TIMEOUT)
    check_placement(spec.node_selector, spec.tolerations, spec.active_deadline_seconds, spec.queue_name)


def check_placement(
    node_selector: Mapping[str, str],
    tolerations: Sequence[Mapping[str, Any]],
    active_deadline_seconds: int | None,
    queue_name: str | None,
) -> None:
    """Where and how long a Job may run: the checks every rendered Job gets (action requests too)."""
    if active_deadline_seconds is not None:
        int_in(active_deadline_seconds, "active deadline seconds", 1, 2**31 - 1)
    for position, (key, value) in enumerate(node_selector.items(), start=1):
        names.validate_qualified_name(key, f"node selector #{position} key")
        names.validate_label_value(value, f"node selector #{position} value")
    for index, toleration in enumerate(tolerations):
        if not isinstance(toleration, Mapping):
            raise UsageError(f"toleration {index} must be a mapping of key, operator, value, effect")
        check_toleration(toleration, index)
    if queue_name is not None:
        names.validate_dns_label(queue_name, "queue name")


def check_metadata(labels: Mapping[str, str], annotations: Mapping[str, str]) -> None:
    """Extra labels (Job and pods) and pod annotations: valid, and none of the keys kubectl-tao sets itself."""
    _check_labels(labels, "label")
    _check_annotations(annotations)


def validate_spec(spec: JobSpec) -> JobSpec:
    """Raise UsageError naming the first bad field; return the spec unchanged when it is sound."""
    names.validate_job_name(spec.name)
    record_id = names.require_string(spec.record_id, "record id")
    if len(record_id) > 253 or RECORD_ID_RE.fullmatch(record_id) is None:
        raise UsageError(f"record id {record_id!r} must match [A-Za-z0-9][A-Za-z0-9._-]* (the job-record id format)")
    names.validate_dns_label(spec.namespace, "namespace")
    names.validate_image(spec.image)
    names.require_string(spec.command, "command")
    if not spec.command.strip():
        raise UsageError("command must not be blank")
    int_in(spec.gpus, "gpus", 0, MAX_GPUS_PER_NODE)
    int_in(spec.nodes, "nodes", 1, MAX_NODES)
    _check_storage(spec)
    if spec.env_secret is not None:
        names.validate_dns_subdomain(spec.env_secret, "env secret")
    if spec.image_pull_secret is not None:
        names.validate_dns_subdomain(spec.image_pull_secret, "image pull secret")
    int_in(spec.ttl_seconds, "ttl seconds", 0, MAX_TTL_SECONDS)
    if not isinstance(spec.keep_ttl, bool):
        raise UsageError("keep_ttl must be true or false")
    quantities.validate_binary_quantity(spec.shm_size, "shm size")
    check_metadata(spec.labels, spec.annotations)
    for field_name in ("nccl_socket_ifname", "nccl_ib_hca"):
        value = getattr(spec, field_name)
        if value is not None and (not isinstance(value, str) or NCCL_VALUE_RE.fullmatch(value) is None):
            raise UsageError(
                f"{field_name.replace('_', ' ')}{_nccl_why(value)} must be 1-256 characters of letters, digits "
                "and _ . , : = ^ + - (for example eth0 or ^docker,lo)"
            )
    for position, (key, value) in enumerate(spec.nccl_env.items(), start=1):
        if NCCL_ENV_RE.fullmatch(key) is None or key in ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA"):
            raise UsageError(
                f"nccl env #{position}: the name is not an NCCL_* variable (NCCL_SOCKET_IFNAME and NCCL_IB_HCA have "
                "flags of their own)"
            )
        if not isinstance(value, str) or NCCL_VALUE_RE.fullmatch(value) is None:
            raise UsageError(
                f"nccl env #{position} ({key}) value{_nccl_why(value)} must be 1-256 characters of letters, digits "
                "and _ . , : = ^ + -"
            )
    _check_multi_node(spec)
    _check_scheduling(spec)
    return spec


def _nccl_why(value: object) -> str:
    """Where an NCCL value breaks the rule (` (character 4 is '#')`), never the value."""
    if not isinstance(value, str) or not value:
        return " (empty)" if value == "" else ""
    if len(value) > 256:
        return f" ({len(value)} characters)"
    bad = names.where_bad(value, _NCCL_VALUE_CHARS)
    return f" ({bad})" if bad else ""


_NCCL_VALUE_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.,:=^+-"


def split_command(text: str, field: str, into: str, missing: str) -> list[str]:
    """`text` split as Python's shlex splits words (no expansion, no comments): the action-request contract;
    UsageError naming `field` when it cannot be split, or names no program first (`missing` says what is
    missing)."""
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"{field} cannot be split into {into}: {exc}") from exc
    if not argv or not argv[0]:
        raise UsageError(f"{field} {missing}")
    return argv


def _torchrun_argv(command: str) -> list[str]:
    """--command split into torchrun's arguments as a POSIX shell splits words, comments included, or refused
    where only a shell could run it as written (core/shellwords.py)."""
    from kubectl_tao.core.shellwords import ShellWordsError, split_words

    try:
        argv = split_words(command)
    except ShellWordsError as exc:
        raise UsageError(
            f"command cannot be split into torchrun arguments: {exc}; with --launcher torchrun the words are "
            "passed to torchrun as they are, never run by a shell: quote it ('...') to pass it literally, or use "
            "--launcher tao"
        ) from None
    if not argv or not argv[0]:
        raise UsageError("command must name the training script for --launcher torchrun")
    return argv


def spec_from_options(
    *,
    image: str,
    command: str,
    name: str | None = None,
    record_id: str | None = None,
    namespace: str = "default",
    gpus: int = 1,
    nodes: int = 1,
    storage_tier: str = "A",
    pvc: str | None = None,
    mount_path: str = DEFAULT_MOUNT_PATH,
    results_dir: str | None = None,
    env_secret: str | None = None,
    image_pull_secret: str | None = None,
    ttl_seconds: int | None = DEFAULT_TTL_SECONDS,
    shm_size: str = DEFAULT_SHM_SIZE,
    s3_inputs: Sequence[str] = (),
    s3_output: str | None = None,
    upload_excludes: Sequence[str] = (),
    s3_tools_image: str = DEFAULT_S3_TOOLS_IMAGE,
    labels: Mapping[str, str] | Iterable[str] | None = None,
    annotations: Mapping[str, str] | Iterable[str] | None = None,
    master_port: int = DEFAULT_MASTER_PORT,
    launcher: str = "tao",
    nccl_socket_ifname: str | None = None,
    nccl_ib_hca: str | None = None,
    nccl_env: Mapping[str, str] | Iterable[str] | None = None,
    backoff_limit: int = 0,
    active_deadline_seconds: int | None = None,
    node_selector: Mapping[str, str] | Iterable[str] | None = None,
    tolerations: Iterable[str | Mapping[str, Any]] = (),
    queue_name: str | None = None,
    retries_per_index: int | None = None,
    rendezvous_timeout_seconds: int = DEFAULT_RENDEZVOUS_TIMEOUT,
    topology: Mapping[str, str] | None = None,
    max_restarts: int = 0,
    termination_grace_seconds: int | None = None,
    flight_recorder: bool = True,
    stall_timeout_seconds: int = 0,
) -> JobSpec:
    """Build a validated JobSpec from flag values (what `kubectl tao render/submit` and
    scripts/render_job parse). Give a name, a record id, or both: a missing name is derived from the
    record id with `names.kubernetes_job_name`, a missing record id is the name. `ttl_seconds=None`
    keeps the Job until it is deleted. KEY=VALUE lists may be given as mappings."""
    if name is None and record_id is None:
        raise UsageError("give --name (the Kubernetes Job name) or --record-id (the job-record id)")
    if name is None:
        name = names.kubernetes_job_name(record_id)
    if record_id is None:
        record_id = name
    spec = JobSpec(
        name=name,
        record_id=record_id,
        image=image,
        command=command,
        namespace=namespace,
        gpus=gpus,
        nodes=nodes,
        storage_tier=storage_tier.upper() if isinstance(storage_tier, str) else storage_tier,
        pvc=pvc,
        mount_path=mount_path,
        results_dir=results_dir,
        env_secret=env_secret,
        image_pull_secret=image_pull_secret,
        ttl_seconds=DEFAULT_TTL_SECONDS if ttl_seconds is None else ttl_seconds,
        keep_ttl=ttl_seconds is not None,
        shm_size=shm_size,
        s3_inputs=tuple(s3_inputs),
        s3_output=s3_output,
        upload_excludes=tuple(upload_excludes),
        s3_tools_image=s3_tools_image,
        labels=parse_key_values(labels, "label"),
        annotations=parse_key_values(annotations, "annotation"),
        master_port=master_port,
        launcher=launcher,
        nccl_socket_ifname=nccl_socket_ifname,
        nccl_ib_hca=nccl_ib_hca,
        nccl_env=parse_key_values(nccl_env, "nccl env"),
        backoff_limit=backoff_limit,
        active_deadline_seconds=active_deadline_seconds,
        node_selector=parse_key_values(node_selector, "node selector"),
        tolerations=tuple(parse_toleration(t) if isinstance(t, str) else dict(t) for t in tolerations),
        queue_name=queue_name,
        topology=dict(topology or {}),
        retries_per_index=retries_per_index,
        rendezvous_timeout_seconds=rendezvous_timeout_seconds,
        max_restarts=max_restarts,
        termination_grace_seconds=termination_grace_seconds,
        flight_recorder=flight_recorder,
        stall_timeout_seconds=stall_timeout_seconds,
    )
    return validate_spec(spec)


# --------------------------------------------------------------------------- warnings


def warnings_for(spec: JobSpec) -> list[str]:
    """Things the user should hear before submitting this spec (printed as WARN: lines)."""
    found: list[str] = []
    if spec.storage_tier == "C":
        found.append(
            "storage tier C: the pod holds its nvidia.com/gpu while fetch-inputs downloads from S3 and "
            "while results upload; keep inputs small, or use tier A when the data is on a PVC"
        )
        if spec.env_secret is None:
            found.append(
                "storage tier C without a credential Secret (--env-file/--env, or --env-secret for render_job): "
                "S3 access relies on the node's or service account's AWS identity (IRSA / workload identity)"
            )
    if spec.gpus == 0:
        found.append("gpus=0: a lifecycle-only run; GPU scheduling is not exercised")
    if spec.storage_tier == "A" and spec.effective_results_dir.startswith("s3://"):
        found.append(
            "results dir is an S3 prefix in tier A: kubectl-tao uploads nothing, the container must write there itself"
        )
    if spec.multi_node:
        found.append(
            f"multi-node: every pod mounts PVC {spec.pvc!r}; it must be ReadWriteMany, as each rank runs "
            "on a node of its own"
        )
        if spec.rendezvous_timeout_seconds == 0:
            found.append("rendezvous barrier disabled: ranks may start before rank 0 resolves or listens")
    if spec.queue_name is not None:
        found.append(f"the Job is created suspended; Kueue starts it when queue {spec.queue_name!r} admits it")
    return found


# --------------------------------------------------------------------------- rendering


def _base_labels(spec: JobSpec) -> dict[str, str]:
    labels = {MANAGED_BY_LABEL: MANAGED_BY, JOB_LABEL: spec.name}
    if names.is_label_value(spec.record_id):
        labels[RECORD_ID_KEY] = spec.record_id
    labels.update(spec.labels)
    return labels


def _job_labels(spec: JobSpec) -> dict[str, str]:
    labels = _base_labels(spec)
    if spec.queue_name is not None:
        labels[QUEUE_LABEL] = spec.queue_name
    return labels


def _pod_annotations(spec: JobSpec) -> dict[str, str]:
    return {RECORD_ID_KEY: spec.record_id, **spec.annotations, **spec.topology}


def _env(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def _field_env(name: str, field_path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}


def _common_env(spec: JobSpec) -> list[dict[str, Any]]:
    env = [_env("TAO_JOB_ID", spec.record_id)]
    results_root = spec.results_root_in_pod
    if results_root is not None:
        env.append(_env("TAO_RESULTS_ROOT", results_root))
    if spec.nccl_socket_ifname is not None:
        env.append(_env("NCCL_SOCKET_IFNAME", spec.nccl_socket_ifname))
    if spec.nccl_ib_hca is not None:
        env.append(_env("NCCL_IB_HCA", spec.nccl_ib_hca))
    env += [_env(key, value) for key, value in sorted(spec.nccl_env.items())]
    return env


def _tier_c_env(spec: JobSpec) -> list[dict[str, Any]]:
    return [
        _env("TAO_WORKSPACE", spec.mount_path),
        _env("TAO_INPUTS_DIR", f"{spec.mount_path}/inputs"),
        _env("TAO_UPLOAD_URI", spec.upload_destination or ""),
    ]


def _rank_env(spec: JobSpec) -> list[dict[str, Any]]:
    master = f"{spec.name}-0.{spec.name}"
    return [
        _env("WORLD_SIZE", str(spec.nodes)),
        _env("NUM_GPU_PER_NODE", str(spec.gpus)),
        _env("NNODES", str(spec.nodes)),
        _env("NPROC_PER_NODE", str(max(spec.gpus, 1))),
        _field_env("NODE_RANK", f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"),
        _env("MASTER_ADDR", master),
        _env("MASTER_PORT", str(spec.master_port)),
        _field_env("NODE_NAME", "spec.nodeName"),
        _env("TAO_K8S_JOB_NAME", spec.name),
        _env("RENDEZVOUS_TIMEOUT", str(spec.rendezvous_timeout_seconds)),
    ]


FLIGHT_RECORDER_BUFFER = "2000"  # collectives each rank keeps (PyTorch's documented suggestion)
FLIGHT_RECORDER_DIR = "flight-recorder"  # under the results directory
FLIGHT_RECORDER_PREFIX = "nccl_trace_rank_"  # PyTorch's own file prefix; the rank follows


def flight_recorder_dir(results_root: str) -> str:
    return f"{results_root.rstrip('/')}/{FLIGHT_RECORDER_DIR}"


def _flight_recorder_env(spec: JobSpec) -> list[dict[str, Any]]:
    """A multi-node torchrun job keeps the last collectives of each rank and dumps them when the NCCL watchdog
    times out (TORCH_NCCL_TRACE_BUFFER_SIZE, TORCH_NCCL_DUMP_ON_TIMEOUT), into the results directory (the
    dump path under both of its names: TORCH_FR_DUMP_TEMP_FILE, and TORCH_NCCL_DEBUG_INFO_TEMP_FILE of
    releases before it); --no-flight-recorder leaves it out. `torchfrtrace DIR` analyzes the dumps."""
    if not (spec.flight_recorder and spec.multi_node and spec.launcher == "torchrun"):
        return []
    env = [_env("TORCH_NCCL_TRACE_BUFFER_SIZE", FLIGHT_RECORDER_BUFFER), _env("TORCH_NCCL_DUMP_ON_TIMEOUT", "1")]
    root = spec.results_root_in_pod
    if root is not None:
        prefix = f"{flight_recorder_dir(root)}/{FLIGHT_RECORDER_PREFIX}"
        env += [_env("TORCH_FR_DUMP_TEMP_FILE", prefix), _env("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", prefix)]
    return env


def _stall_env(spec: JobSpec) -> list[dict[str, Any]]:
    """--stall-timeout: the watch's settings (seconds), read by stall-watch.sh; nothing when it is off."""
    if not spec.stall_timeout_seconds:
        return []
    grace = spec.termination_grace
    return [
        _env("TAO_STALL_TIMEOUT", str(spec.stall_timeout_seconds)),
        _env("TAO_STALL_GRACE_SECONDS", str(DEFAULT_STALL_GRACE_SECONDS if grace is None else grace)),
    ]


def _watched(spec: JobSpec, script: str) -> str:
    """The pod script SCRIPT, with stall-watch.sh's stall_watch before it when --stall-timeout is on (the script
    then runs its program through it)."""
    text = templates.load_template(script)
    if not spec.stall_timeout_seconds:
        return text
    return templates.load_template("stall-watch.sh") + "\n" + text


def _env_from(spec: JobSpec) -> list[dict[str, Any]] | None:
    if spec.env_secret is None:
        return None
    return [{"secretRef": {"name": spec.env_secret, "optional": False}}]


def _resources(spec: JobSpec) -> dict[str, Any] | None:
    if spec.gpus == 0:
        return None
    return {"limits": {GPU_RESOURCE: str(spec.gpus)}}


def _fetch_container(spec: JobSpec) -> dict[str, Any]:
    return {
        "name": "fetch-inputs",
        "image": spec.s3_tools_image,
        "command": ["/bin/sh", "-c"],
        "args": [templates.load_template("tier-c-fetch.sh"), "fetch-inputs", *spec.s3_inputs],
        "env": [_env("TAO_WORKSPACE", spec.mount_path)],
        "envFrom": _env_from(spec),
        "volumeMounts": [{"name": "workspace", "mountPath": spec.mount_path}],
    }


def _job_values(spec: JobSpec) -> dict[str, Any]:
    """Values both Job templates share."""
    return {
        "JOB_NAME": spec.name,
        "NAMESPACE": spec.namespace,
        "LABELS": _job_labels(spec),
        "ANNOTATIONS": {RECORD_ID_KEY: spec.record_id},
        "TTL_SECONDS": spec.ttl_seconds if spec.keep_ttl else None,
        "ACTIVE_DEADLINE_SECONDS": spec.active_deadline_seconds,
        "SUSPEND": True if spec.queue_name is not None else None,
        "POD_LABELS": _base_labels(spec),
        "POD_ANNOTATIONS": _pod_annotations(spec),
        "IMAGE_PULL_SECRETS": ([{"name": spec.image_pull_secret}] if spec.image_pull_secret is not None else None),
        "NODE_SELECTOR": dict(spec.node_selector) or None,
        "TOLERATIONS": [dict(t) for t in spec.tolerations] or None,
        "IMAGE": spec.image,
        "RESOURCES": _resources(spec),
        "ENV_FROM": _env_from(spec),
        "MOUNT_PATH": spec.mount_path,
        "SHM_SIZE": spec.shm_size,
        "TERMINATION_GRACE": spec.termination_grace,
    }


def render_single(spec: JobSpec) -> list[dict[str, Any]]:
    """One batch/v1 Job running `/bin/sh -c COMMAND` (tier C: fetch, run, upload)."""
    validate_spec(spec)
    if spec.multi_node:
        raise UsageError(f"nodes={spec.nodes}: a single-pod Job runs on one node; use render_indexed")
    values = _job_values(spec)
    env = _common_env(spec) + _stall_env(spec)
    if spec.storage_tier == "C":
        args = [_watched(spec, "tier-c-run.sh"), "kubectl-tao", spec.command, *spec.upload_excludes]
        env += _tier_c_env(spec)
        values.update(
            INIT_CONTAINERS=[_fetch_container(spec)],
            WORKSPACE_PVC=None,
            WORKSPACE_EMPTY_DIR={},
        )
    elif spec.stall_timeout_seconds:
        # the stall watch runs the command as the container's /bin/sh -c would
        args = [templates.load_template("stall-watch.sh"), "stall-watch", "/bin/sh", "-c", spec.command]
        values.update(INIT_CONTAINERS=None, WORKSPACE_PVC={"claimName": spec.pvc}, WORKSPACE_EMPTY_DIR=None)
    else:
        args = [spec.command]
        values.update(INIT_CONTAINERS=None, WORKSPACE_PVC={"claimName": spec.pvc}, WORKSPACE_EMPTY_DIR=None)
    if spec.storage_tier == "C" or spec.stall_timeout_seconds:  # a pod script runs: it reads its exit codes
        env += _exit_codes_env()
    values.update(BACKOFF_LIMIT=spec.backoff_limit, ARGS=args, ENV=env)
    return kubelet_text.escape_workloads(templates.render_template("single-pod-job.yaml.tmpl", values))


def _pod_failure_policy(spec: JobSpec) -> dict[str, Any]:
    on_exit = {"containerName": CONTAINER_NAME, "operator": "In"}
    rules: list[dict[str, Any]] = [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
        {"action": "FailJob", "onExitCodes": {**on_exit, "values": [EXIT_RENDEZVOUS_TIMEOUT]}},
    ]
    if spec.retries_per_index is not None:
        rules.append({"action": "FailIndex", "onExitCodes": {**on_exit, "values": [EXIT_SIGKILL]}})
    return {"rules": rules}


def _exit_codes_env() -> list[dict[str, Any]]:
    """TAO_EXIT_CODES: the table of exit codes (restarts/table.py) the pod scripts read their numbers from."""
    return [_env("TAO_EXIT_CODES", exit_codes.pod_text())]


def _restart_env(spec: JobSpec) -> list[dict[str, Any]]:
    from kubectl_tao.restarts import signs

    return [
        _env("TAO_MAX_RESTARTS", str(spec.max_restarts)),
        _env("TAO_RETRY_SIGNS", signs.signs_text()),
        _env("TAO_GANG_DIR", spec.gang_dir),
    ]


def _one_rank_per_node(spec: JobSpec) -> dict[str, Any]:
    """Required pod anti-affinity on the job's own label: each rank gets a node to itself (the fit
    gate counts nodes on that assumption)."""
    term = {"labelSelector": {"matchLabels": {JOB_LABEL: spec.name}}, "topologyKey": "kubernetes.io/hostname"}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def render_indexed(spec: JobSpec) -> list[dict[str, Any]]:
    """A headless Service and an Indexed Job, one pod per node (in that order)."""
    validate_spec(spec)
    if not spec.multi_node:
        raise UsageError("nodes=1: an Indexed Job needs nodes > 1; use render_single")
    user_argv = _torchrun_argv(spec.command) if spec.launcher == "torchrun" else [spec.command]
    restarts = spec.max_restarts > 0
    args = [
        _watched(spec, "gang-restart-entrypoint.sh" if restarts else "indexed-rank-entrypoint.sh"),
        "kubectl-tao",
        templates.load_template("rendezvous-barrier.sh"),
        spec.launcher,
        *user_argv,
    ]
    per_index = spec.retries_per_index is not None
    values = _job_values(spec)
    values.update(
        NODES=spec.nodes,
        MASTER_PORT=spec.master_port,
        BACKOFF_LIMIT=None if per_index else spec.backoff_limit,
        BACKOFF_LIMIT_PER_INDEX=spec.retries_per_index,
        POD_FAILURE_POLICY=_pod_failure_policy(spec),
        ARGS=args,
        ENV=_common_env(spec) + _rank_env(spec) + _flight_recorder_env(spec) + (_restart_env(spec) if restarts else [])
        + _stall_env(spec) + _exit_codes_env(),
        PVC_CLAIM=spec.pvc,
        AFFINITY=_one_rank_per_node(spec),
        CONTAINER_RESTART_POLICY="Never" if restarts else None,
        RESTART_RULES=exit_codes.restart_rules() if restarts else None,
    )
    service, job = templates.render_template("indexed-job.yaml.tmpl", values)
    # The Service carries no Kueue label and no TTL: it is deleted with the job by `kubectl tao cancel`.
    service["metadata"]["labels"].pop(QUEUE_LABEL, None)
    return kubelet_text.escape_workloads([service, job])


def render(spec: JobSpec) -> list[dict[str, Any]]:
    """The objects to apply for this spec: render_single for one node, render_indexed for more."""
    return render_indexed(spec) if spec.nodes > 1 else render_single(spec)


def with_overrides(spec: JobSpec, **changes: Any) -> JobSpec:
    """A copy of `spec` with some fields changed, validated."""
    return validate_spec(spec.replaced(**changes))


# --------------------------------------------------------------------------- output


def to_yaml(objects: Sequence[Mapping[str, Any]]) -> str:
    """The objects as YAML documents, `---` between them, as `kubectl create --dry-run=client -o yaml` prints
    them; strings that a YAML 1.1 reader (Kubernetes) would take for something else are quoted (yamltext)."""
    from kubectl_tao.manifests.yamltext import dumps_all

    return dumps_all(objects)


def to_json(objects: Sequence[Mapping[str, Any]]) -> str:
    """One object as itself, several as a v1 List (what `kubectl apply -f -` accepts as JSON)."""
    document: Any = objects[0] if len(objects) == 1 else {"apiVersion": "v1", "kind": "List", "items": list(objects)}
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
