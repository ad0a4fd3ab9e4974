"""On the real control plane: what a job's run writes into its record reads back typed, every property a typed
field, and the verbs that read a finished job's record (status, logs, explain) read it through those values."""

from __future__ import annotations

import json

import pytest
from support.cluster import RUN_SECONDS, SIMULATED_LOG_LINE, Tao, submitted_id, wait_for

from kubectl_tao.store.jobrecord import JobRecord, K8sRecord

pytestmark = pytest.mark.e2e


def test_a_finished_jobs_record_reads_back_typed_and_the_verbs_read_it(tao: Tao) -> None:
    record_id = submitted_id(tao.submit("--ttl-seconds", "0", "--wait", "--timeout", "120",
                                        annotations={RUN_SECONDS: "1"}))
    raw, extra = tao.record(record_id), tao.extra(record_id)
    job, k8s = JobRecord.from_stored(raw), K8sRecord.from_stored(extra)
    # Every property kubectl-tao wrote has its typed field, and the values give back the files exactly.
    assert (job.other, k8s.other) == ({}, {})
    assert job.to_stored() == raw and k8s.to_stored() == extra
    assert (job.state, job.terminal, job.backend_ref) == ("COMPLETE", True, f"{tao.namespace}/{k8s.job_name}")
    assert k8s.history is not None and k8s.history.state == "COMPLETE" and k8s.history.ranks[0].exit_code == 0
    assert k8s.flags["pvc"] == "tao-data" and k8s.gpus == 8 and k8s.nodes == 1
    tail = k8s.history.ranks[0].tail_lines
    assert SIMULATED_LOG_LINE in tail

    wait_for(lambda: tao.kubectl("get", "job", str(k8s.job_name), "--ignore-not-found", "-o", "name",
                                 check=False).stdout.strip() == "", 60, message="TTL 0 to delete the Job")
    status = json.loads(tao("status", record_id, "-o", "json").stdout)
    assert status["state"] == "COMPLETE" and status["history"] == extra["history"]
    logs = tao("logs", record_id)
    assert logs.returncode == 0, logs.stderr
    assert "the Job is gone" in logs.stderr and logs.stdout.splitlines() == list(tail)
    explained = tao("explain", record_id)
    assert explained.returncode == 0, explained.stderr
    assert "captured" in explained.stdout + explained.stderr
