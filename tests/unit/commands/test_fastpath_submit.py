"""`submit` parsed by hand (commands/fastpath.py) hands commands/submit.run exactly what the typer app hands
it: every command line the fast path takes is parsed both ways and the calls compared (the job flags with
what was given, submit's own options, the cluster options of the session); the lines it must leave to typer
are left; and a whole submit answers the same both ways."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl, review_answer

from kubectl_tao.commands import fastpath
from kubectl_tao.commands import submit as submit_command
from kubectl_tao.commands.session import session

BASE = ["--image", "busybox", "--command", "echo hi"]
TAKEN = [
    ["submit"],
    ["submit", *BASE],
    ["submit", *BASE, "--gpus", "8", "--nodes", "2", "--pvc", "data"],
    ["submit", *BASE, "--gpus=0", "--nodes=1", "--ttl-seconds", "0"],
    ["submit", *BASE, "--gpus", "08", "--gpus", "4"],  # the last one wins
    ["submit", *BASE, "--gpus", "1"],  # given at its default: still given
    ["submit", *BASE, "--env", "A", "--env=B", "--label", "k=v", "--env", "C"],
    ["submit", *BASE, "--node-selector", "a=b", "--toleration", "t:NoSchedule", "--annotation", "x=y"],
    ["submit", *BASE, "--s3-input", "s3://b/k", "--s3-input=s3://b/p/", "--upload-exclude", "*.tmp",
     "--s3-output", "s3://b/out", "--storage-tier", "C", "--s3-tools-image", "aws"],
    ["submit", *BASE, "--nccl-env", "NCCL_IB_DISABLE=1", "--nccl-socket-ifname", "eth0", "--nccl-ib-hca", "mlx5"],
    ["submit", *BASE, "--retries-per-index", "2", "--active-deadline-seconds", "600", "--master-port", "29600",
     "--rendezvous-timeout", "0", "--launcher", "torchrun", "--gang", "off", "--queue", "q"],
    ["submit", *BASE, "--network-arch", "dino", "--action", "train", "--mount-path", "/data", "--results-dir",
     "/data/out", "--shm-size", "1Gi", "--gpu-product", "H100", "--image-pull-secret", "ngc"],
    ["submit", *BASE, "--env-file", "creds.env", "--env-secret", "s", "--keep-until-captured"],
    ["submit", "--action-request", "r.json", "--staging-map", "m.json", "--config-source", "c.yaml"],
    ["submit", *BASE, "--wait", "--timeout", "30", "--pending-timeout=1.5", "--image-pull-timeout", "07.25"],
    ["submit", *BASE, "--require-fit-now", "--wait", "--wait"],
    ["submit", *BASE, "--dry-run", "server", "-o", "yaml"],
    ["submit", *BASE, "--dry-run=client", "--output=json", "-o", "name"],
    ["submit", *BASE, "--dry-run", "bogus", "-o", "nope"],  # submit.run refuses them, both ways alike
    ["submit", *BASE, "--command", ""],
    ["--context", "lab", "-n", "ns1", "submit", *BASE],
    ["submit", *BASE, "--context", "other", "--namespace=ns2", "--kubeconfig", "kc", "--request-timeout", "5s"],
    ["--namespace", "ns1", "submit", *BASE, "-n", "ns2", "--context="],
]
ENVIRONMENTS = [{}, {"TAO_K8S_CONTEXT": "envctx", "TAO_K8S_NAMESPACE": "envns"}, {"TAO_K8S_NAMESPACE": ""}]


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Replace submit.run with a recorder of what it is handed (and the session it would use)."""
    seen: list[tuple[Any, ...]] = []

    def record(job: dict[str, Any], **options: Any) -> int:
        seen.append((job, options, session().options))
        return 0

    monkeypatch.setattr(submit_command, "run", record)
    return seen


def _as_called(job: dict[str, Any], options: dict[str, Any], cluster: Any) -> tuple[Any, ...]:
    """A call with submit.run's defaults filled in (typer passes every option, the fast path what was given)."""
    defaults = {"dry_run": "none", "wait": False, "timeout": None, "pending_timeout": None,
                "image_pull_timeout": None, "require_fit_now": False, "output": "table"}
    return job, {**defaults, **options}, cluster


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=["no-env", "env", "empty-env"])
@pytest.mark.parametrize("argv", TAKEN, ids=[" ".join(a) for a in TAKEN])
def test_the_fast_path_hands_submit_what_typer_does(
    cli: Any, tao_env: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], env: dict[str, str]
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    seen = _spy(monkeypatch)
    assert cli(*argv)[0] == 0
    real_run = fastpath.run
    monkeypatch.setattr(fastpath, "run", lambda a: None)
    assert cli(*argv)[0] == 0
    monkeypatch.setattr(fastpath, "run", real_run)
    fast, typer_path = seen
    assert _as_called(*fast) == _as_called(*typer_path)
    assert isinstance(fast[0]["given"], set)
    for key, value in typer_path[0].items():  # same types too: 8 and "8" would compare unequal anyway
        assert type(fast[0][key]) is type(value), key


def test_the_fast_path_did_take_submit(cli: Any, tao_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _spy(monkeypatch)
    assert fastpath.run(["submit", *BASE, "--gpus", "2", "--env", "A", "--wait", "--timeout", "9"]) == 0
    (job, options, _), = seen
    assert (job["gpus"], job["env"], job["given"]) == (2, ["A"], {"image", "command", "gpus", "env"})
    assert options == {"wait": True, "timeout": 9.0}


@pytest.mark.parametrize(
    "argv",
    [
        ["submit", "--help"],
        ["submit", *BASE, "-h"],
        ["submit", "job-name"],
        ["submit", *BASE, "extra"],
        ["submit", "--gpus", "eight"],
        ["submit", "--gpus", "-1"],
        ["submit", "--gpus=-1"],
        ["submit", "--gpus=+8"],
        ["submit", "--gpus", " 8"],
        ["submit", "--gpus", "８"],  # a full-width digit: int() takes it, the fast path does not
        ["submit", "--gpus", ""],
        ["submit", "--nodes", "1_0"],
        ["submit", "--timeout", "1e3", "--wait"],
        ["submit", "--timeout", "5.", "--wait"],
        ["submit", "--timeout", ".5", "--wait"],
        ["submit", "--timeout", "inf", "--wait"],
        ["submit", "--no-wait"],
        ["submit", "--wait=true"],
        ["submit", "--keep-until-captured=1"],
        ["submit", "--gpus"],
        ["submit", "--image", "-x"],
        ["submit", "--", "--image", "x"],
        ["submit", "-ojson"],
        ["submit", "-o=json"],
        ["submit", "--imag", "x"],
        ["submit", "--name", "x"],  # render's flag, not submit's
        ["submit", "--watch"],
        ["submit", ""],
        ["-o", "json", "submit"],
        ["--bogus", "submit"],
    ],
)
def test_the_fast_path_leaves_other_submit_lines_to_typer(
    tao_env: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    seen = _spy(monkeypatch)
    assert fastpath.run(argv) is None
    assert seen == []


STAMPED = re.compile(r"custom-run-[0-9a-z-]+|\d{4}-\d\d-\d\dT[\d:.]+Z")


@pytest.mark.parametrize(
    "argv",
    [
        ["submit", *BASE, "--gpus", "0", "--pvc", "data", "--dry-run=client", "-o", "json"],
        ["submit", *BASE, "--gpus", "0", "--pvc", "d", "--dry-run=client", "--label", "team=vision", "--env", "HOME"],
        ["submit", *BASE, "--dry-run", "bogus"],
        ["submit", *BASE, "--timeout", "5"],
        ["submit", *BASE, "--gpus", "0", "--env-file", "/no/such/file"],
        ["submit", *BASE, "--gpus", "0", "--pvc", "d", "--ttl-seconds", "9999999"],
    ],
)
def test_a_whole_submit_answers_the_same_both_ways(
    cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    fast = cli(*argv)
    monkeypatch.setattr(fastpath, "run", lambda a: None)
    typer_path = cli(*argv)
    assert [STAMPED.sub("<id>", str(part)) for part in fast] == [STAMPED.sub("<id>", str(p)) for p in typer_path]
    assert fake_kubectl.argvs() == []


def test_a_submit_that_creates_a_job_runs_the_same_both_ways(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    review, granted = review_answer()
    fake_kubectl.on(*review, stdout=granted)
    fake_kubectl.on("create", "--dry-run=server", stdout="job.batch/x created (server dry run)\n")
    fake_kubectl.on("create", "-f", stdout="Job x 0b9b6c1e-1111-2222-3333-444455556666\n")
    argv = ["submit", *BASE, "--storage-tier", "C", "--s3-output", "s3://bucket/out", "--gpus", "0", "-o", "json"]
    jobs = tao_env / "state" / "jobs"

    def run() -> list[str]:
        before = set(jobs.glob("*.json")) if jobs.exists() else set()
        answer = cli(*argv)
        (record,) = set(jobs.glob("*.json")) - before
        calls = [" ".join(a) for a in fake_kubectl.argvs()]
        fake_kubectl.calls.clear()
        return [STAMPED.sub("<id>", str(part)) for part in (*answer, calls, record.read_text())]

    fast = run()
    monkeypatch.setattr(fastpath, "run", lambda a: None)
    assert fast == run()
    assert '"uid": "0b9b6c1e-1111-2222-3333-444455556666"' in fast[1]
