"""render.py with --max-restarts: the restart rule, the gang entrypoint, the attempt environment, the grace period;
and without it, the manifests of before."""

from __future__ import annotations

import pytest
from support import ROOT
from support.specs import multi_node_spec

from kubectl_tao.core.errors import UsageError
from kubectl_tao.manifests import kubelet_text, render
from kubectl_tao.restarts import signs, table

GANG_ENTRYPOINT = (ROOT / "templates/k8s/gang-restart-entrypoint.sh").read_text()
RANK_ENTRYPOINT = (ROOT / "templates/k8s/indexed-rank-entrypoint.sh").read_text()


def make(**options):
    return multi_node_spec(2, **options)


def pod_of(spec):
    job = render.render(spec)[-1]
    return kubelet_text.as_delivered([job])[0]["spec"]["template"]["spec"], job


def test_restarts_add_the_restart_all_containers_rule_on_the_entrypoints_restart_code() -> None:
    pod, _ = pod_of(make(max_restarts=3))
    (container,) = pod["containers"]
    assert container["restartPolicy"] == "Never"
    assert container["restartPolicyRules"] == [
        {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [table.EXIT_RESTART]}}
    ]
    assert pod["restartPolicy"] == "Never"  # the Job's pods still fail on any other exit


def test_restarts_run_the_gang_entrypoint_with_the_barrier_and_the_users_words() -> None:
    pod, _ = pod_of(make(max_restarts=1, launcher="torchrun", command="train.py --epochs 3"))
    args = pod["containers"][0]["args"]
    assert args[0] == GANG_ENTRYPOINT
    assert args[1:] == ["kubectl-tao", (ROOT / "templates/k8s/rendezvous-barrier.sh").read_text(), "torchrun",
                        "train.py", "--epochs", "3"]


def test_restarts_give_every_rank_the_budget_the_table_of_exit_codes_and_the_shared_directory() -> None:
    pod, _ = pod_of(make(max_restarts=2, mount_path="/data"))
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["TAO_MAX_RESTARTS"] == "2"
    assert env["TAO_EXIT_CODES"] == table.pod_text()
    assert "TAO_RETRY_EXIT_CODES" not in env
    assert env["TAO_GANG_DIR"] == "/data/.kubectl-tao/restarts/dino-train-1a2b3c"
    # the same results directory in every attempt
    assert env["TAO_RESULTS_ROOT"] == "/data/results/dino-train-1a2b3c"


def test_restarts_give_every_rank_the_signs_of_each_class_as_delivered_to_the_container() -> None:
    pod, _ = pod_of(make(max_restarts=1))
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    # after the kubelet's $(...) expansion the container sees exactly restarts/signs' rows (causes.py's table)
    assert env["TAO_RETRY_SIGNS"] == signs.signs_text()
    rows = env["TAO_RETRY_SIGNS"].splitlines()
    assert rows[0].startswith("ERR_INFRA primary Stalled ")  # the stall watch's line outranks what the program printed
    assert any(row.startswith("ERR_PROGRAM primary DeviceAssert ") for row in rows)
    assert len(env["TAO_RETRY_SIGNS"]) < 4096
    plain, _ = pod_of(make(max_restarts=0))
    assert "TAO_RETRY_SIGNS" not in {e["name"] for e in plain["containers"][0]["env"]}


def test_the_job_still_ignores_disruptions_and_fails_at_once_on_a_final_88() -> None:
    _, job = pod_of(make(max_restarts=2))
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]} in rules
    assert any(r["action"] == "FailJob" and r["onExitCodes"]["values"] == [88] for r in rules)
    assert job["spec"]["backoffLimit"] == 0


def test_restarts_default_to_a_grace_period_long_enough_to_save_a_checkpoint() -> None:
    pod, _ = pod_of(make(max_restarts=1))
    assert pod["terminationGracePeriodSeconds"] == render.DEFAULT_RESTART_GRACE_SECONDS
    pod, _ = pod_of(make(max_restarts=1, termination_grace_seconds=600))
    assert pod["terminationGracePeriodSeconds"] == 600


def test_the_grace_period_flag_applies_to_single_node_jobs_too() -> None:
    job = render.render(make(nodes=1, termination_grace_seconds=45))[0]
    assert job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 45


@pytest.mark.parametrize("nodes", [1, 2])
def test_without_restarts_the_manifests_have_no_rule_no_grace_and_the_plain_entrypoint(nodes: int) -> None:
    objects = render.render(make(nodes=nodes))
    text = render.to_yaml(objects)
    for word in ("restartPolicyRules", "terminationGracePeriodSeconds", "TAO_MAX_RESTARTS", "TAO_GANG_DIR"):
        assert word not in text
    job = objects[-1]
    containers = job["spec"]["template"]["spec"]["containers"]
    assert "restartPolicy" not in containers[0]
    if nodes > 1:
        assert containers[0]["args"][0] == kubelet_text.escape(RANK_ENTRYPOINT)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_restarts": -1}, "max restarts must be a whole number from 0 to 20, got -1"),
        ({"max_restarts": 10**6}, "max restarts must be a whole number from 0 to 20"),
        ({"max_restarts": 1, "nodes": 1}, "--max-restarts restarts the ranks of a multi-node job"),
        ({"max_restarts": 1, "retries_per_index": 1}, "--max-restarts and --retries-per-index"),
        ({"termination_grace_seconds": -5}, "termination grace period must be a whole number from 0 to 86400"),
    ],
)
def test_bad_restart_settings_are_refused(options: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        make(**options)
