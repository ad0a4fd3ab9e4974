"""--max-restarts on the local cluster's real nodes (real kubelets 1.37.2, containerd, runc): a rank that crashes
restarts the whole gang in place (RestartAllContainers) and the job resumes from its checkpoint; a job that keeps
failing ends ERROR once its restarts are used; the barrier's 88 twice ends it; an evicted rank restarts the gang
without counting; cancel during restarts leaves nothing.

Skipped when the cluster has no real nodes (KUBECTL_TAO_REAL_NODES=0).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.cluster import Cluster, Tao, submitted_id, wait_for

from .test_real_pods import images, real, real_images, record_pods, status_json, submit  # noqa: F401

pytestmark = pytest.mark.e2e

INDEX = "batch.kubernetes.io/job-completion-index"

# A torchrun-style training loop over gloo: every step is an all_reduce of both ranks; rank 0 saves the step
# reached in a checkpoint on the shared results directory; in attempt 1 rank 1 dies of SIGKILL at step 3.
TRAIN = """
import os, signal, sys, time
import torch
import torch.distributed as dist

os.environ["RANK"] = os.environ["NODE_RANK"]
rank, attempt = int(os.environ["NODE_RANK"]), int(os.environ["TAO_ATTEMPT"])
ckpt = os.path.join(os.environ["TAO_RESULTS_ROOT"], "ckpt.txt")
os.makedirs(os.environ["TAO_RESULTS_ROOT"], exist_ok=True)
start = int(open(ckpt).read()) if os.path.exists(ckpt) else 0
print(f"attempt {attempt} rank {rank} resumes from step {start}", flush=True)
dist.init_process_group("gloo")
for step in range(start, 6):
    if attempt == 1 and rank == 1 and step == 3:
        print("rank 1 crashes", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    value = torch.tensor([float(step)])
    dist.all_reduce(value)
    if rank == 0:
        with open(ckpt + ".tmp", "w") as f:
            f.write(str(step + 1))
        os.replace(ckpt + ".tmp", ckpt)
    time.sleep(0.5)
print(f"attempt {attempt} rank {rank} done at step 6", flush=True)
dist.destroy_process_group()
"""


def multi(real: Tao, image: str, command: str, *extra: str, wait: bool = True) -> Any:  # noqa: F811
    waiting = ("--wait", "--timeout", "300") if wait else ()
    return submit(real, image, command, "--nodes", "2", "--master-port", "29566", *extra, *waiting, gpus=1)


def ends(data: dict[str, Any]) -> list[tuple[int, str, int]]:
    return [(a["attempt"], a["decision"], a["exit_code"]) for a in data.get("attempts") or []]


def test_a_crashed_rank_restarts_the_gang_in_place_and_the_job_resumes_from_its_checkpoint(
    real: Tao, cluster: Cluster  # noqa: F811
) -> None:
    image = wait_for(lambda: real_images(cluster).get("TORCH_IMAGE"), 300, message="the torch image on the nodes")
    (real.volume / "train.py").write_text(TRAIN)  # type: ignore[attr-defined]
    result = multi(real, image, "python3 /workspace/train.py", "--max-restarts", "2", "--rendezvous-timeout", "90")
    assert result.returncode == 0, result.stderr + result.stdout
    record_id = result.stdout.strip().splitlines()[-1]
    assert real.record(record_id)["terminal_state"] == "COMPLETE"
    # in place: the same two pods (one per node), each restarted once by the kubelet
    pods = record_pods(real, record_id)
    assert len(pods) == 2, [p["metadata"]["name"] for p in pods]
    assert sorted(p["status"]["containerStatuses"][0]["restartCount"] for p in pods) == [1, 1]
    data = status_json(real, record_id)
    assert (data["restarts"], data["attempt"]) == (1, 2), data
    assert ends(data) == [(1, "restart", 137)], data
    assert "attempt 1 ended: rank 1 exit 137 (SIGKILL); the gang restarted (counted)" in data["attempts"][0]["said"]
    logs = real("logs", record_id).stdout
    assert "attempt 2 rank 0 resumes from step 3" in logs, logs
    assert "attempt 2 rank 1 resumes from step 3" in logs, logs
    assert "attempt 2 rank 1 done at step 6" in logs, logs
    results = real.volume / "results" / record_id  # type: ignore[attr-defined]
    assert (results / "ckpt.txt").read_text() == "6"
    table = real("status", record_id).stdout
    assert table.splitlines()[0].split()[-1] == "RESTARTS" and table.splitlines()[1].split()[-1] == "1/2", table
    explain = real("explain", record_id).stdout
    assert "attempt 1 ended: rank 1 exit 137 (SIGKILL)" in explain, explain


def test_a_rank_that_always_crashes_ends_error_after_its_restarts(real: Tao, images: dict[str, str]) -> None:  # noqa: F811
    result = multi(real, images["BUSYBOX_IMAGE"],
                   'if [ "$NODE_RANK" = 1 ]; then sleep 1; kill -9 $$; fi; sleep 120',
                   "--max-restarts", "1", "--rendezvous-timeout", "0")
    assert result.returncode == 1, result.stderr + result.stdout
    record_id = result.stdout.strip().splitlines()[-1]
    assert real.record(record_id)["terminal_state"] == "ERROR"
    data = status_json(real, record_id)
    assert ends(data) == [(1, "restart", 137), (2, "fail", 137)], data
    assert data["restarts"] == 1 and data["attempt"] == 2
    assert "no restarts left" in data["attempts"][1]["reason"]


def test_the_barriers_88_twice_ends_the_job(real: Tao, images: dict[str, str]) -> None:  # noqa: F811
    # nothing listens on MASTER_PORT: rank 1's barrier gives up after 6 s, in attempt 1 and again in attempt 2
    result = multi(real, images["BUSYBOX_IMAGE"], "sleep 120", "--max-restarts", "3", "--rendezvous-timeout", "6")
    assert result.returncode == 1, result.stderr + result.stdout
    record_id = result.stdout.strip().splitlines()[-1]
    data = status_json(real, record_id)
    assert ends(data) == [(1, "restart", 88), (2, "fail", 88)], data
    assert data["attempts"][1]["reason"] == "rendezvous timeout twice"
    rank1 = next(p for p in record_pods(real, record_id) if p["metadata"]["annotations"][INDEX] == "1")
    assert rank1["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 88


def test_an_evicted_rank_restarts_the_gang_without_counting(real: Tao, images: dict[str, str]) -> None:  # noqa: F811
    command = 'echo "attempt $TAO_ATTEMPT"; if [ "$TAO_ATTEMPT" = 1 ]; then sleep 300; fi'
    record_id = submitted_id(multi(real, images["BUSYBOX_IMAGE"], command, "--max-restarts", "1",
                                   "--rendezvous-timeout", "0", "--termination-grace-period", "10", wait=False))
    wait_for(lambda: all(f"[rank {r}] attempt 1" in real("logs", record_id).stdout for r in (0, 1)), 120,
             message="attempt 1 to run on both ranks")
    rank1 = next(p for p in record_pods(real, record_id) if p["metadata"]["annotations"][INDEX] == "1")
    name = rank1["metadata"]["name"]
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": real.namespace}}
    real.kubectl("create", "--raw", f"/api/v1/namespaces/{real.namespace}/pods/{name}/eviction", "-f", "-",
                 input=json.dumps(eviction))
    result = real("status", record_id, "--watch", "--timeout", "150")
    data = status_json(real, record_id)
    gang = real.volume / ".kubectl-tao" / "restarts" / record_id  # type: ignore[attr-defined]
    seen = {str(p.relative_to(gang)): p.read_text(errors="replace")[-300:] for p in sorted(gang.rglob("*"))
            if p.is_file()} if gang.exists() else {}
    assert data["state"] == "COMPLETE", (result.stdout, result.stderr, data, real("logs", record_id).stdout, seen,
                                         real.kubectl("get", "pods", "-o", "wide").stdout)
    assert [(a["attempt"], a["decision"], a["counted"]) for a in data["attempts"]] == [(1, "disrupted", False)]
    names = {p["metadata"]["name"] for p in record_pods(real, record_id)}
    assert name not in names and len(names) == 2  # rank 1's pod was recreated, rank 0's restarted in place


def test_cancel_during_restarts_leaves_nothing(real: Tao, images: dict[str, str]) -> None:  # noqa: F811
    record_id = submitted_id(multi(real, images["BUSYBOX_IMAGE"],
                                   'if [ "$NODE_RANK" = 1 ]; then sleep 2; kill -9 $$; fi; sleep 120',
                                   "--max-restarts", "5", "--rendezvous-timeout", "0", wait=False))
    wait_for(lambda: (status_json(real, record_id).get("restarts") or 0) >= 1, 120, message="a first restart")
    result = real("cancel", record_id)
    assert result.returncode == 0, result.stderr
    wait_for(lambda: real.kubectl("get", "pods", "-o", "name").stdout == "", 90, message="the pods to go")
    assert real.leftovers() == []
    assert real.record(record_id)["terminal_state"] == "CANCELED"


def test_a_rank_that_prints_an_nccl_system_error_and_exits_1_restarts_the_gang_and_the_cause_is_named(
    real: Tao, images: dict[str, str]  # noqa: F811
) -> None:
    # Python exits 1 on an NCCL system error: by its code a program error, by what it printed (diagnosis/causes.py's
    # NcclSystemError, ERR_INFRA) worth a restart. The text is the corpus' real one (tests/fixtures/failures).
    corpus = Path(__file__).resolve().parents[1] / "fixtures" / "failures" / "nccl-system-error--ib-reg-mr.rank0.log"
    (real.volume / "nccl.log").write_text(corpus.read_text(encoding="utf-8"))  # type: ignore[attr-defined]
    command = ('if [ "$TAO_ATTEMPT" = 1 ]; then if [ "$NODE_RANK" = 1 ]; then cat /workspace/nccl.log; exit 1; fi; '
               'sleep 120; fi; echo "attempt $TAO_ATTEMPT rank $NODE_RANK done"')
    result = multi(real, images["BUSYBOX_IMAGE"], command, "--max-restarts", "1", "--rendezvous-timeout", "0")
    assert result.returncode == 0, result.stderr + result.stdout
    record_id = result.stdout.strip().splitlines()[-1]
    assert real.record(record_id)["terminal_state"] == "COMPLETE"
    data = status_json(real, record_id)
    assert ends(data) == [(1, "restart", 1)], data
    assert (data["attempts"][0]["reason"], data["attempts"][0]["counted"]) == ("NcclSystemError", True), data
    said = "attempt 1 ended: rank 1 exit 1 (NcclSystemError: NCCL failed in a system call"
    assert said in data["attempts"][0]["said"], data
    explain = real("explain", record_id).stdout
    assert said in explain, explain
    logs = real("logs", record_id).stdout
    assert "attempt 2 rank 1 done" in logs and "attempt 2 rank 0 done" in logs, logs
