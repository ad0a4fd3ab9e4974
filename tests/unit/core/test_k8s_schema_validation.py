"""Every rendered variant against the Kubernetes OpenAPI schemas (kubernetes-validate, strict, offline)."""

from __future__ import annotations

import json

import pytest

from kubectl_tao.manifests import action, render

kubernetes_validate = pytest.importorskip("kubernetes_validate")
from kubernetes_validate import utils as kv_utils  # noqa: E402
from support import FIXTURES as FIXTURES_ROOT  # noqa: E402

FIXTURES = FIXTURES_ROOT / "action"
WANTED = "1.36"


def kubernetes_version() -> str:
    """1.36 when the installed kubernetes-validate ships it, else the newest >= 1.33 it has."""
    available = sorted({tuple(int(p) for p in v.split(".")[:2]) for v in kv_utils.all_versions()})
    wanted = tuple(int(p) for p in WANTED.split("."))
    if wanted in available:
        return WANTED
    usable = [v for v in available if v >= (1, 33)]
    if not usable:
        pytest.skip("kubernetes-validate has no schemas for Kubernetes >= 1.33")
    return ".".join(map(str, usable[-1]))


VERSION = kubernetes_version()
BASE = {"image": "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt", "command": "dino train -e /workspace/s.yaml"}

VARIANTS = {
    "single-tier-a": {"record_id": "dino-train-1a2b3c", "pvc": "tao-data", "gpus": 8},
    "single-gpus-0": {"record_id": "smoke-1", "pvc": "tao-data", "gpus": 0},
    "single-everything": {
        "record_id": "Dino_Train-1a2b3c",
        "pvc": "tao-data",
        "env_secret": "tao-creds-x",
        "image_pull_secret": "ngc-pull",
        "ttl_seconds": None,
        "shm_size": "64Gi",
        "labels": ["team=vision"],
        "annotations": ["kwok.x-k8s.io/outcome=oomkilled"],
        "node_selector": ["nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"],
        "tolerations": ["nvidia.com/gpu:NoSchedule", "dedicated=ml:NoExecute"],
        "active_deadline_seconds": 3600,
        "queue_name": "team-a",
        "backoff_limit": 1,
        "nccl_socket_ifname": "eth0",
    },
    "single-tier-c": {
        "record_id": "dino-train-1a2b3c",
        "storage_tier": "C",
        "s3_inputs": ["s3://bkt/data/", "s3://bkt/spec.yaml"],
        "s3_output": "s3://bkt/results",
        "upload_excludes": ["*.tmp"],
        "env_secret": "tao-creds-x",
    },
    "indexed-tao": {"record_id": "dino-train-1a2b3c", "pvc": "shared", "gpus": 8, "nodes": 4},
    "indexed-torchrun-nccl": {
        "name": "ddp-demo",
        "command": "train.py --epochs 3",
        "pvc": "shared",
        "gpus": 4,
        "nodes": 2,
        "launcher": "torchrun",
        "master_port": 23456,
        "nccl_socket_ifname": "^docker,lo",
        "nccl_ib_hca": "mlx5_0:1,mlx5_1:1",
    },
    "indexed-queue-retries": {
        "record_id": "dino-train-1a2b3c",
        "pvc": "shared",
        "nodes": 3,
        "queue_name": "gpu-queue",
        "retries_per_index": 2,
        "rendezvous_timeout_seconds": 0,
        "env_secret": "tao-creds-x",
        "image_pull_secret": "ngc-pull",
    },
}


def validate_all(objects):
    for obj in objects:
        # Round-trip through JSON, as kubectl would see it.
        kv_utils.validate(json.loads(json.dumps(obj)), VERSION, strict=True)


def test_the_schema_version_in_use():
    assert tuple(int(p) for p in VERSION.split(".")) >= (1, 33)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_job_variants_are_valid_kubernetes(variant):
    objects = render.render(render.spec_from_options(**{**BASE, **VARIANTS[variant]}))
    validate_all(objects)


def test_the_validator_does_catch_a_broken_job():
    (job,) = render.render(render.spec_from_options(**{**BASE, **VARIANTS["single-tier-a"]}))
    job["spec"]["template"]["spec"]["containers"][0]["bogusField"] = 1
    with pytest.raises(kv_utils.ValidationError):
        validate_all([job])


def _config_case(tmp_path, name):
    request = json.loads((FIXTURES / name).read_text())
    config = action.materialize_config(request, tmp_path)
    sources = [{"source": m["source"], "sub_path": f"s{i}"} for i, m in enumerate(request["mounts"])]
    sources.append({"source": str(config), "sub_path": "config/" + config.name})
    return request, {"schema_version": "1", "sources": sources}, config


def test_action_args_mode_is_valid_kubernetes():
    request = json.loads((FIXTURES / "request-args.json").read_text())
    staging = json.loads((FIXTURES / "staging-args.json").read_text())
    validate_all(
        action.render_action_objects(
            request, staging, job_id="dino-train-1", pvc_claim="p", credential_secret="s", image_pull_secret="ngc"
        )
    )


def test_action_job_with_every_placement_flag_is_valid_kubernetes():
    request = json.loads((FIXTURES / "request-args.json").read_text())
    staging = json.loads((FIXTURES / "staging-args.json").read_text())
    placement = action.Placement(
        labels={"team": "vision"},
        annotations={"note": "x"},
        node_selector={"pool": "a100"},
        tolerations=({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},),
        active_deadline_seconds=600,
        queue_name="gpu-queue",
    )
    validate_all(
        action.render_action_objects(
            request, staging, job_id="dino-train-1", pvc_claim="p", credential_secret="s", ttl_seconds=None,
            placement=placement,
        )
    )


@pytest.mark.parametrize("name", ["request-config.json", "request-config-shell.json"])
def test_action_config_modes_are_valid_kubernetes(tmp_path, name):
    request, staging, config = _config_case(tmp_path, name)
    validate_all(action.render_action_objects(request, staging, job_id="Cfg_1", pvc_claim="p", config_source=config))
