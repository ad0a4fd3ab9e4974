"""Multi-node torchrun jobs get PyTorch's NCCL flight recorder by default (render.py), dumping into the results
directory; --no-flight-recorder leaves it out; explain of a collective timeout names the dumps and the command
that reads them (diagnosis/ranklogs.with_dumps)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubectl_tao.diagnosis import causes, ranklogs
from kubectl_tao.manifests import kubelet_text, render

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "failures"
FR_VARS = ("TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_FR_DUMP_TEMP_FILE",
           "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")


def _job(**options: Any) -> dict[str, Any]:
    values = {
        "image": "nvcr.io/nvidia/pytorch:25.01-py3",
        "command": "train.py --epochs 3",
        "record_id": "llama-ft-1a2b3c",
        "pvc": "shared-rwx",
        "gpus": 8,
        "nodes": 2,
        "launcher": "torchrun",
        **options,
    }
    objects = render.render(render.spec_from_options(**values))
    return kubelet_text.as_delivered([objects[-1]])[0]


def _env(job: dict[str, Any]) -> dict[str, str]:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value") for e in container.get("env") or []}


def test_multi_node_torchrun_jobs_get_the_flight_recorder_into_the_results_directory() -> None:
    env = _env(_job())
    assert env["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "2000" and env["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
    prefix = "/workspace/results/llama-ft-1a2b3c/flight-recorder/nccl_trace_rank_"
    assert env["TORCH_FR_DUMP_TEMP_FILE"] == env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == prefix


def test_the_flag_turns_it_off_and_other_jobs_never_get_it() -> None:
    assert not set(FR_VARS) & set(_env(_job(flight_recorder=False)))
    assert not set(FR_VARS) & set(_env(_job(launcher="tao")))
    single = render.render(render.spec_from_options(image="x:1", command="python t.py", record_id="a-b-1a2b3c",
                                                    pvc="p", gpus=1, nodes=1))
    assert "TORCH_FR_DUMP_TEMP_FILE" not in json.dumps(single)


def test_the_rank_entrypoint_makes_the_dump_directory() -> None:
    script = (Path(render.__file__).resolve().parents[3] / "templates/k8s/indexed-rank-entrypoint.sh").read_text()
    assert 'mkdir -p "$(dirname "$TORCH_FR_DUMP_TEMP_FILE")"' in script


def test_a_collective_timeout_names_the_dumps_and_the_command() -> None:
    logs = [
        causes.RankLog(r, (CORPUS / f"nccl-watchdog-timeout--allreduce.rank{r}.log").read_text()) for r in (0, 1)
    ]
    found = causes.diagnose(logs)
    assert found is not None and found.cause == "CollectiveTimeout"
    pods = [_job()["spec"]["template"]]
    told = ranklogs.with_dumps(found, pods)
    where = "/workspace/results/llama-ft-1a2b3c/flight-recorder"
    assert told.facts["flight_recorder"] == where
    assert f"`torchfrtrace {where}`" in told.fix and "nccl_trace_rank_N" in told.fix
    assert ranklogs.with_dumps(found, [_job(flight_recorder=False)["spec"]["template"]]) == found
    oom = causes.cause_in_log((CORPUS / "cuda-oom--torch-2.15-in-pod.log").read_text())
    assert oom is not None and ranklogs.with_dumps(oom, pods) == oom, "only hangs and lost peers"


def test_a_gloo_timeout_leaves_no_dump_to_name() -> None:
    logs = [
        causes.RankLog(r, (CORPUS / f"gloo-timeout--allreduce.rank{r}.log").read_text()) for r in (0, 1)
    ]
    found = causes.diagnose(logs)
    assert found is not None and found.cause == "CollectiveTimeout"
    assert ranklogs.with_dumps(found, [_job()["spec"]["template"]]) == found
