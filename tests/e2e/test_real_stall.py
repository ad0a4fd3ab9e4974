"""--stall-timeout on the local cluster's real nodes, in the torch image: the TAO-shaped program
(tests/support/programs/tao_train.py) that hangs after epoch 2 is ended by the pod's stall watch with cause Stalled;
with --max-restarts the gang restarts, resumes from its checkpoint and completes.

Skipped when the cluster has no real nodes (KUBECTL_TAO_REAL_NODES=0)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.cluster import Cluster, Tao

from kubectl_tao.progress.statusjson import read_status_json

from .test_real_pods import images, real, real_images, record_pods, status_json, submit  # noqa: F401
from .test_real_progress import torch_image

pytestmark = pytest.mark.e2e

PROGRAM = Path(__file__).resolve().parents[1] / "support" / "programs" / "tao_train.py"
TRAIN = "python3 /workspace/tao_train.py --epochs 4 --epoch-seconds 1 --steps 5"


def test_a_program_that_hangs_after_epoch_2_is_ended_by_the_watch_with_cause_stalled(
    real: Tao, cluster: Cluster  # noqa: F811
) -> None:
    shutil.copy(PROGRAM, real.volume / "tao_train.py")  # type: ignore[attr-defined]
    result = submit(real, torch_image(cluster), f"{TRAIN} --hang-after 2", "--stall-timeout", "20s", "--wait",
                    "--timeout", "240", gpus=0)
    assert result.returncode == 1, result.stderr + result.stdout
    record_id = result.stdout.strip().splitlines()[-1]
    record = real.record(record_id)
    assert record["terminal_state"] == "ERROR" and record["err_class"] == "ERR_INFRA", record
    (pod,) = record_pods(real, record_id)
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 86
    data = status_json(real, record_id)
    assert data["reason"] == "Stalled", data
    logs = real("logs", record_id).stdout
    stall = [line for line in logs.splitlines() if line.startswith("kubectl-tao: stalled: ")]
    assert len(stall) == 1, logs
    assert "(--stall-timeout 20s); last progress: epoch=1 max_epoch=3 step=10 max_step=20 (train/status.json)" in (
        stall[0]), stall
    assert "last output: Epoch 1: 100%|" in stall[0], stall
    explain = real("explain", record_id).stdout
    assert "Stalled" in explain and "--stall-timeout" in explain, explain
    progress = read_status_json((real.volume / "results" / record_id / "train" / "status.json").read_bytes())  # type: ignore[attr-defined]
    assert progress is not None and progress.epoch == 2


def test_with_max_restarts_a_stalled_gang_restarts_resumes_from_its_checkpoint_and_completes(
    real: Tao, cluster: Cluster  # noqa: F811
) -> None:
    shutil.copy(PROGRAM, real.volume / "tao_train.py")  # type: ignore[attr-defined]
    # the hang only in the first attempt; both ranks share the results directory (rank 0 checkpoints)
    command = f'{TRAIN} $([ "$TAO_ATTEMPT" = 1 ] && echo --hang-after 2)'
    result = submit(real, torch_image(cluster), command, "--nodes", "2", "--master-port", "29567",
                    "--max-restarts", "1", "--rendezvous-timeout", "0", "--stall-timeout", "20s",
                    "--wait", "--timeout", "300", gpus=1)
    assert result.returncode == 0, result.stderr + result.stdout
    record_id = result.stdout.strip().splitlines()[-1]
    assert real.record(record_id)["terminal_state"] == "COMPLETE"
    data = status_json(real, record_id)
    attempts = [(a["attempt"], a["decision"], a["exit_code"], a["reason"]) for a in data["attempts"]]
    assert attempts[0][:2] == (1, "restart") and attempts[0][2:] in ((86, "Stalled"),), data
    assert "Stalled: the program stopped making progress" in data["attempts"][0]["said"], data
    # attempt 1's output, as the entrypoint kept it on the volume (the kubelet removed the restarted containers')
    rank = data["attempts"][0]["rank"]
    gang = real.volume / ".kubectl-tao" / "restarts" / record_id  # type: ignore[attr-defined]
    first = (gang / "attempt-1" / f"rank-{rank}.log").read_text(encoding="utf-8", errors="replace")
    assert "kubectl-tao: stalled: no output and no status.json growth for" in first, first
    logs = real("logs", record_id).stdout
    assert "Resuming training from checkpoint" in logs and "at epoch 2" in logs, logs
    progress = read_status_json(
        (real.volume / "results" / record_id / "train" / "status.json").read_bytes())  # type: ignore[attr-defined]
    assert progress is not None and (progress.epoch, progress.max_epoch) == (4, 4)
