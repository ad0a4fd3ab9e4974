"""action.py: action request v1 -> single-pod Job, config materialization, every refusal."""

from __future__ import annotations

import copy
import json
import os
import stat
import threading
import tomllib

import pytest
import yaml
from support import FIXTURES as FIXTURES_ROOT

from kubectl_tao.core import names
from kubectl_tao.core.errors import TaoError, UsageError
from kubectl_tao.manifests import action, kubelet_text

FIXTURES = FIXTURES_ROOT / "action"
JOB_ID = "dino-train-1a2b3c"


def fixture(name):
    return json.loads((FIXTURES / name).read_text())


@pytest.fixture
def request_args():
    return fixture("request-args.json")


@pytest.fixture
def staging_args():
    return fixture("staging-args.json")


def render(request, staging, **options):
    values = {"job_id": JOB_ID, "pvc_claim": "tao-pvc", "credential_secret": "tao-creds-dino", **options}
    (job,) = action.render_action_objects(request, staging, **values)
    return job


def refuse(request, staging, message, **options):
    with pytest.raises(UsageError) as info:
        render(request, staging, **options)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    return info.value


def refuse_config(request, staging, message, config_source):
    """refuse() of a mode=config request with its materialized config at CONFIG_SOURCE and no credential secret."""
    return refuse(request, staging, message, credential_secret=None, config_source=config_source)


def container_of(job):
    """The container as it runs (after the kubelet's `$(VAR)` / `$$` expansion)."""
    (container,) = kubelet_text.as_delivered([job])[0]["spec"]["template"]["spec"]["containers"]
    return container


def config_case(tmp_path, request_name="request-config.json"):
    """A config-mode request, its materialized file and a staging map that stages everything."""
    request = fixture(request_name)
    config = action.materialize_config(request, tmp_path / "out")
    sources = [{"source": m["source"], "sub_path": f"stage{i}"} for i, m in enumerate(request["mounts"])]
    sources.append({"source": str(config), "sub_path": "stage-config/" + config.name})
    return request, {"schema_version": "1", "sources": sources}, config


# ---------------------------------------------------------------- args mode


def test_args_mode_renders_native_argv(request_args, staging_args):
    job = render(request_args, staging_args)
    container = container_of(job)
    assert container["command"] == ["dino", "train"]
    assert container["args"] == request_args["spec_bundle"]["args"]
    assert container["image"] == "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt"
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "2"}}


def test_job_metadata_names_the_record(request_args, staging_args):
    job = render(request_args, staging_args, namespace="tao-jobs", ttl_seconds=600)
    assert job["metadata"]["name"] == JOB_ID
    assert job["metadata"]["namespace"] == "tao-jobs"
    assert job["metadata"]["annotations"] == {"kubectl-tao.io/record-id": JOB_ID}
    assert job["metadata"]["labels"]["tao-job"] == JOB_ID
    assert job["spec"]["template"]["metadata"]["annotations"] == {"kubectl-tao.io/record-id": JOB_ID}
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["ttlSecondsAfterFinished"] == 600
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_an_unsafe_job_id_gets_a_hashed_name(request_args, staging_args):
    job = render(request_args, staging_args, job_id="Dino_Train-1")
    assert job["metadata"]["name"] == names.kubernetes_job_name("Dino_Train-1")
    assert job["metadata"]["annotations"]["kubectl-tao.io/record-id"] == "Dino_Train-1"
    assert action.kubernetes_job_name is names.kubernetes_job_name


def test_each_target_is_its_own_sub_path_mount(request_args, staging_args):
    mounts = container_of(render(request_args, staging_args))["volumeMounts"]
    assert mounts == [
        {"name": "dshm", "mountPath": "/dev/shm", "readOnly": False},
        {"name": "workspace", "mountPath": "/workspace/data", "subPath": "jobs/run-1/coco", "readOnly": True},
        {"name": "workspace", "mountPath": "/mnt/coco", "subPath": "jobs/run-1/coco", "readOnly": True},
        {"name": "workspace", "mountPath": "/workspace/specs", "subPath": "jobs/run-1/specs", "readOnly": True},
        {"name": "workspace", "mountPath": "/workspace/results", "subPath": "jobs/run-1/results", "readOnly": False},
    ]


def test_volumes_are_dev_shm_and_the_staged_pvc(request_args, staging_args):
    volumes = render(request_args, staging_args, shm_size="8Gi")["spec"]["template"]["spec"]["volumes"]
    assert volumes == [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
        {"name": "workspace", "persistentVolumeClaim": {"claimName": "tao-pvc"}},
    ]


def test_environment_is_literal_and_credentials_are_secret_key_refs(request_args, staging_args):
    job = render(request_args, staging_args)
    assert container_of(job)["env"] == [
        {"name": "NCCL_DEBUG", "value": "INFO"},
        {"name": "TOKENIZERS_PARALLELISM", "value": "false"},
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "tao-creds-dino", "key": "HF_TOKEN"}}},
        {
            "name": "AWS_ACCESS_KEY_ID",
            "valueFrom": {"secretKeyRef": {"name": "tao-creds-dino", "key": "AWS_ACCESS_KEY_ID"}},
        },
    ]
    assert "envFrom" not in container_of(job)


def test_image_pull_secret_is_optional(request_args, staging_args):
    assert "imagePullSecrets" not in render(request_args, staging_args)["spec"]["template"]["spec"]
    job = render(request_args, staging_args, image_pull_secret="ngc-pull")
    assert job["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "ngc-pull"}]


def test_zero_gpus_renders_no_gpu_limit(request_args, staging_args):
    request_args["spec_bundle"]["compute_shape"]["gpus"] = 0
    assert "resources" not in container_of(render(request_args, staging_args))


def test_no_forwarded_credentials_needs_no_secret(request_args, staging_args):
    del request_args["forward_env"]
    job = render(request_args, staging_args, credential_secret=None)
    assert all("valueFrom" not in item for item in container_of(job)["env"])


def test_args_mode_never_gives_shell_syntax_to_a_shell(request_args, staging_args):
    request_args["spec_bundle"]["command"] = "python -c 'print(1)' ; rm -rf / && $(reboot)"
    request_args["spec_bundle"]["args"] = ["`id`", "$(whoami)", "a; b"]
    container = container_of(render(request_args, staging_args))
    assert container["command"] == ["python", "-c", "print(1)", ";", "rm", "-rf", "/", "&&", "$(reboot)"]
    assert container["args"] == ["`id`", "$(whoami)", "a; b"]


def test_extra_request_properties_are_tolerated(request_args, staging_args):
    request_args["producer"] = {"name": "x"}
    request_args["spec_bundle"]["note"] = "kept out of the manifest"
    request_args["mounts"][0]["comment"] = "alias"
    staging_args["receipt_id"] = "abc"
    staging_args["sources"][0]["bytes"] = 12
    assert container_of(render(request_args, staging_args))["command"] == ["dino", "train"]


def test_fresh_output_equal_to_a_writable_source_is_covered(request_args, staging_args):
    request_args["fresh_outputs"] = ["/data/results"]
    assert render(request_args, staging_args)["kind"] == "Job"


def test_render_action_job_returns_yaml_that_kubectl_reads_back(request_args, staging_args):
    request_args["environment"]["TRICKY"] = "yes\n---\nkind: Secret\n{a: b} $(rm -rf /) `x` 'q' \"dq\""
    text = action.render_action_job(request_args, staging_args, job_id=JOB_ID, pvc_claim="p", credential_secret="s")
    assert text.startswith("apiVersion: batch/v1\n")
    (parsed,) = yaml.safe_load_all(text)
    env = {e["name"]: e.get("value") for e in container_of(parsed)["env"]}
    assert env["TRICKY"] == request_args["environment"]["TRICKY"]
    assert parsed == render(request_args, staging_args, pvc_claim="p", credential_secret="s")


@pytest.mark.parametrize("value", ["yes", "off", "0123", "null", "--- x", "key: value", "@@IMAGE@@", "\u2028"])
def test_every_string_round_trips(request_args, staging_args, value):
    request_args["spec_bundle"]["args"] = [value]
    request_args["environment"] = {"V": value}
    text = action.render_action_job(request_args, staging_args, job_id=JOB_ID, pvc_claim="p", credential_secret="s")
    (parsed,) = yaml.safe_load_all(text)
    container = parsed["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == [value]
    assert container["env"][0] == {"name": "V", "value": value}


# ---------------------------------------------------------------- config mode


def test_materialize_config_writes_a_content_addressed_file(tmp_path):
    request = fixture("request-config.json")
    path = action.materialize_config(request, tmp_path / "new" / "dir")
    content, _, digest = action.config_document(request["spec_bundle"])
    assert path == (tmp_path / "new" / "dir").resolve() / f"tao-action-config-{digest}.yaml"
    assert path.read_text() == content
    assert json.loads(path.read_text()) == request["spec_bundle"]["spec"]
    assert yaml.safe_load(path.read_text()) == request["spec_bundle"]["spec"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_materialize_config_is_idempotent(tmp_path):
    request = fixture("request-config.json")
    first = action.materialize_config(request, tmp_path)
    assert action.materialize_config(request, tmp_path) == first
    assert len(list(tmp_path.iterdir())) == 1


def test_materialize_config_from_many_threads_publishes_one_file(tmp_path):
    request = fixture("request-config.json")
    results, errors = [], []

    def worker():
        try:
            results.append(action.materialize_config(request, tmp_path))
        except TaoError as exc:  # pragma: no cover - the test fails below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(set(results)) == 1
    assert [p.name for p in tmp_path.iterdir()] == [results[0].name]


def test_materialize_config_detects_a_content_mismatch(tmp_path):
    request = fixture("request-config.json")
    path = action.materialize_config(request, tmp_path)
    path.write_text("tampered\n")
    with pytest.raises(UsageError, match="exists with different content; remove it and rerun materialize-config"):
        action.materialize_config(request, tmp_path)


def test_materialize_config_refuses_a_symlinked_destination(tmp_path):
    request = fixture("request-config.json")
    elsewhere = action.materialize_config(request, tmp_path / "a")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / elsewhere.name).symlink_to(elsewhere)
    with pytest.raises(UsageError, match="is a symlink; give the regular file itself"):
        action.materialize_config(request, tmp_path / "b")


def test_materialize_config_refuses_a_symlinked_output_dir(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(UsageError, match=r"config output directory .* is a symlink"):
        action.materialize_config(fixture("request-config.json"), tmp_path / "link")


def test_materialize_config_refuses_a_file_as_output_dir(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="cannot create config output directory"):
        action.materialize_config(fixture("request-config.json"), tmp_path / "file")


def test_materialize_config_refuses_the_filesystem_root():
    with pytest.raises(UsageError, match="must not be the filesystem root"):
        action.materialize_config(fixture("request-config.json"), "/")


def test_materialize_config_refuses_mode_args(tmp_path):
    with pytest.raises(UsageError, match=r"materialize-config needs spec_bundle.mode=config"):
        action.materialize_config(fixture("request-args.json"), tmp_path)


def test_materialize_config_validates_the_request_first(tmp_path):
    request = fixture("request-config.json")
    request["spec_bundle"]["args"] = []
    with pytest.raises(UsageError, match=r"action request \$.spec_bundle.args: args belong to mode=args"):
        action.materialize_config(request, tmp_path)


def test_config_mode_mounts_the_file_read_only_and_names_it_in_argv(tmp_path):
    request, staging, config = config_case(tmp_path)
    job = render(request, staging, credential_secret=None, config_source=config)
    container = container_of(job)
    digest = config.name.removeprefix("tao-action-config-").removesuffix(".yaml")
    target = f"/tao-action-config/spec-{digest}.yaml"
    assert container["command"] == ["dino", "train", "-e", target]
    assert container["args"] == []
    assert container["volumeMounts"][-1] == {
        "name": "workspace",
        "mountPath": target,
        "subPath": "stage-config/" + config.name,
        "readOnly": True,
    }


def test_config_mode_shell_script_is_kept_verbatim_under_sh_c(tmp_path):
    request, staging, config = config_case(tmp_path, "request-config-shell.json")
    container = container_of(render(request, staging, credential_secret=None, config_source=config))
    digest = config.name.removeprefix("tao-action-config-").removesuffix(".toml")
    expected = request["spec_bundle"]["command"].replace("{config_path}", f"/tao-action-config/spec-{digest}.toml")
    assert container["command"] == ["/bin/sh", "-c"]
    assert container["args"] == [expected, "tao-action"]
    assert "resources" not in container
    assert tomllib.loads(config.read_text()) == request["spec_bundle"]["spec"]


@pytest.mark.parametrize("marker", ["\n", ";", "&&", "||", "$(", "`", "|", ">", "<"])
def test_each_shell_marker_selects_sh_c_in_config_mode(tmp_path, marker):
    request, staging, config = config_case(tmp_path)
    request["spec_bundle"]["command"] = f"run {{config_path}} {marker} true"
    assert container_of(render(request, staging, credential_secret=None, config_source=config))["command"] == [
        "/bin/sh",
        "-c",
    ]


def test_config_source_may_be_given_with_a_tilde(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    request, staging, config = config_case(tmp_path)
    tilde = "~/" + str(config.relative_to(tmp_path.resolve()))
    assert render(request, staging, credential_secret=None, config_source=tilde)["kind"] == "Job"


def test_json_config_format(tmp_path):
    request = fixture("request-config.json")
    request["spec_bundle"]["config_format"] = "json"
    path = action.materialize_config(request, tmp_path)
    assert path.suffix == ".json"
    assert json.loads(path.read_text()) == request["spec_bundle"]["spec"]


def test_json_config_refuses_nan():
    bundle = {"spec": {"a": float("nan")}, "config_format": "yaml"}
    with pytest.raises(UsageError, match=r"spec_bundle.spec cannot be written as yaml"):
        action.config_document(bundle)


def test_config_document_checks_its_inputs():
    with pytest.raises(UsageError, match=r"spec_bundle.spec must be an object in mode=config"):
        action.config_document({"spec": [], "config_format": "json"})
    with pytest.raises(UsageError, match=r"spec_bundle.config_format must be json, toml or yaml"):
        action.config_document({"spec": {}, "config_format": "ini"})


# ---------------------------------------------------------------- refusals: request shape (schema)


def _set(document, path, value):
    *parents, last = path
    for key in parents:
        document = document[key]
    if value is _DELETE:
        del document[last]
    else:
        document[last] = value


_DELETE = object()

REQUEST_ERRORS = [
    (("schema_version",), "2", "action request $.schema_version: '1' was expected"),
    (("schema_version",), 1, "action request $.schema_version: '1' was expected"),
    (("platform",), "slurm", "action request $.platform: 'kubernetes' was expected"),
    (("spec_bundle",), _DELETE, "action request $: 'spec_bundle' is a required property"),
    (("spec_bundle",), [], "action request $.spec_bundle: [] is not of type 'object'"),
    (("spec_bundle", "mode"), "cfg", "$.spec_bundle.mode: 'cfg' is not one of ['args', 'config']"),
    (("spec_bundle", "spec"), {}, "$.spec_bundle.spec: spec belongs to mode=config"),
    (("spec_bundle", "config_format"), "json", "$.spec_bundle.config_format: config_format belongs to mode=config"),
    (("spec_bundle", "args"), _DELETE, "$.spec_bundle: 'args' is a required property"),
    (("spec_bundle", "args"), "-e x", "$.spec_bundle.args: '-e x' is not of type 'array'"),
    (("spec_bundle", "args"), ["ok", 1], "$.spec_bundle.args[1]: 1 is not of type 'string'"),
    (("spec_bundle", "command"), "", "$.spec_bundle.command: '' should be non-empty"),
    (("spec_bundle", "command"), ["dino"], "$.spec_bundle.command: ['dino'] is not of type 'string'"),
    (("spec_bundle", "image"), _DELETE, "$.spec_bundle: 'image' is a required property"),
    (("spec_bundle", "compute_shape"), _DELETE, "$.spec_bundle: 'compute_shape' is a required property"),
    (
        ("spec_bundle", "compute_shape", "gpus"),
        -1,
        "$.spec_bundle.compute_shape.gpus: -1 is less than the minimum of 0",
    ),
    (("spec_bundle", "compute_shape", "gpus"), 1.5, "$.spec_bundle.compute_shape.gpus: 1.5 is not of type 'integer'"),
    (("spec_bundle", "compute_shape", "gpus"), True, "$.spec_bundle.compute_shape.gpus: True is not of type 'integer'"),
    (
        ("spec_bundle", "compute_shape", "nodes"),
        0,
        "$.spec_bundle.compute_shape.nodes: 0 is less than the minimum of 1",
    ),
    (("workload_image",), "", "$.workload_image: '' should be non-empty"),
    (("mounts",), [], "$.mounts: [] should be non-empty"),
    (("mounts",), _DELETE, "$: 'mounts' is a required property"),
    (("mounts", 0, "read_only"), "yes", "$.mounts[0].read_only: 'yes' is not of type 'boolean'"),
    (("mounts", 0, "read_only"), _DELETE, "$.mounts[0]: 'read_only' is a required property"),
    (("mounts", 1, "source"), "data/coco", "$.mounts[1].source: 'data/coco' does not match '^/'"),
    (("fresh_outputs",), "/data/results", "$.fresh_outputs: '/data/results' is not of type 'array'"),
    (("fresh_outputs",), ["out"], "$.fresh_outputs[0]: 'out' does not match '^/'"),
    (("environment",), ["A=1"], "$.environment: ['A=1'] is not of type 'object'"),
    (("environment", "NCCL_DEBUG"), 3, "$.environment.NCCL_DEBUG: 3 is not of type 'string'"),
    (("environment",), {"BAD-NAME": "x"}, "$.environment: 'BAD-NAME' does not match"),
    (("forward_env",), ["HF_TOKEN", "HF_TOKEN"], "$.forward_env: ['HF_TOKEN', 'HF_TOKEN'] has non-unique elements"),
    (("forward_env",), ["1TOKEN"], "$.forward_env[0]: '1TOKEN' does not match"),
    (("forward_env",), [""], "$.forward_env[0]: '' does not match"),
]


@pytest.mark.parametrize(("path", "value", "message"), REQUEST_ERRORS, ids=[m for *_, m in REQUEST_ERRORS])
def test_request_shape_errors_name_the_json_path(request_args, staging_args, path, value, message):
    _set(request_args, path, value)
    refuse(request_args, staging_args, message)


CONFIG_SHAPE_ERRORS = [
    (("spec_bundle", "args"), [], "$.spec_bundle.args: args belong to mode=args"),
    (("spec_bundle", "spec"), _DELETE, "$.spec_bundle: 'spec' is a required property"),
    (("spec_bundle", "config_format"), _DELETE, "$.spec_bundle: 'config_format' is a required property"),
    (("spec_bundle", "config_format"), "ini", "$.spec_bundle.config_format: 'ini' is not one of"),
    (("spec_bundle", "spec"), "a: 1", "$.spec_bundle.spec: 'a: 1' is not of type 'object'"),
]


@pytest.mark.parametrize(("path", "value", "message"), CONFIG_SHAPE_ERRORS, ids=[m for *_, m in CONFIG_SHAPE_ERRORS])
def test_config_request_shape_errors(tmp_path, path, value, message):
    request, staging, config = config_case(tmp_path)
    _set(request, path, value)
    refuse_config(request, staging, message, config)


# ---------------------------------------------------------------- refusals: staging map

STAGING_ERRORS = [
    (("schema_version",), "2", "staging map $.schema_version: '1' was expected"),
    (("sources",), [], "staging map $.sources: [] should be non-empty"),
    (("sources", 0, "sub_path"), _DELETE, "staging map $.sources[0]: 'sub_path' is a required property"),
    (("sources", 0, "source"), "data/coco", "staging map $.sources[0].source: 'data/coco' does not match '^/'"),
    (("sources", 0, "sub_path"), "../coco", "staging map sources[0].sub_path must be a normalized"),
    (("sources", 0, "sub_path"), "/abs", "staging map sources[0].sub_path must be a relative path"),
    (("sources", 0, "source"), "/data/./coco", "staging map sources[0].source must be a normalized"),
    (("sources", 1, "source"), "/data/coco", "staging map stages source /data/coco twice; keep one row per source"),
    (
        ("sources", 1, "sub_path"),
        "jobs/run-1/coco",
        "staging map gives subPath 'jobs/run-1/coco' to both /data/coco and /data/specs",
    ),
]


@pytest.mark.parametrize(("path", "value", "message"), STAGING_ERRORS, ids=[m for *_, m in STAGING_ERRORS])
def test_staging_map_errors(request_args, staging_args, path, value, message):
    _set(staging_args, path, value)
    refuse(request_args, staging_args, message)


def test_a_mount_source_missing_from_the_staging_map(request_args, staging_args):
    del staging_args["sources"][1]
    refuse(request_args, staging_args, "mounts[2].source /data/specs is not in the staging map; stage it first")


def test_a_staged_source_the_request_does_not_mount(request_args, staging_args):
    staging_args["sources"].append({"source": "/data/extra", "sub_path": "x"})
    refuse(request_args, staging_args, "staging map stages sources the request does not mount: /data/extra")


# ---------------------------------------------------------------- refusals: semantics


def test_mount_paths_must_be_normalized(request_args, staging_args):
    request_args["mounts"][0]["target"] = "/workspace/../etc"
    refuse(request_args, staging_args, "mounts[0].target must be a normalized path")
    request_args["mounts"][0]["target"] = "/"
    refuse(request_args, staging_args, "mounts[0].target must be an absolute path below '/'")


def test_a_repeated_target_is_refused(request_args, staging_args):
    request_args["mounts"][1]["target"] = "/workspace/data"
    refuse(request_args, staging_args, "mounts[1].target /workspace/data is mounted twice")


def test_dev_shm_is_a_taken_target(request_args, staging_args):
    request_args["mounts"][1]["target"] = "/dev/shm"
    refuse(request_args, staging_args, "mounts[1].target /dev/shm is mounted twice")


def test_fresh_output_inside_a_read_only_mount_is_refused(request_args, staging_args):
    request_args["fresh_outputs"] = ["/data/results/ok", "/data/coco/new"]
    refuse(request_args, staging_args, "fresh_outputs[1] /data/coco/new is not inside a writable mount")


def test_fresh_output_outside_every_mount_is_refused(request_args, staging_args):
    request_args["fresh_outputs"] = ["/data/resultsX"]
    refuse(request_args, staging_args, "fresh_outputs[0] /data/resultsX is not inside a writable mount")


def test_fresh_output_must_be_normalized(request_args, staging_args):
    request_args["fresh_outputs"] = ["/data/results/../coco"]
    refuse(request_args, staging_args, "fresh_outputs[0] must be a normalized path")


def test_workload_image_must_equal_the_bundle_image(request_args, staging_args):
    request_args["workload_image"] = "nvcr.io/nvidia/tao/tao-toolkit:5.5.0-pyt"
    refuse(request_args, staging_args, "workload_image differs from spec_bundle.image")


def test_workload_image_may_be_absent(request_args, staging_args):
    del request_args["workload_image"]
    assert render(request_args, staging_args)["kind"] == "Job"


def test_bundle_image_must_be_an_image_reference(request_args, staging_args):
    request_args["spec_bundle"]["image"] = request_args["workload_image"] = "bad image"
    refuse(request_args, staging_args, "spec_bundle.image must not contain whitespace")


def test_gpus_given_as_a_float_is_refused(request_args, staging_args):
    request_args["spec_bundle"]["compute_shape"]["gpus"] = 2.0
    refuse(request_args, staging_args, "spec_bundle.compute_shape.gpus must be a whole number >= 0, got 2.0")


def test_more_than_one_node_is_refused(request_args, staging_args):
    request_args["spec_bundle"]["compute_shape"]["nodes"] = 2
    refuse(request_args, staging_args, "spec_bundle.compute_shape.nodes is 2; an action request renders one pod")


def test_command_with_nul_is_refused(request_args, staging_args):
    request_args["spec_bundle"]["command"] = "dino\x00train"
    refuse(request_args, staging_args, "spec_bundle.command must not contain a NUL character")


def test_argument_with_nul_is_refused(request_args, staging_args):
    request_args["spec_bundle"]["args"][1] = "a\x00b"
    refuse(request_args, staging_args, "spec_bundle.args[1] must not contain a NUL character")


def test_empty_argument_is_allowed(request_args, staging_args):
    request_args["spec_bundle"]["args"] = [""]
    assert container_of(render(request_args, staging_args))["args"] == [""]


def test_unbalanced_quotes_are_refused(request_args, staging_args):
    request_args["spec_bundle"]["command"] = "dino 'train"
    refuse(request_args, staging_args, "spec_bundle.command cannot be split into arguments")


@pytest.mark.parametrize("command", ["   ", "'' train"])
def test_a_command_without_an_executable_is_refused(request_args, staging_args, command):
    request_args["spec_bundle"]["command"] = command
    refuse(request_args, staging_args, "spec_bundle.command names no executable")


def test_environment_value_with_nul_is_refused(request_args, staging_args):
    request_args["environment"]["X"] = "a\x00"
    refuse(request_args, staging_args, "environment.X must not contain a NUL character")


def test_a_credential_may_not_also_be_plain_environment(request_args, staging_args):
    request_args["environment"]["HF_TOKEN"] = "$HF_TOKEN"
    refuse(request_args, staging_args, "HF_TOKEN is both in forward_env and in environment")


def test_forwarded_credentials_need_a_secret(request_args, staging_args):
    refuse(
        request_args, staging_args, "forward_env names credentials but no --credential-secret", credential_secret=None
    )


@pytest.mark.parametrize("forward", [[], None])
def test_a_secret_without_forwarded_credentials_is_refused(request_args, staging_args, forward):
    if forward is None:
        del request_args["forward_env"]
    else:
        request_args["forward_env"] = forward
    refuse(request_args, staging_args, "--credential-secret was given but forward_env is empty")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"namespace": "Tao"}, "namespace is not a valid DNS label"),
        ({"namespace": "a.b"}, "namespace is not a valid DNS label"),
        ({"pvc_claim": "PVC"}, "PVC claim is not a valid Kubernetes name"),
        ({"credential_secret": "creds_1"}, "credential secret is not a valid Kubernetes name"),
        ({"image_pull_secret": "-pull"}, "image pull secret is not a valid Kubernetes name"),
        ({"job_id": ""}, "job id must not be empty"),
        ({"ttl_seconds": -1}, "ttl seconds must be a whole number from 0 to 604800, got -1"),
        ({"ttl_seconds": 604801}, "ttl seconds must be a whole number from 0 to 604800"),
        ({"ttl_seconds": True}, "ttl seconds must be a whole number from 0 to 604800, got True"),
        ({"ttl_seconds": "3600"}, "ttl seconds must be a whole number"),
        ({"shm_size": "16G"}, "shm size must be a positive whole number with a binary suffix"),
        ({"shm_size": "0Gi"}, "shm size must be a positive whole number"),
    ],
)
def test_parameter_errors(request_args, staging_args, options, message):
    refuse(request_args, staging_args, message, **options)


@pytest.mark.parametrize("ttl", [0, 604800])
def test_ttl_bounds_are_inclusive(request_args, staging_args, ttl):
    assert render(request_args, staging_args, ttl_seconds=ttl)["spec"]["ttlSecondsAfterFinished"] == ttl


def test_config_source_is_only_for_config_mode(request_args, staging_args, tmp_path):
    refuse(request_args, staging_args, "--config-source is only for spec_bundle.mode=config", config_source=tmp_path)


def test_config_mode_needs_a_config_source(tmp_path):
    request, staging, _ = config_case(tmp_path)
    refuse(request, staging, "spec_bundle.mode=config needs --config-source", credential_secret=None)


def test_config_mode_needs_the_config_path_token(tmp_path):
    request, staging, config = config_case(tmp_path)
    request["spec_bundle"]["command"] = "dino train -e /etc/spec.yaml"
    refuse_config(request, staging, "must contain {config_path} in mode=config", config)


def test_config_source_must_be_absolute(tmp_path, monkeypatch):
    request, staging, config = config_case(tmp_path)
    monkeypatch.chdir(config.parent)
    refuse_config(request, staging, "config source must be an absolute path", config.name)


def test_config_source_content_must_match_the_spec(tmp_path):
    request, staging, config = config_case(tmp_path)
    request["spec_bundle"]["spec"]["train"]["num_epochs"] = 13
    refuse_config(
        request, staging, f"config source {config} does not match spec_bundle.spec; rerun materialize-config", config
    )


def test_config_source_may_not_be_a_symlink(tmp_path):
    request, staging, config = config_case(tmp_path)
    link = tmp_path / "link.yaml"
    link.symlink_to(config)
    staging["sources"][-1]["source"] = str(link)
    refuse_config(request, staging, f"config source {link} is a symlink", link)


def test_config_source_must_exist(tmp_path):
    request, staging, _ = config_case(tmp_path)
    missing = tmp_path / "missing.yaml"
    refuse_config(request, staging, f"cannot open config source {missing}", missing)


def test_config_source_must_be_a_regular_file(tmp_path):
    request, staging, _ = config_case(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    refuse_config(request, staging, f"config source {fifo} is not a regular file", fifo)


def test_config_source_must_be_staged(tmp_path):
    request, staging, config = config_case(tmp_path)
    staging["sources"].pop()
    refuse_config(request, staging, f"config source {config} is not in the staging map", config)


def test_config_source_may_not_double_as_a_mount_source(tmp_path):
    request, staging, config = config_case(tmp_path)
    request["mounts"].append({"source": str(config), "target": "/etc/extra.yaml", "read_only": True})
    refuse_config(request, staging, f"config source {config} is also a declared mount source", config)


def test_config_target_may_not_collide_with_a_declared_target(tmp_path):
    request, staging, config = config_case(tmp_path)
    digest = config.name.removeprefix("tao-action-config-").removesuffix(".yaml")
    request["mounts"][0]["target"] = f"/tao-action-config/spec-{digest}.yaml"
    refuse_config(request, staging, "config mount target /tao-action-config/spec-", config)


# ---------------------------------------------------------------- loading


def test_load_json_object_errors(tmp_path):
    with pytest.raises(UsageError, match="cannot read action request"):
        action.load_json_object(tmp_path / "missing.json", "action request")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(UsageError, match="is not valid JSON"):
        action.load_json_object(tmp_path / "bad.json", "action request")
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(UsageError, match="must hold a JSON object at the top level"):
        action.load_json_object(tmp_path / "list.json", "staging map")


def test_request_fixtures_are_unchanged_by_rendering(request_args, staging_args):
    before = copy.deepcopy((request_args, staging_args))
    render(request_args, staging_args)
    assert (request_args, staging_args) == before
