"""Every example in every verb's --help parses as written: the flags exist and take the values shown."""

from __future__ import annotations

import shlex

import click
import pytest
import typer

from kubectl_tao.cli.app import app

ROOT = typer.main.get_command(app)


def _leaves(cmd: click.Command, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd)
        return [leaf for name in cmd.list_commands(ctx) for leaf in _leaves(cmd.get_command(ctx, name), (*path, name))]
    return [(path, cmd)]


def _example_lines(epilog: str) -> list[str]:
    """The lines of the Examples block, with backslash continuations joined and comments dropped."""
    lines: list[str] = []
    in_examples = False
    for raw in epilog.splitlines():
        if raw.strip() == "Examples:":
            in_examples = True
            continue
        if in_examples and not raw.startswith("  "):
            break
        if not in_examples or raw.strip().startswith("#") or not raw.strip():
            continue
        if lines and lines[-1].endswith("\\"):
            lines[-1] = lines[-1][:-1] + " " + raw.strip()
        else:
            lines.append(raw.strip())
    return [line.split("  #")[0].strip() for line in lines]


def _invocations(line: str) -> list[list[str]]:
    """The kubectl-tao argv of each command in a shell line (pipes, redirections and process
    substitution are the shell's, not ours)."""
    out = []
    for part in line.split("|"):
        part = part.split(" > ")[0].split(" < ")[0].replace("source <(", "").rstrip(")")
        words = shlex.split(part)
        for start, word in enumerate(words):
            if word == "kubectl-tao" or (word == "kubectl" and words[start + 1 : start + 2] == ["tao"]):
                out.append(words[start + (1 if word == "kubectl-tao" else 2) :])
                break
    return out


EXAMPLES = [
    pytest.param(argv, id=f"{' '.join(path)}: {line}")
    for path, cmd in _leaves(ROOT)
    for line in _example_lines(cmd.epilog or "")
    for argv in _invocations(line)
    if "..." not in argv
]


def test_there_are_examples_to_check() -> None:
    assert len(EXAMPLES) > 30


@pytest.mark.parametrize("argv", EXAMPLES)
def test_help_example_parses_as_written(argv: list[str]) -> None:
    cmd: click.Command = ROOT
    rest = list(argv)
    while isinstance(cmd, click.Group):
        name, rest = rest[0], rest[1:]
        sub = cmd.get_command(click.Context(cmd), name)
        assert sub is not None, f"unknown verb {name!r}"
        cmd = sub
    try:
        cmd.make_context(cmd.name or "", rest)
    except click.UsageError as exc:
        pytest.fail(f"`kubectl tao {' '.join(argv)}` does not parse: {exc.format_message()}")
