"""Every permission a submit will use, asked before anything is created (the permissions gate of
gates/checks.py, for submit and preflight alike; its judge is gates/verdicts.py: permissions).

`auth can-i create jobs` is not enough: an identity that may create but not patch or delete would get its
Secret and Job created, fail at the owner-reference patch, and be unable to clean up. So submit asks the API
server about each verb on each kind it touches (create and patch to launch, delete to roll back and cancel,
get and list to follow the job) in one `kubectl create` of SelfSubjectAccessReviews, the same question
`kubectl auth can-i` asks; the gate refuses naming everything that is missing.

When the manifests are known before the gates (no gang detection), the reviews ride in the same
`kubectl create --dry-run=server` as the job's objects (`with_dry_run`): the API server answers a review in a
dry run as in a real create, so one process both asks and dry-runs, and `split` tells the two answers apart.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kubectl_tao.core.errors import TaoError
from kubectl_tao.core.valueclass import Value, record
from kubectl_tao.k8s.kubectl import Completed
from kubectl_tao.k8s.objects import VALIDATE, field_error


@record(frozen=True)
class Permission(Value):
    verb: str
    resource: str  # with its subresource, if any: `pods/exec`
    group: str = ""

    @property
    def text(self) -> str:
        """As `kubectl auth can-i` takes it: `delete jobs.batch`, `patch secrets`, `create pods/exec`."""
        return f"{self.verb} {self.resource}{'.' + self.group if self.group else ''}"


# One line per review; a List or a single object, whichever kubectl prints.
_ROW = (
    "{{.spec.resourceAttributes.verb}} {{.spec.resourceAttributes.resource}}"
    "{{with .spec.resourceAttributes.subresource}}/{{.}}{{end}} "
    '{{or .spec.resourceAttributes.group "-"}} {{.status.allowed}}{{"\\n"}}'
)
REVIEW_TEMPLATE = (
    f'go-template={{{{define "row"}}}}{_ROW}{{{{end}}}}'
    '{{if .items}}{{range .items}}{{template "row" .}}{{end}}{{else}}{{template "row" .}}{{end}}'
)


# The reviews and the dry-run objects of `with_dry_run`, one line each: kubectl prints every object it
# created (or dry-ran) on its own, reviews as _ROW, the job's objects as `Kind/name`.
COMBINED_TEMPLATE = (
    f'go-template={{{{if eq .kind "SelfSubjectAccessReview"}}}}{_ROW}'
    '{{else}}{{.kind}}/{{.metadata.name}}{{"\\n"}}{{end}}'
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


def workflow_needed(*, release: bool, workloads: bool) -> list[Permission]:
    """What `workflow run` does beyond its steps' submits (workflows/runs.py), and its rollback and `workflow
    cancel` undo: the RELEASE RBAC (a ServiceAccount, Role and RoleBinding per releasing step, created, patched
    with their owners, removed by label) and the queued steps' Kueue WORKLOADS (created; patch, which RBAC's
    escalation check asks of whoever creates a Role that may patch them; listed and removed by `cancel`)."""
    verbs = ("create", "patch", "list", "delete")
    kinds = [("serviceaccounts", ""), ("roles", "rbac.authorization.k8s.io"),
             ("rolebindings", "rbac.authorization.k8s.io")] if release else []
    kinds += [("workloads", "kueue.x-k8s.io")] if workloads else []
    return [Permission(verb, resource, group) for resource, group in kinds for verb in verbs]


def optional() -> list[Permission]:
    """What reading from a running job's pods takes (preflight warns where they are denied; jobs run without
    them): exec and port-forward into a pod, the service proxy, and the volume helper pod of `data push`
    (create, get and delete a pod, list events for why it does not start; list the helper pods a killed
    kubectl-tao left, to remove them: a refused list is skipped silently). kubectl opens exec and port-forward
    over a WebSocket (authorized as `get`) and falls back to SPDY (`create`); from Kubernetes 1.35 the API server
    asks for `create` on the WebSocket too (AuthorizePodWebsocketUpgradeCreatePermission), so both are asked.
    `results` and `results pull` of a storage tier C job check that its credential Secret is still there (`get`)
    or, given `--env-file`, create a Secret owned by the helper pod and delete it (`create`, `delete`), and lift
    the pod's scheduling gate once the Secret exists (`patch` on pods)."""
    return [
        Permission("create", "pods"),
        Permission("get", "pods"),
        Permission("list", "pods"),
        Permission("patch", "pods"),
        Permission("delete", "pods"),
        Permission("list", "events"),
        Permission("create", "secrets"),
        Permission("get", "secrets"),
        Permission("delete", "secrets"),
        Permission("create", "pods/exec"),
        Permission("get", "pods/exec"),
        Permission("create", "pods/portforward"),
        Permission("get", "pods/portforward"),
        Permission("get", "services/proxy"),
    ]


def _attributes(p: Permission, namespace: str) -> dict[str, str]:
    resource, _, subresource = p.resource.partition("/")
    found = {"namespace": namespace, "verb": p.verb, "group": p.group, "resource": resource}
    if subresource:
        found["subresource"] = subresource
    return found


def review_items(permissions: list[Permission], namespace: str) -> list[dict[str, Any]]:
    """One SelfSubjectAccessReview per permission."""
    return [
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": _attributes(p, namespace)},
        }
        for p in permissions
    ]


def review_stream(permissions: list[Permission], namespace: str) -> str:
    """The SelfSubjectAccessReviews (one per permission) for `kubectl create -f -`."""
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": review_items(permissions, namespace)})


def with_dry_run(
    permissions: list[Permission], namespace: str, objects: list[dict[str, Any]]
) -> tuple[list[str], dict[str, Any]]:
    """One `kubectl create --dry-run=server` of the reviews followed by `objects` (in `namespace`). kubectl
    goes on past an object the server refuses, so the reviews are answered whatever the dry run says.
    `check` is off: a refused dry run still hands back the reviews' answers (see `split`)."""
    items = [*review_items(permissions, namespace), *objects]
    stream = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    return (
        ["create", "--dry-run=server", "-f", "-", "-n", namespace, "-o", COMBINED_TEMPLATE, VALIDATE],
        {"stdin": stream, "namespaced": False, "check": False},
    )


def answered(answer: str) -> bool:
    """Whether the output holds at least one review's answer."""
    return any(len(line.split()) >= 4 and line.split()[-1] in ("true", "false") for line in answer.splitlines())


def split(
    result: Completed | TaoError, error_for: Callable[[str], TaoError]
) -> tuple[Completed | TaoError, TaoError | None]:
    """A `with_dry_run` result -> (what `require` reads, the dry run's own error or None: kubectl's, or an
    unknown or duplicate field the server warned about). `error_for` turns kubectl's stderr into its TaoError
    (Kubectl.error_for). When kubectl failed before any review was
    answered, both are that error: the permissions could not be checked."""
    if isinstance(result, TaoError):
        return result, result
    if result.returncode == 0:
        return result, field_error(result.stderr)  # strict validation's refusals, from the server's warnings
    error: TaoError = error_for(result.stderr)
    return (result if answered(result.stdout) else error), error


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
