"""The job flags are declared once (core/flagtable.JOB_FLAGS): submit and render take exactly those options,
with the table's spellings and defaults, and hand jobs/plan a typed request built from them."""

from __future__ import annotations

from typing import Any

import click
import pytest
import typer

from kubectl_tao.cli.app import app
from kubectl_tao.commands.common import reset_session
from kubectl_tao.core.flagtable import JOB_FLAGS
from kubectl_tao.jobs import plan
from kubectl_tao.jobs.flags import job_request
from kubectl_tao.jobs.plan import JobRequest

ROOT = typer.main.get_command(app)


def _verb(name: str) -> click.Command:
    assert isinstance(ROOT, click.Group)
    command = ROOT.get_command(click.Context(ROOT), name)
    assert command is not None
    return command


def test_the_request_has_a_field_for_each_flag_of_the_table_and_no_other() -> None:
    assert JobRequest._fields == (*JOB_FLAGS, "given")


@pytest.mark.parametrize("verb", ["submit", "render"])
def test_submit_and_render_take_every_job_flag_with_the_tables_spellings_and_default(verb: str) -> None:
    options = {p.name: p for p in _verb(verb).params if isinstance(p, click.Option)}
    for key, flag in JOB_FLAGS.items():
        option = options[key]
        assert tuple(option.opts) == flag.names, key
        assert option.default == flag.default, key
        assert option.multiple == (flag.kind == "many"), key
        assert option.is_flag == (flag.kind == "switch"), key


def test_a_request_of_no_flags_holds_the_tables_defaults_and_nothing_given() -> None:
    request = job_request(frozenset())
    for key, flag in JOB_FLAGS.items():
        assert getattr(request, key) == (() if flag.kind == "many" else flag.default), key
    assert request.given == frozenset()


def _every_flag() -> tuple[list[str], dict[str, Any]]:
    """A command line giving every job flag once (a repeatable one twice), and the request fields it means."""
    argv: list[str] = []
    expected: dict[str, Any] = {}
    for key, flag in JOB_FLAGS.items():
        name = flag.names[0]
        if flag.kind == "switch":
            argv.append(name)
            expected[key] = True
        elif flag.kind in ("int", "optint"):
            argv += [name, "7"]
            expected[key] = 7
        elif flag.kind == "many":
            argv += [name, f"{key}-1", name, f"{key}-2"]
            expected[key] = (f"{key}-1", f"{key}-2")
        else:
            argv += [name, f"{key}-value"]
            expected[key] = f"{key}-value"
    return argv, expected


def _request_of(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> JobRequest:
    """The request `render ARGV` hands jobs/plan.build (stopped there)."""
    seen: list[JobRequest] = []

    def stop(job: JobRequest, *_: Any, **__: Any) -> Any:
        seen.append(job)
        raise SystemExit(0)

    monkeypatch.setattr(plan, "build", stop)
    monkeypatch.setattr(plan, "read_credentials", lambda *_: {})
    try:
        with pytest.raises(SystemExit):
            ROOT.main(["render", *argv], standalone_mode=False)
    finally:
        reset_session()
    (request,) = seen
    return request


def test_a_command_line_reaches_the_verb_as_one_typed_request(monkeypatch: pytest.MonkeyPatch) -> None:
    argv, expected = _every_flag()
    request = _request_of(monkeypatch, argv)
    assert {key: getattr(request, key) for key in JOB_FLAGS} == expected
    assert request.given == frozenset(JOB_FLAGS)


def test_a_flag_given_at_its_default_counts_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """--gpus 1 on the command line is given (an action request refuses it), though 1 is its default."""
    request = _request_of(monkeypatch, ["--gpus", "1", "--image", "busybox"])
    assert (request.gpus, request.image, request.nodes) == (1, "busybox", 1)
    assert request.given == {"gpus", "image"}
