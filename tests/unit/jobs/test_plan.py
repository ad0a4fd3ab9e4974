"""Flag validation before any cluster call: each bad input gives its one-line error (exit 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubectl_tao.core.errors import UsageError
from kubectl_tao.jobs.flags import job_request
from kubectl_tao.jobs.plan import GPU_TOLERATION, JobRequest, build, read_credentials


def flags(**over: Any) -> JobRequest:
    base = {
        "image": "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt",
        "command": "dino train -e /workspace/spec.yaml",
        "pvc": "tao-data",
        "gpus": 8,
    }
    return job_request(**{**base, **over})


def test_a_valid_single_node_plan_renders_one_job() -> None:
    plan = build(flags(), "ns", {})
    objects = plan.render("dino-train-abc123", "dino-train-abc123", None)
    assert [o["kind"] for o in objects] == ["Job"]
    assert plan.record["results_root"] == "/workspace/results"
    assert GPU_TOLERATION in plan.tolerations


def test_results_dir_defaults_under_the_mount_per_record() -> None:
    plan = build(flags(), "ns", {})
    job = plan.render("n1", "rec-1", None)[0]
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["TAO_RESULTS_ROOT"] == "/workspace/results/rec-1"


def test_multi_node_plan_needs_version_1_28() -> None:
    plan = build(flags(nodes=2), "ns", {})
    assert plan.min_version == (1, 28)
    assert [o["kind"] for o in plan.render("j", "j", None)] == ["Service", "Job"]


def test_retries_per_index_needs_1_29() -> None:
    assert build(flags(nodes=2, retries_per_index=2), "ns", {}).min_version == (1, 29)


def test_credentials_become_a_secret_reference_only() -> None:
    plan = build(flags(), "ns", {"HF_TOKEN": "hf_canaryvalue1234567890"})
    job = plan.render("j", "j", "tao-creds-j")[0]
    text = str(job)
    assert "hf_canaryvalue1234567890" not in text
    assert {"secretRef": {"name": "tao-creds-j", "optional": False}} in job["spec"]["template"]["spec"]["containers"][
        0
    ]["envFrom"]


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"image": None}, "--image is required"),
        ({"command": None}, "--command is required"),
        ({"storage_tier": "B"}, "--storage-tier 'B': use A"),
        ({"network_arch": "two words"}, "--network-arch: give a short word"),
        ({"action": ""}, "--action: give a short word"),
        ({"results_dir": "/elsewhere/out"}, "must be on the mounted volume"),
        ({"storage_tier": "C", "pvc": None}, "--storage-tier C needs --s3-output"),
        ({"results_dir": "relative/dir"}, "results"),
    ],
)
def test_bad_flags_are_refused_with_the_field_named(over: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        build(flags(**over), "ns", {})


def test_action_request_rejects_image_flag(tmp_path: Path) -> None:
    request = tmp_path / "r.json"
    request.write_text("{}", encoding="utf-8")
    with pytest.raises(UsageError, match="drop --image/--command"):
        build(flags(action_request=str(request)), "ns", {})


def test_env_file_missing_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--env-file: cannot read"):
        read_credentials(str(tmp_path / "none.env"), None)


def test_env_name_must_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(UsageError, match=r"--env #1 \(HF_TOKEN\): the variable is not set"):
        read_credentials(None, ["HF_TOKEN"])


def test_env_name_and_file_duplicate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.env"
    path.write_text("HF_TOKEN=a\n", encoding="utf-8")
    monkeypatch.setenv("HF_TOKEN", "b")
    with pytest.raises(UsageError, match="also given in --env-file"):
        read_credentials(str(path), ["HF_TOKEN"])


def test_env_file_from_stdin_maps_legacy_names() -> None:
    creds = read_credentials("-", None, stdin_text="ACCESS_KEY=a\nSECRET_KEY=b\n")
    assert creds == {"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"}


def test_existing_env_secret_is_referenced_and_checked() -> None:
    plan = build(flags(env_secret="team-creds"), "ns", {})
    job = plan.render("j", "j", None)[0]
    env_from = job["spec"]["template"]["spec"]["containers"][0]["envFrom"]
    assert {"secretRef": {"name": "team-creds", "optional": False}} in env_from
    assert plan.secret_refs == {"team-creds": []}


def test_env_secret_and_credentials_are_exclusive() -> None:
    with pytest.raises(UsageError, match="--env-secret names an existing Secret"):
        build(flags(env_secret="team-creds"), "ns", {"HF_TOKEN": "x"})


def test_s3_tools_image_is_the_tier_c_fetch_steps_image() -> None:
    tier_c = {"storage_tier": "C", "pvc": None, "s3_output": "s3://bkt/out", "s3_input": ["s3://bkt/in/x.txt"]}
    job = build(flags(**tier_c, s3_tools_image="kubectl-tao.local/s3-tools:1"), "ns", {}).render("j", "r", None)[0]
    (fetch,) = job["spec"]["template"]["spec"]["initContainers"]
    assert fetch["image"] == "kubectl-tao.local/s3-tools:1"
    default = build(flags(**tier_c), "ns", {}).render("j", "r", None)[0]
    assert default["spec"]["template"]["spec"]["initContainers"][0]["image"] == "docker.io/amazon/aws-cli:2.22.0"


def test_s3_tools_image_needs_tier_c() -> None:
    with pytest.raises(UsageError, match=r"^--s3-tools-image is the image of tier C's fetch step: it needs "
                                         r"--storage-tier C$"):
        build(flags(s3_tools_image="kubectl-tao.local/s3-tools:1"), "ns", {})


# ------------------------------------------------------------------------------------------- --topology


def test_topology_with_a_queue_sets_kueues_annotation_on_the_pod_template() -> None:
    plan = build(flags(nodes=2, queue="team", topology="example.com/rack"), "ns", {})
    job = plan.render("j", "j", None)[-1]
    annotations = job["spec"]["template"]["metadata"]["annotations"]
    assert annotations["kueue.x-k8s.io/podset-required-topology"] == "example.com/rack"
    assert plan.topology.label == "example.com/rack" and plan.topology.required
    preferred = build(flags(nodes=2, queue="team", topology="example.com/rack:preferred"), "ns", {})
    annotations = preferred.render("j", "j", None)[-1]["spec"]["template"]["metadata"]["annotations"]
    assert annotations["kueue.x-k8s.io/podset-preferred-topology"] == "example.com/rack"
    assert "kueue.x-k8s.io/podset-required-topology" not in annotations


def test_required_topology_without_a_queue_or_native_topology_is_refused() -> None:
    from kubectl_tao.k8s import gang

    plan = build(flags(nodes=2, topology="example.com/rack"), "ns", {})
    with pytest.raises(UsageError) as caught:
        gang.choose(plan.nodes, plan.queue, None, plan.gang_mode, plan.topology)
    assert caught.value.message.startswith(
        "--topology example.com/rack: nothing keeps every rank in one example.com/rack domain without --queue: "
        "no native gang here"
    )
    native_without_topology = gang.Support(True, "served", topology=False)
    with pytest.raises(UsageError, match="drops the topology constraints of their PodGroups; an admin enables"):
        gang.choose(2, None, native_without_topology, "auto", plan.topology)
    one_rank = build(flags(nodes=1, topology="example.com/rack"), "ns", {})  # one pod: always in one domain
    assert gang.choose(1, None, None, one_rank.gang_mode, one_rank.topology).kind == gang.NONE


def test_required_topology_on_a_native_gang_with_topology_sets_the_jobs_constraint() -> None:
    from kubectl_tao.k8s import gang

    plan = build(flags(nodes=2, topology="example.com/rack"), "ns", {})
    mechanism = gang.choose(2, None, gang.Support(True, "served", topology=True), "auto", plan.topology)
    assert mechanism.kind == gang.NATIVE and mechanism.topology_key == "example.com/rack"
    job = gang.apply(plan.render("j", "j", None), mechanism)[-1]
    assert job["spec"]["scheduling"] == {
        "schedulingPolicy": {"gang": {"minCount": 2}},
        "schedulingConstraints": {"topology": [{"key": "example.com/rack"}]},
    }


def test_preferred_topology_without_a_queue_warns_and_sets_nothing() -> None:
    plan = build(flags(nodes=2, topology="example.com/rack:preferred"), "ns", {})
    assert any(w.startswith("--topology example.com/rack:preferred without --queue") for w in plan.warnings)
    annotations = plan.render("j", "j", None)[-1]["spec"]["template"]["metadata"]["annotations"]
    assert not any("topology" in key for key in annotations)


def test_a_bad_topology_label_is_refused_before_anything() -> None:
    with pytest.raises(UsageError, match=r"^--topology 'a b': not a node label key"):
        build(flags(nodes=2, queue="team", topology="a b"), "ns", {})


@pytest.mark.parametrize(
    ("typo", "typo_message", "combined", "credentials", "combined_message"),
    [
        ({"gang": "bogus"}, r"^--gang 'bogus': ", {"storage_tier": "C", "pvc": None}, {}, r"^--storage-tier C needs"),
        (
            {"topology": "bad key!", "nodes": 2, "queue": "team"},
            r"^--topology 'bad key!': not a node label key",
            {"env_secret": "s"},
            {"HF_TOKEN": "x"},
            r"^--env-secret names an existing Secret",
        ),
        (
            {"gang": "bogus"},
            r"^--gang 'bogus': ",
            {"results_dir": "/elsewhere"},
            {},
            r"^--results-dir /elsewhere: must be on the mounted volume",
        ),
    ],
)
def test_a_typo_in_one_flag_is_named_before_a_check_that_combines_flags(
    typo: dict[str, Any],
    typo_message: str,
    combined: dict[str, Any],
    credentials: dict[str, str],
    combined_message: str,
) -> None:
    with pytest.raises(UsageError, match=combined_message):  # the second fault is refused on its own
        build(flags(**combined), "ns", credentials)
    with pytest.raises(UsageError, match=typo_message):
        build(flags(**typo, **combined), "ns", credentials)
# ---------------------------------------------------------------- --max-restarts, --termination-grace-period


def test_max_restarts_reaches_the_rendered_job_of_a_multi_node_plan() -> None:
    plan = build(flags(nodes=2, max_restarts=3), "ns", {})
    job = plan.render("j", "rec-1", None)[-1]
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["TAO_MAX_RESTARTS"] == "3"
    assert container["restartPolicyRules"][0]["action"] == "RestartAllContainers"
    assert job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 120


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"nodes": 2, "max_restarts": -1}, "--max-restarts -1: give 0 (no restarts) to 20"),
        ({"nodes": 2, "max_restarts": 99999}, "--max-restarts 99999: give 0 (no restarts) to 20"),
        ({"max_restarts": 2}, "--max-restarts restarts the ranks of a multi-node job (--nodes 2 or more)"),
        ({"termination_grace_period": -1}, "--termination-grace-period -1: give 0 to 86400 seconds"),
        ({"nodes": 2, "max_restarts": 1, "retries_per_index": 1}, "--max-restarts and --retries-per-index"),
    ],
)
def test_bad_restart_flags_are_refused_in_one_line(over: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        build(flags(**over), "ns", {})
    assert message in caught.value.message
    assert "\n" not in caught.value.message
    assert caught.value.exit_code == 2
