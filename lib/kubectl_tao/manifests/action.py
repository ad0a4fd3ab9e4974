"""Action requests (schema v1): a producer's single-pod job, rendered against a staging map.

Flow: a producer writes an action request; for mode=config, `materialize_config` writes its nested
spec to a content-addressed file; a data mover copies every mount source (and that file) onto one
PVC and writes a staging map (source -> subPath); `render_action_job` checks that the request and
the staging map agree exactly and renders one Job from templates/k8s/action-job.yaml.tmpl.

Guarantees of the rendered Job: the command is native argv (a shell only when a config-mode command
is itself a shell script, which is kept verbatim); no request value is ever turned into shell text;
each declared mount target is its own subPath mount with the declared access mode; a materialized
config is mounted read-only; credentials are per-key secretKeyRefs to the job's Secret, named by
forward_env and nothing else.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from kubectl_tao.core import contract, names, schemas, templates
from kubectl_tao.core.atomicwrite import write_atomically
from kubectl_tao.core.errors import TaoError, UsageError
from kubectl_tao.core.valueclass import Factory, Value, record
from kubectl_tao.manifests import actionfields, kubelet_text
from kubectl_tao.manifests.tomlwriter import toml_dumps

REQUEST_SCHEMA = actionfields.REQUEST_SCHEMA
STAGING_SCHEMA = actionfields.STAGING_SCHEMA
TEMPLATE = "action-job.yaml.tmpl"
CONFIG_MOUNT_DIR = "/tao-action-config"
CONFIG_FILE_PREFIX = "tao-action-config-"
CONFIG_EXTENSIONS = {"json": "json", "toml": "toml", "yaml": "yaml"}
CONFIG_PATH_TOKEN = "{config_path}"  # noqa: S105 - a placeholder, not a credential
# A config-mode command containing any of these is a shell script: it runs under /bin/sh -c as written.
SHELL_SYNTAX = ("\n", ";", "&&", "||", "$(", "`", "|", ">", "<")
SHM_TARGET = "/dev/shm"

kubernetes_job_name = names.kubernetes_job_name


# --------------------------------------------------------------------------- loading


def load_json_object(path: str | Path, what: str) -> dict[str, Any]:
    """Read a JSON file whose top level must be an object."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise UsageError(f"{what} {path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise UsageError(f"{what} {path} must hold a JSON object at the top level")
    return data


def validate_request(request: Any) -> dict[str, Any]:
    schemas.validate(request, REQUEST_SCHEMA, what="action request")
    return request


def validate_staging_map(staging_map: Any) -> dict[str, Any]:
    schemas.validate(staging_map, STAGING_SCHEMA, what="staging map")
    return staging_map


# --------------------------------------------------------------------------- config documents


def config_document(bundle: dict[str, Any]) -> tuple[str, str, str]:
    """(content, file extension, sha256 hex) of a mode=config spec. YAML is written as JSON, which
    every YAML reader accepts and which has no YAML 1.1 boolean surprises."""
    spec = bundle.get("spec")
    if not isinstance(spec, dict):
        raise UsageError("spec_bundle.spec must be an object in mode=config")
    config_format = bundle.get("config_format")
    if config_format not in CONFIG_EXTENSIONS:
        raise UsageError("spec_bundle.config_format must be json, toml or yaml")
    if config_format == "toml":
        content = toml_dumps(spec)
    else:
        try:
            content = json.dumps(spec, allow_nan=False, indent=2, sort_keys=True) + "\n"
        except (TypeError, ValueError) as exc:
            raise UsageError(f"spec_bundle.spec cannot be written as {config_format}: {exc}") from exc
    digest = hashlib.sha256(content.encode("utf-8")).hexdigest()
    return content, CONFIG_EXTENSIONS[config_format], digest


def _read_regular_file(path: Path, what: str) -> bytes:
    """The bytes of a regular file, refusing a symlink in the last component, a FIFO or a device."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UsageError(f"{what} {path} is a symlink; give the regular file itself") from exc
        raise UsageError(f"cannot open {what} {path}: {exc.strerror}") from exc
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):  # before fdopen, which refuses a directory itself
        os.close(descriptor)
        raise UsageError(f"{what} {path} is not a regular file")
    with os.fdopen(descriptor, "rb") as handle:
        return handle.read()


def _prepare_output_dir(output_dir: str | Path) -> Path:
    raw = Path(output_dir).expanduser()
    if raw.is_symlink():
        raise UsageError(f"config output directory {raw} is a symlink; give a real directory")
    try:
        raw.mkdir(parents=True, exist_ok=True)
        root = raw.resolve(strict=True)
    except OSError as exc:
        raise UsageError(f"cannot create config output directory {raw}: {exc.strerror or exc}") from exc
    if not root.is_dir():
        raise UsageError(f"config output directory {root} is not a directory")
    if root == Path(root.anchor):
        raise UsageError("config output directory must not be the filesystem root")
    return root


def _publish(destination: Path, data: bytes) -> None:
    """Readers see the whole file or nothing, and an existing file is never replaced (its content is compared)."""
    try:
        published = write_atomically(destination, data, replace=False)
    except OSError as exc:
        raise TaoError(f"cannot write materialized config {destination}: {exc.strerror or exc}") from exc
    if not published:
        _check_same_content(destination, data)


def _check_same_content(destination: Path, data: bytes) -> None:
    if _read_regular_file(destination, "materialized config") != data:
        raise UsageError(
            f"materialized config {destination} exists with different content; remove it and rerun materialize-config"
        )


def materialize_config(request: dict[str, Any], output_dir: str | Path) -> Path:
    """Write the mode=config spec of `request` to <output_dir>/tao-action-config-<sha256>.<ext> and
    return its path. Idempotent: an existing file with the same content is reused."""
    validate_request(request)
    bundle = request["spec_bundle"]
    if bundle.get("mode") != "config":
        raise UsageError("materialize-config needs spec_bundle.mode=config; mode=args has no config file")
    content, extension, digest = config_document(bundle)
    root = _prepare_output_dir(output_dir)
    destination = root / f"{CONFIG_FILE_PREFIX}{digest}.{extension}"
    data = content.encode("utf-8")
    if destination.exists() or destination.is_symlink():
        _check_same_content(destination, data)
        return destination
    _publish(destination, data)
    return destination


# --------------------------------------------------------------------------- rendering pieces


def is_shell_script(command: str) -> bool:
    return any(marker in command for marker in SHELL_SYNTAX)


def _staged_sources(staging_map: dict[str, Any]) -> dict[str, str]:
    """source -> subPath, refusing a repeated source or one subPath for two sources."""
    staged: dict[str, str] = {}
    owner_of: dict[str, str] = {}
    for row in staging_map["sources"]:
        source, sub_path = row["source"], row["sub_path"]
        if source in staged:
            raise UsageError(f"staging map stages source {source} twice; keep one row per source")
        if sub_path in owner_of:
            raise UsageError(
                f"staging map gives subPath {sub_path!r} to both {owner_of[sub_path]} and {source}; "
                "each source needs its own subPath"
            )
        staged[source] = sub_path
        owner_of[sub_path] = source
    return staged


def _config_mount(
    request: dict[str, Any], staged: dict[str, str], config_source: str | Path | None
) -> tuple[str, str] | None:
    """(staged source, container target) of the materialized config, after checking its content."""
    bundle = request["spec_bundle"]
    if bundle["mode"] != "config":
        if config_source is not None:
            raise UsageError("--config-source is only for spec_bundle.mode=config; drop it for mode=args")
        return None
    if config_source is None:
        raise UsageError(
            "spec_bundle.mode=config needs --config-source: run materialize-config, stage the file it "
            "prints, then render with --config-source <that file>"
        )
    source = actionfields.config_source_path(config_source)
    content, extension, digest = config_document(bundle)
    if _read_regular_file(Path(source), "config source") != content.encode("utf-8"):
        raise UsageError(
            f"config source {source} does not match spec_bundle.spec; rerun materialize-config and "
            "stage the file it prints"
        )
    if source not in staged:
        raise UsageError(f"config source {source} is not in the staging map; stage it onto the PVC first")
    return source, f"{CONFIG_MOUNT_DIR}/spec-{digest}.{extension}"


def _command(request: dict[str, Any], config_target: str | None) -> tuple[list[str], list[str]]:
    """(container command, container args)."""
    bundle = request["spec_bundle"]
    text = bundle["command"]
    if bundle["mode"] == "args":
        args = list(bundle["args"])
    else:
        if CONFIG_PATH_TOKEN not in text:
            raise UsageError(
                "spec_bundle.command must contain {config_path} in mode=config, where the config file goes"
            )
        text = text.replace(CONFIG_PATH_TOKEN, config_target or "")
        if is_shell_script(text):
            return ["/bin/sh", "-c"], [text, "tao-action"]
        args = []
    from kubectl_tao.manifests.render import split_command

    return split_command(text, "spec_bundle.command", "arguments", "names no executable"), args


def _image_and_gpus(request: dict[str, Any]) -> tuple[str, int]:
    bundle = request["spec_bundle"]
    image = bundle["image"]
    workload_image = request.get("workload_image")
    if workload_image is not None and workload_image != image:
        raise UsageError("workload_image differs from spec_bundle.image; they must name the same image")
    shape = bundle["compute_shape"]
    gpus = shape["gpus"]
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise UsageError(f"spec_bundle.compute_shape.gpus must be a whole number >= 0, got {gpus!r}")
    if shape["nodes"] != 1:
        raise UsageError(
            f"spec_bundle.compute_shape.nodes is {shape['nodes']!r}; an action request renders one pod, "
            "so nodes must be 1"
        )
    return image, gpus


def _volume_mounts(
    request: dict[str, Any], staged: dict[str, str], config_mount: tuple[str, str] | None
) -> tuple[list[dict[str, Any]], list[tuple[PurePosixPath, bool]]]:
    """The container's volumeMounts and (source, read_only) of each declared mount."""
    mounts: list[dict[str, Any]] = [{"name": "dshm", "mountPath": SHM_TARGET, "readOnly": False}]
    targets = {SHM_TARGET}
    used: set[str] = set()
    modes: list[tuple[PurePosixPath, bool]] = []
    for index, row in enumerate(request["mounts"]):
        source, target = row["source"], row["target"]
        if source not in staged:
            raise UsageError(f"mounts[{index}].source {source} is not in the staging map; stage it first")
        if target in targets:
            raise UsageError(f"mounts[{index}].target {target} is mounted twice; give each target once")
        targets.add(target)
        used.add(source)
        modes.append((PurePosixPath(source), row["read_only"]))
        mounts.append(
            {"name": "workspace", "mountPath": target, "subPath": staged[source], "readOnly": row["read_only"]}
        )
    if config_mount is not None:
        source, target = config_mount
        if source in used:
            raise UsageError(
                f"config source {source} is also a declared mount source; stage the config file on its own"
            )
        if target in targets:
            raise UsageError(f"config mount target {target} is already a declared mount target")
        used.add(source)
        mounts.append({"name": "workspace", "mountPath": target, "subPath": staged[source], "readOnly": True})
    undeclared = sorted(set(staged) - used)
    if undeclared:
        raise UsageError(f"staging map stages sources the request does not mount: {', '.join(undeclared)}")
    return mounts, modes


def _check_fresh_outputs(request: dict[str, Any], modes: list[tuple[PurePosixPath, bool]]) -> None:
    for index, raw in enumerate(request.get("fresh_outputs", [])):
        output = PurePosixPath(raw)
        if not any(not read_only and output.is_relative_to(source) for source, read_only in modes):
            raise UsageError(
                f"fresh_outputs[{index}] {output} is not inside a writable mount; declare a mount of a "
                "parent directory with read_only false"
            )


def _environment(request: dict[str, Any], credential_secret: str | None) -> list[dict[str, Any]]:
    environment = request.get("environment", {})
    forward = request.get("forward_env", [])
    env = [{"name": name, "value": environment[name]} for name in sorted(environment)]
    for name in forward:
        if name in environment:
            raise UsageError(
                f"{name} is both in forward_env and in environment; a credential must come only from the Secret"
            )
    if forward and credential_secret is None:
        raise UsageError("forward_env names credentials but no --credential-secret was given to hold them")
    if credential_secret is not None and not forward:
        raise UsageError("--credential-secret was given but forward_env is empty; drop the Secret or name its keys")
    env.extend(
        {"name": name, "valueFrom": {"secretKeyRef": {"name": credential_secret, "key": name}}} for name in forward
    )
    return env


# --------------------------------------------------------------------------- rendering


@record(frozen=True)
class Placement(Value):
    """The job flags an action-request Job gets like any other (the request itself says nothing of them)."""

    labels: Mapping[str, str] = Factory(dict)
    annotations: Mapping[str, str] = Factory(dict)
    node_selector: Mapping[str, str] = Factory(dict)
    tolerations: Sequence[Mapping[str, Any]] = ()
    active_deadline_seconds: int | None = None
    queue_name: str | None = None


def render_action_objects(
    request: dict[str, Any],
    staging_map: dict[str, Any],
    *,
    job_id: str,
    namespace: str = "default",
    pvc_claim: str,
    credential_secret: str | None = None,
    image_pull_secret: str | None = None,
    config_source: str | Path | None = None,
    ttl_seconds: int | None = 3600,
    shm_size: str = "16Gi",
    placement: Placement | None = None,
) -> list[dict[str, Any]]:
    """The Job for an action request, as a one-element list of plain objects. `placement` carries what
    every kubectl-tao Job may get (labels, annotations, node selector, tolerations, deadline, queue)."""
    from kubectl_tao.manifests.render import (
        JOB_LABEL,
        MANAGED_BY,
        MANAGED_BY_LABEL,
        QUEUE_LABEL,
        RECORD_ID_KEY,
        check_metadata,
        check_placement,
    )

    actionfields.check(
        request,
        staging_map,
        job_id=job_id,
        namespace=namespace,
        pvc_claim=pvc_claim,
        credential_secret=credential_secret,
        image_pull_secret=image_pull_secret,
        config_source=config_source,
        ttl_seconds=ttl_seconds,
        shm_size=shm_size,
    )
    staged = _staged_sources(staging_map)
    config_mount = _config_mount(request, staged, config_source)
    command, args = _command(request, config_mount[1] if config_mount else None)
    image, gpus = _image_and_gpus(request)
    volume_mounts, modes = _volume_mounts(request, staged, config_mount)
    _check_fresh_outputs(request, modes)
    env = _environment(request, credential_secret)
    extra = placement or Placement()
    check_metadata(extra.labels, extra.annotations)
    check_placement(extra.node_selector, extra.tolerations, extra.active_deadline_seconds, extra.queue_name)
    job_name = names.kubernetes_job_name(job_id)
    labels = {MANAGED_BY_LABEL: MANAGED_BY, JOB_LABEL: job_name}
    if names.is_label_value(job_id):
        labels[RECORD_ID_KEY] = job_id
    pod_labels = {**labels, **extra.labels}
    job_labels = dict(pod_labels)
    if extra.queue_name is not None:
        job_labels[QUEUE_LABEL] = extra.queue_name
    values = {
        "JOB_NAME": job_name,
        "NAMESPACE": namespace,
        "LABELS": job_labels,
        "ANNOTATIONS": {RECORD_ID_KEY: job_id},
        "POD_LABELS": pod_labels,
        "POD_ANNOTATIONS": {RECORD_ID_KEY: job_id, **extra.annotations},
        "TTL_SECONDS": ttl_seconds,
        "ACTIVE_DEADLINE_SECONDS": extra.active_deadline_seconds,
        "SUSPEND": True if extra.queue_name is not None else None,
        "NODE_SELECTOR": dict(extra.node_selector) or None,
        "TOLERATIONS": [dict(t) for t in extra.tolerations] or None,
        "IMAGE_PULL_SECRETS": [{"name": image_pull_secret}] if image_pull_secret is not None else None,
        "IMAGE": image,
        "COMMAND": command,
        "ARGS": args,
        "RESOURCES": {"limits": {contract.GPU_RESOURCE: str(gpus)}} if gpus else None,
        "ENV": env,
        "VOLUME_MOUNTS": volume_mounts,
        "SHM_SIZE": shm_size,
        "PVC_CLAIM": pvc_claim,
    }
    return kubelet_text.escape_workloads(templates.render_template(TEMPLATE, values))


def render_action_job(request: dict[str, Any], staging_map: dict[str, Any], **options: Any) -> str:
    """The Job manifest for an action request, as YAML (see render.to_yaml); `options` are
    those of render_action_objects."""
    from kubectl_tao.manifests.render import to_yaml

    return to_yaml(render_action_objects(request, staging_map, **options))
