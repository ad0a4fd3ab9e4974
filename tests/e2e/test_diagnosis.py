"""Jobs that fail for real on the local cluster's real nodes, and what `status`, `explain`, `logs --errors`,
`submit --wait` and the record say about them (docs/diagnosis.md).

Where a CPU can fail the way a GPU job does, the container really fails: a Python exception, a missing module,
a NaN loss a real Python prints, a DataLoader whose workers run out of a 1 MiB /dev/shm (--shm-size), a rank
of a two-node torchrun killed with SIGKILL mid-run (Debian's torch 1.13 in the node image). The GPU-only texts
(CUDA OOM, an NCCL system error, a device-side assert, an uncorrectable ECC error) are replayed from the failure
corpus by a real container: it prints the exact text to stderr and exits 1. Every case prints a made-up Hugging
Face token next to its failure: it never shows.

All jobs are submitted at once (one module fixture) and followed until each ends; the tests then read them.
Skipped when the cluster has no real nodes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cluster import Cluster, Tao, claim_on_real_nodes, kubectl, wait_for

from .test_real_pods import ON_REAL_NODES, REAL_NODE_LABEL, real_images

pytestmark = pytest.mark.e2e

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "failures"
ENTRIES = {e["file"]: e for e in json.loads((CORPUS / "corpus.json").read_text(encoding="utf-8"))}
TOKEN = "hf_" + "FakeCanaryE2Ex7Q2mR9vL4nB8kT3wZab12"  # made up, in Hugging Face's format
SHOWN_TOKEN = f"HF_TOKEN={TOKEN}"

# Printed on stderr, as the traceback is: containerd copies a container's stdout and stderr on separate goroutines,
# so a stdout line printed just before the traceback can land after it in the log.
RAISE = f"""
import sys
print("{SHOWN_TOKEN}", file=sys.stderr, flush=True)
print("step 0 loss 0.91", file=sys.stderr, flush=True)
def load_batch(step):
    raise ValueError("corrupt record in shard 00001 at offset 1048576 (token {TOKEN})")
load_batch(1)
"""
MISSING = f"""
print("{SHOWN_TOKEN}", flush=True)
import timm
"""
NAN = f"""
import sys
import torch
print("{SHOWN_TOKEN}", flush=True)
feature = torch.ones(8)
normalized = (feature - feature.mean()) / (feature - feature.mean()).abs().sum()
loss_value = normalized.pow(2).mean().item()
print("step 0 loss {{}}".format(loss_value), flush=True)
if loss_value != loss_value:
    print("Loss is {{}}, stopping training".format(loss_value), flush=True)
    sys.exit(1)
"""
SHM = f"""
import torch
from torch.utils.data import DataLoader, Dataset
print("{SHOWN_TOKEN}", flush=True)
class Images(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, index):
        return torch.zeros(3, 512, 512)
for batch in DataLoader(Images(), batch_size=4, num_workers=2):
    print("batch", tuple(batch.shape), flush=True)
"""
KILLED = f"""
import os
import signal
import time
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
print("{SHOWN_TOKEN}", flush=True)
weights = torch.zeros(4)
for step in range(200):
    if rank == 1 and step == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    dist.all_reduce(weights)
    print(f"step {{step}} rank {{rank}} loss 0.5", flush=True)
    time.sleep(0.2)
"""

STALL = f"""
import datetime
import time
import torch
import torch.distributed as dist
# Joining waits as long as a loaded node needs to start the other rank; only the collectives time out after 10 s.
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=240))
group = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=10))
rank = dist.get_rank()
print("{SHOWN_TOKEN}", flush=True)
weights = torch.zeros(4)
for step in range(100):
    if rank == 1 and step == 3:
        time.sleep(60)  # a data read that never returns in time
    dist.all_reduce(weights, group=group)
    print(f"step {{step}} rank {{rank}} loss 0.5", flush=True)
"""

# case -> (what runs, expected REASON, class, rank, the evidence line or None to check otherwise)
REPLAYS = {
    "replay-oom": "cuda-oom--torch-2.15-in-pod.log",
    "replay-nccl": "nccl-system-error--ib-reg-mr.rank0.log",
    "replay-assert": "cuda-device-assert--torch-2.15.log",
    "replay-ecc": "gpu-hardware--uncorrectable-ecc.log",
}
EXPECTED: dict[str, tuple[str, str, int | None, str]] = {
    "python-exception": (
        "ProgramError", "ERR_PROGRAM", 0,
        "ValueError: corrupt record in shard 00001 at offset 1048576 (token ***REDACTED***)",
    ),
    "missing-module": ("MissingModule", "ERR_PROGRAM", 0, "ModuleNotFoundError: No module named 'timm'"),
    "nan": ("NanLoss", "ERR_PROGRAM", 0, "Loss is nan, stopping training"),
    "shm": ("ShmExhausted", "ERR_PROGRAM", 0, ""),
    "killed": ("RankKilled", "ERR_INFRA", 1, ""),
    "gloo-timeout": ("CollectiveTimeout", "ERR_INFRA", 0, ""),
    "replay-oom": ("CudaOOM", "ERR_PROGRAM", 3, ENTRIES[REPLAYS["replay-oom"]]["key_line"]),
    "replay-nccl": ("NcclSystemError", "ERR_INFRA", 0, ENTRIES[REPLAYS["replay-nccl"]]["key_line"]),
    "replay-assert": ("DeviceAssert", "ERR_PROGRAM", 2, ENTRIES[REPLAYS["replay-assert"]]["key_line"]),
    "replay-ecc": ("GpuHardware", "ERR_INFRA", 0, ENTRIES[REPLAYS["replay-ecc"]]["key_line"]),
}


class Failed:
    """The submitted jobs: case -> record id, the Tao that ran them, submit --wait's output of one."""

    def __init__(self, tao: Tao) -> None:
        self.tao = tao
        self.ids: dict[str, str] = {}
        self.waited: Any = None


def _submit(t: Tao, image: str, command: str, *extra: str, gpus: int = 0) -> str:
    result = t(
        "submit", "--image", image, "--network-arch", "diag", "--action", "run", "--gpus", str(gpus),
        "--pvc", "tao-data", "--command", command, *ON_REAL_NODES, *extra, timeout=240,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def failed(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Failed]:
    if not kubectl("get", "nodes", "-l", REAL_NODE_LABEL, "-o", "name").stdout.split():
        pytest.skip("the local cluster has no real nodes (KUBECTL_TAO_REAL_NODES=0)")
    with claim_on_real_nodes(cluster, "e2e-diag", tmp_path_factory.mktemp("diagnosis") / "state") as (t, volume):
        for name, text in (("raise.py", RAISE), ("missing.py", MISSING), ("nan.py", NAN), ("shm.py", SHM),
                           ("killed.py", KILLED), ("stall.py", STALL)):
            (volume / name).write_text(text)
        for case, corpus in REPLAYS.items():
            (volume / f"{case}.log").write_text(f"{SHOWN_TOKEN}\n" + (CORPUS / corpus).read_text())
        images = real_images(cluster)
        busybox = images["BUSYBOX_IMAGE"]
        torch = wait_for(lambda: real_images(cluster).get("TORCH_IMAGE"), 300, message="the torch image on the nodes")
        run = Failed(t)
        # First, and with room for a slow start: nine jobs start at once on two cores.
        run.ids["killed"] = _submit(
            t, torch, "/workspace/killed.py", "--nodes", "2", "--launcher", "torchrun", "--rendezvous-timeout", "240",
            gpus=1,
        )
        run.ids["gloo-timeout"] = _submit(
            t, torch, "/workspace/stall.py", "--nodes", "2", "--launcher", "torchrun", "--rendezvous-timeout", "240",
        )
        run.ids["python-exception"] = _submit(t, torch, "python3 /workspace/raise.py")
        run.ids["missing-module"] = _submit(t, torch, "python3 /workspace/missing.py")
        # Kept only until its ending is captured, then deleted by its TTL: status and explain read the record.
        run.ids["nan"] = _submit(t, torch, "python3 /workspace/nan.py", "--ttl-seconds", "1", "--keep-until-captured")
        run.ids["shm"] = _submit(t, torch, "python3 /workspace/shm.py", "--shm-size", "1Mi")
        for case in ("replay-nccl", "replay-assert", "replay-ecc"):
            run.ids[case] = _submit(t, busybox, f"cat /workspace/{case}.log >&2; exit 1")
        waited = t(
            "submit", "--image", busybox, "--network-arch", "diag", "--action", "run", "--gpus", "0", "--pvc",
            "tao-data", "--command", "cat /workspace/replay-oom.log >&2; exit 1", *ON_REAL_NODES, "--wait",
            "--timeout", "240", timeout=300,
        )
        run.waited = waited
        run.ids["replay-oom"] = waited.stdout.strip().splitlines()[-1]

        def ended() -> bool:
            for record_id in run.ids.values():
                seen = t("status", record_id, "-o", "json")  # the look that captures each ending
                if seen.returncode != 0 or json.loads(seen.stdout)["state"] not in ("ERROR", "COMPLETE", "UNKNOWN"):
                    return False
            return True

        wait_for(ended, 300, interval=3, message="every failing job to end")
        yield run


def _status(t: Tao, record_id: str) -> dict[str, Any]:
    seen = t("status", record_id, "-o", "json")
    assert seen.returncode == 0, seen.stderr
    data: dict[str, Any] = json.loads(seen.stdout)
    return data


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_the_cause_is_named_in_status_explain_and_the_record(failed: Failed, case: str) -> None:
    t, record_id = failed.tao, failed.ids[case]
    reason, err_class, rank, evidence = EXPECTED[case]
    seen = _status(t, record_id)
    assert (seen["state"], seen["reason"], seen["err_class"]) == ("ERROR", reason, err_class), seen
    table = t("status", record_id)
    assert table.stdout.splitlines()[1].split()[-1] == reason, table.stdout
    record = t.record(record_id)
    assert record["terminal_state"] == "ERROR" and record["err_class"] == err_class
    assert f"({reason}, {err_class})" in record["transitions"][-1]["message"]
    found = t.extra(record_id)["history"]["diagnosis"]
    assert (found["cause"], found["err_class"], found["rank"]) == (reason, err_class, rank), found
    if evidence:
        assert found["evidence"] == evidence
    explain = t("explain", record_id)
    assert explain.returncode == 1, explain.stderr
    assert f"ERROR - {reason}" in explain.stdout.splitlines()[0]
    assert f"on rank {rank} ({reason}, {err_class})" in explain.stdout, explain.stdout
    assert f"   evidence: rank {rank}: {found['evidence']}" in explain.stdout
    assert "   fix: " in explain.stdout
    shown = "".join(
        [explain.stdout, explain.stderr, table.stdout, json.dumps(seen), json.dumps(record),
         json.dumps(t.extra(record_id)), t("logs", record_id, "--errors").stdout]
    )
    assert TOKEN not in shown, f"{case}: the token printed by the job shows"


def test_shm_and_killed_rank_read_the_texts_torch_prints(failed: Failed) -> None:
    t = failed.tao
    shm = t.extra(failed.ids["shm"])["history"]["diagnosis"]
    assert "shared memory" in shm["evidence"] and "--shm-size" in shm["fix"]
    killed = t.extra(failed.ids["killed"])["history"]["diagnosis"]
    assert killed["evidence"].strip().startswith("exitcode  : -9"), killed
    assert killed["pod"].startswith(t.extra(failed.ids["killed"])["job_name"] + "-1-")


def test_a_collective_timeout_names_the_rank_that_stopped_first(failed: Failed) -> None:
    t = failed.tao
    history = t.extra(failed.ids["gloo-timeout"])["history"]
    found = history["diagnosis"]
    assert "Timed out waiting 10000ms for recv operation to complete" in found["evidence"], history
    assert found["facts"]["stalled_rank"] == 1 and found["facts"]["timed_out_ranks"] == [0], found
    assert "rank 1 stopped first" in found["detail"]
    assert "torchfrtrace" not in found["fix"], "gloo: the NCCL flight recorder has nothing to dump"


def test_submit_wait_last_line_names_the_cause(failed: Failed) -> None:
    result = failed.waited
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    record_id = failed.ids["replay-oom"]
    assert last.startswith(f"job {record_id} ended ERROR: rank 3: CUDA out of memory (CudaOOM, ERR_PROGRAM)"), last
    assert "asked for 20.00 GiB; GPU 3 has 139.81 GiB in total" in last
    assert f"`kubectl tao explain {record_id}`" in last


def test_after_the_ttl_the_record_still_tells(failed: Failed) -> None:
    t, record_id = failed.tao, failed.ids["nan"]
    job = t.extra(record_id)["job_name"]
    wait_for(lambda: t.kubectl("get", "job", job, "--ignore-not-found", "-o", "name").stdout == "", 60,
             message="the TTL to delete the Job")
    seen = _status(t, record_id)
    assert (seen["state"], seen["reason"]) == ("ERROR", "NanLoss")
    explain = t("explain", record_id)
    assert "(NanLoss, ERR_PROGRAM)" in explain.stdout and "Loss is nan, stopping training" in explain.stdout
    errors = t("logs", record_id, "--errors")
    assert errors.returncode == 0 and "the Job is gone" in errors.stderr
    assert "Loss is nan, stopping training" in errors.stdout


def test_logs_errors_prints_each_ranks_first_error(failed: Failed) -> None:
    t = failed.tao
    out = t("logs", failed.ids["python-exception"], "--errors")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-1] == EXPECTED["python-exception"][3]
    # Rank 1's own output: torchrun's lines about its killed worker (rank 0's pod may be gone with the Job).
    killed = t("logs", failed.ids["killed"], "--errors")
    assert killed.returncode == 0 and "[rank 1] " in killed.stdout, killed.stdout + killed.stderr
