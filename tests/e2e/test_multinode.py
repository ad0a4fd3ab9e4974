"""Multi-node jobs end to end on the real control plane (2 simulated GPU nodes x 8 GPUs): the Indexed Job
and its headless Service, the rendezvous environment, the gates, failing ranks, the rendezvous barrier's
exit 88, retries per index, and `kubectl tao probe nccl`.

One rank is made to fail by annotating its running pod (the pod template's annotations reach every rank):
the kwok stages act on the pod's own annotations, so `kwok.kubectl-tao.io/exit-code` on rank 1's pod ends
that rank only.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from support.cluster import (
    EXIT_CODE,
    OOM,
    RUN_SECONDS,
    STAY_RUNNING,
    TAO_IMAGE,
    Tao,
    k8s_version,
    states,
    submitted_id,
    wait_for,
)

from kubectl_tao.gates.capacity import NODES_READ, PODS_READ

pytestmark = pytest.mark.e2e

INDEX = "batch.kubernetes.io/job-completion-index"
VERSION_CALL = ["version", "-o", "json"]


@pytest.fixture(autouse=True)
def release_gpus(tao: Tao) -> Iterator[None]:
    """However a test ends, its Jobs go (foreground: their pods first), so the next test finds 16 free GPUs."""
    yield
    tao.kubectl("delete", "jobs", "--all", "--cascade=foreground", "--wait=false", check=False)
    wait_for(lambda: tao.kubectl("get", "pods", "-o", "name").stdout == "", 60, message="the test's pods to go")


def submit_multi(
    tao: Tao,
    *extra: str,
    nodes: int = 2,
    gpus: int = 8,
    command: str = "dino train -e /workspace/specs/train.yaml",
    annotations: dict[str, str] | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    args = ["submit", "--image", TAO_IMAGE, "--image-pull-secret", "ngc", "--network-arch", "dino",
            "--action", "train", "--gpus", str(gpus), "--nodes", str(nodes), "--pvc", "tao-data",
            "--command", command]
    for key, value in (annotations or {}).items():
        args += ["--annotation", f"{key}={value}"]
    return tao(*args, *extra, input=input)


def pods(tao: Tao, job: str) -> list[dict[str, Any]]:
    items = json.loads(tao.kubectl("get", "pods", "-l", f"job-name={job}", "-o", "json").stdout)["items"]
    return sorted(items, key=lambda p: (int(p["metadata"]["annotations"][INDEX]), p["metadata"]["name"]))


def status(tao: Tao, record_id: str) -> dict[str, Any]:
    result = tao("status", record_id, "-o", "json")
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def running_ranks(tao: Tao, record_id: str, count: int = 2) -> dict[str, Any] | None:
    data = status(tao, record_id)
    ranks = (data.get("live") or {}).get("ranks") or []
    running = [r for r in ranks if r["phase"] == "Running"]
    return data if data["state"] == "RUNNING" and len(running) == count else None


def fail_rank(tao: Tao, job: str, rank: int, **annotations: str) -> str:
    """Annotate rank `rank`'s running pod so that kwok ends it; returns the pod's name."""
    (pod,) = [p for p in pods(tao, job) if p["metadata"]["annotations"][INDEX] == str(rank)]
    tao.kubectl("annotate", "pod", pod["metadata"]["name"], *(f"{k}={v}" for k, v in annotations.items()))
    return str(pod["metadata"]["name"])


def env_of(pod: dict[str, Any]) -> dict[str, Any]:
    (container,) = pod["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def calls(tao: Tao) -> list[list[str]]:
    return tao.kubectl_calls()


def creates(tao: Tao) -> list[list[str]]:
    """kubectl create calls of objects (global flags such as --namespace=... come first in a traced argv); the
    permission gate's SelfSubjectAccessReviews and the gates' server dry runs (the gang probe starts as soon as
    discovery answers) create nothing that stays."""
    return [
        c
        for c in calls(tao)
        if next((a for a in c if not a.startswith("--")), "") == "create"
        and not any("resourceAttributes" in a for a in c)
        and "--dry-run=server" not in c
    ]


def nothing_running(tao: Tao) -> bool:
    """No pod of this namespace still holds a GPU (Pending or Running)."""
    out = tao.kubectl("get", "pods", "-o", "jsonpath={range .items[*]}{.status.phase}{'\\n'}{end}").stdout
    return not [phase for phase in out.split() if phase in ("Pending", "Running")]


def owned_by_job(tao: Tao, kind: str, name: str, job: str) -> bool:
    obj = json.loads(tao.kubectl("get", kind, name, "-o", "json").stdout)
    return any(ref["kind"] == "Job" and ref["name"] == job for ref in obj["metadata"].get("ownerReferences", []))


# ------------------------------------------------------------------ layout, env, logs, cancel


def test_two_nodes_run_one_rank_per_gpu_node_with_the_rendezvous_env(tao: Tao) -> None:
    result = submit_multi(
        tao, "--launcher", "torchrun", "--master-port", "29600", "--nccl-socket-ifname", "eth0",
        "--nccl-ib-hca", "mlx5_0", "--env-file", "-",
        command="train.py --epochs 1", input="HF_TOKEN=hf_MultiNodeCanary0123456789\n",
        annotations={STAY_RUNNING: "true"},
    )
    job = submitted_id(result)
    assert VERSION_CALL in [c[-3:] for c in calls(tao)]  # the version gate ran for nodes > 1
    wait_for(lambda: running_ranks(tao, job), 60, message="both ranks Running")

    ranks = pods(tao, job)
    assert [p["metadata"]["annotations"][INDEX] for p in ranks] == ["0", "1"]
    assert [p["metadata"]["labels"][INDEX] for p in ranks] == ["0", "1"]  # PodIndexLabel (k8s >= 1.28)
    nodes = [p["spec"]["nodeName"] for p in ranks]
    assert len(set(nodes)) == 2 and all(n.startswith("gpu-node-") for n in nodes)
    assert [p["spec"]["hostname"] for p in ranks] == [f"{job}-0", f"{job}-1"]
    assert {p["spec"]["subdomain"] for p in ranks} == {job}

    service = json.loads(tao.kubectl("get", "service", job, "-o", "json").stdout)
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == {"job-name": job}
    assert [p["port"] for p in service["spec"]["ports"]] == [29600]

    def endpoints() -> list[tuple[str, str]]:
        slices = json.loads(tao.kubectl("get", "endpointslices", "-l", f"kubernetes.io/service-name={job}",
                                        "-o", "json").stdout)["items"]
        return sorted((e["targetRef"]["name"], e.get("hostname", "")) for s in slices for e in s.get("endpoints") or [])

    expected = sorted((p["metadata"]["name"], p["spec"]["hostname"]) for p in ranks)
    wait_for(lambda: endpoints() == expected, 30, message="the EndpointSlices to list both ranks")

    for index, pod in enumerate(ranks):
        env = env_of(pod)
        assert {k: env[k] for k in ("WORLD_SIZE", "NUM_GPU_PER_NODE", "NNODES", "NPROC_PER_NODE", "MASTER_ADDR",
                                    "MASTER_PORT", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA")} == {
            "WORLD_SIZE": "2", "NUM_GPU_PER_NODE": "8", "NNODES": "2", "NPROC_PER_NODE": "8",
            "MASTER_ADDR": f"{job}-0.{job}", "MASTER_PORT": "29600", "NCCL_SOCKET_IFNAME": "eth0",
            "NCCL_IB_HCA": "mlx5_0",
        }
        # NODE_RANK is the completion index, read from the pod's own annotation; the Job controller adds
        # JOB_COMPLETION_INDEX from the same index (the label, on 1.28+)
        assert env["NODE_RANK"] == {"fieldRef": {"apiVersion": "v1", "fieldPath": f"metadata.annotations['{INDEX}']"}}
        assert env["JOB_COMPLETION_INDEX"]["fieldRef"]["fieldPath"] in (
            f"metadata.annotations['{INDEX}']", f"metadata.labels['{INDEX}']")
        assert pod["metadata"]["annotations"][INDEX] == pod["metadata"]["labels"][INDEX] == str(index)
        (container,) = pod["spec"]["containers"]
        assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
        assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "16Gi"}
        assert volumes["workspace"]["persistentVolumeClaim"]["claimName"] == "tao-data"
        assert container["command"] == ["/bin/sh", "-c"]
        assert container["args"][3:] == ["torchrun", "train.py", "--epochs", "1"]
        launch = 'watched torchrun --nnodes="$NNODES" --nproc_per_node="${NPROC_PER_NODE:?}" --node_rank="$NODE_RANK"'
        assert launch in container["args"][0]
        assert pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0][
            "topologyKey"] == "kubernetes.io/hostname"
    assert owned_by_job(tao, "secret", f"tao-creds-{job}", job) and owned_by_job(tao, "service", job, job)

    table = tao("status", job).stdout
    assert "RUNNING" in table and "Ranks: 2 running, 0 succeeded, 0 failed (of 2)" in table

    logs = tao("logs", job).stdout.splitlines()
    assert logs and all(re.match(r"^\[rank [01]\] ", line) for line in logs)
    assert {line.split("]")[0] for line in logs} == {"[rank 0", "[rank 1"}
    only_one = tao("logs", job, "--rank", "1").stdout.splitlines()
    assert only_one and all(line.startswith("[rank 1] ") for line in only_one)

    cancel = tao("cancel", job)
    assert cancel.returncode == 0, cancel.stderr
    assert tao.leftovers() == []
    assert tao.kubectl("get", "pods", "-l", f"job-name={job}", "-o", "name").stdout == ""
    assert tao.kubectl("get", "service", job, check=False).returncode != 0
    assert tao.kubectl("get", "secret", f"tao-creds-{job}", check=False).returncode != 0
    assert tao.record(job)["terminal_state"] == "CANCELED"


def test_the_version_gate_is_asked_for_multi_node_submits_only(tao: Tao) -> None:
    single = tao.submit("--dry-run=server")
    assert single.returncode == 0, single.stderr
    assert VERSION_CALL not in [c[-3:] for c in calls(tao)]
    multi = submit_multi(tao, "--dry-run=server")
    assert multi.returncode == 0, multi.stderr
    assert VERSION_CALL in [c[-3:] for c in calls(tao)]
    assert tao.records() == [] and tao.leftovers() == []


# ------------------------------------------------------------------ refused before apply


def test_three_nodes_on_a_two_node_cluster_is_refused_before_apply(tao: Tao) -> None:
    result = submit_multi(tao, nodes=3)
    assert result.returncode == 4
    assert result.stderr.startswith("error: never: 3 x 8 nvidia.com/gpu needs 3 distinct nodes with >= 8")
    assert "only 2 eligible (gpu-node-0: 8, gpu-node-1: 8)" in result.stderr
    assert tao.records() == [] and tao.leftovers() == []
    assert not creates(tao)


@pytest.mark.parametrize("nodes", [2, 1], ids=["2x12-sum-too-big", "1x12-sum-fits-no-node-does"])
def test_more_gpus_per_rank_than_any_node_has_names_the_largest_node(tao: Tao, nodes: int) -> None:
    result = submit_multi(tao, nodes=nodes, gpus=12)
    assert result.returncode == 4
    assert f"error: never: {nodes} x 12 nvidia.com/gpu needs a node with >= 12 nvidia.com/gpu; the largest " \
           "eligible node is gpu-node-0: 8" in result.stderr
    assert tao.records() == [] and tao.leftovers() == []


# ------------------------------------------------------------------ failing ranks


def test_a_failing_rank_is_named_with_rank_counts_and_its_logs(tao: Tao) -> None:
    job = submitted_id(submit_multi(tao, annotations={STAY_RUNNING: "true"}))
    wait_for(lambda: running_ranks(tao, job), 60, message="both ranks Running")
    fail_rank(tao, job, 1, **{EXIT_CODE: "3", RUN_SECONDS: "0"})

    def settled() -> dict[str, Any] | None:
        data = status(tao, job)
        live = data.get("live") or {}
        return data if data["state"] == "ERROR" and not [r for r in live["ranks"] if r["phase"] == "Running"] else None

    data = wait_for(settled, 60, message="the Job to fail")
    assert data["reason"] == "ExitCode" and data["message"] == "rank 1 exited with code 3"
    assert data["live"]["first_failed_rank"] == 1
    table = tao("status", job).stdout
    assert "First failed rank: 1" in table
    assert re.search(r"Ranks: 0 running, 0 succeeded, [12] failed \(of 2\)", table), table
    record = tao.record(job)
    assert record["terminal_state"] == "ERROR" and record["err_class"] == "ERR_PROGRAM"
    history = tao.extra(job)["history"]
    assert history["first_failed_rank"] == 1
    assert {(r["rank"], r["exit_code"]) for r in history["ranks"]} >= {(1, 3)}
    logs = tao("logs", job, "--rank", "1").stdout.splitlines()
    assert logs and all(line.startswith("[rank 1] ") for line in logs)
    assert wait_for(lambda: nothing_running(tao), 30, message="no rank left running")
    assert owned_by_job(tao, "service", job, job)  # goes with the Job (TTL or cancel)


def test_rendezvous_timeout_exit_88_fails_the_job_at_once(tao: Tao) -> None:
    job = submitted_id(submit_multi(tao, annotations={STAY_RUNNING: "true"}))
    wait_for(lambda: running_ranks(tao, job), 60, message="both ranks Running")
    failed_pod = fail_rank(tao, job, 1, **{EXIT_CODE: "88", RUN_SECONDS: "0"})

    def failure_condition() -> dict[str, Any] | None:
        obj = json.loads(tao.kubectl("get", "job", job, "-o", "json").stdout)
        conditions = obj["status"].get("conditions") or []
        return next((c for c in conditions if c["type"] == "Failed" and c["status"] == "True"), None)

    condition = wait_for(failure_condition, 30, message="the Job's Failed condition")
    # Rank 0 never ends by itself (stay-running): the Job failed on rank 1's exit 88 alone, without waiting for it.
    assert condition["reason"] == "PodFailurePolicy"
    assert "exit code 88 matching FailJob rule" in condition["message"]
    assert failed_pod in condition["message"], condition
    rank0 = [p for p in pods(tao, job) if p["metadata"]["annotations"][INDEX] == "0"]
    assert all(p["status"].get("phase") == "Running" or p["metadata"].get("deletionTimestamp") for p in rank0), rank0
    data = wait_for(lambda: (d := status(tao, job))["state"] == "ERROR" and d, 30, message="status ERROR")
    assert data["reason"] == "RendezvousTimeout"
    assert data["message"] == f"rank 1 could not reach rank 0 at {job}-0.{job}:29500"
    assert "RendezvousTimeout" in tao("status", job).stdout
    record = tao.record(job)
    assert record["terminal_state"] == "ERROR" and record["err_class"] == "ERR_INFRA"
    assert wait_for(lambda: nothing_running(tao), 30, message="rank 0 to be stopped")


def test_retries_per_index_fail_fast_on_oom_but_retry_other_exits(tao: Tao) -> None:
    oom = submitted_id(submit_multi(tao, "--retries-per-index", "2", annotations={OOM: "true", RUN_SECONDS: "0.5"}))
    assert VERSION_CALL in [c[-3:] for c in calls(tao)]  # >= 1.29 is checked; the local server accepts it
    spec = json.loads(tao.kubectl("get", "job", oom, "-o", "json").stdout)["spec"]
    assert spec["backoffLimitPerIndex"] == 2
    assert {"action": "FailIndex", "onExitCodes": {"containerName": "tao", "operator": "In", "values": [137]}} in spec[
        "podFailurePolicy"]["rules"]
    data = wait_for(lambda: (d := status(tao, oom))["state"] == "ERROR" and d, 60, message="the OOM job to fail")
    assert data["reason"] == "OOMKilled" and data["err_class"] == "ERR_INFRA"
    job_status = json.loads(tao.kubectl("get", "job", oom, "-o", "json").stdout)["status"]
    assert job_status["failedIndexes"] == "0,1"
    assert len(pods(tao, oom)) == 2  # no index was retried

    retried = submitted_id(submit_multi(tao, "--retries-per-index", "1", annotations={EXIT_CODE: "3",
                                                                                      RUN_SECONDS: "0.5"}))
    wait_for(lambda: status(tao, retried)["state"] == "ERROR", 90, message="the retried job to fail")
    assert len(pods(tao, retried)) == 4  # each index ran twice
    assert json.loads(tao.kubectl("get", "job", retried, "-o", "json").stdout)["status"]["failedIndexes"] == "0,1"
    assert wait_for(lambda: nothing_running(tao), 30, message="no pod left running")


# ------------------------------------------------------------------ the NCCL probe


def probe_cache(tao: Tao) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((tao.state_dir / "probes" / "nccl.json").read_text())
    return data


def test_probe_passes_on_simulated_nodes_and_is_cached(tao: Tao) -> None:
    result = tao("probe", "nccl", "--timeout", "60s")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("nccl probe: pass (2 nodes x 1 GPU, ")
    made = calls(tao)
    assert VERSION_CALL in [c[-3:] for c in made]
    assert NODES_READ in [c[-3:] for c in made] and PODS_READ in [c[-3:] for c in made]
    [record_id] = tao.records()
    record = tao.record(record_id)
    assert (record["network_arch"], record["action"], record["terminal_state"]) == ("nccl", "probe", "COMPLETE")
    labelled = tao.kubectl("get", "jobs,services", "-l", "kubectl-tao.io/probe=nccl", "-o", "name").stdout.split()
    assert sorted(labelled) == [f"job.batch/{record_id}", f"service/{record_id}"]
    (entry,) = probe_cache(tao)["probes"].values()
    assert (entry["result"], entry["record_id"], entry["version"]) == ("pass", record_id, k8s_version())
    assert entry["server"].startswith("https://127.0.0.1:")

    tao.trace.write_text("")
    again = tao("probe", "nccl")
    assert again.returncode == 0
    assert "cached 0s ago" in again.stdout or re.search(r"cached \d+s ago", again.stdout)
    assert not creates(tao)  # answered from the cache
    forced = tao("probe", "nccl", "--force", "-o", "json")
    assert forced.returncode == 0 and json.loads(forced.stdout)["cached"] is False
    assert len(tao.records()) == 2
    assert wait_for(lambda: nothing_running(tao), 30, message="the probe pods to finish")


def test_probe_failure_reports_fail_with_nccl_hints_and_multi_node_submits_warn(tao: Tao) -> None:
    result = tao("probe", "nccl", "--annotation", f"{EXIT_CODE}=1")
    assert result.returncode == 1
    assert re.match(r"nccl probe: fail \(2 nodes x 1 GPU, \d+s, job nccl-probe-[0-9a-f]{6}\): ExitCode: ",
                    result.stdout)
    for hint in ("--nccl-env NCCL_DEBUG=INFO", "--nccl-socket-ifname eth0", "--nccl-env NCCL_IB_DISABLE=1",
                 "--nccl-env NCCL_P2P_DISABLE=1"):
        assert hint in result.stdout
    (entry,) = probe_cache(tao)["probes"].values()
    assert entry["result"] == "fail"
    [record_id] = tao.records()
    assert tao.record(record_id)["terminal_state"] == "ERROR"

    warned = submit_multi(tao, "--dry-run=server")
    assert warned.returncode == 0, warned.stderr
    assert "warning: the last NCCL probe of this cluster failed" in warned.stderr
    assert "NCCL probe" not in tao.submit("--dry-run=server").stderr  # one node: no warning
    assert wait_for(lambda: nothing_running(tao), 30, message="the probe pods to finish")


def test_probe_hang_cancels_the_job_and_is_cached(tao: Tao) -> None:
    result = tao("probe", "nccl", "--annotation", f"{STAY_RUNNING}=true", "--timeout", "3s")
    assert result.returncode == 1
    assert "nccl probe: hang" in result.stdout and "was not done after 3s" in result.stdout
    assert "--nccl-socket-ifname eth0" in result.stdout
    [record_id] = tao.records()
    record = tao.record(record_id)
    assert record["terminal_state"] == "CANCELED" and "NCCL probe hung" in record["transitions"][-1]["message"]
    assert states(record)[:2] == ["PENDING", "RUNNING"]
    assert tao.leftovers() == []
    (entry,) = probe_cache(tao)["probes"].values()
    assert entry["result"] == "hang"


def test_no_probe_warns_then_a_passing_probes_nccl_settings_reach_later_jobs(tao: Tao) -> None:
    unprobed = submit_multi(tao, "--dry-run=server")
    assert unprobed.returncode == 0, unprobed.stderr
    assert "warning: no NCCL probe result is cached for this cluster" in unprobed.stderr
    assert "`kubectl tao probe nccl`" in unprobed.stderr

    fixed = tao("probe", "nccl", "--timeout", "60s", "--nccl-socket-ifname", "eth0",
                "--nccl-env", "NCCL_IB_DISABLE=1", "--nccl-env", "NCCL_DEBUG=INFO")
    assert fixed.returncode == 0, fixed.stderr
    assert "later multi-node submits on this cluster apply NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=eth0" in fixed.stdout
    (entry,) = probe_cache(tao)["probes"].values()
    assert entry["settings"] == {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "eth0"}

    later = submit_multi(tao, "--dry-run=server", "-o", "json")
    assert later.returncode == 0, later.stderr
    assert "NCCL probe" not in later.stderr
    assert "applying the NCCL settings this cluster's probe passed with" in later.stderr
    [job] = [item for item in json.loads(later.stdout)["items"] if item["kind"] == "Job"]
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert (env["NCCL_SOCKET_IFNAME"], env["NCCL_IB_DISABLE"]) == ("eth0", "1") and "NCCL_DEBUG" not in env
    assert wait_for(lambda: nothing_running(tao), 30, message="the probe pods to finish")
