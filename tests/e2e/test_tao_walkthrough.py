"""docs/tao.md, run as written: every ```sh block of the page, in order, in one `bash -euo pipefail` process, on
the local cluster's real nodes, with a TAO-shaped stand-in for the TAO image's `dino` command line
(tests/support/programs/tao_cli.py over tao_train.py: torch on CPU, the same arguments, files and status.json).

The page's text is changed only by the table in `substitutions`, each row expected a fixed number of times: a row
that no longer matches the page fails the test, so the page and its test cannot drift apart. The ```text block (the
file layout the page assumes) is not run: the test writes specs/ and data/ itself. A ```sh long-running block
(`results tensorboard`, which stays until Ctrl-C) runs in a subshell whose exit code is kept; the real nodes'
torch image has no TensorBoard, so here it ends by itself with its documented failure line (exit 1) and leaves no
pod, which the test asserts. Its success path (the URL answering) runs in test_real_tensorboard.py with a stand-in.

Skipped when the cluster has no real nodes (KUBECTL_TAO_REAL_NODES=0).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest
from support.cluster import REPO, TAO, Cluster, Tao

from .test_real_pods import ON_REAL_NODES, images, real, real_images  # noqa: F401
from .test_real_progress import torch_image

pytestmark = pytest.mark.e2e

PAGE = REPO / "docs" / "tao.md"
PROGRAMS = REPO / "tests" / "support" / "programs"
TAO_IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt"
STAND_IN = "python3 /workspace/.stand-in/tao_cli.py dino "
PLACEMENT = " ".join(ON_REAL_NODES)
HELPER_SELECTOR = "app.kubernetes.io/component=volume-helper"


def substitutions(torch: str) -> list[tuple[str, str, int]]:
    """THE table of changes for the local cluster: (regular expression, replacement, times it must match)."""
    return [
        # the TAO image -> the real nodes' torch image (no registry here; the stand-in runs in it)
        (re.escape(TAO_IMAGE), torch, 3),
        # TAO's `dino` entry point -> the stand-in, at the start of each job's command
        (r"""(--command ["'])dino """, rf"\g<1>{STAND_IN}", 3),
        # the real nodes have one (fake) GPU each
        (r"--gpus 8\b", "--gpus 1", 2),
        # placement on the real nodes (their own label and taint), as every real-node test does
        (r"kubectl tao submit ", f"kubectl tao submit {PLACEMENT} ", 3),
        (r"kubectl tao data push ", f"kubectl tao data push {PLACEMENT} ", 1),
    ]


def sh_blocks(page: str) -> list[tuple[bool, str]]:
    """The page's ```sh blocks in order: (long-running, text). A ```sh long-running block stays until Ctrl-C."""
    return [(kind == " long-running", text)
            for kind, text in re.findall(r"^```sh( long-running)?\n(.*?)^```$", page, flags=re.S | re.M)]


def as_script(blocks: list[tuple[bool, str]]) -> str:
    """One bash script of the blocks. A long-running block runs in a subshell whose output and exit code go to
    long-running-N.out and long-running-N.rc, and the script goes on (here it ends by itself: see below)."""
    parts = []
    for n, (long_running, text) in enumerate(blocks):
        if long_running:
            text = (f"if ( {text.strip()}\n) >long-running-{n}.out 2>&1; then echo 0 >long-running-{n}.rc;"
                    f" else echo $? >long-running-{n}.rc; fi\n")
        parts.append(text)
    return "\n".join(parts)


def local_script(page: str, torch: str) -> str:
    script = as_script(sh_blocks(page))
    for pattern, replacement, times in substitutions(torch):
        script, made = re.subn(pattern, replacement, script)
        assert made == times, f"docs/tao.md: {pattern!r} matched {made} times, expected {times}: update the page's test"
    return script


def write_inputs(work: Path) -> None:
    """The specs and dataset the page assumes in the current directory (its ```text layout)."""
    (work / "specs").mkdir()
    (work / "data" / "coco" / "images").mkdir(parents=True)
    (work / "data" / "coco" / "annotations.json").write_text('{"images": [], "annotations": []}\n')
    for n in range(3):
        (work / "data" / "coco" / "images" / f"{n:06d}.jpg").write_bytes(os.urandom(2048 + n))
    dataset = "    json_file: /workspace/data/coco/annotations.json\n    image_dir: /workspace/data/coco/images\n"
    (work / "specs" / "train.yaml").write_text(f"train:\n  num_epochs: 2\ndataset:\n  train_data_sources:\n{dataset}")
    (work / "specs" / "evaluate.yaml").write_text(f"dataset:\n  test_data_sources:\n{dataset}")
    (work / "specs" / "export.yaml").write_text("export:\n  input_width: 640\n  input_height: 640\n")


def test_every_substitution_matches_the_page() -> None:
    # no cluster: the table and the page agree (the e2e test below needs this too, with the real image)
    script = local_script(PAGE.read_text(encoding="utf-8"), "torch-image")
    assert TAO_IMAGE not in script and "--gpus 8" not in script
    blocks = sh_blocks(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) >= 10 and [text for long_running, text in blocks if long_running] == [
        'kubectl tao results tensorboard "$TRAIN"\n']


def test_a_page_that_no_longer_matches_a_substitution_fails_the_test() -> None:
    page = PAGE.read_text(encoding="utf-8")
    for changed in (page.replace("--gpus 8", "--gpus 4"), page.replace("--command 'dino ", "--command 'tao dino ")):
        with pytest.raises(AssertionError, match="update the page's test"):
            local_script(changed, "torch-image")


def test_the_tao_walkthrough_runs_from_an_empty_volume_to_a_pulled_export(
    real: Tao, cluster: Cluster, tmp_path: Path  # noqa: F811
) -> None:
    script = local_script(PAGE.read_text(encoding="utf-8"), torch_image(cluster))
    volume: Path = real.volume  # type: ignore[attr-defined]
    volume.chmod(0o777)  # a hostPath ignores fsGroup: writable by the helper's UID, as a real driver makes it
    (volume / ".stand-in").mkdir()
    for program in ("tao_cli.py", "tao_train.py"):
        shutil.copy(PROGRAMS / program, volume / ".stand-in" / program)
    work = tmp_path / "work"
    work.mkdir()
    write_inputs(work)
    plugin_dir = tmp_path / "bin"
    plugin_dir.mkdir()
    (plugin_dir / "kubectl-tao").symlink_to(TAO)  # `kubectl tao` finds the plugin on PATH, as after `make install`
    key = "nvapi-" + secrets.token_hex(24)
    env = {
        **real.env,
        "PATH": f"{plugin_dir}{os.pathsep}{real.env['PATH']}",
        "NGC_API_KEY": key,
        "KUBECTL_TAO_HELPER_IMAGE": real_images(cluster)["BUSYBOX_IMAGE"],
    }
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env, capture_output=True,
                         text=True, timeout=1500, check=False)
    output = run.stdout + run.stderr
    print(output)  # the page's run as a user sees it (pytest -rP shows it)
    assert run.returncode == 0, output

    # three jobs, each COMPLETE: train, evaluate, export
    records = {real.record(r)["action"]: real.record(r) for r in real.records()}
    assert sorted(records) == ["evaluate", "export", "train"], records
    assert all(r["terminal_state"] == "COMPLETE" for r in records.values()), records
    train, export = records["train"]["id"], records["export"]["id"]

    # the pulled export names the trained checkpoint, which `--latest` pulled beside it, byte for byte
    onnx = work / export / "export" / "dino_model.onnx"
    assert onnx.is_file(), output
    latest = (volume / "results" / train / "train" / "dino_model_latest.pth").resolve()
    pulled = work / train / "train" / latest.name
    assert pulled.read_bytes() == latest.read_bytes()
    digest = hashlib.sha256(pulled.read_bytes()).hexdigest()
    assert onnx.read_text() == f"stand-in onnx of {latest.name} sha256 {digest}\n"
    kpis = json.loads((volume / "results" / records["evaluate"]["id"] / "evaluate" / "status.json")
                      .read_text().splitlines()[-1])
    assert kpis["status"] == "SUCCESS" and kpis["kpi"]["test_mAP"] == 0.41, kpis
    assert f"training job: {train}" in run.stdout

    # the key is in no manifest, record, kubectl argv or output: only in Secrets
    shown = real.kubectl("get", "jobs,pods", "-o", "yaml").stdout
    # the training job's container gets the key from its own Secret, by name, and the Secret holds it
    job = json.loads(real.kubectl("get", "job", real.extra(train)["job_name"], "-o", "json").stdout)
    (container,) = job["spec"]["template"]["spec"]["containers"]
    (creds,) = [e["secretRef"]["name"] for e in container.get("envFrom", []) if "secretRef" in e]
    assert creds.startswith("tao-creds-"), container.get("envFrom")
    held = real.kubectl("get", "secret", creds, "-o", "jsonpath={.data.NGC_CLI_API_KEY}").stdout
    assert base64.b64decode(held).decode() == key
    stored = "".join(p.read_text(errors="replace") for p in real.state_dir.rglob("*") if p.is_file())
    encoded = base64.b64encode(key.encode()).decode()
    for where, text in {"jobs and pods": shown, "records and kubectl trace": stored, "output": output}.items():
        assert key not in text and encoded not in text, f"the NGC key is in the {where}"
    assert real.kubectl("get", "secret", "ngc", "-o", "name").stdout.strip() == "secret/ngc"

    # TensorBoard: the torch image has none, so the command ends by itself with its documented failure line
    (board,) = [n for n, (long_running, _) in enumerate(sh_blocks(PAGE.read_text(encoding="utf-8"))) if long_running]
    said = (work / f"long-running-{board}.out").read_text()
    assert (work / f"long-running-{board}.rc").read_text().strip() == "1", said
    assert "could not start" in said and "tensorboard" in said, said

    # no helper pod is left
    assert real.kubectl("get", "pods", "-l", HELPER_SELECTOR, "-o", "name").stdout == ""
