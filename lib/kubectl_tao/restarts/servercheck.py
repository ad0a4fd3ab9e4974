"""Whether this API server keeps the container restart rules `--max-restarts` renders (docs/restarts.md).

A rank's container carries `restartPolicy: Never` and a `restartPolicyRules` entry whose action is
`RestartAllContainers`. Kubernetes serves them with the ContainerRestartRules feature gate (beta, on by default
since 1.35) and RestartAllContainersOnContainerExits (beta, on by default since 1.36). A server that does not
know the field refuses it (kubectl's strict field validation: "unknown field"); one with a gate off drops it
(the dry run's answer has no rule) or refuses the action ("Unsupported value"). So: a server dry run of a small
suspended Job carrying the rule, read back with a template, next to the server version (named in the message),
in the gates' first round trip. Never judged by the version number alone.
"""

from __future__ import annotations

import json
from typing import Any

from kubectl_tao.core import contract
from kubectl_tao.core.errors import TaoError
from kubectl_tao.core.valueclass import Value, record
from kubectl_tao.k8s.kubectl import Completed
from kubectl_tao.restarts.table import restart_rules

ACTION = "RestartAllContainers"
NEEDS = (
    "Kubernetes 1.36+ (or 1.35 with the RestartAllContainersOnContainerExits feature gate on) with the "
    "ContainerRestartRules and RestartAllContainersOnContainerExits feature gates on (their default) in the "
    "kube-apiserver and the kubelets"
)
_TEMPLATE = "go-template={{range .spec.template.spec.containers}}{{range .restartPolicyRules}}{{.action}}{{end}}{{end}}"


@record(frozen=True)
class Support(Value):
    """Whether the server keeps the restart rule, and why (or why not)."""

    available: bool
    detail: str


def probe_job() -> dict[str, Any]:
    """The Job the server dry run is asked to accept: a rank's restart rule on a container (never created)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "generateName": "kubectl-tao-restart-check-",
            "labels": {contract.MANAGED_BY_LABEL: contract.MANAGED_BY},
        },
        "spec": {
            "suspend": True,
            "backoffLimit": 0,
            "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "check",
                            "image": "registry.k8s.io/pause:3.10",
                            "restartPolicy": "Never",
                            "restartPolicyRules": restart_rules(),
                        }
                    ],
                }
            },
        },
    }


def dry_run_call(namespace: str) -> tuple[list[str], dict[str, Any]]:
    return (
        ["create", "--dry-run=server", "-f", "-", "-n", namespace, "-o", _TEMPLATE],
        {"namespaced": False, "stdin": json.dumps(probe_job())},
    )


def kept(result: Completed | TaoError) -> Support:
    """From the dry run: did the API server keep the RestartAllContainers rule?"""
    if isinstance(result, TaoError):
        message = result.message
        if "unknown field" in message and "restartPolicy" in message:
            return Support(False, "the API server does not know container restartPolicyRules (ContainerRestartRules)")
        if "Unsupported value" in message and ACTION in message:
            return Support(False, "the API server refuses the RestartAllContainers action "
                           "(the RestartAllContainersOnContainerExits feature gate is off)")
        if "restartPolicy" in message:
            return Support(False, "the API server refuses a container restartPolicy on a regular container "
                           "(the ContainerRestartRules feature gate is off)")
        return Support(False, f"a server dry run of a Job with a container restart rule failed ({_short(message)})")
    if result.stdout.strip() == ACTION:
        return Support(True, "the API server keeps container restart rules with the RestartAllContainers action")
    return Support(False, "the API server drops container restartPolicyRules (the ContainerRestartRules or "
                   "RestartAllContainersOnContainerExits feature gate is off)")


def _short(message: str) -> str:
    line = message.strip().splitlines()[0] if message.strip() else "no message"
    return line[:200]
