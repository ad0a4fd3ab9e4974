"""The one Job value: every job flag reaches what the job is (its rendered objects, what the gates are asked, its
record or its credentials) through plan.build; the Job cannot be changed in place; the gates are asked about a
built Job and about the shape preflight and fit are told in the same way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import FIXTURES

from kubectl_tao.core.flagtable import JOB_FLAGS
from kubectl_tao.core.valueclass import plain
from kubectl_tao.gates.gaterequest import FIT, PREFLIGHT, SUBMIT, GateRequest, asked
from kubectl_tao.jobs.flags import job_request
from kubectl_tao.jobs.plan import GPU_TOLERATION, build, job_spec, read_credentials, shape
from kubectl_tao.manifests.action import config_document

BASE = {
    "image": "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt",
    "command": "dino train -e /workspace/spec.yaml",
    "pvc": "tao-data",
    "gpus": 8,
    "nodes": 2,
}
TIER_C = {"storage_tier": "C", "pvc": None, "s3_output": "s3://tao-bucket/out", "nodes": 1}
TORCHRUN = {"launcher": "torchrun"}
ACTION = {
    "image": None, "command": None, "gpus": 1, "nodes": 1, "results_dir": "/workspace/results/run-1",
    "action_request": "REQUEST", "staging_map": "STAGING", "env_secret": "existing-creds",
}
CONFIG = {**ACTION, "action_request": "CONFIG_REQUEST", "staging_map": "CONFIG_STAGING", "env_secret": None,
          "config_source": "CONFIG", "results_dir": "/workspace/results/run-2"}


class With:
    """A sample value that needs other flags changed with it (tier C takes no claim and needs an S3 prefix)."""

    def __init__(self, value: Any, **others: Any) -> None:
        self.value, self.others = value, others


# key -> (the flags both jobs get besides BASE, the value only the second gets). The value is one `submit`
# accepts; the flags beside it make it one that applies (tier C for the S3 flags, an action request for its own).
SAMPLES: dict[str, tuple[dict[str, Any], Any]] = {
    "image": ({}, "nvcr.io/nvidia/pytorch:24.01-py3"),
    "command": ({}, "python train.py --epochs 3"),
    "gpus": ({}, 4),
    "nodes": ({}, 3),
    "network_arch": ({}, "yolo_v4"),
    "action": ({}, "evaluate"),
    "storage_tier": ({"nodes": 1}, With("C", pvc=None, s3_output="s3://tao-bucket/out")),
    "pvc": ({}, "other-claim"),
    "mount_path": ({}, "/data"),
    "results_dir": ({}, "/workspace/elsewhere"),
    "env_file": ({}, "ENV_FILE"),  # the path of a file written by the test
    "env": ({}, ("TAO_TEST_TOKEN",)),
    "env_secret": ({}, "existing-creds"),
    "image_pull_secret": ({}, "regcred"),
    "ttl_seconds": ({}, 60),
    "shm_size": ({}, "1Gi"),
    "s3_input": (TIER_C, ("s3://tao-bucket/in",)),
    "s3_output": (TIER_C, "s3://tao-bucket/other"),
    "upload_exclude": (TIER_C, ("*.tmp",)),
    "s3_tools_image": (TIER_C, "amazon/aws-cli:2.15.0"),
    "launcher": ({}, "torchrun"),
    "master_port": ({}, 29600),
    "rendezvous_timeout": ({}, 100),
    "nccl_socket_ifname": ({}, "eth0"),
    "nccl_ib_hca": ({}, "mlx5_0"),
    "nccl_env": ({}, ("NCCL_DEBUG=INFO",)),
    "gpu_product": ({}, "NVIDIA-H100-80GB-HBM3"),
    "node_selector": ({}, ("pool=gpu",)),
    "toleration": ({}, ("team=a:NoSchedule",)),
    "queue": ({}, "team-queue"),
    "topology": ({}, "topology.kubernetes.io/zone"),
    "gang": ({}, "off"),
    "retries_per_index": ({}, 2),
    "max_restarts": ({}, 2),
    "termination_grace_period": ({}, 30),
    "stall_timeout": ({}, "10m"),
    "active_deadline": ({}, 600),
    "annotation": ({}, ("note=hello",)),
    "label": ({}, ("team=vision",)),
    "action_request": (ACTION, "OTHER_REQUEST"),
    "staging_map": (ACTION, "OTHER_STAGING"),
    # a config request cannot go without its config: the other one is staged at another place
    "config_source": (CONFIG, With("OTHER_CONFIG", staging_map="OTHER_CONFIG_STAGING")),
    "keep_until_captured": ({}, True),
    "no_flight_recorder": (TORCHRUN, True),
}


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The files the samples name: an env file, two action requests and staging maps, a config request."""
    action = FIXTURES / "action"
    request = json.loads((action / "request-args.json").read_text(encoding="utf-8"))
    other = json.loads(json.dumps(request))
    other["spec_bundle"]["command"] = "dino evaluate"
    staging = json.loads((action / "staging-args.json").read_text(encoding="utf-8"))
    other_staging = json.loads(json.dumps(staging))
    other_staging["sources"][0]["sub_path"] = "jobs/run-2/coco"
    config = json.loads((action / "request-config.json").read_text(encoding="utf-8"))
    content, _, _ = config_document(config["spec_bundle"])
    paths = {}
    for name in ("CONFIG", "OTHER_CONFIG"):  # two copies of the materialized config, both staged
        path = tmp_path / f"{name.lower()}.yaml"
        path.write_text(content, encoding="utf-8")
        paths[name] = str(path)
    staged = [{"source": "/data/coco", "sub_path": "jobs/run-2/coco"},
              {"source": "/data/results", "sub_path": "jobs/run-2/results"}]
    config_staging = {"schema_version": "1", "sources": [
        *staged, {"source": paths["CONFIG"], "sub_path": "jobs/run-2/spec-a.yaml"}]}
    other_config_staging = {"schema_version": "1", "sources": [
        *staged, {"source": paths["OTHER_CONFIG"], "sub_path": "jobs/run-2/spec-b.yaml"}]}
    written = {
        "REQUEST": request, "OTHER_REQUEST": other, "STAGING": staging, "OTHER_STAGING": other_staging,
        "CONFIG_REQUEST": config, "CONFIG_STAGING": config_staging, "OTHER_CONFIG_STAGING": other_config_staging,
    }
    for name, document in written.items():
        path = tmp_path / f"{name.lower()}.json"
        path.write_text(json.dumps(document), encoding="utf-8")
        paths[name] = str(path)
    env_file = tmp_path / "job.env"
    env_file.write_text("HF_TOKEN=hf_placeholder\n", encoding="utf-8")
    paths["ENV_FILE"] = str(env_file)
    monkeypatch.setenv("TAO_TEST_TOKEN", "placeholder")
    return paths


def _flags(files: dict[str, str], values: dict[str, Any]) -> dict[str, Any]:
    flags = {**BASE, **values}
    for key, value in values.items():
        if isinstance(value, With):
            flags.update({key: value.value, **value.others})
    for key in ("env_file", "action_request", "staging_map", "config_source"):
        if flags.get(key) in files:
            flags[key] = files[flags[key]]
    return flags


def _what_the_job_is(files: dict[str, str], values: dict[str, Any]) -> dict[str, Any]:
    """Everything a job flag can reach: the objects (for one name, record id and Secret), what the gates are
    asked, the record's fields and the credentials' names."""
    request = job_request(**_flags(files, values))
    credentials = read_credentials(request.env_file, list(request.env))
    job = build(request, "ns", credentials)
    return {
        "objects": job.render("rec-1", "rec-1", "tao-creds-rec-1" if credentials else None),
        "gates": plain(asked(SUBMIT, "ns", job)),
        "record": job.record,
        "credentials": sorted(credentials),
    }


def test_every_job_flag_has_a_sample() -> None:
    assert set(SAMPLES) == set(JOB_FLAGS)


@pytest.mark.parametrize("key", sorted(SAMPLES))
def test_every_job_flag_reaches_what_the_job_is(key: str, files: dict[str, str]) -> None:
    beside, value = SAMPLES[key]
    without = _what_the_job_is(files, beside)
    given = _what_the_job_is(files, {**beside, key: value})
    flag = JOB_FLAGS[key].names[0]
    assert given != without, f"{flag} reaches neither the objects, the gates, the record nor the Secret"


def test_the_job_cannot_be_changed_in_place(files: dict[str, str]) -> None:
    job = build(job_request(**BASE), "ns", {})
    with pytest.raises(AttributeError, match="frozen Job"):
        job.require_fit_now = True  # type: ignore[misc]
    changed = job.replaced(require_fit_now=True)
    assert changed.require_fit_now is True and job.require_fit_now is False


def test_the_gates_are_asked_every_field_of_the_job_by_its_own_name() -> None:
    job = build(job_request(**BASE, queue="team-queue", keep_until_captured=True), "ns", {"HF_TOKEN": "x"})
    request = asked(SUBMIT, "ns", job, server="https://api:6443")
    for name in GateRequest._fields:
        if name == "credentials":
            assert request.credentials is True
        elif hasattr(job, name):
            assert getattr(request, name) == getattr(job, name), name
    assert (request.verb, request.namespace, request.server) == (SUBMIT, "ns", "https://api:6443")
    assert request.patches_job and request.queue == "team-queue" and request.min_version == (1, 28)


def test_a_shape_asks_the_gates_as_a_built_job_of_that_shape_does() -> None:
    built = build(job_request(**{**BASE, "gpu_product": "NVIDIA-H100-80GB-HBM3", "queue": "q"}), "ns", {})
    told = shape(8, 2, gpu_product="NVIDIA-H100-80GB-HBM3", queue="q", pvc="tao-data",
                 node_selector=dict(built.node_selector))
    ask_built, ask_told = plain(asked(PREFLIGHT, "ns", built)), plain(asked(PREFLIGHT, "ns", told))
    differ = {name for name in ask_built if ask_built[name] != ask_told[name]}
    assert differ == {"image"}  # a shape has no image; its GPU toleration, version and claim are a job's
    assert GPU_TOLERATION in told.tolerations
    assert asked(FIT, "ns", shape(0, 1)).tolerations == []
    with pytest.raises(ValueError, match="shape alone"):
        told.render("j", "j", None)


def test_job_spec_is_what_the_job_renders() -> None:
    from kubectl_tao.manifests import render

    request = job_request(**BASE, label=("team=vision",), s3_tools_image=None)
    built = build(request, "ns", {})
    spec = job_spec(request, "ns", name="j", record_id="rec-1", results_dir="/workspace/results/rec-1")
    assert render.render(spec) == built.render("j", "rec-1", None)
