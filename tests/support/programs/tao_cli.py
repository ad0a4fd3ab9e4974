#!/usr/bin/env python3
"""A stand-in for a TAO model's command line (`dino train|evaluate|export -e SPEC key=value...`) for the walkthrough
test of docs/tao.md: the same arguments, the same files read and written, torch on CPU (tao_train.py beside it).

- Every task reads its experiment spec (-e) and refuses a missing one as TAO does (the spec's path in the error);
  a spec value under /workspace/data must exist (the dataset `data push` put there).
- `results_dir=DIR` (else $TAO_RESULTS_ROOT) is the experiment's results directory; each task writes under
  DIR/<task>/ its status.json (TAO's StatusLogger lines: the workflow decorator's "Starting <arch> <task>." and
  "<Task> finished successfully.") and its outputs.
- train: tao_train.py's run (epochs from `train.num_epochs=N`, else the spec's `num_epochs:`, else 2):
  model_epoch_NNN.pth checkpoints and `<arch>_model_latest.pth` linking the newest.
- evaluate: loads `evaluate.checkpoint=PATH` and writes the evaluation's KPIs (test_mAP, test_mAP50).
- export: loads `export.checkpoint=PATH` and writes `export.onnx_file=PATH` (default DIR/export/<arch>_model.onnx):
  a marker and the checkpoint's SHA-256, not a real ONNX graph.
"""

from __future__ import annotations

import hashlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tao_train  # beside this file (sys.path above)

TASKS = ("train", "evaluate", "export")


def parse(argv: list[str]) -> tuple[str, str, str, dict[str, str]]:
    if len(argv) < 4 or argv[1] not in TASKS or argv[2] != "-e":
        sys.exit(f"usage: ARCH {{{','.join(TASKS)}}} -e SPEC [key=value ...]; got {' '.join(argv)}")
    arch, task, spec = argv[0], argv[1], argv[3]
    overrides = {}
    for item in argv[4:]:
        key, eq, value = item.partition("=")
        if not eq:
            sys.exit(f"{arch} {task}: override {item!r} is not key=value")
        overrides[key] = value
    return arch, task, spec, overrides


def read_spec(path: str) -> dict[str, str]:
    """`key: value` lines of the spec (the stand-in reads no nesting), after checking that it exists."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"spec file not found: {path}")
    values = {}
    with open(path, encoding="utf-8") as file:
        for line in file:
            key, colon, value = line.strip().partition(":")
            if colon and value.strip():
                values[key.strip()] = value.strip().strip("'\"")
    for key, value in values.items():
        if value.startswith("/workspace/data") and not os.path.exists(value):
            raise FileNotFoundError(f"{key}: {value} does not exist")
    return values


def checkpoint(overrides: dict[str, str], task: str) -> str:
    path = overrides.get(f"{task}.checkpoint")
    if not path:
        raise ValueError(f"{task}.checkpoint=PATH is required")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{task}.checkpoint {path} does not exist")
    return os.path.realpath(path)


def main(argv: list[str]) -> int:
    arch, task, spec_path, overrides = parse(argv)
    root = overrides.get("results_dir") or os.environ.get("TAO_RESULTS_ROOT") or "results"
    results = os.path.join(root, task)
    os.makedirs(results, exist_ok=True)
    spec = read_spec(spec_path)
    if task == "train":
        epochs = overrides.get("train.num_epochs") or spec.get("num_epochs") or "2"
        return tao_train.main(["--epochs", epochs, "--epoch-seconds", "0.3", "--steps", "3", "--results", results,
                               "--name", f"{arch}_model"])
    logger = tao_train.StatusLogger(os.path.join(results, "status.json"), True)
    logger.write(status="started", message=f"Starting {arch} {task}.")
    try:
        source = checkpoint(overrides, task)
        state = tao_train.load(source)
        if task == "evaluate":
            logger.kpi = {"test_mAP": 0.41, "test_mAP50": 0.62}
            logger.write(message="Evaluation metrics generated.")
            print(f"Evaluated checkpoint {source} (epoch {state['epoch']}): test_mAP 0.41", flush=True)
        else:
            onnx = overrides.get("export.onnx_file") or os.path.join(results, f"{arch}_model.onnx")
            os.makedirs(os.path.dirname(onnx), exist_ok=True)
            with open(source, "rb") as file:
                digest = hashlib.sha256(file.read()).hexdigest()
            with open(onnx, "w", encoding="utf-8") as file:
                file.write(f"stand-in onnx of {os.path.basename(source)} sha256 {digest}\n")
            print(f"Exported {source} to {onnx}", flush=True)
        logger.write(status="success", message=f"{task.capitalize()} finished successfully.")
    except Exception as error:
        logger.write(status="failure", message=str(error))
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
