"""The flags that shape a job, shared by `submit` and `render` (render prints what submit would apply)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import typer

F = TypeVar("F", bound=Callable[..., Any])


def _opt(default: Any, *names: str, help: str, annotation: Any = str | None, **kw: Any) -> tuple[Any, Any]:
    return annotation, typer.Option(default, *names, help=help, **kw)


JOB_FLAGS: dict[str, tuple[Any, Any]] = {
    "image": _opt(None, "--image", help="Container image (e.g. nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt)."),
    "command": _opt(None, "--command", help="Command run by /bin/sh -c in the container (your own text)."),
    "gpus": _opt(1, "--gpus", help="nvidia.com/gpu per node (0 = lifecycle-only run, no GPU).", annotation=int),
    "nodes": _opt(1, "--nodes", help="Nodes; > 1 gives an Indexed Job plus a headless Service.", annotation=int),
    "network_arch": _opt(
        "custom", "--network-arch", help="TAO network architecture (record field, id prefix).", annotation=str
    ),
    "action": _opt("run", "--action", help="TAO action, e.g. train (record field, id part).", annotation=str),
    "storage_tier": _opt(
        "A", "--storage-tier", help="A: a bound PVC (default); C: S3 fetch/upload in the pod.", annotation=str
    ),
    "pvc": _opt(None, "--pvc", help="PersistentVolumeClaim mounted at --mount-path (tier A)."),
    "mount_path": _opt("/workspace", "--mount-path", help="Where the volume is mounted in the pod.", annotation=str),
    "results_dir": _opt(
        None,
        "--results-dir",
        help="Results directory on the volume, or an s3:// prefix (default: <mount-path>/results/<record id>).",
    ),
    "env_file": _opt(None, "--env-file", help="KEY=VALUE file ('-' = stdin) for the per-job credential Secret."),
    "env": _opt(
        None,
        "--env",
        help="Credential NAME taken from your environment into the Secret (repeat).",
        annotation=list[str] | None,
    ),
    "env_secret": _opt(None, "--env-secret", help="Existing Secret whose keys become the pod's environment "
                       "(instead of --env-file/--env)."),
    "image_pull_secret": _opt(None, "--image-pull-secret", help="Existing image-pull Secret for the registry."),
    "ttl_seconds": _opt(3600, "--ttl-seconds", help="ttlSecondsAfterFinished (0..604800).", annotation=int),
    "shm_size": _opt("16Gi", "--shm-size", help="/dev/shm size (memory emptyDir).", annotation=str),
    "s3_input": _opt(
        None,
        "--s3-input",
        help="Tier C: s3:// object or prefix/ fetched before the run (repeat).",
        annotation=list[str] | None,
    ),
    "s3_output": _opt(None, "--s3-output", help="Tier C: s3:// prefix results are uploaded to."),
    "upload_exclude": _opt(
        None, "--upload-exclude", help="Glob left out of the tier C upload (repeat).", annotation=list[str] | None
    ),
    "s3_tools_image": _opt(
        None,
        "--s3-tools-image",
        help="Tier C: image of the fetch-inputs step, with `aws` on PATH [amazon/aws-cli, AWS CLI v2].",
    ),
    "launcher": _opt("tao", "--launcher", help="Multi-node: tao (env rendezvous) or torchrun.", annotation=str),
    "master_port": _opt(29500, "--master-port", help="Multi-node rendezvous port.", annotation=int),
    "rendezvous_timeout": _opt(
        300,
        "--rendezvous-timeout",
        help="Multi-node: seconds each rank waits for its peers before exiting 88 (0 = no barrier).",
        annotation=int,
    ),
    "nccl_socket_ifname": _opt(None, "--nccl-socket-ifname", help="NCCL_SOCKET_IFNAME for multi-NIC nodes."),
    "nccl_ib_hca": _opt(None, "--nccl-ib-hca", help="NCCL_IB_HCA for RDMA nodes."),
    "nccl_env": _opt(
        None,
        "--nccl-env",
        help="NCCL_NAME=VALUE in every rank, e.g. NCCL_IB_DISABLE=1 (repeat; overrides a cached probe's setting).",
        annotation=list[str] | None,
    ),
    "gpu_product": _opt(None, "--gpu-product", help="Only nodes labelled nvidia.com/gpu.product=VALUE."),
    "node_selector": _opt(
        None, "--node-selector", help="KEY=VALUE node label the pods require (repeat).", annotation=list[str] | None
    ),
    "toleration": _opt(
        None, "--toleration", help="KEY[=VALUE][:EFFECT] taint to tolerate (repeat).", annotation=list[str] | None
    ),
    "queue": _opt(None, "--queue", help="Kueue LocalQueue: the Job is created suspended and admitted whole."),
    "gang": _opt(
        "auto",
        "--gang",
        help="Multi-node: auto (native gang scheduling where the API server has it), native (require it) or off.",
        annotation=str,
    ),
    "retries_per_index": _opt(
        None,
        "--retries-per-index",
        help="backoffLimitPerIndex (k8s >= 1.29); OOMKilled still fails fast.",
        annotation=int | None,
    ),
    "active_deadline": _opt(
        None, "--active-deadline-seconds", help="Fail the Job after this many seconds.", annotation=int | None
    ),
    "annotation": _opt(None, "--annotation", help="KEY=VALUE pod annotation (repeat).", annotation=list[str] | None),
    "label": _opt(None, "--label", help="KEY=VALUE pod label (repeat).", annotation=list[str] | None),
    "action_request": _opt(None, "--action-request", help="Action request v1 JSON (instead of --image/--command)."),
    "staging_map": _opt(None, "--staging-map", help="Staging map v1 JSON for --action-request."),
    "config_source": _opt(None, "--config-source", help="Materialized config file (mode=config requests)."),
    "keep_until_captured": _opt(
        False,
        "--keep-until-captured",
        help="Create the Job without a TTL and set it once its history is captured.",
        annotation=bool,
    ),
}


def _given_on_command_line() -> set[str]:
    """The job flags the user set (a flag left at its default may still be refused where it cannot apply)."""
    import click
    from click.core import ParameterSource

    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return set()
    return {key for key in JOB_FLAGS if ctx.get_parameter_source(key) not in (None, ParameterSource.DEFAULT)}


def with_job_flags(func: F) -> F:
    """Add every job flag to a verb; the verb receives them packed as `job: dict`."""
    signature = inspect.signature(func)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        job = {key: kwargs.pop(key) for key in JOB_FLAGS}
        job["given"] = _given_on_command_line()
        return func(*args, job=job, **kwargs)

    params = [p for p in signature.parameters.values() if p.name != "job"]
    extra = [
        inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation)
        for key, (annotation, option) in JOB_FLAGS.items()
    ]
    wrapper.__signature__ = signature.replace(parameters=[*params, *extra])  # type: ignore[attr-defined]
    annotations = {k: v for k, v in func.__annotations__.items() if k != "job"}
    wrapper.__annotations__ = {**annotations, **{key: ann for key, (ann, _) in JOB_FLAGS.items()}}
    return wrapper  # type: ignore[return-value]


def probe_settings(job: dict[str, Any], server: str) -> tuple[dict[str, str], str]:
    """For a multi-node job: the NCCL settings this cluster's last probe passed with (read from the local
    probe cache, no cluster call), and when; nothing otherwise."""
    if job.get("action_request") or int(job.get("nodes") or 1) <= 1:
        return {}, ""
    from kubectl_tao.store.probecache import cached_settings

    return cached_settings(server)
