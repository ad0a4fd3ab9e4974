"""Every permission a submit will use, checked before anything is created.

`auth can-i create jobs` is not enough: an identity that may create but not patch or delete would get its
Secret and Job created, fail at the owner-reference patch, and be unable to clean up. So submit asks the API
server about each verb on each kind it touches (create and patch to launch, delete to roll back and cancel,
get and list to follow the job) in one `kubectl create` of SelfSubjectAccessReviews, the same question
`kubectl auth can-i` asks, and refuses naming everything that is missing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kubectl_tao.errors import ClusterUnreachableError, GateError, TaoError
from kubectl_tao.k8s.kubectl import Completed


@dataclass(frozen=True)
class Permission:
    verb: str
    resource: str
    group: str = ""

    @property
    def text(self) -> str:
        """As `kubectl auth can-i` takes it: `delete jobs.batch`, `patch secrets`."""
        return f"{self.verb} {self.resource}{'.' + self.group if self.group else ''}"


# One line per review; a List or a single object, whichever kubectl prints.
_ROW = (
    "{{.spec.resourceAttributes.verb}} {{.spec.resourceAttributes.resource}} "
    '{{or .spec.resourceAttributes.group "-"}} {{.status.allowed}}{{"\\n"}}'
)
REVIEW_TEMPLATE = (
    f'go-template={{{{define "row"}}}}{_ROW}{{{{end}}}}'
    '{{if .items}}{{range .items}}{{template "row" .}}{{end}}{{else}}{{template "row" .}}{{end}}'
)


def needed(*, credentials: bool, service: bool, patch_job: bool = False) -> list[Permission]:
    """What submit, its rollback, `status` and `cancel` do to the job's objects (`patch_job`: a Job submitted
    without a TTL gets one from `status` once its history is captured; without patch it would never go)."""
    job_verbs = ("create", "get", "list", "patch", "delete") if patch_job else ("create", "get", "list", "delete")
    out = [Permission(verb, "jobs", "batch") for verb in job_verbs]
    out.append(Permission("list", "pods"))
    if credentials:
        out += [Permission(verb, "secrets") for verb in ("create", "patch", "list", "delete")]
    if service:
        out += [Permission(verb, "services") for verb in ("create", "patch", "list", "delete")]
    return out


def review_stream(permissions: list[Permission], namespace: str) -> str:
    """The SelfSubjectAccessReviews (one per permission) for `kubectl create -f -`."""
    items: list[dict[str, Any]] = [
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "namespace": namespace,
                    "verb": p.verb,
                    "group": p.group,
                    "resource": p.resource,
                }
            },
        }
        for p in permissions
    ]
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


def review_call(permissions: list[Permission], namespace: str) -> tuple[list[str], dict[str, Any]]:
    """Arguments and options of the one kubectl call that asks about every permission."""
    return (
        ["create", "-o", REVIEW_TEMPLATE, "-f", "-"],
        {"stdin": review_stream(permissions, namespace), "namespaced": False},
    )


def denied(permissions: list[Permission], answer: str) -> list[Permission]:
    """The permissions the answer does not grant (one the server did not answer about counts as denied)."""
    allowed = set()
    for line in answer.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[-1] == "true":
            group = " ".join(parts[2:-1])
            allowed.add(Permission(parts[0], parts[1], "" if group in ("-", "<no value>") else group))
    return [p for p in permissions if p not in allowed]


def require(permissions: list[Permission], result: Completed | TaoError, namespace: str) -> None:
    """Refuse (exit 1) naming every missing permission; an unreachable server is exit 3, not a denial."""
    if isinstance(result, ClusterUnreachableError):
        raise result
    if isinstance(result, TaoError):
        raise GateError(
            f"could not check your permissions in namespace {namespace} ({result.message}); submit needs to know "
            "it may create, patch and delete what it creates before it creates anything"
        )
    missing = denied(permissions, result.stdout)
    if missing:
        names = ", ".join(p.text for p in missing)
        raise GateError(
            f"permission denied: you may not {names} in namespace {namespace}; submit needs them to launch the "
            f"job, to remove it if a later step fails, and to follow or cancel it (check with `kubectl auth can-i "
            f"{missing[0].text} -n {namespace}`); ask a cluster admin for a Role that grants them, or use -n"
        )
