"""`kubectl tao resubmit` on the local cluster's real nodes (real kubelets, containerd, runc): a job that wrote a
checkpoint into its results directory and then failed is run again from its record, the new job finds that
checkpoint in the same directory, resumes from it and COMPLETEs; a record edited by hand (a request flag of the
wrong type, a results directory off the volume) is refused in one line, exit 2, and nothing reaches the cluster.

Skipped when the cluster has no real nodes (KUBECTL_TAO_REAL_NODES=0).
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest
from support.cluster import Tao

from .test_real_pods import images, real, record_pods, submit  # noqa: F401

pytestmark = pytest.mark.e2e

# The same program for both runs, as a resume-aware training script is: without a checkpoint in its results
# directory it trains to step 3, saves a checkpoint naming the pod that wrote it, and fails (exit 1); with one it
# prints what it read, goes on from that step and ends.
RESUMABLE = """\
set -eu
mkdir -p "$TAO_RESULTS_ROOT"
ckpt="$TAO_RESULTS_ROOT/checkpoint_latest.txt"
if [ -f "$ckpt" ]; then
  read -r step writer < "$ckpt"
  echo "resumed from step $step (checkpoint written by $writer) in $TAO_RESULTS_ROOT"
else
  step=0
  echo "no checkpoint in $TAO_RESULTS_ROOT: starting at step 0"
fi
while [ "$step" -lt 6 ]; do
  step=$((step + 1))
  echo "step $step"
  if [ ! -f "$ckpt" ] && [ "$step" -eq 3 ]; then
    echo "$step $(hostname)" > "$ckpt.tmp"
    mv "$ckpt.tmp" "$ckpt"
    echo "saved checkpoint at step $step; failing now" >&2
    exit 1
  fi
done
echo "training done at step $step"
"""


def failed_with_checkpoint(real: Tao, images: dict[str, str]) -> tuple[str, Path]:  # noqa: F811
    """A job of RESUMABLE that saved its checkpoint and failed: its record id and its results directory on the
    host (the claim's hostPath)."""
    (real.volume / "resumable.sh").write_text(RESUMABLE)  # type: ignore[attr-defined]
    result = submit(real, images["BUSYBOX_IMAGE"], "sh /workspace/resumable.sh", "--wait", "--timeout", "180", gpus=0)
    assert result.returncode == 1, result.stderr + result.stdout
    old = result.stdout.strip().splitlines()[-1]
    record = real.record(old)
    assert record["terminal_state"] == "ERROR", record
    results = record["results_dir"]
    assert results.startswith("/workspace/"), results
    on_host = real.volume / results.removeprefix("/workspace/")  # type: ignore[attr-defined]
    assert (on_host / "checkpoint_latest.txt").is_file()
    return old, on_host


def test_a_failed_job_resubmitted_resumes_from_its_checkpoint_in_the_same_results_dir_and_completes(
    real: Tao, images: dict[str, str]  # noqa: F811
) -> None:
    old, on_host = failed_with_checkpoint(real, images)
    (first_pod,) = record_pods(real, old)
    assert (on_host / "checkpoint_latest.txt").read_text().split() == ["3", first_pod["metadata"]["name"]]
    first_logs = real("logs", old).stdout
    assert "starting at step 0" in first_logs and "resumed" not in first_logs, first_logs

    result = real("resubmit", old, "--wait", "--timeout", "180", timeout=240)
    assert result.returncode == 0, result.stderr + result.stdout
    new = result.stdout.strip().splitlines()[-1]
    assert new != old
    new_record, old_record = real.record(new), real.record(old)
    assert new_record["terminal_state"] == "COMPLETE", new_record
    assert new_record["results_dir"] == old_record["results_dir"]
    assert new_record["retry_of"] == old
    assert real.extra(old)["resubmitted_as"] == [new]

    # A real container of the new job read the file the old job's pod wrote, in the same directory.
    (new_pod,) = record_pods(real, new)
    assert new_pod["metadata"]["name"] != first_pod["metadata"]["name"]
    assert new_pod["spec"]["nodeName"].startswith("real-node-")
    logs = real("logs", new)
    assert logs.returncode == 0, logs.stderr
    lines = logs.stdout.splitlines()
    assert (
        f"resumed from step 3 (checkpoint written by {first_pod['metadata']['name']}) in {old_record['results_dir']}"
        in lines
    ), logs.stdout
    assert [line for line in lines if line.startswith("step ")] == ["step 4", "step 5", "step 6"], logs.stdout
    assert "training done at step 6" in lines


def test_a_hand_edited_record_is_refused_in_one_line_and_nothing_reaches_the_cluster(
    real: Tao, images: dict[str, str]  # noqa: F811
) -> None:
    old, _ = failed_with_checkpoint(real, images)
    jobs_dir = real.state_dir / "jobs"
    extra_file = jobs_dir / ".kubectl-tao" / f"{old}.json"
    record_file = jobs_dir / f"{old}.json"
    pristine = {path: path.read_bytes() for path in (extra_file, record_file)}
    jobs_before = real.kubectl("get", "jobs", "-o", "name").stdout.split()
    records_before = real.records()

    def refused(expected_start: str, names: str) -> None:
        calls = len(real.kubectl_calls())
        result = real("resubmit", old, "--wait", "--timeout", "60")
        assert result.returncode == 2, result.stderr + result.stdout
        assert len(result.stderr.splitlines()) == 1, result.stderr
        assert result.stderr.startswith(expected_start), result.stderr
        assert names in result.stderr, result.stderr
        assert result.stdout == ""
        # Refused before any cluster call: no record, no Job, no link from the old record.
        assert all("create" not in call for call in real.kubectl_calls()[calls:])
        assert real.records() == records_before
        assert real.kubectl("get", "jobs", "-o", "name").stdout.split() == jobs_before
        assert "resubmitted_as" not in real.extra(old)

    # A number stored as text in the kept request: `"gpus": "8"` where submit's parser keeps 8.
    extra = json.loads(extra_file.read_text())
    extra["request"]["flags"]["gpus"] = "8"
    extra_file.write_text(json.dumps(extra, indent=2))
    refused(f"error: job {old}: request.flags.gpus in {extra_file} is a string, not a whole number", "--gpus")
    extra_file.write_bytes(pristine[extra_file])

    # A results directory moved off the job's volume: submit's own check of --results-dir refuses it.
    elsewhere = f"/etc/tao-{secrets.token_hex(3)}"
    record = json.loads(record_file.read_text())
    record["results_dir"] = elsewhere
    record_file.write_text(json.dumps(record, indent=2))
    refused("error: ", f"{elsewhere}: must be on the mounted volume (under --mount-path /workspace)")
    record_file.write_bytes(pristine[record_file])

    # Put back as it was, the record resubmits (the refusals left nothing behind that stands in the way).
    result = real("resubmit", old, "--dry-run=client", "-o", "name")
    assert result.returncode == 0, result.stderr
    assert real.kubectl("get", "jobs", "-o", "name").stdout.split() == jobs_before
