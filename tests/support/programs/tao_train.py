#!/usr/bin/env python3
"""A TAO-shaped training program for the real-node tests: torch on CPU, a tiny model, and the files and output
a TAO PyTorch train task leaves, so `status`'s progress readers see what they see from TAO itself.

- `<results>/status.json`, appended by rank 0 one JSON object a line as TAO's StatusLogger writes it: `date`
  ("M/D/YYYY"), `time` ("H:M:S"), `status`, `verbosity`, then `message` and the last `kpi` the logger was
  given (it repeats on later lines); the lifecycle of the workflow decorator ("Starting <name> train.",
  "Train finished successfully.", or a FAILURE line with the exception); the TAOStatusLogger callback's
  lines (TAO 6: Lightning's 0-based epoch, max_epoch = epochs - 1, step, max_step, time_per_epoch,
  time_per_step, eta as str(timedelta)); "Eval metrics generated." and "Train metrics generated." kpi lines;
- `model_epoch_NNN.pth` after each epoch and a `<name>_latest.pth` link to the newest, from which a new run
  resumes;
- a tqdm-style bar on stdout (Lightning's training bar: `Epoch N: ...%|...| n/total [elapsed<remaining,
  rate, v_num=0, train_loss=...]`, redrawn with carriage returns, closed with a newline each epoch).

--hang-after N sleeps forever after epoch N without output; --fail-after N raises after epoch N (exit 1).
The results directory is --results, else `$TAO_RESULTS_ROOT/train`, else `./results/train`.
Without torch the program refuses to run, unless TAO_STAND_IN_WITHOUT_TORCH=1 (the unit test of its
status.json on a machine without torch): then the model is plain Python and checkpoints are JSON.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import signal
import sys
import time
from datetime import datetime, timedelta

try:
    import torch
except ImportError:
    if os.environ.get("TAO_STAND_IN_WITHOUT_TORCH") != "1":
        raise
    torch = None

STATUS = {"success": "SUCCESS", "failure": "FAILURE", "started": "STARTED", "running": "RUNNING"}


class StatusLogger:
    """TAO's StatusLogger: the generic keys, the message, the last kpi; rank 0 appends."""

    def __init__(self, path: str, rank0: bool) -> None:
        self.path, self.rank0, self.kpi = path, rank0, {}

    def write(self, data: dict | None = None, status: str = "running", message: str | None = None) -> None:
        if not self.rank0:
            return
        now = datetime.now()
        data = dict(data or {})
        data["date"] = f"{now.month}/{now.day}/{now.year}"
        data["time"] = f"{now.hour}:{now.minute}:{now.second}"
        data["status"] = STATUS[status]
        data["verbosity"] = "INFO"
        if message:
            data["message"] = message
        if self.kpi:
            data["kpi"] = self.kpi
        with open(self.path, "a", encoding="utf-8") as file:
            file.write(json.dumps(data) + "\n")


def clock(seconds: float) -> str:
    """tqdm's format_interval: [H:]MM:SS."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:d}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


BLOCKS = " " + "".join(map(chr, range(0x258F, 0x2587, -1)))  # tqdm's Bar.UTF: " ▏▎▍▌▋▊▉█"


def bar(epoch: int, n: int, total: int, elapsed: float, loss: float) -> str:
    """tqdm's format_meter with Lightning's description and postfix: the 10-cell bar tqdm draws on a pipe."""
    frac = n / total
    rate = n / elapsed if elapsed else None
    remaining = clock((total - n) / rate) if rate else "?"
    cells, part = divmod(int(frac * 10 * 8), 8)
    meter = BLOCKS[-1] * cells + (BLOCKS[part] + " " * (9 - cells) if cells < 10 else "")
    rate_fmt = (f"{1 / rate:5.2f}s/it" if rate < 1 else f"{rate:5.2f}it/s") if rate else "?it/s"
    return (f"Epoch {epoch}: {frac * 100:3.0f}%|{meter}| {n}/{total} [{clock(elapsed)}<{remaining}, {rate_fmt}, "
            f"v_num=0, train_loss={loss:.3f}]")


class Model:
    """y = w.x + b on fixed random data, by SGD: torch when present."""

    def __init__(self) -> None:
        random.seed(0)
        self.xs = [[random.uniform(-1, 1) for _ in range(8)] for _ in range(64)]
        self.ys = [sum(x) * 0.5 + 0.1 for x in self.xs]
        if torch is not None:
            torch.manual_seed(0)
            self.net = torch.nn.Linear(8, 1)
            self.opt = torch.optim.SGD(self.net.parameters(), lr=0.05)
            self.x, self.y = torch.tensor(self.xs), torch.tensor(self.ys).unsqueeze(1)
        else:
            self.w, self.b = [0.0] * 8, 0.0

    def step(self) -> float:
        if torch is not None:
            self.opt.zero_grad()
            loss = torch.nn.functional.mse_loss(self.net(self.x), self.y)
            loss.backward()
            self.opt.step()
            return float(loss.item())
        preds = [sum(w * v for w, v in zip(self.w, x, strict=True)) + self.b for x in self.xs]
        errs = [p - y for p, y in zip(preds, self.ys, strict=True)]
        for i in range(8):
            self.w[i] -= 0.05 * 2 * sum(e * x[i] for e, x in zip(errs, self.xs, strict=True)) / len(errs)
        self.b -= 0.05 * 2 * sum(errs) / len(errs)
        return sum(e * e for e in errs) / len(errs)

    def state(self) -> dict:
        if torch is not None:
            return {"model": self.net.state_dict(), "optimizer": self.opt.state_dict()}
        return {"w": self.w, "b": self.b}

    def load(self, state: dict) -> None:
        if torch is not None:
            self.net.load_state_dict(state["model"])
            self.opt.load_state_dict(state["optimizer"])
        else:
            self.w, self.b = state["w"], state["b"]


def save(path: str, state: dict) -> None:
    if torch is not None:
        torch.save(state, path + ".tmp")
    else:
        with open(path + ".tmp", "w", encoding="utf-8") as file:
            json.dump(state, file)
    os.replace(path + ".tmp", path)


def load(path: str) -> dict:
    if torch is not None:
        return torch.load(path)
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def link_latest(results: str, name: str, target: str) -> None:
    link = os.path.join(results, f"{name}_latest.pth")
    os.symlink(os.path.basename(target), link + ".tmp")
    os.replace(link + ".tmp", link)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--epoch-seconds", type=float, default=1.0)
    parser.add_argument("--steps", type=int, default=10, help="steps per epoch")
    parser.add_argument("--hang-after", type=int, default=None, metavar="N")
    parser.add_argument("--fail-after", type=int, default=None, metavar="N")
    parser.add_argument("--results", default=None)
    parser.add_argument("--name", default="tao_stand_in")
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.steps < 1 or args.epoch_seconds < 0:
        parser.error("--epochs and --steps take a positive count, --epoch-seconds a duration >= 0")
    results = args.results or os.path.join(os.environ.get("TAO_RESULTS_ROOT", "results"), "train")
    os.makedirs(results, exist_ok=True)
    rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", "0")))
    logger = StatusLogger(os.path.join(results, "status.json"), rank == 0)
    logger.write(status="started", message=f"Starting {args.name} train.")
    try:
        model = Model()
        start = 0
        latest = sorted(glob.glob(os.path.join(results, "*_latest.pth")))
        if latest:
            state = load(os.path.realpath(latest[0]))
            model.load(state)
            start = int(state["epoch"]) + 1
            print(f"Resuming training from checkpoint {os.path.realpath(latest[0])} at epoch {start}", flush=True)
        logger.write(status="started", message="Starting Training Loop.")
        max_step = args.epochs * args.steps
        for epoch in range(start, args.epochs):
            began = time.monotonic()
            loss = 0.0
            for n in range(1, args.steps + 1):
                time.sleep(args.epoch_seconds / args.steps)
                loss = model.step()
                end = "\n" if n == args.steps else ""
                sys.stdout.write("\r" + bar(epoch, n, args.steps, time.monotonic() - began, loss) + end)
                sys.stdout.flush()
            took = time.monotonic() - began
            logger.kpi = {"val_loss": loss * 1.1, "val_mAP": str(round(1.0 / (1.0 + loss), 4))}
            logger.write(message="Eval metrics generated.")
            logger.write(data={
                "epoch": epoch, "step": (epoch + 1) * args.steps, "max_epoch": args.epochs - 1, "max_step": max_step,
                "time_per_epoch": str(timedelta(seconds=took)),
                "time_per_step": str(timedelta(seconds=took / args.steps)),
                "eta": str(timedelta(seconds=(args.epochs - 1 - epoch) * took)),
            }, message="Training loop in progress")
            logger.kpi = {"train_loss": loss}
            logger.write(message="Train metrics generated.")
            if rank == 0:
                target = os.path.join(results, f"model_epoch_{epoch:03d}.pth")
                save(target, {"epoch": epoch, **model.state()})
                link_latest(results, args.name, target)
            if args.fail_after is not None and epoch + 1 >= args.fail_after:
                raise RuntimeError(f"stand-in failure after epoch {epoch + 1}")
            if args.hang_after is not None and epoch + 1 >= args.hang_after:
                while True:
                    signal.pause()
        logger.write(message="Training loop complete.")
        logger.write(message="Train finished successfully.")
    except Exception as error:
        logger.write(status="failure", message=str(error))
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
