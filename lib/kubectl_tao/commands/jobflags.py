"""The flags that shape a job, shared by `submit` and `render` (render prints what submit would apply)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class Flag:
    """One job flag, free of typer: its spellings, default, kind and help. Kinds: "text" (a string, default
    None), "word" (a string with a default), "int", "optint" (an integer, default None), "many" (a repeatable
    string, a list or None) and "switch" (a boolean flag, default False)."""

    __slots__ = ("default", "help", "kind", "names")

    def __init__(self, default: Any, *names: str, help: str, kind: str = "text") -> None:
        self.names, self.default, self.kind, self.help = names, default, kind, help


JOB_FLAG_SPECS: dict[str, Flag] = {
    "image": Flag(None, "--image", help="Container image (e.g. nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt)."),
    "command": Flag(None, "--command", help="Command run by /bin/sh -c in the container (your own text)."),
    "gpus": Flag(1, "--gpus", help="nvidia.com/gpu per node (0 = lifecycle-only run, no GPU).", kind="int"),
    "nodes": Flag(1, "--nodes", help="Nodes; > 1 gives an Indexed Job plus a headless Service.", kind="int"),
    "network_arch": Flag(
        "custom", "--network-arch", help="TAO network architecture (record field, id prefix).", kind="word"
    ),
    "action": Flag("run", "--action", help="TAO action, e.g. train (record field, id part).", kind="word"),
    "storage_tier": Flag(
        "A", "--storage-tier", help="A: a bound PVC (default); C: S3 fetch/upload in the pod.", kind="word"
    ),
    "pvc": Flag(None, "--pvc", help="PersistentVolumeClaim mounted at --mount-path (tier A)."),
    "mount_path": Flag("/workspace", "--mount-path", help="Where the volume is mounted in the pod.", kind="word"),
    "results_dir": Flag(
        None,
        "--results-dir",
        help="Results directory on the volume, or an s3:// prefix (default: <mount-path>/results/<record id>).",
    ),
    "env_file": Flag(None, "--env-file", help="KEY=VALUE file ('-' = stdin) for the per-job credential Secret."),
    "env": Flag(
        None, "--env", help="Credential NAME taken from your environment into the Secret (repeat).", kind="many"
    ),
    "env_secret": Flag(
        None,
        "--env-secret",
        help="Existing Secret whose keys become the pod's environment (instead of --env-file/--env).",
    ),
    "image_pull_secret": Flag(None, "--image-pull-secret", help="Existing image-pull Secret for the registry."),
    "ttl_seconds": Flag(3600, "--ttl-seconds", help="ttlSecondsAfterFinished (0..604800).", kind="int"),
    "shm_size": Flag("16Gi", "--shm-size", help="/dev/shm size (memory emptyDir).", kind="word"),
    "s3_input": Flag(
        None, "--s3-input", help="Tier C: s3:// object or prefix/ fetched before the run (repeat).", kind="many"
    ),
    "s3_output": Flag(None, "--s3-output", help="Tier C: s3:// prefix results are uploaded to."),
    "upload_exclude": Flag(None, "--upload-exclude", help="Glob left out of the tier C upload (repeat).", kind="many"),
    "s3_tools_image": Flag(
        None,
        "--s3-tools-image",
        help="Tier C: image of the fetch-inputs step, with `aws` on PATH [amazon/aws-cli, AWS CLI v2].",
    ),
    "launcher": Flag("tao", "--launcher", help="Multi-node: tao (env rendezvous) or torchrun.", kind="word"),
    "master_port": Flag(29500, "--master-port", help="Multi-node rendezvous port.", kind="int"),
    "rendezvous_timeout": Flag(
        300,
        "--rendezvous-timeout",
        help="Multi-node: seconds each rank waits for its peers before exiting 88 (0 = no barrier).",
        kind="int",
    ),
    "nccl_socket_ifname": Flag(None, "--nccl-socket-ifname", help="NCCL_SOCKET_IFNAME for multi-NIC nodes."),
    "nccl_ib_hca": Flag(None, "--nccl-ib-hca", help="NCCL_IB_HCA for RDMA nodes."),
    "nccl_env": Flag(
        None,
        "--nccl-env",
        help="NCCL_NAME=VALUE in every rank, e.g. NCCL_IB_DISABLE=1 (repeat; overrides a cached probe's setting).",
        kind="many",
    ),
    "gpu_product": Flag(None, "--gpu-product", help="Only nodes labelled nvidia.com/gpu.product=VALUE."),
    "node_selector": Flag(
        None, "--node-selector", help="KEY=VALUE node label the pods require (repeat).", kind="many"
    ),
    "toleration": Flag(None, "--toleration", help="KEY[=VALUE][:EFFECT] taint to tolerate (repeat).", kind="many"),
    "queue": Flag(None, "--queue", help="Kueue LocalQueue: the Job is created suspended and admitted whole."),
    "gang": Flag(
        "auto",
        "--gang",
        help="Multi-node: auto (native gang scheduling where the API server has it), native (require it) or off.",
        kind="word",
    ),
    "retries_per_index": Flag(
        None, "--retries-per-index", help="backoffLimitPerIndex (k8s >= 1.29); OOMKilled still fails fast.",
        kind="optint",
    ),
    "active_deadline": Flag(
        None, "--active-deadline-seconds", help="Fail the Job after this many seconds.", kind="optint"
    ),
    "annotation": Flag(None, "--annotation", help="KEY=VALUE pod annotation (repeat).", kind="many"),
    "label": Flag(None, "--label", help="KEY=VALUE pod label (repeat).", kind="many"),
    "action_request": Flag(None, "--action-request", help="Action request v1 JSON (instead of --image/--command)."),
    "staging_map": Flag(None, "--staging-map", help="Staging map v1 JSON for --action-request."),
    "config_source": Flag(None, "--config-source", help="Materialized config file (mode=config requests)."),
    "keep_until_captured": Flag(
        False,
        "--keep-until-captured",
        help="Create the Job without a TTL and set it once its history is captured.",
        kind="switch",
    ),
}


def job_defaults() -> dict[str, Any]:
    """Every job flag at its default, as the verbs receive them when none is given."""
    return {key: flag.default for key, flag in JOB_FLAG_SPECS.items()}


@functools.cache
def typer_options() -> dict[str, tuple[Any, Any]]:
    """The job flags as typer parameters: key -> (annotation, typer.Option)."""
    import typer

    annotations: dict[str, Any] = {
        "text": str | None, "word": str, "int": int, "optint": int | None, "many": list[str] | None, "switch": bool
    }
    return {
        key: (annotations[flag.kind], typer.Option(flag.default, *flag.names, help=flag.help))
        for key, flag in JOB_FLAG_SPECS.items()
    }


def _given_on_command_line() -> set[str]:
    """The job flags the user set (a flag left at its default may still be refused where it cannot apply)."""
    import click
    from click.core import ParameterSource

    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return set()
    return {key for key in JOB_FLAG_SPECS if ctx.get_parameter_source(key) not in (None, ParameterSource.DEFAULT)}


def with_job_flags(func: F) -> F:
    """Add every job flag to a verb; the verb receives them packed as `job: dict`."""
    import inspect  # here: the hand-parsed submit (commands/fastpath.py) imports this module too

    signature = inspect.signature(func)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        job = {key: kwargs.pop(key) for key in JOB_FLAG_SPECS}
        job["given"] = _given_on_command_line()
        return func(*args, job=job, **kwargs)

    params = [p for p in signature.parameters.values() if p.name != "job"]
    options = typer_options()
    extra = [
        inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation)
        for key, (annotation, option) in options.items()
    ]
    wrapper.__signature__ = signature.replace(parameters=[*params, *extra])  # type: ignore[attr-defined]
    annotations = {k: v for k, v in func.__annotations__.items() if k != "job"}
    wrapper.__annotations__ = {**annotations, **{key: ann for key, (ann, _) in options.items()}}
    return wrapper  # type: ignore[return-value]


def probe_settings(job: dict[str, Any], server: str) -> tuple[dict[str, str], str]:
    """For a multi-node job: the NCCL settings this cluster's last probe passed with (read from the local
    probe cache, no cluster call), and when; nothing otherwise."""
    if job.get("action_request") or int(job.get("nodes") or 1) <= 1:
        return {}, ""
    from kubectl_tao.store.probecache import cached_settings

    return cached_settings(server)
