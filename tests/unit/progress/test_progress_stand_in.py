"""The TAO-shaped training program of the real-node tests (tests/support/programs/tao_train.py), run here and
read back by the progress readers: its status.json as TAO's logger writes it, its checkpoints and latest link,
its resume, its failure and its hang. Where torch is not importable the program runs its plain-Python model
(TAO_STAND_IN_WITHOUT_TORCH=1); the real-node tests always run it with torch."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from kubectl_tao.progress.logtext import read_log
from kubectl_tao.progress.model import FAILED, SUCCEEDED, progress_cell
from kubectl_tao.progress.statusjson import read_status_json

PROGRAM = Path(__file__).resolve().parents[2] / "support" / "programs" / "tao_train.py"
ENV = {**os.environ, "RANK": "0"}
if importlib.util.find_spec("torch") is None:
    ENV["TAO_STAND_IN_WITHOUT_TORCH"] = "1"


def train(results: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(PROGRAM), "--results", str(results), "--epoch-seconds", "0.05",
                           "--steps", "4", *args], env=ENV, capture_output=True, text=True, timeout=120)


def status_lines(results: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (results / "status.json").read_text(encoding="utf-8").splitlines()]


def test_a_whole_run_reads_as_finished_with_its_metrics_from_status_json_and_from_its_bar(tmp_path: Path) -> None:
    results = tmp_path / "train"
    run = train(results, "--epochs", "3")
    assert run.returncode == 0, run.stderr
    progress = read_status_json((results / "status.json").read_bytes())
    assert progress is not None and progress.source == "status.json"
    assert (progress.epoch, progress.max_epoch, progress.step, progress.total_steps) == (3, 3, 12, 12)
    assert (progress.percent, progress.eta_seconds, progress.state) == (100.0, 0, SUCCEEDED)
    assert progress.kpi is not None and list(progress.kpi) == ["val_loss", "val_mAP", "train_loss"]
    assert progress.updated is not None and progress.epoch_seconds
    lines = status_lines(results)
    assert [line["message"] for line in lines[:2]] == ["Starting tao_stand_in train.", "Starting Training Loop."]
    assert lines[-1]["message"] == "Train finished successfully." and lines[-1]["status"] == "RUNNING"
    assert list(lines[3])[:7] == ["epoch", "step", "max_epoch", "max_step", "time_per_epoch", "time_per_step", "eta"]
    assert list(lines[3])[7:] == ["date", "time", "status", "verbosity", "message", "kpi"]
    bar = read_log(run.stdout)
    assert bar is not None and progress_cell(bar) == "epoch 3 100%"
    assert bar.kpi == {"train_loss": round(progress.kpi["train_loss"], 3)}
    names = sorted(p.name for p in results.iterdir())
    assert names == ["model_epoch_000.pth", "model_epoch_001.pth", "model_epoch_002.pth", "status.json",
                     "tao_stand_in_latest.pth"]
    assert os.readlink(results / "tao_stand_in_latest.pth") == "model_epoch_002.pth"


def test_a_second_run_resumes_from_the_latest_checkpoint_and_appends(tmp_path: Path) -> None:
    results = tmp_path / "train"
    assert train(results, "--epochs", "2").returncode == 0
    run = train(results, "--epochs", "4")
    assert run.returncode == 0, run.stderr
    assert f"Resuming training from checkpoint {results / 'model_epoch_001.pth'} at epoch 2" in run.stdout
    epochs = [line["epoch"] for line in status_lines(results) if "epoch" in line]
    assert epochs == [0, 1, 2, 3]
    progress = read_status_json((results / "status.json").read_text(encoding="utf-8"))
    assert progress is not None and (progress.epoch, progress.max_epoch, progress.state) == (4, 4, SUCCEEDED)
    assert "Epoch 0:" not in run.stdout and "Epoch 3: 100%" in run.stdout


def test_a_failure_after_an_epoch_ends_the_program_and_writes_a_failure_line(tmp_path: Path) -> None:
    results = tmp_path / "train"
    run = train(results, "--epochs", "3", "--fail-after", "1")
    assert run.returncode == 1
    assert run.stderr.rstrip().endswith("RuntimeError: stand-in failure after epoch 1")
    progress = read_status_json((results / "status.json").read_text(encoding="utf-8"))
    assert progress is not None
    assert (progress.epoch, progress.max_epoch, progress.state) == (1, 3, FAILED)
    assert progress.message == "stand-in failure after epoch 1"


def test_a_hang_after_an_epoch_keeps_the_program_alive_and_silent(tmp_path: Path) -> None:
    results = tmp_path / "train"
    command = [sys.executable, str(PROGRAM), "--results", str(results), "--epoch-seconds", "0.05", "--steps", "4",
               "--epochs", "3", "--hang-after", "1"]
    with subprocess.Popen(command, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as program:
        try:
            link = results / "tao_stand_in_latest.pth"
            for _ in range(600):  # until epoch 1's checkpoint is linked (the program is then past its last write)
                if link.is_symlink() or program.poll() is not None:
                    break
                time.sleep(0.1)
            assert program.poll() is None, program.stderr.read() if program.stderr else ""
        finally:
            program.kill()
        out, _ = program.communicate()
    assert "Epoch 0: 100%" in out and "Epoch 1" not in out
    progress = read_status_json((results / "status.json").read_text(encoding="utf-8"))
    assert progress is not None and (progress.epoch, progress.state) == (1, "running")


def test_bad_counts_are_refused_with_usage_and_exit_2(tmp_path: Path) -> None:
    run = train(tmp_path / "train", "--epochs", "0")
    assert run.returncode == 2
    assert run.stderr.rstrip().endswith("--epochs and --steps take a positive count, --epoch-seconds a duration >= 0")
    assert not (tmp_path / "train").exists()
