"""Shell completion: the engine, `kubectl tao completion bash|zsh|fish`, and scripts/kubectl_complete-tao."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from support import ROOT as REPO_ROOT

from kubectl_tao.cli.app import app
from kubectl_tao.cli.completion import FILES, NO_FILES, Completer, record_ids, render

ROOT = REPO_ROOT
HELPER = ROOT / "scripts" / "kubectl_complete-tao"
IDS = ["dino-train-3f9a1c", "dino-eval-77aa01"]


@pytest.fixture(scope="module")
def engine() -> Completer:
    return Completer(
        typer.main.get_command(app),
        ids=lambda: list(IDS),
        namespaces_of=lambda context, kubeconfig: ["default", "tao-jobs", f"ctx-{context}", f"kc-{kubeconfig}"],
        contexts_of=lambda kubeconfig: ["lab", "prod"],
    )


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["su"], ["submit"]),
        (["st"], ["status"]),
        (["status", ""], IDS),
        (["status", "dino-t"], ["dino-train-3f9a1c"]),
        (["explain", ""], IDS),
        (["logs", "-f", ""], IDS),
        (["cancel", "--context", "lab", ""], IDS),
        (["record", ""], ["open", "mark", "show", "list"]),
        (["record", "show", ""], IDS),
        (["secret", ""], ["image-pull"]),
        (["completion", ""], ["bash", "zsh", "fish"]),
        (["fit", "-o", ""], ["json", "yaml"]),  # the formats fit takes, as its --help lists them
        (["render", "-o", ""], ["yaml", "json"]),
        (["gpus", "--output", ""], ["wide", "json", "yaml"]),
        (["list", "-o", ""], ["wide", "json", "yaml", "name"]),
        (["record", "show", "x", "-o", ""], ["json", "yaml"]),
        (["fit", "--output=j"], ["json"]),
        (["record", "mark", "x", "--state", "C"], ["COMPLETE", "CANCELED"]),
        (["status", "-n", "t"], ["tao-jobs"]),
        (["--context", "prod", "status", "--namespace", "ctx"], ["ctx-prod"]),
        (["status", "--kubeconfig", "/k", "-n", "kc"], ["kc-/k"]),
        (["--context", ""], ["lab", "prod"]),
        (["status", "dino-train-3f9a1c", ""], []),
    ],
)
def test_candidates(engine: Completer, words: list[str], expected: list[str]) -> None:
    candidates, directive = engine.complete(words)
    assert candidates == expected
    assert directive == NO_FILES


def test_flags_of_the_verb_and_the_global_flags(engine: Completer) -> None:
    candidates, _ = engine.complete(["fit", "--"])
    assert {"--gpus", "--nodes", "--gpu-product", "--queue", "--output", "--context", "--namespace", "--help"} <= set(
        candidates
    )
    assert "--watch" not in candidates
    assert engine.complete(["status", "--wa"]) == (["--watch"], NO_FILES)
    assert engine.complete(["cancel", "--no-w"]) == (["--no-wait"], NO_FILES)


def test_root_flags_before_a_verb(engine: Completer) -> None:
    candidates, _ = engine.complete(["--"])
    assert {"--context", "--namespace", "--kubeconfig", "--request-timeout", "--help"} <= set(candidates)


def test_hidden_modes_are_not_offered(engine: Completer) -> None:
    assert "__complete" not in engine.complete(["completion", "_"])[0]


def test_files_are_allowed_where_a_file_is_expected(engine: Completer) -> None:
    assert engine.complete(["lint", ""]) == ([], FILES)
    assert engine.complete(["--kubeconfig", ""]) == ([], FILES)
    assert engine.complete(["submit", "--env-file", ""]) == ([], FILES)


def test_render_ends_with_the_directive() -> None:
    assert render(["a", "b"], NO_FILES) == "a\nb\n:4\n"
    assert render([], FILES) == ":0\n"


def test_record_ids_are_file_names_newest_first(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    (jobs / ".kubectl-tao").mkdir(parents=True)
    for index, rid in enumerate(["old-one-aaaaaa", "new-one-bbbbbb"]):
        path = jobs / f"{rid}.json"
        path.write_text("{}")
        os.utime(path, (1_000_000 + index, 1_000_000 + index))
    (jobs / "new-one-bbbbbb.json.lock").write_text("")
    (jobs / ".kubectl-tao" / "extra-cccccc.json").write_text("{}")
    assert record_ids(str(tmp_path)) == ["new-one-bbbbbb", "old-one-aaaaaa"]
    assert record_ids(str(tmp_path / "missing")) == []
    assert record_ids("relative/dir") == []


# ------------------------------------------------------------------------------------------------ scripts


@pytest.mark.parametrize(
    ("shell", "start", "parts"),
    [
        (
            "bash",
            "",
            (
                "_kubectl_tao_completion() {",
                "complete -F _kubectl_tao_completion kubectl-tao",
                "kubectl-tao completion __complete --",
            ),
        ),
        ("zsh", "#compdef kubectl-tao\n", ("_kubectl-tao() {", "compdef _kubectl-tao kubectl-tao")),
        (
            "fish",
            "",
            (
                "function __kubectl_tao_complete",
                "complete -c kubectl-tao -f -a '(__kubectl_tao_complete)'",
                "kubectl-tao completion __complete -- $words \"$current\"",
            ),
        ),
    ],
)
def test_each_shells_script_defines_and_registers_its_function(
    cli: Any, shell: str, start: str, parts: tuple[str, ...]
) -> None:
    code, out, _ = cli("completion", shell)
    assert code == 0
    assert out.startswith(start)
    for part in parts:
        assert part in out


def test_unknown_shell_is_a_usage_error(cli: Any) -> None:
    assert cli("completion", "tcsh") == (2, "", "error: SHELL 'tcsh': use one of bash, zsh, fish\n")
    assert cli("completion", "bash", "extra") == (2, "", "error: completion takes one SHELL; unexpected 'extra'\n")


def test_the_scripts_entry_point_answers_for_the_words(cli: Any) -> None:
    assert cli("completion", "__complete", "--", "su") == (0, "submit\n:4\n", "")
    assert cli("completion", "__complete", "--", "status", "--wat") == (0, "--watch\n:4\n", "")


def test_bash_script_passes_shellcheck(tmp_path: Path, cli: Any) -> None:
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    script = tmp_path / "kubectl-tao.bash"
    script.write_text(cli("completion", "bash")[1])
    result = subprocess.run([shellcheck, "-s", "bash", str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    state = tmp_path / "state"
    (state / "jobs").mkdir(parents=True, exist_ok=True)
    for rid in IDS:
        (state / "jobs" / f"{rid}.json").write_text("{}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAO_", "KUBECTL_TAO"))}
    env.update(HOME=str(tmp_path), TAO_STATE_DIR=str(state), KUBECONFIG=str(tmp_path / "none"))
    env["PATH"] = f"{ROOT}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def test_bash_completion_fills_compreply(tmp_path: Path, cli: Any) -> None:
    script = tmp_path / "kubectl-tao.bash"
    script.write_text(cli("completion", "bash")[1])
    program = (
        f'source "{script}"\n'
        'for line in "kubectl-tao sta" "kubectl-tao status " "kubectl-tao fit --output=y"; do\n'
        '  COMP_LINE="$line"; COMP_POINT=${#line}; _kubectl_tao_completion; echo "${COMPREPLY[*]}"\n'
        "done\n"
    )
    result = subprocess.run(["bash", "-c", program], capture_output=True, text=True, env=_env(tmp_path), check=False)
    lines = result.stdout.splitlines()
    assert lines[0] == "status" and lines[2] == "yaml", result.stderr
    assert set(lines[1].split()) == set(IDS)


def fish_complete(tmp_path: Path, script: Path, line: str, **env: str) -> list[str]:
    """What fish offers for LINE with SCRIPT loaded (`complete -C` prints the candidates, one a line)."""
    fish = shutil.which("fish")
    assert fish, "fish is not installed: run scripts/install-test-deps"
    program = f"source {script}; complete -C {shlex.quote(line)}"
    result = subprocess.run([fish, "--no-config", "-c", program], capture_output=True, text=True,
                            env=_env(tmp_path, **env), check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    return [candidate.split("\t", 1)[0] for candidate in result.stdout.splitlines()]


def test_fish_completion_offers_verbs_ids_and_flag_values(tmp_path: Path, cli: Any) -> None:
    script = tmp_path / "kubectl-tao.fish"
    script.write_text(cli("completion", "fish")[1])
    assert fish_complete(tmp_path, script, "kubectl-tao sta") == ["status"]
    assert sorted(fish_complete(tmp_path, script, "kubectl-tao status ")) == sorted(IDS)
    assert fish_complete(tmp_path, script, "kubectl-tao fit --output=y") == ["--output=yaml"]
    assert fish_complete(tmp_path, script, "kubectl-tao status --wat") == ["--watch"]


def test_fish_completion_falls_back_to_files_where_a_file_goes(tmp_path: Path, cli: Any) -> None:
    script = tmp_path / "kubectl-tao.fish"
    script.write_text(cli("completion", "fish")[1])
    (tmp_path / "job-manifest.yaml").write_text("")
    assert fish_complete(tmp_path, script, f"kubectl-tao lint {tmp_path}/job-m") == [f"{tmp_path}/job-manifest.yaml"]
    assert fish_complete(tmp_path, script, f"kubectl-tao status {tmp_path}/job-m") == []


def helper(tmp_path: Path, *words: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(HELPER), *words], capture_output=True, text=True, env=_env(tmp_path, **env), check=False, timeout=30
    )


def test_helper_completes_a_verb(tmp_path: Path) -> None:
    result = helper(tmp_path, "su")
    assert (result.returncode, result.stdout, result.stderr) == (0, "submit\n:4\n", "")


def test_helper_lists_record_ids_after_status(tmp_path: Path) -> None:
    result = helper(tmp_path, "status", "")
    lines = result.stdout.splitlines()
    assert lines[-1] == ":4"
    assert sorted(lines[:-1]) == sorted(IDS)


def test_helper_lists_flags_after_a_verb(tmp_path: Path) -> None:
    lines = helper(tmp_path, "logs", "--").stdout.splitlines()
    assert lines[-1] == ":4"
    assert {"--tail", "--rank", "--namespace", "--context"} <= set(lines)


def test_helper_allows_files_for_lint(tmp_path: Path) -> None:
    assert helper(tmp_path, "lint", "").stdout == ":0\n"


def test_helper_asks_kubectl_for_namespaces(tmp_path: Path) -> None:
    fake = tmp_path / "kubectl"
    argv_log = tmp_path / "argv.log"
    fake.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$*" > "{argv_log}"\nprintf "namespace/default\\nnamespace/tao-jobs\\n"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    result = helper(tmp_path, "--context", "lab", "status", "-n", "ta", KUBECTL_TAO_KUBECTL=str(fake))
    assert result.stdout == "tao-jobs\n:4\n"
    assert argv_log.read_text().split() == ["--context=lab", "--request-timeout=2s", "get", "namespaces", "-o", "name"]


def test_helper_offers_nothing_when_kubectl_fails(tmp_path: Path) -> None:
    result = helper(tmp_path, "status", "-n", "", KUBECTL_TAO_KUBECTL=str(tmp_path / "no-such-kubectl"))
    assert (result.returncode, result.stdout, result.stderr) == (0, ":4\n", "")


def test_helper_does_not_import_heavy_modules(tmp_path: Path) -> None:
    python = ROOT / ".venv" / "bin" / "python"
    interpreter = str(python) if python.exists() else sys.executable
    result = subprocess.run(
        [interpreter, "-X", "importtime", str(HELPER), "status", ""],
        capture_output=True, text=True, env=_env(tmp_path), check=False, timeout=30,
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if "|" in line}
    assert imported, result.stderr[-500:]
    assert not {"jsonschema", "ruamel", "ruamel.yaml", "sh"} & imported


@pytest.mark.parametrize("verb", ["top", "resubmit"])
def test_helper_lists_record_ids_after_every_verb_that_takes_one(tmp_path: Path, verb: str) -> None:
    lines = helper(tmp_path, verb, "").stdout.splitlines()
    assert lines[-1] == ":4"
    assert sorted(lines[:-1]) == sorted(IDS)
