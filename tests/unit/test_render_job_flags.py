"""scripts/render_job takes its job flags from the one flag table (core/flagtable.JOB_FLAGS): each flag it takes is
in its --help under the table's spellings, each one it leaves out says why, and a manifest it prints is the one
`kubectl tao render` plans from the same flags."""

from __future__ import annotations

import re
import runpy
import subprocess
from typing import Any

import pytest
from support import ROOT

from kubectl_tao.core.flagtable import JOB_FLAGS
from kubectl_tao.jobs.flags import job_request
from kubectl_tao.jobs.plan import build
from kubectl_tao.manifests import render

SCRIPT = ROOT / "scripts" / "render_job"


@pytest.fixture(scope="module")
def script() -> dict[str, Any]:
    return runpy.run_path(str(SCRIPT), run_name="render_job")  # its names, without running main


@pytest.fixture(scope="module")
def help_text() -> str:
    result = subprocess.run([str(SCRIPT), "--help"], capture_output=True, text=True, check=True, timeout=120)
    return result.stdout


def test_every_job_flag_render_job_takes_is_in_its_help(script: dict[str, Any], help_text: str) -> None:
    usage = help_text.split("\n\n", 1)[0]  # argparse's usage block: the options the parser has
    options = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", usage))
    taken = script["TAKEN"]
    assert taken and set(taken).isdisjoint(script["NOT_TAKEN"])
    for key in taken:
        assert set(JOB_FLAGS[key].names) <= options, key
        assert " ".join(JOB_FLAGS[key].help.split()[:3]) in " ".join(help_text.split()), key


def test_every_job_flag_is_taken_or_left_out_with_a_reason(script: dict[str, Any], help_text: str) -> None:
    assert set(script["TAKEN"]) | set(script["NOT_TAKEN"]) == set(JOB_FLAGS)
    usage = help_text.split("\n\n", 1)[0]
    for key, why in script["NOT_TAKEN"].items():
        name = JOB_FLAGS[key].names[0]
        assert not re.search(rf"{re.escape(name)}(?![\w-])", usage), name
        assert f"  {name}: {why}" in help_text


def test_the_manifest_is_the_one_kubectl_tao_render_plans(script: dict[str, Any]) -> None:
    argv = ["--record-id", "custom-run-1a2b3c", "--image", "busybox:1.36", "--command", "train.py", "--nodes", "2",
            "--gpus", "4", "--launcher", "torchrun", "--pvc", "shared", "--nccl-env", "NCCL_IB_DISABLE=1",
            "--gpu-product", "H100", "--toleration", "team=a:NoSchedule", "--stall-timeout", "30m"]
    args = script["build_parser"]().parse_args(argv)
    printed = render.render(script["spec_from_args"](args))
    values = {key: value for key, value in vars(args).items() if key in JOB_FLAGS}
    planned = build(job_request(**values), "default", {}).render("custom-run-1a2b3c", "custom-run-1a2b3c", None)
    assert printed == planned
