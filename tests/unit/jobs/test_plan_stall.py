"""--stall-timeout through the plan: checked as the flag, rendered into each pod as the watch's environment and
its script (templates/k8s/stall-watch.sh), never pasted into shell text; kept in the stored request."""

from __future__ import annotations

from typing import Any

import pytest

from kubectl_tao.core import templates
from kubectl_tao.core.errors import UsageError
from kubectl_tao.jobs.flags import job_request
from kubectl_tao.jobs.plan import JobRequest, build, flags_stored, stored
from kubectl_tao.manifests import kubelet_text
from kubectl_tao.restarts import table

WATCH = templates.load_template("stall-watch.sh")


def flags(**over: Any) -> JobRequest:
    base = {"image": "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt", "command": "dino train -e /workspace/spec.yaml",
            "pvc": "tao-data", "gpus": 8}
    return job_request(**{**base, **over})


def container(over: dict[str, Any]) -> dict[str, Any]:
    # the container as the kubelet delivers it (the rendered text escapes $( from its variable references)
    job = kubelet_text.as_delivered(build(flags(**over), "ns", {}).render("j", "rec-1", None))[-1]
    found: dict[str, Any] = job["spec"]["template"]["spec"]["containers"][0]
    return found


def env(found: dict[str, Any]) -> dict[str, str | None]:
    return {e["name"]: e.get("value") for e in found["env"]}


def test_off_by_default_the_pod_runs_the_command_as_before() -> None:
    found = container({})
    assert found["args"] == ["dino train -e /workspace/spec.yaml"]
    assert not {"TAO_STALL_TIMEOUT", "TAO_STALL_GRACE_SECONDS"} & env(found).keys()
    for over in ({"nodes": 2}, {"nodes": 2, "max_restarts": 1}):
        assert "stall_watch()" not in container(over)["args"][0]


def test_a_single_pod_runs_the_command_through_the_watch_with_the_seconds_in_its_environment() -> None:
    found = container({"stall_timeout": "30m"})
    assert found["command"] == ["/bin/sh", "-c"]
    assert found["args"] == [WATCH, "stall-watch", "/bin/sh", "-c", "dino train -e /workspace/spec.yaml"]
    assert (env(found)["TAO_STALL_TIMEOUT"], env(found)["TAO_STALL_GRACE_SECONDS"]) == ("1800", "30")


@pytest.mark.parametrize(
    ("over", "entrypoint", "grace"),
    [
        ({"nodes": 2}, "indexed-rank-entrypoint.sh", "30"),
        ({"nodes": 2, "max_restarts": 1}, "gang-restart-entrypoint.sh", "120"),
        ({"nodes": 2, "max_restarts": 1, "termination_grace_period": 45}, "gang-restart-entrypoint.sh", "45"),
    ],
)
def test_each_rank_entrypoint_gets_the_watch_before_it_and_the_grace_of_the_pod(
    over: dict[str, Any], entrypoint: str, grace: str
) -> None:
    found = container({**over, "stall_timeout": "1h30m"})
    assert found["args"][0] == WATCH + "\n" + templates.load_template(entrypoint)
    assert found["args"][1:] == ["kubectl-tao", templates.load_template("rendezvous-barrier.sh"), "tao",
                                 "dino train -e /workspace/spec.yaml"]
    assert (env(found)["TAO_STALL_TIMEOUT"], env(found)["TAO_STALL_GRACE_SECONDS"]) == ("5400", grace)


def test_tier_c_runs_its_command_through_the_watch_and_still_uploads() -> None:
    found = container({"stall_timeout": "20s", "storage_tier": "C", "s3_output": "s3://bkt/out", "pvc": None})
    assert found["args"][0] == WATCH + "\n" + templates.load_template("tier-c-run.sh")
    assert found["args"][1:3] == ["kubectl-tao", "dino train -e /workspace/spec.yaml"]
    assert env(found)["TAO_STALL_TIMEOUT"] == "20"


def test_zero_is_off() -> None:
    found = container({"stall_timeout": "0"})
    assert found["args"] == ["dino train -e /workspace/spec.yaml"] and "TAO_STALL_TIMEOUT" not in env(found)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("1800", "not a duration"),
        ("30 m", "not a duration"),
        ("abc", "not a duration"),
        ("", "not a duration"),
        ("10x", "not a duration"),
        ("1.5s", "not a whole number of seconds"),
        ("9s", "below the range"),
        ("-5m", "below the range"),
        ("169h", "above the range"),
    ],
)
def test_a_bad_duration_is_refused_in_one_line_naming_the_flag_and_the_fix(value: str, why: str) -> None:
    with pytest.raises(UsageError) as caught:
        build(flags(stall_timeout=value), "ns", {})
    message = caught.value.message
    assert message == (
        f"--stall-timeout: {why}: give a duration as Go writes one, such as 30m, 1h30m or 90s, 10s to 168h0m0s "
        "(0 = off)"
    )
    assert caught.value.exit_code == 2


def test_the_kept_request_holds_the_flag_so_resubmit_builds_the_same_watch() -> None:
    kept = stored(flags(stall_timeout="45m"))
    assert kept["flags"]["stall_timeout"] == "45m" and "stall_timeout" in kept["given"]
    again = job_request(frozenset(kept["given"]), **flags_stored(kept["flags"]))
    assert env(container({**{k: getattr(again, k) for k in ("image", "command", "pvc", "gpus")},
                          "stall_timeout": again.stall_timeout}))["TAO_STALL_TIMEOUT"] == "2700"


def test_an_action_request_refuses_the_flag(tmp_path: Any) -> None:
    with pytest.raises(UsageError, match=r"^--stall-timeout does not apply to --action-request"):
        build(job_request(frozenset({"stall_timeout"}), action_request=str(tmp_path / "r.json"),
                          stall_timeout="30m"), "ns", {})


def test_the_watch_exits_with_the_stalled_code_of_the_table_the_pod_is_given() -> None:
    assert "sw_rc=$sw_stalled" in WATCH and str(table.EXIT_STALLED) not in WATCH
    assert env(container({"image": "img", "command": "train", "pvc": "c", "gpus": 1, "stall_timeout": "30m"}))[
        "TAO_EXIT_CODES"] == table.pod_text()
