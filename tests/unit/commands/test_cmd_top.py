"""`kubectl tao top JOB`: the DCGM exporter read through the service proxy in one call, nvidia-smi in each rank
through `kubectl exec` where the exporter names no GPU of it, the reasons of ranks not read, bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from support.fake_kubectl import FakeKubectl

from kubectl_tao.core import contract
from kubectl_tao.store.records import RecordStore

SERVER = "https://127.0.0.1:6443"
NS, JOB = "tao-jobs", "dino-train-3f9a1c"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "progress"
UUID0 = "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"
UUID1 = "GPU-b3e0a1c2-77f1-4c3d-9e0b-5a6f2d1c8e94"
QUERY = ["nvidia-smi", "--query-gpu=index,uuid,utilization.gpu,memory.used,memory.total",
         "--format=csv,noheader,nounits"]
EXPORTER = {"kind": "List", "items": [{
    "metadata": {"name": "nvidia-dcgm-exporter", "namespace": "gpu-operator",
                 "labels": {"app": "nvidia-dcgm-exporter"}},
    "spec": {"ports": [{"name": "gpu-metrics", "port": 9400, "targetPort": 9400, "protocol": "TCP"}]},
}]}
PROXY = "/api/v1/namespaces/gpu-operator/services/nvidia-dcgm-exporter:gpu-metrics/proxy/metrics"


def launched(state: str = "RUNNING") -> str:
    records = RecordStore(os.environ["TAO_STATE_DIR"])
    record = records.open(platform="kubernetes", image="nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt",
                          network_arch="dino", action="train", storage_tier="A", results_root="/workspace/results")
    records.mark(record.id, "RUNNING", backend_ref=f"{NS}/{JOB}")
    if state != "RUNNING":
        records.mark(record.id, state)
    records.update_extra(record.id, namespace=NS, job_name=JOB, api_server=SERVER, nodes=2)
    return str(record.id)


def pod(rank: int, phase: str = "Running", node: str = "gpu-node-7") -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": f"{JOB}-{rank}-x7b2k", "namespace": NS, "creationTimestamp": "2026-12-06T09:00:00Z",
                     "labels": {contract.JOB_LABEL: JOB},
                     "annotations": {contract.COMPLETION_INDEX_ANNOTATION: str(rank)}},
        "spec": {"nodeName": node if phase != "Pending" else None},
        "status": {"phase": phase},
    }


def serve(fake: FakeKubectl, *pods: dict[str, Any], exporter: bool = False) -> None:
    job = {"kind": "Job", "metadata": {"name": JOB, "namespace": NS, "uid": "u1"}, "status": {"active": len(pods)}}
    fake.on("get", "jobs,pods", data={"kind": "List", "items": [job, *pods]})
    empty = {"kind": "List", "items": []}
    fake.on("get", "services", "--all-namespaces", "-l", contract.DCGM_SERVICE_SELECTORS[0],
            data=EXPORTER if exporter else empty)
    fake.on("get", "services", "--all-namespaces", "-l", contract.DCGM_SERVICE_SELECTORS[1], data=empty)


def smi(fake: FakeKubectl, rank: int, stdout: str = "", stderr: str = "", rc: int = 0) -> None:
    fake.on("exec", f"{JOB}-{rank}-x7b2k", stdout=stdout, stderr=stderr, rc=rc)


def test_without_an_exporter_each_rank_runs_nvidia_smi_in_its_container(cli: Any, fake_kubectl: FakeKubectl) -> None:
    serve(fake_kubectl, pod(0), pod(1, node="gpu-node-8"))
    smi(fake_kubectl, 0, f"0, {UUID0}, 87, 40213, 143771\n")
    smi(fake_kubectl, 1, f"0, {UUID1}, 0, 2, 143771\n")
    rid = launched()
    code, out, err = cli("top", rid, "-o", "json")
    assert code == 0, err
    data = json.loads(out)
    assert [(r["rank"], r["node"], r["source"], r["idle"], r["low_memory"]) for r in data] == [
        (0, "gpu-node-7", "nvidia-smi", False, False), (1, "gpu-node-8", "nvidia-smi", True, True)]
    assert data[0]["gpus"] == [{"index": 0, "uuid": UUID0, "utilization": 87.0, "memory_used_mib": 40213,
                                "memory_total_mib": 143771, "idle": False}]
    execs = [argv for argv in fake_kubectl.argvs() if "exec" in argv]
    assert sorted(argv[argv.index("exec"):] for argv in execs) == [
        ["exec", f"{JOB}-{rank}-x7b2k", "-n", NS, "-c", "tao", "--", *QUERY] for rank in (0, 1)]
    assert not any("--raw" in argv for argv in fake_kubectl.argvs())


def test_the_table_flags_the_idle_rank_and_warns_once(cli: Any, fake_kubectl: FakeKubectl) -> None:
    serve(fake_kubectl, pod(0), pod(1))
    smi(fake_kubectl, 0, f"0, {UUID0}, 87, 40213, 143771\n")
    smi(fake_kubectl, 1, f"0, {UUID1}, 1, 2, 143771\n")
    code, out, err = cli("top", launched())
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["RANK", "POD", "NODE", "GPU", "UUID", "UTIL", "MEMORY", "FLAGS", "SOURCE"]
    assert lines[2].split()[-5:] == ["1%", "2/143771", "MiB", "idle,low-memory", "nvidia-smi"]
    assert err == ("warning: idle GPUs (below 5% busy) on rank 1; little GPU memory used (below 5%) on rank 1\n")


def test_the_exporter_is_read_in_one_proxy_call_and_names_every_rank(cli: Any, fake_kubectl: FakeKubectl) -> None:
    page = (FIXTURES / "dcgm-exporter-metrics.txt").read_text(encoding="utf-8")
    page = page.replace('namespace="team-a",pod="dino-train-3f9a1c-0-x7b2k"', f'namespace="{NS}",pod="{JOB}-0-x7b2k"')
    serve(fake_kubectl, pod(0), exporter=True)
    fake_kubectl.on("get", "--raw", PROXY, stdout=page)
    code, out, err = cli("top", launched(), "-o", "json")
    assert code == 0, err
    (rank,) = json.loads(out)
    assert rank["source"] == "dcgm" and rank["gpus"][0]["uuid"] == UUID0
    assert rank["gpus"][0]["memory_total_mib"] == 71129 + 9867
    raws = [argv for argv in fake_kubectl.argvs() if "--raw" in argv]
    assert len(raws) == 1 and raws[0][-2:] == ["--raw", PROXY]
    assert not any("exec" in argv for argv in fake_kubectl.argvs())


def test_a_rank_the_exporter_does_not_name_is_read_with_nvidia_smi(cli: Any, fake_kubectl: FakeKubectl) -> None:
    page = (FIXTURES / "dcgm-exporter-metrics.txt").read_text(encoding="utf-8")
    page = page.replace('namespace="team-a",pod="dino-train-3f9a1c-0-x7b2k"', f'namespace="{NS}",pod="{JOB}-0-x7b2k"')
    serve(fake_kubectl, pod(0), pod(1, node="gpu-node-8"), exporter=True)
    fake_kubectl.on("get", "--raw", PROXY, stdout=page)
    smi(fake_kubectl, 1, f"0, {UUID1}, 55, 30000, 143771\n")
    code, out, _ = cli("top", launched(), "-o", "json")
    assert code == 0
    assert [r["source"] for r in json.loads(out)] == ["dcgm", "nvidia-smi"]
    assert [argv[argv.index("exec") + 1] for argv in fake_kubectl.argvs() if "exec" in argv] == [f"{JOB}-1-x7b2k"]


def test_an_exporter_that_cannot_be_read_is_noted_and_every_rank_read_with_nvidia_smi(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    serve(fake_kubectl, pod(0), exporter=True)
    fake_kubectl.on("get", "--raw", PROXY, rc=1, stderr=(
        'Error from server (Forbidden): services "nvidia-dcgm-exporter:gpu-metrics" is forbidden: User "alice" '
        'cannot get resource "services/proxy" in API group "" in the namespace "gpu-operator"'))
    smi(fake_kubectl, 0, f"0, {UUID0}, 87, 40213, 143771\n")
    code, out, err = cli("top", launched(), "-o", "json")
    assert code == 0
    assert json.loads(out)[0]["source"] == "nvidia-smi"
    assert err.startswith("note: the DCGM exporter gpu-operator/nvidia-dcgm-exporter could not be read: Error from "
                          "server (Forbidden)") and "services/proxy" in err


def test_a_rank_that_cannot_run_nvidia_smi_says_why(cli: Any, fake_kubectl: FakeKubectl) -> None:
    serve(fake_kubectl, pod(0), pod(1), pod(2))
    smi(fake_kubectl, 0, rc=1, stderr=(
        'error: Internal error occurred: error executing command in container: failed to exec in container: failed '
        'to start exec "4f1c": OCI runtime exec failed: exec failed: unable to start container process: exec: '
        '"nvidia-smi": executable file not found in $PATH: unknown'))
    smi(fake_kubectl, 1, stdout="Failed to initialize NVML: Unknown Error\n", rc=1,
        stderr="command terminated with exit code 255")
    smi(fake_kubectl, 2, rc=1, stderr=(
        'Error from server (Forbidden): pods "x" is forbidden: User "alice" cannot create resource "pods/exec" '
        'in API group "" in the namespace "tao-jobs"'))
    code, out, _ = cli("top", launched(), "-o", "json")
    assert code == 0
    reasons = [rank["reason"] for rank in json.loads(out)]
    assert reasons[0].startswith("nvidia-smi could not run: error: Internal error occurred") and "$PATH" in reasons[0]
    assert reasons[1] == "nvidia-smi: Failed to initialize NVML: Unknown Error (command terminated with exit code 255)"
    assert "pods/exec" in reasons[2]


def test_a_rank_waiting_to_start_is_listed_with_its_phase(cli: Any, fake_kubectl: FakeKubectl) -> None:
    serve(fake_kubectl, pod(0), pod(1, phase="Pending"))
    smi(fake_kubectl, 0, f"0, {UUID0}, 87, 40213, 143771\n")
    code, out, _ = cli("top", launched(), "-o", "json")
    assert code == 0
    assert json.loads(out)[1]["reason"] == "its pod is Pending"
    assert [argv[argv.index("exec") + 1] for argv in fake_kubectl.argvs() if "exec" in argv] == [f"{JOB}-0-x7b2k"]


def test_a_job_that_is_not_running_is_one_line_exit_2(cli: Any, fake_kubectl: FakeKubectl) -> None:
    rid = launched("COMPLETE")
    code, out, err = cli("top", rid)
    assert (code, out) == (2, "")
    assert err == (f"error: job {rid} is COMPLETE, not running: `top` reads the GPUs of a running job; see "
                   f"`kubectl tao status {rid}`\n")
    assert fake_kubectl.argvs() == []


def test_a_job_with_no_running_pod_is_one_line_exit_2(cli: Any, fake_kubectl: FakeKubectl) -> None:
    serve(fake_kubectl, pod(0, phase="Pending"))
    rid = launched()
    code, _, err = cli("top", rid)
    assert code == 2 and err.count("\n") == 1 and "has no running pod yet" in err


def test_an_unknown_job_is_refused(cli: Any, fake_kubectl: FakeKubectl) -> None:
    code, _, err = cli("top", "no-such-job-123456")
    assert code == 1 and err.startswith("error: no job record no-such-job-123456") and err.count("\n") == 1
    assert fake_kubectl.argvs() == []


def test_source_dcgm_without_an_exporter_is_one_line_exit_2(cli: Any, fake_kubectl: FakeKubectl) -> None:
    serve(fake_kubectl, pod(0))
    code, _, err = cli("top", launched(), "--source", "dcgm")
    assert code == 2 and err.startswith("error: --source dcgm: no DCGM exporter Service found") and err.count("\n") == 1


def test_bad_flag_values_are_one_line_exit_2(cli: Any, fake_kubectl: FakeKubectl) -> None:
    rid = launched()
    for args, start in ((["--interval", "0"], "error: --interval 0:"), (["--timeout", "-1"], "error: --timeout -1:"),
                        (["--source", "prometheus"], "error: --source prometheus: give one of auto, dcgm, nvidia-smi"),
                        (["-o", "wide"], "error: -o/--output: unknown format")):
        code, _, err = cli("top", rid, *args)
        assert code == 2 and err.startswith(start) and err.count("\n") == 1, (args, err)
    assert fake_kubectl.argvs() == []


def test_a_job_whose_pods_ended_says_so_exit_2(cli: Any, fake_kubectl: FakeKubectl) -> None:
    job = {"kind": "Job", "metadata": {"name": JOB, "namespace": NS, "uid": "u1"},
           "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    fake_kubectl.on("get", "jobs,pods", data={"kind": "List", "items": [job, pod(0, phase="Succeeded")]})
    fake_kubectl.on("get", "services", data={"kind": "List", "items": []})
    rid = launched()
    code, _, err = cli("top", rid)
    assert code == 2
    assert err == (f"error: job {rid} has ended (Complete): `top` reads the GPUs of a running job; see "
                   f"`kubectl tao status {rid}`\n")


def test_watch_reads_again_each_interval_and_ends_when_the_job_does(
    cli: Any, fake_kubectl: FakeKubectl, monkeypatch: Any
) -> None:
    serve(fake_kubectl, pod(0))
    smi(fake_kubectl, 0, f"0, {UUID0}, 87, 40213, 143771\n")
    rid = launched()
    slept: list[float] = []
    utilizations = iter(["64", "3"])

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        value = next(utilizations, None)
        if value is None:  # the third read finds the job's pod finished
            job = {"kind": "Job", "metadata": {"name": JOB, "namespace": NS, "uid": "u1"},
                   "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
            fake_kubectl.on("get", "jobs,pods", data={"kind": "List", "items": [job, pod(0, phase="Succeeded")]})
            fake_kubectl.rules.insert(0, fake_kubectl.rules.pop())
            return
        smi(fake_kubectl, 0, f"0, {UUID0}, {value}, 40213, 143771\n")
        fake_kubectl.rules.insert(0, fake_kubectl.rules.pop())

    monkeypatch.setattr("time.sleep", sleep)
    code, out, err = cli("top", rid, "--watch", "--interval", "0.5", "-o", "json")
    assert code == 0, err
    assert slept == [0.5, 0.5, 0.5]
    reads = [json.loads(doc) for doc in out.replace("]\n[", "]\n\x00[").split("\x00")]
    assert [read[0]["gpus"][0]["utilization"] for read in reads] == [87.0, 64.0, 3.0]
    assert err.startswith(f"job {rid} has ended (Complete): ") and err.count("\n") == 1


def test_a_refused_service_lookup_is_noted_and_the_ranks_read_with_nvidia_smi(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    job = {"kind": "Job", "metadata": {"name": JOB, "namespace": NS, "uid": "u1"}}
    fake_kubectl.on("get", "jobs,pods", data={"kind": "List", "items": [job, pod(0)]})
    fake_kubectl.on("get", "services", rc=1, stderr=(
        'Error from server (Forbidden): services is forbidden: User "alice" cannot list resource "services" in API '
        'group "" at the cluster scope'))
    smi(fake_kubectl, 0, f"0, {UUID0}, 87, 40213, 143771\n")
    code, out, err = cli("top", launched(), "-o", "json")
    assert code == 0 and json.loads(out)[0]["source"] == "nvidia-smi"
    assert err == ("note: the DCGM exporter's Service could not be looked up: Error from server (Forbidden): services "
                   'is forbidden: User "alice" cannot list resource "services" in API group "" at the cluster scope\n')


def test_a_credential_or_control_sequence_a_rank_prints_never_reaches_the_output(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    token = "ghp_" + "Z9" * 18
    serve(fake_kubectl, pod(0), pod(1))
    smi(fake_kubectl, 0, f"\x1b]0;pwned\x07HF_TOKEN={token}\n", rc=1, stderr="command terminated with exit code 9")
    smi(fake_kubectl, 1, f"0, {UUID1}\x1b[8m, 50, 100, 143771\n", rc=0, stderr=f"warning: password: {token}")
    for fmt in ("json", "table"):
        code, out, err = cli("top", launched(), "-o", fmt)
        assert code == 0
        assert token not in out + err and "\x1b" not in out + err and "pwned" not in out + err
    code, out, _ = cli("top", launched(), "-o", "json")
    data = json.loads(out)
    assert data[0]["reason"].startswith("nvidia-smi: HF_TOKEN=***REDACTED***")
    assert data[1]["gpus"][0]["uuid"] == UUID1
