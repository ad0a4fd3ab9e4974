"""Turn the job flags into a validated submit Plan: every file read and every value checked before any
cluster call, so bad input exits 2 with nothing created."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from .errors import UsageError
from .submit import Plan

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
TIERS = ("A", "C")


def read_credentials(
    env_file: str | None, env_names: list[str] | None, *, stdin_text: str | None = None
) -> dict[str, str]:
    """Credentials for the per-job Secret: an env-file (or '-' for stdin) plus named environment variables.
    Values are never echoed: errors name the file, line or variable only."""
    from .envfile import map_legacy_s3_names, parse_env_file

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
    for name in env_names or []:
        from .names import validate_env_name

        validate_env_name(name, "--env")
        if name not in os.environ:
            raise UsageError(f"--env {name}: the variable is not set in your environment; export it or use --env-file")
        if name in creds:
            raise UsageError(f"--env {name}: also given in --env-file; give it once")
        creds[name] = os.environ[name]
    for name, value in creds.items():
        if "\n" in value or "\x00" in value:
            raise UsageError(f"credential {name}: values cannot contain newlines or NUL")
    return map_legacy_s3_names(creds) if creds else creds


def _load_json(path: str | None, flag: str) -> dict[str, Any]:
    from .action import load_json_object

    if not path:
        raise UsageError(f"{flag} is required with --action-request")
    return load_json_object(Path(path), flag.lstrip("-").replace("-", " "))


def build(job: dict[str, Any], namespace: str, credentials: dict[str, str]) -> Plan:
    if job.get("action_request"):
        return _action_plan(job, namespace, credentials)
    return _spec_plan(job, namespace, credentials)


def _common_checks(job: dict[str, Any]) -> None:
    tier = str(job.get("storage_tier") or "A").upper()
    if tier not in TIERS:
        raise UsageError(f"--storage-tier {job.get('storage_tier')!r}: use A (a bound PVC) or C (S3 in the pod)")
    from .names import require_ascii_name

    for flag, example in (("network_arch", "dino"), ("action", "train")):
        value = job.get(flag) or ""
        if not value or any(ch.isspace() for ch in value) or len(value) > 40:
            raise UsageError(f"--{flag.replace('_', '-')}: give a short word without spaces (e.g. dino, train)")
        require_ascii_name(value, f"--{flag.replace('_', '-')}", example=example)


def _spec_plan(job: dict[str, Any], namespace: str, credentials: dict[str, str]) -> Plan:
    from . import render
    from .names import is_under, kubernetes_job_name, secret_name_for
    from .records import normalize_results_dir, preview_id

    _common_checks(job)
    if not job.get("image"):
        raise UsageError("--image is required (or --action-request)")
    if not job.get("command"):
        raise UsageError("--command is required (or --action-request)")
    tier = str(job["storage_tier"]).upper()
    gpus, nodes = int(job["gpus"]), int(job["nodes"])
    existing_secret = job.get("env_secret")
    if existing_secret and credentials:
        raise UsageError("--env-secret names an existing Secret: give it or --env-file/--env, not both")
    node_selector = list(job.get("node_selector") or [])
    if job.get("gpu_product"):
        node_selector.append(f"nvidia.com/gpu.product={job['gpu_product']}")
    tolerations: list[Any] = list(job.get("toleration") or [])
    if gpus > 0:
        tolerations.append(GPU_TOLERATION)
    mount = job.get("mount_path") or "/workspace"
    results_dir = job.get("results_dir")
    results_root = None
    if results_dir:
        results_dir = normalize_results_dir(results_dir)
    elif tier == "C":
        if not job.get("s3_output"):
            raise UsageError("--storage-tier C needs --s3-output s3://BUCKET/PREFIX (or --results-dir s3://...)")
        results_root = str(job["s3_output"]).rstrip("/")
    else:
        results_root = mount.rstrip("/") + "/results"
    if results_dir and tier == "A" and not results_dir.startswith("s3://") and not is_under(results_dir, mount):
        raise UsageError(
            f"--results-dir {results_dir}: must be on the mounted volume (under --mount-path {mount}) or an s3:// "
            "prefix, so results survive the pod"
        )
    probe_id = preview_id(job["network_arch"], job["action"])

    def results_for(record_id: str) -> str:
        return results_dir or f"{results_root}/{record_id}"

    def spec_results(record_id: str) -> str | None:
        # Tier C uploads to <s3-output>/<record id>/ on its own; the spec takes the prefix, not a results dir.
        return None if tier == "C" and not results_dir else results_for(record_id)

    ttl = None if job.get("keep_until_captured") else int(job["ttl_seconds"])
    base = dict(
        image=job["image"],
        command=job["command"],
        namespace=namespace,
        gpus=gpus,
        nodes=nodes,
        storage_tier=tier,
        pvc=job.get("pvc"),
        mount_path=mount,
        image_pull_secret=job.get("image_pull_secret"),
        ttl_seconds=ttl,
        shm_size=job["shm_size"],
        s3_inputs=list(job.get("s3_input") or []),
        s3_output=job.get("s3_output"),
        upload_excludes=list(job.get("upload_exclude") or []),
        labels=list(job.get("label") or []),
        annotations=list(job.get("annotation") or []),
        master_port=int(job["master_port"]),
        launcher=job["launcher"],
        nccl_socket_ifname=job.get("nccl_socket_ifname"),
        nccl_ib_hca=job.get("nccl_ib_hca"),
        active_deadline_seconds=job.get("active_deadline"),
        node_selector=node_selector,
        tolerations=tolerations,
        queue_name=job.get("queue"),
        retries_per_index=job.get("retries_per_index"),
        rendezvous_timeout_seconds=int(job["rendezvous_timeout"]),
    )
    probe_name = kubernetes_job_name(probe_id)
    spec = render.spec_from_options(
        name=probe_name,
        record_id=probe_id,
        results_dir=spec_results(probe_id),
        env_secret=existing_secret or (secret_name_for(probe_name) if credentials else None),
        **base,
    )
    warnings = render.warnings_for(spec)

    def render_objects(job_name: str, record_id: str, secret: str | None) -> list[dict[str, Any]]:
        final = render.with_overrides(
            spec,
            name=job_name,
            record_id=record_id,
            results_dir=spec_results(record_id),
            env_secret=existing_secret or secret,
        )
        return render.render(final)

    min_version = None
    feature = ""
    if job.get("retries_per_index") is not None:
        min_version, feature = (1, 29), "--retries-per-index"
    elif nodes > 1:
        min_version, feature = (1, 28), "multi-node jobs"
    record = {
        "platform": "kubernetes",
        "image": job["image"],
        "network_arch": job["network_arch"],
        "action": job["action"],
        "storage_tier": tier,
        "upload_excludes": list(job.get("upload_exclude") or []),
    }
    if results_dir:
        record["results_dir"] = results_dir
    else:
        record["results_root"] = results_root
    return Plan(
        record=record,
        render=render_objects,
        image=job["image"],
        gpus=gpus,
        nodes=nodes,
        credentials=credentials,
        pvc=job.get("pvc") if tier == "A" else None,
        secret_refs={existing_secret: []} if existing_secret else {},
        image_pull_secret=job.get("image_pull_secret"),
        node_selector=dict(item.split("=", 1) for item in node_selector),
        tolerations=[t for t in spec.tolerations],
        gpu_product=job.get("gpu_product"),
        min_version=min_version,
        min_version_feature=feature,
        warnings=warnings,
        patches_job=bool(job.get("keep_until_captured")),
    )


def _action_plan(job: dict[str, Any], namespace: str, credentials: dict[str, str]) -> Plan:
    from .action import render_action_objects, validate_request
    from .names import kubernetes_job_name, secret_name_for
    from .records import normalize_results_dir, preview_id

    _common_checks(job)
    if job.get("image") or job.get("command"):
        raise UsageError("--action-request carries its own image and command; drop --image/--command")
    if not job.get("pvc"):
        raise UsageError("--action-request needs --pvc (the claim holding the staged sources)")
    request = _load_json(job["action_request"], "--action-request")
    staging = _load_json(job.get("staging_map"), "--staging-map")
    validate_request(request)
    forward = list(request.get("forward_env") or [])
    missing = [name for name in forward if name not in credentials]
    if missing:
        raise UsageError(
            f"request.forward_env needs {', '.join(missing)}: pass them with --env-file or --env (values never on "
            "the command line)"
        )
    creds = {name: credentials[name] for name in forward}
    bundle = request.get("spec_bundle") or {}
    image = str(bundle.get("image") or "")
    gpus = int((bundle.get("compute_shape") or {}).get("gpus") or 0)
    if not job.get("results_dir"):
        raise UsageError("--action-request needs --results-dir (a mounted path or s3:// prefix for the record)")
    results_dir = normalize_results_dir(job["results_dir"])
    ttl = int(job["ttl_seconds"])

    def render_objects(job_name: str, record_id: str, secret: str | None) -> list[dict[str, Any]]:
        objects = render_action_objects(
            request,
            staging,
            job_id=record_id,
            namespace=namespace,
            pvc_claim=job["pvc"],
            credential_secret=secret if forward else None,
            image_pull_secret=job.get("image_pull_secret"),
            config_source=job.get("config_source"),
            ttl_seconds=ttl,
            shm_size=job["shm_size"],
        )
        if objects and objects[0]["metadata"]["name"] != job_name:
            raise UsageError(f"action renderer named the Job {objects[0]['metadata']['name']}, expected {job_name}")
        return objects

    probe = preview_id(job["network_arch"], job["action"])
    render_objects(kubernetes_job_name(probe), probe, secret_name_for(kubernetes_job_name(probe)) if creds else None)
    return Plan(
        record={
            "platform": "kubernetes",
            "image": image,
            "network_arch": job["network_arch"],
            "action": job["action"],
            "storage_tier": "A",
            "results_dir": results_dir,
            "upload_excludes": [],
        },
        render=render_objects,
        image=image,
        gpus=gpus,
        nodes=1,
        credentials=creds,
        pvc=job["pvc"],
        image_pull_secret=job.get("image_pull_secret"),
        tolerations=[GPU_TOLERATION] if gpus > 0 else [],
    )
