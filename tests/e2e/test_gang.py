"""Gang scheduling of multi-node jobs on the real scheduler, with the simulated GPU nodes (2 x 8 GPUs; no GPU
exists). One node is held by a running 8-GPU job, so a 2 x 8 job has one free node:

- native gang (Kubernetes 1.37+, the default there): no rank of the 2 x 8 job is bound, its PodGroup says why,
  status and explain show it, a 1 x 8 job still runs on the free GPUs meanwhile, and once the holder goes the
  gang starts whole;
- without gang (`--gang off`, or a 1.36 server): one rank starts and holds its GPUs while the other waits.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from support.cluster import STAY_RUNNING, TAO_IMAGE, Tao, k8s_minor, kubectl_json, submitted_id, wait_for

pytestmark = pytest.mark.e2e

NATIVE = k8s_minor() >= 37  # scripts/local-cluster turns workload-aware scheduling on from 1.37


@pytest.fixture(autouse=True)
def release_gpus(tao: Tao) -> Iterator[None]:
    """Start with both simulated GPU nodes free (earlier tests' pods may still be going) and leave them so."""
    wait_for(lambda: tao("fit", "--gpus", "8", "--nodes", "2").returncode == 0, 90, message="16 free GPUs")
    yield
    tao.kubectl("delete", "jobs", "--all", "--cascade=foreground", "--wait=false", check=False)
    wait_for(lambda: tao.kubectl("get", "pods", "-o", "name").stdout == "", 90, message="the test's pods to go")


def status(tao: Tao, record_id: str) -> dict[str, Any]:
    result = tao("status", record_id, "-o", "json")
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def pods(tao: Tao, record_id: str) -> list[dict[str, Any]]:
    job_name = tao.extra(record_id)["job_name"]
    items: list[dict[str, Any]] = json.loads(
        tao.kubectl("get", "pods", "-l", f"tao-job={job_name}", "-o", "json").stdout
    )["items"]
    return items


def bound(tao: Tao, record_id: str) -> list[str]:
    return sorted(p["spec"]["nodeName"] for p in pods(tao, record_id) if p["spec"].get("nodeName"))


def hold_one_node(tao: Tao) -> tuple[str, str]:
    """An 8-GPU job that runs until canceled: (record id, the node it holds)."""
    holder = submitted_id(tao.submit(annotations={STAY_RUNNING: "true"}))
    wait_for(lambda: status(tao, holder)["state"] == "RUNNING", 60, message="the holder to run")
    [node] = bound(tao, holder)
    return holder, node


def submit_2x8(tao: Tao, *extra: str) -> subprocess.CompletedProcess[str]:
    return tao("submit", "--image", TAO_IMAGE, "--image-pull-secret", "ngc", "--network-arch", "dino",
               "--action", "train", "--gpus", "8", "--nodes", "2", "--pvc", "tao-data",
               "--command", "dino train -e /workspace/specs/train.yaml", *extra)


def podgroup_condition(tao: Tao, record_id: str) -> dict[str, Any] | None:
    uid = tao.extra(record_id)["job_uid"]
    groups = kubectl_json("get", "podgroups.v1beta1.scheduling.k8s.io", ns=tao.namespace)["items"]
    for group in groups:
        if any(ref.get("uid") == uid for ref in group["metadata"].get("ownerReferences", [])):
            for condition in (group.get("status") or {}).get("conditions") or []:
                if condition["type"] == "PodGroupInitiallyScheduled":
                    return dict(condition)
    return None


def test_gang_native_on_the_server_present(tao: Tao) -> None:
    """What `--gang native` does on the running server's version (never a skip): on 1.37+ the gang binds no rank
    until both fit; on 1.36 it is refused (a 1.37 server with the gate off: test_gang_gate_off.py)."""
    if NATIVE:
        native_gang_binds_no_rank_until_both_fit_and_the_free_gpus_stay_usable(tao)
    else:
        gang_native_on_a_server_without_it_exits_2_and_creates_nothing(tao)


def native_gang_binds_no_rank_until_both_fit_and_the_free_gpus_stay_usable(tao: Tao) -> None:
    fit = json.loads(tao("fit", "--gpus", "8", "--nodes", "2", "-o", "json").stdout)
    assert fit["gang"]["kind"] == "native"
    holder, held = hold_one_node(tao)
    submitted = submit_2x8(tao)
    gang, err = submitted_id(submitted), submitted.stderr
    assert "gang scheduling: native (the scheduler binds all 2 ranks together or none" in err
    assert tao.extra(gang)["gang"] == "native"
    job = json.loads(tao.kubectl("get", "job", tao.extra(gang)["job_name"], "-o", "json").stdout)
    assert job["spec"]["scheduling"] == {"schedulingPolicy": {"gang": {"minCount": 2}}}

    condition = wait_for(lambda: podgroup_condition(tao, gang), 60, message="the PodGroup's scheduling condition")
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert len(pods(tao, gang)) == 2 and bound(tao, gang) == []
    data = wait_for(lambda: (d := status(tao, gang))["live"].get("gang") and d, 30, message="status to show the gang")
    assert data["state"] == "PENDING"
    assert data["message"].startswith("waiting until 2 ranks fit together; no pod is bound meanwhile")
    assert data["live"]["gang"]["state"] == "Waiting" and data["live"]["gang"]["min_count"] == 2
    table = tao("status", gang).stdout
    assert "Gang: native gang, PodGroup " in table and "(minCount 2): waiting until 2 ranks fit together" in table
    explained = json.loads(tao("explain", gang, "-o", "json").stdout)
    assert explained["findings"][0]["code"] == "gang-waiting"
    assert "PodGroupInitiallyScheduled=False (Unschedulable)" in explained["findings"][0]["evidence"]

    # The free node is not held for the gang: a 1 x 8 job runs there and completes meanwhile.
    single = submitted_id(tao.submit("--wait", "--timeout", "90"))
    assert tao.record(single)["terminal_state"] == "COMPLETE"
    assert bound(tao, single) != [held]
    assert bound(tao, gang) == [], "no rank of the gang was bound while only one node was free"

    # Capacity frees: the gang starts whole, one rank per node.
    assert tao("cancel", holder).returncode == 0
    nodes = wait_for(lambda: (b := bound(tao, gang)) and len(b) == 2 and b, 90, message="both ranks bound")
    assert len(set(nodes)) == 2
    wait_for(lambda: (podgroup_condition(tao, gang) or {}).get("status") == "True", 30,
             message="the PodGroup to say the gang was scheduled")
    done = wait_for(lambda: (d := status(tao, gang))["state"] == "COMPLETE" and d, 90, message="the gang to finish")
    assert done["reason"] == "Completed"


def test_without_gang_one_rank_starts_and_holds_its_gpus(tao: Tao) -> None:
    holder, held = hold_one_node(tao)
    submitted = submit_2x8(tao, *(["--gang", "off"] if NATIVE else []))
    gang, err = submitted_id(submitted), submitted.stderr
    assert "gang scheduling: none (" in err
    assert "the capacity gate and the rendezvous barrier are the only guard" in err
    if not NATIVE:
        assert "scheduling.k8s.io/v1beta1 is not served" in err
    job = json.loads(tao.kubectl("get", "job", tao.extra(gang)["job_name"], "-o", "json").stdout)
    assert "scheduling" not in job["spec"]
    one = wait_for(lambda: (b := bound(tao, gang)) and b, 60, message="one rank bound")
    assert len(one) == 1 and one != [held], "one rank started on the free node while the other waits"
    assert len(pods(tao, gang)) == 2

    assert tao("cancel", holder).returncode == 0
    wait_for(lambda: len(bound(tao, gang)) == 2, 90, message="the second rank bound once the holder went")
    wait_for(lambda: status(tao, gang)["state"] == "COMPLETE", 90, message="the job to finish")


def gang_native_on_a_server_without_it_exits_2_and_creates_nothing(tao: Tao) -> None:
    refused = submit_2x8(tao, "--gang", "native")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip().splitlines()[-1].startswith(
        "error: --gang native: this cluster does not gang-schedule Jobs: scheduling.k8s.io/v1beta1 is not served"
    )
    assert tao.records() == [] and tao.leftovers() == []
    checks = json.loads(tao("preflight", "--gpus", "8", "--nodes", "2", "-o", "json").stdout)["checks"]
    [gang] = [c for c in checks if c["check"] == "gang"]
    assert gang["status"] == "WARN" and gang["message"].startswith("none: ")
