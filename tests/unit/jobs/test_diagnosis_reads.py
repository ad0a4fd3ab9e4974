"""The end of every rank's log is read whatever its line lengths (diagnosis/ranklogs.read_logs): the fake kubectl
answers `--tail`, `--limit-bytes` and `--prefix` as the kubelet and kubectl do (support.fake_kubectl.kubectl_logs),
so a chatty rank's first read stops at the byte limit long before its traceback, a cut line runs into the next
pod's prefix, and a log of fewer lines than asked is read from its start every time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.fake_kubectl import FakeKubectl, failed_job, fixture_json, kubectl_logs, nccl_info

from kubectl_tao.diagnosis import ranklogs
from kubectl_tao.store.records import RecordStore

SERVER = "https://127.0.0.1:6443"
CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "failures"
OOM = "cuda-oom--torch-2.15-in-pod.log"
OOM_LINE = next(e["key_line"] for e in json.loads((CORPUS / "corpus.json").read_text()) if e["file"] == OOM)


def launched(job: dict[str, Any], *, gpus: int = 1, launcher: str = "tao") -> tuple[RecordStore, str]:
    store = RecordStore()
    record = store.open(platform="kubernetes", image="busybox", network_arch="dino", action="train",
                        storage_tier="A", results_dir="/workspace/results/x")
    name = job["metadata"]["name"]
    store.update_extra(record.id, api_server=SERVER, namespace="tao-jobs", job_name=name,
                       job_uid=job["metadata"]["uid"], nodes=int(job["spec"]["completions"]), gpus=gpus,
                       submit_phase="created", request={"flags": {"launcher": launcher}, "given": []})
    store.mark(record.id, "RUNNING", message="applied", backend_ref=f"tao-jobs/{name}")
    return store, record.id


def serve(fake: FakeKubectl, job: dict[str, Any], pods: list[dict[str, Any]], texts: dict[str, str]) -> None:
    fake.on("get", "jobs,pods", data={"kind": "List", "items": [job, *pods]})
    fake.on("get", "events", data={"kind": "List", "items": []})
    fake.on("get", "nodes", data={"kind": "List", "items": []})
    fake.on("patch", stdout="job.batch/patched\n")
    fake.logs(texts)


def oom_of(rank: int) -> str:
    """The recorded CUDA OOM of a torchrun worker, as rank RANK of a one-GPU-per-pod job prints it."""
    return (CORPUS / OOM).read_text().replace("[rank3]:", f"[rank{rank}]:")


def chatty_job() -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, str]]:
    job, pods = failed_job(2)
    names = [p["metadata"]["name"] for p in pods]
    texts = {
        names[0]: nccl_info("node-0", 400) + "step 3 loss 0.0312\n",
        names[1]: nccl_info("node-1", 400) + oom_of(1),
    }
    return job, pods, texts


def test_a_chatty_ranks_traceback_past_the_byte_limit_is_read_and_named(cli: Any, fake_kubectl: FakeKubectl) -> None:
    job, pods, texts = chatty_job()
    first = kubectl_logs(texts, ranklogs.log_args("tao-jobs", "tao-job=x", 2)).stdout
    assert "OutOfMemoryError" not in first  # what one read of the last 300 lines within 64 KiB holds
    store, record_id = launched(job)
    serve(fake_kubectl, job, pods, texts)
    code, out, _ = cli("explain", record_id)
    assert code == 1
    assert out.splitlines()[0].endswith("ERROR - CudaOOM"), out
    assert f"   evidence: rank 1: {OOM_LINE.replace('[rank3]:', '[rank1]:')}"[:100] in out
    code, out, _ = cli("explain", record_id, "-o", "json")
    found = json.loads(out)["diagnosis"]
    assert (found["cause"], found["rank"], found["pod"]) == ("CudaOOM", 1, pods[1]["metadata"]["name"])
    code, out, _ = cli("logs", record_id, "--errors")
    assert code == 0 and any(line.startswith("[rank 1] [rank1]: torch.OutOfMemoryError") for line in out.splitlines())
    code, out, _ = cli("status", record_id)
    assert "CudaOOM" in out.splitlines()[1], out
    history = store.get_extra(record_id)["history"]
    assert history["diagnosis"]["rank"] == 1
    assert history["ranks"][1]["log_tail"][-1] == oom_of(1).splitlines()[-1]


def test_each_reread_is_one_pod_bounded_by_bytes(fake_kubectl: FakeKubectl) -> None:
    from kubectl_tao.k8s.kubectl import Kubectl

    _, _, texts = chatty_job()
    fake_kubectl.logs(texts)
    read = ranklogs.read_logs(Kubectl(), "tao-jobs", "tao-job=x", 2, names=list(texts))
    calls = [c for c in fake_kubectl.argvs() if "logs" in c]
    assert len(calls) == 3  # one for every rank, then one for each rank the byte limit cut
    for argv in calls:
        assert f"--limit-bytes={ranklogs.READ_BYTES}" in argv
    for pod, text in texts.items():
        assert read.texts[pod] == "\n".join(text.splitlines()[-ranklogs.READ_LINES:])  # whole, once, in order
        again = next(c for c in calls[1:] if pod in c)  # the lines the first read did not get, alone
        assert "--prefix" not in again and 0 < int(next(a for a in again if a.startswith("--tail="))[7:]) < 300


def test_the_pods_read_the_same_in_whatever_order_kubectl_prints_them(fake_kubectl: FakeKubectl) -> None:
    from itertools import permutations

    from kubectl_tao.k8s.kubectl import Kubectl

    # kubectl's logs.go ranges over a Go map of the pods' requests: a selector's pods come in any order.
    _, _, chatty = chatty_job()
    texts = {**chatty, "j-2-ccccc": "progress 99%", "j-3-ddddd": "y" * 70_000 + "\n[rank3]: ValueError: bad\n"}
    reads = []
    for order in permutations(texts):
        fake_kubectl.logs({pod: texts[pod] for pod in order})
        reads.append(ranklogs.read_logs(Kubectl(), "tao-jobs", "tao-job=x", 4, names=list(texts)).texts)
    assert all(read == reads[0] for read in reads[1:])
    assert reads[0]["j-2-ccccc"] == "progress 99%" and reads[0]["j-3-ddddd"].endswith("\n[rank3]: ValueError: bad")
    for pod, text in chatty.items():
        assert reads[0][pod] == "\n".join(text.splitlines()[-ranklogs.READ_LINES:])


def test_a_log_of_fewer_lines_than_asked_is_not_doubled(fake_kubectl: FakeKubectl) -> None:
    from kubectl_tao.k8s.kubectl import Kubectl

    text = nccl_info("node-0", 200) + oom_of(0)  # fewer than 300 lines, more than 64 KiB
    assert len(text.splitlines()) < ranklogs.READ_LINES and len(text.encode()) > ranklogs.READ_BYTES
    fake_kubectl.logs({"p-0-aaaaa": text})
    read = ranklogs.read_logs(Kubectl(), "tao-jobs", "tao-job=x", 1, names=["p-0-aaaaa"])
    assert read.texts["p-0-aaaaa"] == text.removesuffix("\n") and read.notes == []


def test_lines_longer_than_the_limit_end_within_a_bounded_number_of_reads(fake_kubectl: FakeKubectl) -> None:
    from kubectl_tao.k8s.kubectl import Kubectl

    text = ("x" * 100_000 + "\n") * 20 + "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    fake_kubectl.logs({"p-0-aaaaa": text})
    read = ranklogs.read_logs(Kubectl(), "tao-jobs", "tao-job=x", 1, names=["p-0-aaaaa"])
    calls = [c for c in fake_kubectl.argvs() if "logs" in c]
    assert len(calls) <= 1 + ranklogs.REREADS
    got = read.texts["p-0-aaaaa"]
    assert got.endswith("RuntimeError: CUDA error: an illegal memory access was encountered")
    assert len(got.encode()) <= (1 + ranklogs.REREADS) * ranklogs.READ_BYTES


def test_a_cut_line_never_runs_into_the_next_pods_first_line() -> None:
    texts = {"j-0-aaaaa": "a" * 70_000 + "\n", "j-1-bbbbb": "[rank1]: first line of rank 1\nsecond\n"}
    out = kubectl_logs(texts, ["logs", "-l", "tao-job=j", "--prefix", "--tail=300", "--limit-bytes=65536"]).stdout
    assert "a[pod/j-1-bbbbb/tao] [rank1]: first line of rank 1" in out  # kubectl glues them on one line
    split = ranklogs.split_prefixed(out)
    assert split.lines["j-1-bbbbb"] == ["[rank1]: first line of rank 1", "second"]
    assert split.lines["j-0-aaaaa"] == [] and split.cut["j-0-aaaaa"] == "a" * 65536


def test_a_cut_inside_a_multibyte_character_still_splits_where_the_next_pod_begins() -> None:
    texts = {"j-0-aaaaa": "é" * 40_000 + "\n", "j-1-bbbbb": "next\n"}
    out = kubectl_logs(texts, ["logs", "-l", "tao-job=j", "--prefix", "--limit-bytes=65535"]).stdout
    split = ranklogs.split_prefixed(out, limit=65535)
    assert split.lines["j-1-bbbbb"] == ["next"] and split.cut["j-0-aaaaa"].startswith("é" * 32767)


def test_a_log_without_a_last_newline_keeps_its_line_when_the_pods_are_known() -> None:
    texts = {"j-0-aaaaa": "progress 99%", "j-1-bbbbb": "[rank1]: RuntimeError: boom\n"}
    out = kubectl_logs(texts, ["logs", "-l", "tao-job=j", "--prefix", "--tail=300"]).stdout
    split = ranklogs.split_prefixed(out, pods=list(texts))
    assert split.texts() == {"j-0-aaaaa": "progress 99%", "j-1-bbbbb": "[rank1]: RuntimeError: boom"}
    # A pod's own text naming a pod that has already printed is its text, never a split.
    out = kubectl_logs({"j-1-bbbbb": "x\n", "j-0-aaaaa": "see [pod/j-1-bbbbb/tao] y\n"},
                       ["logs", "-l", "tao-job=j", "--prefix"]).stdout
    assert ranklogs.split_prefixed(out, pods=["j-0-aaaaa", "j-1-bbbbb"]).lines["j-0-aaaaa"] == [
        "see [pod/j-1-bbbbb/tao] y"]


def test_a_rank_prefix_a_program_printed_never_blames_that_rank() -> None:
    _, pods = failed_job(2)
    names = [p["metadata"]["name"] for p in pods]
    live = {"ranks": [{"rank": r, "pod": names[r], "node": f"gpu-node-{r}", "exit_code": 1} for r in range(2)],
            "first_failed_rank": None}
    fake = oom_of(0)  # rank 1 prints what rank 0 would print
    read = ranklogs.LogRead({names[0]: "step 3 loss 0.0312", names[1]: fake})
    found = ranklogs.diagnose(read, live, gpus=1, per_pod=1)
    assert found is not None and (found.cause, found.rank, found.pod) == ("CudaOOM", 1, names[1])
    # torch's own prefix of a rank the pod runs (8 GPUs a pod: pod 1 runs ranks 8..15) stays that rank.
    read = ranklogs.LogRead({names[0]: "step 3 loss 0.0312", names[1]: oom_of(9)})
    found = ranklogs.diagnose(read, live, gpus=8, per_pod=8)
    assert found is not None and (found.cause, found.rank) == ("CudaOOM", 9)


def test_a_finished_jobs_capture_reads_a_bounded_tail(cli: Any, fake_kubectl: FakeKubectl) -> None:
    job, pods = failed_job(1)
    job["status"] = fixture_json("complete.job.json")["status"]
    for pod in pods:
        pod["status"] = fixture_json("complete.pods.json")["items"][0]["status"]
        for status in pod["status"]["containerStatuses"]:
            status["name"] = "tao"
    store, record_id = launched(job)
    line = "y" * 5_000_000
    serve(fake_kubectl, job, pods, {pods[0]["metadata"]["name"]: f"start\n{line}\ndone\n"})
    code, out, _ = cli("status", record_id)
    assert code == 0 and "COMPLETE" in out, out
    calls = [c for c in fake_kubectl.argvs() if "logs" in c]
    assert all(f"--limit-bytes={ranklogs.READ_BYTES}" in c for c in calls) and "--tail=50" in calls[0]
    tail = store.get_extra(record_id)["history"]["ranks"][0]["log_tail"]
    assert tail[-1] == "done" and sum(len(t) for t in tail) <= 2 * ranklogs.READ_BYTES


def test_explain_of_a_torchrun_job_never_blames_a_rank_a_program_named(cli: Any, fake_kubectl: FakeKubectl) -> None:
    job, pods = failed_job(2)
    names = [p["metadata"]["name"] for p in pods]
    _, record_id = launched(job, launcher="torchrun")
    serve(fake_kubectl, job, pods, {names[0]: "step 3 loss 0.0312\n", names[1]: oom_of(0)})
    code, out, _ = cli("explain", record_id, "-o", "json")
    assert code == 1
    found = json.loads(out)["diagnosis"]
    assert (found["cause"], found["rank"], found["pod"]) == ("CudaOOM", 1, names[1]), found


def test_logs_errors_shows_a_rank_prefix_a_program_printed_under_its_own_pod(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    job, pods = failed_job(2)
    names = [p["metadata"]["name"] for p in pods]
    store, record_id = launched(job, launcher="torchrun")
    serve(fake_kubectl, job, pods, {names[0]: "step 3 loss 0.0312\n", names[1]: oom_of(0)})
    oom = OOM_LINE.replace("[rank3]:", "[rank0]:")  # pod 1 (rank 1) printed rank 0's text
    code, out, _ = cli("logs", record_id, "--errors")
    lines = out.splitlines()
    assert code == 0 and f"[rank 1] {oom}" in lines, out
    assert all(line.startswith("[rank 1] [rank0]: ") for line in lines), out  # as the pod printed it
    code, out, err = cli("logs", record_id, "--errors", "--rank", "0")
    assert code == 0 and out == "" and "no error" in err, out
    assert f"[rank 1] {oom}" in cli("logs", record_id, "--errors", "--rank", "1")[1].splitlines()
    # The record keeps the block under the pod's rank, as printed; once the Job is gone it is shown the same way.
    assert cli("status", record_id)[0] == 0
    kept = {entry["rank"]: entry.get("errors") for entry in store.get_extra(record_id)["history"]["ranks"]}
    assert not kept[0] and oom in kept[1] and all(line.startswith("[rank0]: ") for line in kept[1]), kept
    fake_kubectl.rules.clear()
    fake_kubectl.on("get", "jobs,pods", data={"kind": "List", "items": []})
    code, out, err = cli("logs", record_id, "--errors")
    assert code == 0 and "the Job is gone" in err and f"[rank 1] {oom}" in out.splitlines(), out
    assert not [line for line in out.splitlines() if line.startswith("[rank 0]")], out


def test_error_blocks_tell_ranks_apart_by_the_ranks_a_pod_runs() -> None:
    text = "\n".join([
        "[rank9]: Traceback (most recent call last):",
        "[rank9]: RuntimeError: CUDA error: an illegal memory access was encountered",
        "[rank0]: Traceback (most recent call last):",
        "[rank0]: ValueError: printed by the program of pod 1",
    ])
    blocks = dict(ranklogs.error_blocks(text, 1, 8))  # pod 1 of 8 GPUs a pod runs ranks 8..15
    assert blocks[9][-1].startswith("[rank9]: RuntimeError") and 0 not in blocks
    assert blocks[8] == ["[rank0]: Traceback (most recent call last):",
                         "[rank0]: ValueError: printed by the program of pod 1"]
    # Where the ranks a pod runs are not known, every [rankN]: is torch's.
    assert sorted(r for r, _ in ranklogs.error_blocks(text, 1, None)) == [0, 9]
    assert ranklogs.error_blocks(text, 1) == ranklogs.error_blocks(text, 1, None)


def test_the_ranks_a_pod_runs_are_known_for_multi_node_torchrun_jobs_only() -> None:
    torchrun = {"launcher": "torchrun"}
    assert ranklogs.ranks_per_pod(torchrun, 2, 8) == 8
    assert ranklogs.ranks_per_pod(torchrun, 2, 0) == 1
    assert ranklogs.ranks_per_pod(torchrun, 1, 8) is None  # one pod: its command decides
    assert ranklogs.ranks_per_pod({"launcher": "tao"}, 2, 8) is None
    assert ranklogs.ranks_per_pod({}, 2, 8) is None  # a Job launched another way (no request kept)

