"""A chatty rank's real error is read and named on the real nodes (docs/diagnosis.md): rank 1 of a two-node job
prints 400 NCCL INFO lines of about 320 bytes (far more than the first read's 64 KiB of its last 300 lines), then
the CUDA OOM traceback the failure corpus recorded from torch 2.15, and exits 1; rank 0 listens on MASTER_PORT
(what rank 1's rendezvous barrier waits for, as torch's store would), prints a line and fails 20 s later, so rank 1
is the first to fail. The real kubelet answers `--tail` and `--limit-bytes`; `explain`, `status`, `logs --errors`
and the record must name the OOM on rank 1, only rank 1's log is read again, and the URL password the rank
printed never shows. Skipped when the cluster has no real nodes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cluster import Cluster, Tao, claim_on_real_nodes, kubectl, wait_for
from support.fake_kubectl import nccl_info

from .test_real_pods import ON_REAL_NODES, REAL_NODE_LABEL, real_images

pytestmark = pytest.mark.e2e

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "failures"
OOM = "cuda-oom--torch-2.15-in-pod.log"
OOM_LINE = next(e["key_line"] for e in json.loads((CORPUS / "corpus.json").read_text()) if e["file"] == OOM)
PASSWORD = "Tr0ub4dor-ChattyCanary-e2e"
RANK1 = (
    nccl_info("node-1", 400)
    + f"downloading https://bob:{PASSWORD}@data.example.com/train.json\n"
    + (CORPUS / OOM).read_text().replace("[rank3]:", "[rank1]:")
)
COMMAND = (
    'if [ "$NODE_RANK" = 1 ]; then cat /workspace/chatty.log >&2; exit 1; fi; '
    'nc -l -p "$MASTER_PORT" >/dev/null & echo step 3 loss 0.0312; sleep 20; exit 1'
)


@pytest.fixture(scope="module")
def chatty(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Tao, str]]:
    if not kubectl("get", "nodes", "-l", REAL_NODE_LABEL, "-o", "name").stdout.split():
        pytest.skip("the local cluster has no real nodes (KUBECTL_TAO_REAL_NODES=0)")
    with claim_on_real_nodes(cluster, "e2e-chatty", tmp_path_factory.mktemp("chatty") / "state") as (t, volume):
        (volume / "chatty.log").write_text(RANK1)
        busybox = real_images(cluster)["BUSYBOX_IMAGE"]
        result = t(
            "submit", "--image", busybox, "--network-arch", "diag", "--action", "run", "--gpus", "0", "--nodes", "2",
            "--pvc", "tao-data", "--command", COMMAND, "--rendezvous-timeout", "120", *ON_REAL_NODES, timeout=240,
        )
        assert result.returncode == 0, result.stderr
        record_id = result.stdout.strip().splitlines()[-1]

        def ended() -> bool:
            seen = t("status", record_id, "-o", "json")  # the look that captures the ending
            return seen.returncode == 0 and json.loads(seen.stdout)["state"] in ("ERROR", "COMPLETE", "UNKNOWN")

        wait_for(ended, 300, interval=3, message="the chatty job to end")
        yield t, record_id


def test_the_chatty_ranks_oom_is_named_on_rank_1(chatty: tuple[Tao, str]) -> None:
    t, record_id = chatty
    assert len(RANK1.encode()) > 2 * 64 * 1024  # the first read of the last 300 lines stops far before the end
    seen: dict[str, Any] = json.loads(t("status", record_id, "-o", "json").stdout)
    assert (seen["state"], seen["reason"], seen["err_class"]) == ("ERROR", "CudaOOM", "ERR_PROGRAM"), seen
    history = t.extra(record_id)["history"]
    assert history["first_failed_rank"] == 1, history  # rank 0 still sleeps: its exit does not decide
    found = history["diagnosis"]
    assert (found["cause"], found["rank"]) == ("CudaOOM", 1), found
    pods = {rank["rank"]: rank["pod"] for rank in history["ranks"]}
    # the diagnosis' re-reads of one pod (status's progress read of a running rank 0 takes --timestamps)
    rereads = [argv for argv in t.kubectl_calls() if "logs" in argv and "-l" not in argv and "--timestamps" not in argv]
    assert rereads and all(pods[1] in argv and pods[0] not in argv for argv in rereads), rereads
    assert found["evidence"] == OOM_LINE.replace("[rank3]:", "[rank1]:")
    explain = t("explain", record_id)
    assert explain.returncode == 1, explain.stderr
    assert "ERROR - CudaOOM" in explain.stdout.splitlines()[0], explain.stdout
    assert "on rank 1 (CudaOOM, ERR_PROGRAM)" in explain.stdout
    errors = t("logs", record_id, "--errors")
    assert errors.returncode == 0 and any(
        line.startswith("[rank 1] [rank1]: torch.OutOfMemoryError") for line in errors.stdout.splitlines()
    ), errors.stdout
    shown = "".join([explain.stdout, explain.stderr, json.dumps(seen), errors.stdout,
                     json.dumps(t.extra(record_id)), json.dumps(t.record(record_id)),
                     t("explain", record_id, "-o", "json").stdout, t("logs", record_id).stdout])
    assert PASSWORD not in shown
