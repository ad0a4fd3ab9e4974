"""THE one table of the job flags: the flags that shape a job (their spellings, defaults, kinds and help).

`submit` and `render` take exactly these flags (commands/jobflags.py builds their click options from it);
jobs/flags.job_request types their values into a JobRequest; `resubmit` checks a kept request against it; a
workflow step's keys are their names. Plain data, so listing the verbs (`--help`) imports nothing else.
"""

from __future__ import annotations

from typing import Any


class Flag:
    """One job flag: its spellings, default, kind and help. Kinds: "text" (a string, default None), "word" (a
    string with a default), "int", "optint" (an integer, default None), "many" (a repeatable string: a tuple,
    empty when not given) and "switch" (a boolean flag, default False)."""

    __slots__ = ("default", "help", "kind", "names")

    def __init__(self, default: Any, *names: str, help: str, kind: str = "text") -> None:
        self.names, self.default, self.kind, self.help = names, default, kind, help


JOB_FLAGS: dict[str, Flag] = {
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
    "topology": Flag(None, "--topology", help="Every rank in one domain of node label LABEL (LABEL:preferred: close)."),
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
    "max_restarts": Flag(
        0,
        "--max-restarts",
        help="Multi-node: restart every rank in place up to N times when a rank crashes (0 = never; "
        "docs/restarts.md).",
        kind="int",
    ),
    "termination_grace_period": Flag(
        None,
        "--termination-grace-period",
        help="Seconds a rank has to save a checkpoint after SIGTERM (default: 120 with --max-restarts, else 30).",
        kind="optint",
    ),
    "stall_timeout": Flag(
        None,
        "--stall-timeout",
        help="End the program when neither its output nor a status.json under its results grows for this long "
        "(e.g. 30m; off by default; docs/progress.md).",
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
    "no_flight_recorder": Flag(
        False,
        "--no-flight-recorder",
        help="Multi-node torchrun: leave out PyTorch's NCCL flight recorder (on by default; dumps on a timeout).",
        kind="switch",
    ),
}
