"""fit verdicts (fits / queue / never) and explain, against the real local control plane (Kueue: test_kueue.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .test_verbs import Tao, submitted_id, wait_for  # the `tao` fixture comes from conftest.py

pytestmark = pytest.mark.e2e

def fit(t: Tao, *args: str) -> tuple[int, dict[str, Any]]:
    result = t("fit", *args, "-o", "json")
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else {}


def hold_all_gpus(t: Tao) -> list[str]:
    holders = [submitted_id(t.submit(annotations={"kwok.kubectl-tao.io/stay-running": "true"})) for _ in range(2)]
    wait_for(lambda: all(json.loads(t("status", h, "-o", "json").stdout)["state"] == "RUNNING" for h in holders), 60)
    return holders


def release(t: Tao, holders: list[str]) -> None:
    for holder in holders:
        t("cancel", holder)


def test_fit_verdicts_fits_queue_never(tao: Tao) -> None:
    code, data = fit(tao, "--gpus", "8", "--nodes", "2")
    assert code == 0 and data["verdict"] == "fits"
    assert sorted(data["chosen"]) == ["gpu-node-0", "gpu-node-1"]
    code, data = fit(tao, "--gpus", "12")
    assert code == 4 and data["verdict"] == "never" and "gpu-node-" in data["message"]
    code, data = fit(tao, "--gpus", "8", "--nodes", "3")
    assert code == 4 and data["verdict"] == "never"
    holders = hold_all_gpus(tao)
    try:
        code, data = fit(tao, "--gpus", "8")
        assert code == 1 and data["verdict"] == "queue"
        assert "in use" in data["message"]
    finally:
        release(tao, holders)


def test_fit_honours_the_gpu_product_label(tao: Tao) -> None:
    code, data = fit(tao, "--gpus", "8", "--gpu-product", "NVIDIA-H100-80GB-HBM3")
    assert code == 0 and data["verdict"] == "fits"
    code, data = fit(tao, "--gpus", "1", "--gpu-product", "NVIDIA-A100-SXM4-80GB")
    assert code == 4 and data["verdict"] == "never"


def explain(t: Tao, record_id: str) -> tuple[int, list[dict[str, Any]]]:
    result = t("explain", record_id, "-o", "json")
    data = json.loads(result.stdout) if result.stdout.strip() else {}
    return result.returncode, data.get("findings", data if isinstance(data, list) else [])


def causes(findings: list[dict[str, Any]]) -> str:
    return " ".join(f"{f.get('code', '')} {f.get('cause', '')} {f.get('fix', '')}" for f in findings)


def test_explain_image_pull_backoff_names_the_pull_secret_fix(tao: Tao) -> None:
    record_id = submitted_id(tao.submit(annotations={"kwok.kubectl-tao.io/image-pull": "backoff"}))
    wait_for(lambda: json.loads(tao("status", record_id, "-o", "json").stdout)["reason"] == "ImagePullBackOff", 60)
    code, findings = explain(tao, record_id)
    assert code == 1 and findings
    text = causes(findings)
    assert "image" in text.lower() and "secret image-pull" in text
    tao("cancel", record_id)


def test_explain_insufficient_gpus_while_the_cluster_is_busy(tao: Tao) -> None:
    holders = hold_all_gpus(tao)
    try:
        record_id = submitted_id(tao.submit())
        wait_for(lambda: "nvidia.com/gpu" in json.loads(tao("status", record_id, "-o", "json").stdout)["reason"], 60)
        code, findings = explain(tao, record_id)
        assert code == 1 and "nvidia.com/gpu" in json.dumps(findings)
        assert "fit" in causes(findings)
        tao("cancel", record_id)
    finally:
        release(tao, holders)


def test_explain_oomkilled_after_the_job_failed(tao: Tao) -> None:
    result = tao.submit("--wait", "--timeout", "120", annotations={"kwok.kubectl-tao.io/oom": "true"})
    record_id = result.stdout.strip()
    code, findings = explain(tao, record_id)
    assert code == 1
    text = causes(findings).lower()
    assert "oom" in text and "memory" in text


def test_explain_a_program_exit_code_points_at_the_logs(tao: Tao) -> None:
    result = tao.submit("--wait", "--timeout", "120", annotations={"kwok.kubectl-tao.io/exit-code": "2"})
    record_id = result.stdout.strip()
    code, findings = explain(tao, record_id)
    assert code == 1 and "kubectl tao logs" in causes(findings)


def test_explain_a_healthy_job_finds_nothing(tao: Tao) -> None:
    record_id = submitted_id(
        tao.submit("--wait", "--timeout", "120", annotations={"kwok.kubectl-tao.io/run-seconds": "1"})
    )
    code, findings = explain(tao, record_id)
    assert code == 0 and findings == []
