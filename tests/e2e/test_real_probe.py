"""`kubectl tao probe nccl` on the local cluster's real nodes: the real probe script under torchrun, one
rank per real node, placed with submit's own --node-selector/--toleration. The nodes have no GPU and the
torch image no CUDA, so the ranks fall back to gloo on CPU: the probe passes and says plainly that NCCL was
not exercised.

Skipped when the cluster has no real nodes (KUBECTL_TAO_REAL_NODES=0).
"""

from __future__ import annotations

import json

import pytest
from support.cluster import Cluster, Tao, wait_for

from .test_real_pods import ON_REAL_NODES, images, real, real_images, record_pods  # noqa: F401

pytestmark = pytest.mark.e2e


def test_probe_nccl_runs_its_script_on_two_real_nodes_and_passes_over_gloo(
    real: Tao, cluster: Cluster  # noqa: F811
) -> None:
    image = wait_for(lambda: real_images(cluster).get("TORCH_IMAGE"), 300, message="the torch image on the nodes")
    probe = ["probe", "nccl", "--image", image, *ON_REAL_NODES, "--timeout", "180s", "--pending-timeout", "300s"]
    result = real(*probe, "-o", "json", timeout=420)
    assert result.returncode == 0, result.stderr + result.stdout
    report = json.loads(result.stdout)
    assert (report["result"], report["backend"], report["cached"]) == ("pass", "gloo", False), report
    record_id = report["record_id"]
    assert sorted(p["spec"]["nodeName"] for p in record_pods(real, record_id)) == ["real-node-0", "real-node-1"]
    logs = real("logs", record_id).stdout
    for rank in (0, 1):
        assert f"[rank {rank}] nccl-probe: rank {rank} result ok backend=gloo" in logs, logs
    assert "backend gloo (no CUDA device is visible): NCCL is NOT exercised" in logs
    assert "all_reduce of 64 MiB over 2 CPU processes (gloo, not NCCL)" in logs
    # The cached result keeps the backend, and the report says what was and was not exercised.
    cached = real(*probe)
    assert cached.returncode == 0, cached.stderr
    assert cached.stdout.startswith("nccl probe: pass over gloo, not NCCL (2 nodes x 1 GPU"), cached.stdout
    assert "backend: gloo on CPU (no CUDA or NCCL in the pods): NCCL was NOT exercised" in cached.stdout
    assert "cached" in cached.stdout
