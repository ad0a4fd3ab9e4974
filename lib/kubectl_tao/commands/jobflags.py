"""The job flags (core/flagtable.JOB_FLAGS) on the command line of `submit` and `render` (render prints what submit
would apply): the click options built from the table (JobCommand, given to typer as the command's class) and the
typed request those verbs receive (jobs/plan.JobRequest).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click
import typer
from click.core import ParameterSource

from kubectl_tao.commands.common import VerbCommand
from kubectl_tao.core.flagtable import JOB_FLAGS

if TYPE_CHECKING:
    from kubectl_tao.jobs.plan import JobRequest


_META_KEY = "kubectl_tao.job_request"


def option(key: str) -> click.Option:
    """The click option of job flag KEY."""
    flag = JOB_FLAGS[key]
    types = {"int": click.INT, "optint": click.INT}
    return click.Option(
        [key, *flag.names],
        default=flag.default,
        type=types.get(flag.kind, click.STRING) if flag.kind != "switch" else None,
        multiple=flag.kind == "many",
        is_flag=flag.kind == "switch",
        show_default=True,
        help=flag.help,
    )


def typer_option(key: str) -> Any:
    """Job flag KEY as a typer parameter default, for a verb that takes only some of the job flags."""
    flag = JOB_FLAGS[key]
    return typer.Option(flag.default, *flag.names, help=flag.help)


class JobCommand(VerbCommand):
    """A verb that takes every job flag: typer's command for it (`@app.command(cls=JobCommand)`) plus the job
    flags' options. The verb's function receives none of them: it reads the request with `request_of(ctx)`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        at = len(self.params) - len(self.cluster_params)  # after the verb's own options, before the cluster flags
        self.params[at:at] = [option(key) for key in JOB_FLAGS]

    def invoke(self, ctx: click.Context) -> Any:
        values = {key: ctx.params.pop(key) for key in JOB_FLAGS}
        given = frozenset(
            key for key in JOB_FLAGS if ctx.get_parameter_source(key) not in (None, ParameterSource.DEFAULT)
        )
        from kubectl_tao.jobs.flags import job_request  # here: --help lists the verbs without the job layer

        ctx.meta[_META_KEY] = job_request(given, **values)
        return super().invoke(ctx)


def request_of(ctx: click.Context) -> JobRequest:
    """The job request JobCommand parsed for the running verb."""
    request: JobRequest = ctx.meta[_META_KEY]
    return request
