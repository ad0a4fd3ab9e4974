"""render.py, one node: the single-pod Job (tiers A and C), validation, warnings, YAML output."""

from __future__ import annotations

import json

import pytest
import yaml  # PyYAML: a YAML 1.1 reader, as kubectl is
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML
from support import ROOT as REPO_ROOT
from support.specs import refusal

from kubectl_tao.core import flagvalues, names, templates
from kubectl_tao.core.errors import UsageError
from kubectl_tao.manifests import kubelet_text, render

ROOT = REPO_ROOT
BASE = {"image": "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt", "command": "dino train -e /workspace/s.yaml"}


def make(**options):
    values = {**BASE, "record_id": "dino-train-1a2b3c", "pvc": "tao-data", **options}
    return render.spec_from_options(**values)


def job_of(spec):
    (job,) = render.render(spec)
    return job


def pod_of(job):
    """The pod as its containers receive it (after the kubelet's `$(VAR)` / `$$` expansion)."""
    return kubelet_text.as_delivered([job])[0]["spec"]["template"]["spec"]


def container_of(job, index=0):
    return pod_of(job)["containers"][index]


def env_of(container):
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container["env"]}


def strings_in(value):
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)
    elif isinstance(value, str):
        yield value


# ---------------------------------------------------------------- tier A


def test_tier_a_job_shape():
    job = job_of(make(gpus=2))
    assert job["apiVersion"] == "batch/v1"
    assert job["kind"] == "Job"
    assert job["metadata"]["name"] == "dino-train-1a2b3c"
    assert job["metadata"]["namespace"] == "default"
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["ttlSecondsAfterFinished"] == 3600
    assert pod_of(job)["restartPolicy"] == "Never"
    container = container_of(job)
    assert container["name"] == "tao"
    assert container["image"] == BASE["image"]
    assert container["command"] == ["/bin/sh", "-c"]
    assert container["args"] == [BASE["command"]]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "2"}}


def test_tier_a_mounts_the_pvc_and_dev_shm():
    job = job_of(make(shm_size="32Gi", mount_path="/data", results_dir="/data/out"))
    volumes = {v["name"]: v for v in pod_of(job)["volumes"]}
    assert volumes["workspace"] == {"name": "workspace", "persistentVolumeClaim": {"claimName": "tao-data"}}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "32Gi"}
    mounts = {m["name"]: m["mountPath"] for m in container_of(job)["volumeMounts"]}
    assert mounts == {"dshm": "/dev/shm", "workspace": "/data"}
    assert env_of(container_of(job))["TAO_RESULTS_ROOT"] == "/data/out"


def test_results_dir_defaults_to_the_record_under_the_mount():
    spec = make()
    assert spec.effective_results_dir == "/workspace/results/dino-train-1a2b3c"
    assert env_of(container_of(job_of(spec))) == {
        "TAO_JOB_ID": "dino-train-1a2b3c",
        "TAO_RESULTS_ROOT": "/workspace/results/dino-train-1a2b3c",
    }


def test_s3_results_dir_in_tier_a_sets_no_results_root_and_warns():
    spec = make(results_dir="s3://bucket/results/dino-train-1a2b3c/")
    assert "TAO_RESULTS_ROOT" not in env_of(container_of(job_of(spec)))
    assert any("kubectl-tao uploads nothing" in w for w in render.warnings_for(spec))


def test_labels_and_record_id_annotation_on_job_and_pods():
    job = job_of(make(labels=["team=vision"]))
    expected = {
        "app.kubernetes.io/managed-by": "kubectl-tao",
        "tao-job": "dino-train-1a2b3c",
        "kubectl-tao.io/record-id": "dino-train-1a2b3c",
        "team": "vision",
    }
    assert job["metadata"]["labels"] == expected
    assert job["spec"]["template"]["metadata"]["labels"] == expected
    assert job["metadata"]["annotations"] == {"kubectl-tao.io/record-id": "dino-train-1a2b3c"}
    assert job["spec"]["template"]["metadata"]["annotations"] == {"kubectl-tao.io/record-id": "dino-train-1a2b3c"}


def test_a_record_id_that_is_no_label_value_is_kept_as_annotation_only():
    job = job_of(make(record_id="dino_train_", name="dino-train"))
    assert "kubectl-tao.io/record-id" not in job["metadata"]["labels"]
    assert job["metadata"]["annotations"]["kubectl-tao.io/record-id"] == "dino_train_"
    assert env_of(container_of(job))["TAO_JOB_ID"] == "dino_train_"


def test_name_is_derived_from_the_record_id():
    spec = render.spec_from_options(**BASE, record_id="Dino_Train-1a2b3c", pvc="d")
    assert spec.name.startswith("dino-train-1a2b3c-")
    assert render.spec_from_options(**BASE, name="my-job", pvc="d").record_id == "my-job"


def test_gpus_zero_renders_no_gpu_limit_and_warns():
    spec = make(gpus=0)
    assert "resources" not in container_of(job_of(spec))
    assert any("lifecycle-only" in w for w in render.warnings_for(spec))


def test_env_secret_is_an_env_from_secret_ref():
    job = job_of(make(env_secret="tao-creds-dino-train-1a2b3c"))
    assert container_of(job)["envFrom"] == [{"secretRef": {"name": "tao-creds-dino-train-1a2b3c", "optional": False}}]


def test_no_env_secret_renders_no_env_from():
    assert "envFrom" not in container_of(job_of(make()))


def test_image_pull_secret():
    assert pod_of(job_of(make(image_pull_secret="ngc-pull")))["imagePullSecrets"] == [{"name": "ngc-pull"}]
    assert "imagePullSecrets" not in pod_of(job_of(make()))


def test_ttl_can_be_set_or_dropped():
    assert job_of(make(ttl_seconds=0))["spec"]["ttlSecondsAfterFinished"] == 0
    assert "ttlSecondsAfterFinished" not in job_of(make(ttl_seconds=None))["spec"]


def test_scheduling_options():
    job = job_of(
        make(
            node_selector=["nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"],
            tolerations=["nvidia.com/gpu:NoSchedule", "dedicated=ml:NoExecute"],
            active_deadline_seconds=7200,
            backoff_limit=2,
        )
    )
    assert pod_of(job)["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert pod_of(job)["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"},
    ]
    assert job["spec"]["activeDeadlineSeconds"] == 7200
    assert job["spec"]["backoffLimit"] == 2


def test_queue_name_suspends_the_job_and_labels_it_for_kueue():
    spec = make(queue_name="team-a")
    job = job_of(spec)
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert "kueue.x-k8s.io/queue-name" not in job["spec"]["template"]["metadata"]["labels"]
    assert any("suspended" in w for w in render.warnings_for(spec))


def test_extra_annotations_go_on_the_pod_template():
    job = job_of(make(annotations=["kwok.x-k8s.io/outcome=fail", "note=yes"]))
    assert job["spec"]["template"]["metadata"]["annotations"] == {
        "kubectl-tao.io/record-id": "dino-train-1a2b3c",
        "kwok.x-k8s.io/outcome": "fail",
        "note": "yes",
    }
    assert job["metadata"]["annotations"] == {"kubectl-tao.io/record-id": "dino-train-1a2b3c"}


def test_nccl_settings_reach_a_single_pod_too():
    env = env_of(container_of(job_of(make(nccl_socket_ifname="^docker,lo", nccl_ib_hca="mlx5_0:1"))))
    assert env["NCCL_SOCKET_IFNAME"] == "^docker,lo"
    assert env["NCCL_IB_HCA"] == "mlx5_0:1"


def test_spec_can_be_built_directly_and_is_validated_by_render():
    spec = render.JobSpec(name="direct", record_id="direct", image="busybox", command="true", pvc="d")
    assert job_of(spec)["metadata"]["name"] == "direct"
    with pytest.raises(UsageError, match="gpus must be a whole number from 0 to 64"):
        render.render(render.JobSpec(name="d", record_id="d", image="b", command="true", pvc="d", gpus=-1))


def test_with_overrides_returns_a_validated_copy():
    spec = make()
    other = render.with_overrides(spec, name="other", env_secret="tao-creds-other")
    assert (other.name, other.env_secret, spec.name) == ("other", "tao-creds-other", "dino-train-1a2b3c")
    with pytest.raises(UsageError, match="namespace"):
        render.with_overrides(spec, namespace="Bad")


def test_render_single_refuses_several_nodes():
    spec = make(nodes=2, name="multi")
    with pytest.raises(UsageError, match="use render_indexed"):
        render.render_single(spec)


# ---------------------------------------------------------------- tier C


def tier_c(**options):
    values = {
        "storage_tier": "C",
        "pvc": None,
        "s3_inputs": ["s3://bkt/datasets/coco/", "s3://bkt/specs/train.yaml"],
        "s3_output": "s3://bkt/results",
        "env_secret": "tao-creds-dino-train-1a2b3c",
        **options,
    }
    return make(**values)


def test_tier_c_fetches_inputs_in_an_init_container():
    job = job_of(tier_c())
    (init,) = pod_of(job)["initContainers"]
    assert init["name"] == "fetch-inputs"
    assert init["image"] == render.DEFAULT_S3_TOOLS_IMAGE
    assert init["command"] == ["/bin/sh", "-c"]
    script = (ROOT / "templates/k8s/tier-c-fetch.sh").read_text()
    assert init["args"] == [script, "fetch-inputs", "s3://bkt/datasets/coco/", "s3://bkt/specs/train.yaml"]
    assert init["envFrom"] == [{"secretRef": {"name": "tao-creds-dino-train-1a2b3c", "optional": False}}]
    assert init["volumeMounts"] == [{"name": "workspace", "mountPath": "/workspace"}]
    assert "resources" not in init


def test_tier_c_runs_the_command_through_the_fixed_upload_wrapper():
    job = job_of(tier_c(upload_excludes=["*.tmp", "cache/*"]))
    container = container_of(job)
    script = (ROOT / "templates/k8s/tier-c-run.sh").read_text()
    assert container["args"] == [script, "kubectl-tao", BASE["command"], "*.tmp", "cache/*"]
    env = env_of(container)
    assert env["TAO_RESULTS_ROOT"] == "/workspace/results"
    assert env["TAO_UPLOAD_URI"] == "s3://bkt/results/dino-train-1a2b3c/"
    assert env["TAO_WORKSPACE"] == "/workspace"
    assert env["TAO_INPUTS_DIR"] == "/workspace/inputs"


def test_tier_c_workspace_is_an_empty_dir():
    volumes = {v["name"]: v for v in pod_of(job_of(tier_c()))["volumes"]}
    assert volumes["workspace"] == {"name": "workspace", "emptyDir": {}}


def test_tier_c_s3_results_dir_is_the_upload_destination():
    spec = tier_c(s3_output=None, results_dir="s3://bkt/runs/x/")
    assert env_of(container_of(job_of(spec)))["TAO_UPLOAD_URI"] == "s3://bkt/runs/x/"
    assert spec.effective_results_dir == "s3://bkt/runs/x/"


def test_tier_c_without_inputs_still_prepares_the_workspace():
    (init,) = pod_of(job_of(tier_c(s3_inputs=[])))["initContainers"]
    assert init["args"][1:] == ["fetch-inputs"]


def test_tier_c_warns_that_the_gpu_is_held_during_the_download():
    warnings = render.warnings_for(tier_c())
    assert any("holds its nvidia.com/gpu while fetch-inputs downloads" in w for w in warnings)
    assert any("without a credential Secret" in w for w in render.warnings_for(tier_c(env_secret=None)))


def test_tier_a_gets_no_tier_c_warning():
    assert not any("tier C" in w for w in render.warnings_for(make()))


# ---------------------------------------------------------------- validation


ERRORS = [
    ({"record_id": None, "name": None}, "give --name (the Kubernetes Job name) or --record-id"),
    ({"name": "Bad_Name"}, "job name is not a valid DNS label"),
    ({"name": "a" * 53}, "use at most 52"),
    ({"record_id": "bad/id", "name": "x"}, "record id 'bad/id' must match"),
    ({"namespace": "Prod"}, "namespace is not a valid DNS label"),
    ({"image": "bad image"}, "image must not contain whitespace"),
    ({"command": ""}, "command must not be empty"),
    ({"command": "  \n"}, "command must not be blank"),
    ({"gpus": -1}, "gpus must be a whole number from 0 to 64"),
    ({"gpus": 65}, "gpus must be a whole number from 0 to 64"),
    ({"gpus": True}, "gpus must be a whole number"),
    ({"nodes": 0}, "nodes must be a whole number from 1 to 1024"),
    ({"storage_tier": "B"}, "storage tier must be A (a bound PVC) or C"),
    ({"pvc": None}, "storage tier A needs --pvc"),
    ({"pvc": "Data"}, "pvc is not a valid Kubernetes name"),
    ({"s3_inputs": ["s3://bkt/a"]}, "need --storage-tier C"),
    ({"s3_output": "s3://bkt/a"}, "need --storage-tier C"),
    ({"mount_path": "workspace"}, "mount path must be an absolute path"),
    ({"mount_path": "/dev/shm"}, "would hide a system directory"),
    ({"mount_path": "/usr"}, "would hide a system directory"),
    ({"results_dir": "/elsewhere/out"}, "is not on the mounted volume"),
    ({"results_dir": "/workspace/../etc"}, "must be a normalized path"),
    ({"results_dir": "s3://B/x"}, "invalid bucket name"),
    ({"env_secret": "Creds"}, "env secret is not a valid Kubernetes name"),
    ({"image_pull_secret": "ngc_pull"}, "image pull secret is not a valid Kubernetes name"),
    ({"ttl_seconds": -1}, "ttl seconds must be a whole number from 0 to 604800"),
    ({"ttl_seconds": 604801}, "ttl seconds must be a whole number from 0 to 604800"),
    ({"shm_size": "16G"}, "shm size must be a positive whole number with a binary suffix"),
    ({"labels": ["tao-job=x"]}, "label #1 key 'tao-job' is set by kubectl-tao itself"),
    ({"labels": ["team=a b"]}, "is not a valid label value"),
    ({"labels": ["noequals"]}, "label #1 must look like KEY=VALUE"),
    ({"labels": ["a=1", "a=2"]}, "label #2: its KEY is given twice"),
    ({"annotations": ["kubectl-tao.io/record-id=x"]}, "annotation #1 key 'kubectl-tao.io/record-id' is set by"),
    ({"annotations": ["bad key=x"]}, "annotation #1 key is not a valid key: character 4 (a space)"),
    ({"nccl_socket_ifname": "eth0 eth1"}, "nccl socket ifname (character 5 (a space)) must be 1-256 characters"),
    ({"nccl_ib_hca": "$(x)"}, "nccl ib hca (character 1 ('$')) must be 1-256 characters"),
    ({"launcher": "mpirun"}, "launcher must be tao or torchrun"),
    ({"launcher": "torchrun"}, "--launcher torchrun is for multi-node jobs"),
    ({"retries_per_index": 1}, "retries per index apply to multi-node jobs"),
    ({"master_port": 0}, "master port must be a whole number from 1 to 65535"),
    ({"rendezvous_timeout_seconds": -5}, "rendezvous timeout must be a whole number from 0 to 86400"),
    ({"backoff_limit": 101}, "backoff limit must be a whole number from 0 to 100"),
    ({"active_deadline_seconds": 0}, "active deadline seconds must be a whole number from 1"),
    ({"node_selector": ["gpu=a b"]}, "node selector #1 value is not a valid label value: character 2 (a space)"),
    ({"tolerations": ["k=v:Sometimes"]}, "toleration 0 effect must be one of NoSchedule"),
    ({"tolerations": [{"key": "k", "operator": "Maybe"}]}, "toleration 0 operator must be Equal or Exists"),
    ({"tolerations": [{"operator": "Equal"}]}, "toleration 0 without a key must use operator Exists"),
    ({"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}, "with operator Exists must not have a value"),
    ({"tolerations": [{"key": "k", "colour": "red"}]}, "toleration 0 has unknown fields ['colour']"),
    ({"tolerations": [{"key": "k", "tolerationSeconds": 5}]}, "tolerationSeconds needs effect NoExecute"),
    ({"queue_name": "Team_A"}, "queue name is not a valid DNS label"),
]


@pytest.mark.parametrize(("options", "message"), ERRORS, ids=[m for _, m in ERRORS])
def test_validation_errors_name_the_field(options, message):
    refused = refusal(make, **options)
    assert message in str(refused)
    assert "\n" not in str(refused)
    assert refused.exit_code == 2


TIER_C_ERRORS = [
    ({"pvc": "data"}, "--pvc is for storage tier A"),
    ({"nodes": 2, "name": "multi"}, "storage tier C supports one node only"),
    ({"s3_output": None}, "storage tier C needs --s3-output"),
    ({"s3_output": "s3://bkt/out", "results_dir": "s3://bkt/other/"}, "give --s3-output or an s3:// --results-dir"),
    ({"results_dir": "/workspace/results"}, "must be an s3:// prefix in storage tier C"),
    ({"s3_inputs": ["s3://bkt"]}, "names no object: write s3://bkt/ to fetch the whole bucket"),
    ({"s3_inputs": ["s3://bkt/a/x.zip", "s3://bkt/b/x.zip"]}, "would both be fetched to inputs/x.zip"),
    ({"s3_inputs": ["http://bkt/a"]}, "s3 input must be an S3 URI"),
    ({"s3_output": "s3://bkt/a b"}, "s3 output must not contain whitespace"),
    ({"upload_excludes": ["a\nb"]}, "upload exclude pattern must not contain control characters"),
    ({"s3_tools_image": "a b"}, "s3 tools image must not contain whitespace"),
]


@pytest.mark.parametrize(("options", "message"), TIER_C_ERRORS, ids=[m for _, m in TIER_C_ERRORS])
def test_tier_c_validation_errors(options, message):
    assert message in str(refusal(tier_c, **options))


def test_matching_s3_output_and_results_dir_are_accepted():
    spec = tier_c(results_dir="s3://bkt/results/dino-train-1a2b3c/")
    assert spec.upload_destination == "s3://bkt/results/dino-train-1a2b3c/"


def test_lower_case_storage_tier_is_accepted():
    assert make(storage_tier="a").storage_tier == "A"


def test_parse_toleration_forms():
    assert flagvalues.parse_toleration("k") == {"key": "k", "operator": "Exists"}
    assert flagvalues.parse_toleration("k=v") == {"key": "k", "operator": "Equal", "value": "v"}
    with pytest.raises(UsageError, match="the key is empty, which would tolerate every NoSchedule taint"):
        flagvalues.parse_toleration(":NoSchedule")


# ---------------------------------------------------------------- YAML output and injection

NASTY = [
    "line1\nline2",
    "key: value",
    "---",
    "--- !!python/object:os.system",
    "{a: b}",
    '"quoted"',
    "'single'",
    "$(rm -rf /)",
    "`reboot`",
    "a; rm -rf / #",
    "yes",
    "off",
    "y",
    "0123",
    "null",
    "~",
    "1e3",
    "@@IMAGE@@",
    "tab\there",
    "\u2028line separator\u0085next",
    "emoji \U0001f680 and \x7f del",
    "- item",
    "&anchor *alias",
    "# comment",
    "%YAML 1.1",
    "!!binary aGk=",
    "\\u0041 literal backslash-u",
]


def _reparse_all(text):
    one_one = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    one_two = [doc for doc in YAML(typ="safe", pure=True).load_all(text) if doc is not None]
    return one_one, one_two


@pytest.mark.parametrize("value", NASTY)
def test_any_command_text_round_trips_as_one_value(value):
    spec = make(command=value, annotations={"note": value})
    objects = render.render(spec)
    for parsed in _reparse_all(render.to_yaml(objects)):
        assert parsed == objects
    job = objects[0]
    assert container_of(job)["args"] == [value]
    assert job["spec"]["template"]["metadata"]["annotations"]["note"] == value
    assert set(job) == {"apiVersion", "kind", "metadata", "spec"}


@pytest.mark.parametrize("value", NASTY)
def test_tier_c_command_text_is_only_a_positional_argument(value):
    job = job_of(tier_c(command=value, upload_excludes=[v for v in [value] if v.isprintable()]))
    args = container_of(job)["args"]
    assert args[0] == (ROOT / "templates/k8s/tier-c-run.sh").read_text()
    assert args[1:3] == ["kubectl-tao", value]
    for parsed in _reparse_all(render.to_yaml([job])):
        assert parsed == [job]


def test_command_text_appears_nowhere_but_its_own_argument():
    marker = "echo UNIQUE-MARKER-42 && $(whoami)"
    job = job_of(tier_c(command=marker))
    holders = [s for s in strings_in(kubelet_text.as_delivered([job])[0]) if "UNIQUE-MARKER-42" in s]
    assert holders == [marker]


@settings(max_examples=150, deadline=None)
@given(st.text(min_size=1).filter(lambda s: "\x00" not in s and s.strip()))
def test_random_commands_and_annotations_round_trip_through_yaml_1_1(value):
    objects = render.render(make(command=value, annotations={"k": value}))
    assert list(yaml.safe_load_all(render.to_yaml(objects))) == objects


@pytest.mark.parametrize("value", ["yes", "off", "y", "n", "on", "no", "true", "0123", "0x1f", "1_000", "12:30"])
def test_yaml_1_1_lookalikes_stay_strings(value):
    as_label = names.is_label_value(value)
    objects = render.render(make(annotations={"v": value}, labels=[f"v={value}"] if as_label else []))
    (parsed,) = yaml.safe_load_all(render.to_yaml(objects))
    assert parsed["spec"]["template"]["metadata"]["annotations"]["v"] == value
    assert isinstance(parsed["spec"]["template"]["metadata"]["annotations"]["v"], str)
    if as_label:
        assert parsed["metadata"]["labels"]["v"] == value


def test_to_yaml_is_block_yaml_with_a_separator_between_documents():
    """As `kubectl create --dry-run=client -o yaml` prints several objects: `---` between them, keys sorted."""
    text = render.to_yaml([{"kind": "Service", "apiVersion": "v1"}, {"b": "yes", "a": [1, "on"]}])
    assert text == 'apiVersion: v1\nkind: Service\n---\na:\n- 1\n- "on"\nb: "yes"\n'
    assert render.to_yaml([{"kind": "Job"}]) == "kind: Job\n"


def test_to_json_is_the_object_or_a_list():
    assert json.loads(render.to_json([{"kind": "Job"}])) == {"kind": "Job"}
    assert json.loads(render.to_json([{"kind": "Service"}, {"kind": "Job"}]))["kind"] == "List"


def test_filled_template_text_parses_the_same_in_yaml_1_1():
    spec = make(command="yes: no\n---\n- x", annotations={"a": "off"})
    values_text = templates.fill(
        templates.load_template("single-pod-job.yaml.tmpl"),
        {
            **render._job_values(spec),
            "BACKOFF_LIMIT": 0,
            "ARGS": [spec.command],
            "ENV": [],
            "INIT_CONTAINERS": None,
            "WORKSPACE_PVC": {"claimName": "d"},
            "WORKSPACE_EMPTY_DIR": None,
        },
    )
    (one_one,) = yaml.safe_load_all(values_text)
    assert templates.prune_nulls(one_one) == templates.parse_documents(values_text)[0]
    assert one_one["spec"]["template"]["spec"]["containers"][0]["args"] == ["yes: no\n---\n- x"]


def test_every_free_form_field_round_trips_with_yaml_and_shell_syntax():
    # The images are not free-form: they follow the container runtime's grammar (test_imageref.py).
    weird = {
        "mount_path": "/work space/\"q\": {x} --- 'y' $(id)",
        "command": "echo '--- {a: b}' \"$(id)\" `x` ; exit 0",
        "annotations": {"note": "key: value\n---\n- item"},
        "nccl_socket_ifname": "^=eth0,lo",
    }
    spec = tier_c(
        **weird,
        s3_inputs=["s3://bkt/a'b\"c{d}:$(id)`x`/"],
        upload_excludes=["*.tmp: {x} '---'"],
        s3_tools_image="registry:5000/tools/aws-cli:2.22.0",
    )
    objects = render.render(spec)
    for parsed in _reparse_all(render.to_yaml(objects)):
        assert parsed == objects
    job = objects[0]
    pod = pod_of(job)
    assert pod["containers"][0]["volumeMounts"][1]["mountPath"] == weird["mount_path"]
    assert pod["initContainers"][0]["args"][2:] == ["s3://bkt/a'b\"c{d}:$(id)`x`/"]
    assert pod["initContainers"][0]["image"] == "registry:5000/tools/aws-cli:2.22.0"
    assert pod["containers"][0]["args"][2:] == [weird["command"], "*.tmp: {x} '---'"]
    assert env_of(pod["containers"][0])["TAO_RESULTS_ROOT"] == weird["mount_path"] + "/results"
