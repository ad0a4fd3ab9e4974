"""kubectl plugin conventions every verb follows: help text, errors, streams, output formats, global flags,
environment, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import click
import pytest
import typer
from support import ROOT as REPO_ROOT
from support.fake_kubectl import FakeKubectl, fixture_json

from kubectl_tao.cli.app import app
from kubectl_tao.core import errors

ROOT = REPO_ROOT
NO_KUEUE = 'error: the server doesn\'t have a resource type "localqueues"'
RENDER = ["render", "--image", "busybox", "--command", "echo hi", "--gpus", "0", "--pvc", "data", "-o", "json"]


def command_paths() -> list[list[str]]:
    """Every runnable command: verbs and the verbs of sub-groups (record open, secret image-pull, ...)."""
    root = typer.main.get_command(app)
    paths: list[list[str]] = []

    def walk(command: Any, path: list[str]) -> None:
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if not sub.hidden:
                    walk(sub, [*path, name])
        else:
            paths.append(path)

    walk(root, [])
    return paths


COMMANDS = command_paths()


def test_the_new_verbs_are_registered() -> None:
    names = {" ".join(path) for path in COMMANDS}
    assert {"fit", "explain", "lint", "completion", "record open", "record mark", "record show", "record list",
            "secret image-pull"} <= names


def _command(path: list[str]) -> Any:
    command = typer.main.get_command(app)
    for name in path:
        command = command.get_command(click.Context(command), name)
    return command


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) for p in COMMANDS])
def test_help_has_a_summary_options_and_examples(cli: Any, path: list[str]) -> None:
    summary = (_command(path).help or "").strip().split("\n\n", 1)[0]
    assert summary and "\n" not in summary and len(summary) <= 80, "the summary is one short line"
    assert summary.endswith(".")
    code, out, err = cli(*path, "--help")
    assert code == 0 and err == ""
    assert out.startswith(f"Usage: kubectl tao {' '.join(path)} ")
    assert " ".join(summary.split()) in " ".join(out.split())
    assert "Options:" in out and "--help" in out
    assert "Examples:" in out
    examples = out.split("Examples:", 1)[1]
    assert f"kubectl tao {' '.join(path)}" in examples or f"kubectl-tao {' '.join(path)}" in examples


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) for p in COMMANDS])
def test_every_verb_takes_the_global_flags_after_it(cli: Any, path: list[str]) -> None:
    out = cli(*path, "--help")[1]
    for flag in ("--context", "-n, --namespace", "--kubeconfig", "--request-timeout"):
        assert flag in out


def test_no_arguments_prints_help_on_stdout() -> None:
    result = subprocess.run([str(ROOT / "kubectl-tao")], capture_output=True, text=True, check=False, timeout=30)
    assert result.returncode == 0
    assert result.stdout.startswith("Usage: kubectl tao [OPTIONS] COMMAND [ARGS]...")
    for verb in ("fit", "explain", "lint", "record", "secret", "completion"):
        assert f"\n  {verb} " in result.stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["version", "--bogus"], "error: No such option '--bogus'."),
        (["version", "-o", "xml"], "error: -o/--output: unknown format 'xml'; use one of json, yaml"),
        (["submit", "--dry-run=maybe", "--image", "busybox", "--command", "x"],
         "error: --dry-run='maybe': use none, client or server"),
        (["fit", "--gpus", "two"], "error: Invalid value for '--gpus'"),
        (["nosuchverb"], "error: No such command 'nosuchverb'."),
    ],
)
def test_usage_errors_are_one_line_on_stderr_with_exit_2(cli: Any, argv: list[str], message: str) -> None:
    code, out, err = cli(*argv)
    assert code == errors.EXIT_USAGE
    assert out == ""
    assert err.startswith(message)
    assert err.endswith("\n") and err.count("\n") == 1


def test_the_real_entrypoint_keeps_streams_apart(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "none")}
    ok = subprocess.run([str(ROOT / "kubectl-tao"), "version"], capture_output=True, text=True, env=env, timeout=30)
    assert (ok.returncode, ok.stderr) == (0, "")
    assert ok.stdout.startswith("kubectl-tao ")
    bad = subprocess.run([str(ROOT / "kubectl-tao"), "fit", "--bogus"], capture_output=True, text=True, env=env,
                         timeout=30)
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr.startswith("error: No such option '--bogus'") and bad.stderr.count("\n") == 1


def test_version_json_is_json(cli: Any) -> None:
    code, out, err = cli("version", "-o", "json")
    assert code == 0 and err == ""
    assert set(json.loads(out)) == {"clientVersion"}


def test_no_headers_omits_the_header(cli: Any) -> None:
    from kubectl_tao.store.records import RecordStore

    RecordStore(os.environ["TAO_STATE_DIR"]).open(
        platform="kubernetes", image="busybox", network_arch="dino", action="train", storage_tier="A", results_root="/r"
    )
    with_header = cli("record", "list")[1].splitlines()
    without = cli("record", "list", "--no-headers")[1].splitlines()
    assert with_header[0].split() == ["ID", "PLATFORM", "STATE", "RESULTS_DIR"]
    assert [line.split() for line in without] == [line.split() for line in with_header[1:]]
    live = cli("list", "--no-live")[1].splitlines()
    assert live[0] == live[0].upper() and len(live) == 2
    [row] = [line.split() for line in cli("list", "--no-live", "--no-headers")[1].splitlines()]
    age = live[0].split().index("AGE")  # the age may tick over between the two calls on a slow machine
    assert row[:age] + row[age + 1 :] == live[1].split()[:age] + live[1].split()[age + 1 :]


def _cluster(fake: FakeKubectl) -> None:
    fake.capacity({"kind": "List", "items": []})
    fake.on("get", "localqueues.kueue.x-k8s.io", stderr=NO_KUEUE, rc=1)


def test_global_flags_before_and_after_the_verb(cli: Any, fake_kubectl: FakeKubectl) -> None:
    assert cli("--context", "x", "version")[0] == 0
    assert cli("version", "--context", "x")[0] == 0
    _cluster(fake_kubectl)
    cli("--context", "other", "--request-timeout", "5s", "fit", "--gpus", "0")
    cli("fit", "--gpus", "0", "--context", "other", "--request-timeout", "5s")
    half = len(fake_kubectl.argvs()) // 2
    first, second = fake_kubectl.argvs()[:half], fake_kubectl.argvs()[half:]
    assert sorted(first) == sorted(second)
    assert all("--context=other" in argv and "--request-timeout=5s" in argv for argv in first)


def test_a_flag_after_the_verb_wins_over_one_before_it(cli: Any, fake_kubectl: FakeKubectl) -> None:
    _cluster(fake_kubectl)
    cli("--context", "lab", "fit", "--gpus", "0", "--context", "other")
    assert all("--context=other" in argv for argv in fake_kubectl.argvs())


def test_namespace_precedence_flag_then_env_then_kubeconfig(
    cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch
) -> None:
    _cluster(fake_kubectl)

    def namespace_asked(*argv: str) -> str:
        fake_kubectl.calls.clear()
        cli(*argv)
        queue_call = next(a for a in fake_kubectl.argvs() if "localqueues.kueue.x-k8s.io" in a)
        return queue_call[queue_call.index("-n") + 1]

    assert namespace_asked("fit", "--gpus", "0") == "tao-jobs"  # the kubeconfig context's
    assert namespace_asked("--context", "other", "fit", "--gpus", "0") == "other-ns"
    monkeypatch.setenv("TAO_K8S_NAMESPACE", "from-env")
    assert namespace_asked("fit", "--gpus", "0") == "from-env"
    assert namespace_asked("fit", "--gpus", "0", "-n", "from-flag") == "from-flag"


def test_env_namespace_reaches_render(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAO_K8S_NAMESPACE", "from-env")
    code, out, _ = cli(*RENDER)
    assert code == 0
    assert json.loads(out)["metadata"]["namespace"] == "from-env"
    code, out, _ = cli(*RENDER, "-n", "from-flag")
    assert json.loads(out)["metadata"]["namespace"] == "from-flag"


def test_env_context_reaches_kubectl(cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch) -> None:
    _cluster(fake_kubectl)
    monkeypatch.setenv("TAO_K8S_CONTEXT", "other")
    cli("fit", "--gpus", "0")
    assert all("--context=other" in argv for argv in fake_kubectl.argvs())


def test_exit_code_table() -> None:
    assert (errors.EXIT_OK, errors.EXIT_FAILURE, errors.EXIT_USAGE, errors.EXIT_UNREACHABLE,
            errors.EXIT_NEVER_FITS) == (0, 1, 2, 3, 4)
    assert errors.UsageError("x").exit_code == 2
    assert errors.GateError("x").exit_code == 1
    assert errors.ClusterUnreachableError("x").exit_code == 3
    assert errors.NeverFitsError("x").exit_code == 4


@pytest.mark.parametrize(
    ("answer", "argv", "code"),
    [
        ({"stdout": json.dumps(fixture_json("nodes-cpu-only.json"))}, ["fit", "--gpus", "0"], 0),
        ({"stdout": json.dumps(fixture_json("nodes-cpu-only.json"))}, ["fit", "--gpus", "1"], 4),
        ({"stderr": "The connection to the server 127.0.0.1:6443 was refused", "rc": 1}, ["fit", "--gpus", "1"], 3),
        ({"stderr": 'Error from server (Forbidden): nodes is forbidden: User "u"', "rc": 1}, ["fit", "--gpus", "1"], 1),
    ],
)
def test_exit_codes_end_to_end(cli: Any, fake_kubectl: FakeKubectl, answer: dict, argv: list[str], code: int) -> None:
    if "stdout" in answer:
        fake_kubectl.capacity(json.loads(answer["stdout"]))
    else:
        fake_kubectl.capacity_refused(nodes=answer["stderr"], pods=answer["stderr"])
    fake_kubectl.on("get", "localqueues.kueue.x-k8s.io", stderr=NO_KUEUE, rc=1)
    assert cli(*argv)[0] == code
