"""The issue-17 attack pass, kept as tests: each attack is counted in the summary (`attacks tried / held`).

Local attacks run the CLI in this process against a private state directory and a kubectl that only logs
(inprocess.InProcess): links planted where kubectl-tao writes, a state directory others can write, canary
credentials typed where names belong, corrupt records, and the linter evasion corpus through the real
`redact_secrets lint` entry point. One attack needs the local cluster: canaries in a Warning event, which
`explain` must not print in text or JSON."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cluster import STAY_RUNNING, Cluster, Tao, wait_for
from support.secret_corpus import CORPUS_DIR, cases

from kubectl_tao.cli import app as app_module
from kubectl_tao.core import lint

from .helpers import check_record
from .inprocess import InProcess
from .stats import STATS

CANARY = f"AtkCanary{uuid.uuid4().hex[:12]}"  # fake, unique per run
OPEN = ["record", "open", "--platform", "kubernetes", "--image", "busybox", "--network-arch", "dino",
        "--action", "train", "--storage-tier", "A", "--results-root", "/workspace/results"]
SUBMIT = ["submit", "--image=busybox:1.36", "--command=true", "--gpus=0", "--pvc=tao-data"]


@pytest.fixture()
def harness(tmp_path: Path) -> Iterator[InProcess]:
    with InProcess(tmp_path).active() as h:
        yield h


def _attack(held: bool, what: str) -> None:
    STATS.attack(held)
    assert held, f"attack not held: {what}"


def _record(h: InProcess) -> str:
    code, out, err = h.run(OPEN)
    assert code == 0, err
    return out.strip()


# ------------------------------------------------------------------ planted links, unsafe state directory


def test_planted_links_are_never_written_through(harness: InProcess, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n", encoding="utf-8")
    record_id = _record(harness)
    jobs = harness.state / "jobs"

    lock = jobs / f"{record_id}.json.lock"
    lock.unlink(missing_ok=True)
    lock.symlink_to(victim)
    code, _, err = harness.run(["record", "mark", record_id, "--state", "RUNNING"])
    _attack(code != 0 and "symbolic link" in err and victim.read_text() == "precious\n", "lock file link")
    lock.unlink()

    dangling = jobs / f"{record_id}.json.lock"
    dangling.symlink_to(tmp_path / "created-elsewhere")
    code, _, _ = harness.run(["record", "mark", record_id, "--state", "RUNNING"])
    _attack(code != 0 and not (tmp_path / "created-elsewhere").exists(), "dangling lock link")
    dangling.unlink()

    crash = harness.state / "kubectl-tao-crash.log"
    crash.symlink_to(victim)
    saved = app_module.app

    def boom(**_: Any) -> None:
        raise RuntimeError(f"a bug while HF_TOKEN={CANARY}")

    app_module.app = boom  # type: ignore[assignment]
    try:
        code, out, err = harness.run(["list"])
    finally:
        app_module.app = saved
    _attack(code == 1 and victim.read_text() == "precious\n" and CANARY not in out + err, "crash log link")


def test_a_jobs_directory_linked_elsewhere_is_refused(harness: InProcess, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    harness.state.mkdir(mode=0o700)
    (harness.state / "jobs").symlink_to(elsewhere)
    for argv in (OPEN, ["list", "--no-live"], ["record", "list"]):
        code, _, err = harness.run(argv)
        _attack(code == 2 and err.count("\n") == 1 and list(elsewhere.iterdir()) == [], f"jobs link: {argv[0]}")


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o770])
def test_a_state_directory_others_can_write_is_refused(harness: InProcess, mode: int) -> None:
    harness.state.mkdir()
    harness.state.chmod(mode)
    code, _, err = harness.run(OPEN)
    _attack(code == 2 and "chmod go-w" in err and not (harness.state / "jobs").exists(), f"state dir mode {mode:o}")


# ------------------------------------------------------------------ canaries typed where names belong


def _echo_attacks(files: Path) -> list[tuple[list[str], bytes]]:
    env_file = files / "creds.env"
    env_file.write_text(f"A=1\nHF_TOKEN:{CANARY}=x\n", encoding="utf-8")
    return [
        ([*SUBMIT, "--env", f"HF_TOKEN={CANARY}"], b""),
        ([*SUBMIT, "--env", CANARY.lower()], b""),
        ([*SUBMIT, "--env", f"x:{CANARY}"], b""),
        ([*SUBMIT, "--env-file", str(env_file)], b""),
        ([*SUBMIT, "--env-file", "-"], f"HF_TOKEN {CANARY}=x\n".encode()),
        ([*SUBMIT, "--storage-tier", f"PASSWORD={CANARY}"], b""),
        (["secret", "image-pull", "ngc", "--registry", "nvcr.io", "--from-env", f"NGC_KEY={CANARY}"], b""),
        (["secret", "image-pull", "ngc", "--registry", "nvcr.io", "--from-env", CANARY.lower()], b""),
    ]


def test_errors_never_echo_a_canary(harness: InProcess) -> None:
    for argv, stdin in _echo_attacks(harness.files):
        code, out, err = harness.run(argv, stdin)
        held = code == 2 and err.startswith("error: ") and CANARY not in out + err and CANARY.lower() not in out + err
        _attack(held, f"echo: {argv[-2:]}")


# ------------------------------------------------------------------ corrupt records


CORRUPTIONS = {
    "transitions-not-a-list": lambda r: r.update(transitions="RUNNING"),
    "state-outside-vocabulary": lambda r: r["transitions"].append(
        {"ts": "2026-01-01T00:00:00Z", "state": "OWNED", "message": "", "source": "agent"}
    ),
    "terminal-state-outside-vocabulary": lambda r: r.update(terminal_state="DONE"),
    "not-an-object": lambda r: r.clear(),
}


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
def test_one_corrupt_record_never_breaks_the_others(harness: InProcess, how: str) -> None:
    good, bad = _record(harness), _record(harness)
    path = harness.state / "jobs" / f"{bad}.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    CORRUPTIONS[how](record)
    path.write_text(json.dumps(record) if record else "[]", encoding="utf-8")
    for argv in (["list", "--no-live"], ["record", "list"]):
        code, out, err = harness.run(argv)
        held = code == 0 and good in out and bad not in out and "OWNED" not in out and err.count("\n") == 1
        _attack(held and "Traceback" not in err and not (harness.state / "kubectl-tao-crash.log").exists(),
                f"{how}: {argv[0]}")
    code, out, err = harness.run(["status", bad])
    _attack(code == 1 and out == "" and err.count("\n") == 1 and "Traceback" not in err, f"{how}: status")
    check_record(harness.state, good)


# ------------------------------------------------------------------ linter evasion corpus


def test_the_linter_refuses_every_evasion_and_never_prints_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for number, case in cases("credentials.txt"):
        path = tmp_path / f"case-{number}.sh"
        path.write_text(case, encoding="utf-8")
        code = lint.main(["lint", str(path)])
        err = capsys.readouterr().err
        _attack(code == 1 and "FakeCanary" not in err, f"{CORPUS_DIR.name}/credentials.txt:{number}")


# ------------------------------------------------------------------ canaries in the cluster's own words


def test_explain_never_prints_canaries_from_a_warning_event(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    tao = Tao(cluster, namespace, tmp_path / "state")
    submitted = tao(
        "submit", "--image", "busybox:1.36", "--command", "sleep 3600", "--gpus", "0", "--storage-tier", "C",
        "--s3-output", "s3://tao-results/attacks", "--annotation", f"{STAY_RUNNING}=true",
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    record_id = submitted.stdout.split()[-1]
    job = check_record(tao.state_dir, record_id)[1]["job_name"]
    said = (f'Error: secret "hf-creds" not found; password: {CANARY}1, HF_TOKEN={CANARY}2, '
            f"registry https://puller:{CANARY}3@registry.example/v2/")
    now = "2026-01-01T00:00:00Z"
    event = {
        "apiVersion": "v1", "kind": "Event", "type": "Warning", "reason": "Failed", "message": said,
        "metadata": {"name": f"{job}.attack", "namespace": namespace},
        "involvedObject": {"apiVersion": "batch/v1", "kind": "Job", "name": job, "namespace": namespace},
        "firstTimestamp": now, "lastTimestamp": now, "count": 1, "source": {"component": "attack-pass"},
    }  # fmt: skip
    tao.kubectl("create", "-f", "-", input=json.dumps(event))
    wait_for(lambda: tao("status", record_id).stdout.count("RUNNING") > 0, timeout=60, message="the job to run")
    try:
        for output in ("table", "json", "yaml"):
            result = tao("explain", record_id, "-o", output)
            seen = result.stdout + result.stderr
            _attack(result.returncode == 1 and "REDACTED" in seen and CANARY not in seen, f"explain -o {output}")
    finally:
        tao("cancel", record_id, "--no-wait")
