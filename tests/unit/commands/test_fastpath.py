"""The hand-parsed start-up path (commands/fastpath.py) answers exactly as the typer app does: every command
line it takes is run both ways and compared (exit code, stdout, stderr, the kubectl calls, the record files),
and the lines it must leave to typer are left."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl, fixture_json

from kubectl_tao.commands import fastpath, present
from kubectl_tao.store.records import RecordStore

JOB = "dino-train-3f9a1c"  # the fixtures' Job
ID = "@ID@"  # replaced by the record's id
STAMP = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")


def _record() -> str:
    store = RecordStore()
    record = store.open(platform="kubernetes", image="busybox", network_arch="dino", action="train",
                        storage_tier="A", results_dir="/workspace/results/x")
    store.mark(record.id, "RUNNING", message="applied", backend_ref=f"tao-jobs/{JOB}")
    store.update_extra(record.id, namespace="tao-jobs", job_name=JOB, gpus=8, nodes=1)
    return record.id


def _answer(fake: FakeKubectl) -> None:
    job = fixture_json("running.job.json")
    pods = fixture_json("running.pods.json")["items"]
    fake.on("get", "jobs,pods", data={"kind": "List", "items": [job, *pods]})


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _untimed(files: dict[str, bytes]) -> dict[str, bytes]:
    """The files with their time stamps blanked: a transition written by each run carries its own."""
    return {name: STAMP.sub(b"<time>", body) for name, body in files.items()}


def _restore(root: Path, files: dict[str, bytes]) -> None:
    for path in [p for p in root.rglob("*") if p.is_file()]:
        if str(path.relative_to(root)) not in files:
            path.unlink()
    for name, body in files.items():
        (root / name).write_bytes(body)


TAKEN = [
    ["status", ID],
    ["status", ID, "-o", "json"],
    ["status", ID, "-o", "yaml"],
    ["status", ID, "--output=wide"],
    ["status", "-o", "name", ID],
    ["status", ID, "--no-headers"],
    ["status", ID, "--force", "--no-headers", "--force"],
    ["status", ID, "-o", "json", "-o", "table"],  # the last one wins
    ["--context", "other", "status", ID],
    ["status", ID, "--context", "other"],
    ["--context", "lab", "status", ID, "--context=other"],
    ["-n", "ns1", "status", ID],
    ["--namespace=ns1", "status", ID, "-n", "ns2"],
    ["status", ID, "--context", ""],
    ["--context=", "status", ID],
    ["--kubeconfig", "@KUBECONFIG@", "--request-timeout", "5s", "status", ID],
    ["status", ID, "--kubeconfig=@KUBECONFIG@", "--request-timeout=7s"],
    ["status", ID, "-o", "bogus"],
    ["status", "no-such-record"],
    ["status", "bad id!"],
    ["status", "--context", "nope", ID],
    ["version"],
    ["--context", "x", "-n", "y", "version"],
]
ENVIRONMENTS = [{}, {"TAO_K8S_CONTEXT": "other", "TAO_K8S_NAMESPACE": "envns"}, {"TAO_K8S_CONTEXT": ""}]


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=["no-env", "env", "empty-env"])
@pytest.mark.parametrize("argv", TAKEN, ids=[" ".join(a) for a in TAKEN])
def test_the_fast_path_answers_as_the_typer_app_does(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str],
    env: dict[str, str],
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(present, "age", lambda *_: "5m")  # the two runs may straddle a second
    _answer(fake_kubectl)
    record_id = _record()
    args = [a.replace(ID, record_id).replace("@KUBECONFIG@", str(tao_env / "kubeconfig")) for a in argv]
    state = tao_env / "state"
    before = _files(state)

    answers: list[object] = []
    real_run = fastpath.run

    def spy(words: list[str]) -> int | None:
        try:
            answers.append(real_run(words))
        except Exception:  # an error goes up to main as it does from the typer app
            answers.append("raised")
            raise
        return answers[-1]  # type: ignore[return-value]

    monkeypatch.setattr(fastpath, "run", spy)
    fast = cli(*args), fake_kubectl.argvs(), _untimed(_files(state))
    assert answers == (["raised"] if fast[0][0] else [0]), fast
    # The one read status prestarts (jobs/early_read.py), killed unread when status refuses before asking for it.
    assert all(argv[-8:-5] == ["get", "jobs,pods", "-n"] for argv in fake_kubectl.killed())

    _restore(state, before)
    fake_kubectl.calls.clear()
    monkeypatch.setattr(fastpath, "run", lambda a: None)
    typer_path = cli(*args), fake_kubectl.argvs(), _untimed(_files(state))
    assert fast == typer_path


def test_the_fast_path_did_take_the_status_lines(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _answer(fake_kubectl)
    record_id = _record()
    assert fastpath.run(["status", record_id, "-o", "json"]) == 0
    assert fake_kubectl.argvs()[0][:2] == ["get", "jobs,pods"]


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--help"],
        ["-h"],
        ["--version"],
        ["status"],
        ["status", "a", "b"],
        ["status", "a", "--help"],
        ["status", "a", "-h"],
        ["status", "a", "--watch"],
        ["status", "a", "-w"],
        ["status", "a", "--timeout", "5"],
        ["status", "-ojson", "a"],
        ["status", "a", "-o=json"],
        ["status", "a", "--no-headers=1"],
        ["status", "a", "--outp", "json"],
        ["status", "--", "a"],
        ["status", "a", "--context"],
        ["status", "a", "--context", "-x"],
        ["status", ""],
        ["status", "-"],
        ["--bogus", "status", "a"],
        ["-nfoo", "status", "a"],
        ["-n=foo", "status", "a"],
        ["--context"],
        ["--context", "--help", "status", "a"],
        ["-o", "json", "status", "a"],  # -o is not a root flag
        ["version", "-o", "json"],
        ["version", "--server"],
        ["list"],
        ["stat", "a"],
    ],
)
def test_the_fast_path_leaves_everything_else_to_typer(tao_env: Path, argv: list[str]) -> None:
    assert fastpath.run(argv) is None


def test_version_is_printed_without_typer(cli: Any) -> None:
    code, out, err = cli("version")
    assert (code, err) == (0, "")
    assert out.startswith("kubectl-tao ") and json.loads(cli("version", "-o", "json")[1])["clientVersion"] in out
