"""A producer's action request submitted for real: the job flags reach its Job (here a node selector and a
label, which the scheduler and the API server act on), and legacy ACCESS_KEY / SECRET_KEY from an env-file
fill a request that forwards them under those names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cluster import REPO, Tao, pods_of_job, submitted_id

pytestmark = pytest.mark.e2e

FIXTURES = REPO / "tests" / "fixtures" / "action"


def _files(tmp_path: Path) -> tuple[Path, Path]:
    request = json.loads((FIXTURES / "request-args.json").read_text(encoding="utf-8"))
    request["forward_env"] = ["ACCESS_KEY", "SECRET_KEY"]
    request_path, staging_path = tmp_path / "request.json", tmp_path / "staging.json"
    request_path.write_text(json.dumps(request), encoding="utf-8")
    staging_path.write_text((FIXTURES / "staging-args.json").read_text(encoding="utf-8"), encoding="utf-8")
    return request_path, staging_path


@pytest.mark.timeout(120)
def test_action_request_job_gets_job_flags_and_legacy_s3_names(tao: Tao, tmp_path: Path) -> None:
    request, staging = _files(tmp_path)
    env_file = tmp_path / "legacy.env"
    env_file.write_text("ACCESS_KEY=AKIAEXAMPLEEXAMPLE12\nSECRET_KEY=legacy-secret-value\n", encoding="utf-8")
    result = tao(
        "submit", "--action-request", str(request), "--staging-map", str(staging), "--pvc", "tao-data",
        "--results-dir", "/workspace/results/run-1", "--env-file", str(env_file), "--image-pull-secret", "ngc",
        "--node-selector", "kubernetes.io/hostname=gpu-node-1", "--label", "team=vision", "--wait", "--timeout", "60",
    )
    record_id = submitted_id(result)
    extra = tao.extra(record_id)
    job = json.loads(tao.kubectl("get", "job", extra["job_name"], "-o", "json").stdout)
    pod_spec = job["spec"]["template"]["spec"]
    assert pod_spec["nodeSelector"] == {"kubernetes.io/hostname": "gpu-node-1"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod_spec["tolerations"]
    assert job["metadata"]["labels"]["team"] == "vision"
    assert {pod["spec"]["nodeName"] for pod in pods_of_job(extra["job_name"], tao.namespace)} == {"gpu-node-1"}
    refs = {
        e["name"]: e["valueFrom"]["secretKeyRef"]["key"]
        for e in pod_spec["containers"][0]["env"]
        if "valueFrom" in e
    }
    assert refs == {"ACCESS_KEY": "ACCESS_KEY", "SECRET_KEY": "SECRET_KEY"}
    assert tao.record(record_id)["terminal_state"] == "COMPLETE"
    assert "legacy-secret-value" not in json.dumps(job)
