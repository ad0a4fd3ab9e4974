"""An action-request Job gets what every job gets: each job flag either lands in its Job or is refused
(exit 2, naming the flag); its --results-dir is on a writable mount of the request or s3://; legacy
ACCESS_KEY / SECRET_KEY in an env-file satisfy a forward_env that names them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import FIXTURES as FIXTURES_ROOT

from kubectl_tao.core.errors import UsageError
from kubectl_tao.jobs.flags import job_request
from kubectl_tao.jobs.plan import GPU_TOLERATION, JobRequest, build, read_credentials

FIXTURES = FIXTURES_ROOT / "action"
CREDS = {"HF_TOKEN": "hf_placeholder", "AWS_ACCESS_KEY_ID": "placeholder"}


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    request = json.loads((FIXTURES / "request-args.json").read_text(encoding="utf-8"))
    paths = {"request": tmp_path / "request.json", "staging": tmp_path / "staging.json"}
    paths["request"].write_text(json.dumps(request), encoding="utf-8")
    paths["staging"].write_text((FIXTURES / "staging-args.json").read_text(encoding="utf-8"), encoding="utf-8")
    return {key: str(path) for key, path in paths.items()}


def flags(files: dict[str, str], **over: Any) -> JobRequest:
    base = {
        "action_request": files["request"],
        "staging_map": files["staging"],
        "pvc": "tao-data",
        "results_dir": "/workspace/results/run-1",
        "gpus": 1,  # the flag's default: not given
    }
    return job_request(**{**base, **over})


def job_of(plan: Any, holder: str | None = "tao-creds-j") -> dict[str, Any]:
    [job] = plan.render("j", "j", holder)
    return job


def test_scheduling_and_metadata_flags_reach_the_action_job(files: dict[str, str]) -> None:
    plan = build(
        flags(
            files,
            node_selector=["pool=a100"],
            gpu_product="NVIDIA-A100-SXM4-80GB",
            toleration=["sku=gpu:NoSchedule"],
            label=["team=vision"],
            annotation=["note=hello"],
            active_deadline=600,
            queue="gpu-queue",
            upload_exclude=["*.tmp"],
        ),
        "ns",
        CREDS,
    )
    job = job_of(plan)
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "a100", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    assert {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"} in pod["tolerations"]
    assert GPU_TOLERATION in pod["tolerations"], "a GPU request must tolerate the usual nvidia.com/gpu taint"
    assert job["metadata"]["labels"]["team"] == "vision"
    assert job["spec"]["template"]["metadata"]["labels"]["team"] == "vision"
    assert job["spec"]["template"]["metadata"]["annotations"]["note"] == "hello"
    assert job["spec"]["activeDeadlineSeconds"] == 600
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-queue"
    assert "kueue.x-k8s.io/queue-name" not in job["spec"]["template"]["metadata"]["labels"]
    assert plan.record["upload_excludes"] == ["*.tmp"]
    # The fit gate sees what the Job will carry.
    assert plan.node_selector["pool"] == "a100" and GPU_TOLERATION in plan.tolerations
    assert plan.gpu_product == "NVIDIA-A100-SXM4-80GB"


def test_without_extra_flags_the_action_job_is_unchanged(files: dict[str, str]) -> None:
    job = job_of(build(flags(files), "ns", CREDS))
    spec = job["spec"]
    assert "activeDeadlineSeconds" not in spec and "suspend" not in spec
    assert spec["ttlSecondsAfterFinished"] == 3600
    assert spec["template"]["spec"]["tolerations"] == [GPU_TOLERATION]
    assert "nodeSelector" not in spec["template"]["spec"]


def test_keep_until_captured_creates_the_action_job_without_a_ttl(files: dict[str, str]) -> None:
    job = job_of(build(flags(files, keep_until_captured=True), "ns", CREDS))
    assert "ttlSecondsAfterFinished" not in job["spec"]


def test_env_secret_feeds_the_forwarded_names_from_an_existing_secret(files: dict[str, str]) -> None:
    plan = build(flags(files, env_secret="team-creds"), "ns", {})
    assert plan.credentials == {} and plan.secret_refs == {"team-creds": ["HF_TOKEN", "AWS_ACCESS_KEY_ID"]}
    env = job_of(plan, None)["spec"]["template"]["spec"]["containers"][0]["env"]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"]["name"] for e in env if "valueFrom" in e}
    assert refs == {"HF_TOKEN": "team-creds", "AWS_ACCESS_KEY_ID": "team-creds"}
    with pytest.raises(UsageError, match="--env-secret names an existing Secret"):
        build(flags(files, env_secret="team-creds"), "ns", CREDS)


@pytest.mark.parametrize(
    ("over", "flag"),
    [
        ({"gpus": 4}, "--gpus"),
        ({"nodes": 2}, "--nodes"),
        ({"mount_path": "/data"}, "--mount-path"),
        ({"s3_input": ["s3://b/x"]}, "--s3-input"),
        ({"s3_output": "s3://b/out"}, "--s3-output"),
        ({"launcher": "torchrun"}, "--launcher"),
        ({"master_port": 29501}, "--master-port"),
        ({"rendezvous_timeout": 10}, "--rendezvous-timeout"),
        ({"nccl_socket_ifname": "eth0"}, "--nccl-socket-ifname"),
        ({"nccl_ib_hca": "mlx5"}, "--nccl-ib-hca"),
        ({"retries_per_index": 2}, "--retries-per-index"),
        ({"storage_tier": "C"}, "--storage-tier C"),
        ({"gpus": 1, "given": {"gpus"}}, "--gpus"),  # given on the command line, even at its default value
    ],
)
def test_flags_the_request_decides_are_refused_by_name(files: dict[str, str], over: dict[str, Any], flag: str) -> None:
    with pytest.raises(UsageError, match=f"^{flag} does not apply to --action-request"):
        build(flags(files, **over), "ns", CREDS)


@pytest.mark.parametrize("results_dir", ["/workspace/results/run-1", "/workspace/results", "s3://bucket/run-1"])
def test_results_dir_on_a_writable_mount_or_s3_is_accepted(files: dict[str, str], results_dir: str) -> None:
    assert build(flags(files, results_dir=results_dir), "ns", CREDS).record["results_dir"] == results_dir


@pytest.mark.parametrize("results_dir", ["/workspace/data/out", "/elsewhere/out", "/workspace"])
def test_results_dir_off_the_writable_mounts_is_refused(files: dict[str, str], results_dir: str) -> None:
    with pytest.raises(UsageError, match=r"not on a writable mount of the action request.*/workspace/results"):
        build(flags(files, results_dir=results_dir), "ns", CREDS)


def test_a_bad_writable_target_is_refused_by_its_own_name(files: dict[str, str]) -> None:
    request = json.loads(Path(files["request"]).read_text(encoding="utf-8"))
    index = next(i for i, row in enumerate(request["mounts"]) if row["read_only"] is False)
    request["mounts"][index]["target"] = "/data/a\nb"
    Path(files["request"]).write_text(json.dumps(request), encoding="utf-8")
    with pytest.raises(UsageError, match=rf"^mounts\[{index}\]\.target must not contain control") as err:
        build(flags(files, results_dir="/elsewhere/out"), "ns", CREDS)
    assert "\n" not in str(err.value)


def test_legacy_access_key_names_satisfy_forward_env(files: dict[str, str], tmp_path: Path) -> None:
    request = json.loads(Path(files["request"]).read_text(encoding="utf-8"))
    request["forward_env"] = ["ACCESS_KEY", "SECRET_KEY"]
    Path(files["request"]).write_text(json.dumps(request), encoding="utf-8")
    env_file = tmp_path / "legacy.env"
    env_file.write_text("ACCESS_KEY=AKIAPLACEHOLDER\nSECRET_KEY=legacy-secret\n", encoding="utf-8")
    plan = build(flags(files), "ns", read_credentials(str(env_file), None))
    assert plan.credentials == {"ACCESS_KEY": "AKIAPLACEHOLDER", "SECRET_KEY": "legacy-secret"}
    env = job_of(plan)["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {e["name"] for e in env if "valueFrom" in e} == {"ACCESS_KEY", "SECRET_KEY"}


def test_render_cli_applies_node_selector_and_refuses_an_explicit_gpus(cli: Any, files: dict[str, str]) -> None:
    base = ["render", "--action-request", files["request"], "--staging-map", files["staging"], "--pvc", "tao-data",
            "--results-dir", "/workspace/results/run-1", "--env-secret", "team-creds", "-o", "json"]
    code, out, err = cli(*base, "--node-selector", "pool=a100")
    assert code == 0, err
    assert json.loads(out)["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "a100"}
    code, out, err = cli(*base, "--gpus", "1")
    assert code == 2 and out == ""
    [line] = err.strip().splitlines()
    assert line.startswith("error: --gpus does not apply to --action-request")


def test_an_env_name_the_request_does_not_forward_is_refused(files: dict[str, str]) -> None:
    with pytest.raises(UsageError, match=r"^--env NGC_KEY: the action request does not forward it"):
        build(flags(files, env=["HF_TOKEN", "NGC_KEY"]), "ns", {**CREDS, "NGC_KEY": "x"})


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"label": ["team"]}, r"^label #1 must look like KEY=VALUE"),
        ({"node_selector": ["pool"]}, r"^node selector #1 must look like KEY=VALUE"),
        ({"toleration": [":NoSchedule"]}, r"^--toleration: the key is empty"),
    ],
)
def test_a_malformed_placement_flag_is_refused_before_the_credentials_are_decided(
    files: dict[str, str], over: dict[str, Any], message: str
) -> None:
    # No credentials at all would be refused as well (forward_env needs them): the flag is read first.
    with pytest.raises(UsageError, match=message):
        build(flags(files, **over), "ns", {})


def test_env_file_keys_the_request_does_not_forward_are_named_in_a_warning(files: dict[str, str]) -> None:
    plan = build(flags(files), "ns", {**CREDS, "NGC_KEY": "x", "WANDB_API_KEY": "y"})
    assert sorted(plan.credentials) == ["AWS_ACCESS_KEY_ID", "HF_TOKEN"]
    assert "left out of the Secret: NGC_KEY, WANDB_API_KEY" in " ".join(plan.warnings)
    assert not [w for w in build(flags(files), "ns", CREDS).warnings if "left out" in w]


@pytest.mark.parametrize(("key", "flag"), [("staging_map", "--staging-map"), ("config_source", "--config-source")])
def test_action_request_only_flags_are_refused_without_one(key: str, flag: str) -> None:
    job = job_request(image="busybox", command="true", pvc="tao-data", **{key: "/tmp/x.json"})
    with pytest.raises(UsageError, match=f"^{flag} is only for --action-request"):
        build(job, "ns", {})
