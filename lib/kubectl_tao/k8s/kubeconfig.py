"""Which cluster kubectl will talk to, read from the kubeconfig files without starting kubectl.

Records pin the API server URL and context they were submitted to; status, logs and cancel compare the
current target with the pin. Reading the file here (instead of `kubectl config view`) keeps `status` at one
kubectl call. Merge rules follow kubectl's: files from --kubeconfig, else $KUBECONFIG (':'-separated, the
first file that sets a value wins), else ~/.kube/config; with no kubeconfig at all, the in-cluster service
account (KUBERNETES_SERVICE_HOST/PORT).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kubectl_tao.core import blockyaml
from kubectl_tao.core.errors import UsageError
from kubectl_tao.core.valueclass import Value, record

IN_CLUSTER_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@record(frozen=True)
class Target(Value):
    """The cluster a kubectl call would reach: server URL, context name and default namespace."""

    server: str
    context: str
    namespace: str
    source: str  # "kubeconfig" or "in-cluster" or "none"


def _files(explicit: str | None) -> list[Path]:
    if explicit:
        return [Path(explicit).expanduser()]
    env = os.environ.get("KUBECONFIG")
    if env:
        return [Path(p).expanduser() for p in env.split(os.pathsep) if p]
    return [Path.home() / ".kube" / "config"]


def _load(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UsageError(f"--kubeconfig: cannot read {path}: {exc.strerror}") from None
    data = blockyaml.load(text)  # the form kubectl writes, without importing ruamel.yaml
    if data is None:
        data = _load_yaml(text, path)
    return data if isinstance(data, dict) else {}


def _load_yaml(text: str, path: Path) -> Any:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        return YAML(typ="safe", pure=True).load(text)
    except YAMLError:
        raise UsageError(f"--kubeconfig: {path} is not valid YAML; fix or regenerate it") from None


def _named(items: Any) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for item in items or []:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            out.setdefault(item["name"], item)
    return out


def resolve(
    kubeconfig: str | None = None, context: str | None = None, namespace: str | None = None
) -> Target:
    """The target of a kubectl call made with these global flags."""
    docs = [_load(path) for path in _files(kubeconfig)]
    docs = [d for d in docs if d]
    if not docs:
        return _in_cluster(namespace)
    contexts: dict[str, dict[str, Any]] = {}
    clusters: dict[str, dict[str, Any]] = {}
    current = ""
    for doc in docs:
        for name, item in _named(doc.get("contexts")).items():
            contexts.setdefault(name, item)
        for name, item in _named(doc.get("clusters")).items():
            clusters.setdefault(name, item)
        if not current and isinstance(doc.get("current-context"), str):
            current = doc["current-context"]
    name = context or current
    ctx = (contexts.get(name) or {}).get("context") or {}
    if context and context not in contexts:
        raise UsageError(
            f"--context: context {context!r} is not in the kubeconfig; see `kubectl config get-contexts`"
        )
    cluster = (clusters.get(ctx.get("cluster", "")) or {}).get("cluster") or {}
    server = str(cluster.get("server") or "")
    ns = namespace or str(ctx.get("namespace") or "") or "default"
    return Target(server=server.rstrip("/"), context=name, namespace=ns, source="kubeconfig")


def _in_cluster(namespace: str | None) -> Target:
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if host and IN_CLUSTER_TOKEN.exists():
        ns = namespace
        if not ns and IN_CLUSTER_NAMESPACE.exists():
            ns = IN_CLUSTER_NAMESPACE.read_text(encoding="utf-8").strip()
        bracketed = f"[{host}]" if ":" in host else host
        return Target(f"https://{bracketed}:{port}", "", ns or "default", "in-cluster")
    return Target("", "", namespace or "default", "none")


def searched(explicit: str | None = None) -> str:
    """Where kubectl looks for its kubeconfig, in words: `--kubeconfig FILE`, `$KUBECONFIG (a:b)` or
    `~/.kube/config`, with `(none exists)` when no such file is there (kubectl then tries the in-cluster service
    account, else localhost:8080)."""
    files = _files(explicit)
    if explicit:
        where = f"--kubeconfig {explicit}"
    elif os.environ.get("KUBECONFIG"):
        where = f"$KUBECONFIG ({os.environ['KUBECONFIG']})"
    else:
        where = "~/.kube/config"
    from kubectl_tao.gates.gaterequest import NO_KUBECONFIG

    return where if any(f.is_file() for f in files) else f"{where} {NO_KUBECONFIG}"
