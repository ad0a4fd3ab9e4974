"""The TAO-shaped training program (tests/support/programs/tao_train.py) on the local cluster's real nodes, in
the torch image: torch on CPU, its status.json, checkpoints and bar read back by the progress readers, its
resume from the latest checkpoint and its failure line.

Skipped when the cluster has no real nodes (KUBECTL_TAO_REAL_NODES=0)."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest
from support.cluster import Cluster, Tao, wait_for

from kubectl_tao.progress.logtext import read_log
from kubectl_tao.progress.model import FAILED, SUCCEEDED, progress_cell
from kubectl_tao.progress.statusjson import read_status_json

from .test_real_pods import images, real, real_images, record_pods, submit  # noqa: F401

pytestmark = pytest.mark.e2e

PROGRAM = Path(__file__).resolve().parents[1] / "support" / "programs" / "tao_train.py"


def torch_image(cluster: Cluster) -> str:
    return str(wait_for(lambda: real_images(cluster).get("TORCH_IMAGE"), 300, message="the torch image on the nodes"))


def train(real: Tao, image: str, *args: str) -> tuple[int, str]:  # noqa: F811
    """Submit the program with ARGS and wait: (exit code of submit, record id)."""
    shutil.copy(PROGRAM, real.volume / "tao_train.py")  # type: ignore[attr-defined]
    command = " ".join(["python3", "/workspace/tao_train.py", *args])
    result = submit(real, image, command, "--wait", "--timeout", "240", gpus=0)
    record_id = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    return result.returncode, record_id


def rank0_log(real: Tao, record_id: str) -> str:  # noqa: F811
    pod = record_pods(real, record_id)[0]["metadata"]["name"]
    return str(real.kubectl("logs", pod, "--timestamps").stdout)


def test_the_program_trains_with_torch_and_its_status_json_and_bar_read_as_a_finished_run(
    real: Tao, cluster: Cluster  # noqa: F811
) -> None:
    code, record_id = train(real, torch_image(cluster), "--epochs", "3", "--epoch-seconds", "1", "--steps", "5")
    assert code == 0 and real.record(record_id)["terminal_state"] == "COMPLETE"
    results = real.volume / "results" / record_id / "train"  # type: ignore[attr-defined]
    progress = read_status_json((results / "status.json").read_bytes())
    assert progress is not None
    assert (progress.epoch, progress.max_epoch, progress.percent, progress.state) == (3, 3, 100.0, SUCCEEDED)
    assert progress.kpi is not None and {"train_loss", "val_loss", "val_mAP"} <= set(progress.kpi)
    assert progress.epoch_seconds is not None and progress.epoch_seconds >= 1
    # torch wrote the checkpoints (torch.save's zip format), and the latest link names the last one
    assert zipfile.is_zipfile(results / "model_epoch_002.pth")
    assert (results / "tao_stand_in_latest.pth").resolve().name == "model_epoch_002.pth"
    bar = read_log(rank0_log(real, record_id))
    assert bar is not None and progress_cell(bar) == "epoch 3 100%"
    assert bar.updated is None  # a redrawn bar: its line's timestamp is not the redraw's time


def test_a_second_run_on_the_same_results_resumes_from_the_latest_checkpoint(
    real: Tao, cluster: Cluster  # noqa: F811
) -> None:
    image = torch_image(cluster)
    where = ("--results", "/workspace/shared/train", "--epoch-seconds", "0.5", "--steps", "2")
    code, _ = train(real, image, "--epochs", "2", *where)
    assert code == 0
    code, record_id = train(real, image, "--epochs", "3", *where)
    assert code == 0
    assert "Resuming training from checkpoint /workspace/shared/train/model_epoch_001.pth at epoch 2" in rank0_log(
        real, record_id)
    status = (real.volume / "shared" / "train" / "status.json").read_text(encoding="utf-8")  # type: ignore[attr-defined]
    progress = read_status_json(status)
    assert progress is not None and (progress.epoch, progress.max_epoch, progress.state) == (3, 3, SUCCEEDED)
    assert status.count('"message": "Starting tao_stand_in train."') == 2


def test_a_failure_after_an_epoch_ends_the_job_and_its_status_json_says_why(
    real: Tao, cluster: Cluster  # noqa: F811
) -> None:
    code, record_id = train(real, torch_image(cluster), "--epochs", "3", "--epoch-seconds", "0.5", "--steps", "2",
                            "--fail-after", "1")
    assert code == 1
    record = real.record(record_id)
    assert record["terminal_state"] == "ERROR" and record["err_class"] == "ERR_PROGRAM"
    results = real.volume / "results" / record_id / "train"  # type: ignore[attr-defined]
    progress = read_status_json((results / "status.json").read_text(encoding="utf-8"))
    assert progress is not None and (progress.epoch, progress.state) == (1, FAILED)
    assert progress.message == "stand-in failure after epoch 1"


def _status(real: Tao, record_id: str) -> dict:  # noqa: F811
    result = real("status", record_id, "-o", "json")
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def test_status_shows_epoch_eta_and_metrics_while_it_runs_and_keeps_them_after_the_job_is_gone(
    real: Tao, cluster: Cluster  # noqa: F811
) -> None:
    shutil.copy(PROGRAM, real.volume / "tao_train.py")  # type: ignore[attr-defined]
    command = "python3 /workspace/tao_train.py --epochs 5 --epoch-seconds 6 --steps 5"
    result = submit(real, torch_image(cluster), command, "--ttl-seconds", "0", gpus=0)
    assert result.returncode == 0, result.stderr
    record_id = result.stdout.strip().splitlines()[-1]

    def running_with_metrics() -> dict | None:
        shown = _status(real, record_id)
        progress = shown.get("progress") or {}
        read = progress.get("source") == "status.json" and progress.get("epoch") and progress.get("kpi")
        return shown if shown["state"] == "RUNNING" and read else None

    shown = wait_for(running_with_metrics, 180, interval=1, message="status to show the run's progress")
    progress = shown["progress"]
    assert list(progress) == ["epoch", "max_epoch", "step", "total_steps", "percent", "eta_seconds", "kpi",
                              "updated", "source"]
    assert progress["max_epoch"] == 5
    assert 1 <= progress["epoch"] <= 5 and progress["eta_seconds"] is not None
    assert "train_loss" in progress["kpi"]
    table = real("status", record_id)
    assert table.returncode == 0, table.stderr
    assert f"/{5}" in table.stdout.splitlines()[1] and "Metrics: " in table.stdout
    assert "(from status.json /workspace/results/" in table.stdout

    watched = real("status", record_id, "--watch", "--timeout", "180", timeout=240)
    assert watched.returncode == 0, watched.stderr + watched.stdout
    job = real.extra(record_id)["job_name"]
    wait_for(lambda: not real.kubectl("get", "job", job, "--ignore-not-found", "-o", "name").stdout.strip(), 120,
             message="the Job to be deleted by its TTL")
    after = real("status", record_id)
    assert after.returncode == 0, after.stderr
    assert "epoch 5/5 100%" in after.stdout.splitlines()[1]
    assert "val_mAP" in after.stdout and "as last seen" in after.stdout
    kept = _status(real, record_id)["progress"]
    assert (kept["epoch"], kept["max_epoch"], kept["percent"]) == (5, 5, 100.0) and "val_mAP" in kept["kpi"]
    wide = real("list", "-o", "wide")
    row = next(line for line in wide.stdout.splitlines() if line.startswith(record_id))
    assert "epoch 5/5 100%" in row and "val_mAP" in row


def _watcher_kubeconfig(real: Tao, cluster: Cluster, path: Path) -> Path:  # noqa: F811
    """A kubeconfig of a ServiceAccount that may read Jobs, pods and their logs, but not exec into pods."""
    rules = [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]},
             {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]}]
    real.kubectl("create", "serviceaccount", "watcher")
    objects = [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "watcher"},
         "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "watcher"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "watcher"},
         "subjects": [{"kind": "ServiceAccount", "name": "watcher", "namespace": real.namespace}]},
    ]
    real.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    token = real.kubectl("create", "token", "watcher", "--duration=10m").stdout.strip()
    admin = json.loads(real.kubectl("config", "view", "--raw", "--minify", "-o", "json").stdout)
    server = admin["clusters"][0]["cluster"]
    ca = server["certificate-authority-data"]
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "watcher",
        "clusters": [{"name": "local", "cluster": {"server": server["server"], "certificate-authority-data": ca}}],
        "users": [{"name": "watcher", "user": {"token": token}}],
        "contexts": [{"name": "watcher", "context": {"cluster": "local", "user": "watcher",
                                                     "namespace": real.namespace}}],
    }
    path.write_text(json.dumps(config), encoding="utf-8")
    path.chmod(0o600)
    return path


def test_without_permission_to_exec_status_reads_rank_0s_log_and_says_so_once(
    real: Tao, cluster: Cluster, tmp_path: Path  # noqa: F811
) -> None:
    shutil.copy(PROGRAM, real.volume / "tao_train.py")  # type: ignore[attr-defined]
    command = "python3 /workspace/tao_train.py --epochs 4 --epoch-seconds 8 --steps 5"
    result = submit(real, torch_image(cluster), command, gpus=0)
    assert result.returncode == 0, result.stderr
    record_id = result.stdout.strip().splitlines()[-1]
    config = _watcher_kubeconfig(real, cluster, tmp_path / "watcher.kubeconfig")
    said: list[str] = []

    def from_the_log() -> bool:
        shown = real("status", record_id, "--kubeconfig", str(config))
        assert shown.returncode == 0, shown.stderr
        said.append(shown.stdout)
        return "RUNNING" in shown.stdout and "Progress: epoch " in shown.stdout and "(from log of pod " in shown.stdout

    wait_for(from_the_log, 180, interval=1, message="status to read the progress from rank 0's log")
    note = "Note: progress read from rank 0's log: kubectl may not exec into pods (Forbidden)"
    assert sum(out.count(note) for out in said) == 1
    assert "Metrics: train_loss " in said[-1]
    assert real.extra(record_id)["progress_read"]["why"] == "forbidden"
