"""render.py, several nodes: headless Service + Indexed Job, rendezvous env, barrier, policies."""

from __future__ import annotations

import pytest
import yaml
from support import ROOT as REPO_ROOT
from support.specs import multi_node_spec, refusal

from kubectl_tao.core.errors import UsageError
from kubectl_tao.manifests import kubelet_text, render

ROOT = REPO_ROOT
ENTRYPOINT = (ROOT / "templates/k8s/indexed-rank-entrypoint.sh").read_text()
BARRIER = (ROOT / "templates/k8s/rendezvous-barrier.sh").read_text()


def make(**options):
    return multi_node_spec(4, **options)


def objects_of(spec):
    service, job = render.render(spec)
    return service, job


def container_of(job):
    """The container as it runs (after the kubelet's `$(VAR)` / `$$` expansion)."""
    (container,) = kubelet_text.as_delivered([job])[0]["spec"]["template"]["spec"]["containers"]
    return container


def env_of(job):
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container_of(job)["env"]}


def test_service_comes_first_and_is_headless():
    service, job = objects_of(make())
    assert (service["kind"], job["kind"]) == ("Service", "Job")
    assert service["apiVersion"] == "v1"
    assert service["metadata"]["name"] == "dino-train-1a2b3c"
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == {"job-name": "dino-train-1a2b3c"}
    assert service["spec"]["ports"] == [{"name": "rendezvous", "port": 29500, "targetPort": 29500, "protocol": "TCP"}]
    assert service["metadata"]["annotations"] == {"kubectl-tao.io/record-id": "dino-train-1a2b3c"}


def test_job_is_indexed_with_one_pod_per_node():
    _, job = objects_of(make())
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == 4
    assert spec["backoffLimit"] == 0
    assert "backoffLimitPerIndex" not in spec
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == "dino-train-1a2b3c"
    assert pod["restartPolicy"] == "Never"
    term = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term == {
        "labelSelector": {"matchLabels": {"tao-job": "dino-train-1a2b3c"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    assert container_of(job)["resources"] == {"limits": {"nvidia.com/gpu": "8"}}
    assert container_of(job)["ports"] == [{"name": "rendezvous", "containerPort": 29500, "protocol": "TCP"}]


def test_rendezvous_environment_uses_both_conventions():
    env = env_of(objects_of(make())[1])
    assert env["WORLD_SIZE"] == "4"
    assert env["NNODES"] == "4"
    assert env["NUM_GPU_PER_NODE"] == "8"
    assert env["NPROC_PER_NODE"] == "8"
    assert env["NODE_RANK"] == {
        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
    }
    assert env["MASTER_ADDR"] == "dino-train-1a2b3c-0.dino-train-1a2b3c"
    assert env["MASTER_PORT"] == "29500"
    assert env["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["TAO_K8S_JOB_NAME"] == "dino-train-1a2b3c"
    assert env["RENDEZVOUS_TIMEOUT"] == "300"
    assert env["TAO_RESULTS_ROOT"] == "/workspace/results/dino-train-1a2b3c"


def test_custom_master_port_reaches_service_container_and_env():
    service, job = objects_of(make(master_port=23456))
    assert service["spec"]["ports"][0]["port"] == 23456
    assert container_of(job)["ports"][0]["containerPort"] == 23456
    assert env_of(job)["MASTER_PORT"] == "23456"


def test_nccl_environment_is_optional():
    assert "NCCL_SOCKET_IFNAME" not in env_of(objects_of(make())[1])
    env = env_of(objects_of(make(nccl_socket_ifname="eth0", nccl_ib_hca="mlx5_0,mlx5_1"))[1])
    assert (env["NCCL_SOCKET_IFNAME"], env["NCCL_IB_HCA"]) == ("eth0", "mlx5_0,mlx5_1")


def test_zero_gpus_still_runs_one_process_per_node():
    _, job = objects_of(make(gpus=0))
    assert "resources" not in container_of(job)
    assert env_of(job)["NUM_GPU_PER_NODE"] == "0"
    assert env_of(job)["NPROC_PER_NODE"] == "1"


def test_tao_launcher_passes_the_command_as_one_argument():
    command = "dino train -e spec.yaml; echo $(hostname) `id` > /tmp/x"
    _, job = objects_of(make(command=command))
    container = container_of(job)
    assert container["command"] == ["/bin/sh", "-c"]
    assert container["args"] == [ENTRYPOINT, "kubectl-tao", BARRIER, "tao", command]


def test_torchrun_launcher_passes_the_script_and_arguments_as_argv():
    command = "train.py --data '/workspace/my data' --epochs 3 --sep ';' # the comment is no argument"
    _, job = objects_of(make(launcher="torchrun", command=command))
    assert container_of(job)["args"] == [
        ENTRYPOINT, "kubectl-tao", BARRIER, "torchrun", "train.py", "--data", "/workspace/my data", "--epochs", "3",
        "--sep", ";",
    ]


@pytest.mark.parametrize(
    ("command", "refused"),
    [
        ("train.py --epochs 3 ; rm -rf /", "';', a shell operator, at character 21"),
        ("train.py --out $RESULTS_DIR", "'$', a shell expansion, at character 16"),
        ("train.py\n--epochs 3", "a second command after a line break"),
    ],
)
def test_torchrun_refuses_what_only_a_shell_would_run_as_written(command, refused):
    with pytest.raises(UsageError) as info:
        make(launcher="torchrun", command=command)
    assert str(info.value).startswith(f"command cannot be split into torchrun arguments: {refused}")
    assert "\n" not in str(info.value)


def test_torchrun_arguments_are_split_like_a_shell_would():
    _, job = objects_of(make(launcher="torchrun", command="train.py --name 'two words'"))
    assert container_of(job)["args"][4:] == ["train.py", "--name", "two words"]


def test_pod_failure_policy_fails_the_job_on_rendezvous_timeout():
    _, job = objects_of(make())
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert rules == [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
        {"action": "FailJob", "onExitCodes": {"containerName": "tao", "operator": "In", "values": [88]}},
    ]


def test_retries_per_index_use_backoff_limit_per_index_and_fail_index_on_sigkill():
    _, job = objects_of(make(retries_per_index=2))
    assert job["spec"]["backoffLimitPerIndex"] == 2
    assert "backoffLimit" not in job["spec"]
    assert job["spec"]["podFailurePolicy"]["rules"][-1] == {
        "action": "FailIndex",
        "onExitCodes": {"containerName": "tao", "operator": "In", "values": [137]},
    }


def test_queue_labels_the_job_only_and_suspends_it():
    service, job = objects_of(make(queue_name="gpu-queue"))
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-queue"
    assert job["spec"]["suspend"] is True
    assert "kueue.x-k8s.io/queue-name" not in service["metadata"]["labels"]


def test_rendezvous_can_be_disabled_with_a_warning():
    spec = make(rendezvous_timeout_seconds=0)
    assert env_of(objects_of(spec)[1])["RENDEZVOUS_TIMEOUT"] == "0"
    assert any("rendezvous barrier disabled" in w for w in render.warnings_for(spec))


def test_multi_node_warns_about_read_write_many():
    assert any("ReadWriteMany" in w for w in render.warnings_for(make()))


def test_render_chooses_the_indexed_form_by_node_count():
    assert [o["kind"] for o in render.render(make(nodes=2))] == ["Service", "Job"]
    assert [o["kind"] for o in render.render(make(nodes=1))] == ["Job"]


def test_render_indexed_refuses_one_node():
    with pytest.raises(UsageError, match="an Indexed Job needs nodes > 1"):
        render.render_indexed(make(nodes=1))


def test_output_round_trips_in_yaml_1_1():
    objects = render.render(make(command="yes\n---\nkey: {a}", annotations={"x": "off"}))
    assert list(yaml.safe_load_all(render.to_yaml(objects))) == objects


ERRORS = [
    ({"name": "7-ranks", "record_id": "r"}, "job name must start with a letter"),
    ({"storage_tier": "C", "pvc": None, "s3_output": "s3://bkt/o"}, "storage tier C supports one node only"),
    ({"launcher": "torchrun", "command": "train.py 'open"}, "command cannot be split into torchrun arguments"),
    ({"launcher": "torchrun", "command": "   "}, "command must not be blank"),
    ({"nodes": 1025}, "nodes must be a whole number from 1 to 1024"),
    ({"retries_per_index": 101}, "retries per index must be a whole number from 0 to 100"),
    ({"master_port": 70000}, "master port must be a whole number from 1 to 65535"),
    ({"rendezvous_timeout_seconds": 86401}, "rendezvous timeout must be a whole number from 0 to 86400"),
]


@pytest.mark.parametrize(("options", "message"), ERRORS, ids=[m for _, m in ERRORS])
def test_multi_node_validation_errors(options, message):
    assert message in str(refusal(make, **options))


def test_torchrun_with_an_empty_script_name_is_refused():
    with pytest.raises(UsageError, match="must name the training script"):
        make(launcher="torchrun", command="''")
