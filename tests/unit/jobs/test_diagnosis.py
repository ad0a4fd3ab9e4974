"""A failed job's logs, read in one round and named (diagnosis/ranklogs.py): status's REASON, the record (err_class,
the ERROR transition's message, history.diagnosis), explain live and after the TTL, a log that cannot be read,
and a credential printed next to the failure. The fake kubectl answers; tests/e2e/test_diagnosis.py runs the
same on the real cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.fake_kubectl import FakeKubectl, fixture_json, open_kubernetes_record

from kubectl_tao.diagnosis import ranklogs
from kubectl_tao.store.records import RecordStore, schema_errors

SERVER = "https://127.0.0.1:6443"
CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "failures"
OOM = "cuda-oom--torch-2.15-in-pod.log"
OOM_LINE = next(e["key_line"] for e in json.loads((CORPUS / "corpus.json").read_text()) if e["file"] == OOM)
TOKEN = "hf_" + "FakeCanaryJobsx7Q2mR9vL4nB8kT3wZab12"


def _failed() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return fixture_json("exit-code.job.json"), fixture_json("exit-code.pods.json")["items"]


def _launched(job: dict[str, Any], *, state: str = "RUNNING", gpus: int = 8) -> tuple[RecordStore, str]:
    store = RecordStore()
    record = open_kubernetes_record(store)
    name = job["metadata"]["name"]
    store.update_extra(
        record.id, api_server=SERVER, namespace="tao-jobs", job_name=name, job_uid=job["metadata"]["uid"],
        nodes=1, gpus=gpus, submit_phase="created",
    )
    store.mark(record.id, "RUNNING", message="applied", backend_ref=f"tao-jobs/{name}")
    return store, record.id


def _prefixed(pod: str, text: str) -> str:
    return "".join(f"[pod/{pod}/tao] {line}\n" for line in text.splitlines())


def _answer(fake: FakeKubectl, logs: str, *, stderr: str = "", rc: int = 0) -> None:
    job, pods = _failed()
    fake.on("get", "jobs,pods", data={"kind": "List", "items": [job, *pods]})
    fake.on("get", "events", data={"kind": "List", "items": []})
    fake.on("logs", stdout=logs, stderr=stderr, rc=rc)
    fake.on("patch", stdout="job.batch/patched\n")


def _oom_logs(extra: str = "") -> str:
    _, pods = _failed()
    return _prefixed(pods[0]["metadata"]["name"], (CORPUS / OOM).read_text() + extra)


def test_status_names_the_cause_and_the_record_keeps_it(cli: Any, fake_kubectl: FakeKubectl) -> None:
    job, _ = _failed()
    store, record_id = _launched(job)
    _answer(fake_kubectl, _oom_logs())
    code, out, _ = cli("status", record_id)
    assert code == 0
    header, row = out.splitlines()[:2]
    assert "REASON" in header and row.split()[1] == "ERROR" and "CudaOOM" in row
    assert "Message: rank 3: CUDA out of memory (CudaOOM, ERR_PROGRAM); asked for 20.00 GiB" in out
    logs = [a for a in fake_kubectl.argvs() if "logs" in a]
    assert len(logs) == 1, "one kubectl logs call reads every rank"
    assert f"--tail={ranklogs.READ_LINES}" in logs[0] and f"--limit-bytes={ranklogs.READ_BYTES}" in logs[0]
    assert "--ignore-errors" in logs[0] and "--prefix" in logs[0]
    record = store.show(record_id)
    assert record["terminal_state"] == "ERROR" and record["err_class"] == "ERR_PROGRAM"
    assert "CudaOOM" in record["transitions"][-1]["message"]
    found = store.get_extra(record_id)["history"]["diagnosis"]
    assert (found["cause"], found["err_class"], found["rank"]) == ("CudaOOM", "ERR_PROGRAM", 3)
    assert found["evidence"] == OOM_LINE
    assert schema_errors(store.get_extra(record_id), "job-record-k8s") == []
    assert schema_errors(store.show(record_id), "job-record") == []
    bad = {**store.get_extra(record_id)}
    bad["history"] = {**bad["history"], "diagnosis": {**found, "err_class": "ERR_MAYBE"}}
    assert schema_errors(bad, "job-record-k8s"), "the schema knows the diagnosis"
    tail = store.get_extra(record_id)["history"]["ranks"][0]["log_tail"]
    assert len(tail) == ranklogs.TAIL_LINES and tail[-1].startswith("====")
    # Seen again while the Job still exists: the cause, not ExitCode.
    code, out, _ = cli("status", record_id, "-o", "json")
    shown = json.loads(out)
    assert (shown["reason"], shown["err_class"]) == ("CudaOOM", "ERR_PROGRAM")


def test_explain_reads_the_logs_of_a_failed_job_and_names_cause_evidence_and_fix(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    job, _ = _failed()
    _, record_id = _launched(job)
    _answer(fake_kubectl, _oom_logs())
    code, out, _ = cli("explain", record_id)
    assert code == 1
    assert "ERROR - CudaOOM" in out.splitlines()[0]
    assert "1. CUDA out of memory on rank 3 (CudaOOM, ERR_PROGRAM)" in out
    assert f"   evidence: rank 3: {OOM_LINE}" in out
    assert "   details: asked for 20.00 GiB; GPU 3 has 139.81 GiB in total, 17.94 GiB free" in out
    assert "   fix: use a smaller batch" in out
    code, out, _ = cli("explain", record_id, "-o", "json")
    data = json.loads(out)
    assert data["diagnosis"]["cause"] == "CudaOOM" and data["findings"][0]["code"] == "log:CudaOOM"


def test_explain_of_a_job_known_failed_reads_its_logs_in_the_first_round(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    job, _ = _failed()
    store, record_id = _launched(job)
    store.mark(record_id, "ERROR", message="rank 0 exited with code 1", source="poller", err_class="ERR_PROGRAM")
    _answer(fake_kubectl, _oom_logs())
    fake_kubectl.on("get", "jobs,pods", data={"kind": "List", "items": [job, *_failed()[1]]})
    code, out, _ = cli("explain", record_id)
    assert code == 1 and "(CudaOOM, ERR_PROGRAM)" in out
    assert len([a for a in fake_kubectl.argvs() if "logs" in a]) == 1


def test_after_the_ttl_status_and_explain_still_tell_from_the_record(cli: Any, fake_kubectl: FakeKubectl) -> None:
    job, _ = _failed()
    _, record_id = _launched(job)
    _answer(fake_kubectl, _oom_logs())
    assert cli("status", record_id)[0] == 0
    fake_kubectl.rules.clear()
    fake_kubectl.on("get", "jobs,pods", data={"kind": "List", "items": []})
    fake_kubectl.on("get", "events", data={"kind": "List", "items": []})
    code, out, _ = cli("status", record_id)
    assert code == 0 and "CudaOOM" in out.splitlines()[1]
    code, out, _ = cli("explain", record_id)
    assert code == 1 and "(CudaOOM, ERR_PROGRAM)" in out and f"evidence: rank 3: {OOM_LINE}" in out
    assert not [a for a in fake_kubectl.argvs()[-2:] if "logs" in a], "no log read once the pods are gone"


def test_a_log_that_cannot_be_read_is_one_note_and_explain_goes_on(cli: Any, fake_kubectl: FakeKubectl) -> None:
    job, _ = _failed()
    _, record_id = _launched(job)
    refused = (
        'Error from server (Forbidden): pods "dino-train-1d2e3f-a1s2d" is forbidden: User "dev" cannot get '
        'resource "pods/log" in API group "" in the namespace "tao-jobs"'
    )
    _answer(fake_kubectl, "", stderr=refused, rc=1)
    code, out, err = cli("explain", record_id)
    assert code == 1
    notes = [line for line in err.splitlines() if "logs not read" in line]
    assert len(notes) == 1 and "pods/log" in notes[0]
    assert "the program failed (non-zero exit code)" in out, "explain goes on with what the cluster said"


def test_a_credential_printed_next_to_the_failure_never_shows(cli: Any, fake_kubectl: FakeKubectl) -> None:
    job, pods = _failed()
    store, record_id = _launched(job)
    text = f"HF_TOKEN={TOKEN}\nloading\nTraceback (most recent call last):\nValueError: bad token {TOKEN}\n"
    _answer(fake_kubectl, _prefixed(pods[0]["metadata"]["name"], text))
    for args in (("status", record_id), ("explain", record_id), ("explain", record_id, "-o", "json")):
        _, out, err = cli(*args)
        assert TOKEN not in out + err
    assert "ProgramError" in cli("status", record_id)[1]
    saved = json.dumps(store.show(record_id)) + json.dumps(store.get_extra(record_id))
    assert TOKEN not in saved


def test_split_prefixed_keeps_kubectls_own_errors_apart() -> None:
    split = ranklogs.split_prefixed(
        "[pod/a-0-xxxxx/tao] one\n[pod/a-1-yyyyy/tao] two\nerror: container tao is not valid for pod a-2\n"
        "[pod/a-0-xxxxx/tao] three\n"
    )
    assert split.texts() == {"a-0-xxxxx": "one\nthree", "a-1-yyyyy": "two"}
    assert split.errors == ["error: container tao is not valid for pod a-2"] and split.cut == {}
    read = ranklogs.from_result(_completed("error: x\n" * 5))
    assert read.texts == {} and len(read.notes) == 4 and read.notes[-1] == "2 more logs not read"


def _completed(stdout: str) -> Any:
    from kubectl_tao.k8s.kubectl import Completed

    return Completed(stdout, "", 0)


def test_logs_errors_prints_the_first_error_block_of_each_rank(cli: Any, fake_kubectl: FakeKubectl) -> None:
    job, pods = _failed()
    store, record_id = _launched(job)
    text = (CORPUS / "python-exception--single-pod-4-ranks.log").read_text()
    _answer(fake_kubectl, _prefixed(pods[0]["metadata"]["name"], text))
    code, out, _ = cli("logs", record_id, "--errors")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "[rank0]: Traceback (most recent call last):"
    assert "[rank3]: ValueError: corrupt record in shard 00003 at offset 1048576" in lines
    assert not [line for line in lines if "ChildFailedError" in line or "step 2 loss" in line]
    logs = [a for a in fake_kubectl.argvs() if "logs" in a]
    assert f"--tail={ranklogs.READ_LINES}" in logs[0]
    code, _, err = cli("logs", record_id, "--errors", "--raw")
    assert code == 2 and "--errors" in err
    # Once the Job is gone: from the tails the record captured.
    assert cli("status", record_id)[0] == 0
    fake_kubectl.rules.clear()
    fake_kubectl.on("get", "jobs,pods", data={"kind": "List", "items": []})
    code, out, err = cli("logs", record_id, "--errors")
    assert code == 0 and "the Job is gone" in err
    assert "[rank3]: ValueError: corrupt record in shard 00003 at offset 1048576" in out.splitlines()
    assert store.get_extra(record_id)["history"]["diagnosis"]["rank"] == 3


def test_a_gpu_hardware_failure_names_the_node_to_cordon() -> None:
    read = ranklogs.LogRead({"llama-ft-0-abcde": (CORPUS / "gpu-hardware--uncorrectable-ecc.log").read_text()})
    live = {"ranks": [{"rank": 0, "pod": "llama-ft-0-abcde", "node": "gpu-node-07", "exit_code": 1}]}
    found = ranklogs.diagnose(read, live, gpus=8)
    assert found is not None
    assert (found.cause, found.err_class, found.node) == ("GpuHardware", "ERR_INFRA", "gpu-node-07")
    assert "`kubectl cordon gpu-node-07`" in found.fix


def test_output_with_no_known_cause_keeps_the_exit_code_as_the_reason(cli: Any, fake_kubectl: FakeKubectl) -> None:
    job, pods = _failed()
    store, record_id = _launched(job)
    _answer(fake_kubectl, _prefixed(pods[0]["metadata"]["name"], "epoch 1 done\nabout to fail\n"))
    code, out, _ = cli("status", record_id)
    assert code == 0
    row = out.splitlines()[1]
    assert row.split()[1] == "ERROR" and "ExitCode" in row, out
    record = store.show(record_id)
    assert "exited with code" in record["transitions"][-1]["message"]
    assert "no known cause" not in record["transitions"][-1]["message"]
    found = store.get_extra(record_id)["history"]["diagnosis"]
    assert found["facts"] == {"unrecognized": True} and found["evidence"] == "about to fail"
    code, out, _ = cli("explain", record_id)
    assert "ERROR - ExitCode" in out.splitlines()[0], out
    assert "exited with code" in out and "about to fail" in out, out


def test_a_rank_prefix_of_thousands_of_digits_is_a_programs_text_not_a_crash() -> None:
    from kubectl_tao.diagnosis import ranklogs

    line = "[rank" + "7" * 5000 + "]: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert ranklogs.own_ranks(f"step 1\n{line}\n", 1, 2) == f"step 1\n{line}\n"  # no prefix: the pod's own line
