"""Plumbing shared by the verbs: the global cluster flags, the output flag, the session."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from kubectl_tao.commands.session import (  # noqa: F401  (re-exported: the verbs import them from here)
    CLUSTER_ENVVARS,
    CLUSTER_KEYS,
    GLOBAL_FLAGS_HELP,
    Session,
    lazy_record_store,
    record_store,
    reset_session,
    session,
    set_root_options,
    use_verb_options,
)

F = TypeVar("F", bound=Callable[..., Any])


def cluster_params() -> list[inspect.Parameter]:
    kw = inspect.Parameter.KEYWORD_ONLY
    opt = str | None
    return [
        inspect.Parameter(
            "context",
            kw,
            annotation=opt,
            default=typer.Option(
                None, "--context", envvar=CLUSTER_ENVVARS["context"], help="kubeconfig context to use."
            ),
        ),
        inspect.Parameter(
            "namespace",
            kw,
            annotation=opt,
            default=typer.Option(
                None, "--namespace", "-n", envvar=CLUSTER_ENVVARS["namespace"], help="Namespace of the job."
            ),
        ),
        inspect.Parameter(
            "kubeconfig",
            kw,
            annotation=opt,
            default=typer.Option(None, "--kubeconfig", help="Path to the kubeconfig file."),
        ),
        inspect.Parameter(
            "request_timeout",
            kw,
            annotation=opt,
            default=typer.Option(None, "--request-timeout", help="Passed to every kubectl call (e.g. 30s)."),
        ),
    ]


def with_cluster_flags(func: F) -> F:
    """Give a verb the global flags; values given after the verb win over those given before it."""
    signature = inspect.signature(func)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        use_verb_options({key: kwargs.pop(key, None) for key in CLUSTER_KEYS})
        return func(*args, **kwargs)

    params = [p for p in signature.parameters.values() if p.name not in CLUSTER_KEYS]
    wrapper.__signature__ = signature.replace(parameters=[*params, *cluster_params()])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {**func.__annotations__, **{key: str | None for key in CLUSTER_KEYS}}
    return wrapper  # type: ignore[return-value]


OutputOption = typer.Option("table", "--output", "-o", help="Output format: table (default), wide, json, yaml, name.")
NoHeadersOption = typer.Option(False, "--no-headers", help="Omit the table header line.")
