"""Plumbing shared by the verbs: the global cluster flags, the output flag, the session."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from kubectl_tao.k8s.kubectl import ClusterOptions, Kubectl

if TYPE_CHECKING:
    from kubectl_tao.k8s.kubeconfig import Target

F = TypeVar("F", bound=Callable[..., Any])

GLOBAL_FLAGS_HELP = (
    "Global flags (accepted by every verb, before or after it): --context, -n/--namespace, --kubeconfig, "
    "--request-timeout. Env: TAO_K8S_CONTEXT, TAO_K8S_NAMESPACE. Precedence: flag > env > kubeconfig."
)


@dataclass
class Session:
    """The parsed global flags and the kubectl wrapper built from them (one per process)."""

    options: ClusterOptions = field(default_factory=ClusterOptions)
    _kubectl: Kubectl | None = None
    _target: Target | None = None

    def kubectl(self) -> Kubectl:
        if self._kubectl is None:
            self._kubectl = Kubectl(self.options)
        return self._kubectl

    def target(self) -> Target:
        """The cluster and namespace the global flags point at (read from the kubeconfig, no kubectl call)."""
        if self._target is None:
            from kubectl_tao.k8s.kubeconfig import resolve

            o = self.options
            self._target = resolve(o.kubeconfig, o.context, o.namespace)
        return self._target

    def namespace(self) -> str:
        """Flag, then TAO_K8S_NAMESPACE (both already in options), then the kubeconfig context's, then default."""
        return self.options.namespace or self.target().namespace


_root_options: dict[str, str | None] = {}
_session: Session | None = None


def set_root_options(**values: str | None) -> None:
    """Flags given before the verb (`kubectl tao --context c status x`)."""
    global _session
    _root_options.update({k: v for k, v in values.items() if v})
    _session = None


def session() -> Session:
    global _session
    if _session is None:
        _session = Session(ClusterOptions(**{k: _root_options.get(k) for k in _CLUSTER_KEYS}))
    return _session


def reset_session() -> None:
    """For tests that invoke the app several times in one process."""
    global _session
    _session = None
    _root_options.clear()


_CLUSTER_KEYS = ("context", "namespace", "kubeconfig", "request_timeout")


def cluster_params() -> list[inspect.Parameter]:
    kw = inspect.Parameter.KEYWORD_ONLY
    opt = str | None
    return [
        inspect.Parameter(
            "context",
            kw,
            annotation=opt,
            default=typer.Option(None, "--context", envvar="TAO_K8S_CONTEXT", help="kubeconfig context to use."),
        ),
        inspect.Parameter(
            "namespace",
            kw,
            annotation=opt,
            default=typer.Option(None, "--namespace", "-n", envvar="TAO_K8S_NAMESPACE", help="Namespace of the job."),
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
        global _session
        given = {key: kwargs.pop(key, None) for key in _CLUSTER_KEYS}
        merged = {key: given[key] or _root_options.get(key) for key in _CLUSTER_KEYS}
        _session = Session(ClusterOptions(**merged))
        return func(*args, **kwargs)

    params = [p for p in signature.parameters.values() if p.name not in _CLUSTER_KEYS]
    wrapper.__signature__ = signature.replace(parameters=[*params, *cluster_params()])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {**func.__annotations__, **{key: str | None for key in _CLUSTER_KEYS}}
    return wrapper  # type: ignore[return-value]


OutputOption = typer.Option("table", "--output", "-o", help="Output format: table (default), wide, json, yaml, name.")
NoHeadersOption = typer.Option(False, "--no-headers", help="Omit the table header line.")


def record_store() -> Any:
    """The job-record store ($TAO_STATE_DIR/jobs, else ~/.tao/jobs)."""
    from kubectl_tao.store.records import RecordStore

    return RecordStore()


def lazy_record_store() -> Callable[[], Any]:
    """record_store(), opened on the first call and reused after (a dry run never opens it)."""
    return functools.cache(record_store)
