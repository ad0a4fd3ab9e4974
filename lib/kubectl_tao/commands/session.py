"""The session every verb shares: the global cluster flags as parsed, the kubectl wrapper built from them, the
record store."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubectl_tao.k8s.kubeconfig import Target
    from kubectl_tao.k8s.kubectl import ClusterOptions, Kubectl

GLOBAL_FLAGS_HELP = (
    "Global flags (accepted by every verb, before or after it): --context, -n/--namespace, --kubeconfig, "
    "--request-timeout. Env: TAO_K8S_CONTEXT, TAO_K8S_NAMESPACE. Precedence: flag > env > kubeconfig."
)
CLUSTER_KEYS = ("context", "namespace", "kubeconfig", "request_timeout")
# The environment variable each global flag falls back to when it is not given.
CLUSTER_ENVVARS = {"context": "TAO_K8S_CONTEXT", "namespace": "TAO_K8S_NAMESPACE"}


class Session:
    """The parsed global flags and the kubectl wrapper built from them (one per process)."""

    def __init__(self, options: ClusterOptions) -> None:
        self.options = options
        self._kubectl: Kubectl | None = None
        self._target: Target | None = None

    def kubectl(self) -> Kubectl:
        if self._kubectl is None:
            from kubectl_tao.k8s.kubectl import Kubectl

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
_verb_options: dict[str, str | None] = {}
_session: Session | None = None


def set_root_options(**values: str | None) -> None:
    """Flags given before the verb (`kubectl tao --context c status x`)."""
    global _session
    _root_options.update({k: v for k, v in values.items() if v})
    _session = None


def use_verb_options(given: dict[str, str | None]) -> None:
    """Flags given after the verb (or their environment variables): they win over those given before it."""
    global _session
    _verb_options.clear()
    _verb_options.update({k: v for k, v in given.items() if v})
    _session = None


def session() -> Session:
    """The session of the flags given (built on first use: `version` never needs one)."""
    global _session
    if _session is None:
        _session = _new_session({k: _verb_options.get(k) or _root_options.get(k) for k in CLUSTER_KEYS})
    return _session


# What kubectl's --request-timeout reads (client-go's clientcmd ParseTimeout): whole seconds, or a Go duration
# (time.ParseDuration: decimal numbers, each with a unit, e.g. 1h30m). A negative one is refused here.
_DURATION_PART_RE = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|μs|ms|s|m|h)")


def _kubectl_reads_timeout(value: str) -> bool:
    if value.isascii() and value.isdigit():
        return True
    at = 1 if value.startswith("+") else 0
    while at < len(value):
        part = _DURATION_PART_RE.match(value, at)
        if part is None:
            return False
        at = part.end()
    return at > (1 if value.startswith("+") else 0)


def check_request_timeout(value: str | None) -> str | None:
    """--request-timeout as kubectl reads it, or UsageError (exit 2) before any call (kubectl's own refusal
    would come back from the first call as a failure)."""
    if value is not None and not _kubectl_reads_timeout(value):
        from kubectl_tao.core.errors import UsageError

        raise UsageError(
            "--request-timeout is not a timeout kubectl reads: give whole seconds (0 = no limit) or a "
            "duration such as 30s, 2m or 1h"
        )
    return value


def _new_session(values: dict[str, str | None]) -> Session:
    from kubectl_tao.k8s.kubectl import ClusterOptions  # here: `version` never needs the wrapper

    check_request_timeout(values.get("request_timeout"))
    return Session(ClusterOptions(**values))


def reset_session() -> None:
    """For tests that invoke the app several times in one process."""
    global _session
    _session = None
    _root_options.clear()
    _verb_options.clear()


def record_store() -> Any:
    """The job-record store ($TAO_STATE_DIR/jobs, else ~/.tao/jobs)."""
    from kubectl_tao.store.records import RecordStore

    return RecordStore(list_hint="`kubectl tao list`")


def lazy_record_store() -> Callable[[], Any]:
    """record_store(), opened on the first call and reused after (a dry run never opens it)."""
    return functools.cache(record_store)
