"""The objects a job owns on the cluster (its Job, pods, headless Service and credential Secret): create them,
make the Secret and Service children of the Job, patch the Job's TTL, and remove them all again.

`teardown` is the one way a job's objects are removed: a submit's rollback, `cancel`, the watchdogs (and so the
NCCL probe) all call it. It is idempotent: what is already gone is not an error.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

from kubectl_tao.core import contract
from kubectl_tao.core.errors import GateError, KubectlError, TaoError
from kubectl_tao.core.valueclass import Value, record
from kubectl_tao.k8s.kubectl import Kubectl, Running, first_error_line, kubectl_error_kind

UID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Kind, name and UID of each created object: the go-template keeps Secret data out of this process.
CREATED_TEMPLATE = 'go-template={{.kind}} {{.metadata.name}} {{.metadata.uid}}{{"\\n"}}'
# `kubectl delete` / `kubectl get -o name` spelling of each kind a job is made of.
_RESOURCE_OF_KIND = {"Job": "job.batch", "Secret": "secret", "Service": "service"}
_LEFT_TEMPLATE = (
    'go-template={{range .items}}{{if not .metadata.deletionTimestamp}}{{.kind}}/{{.metadata.name}}{{"\\n"}}'
    "{{end}}{{end}}"
)
# Kind, name and owner UIDs of the Secret/Service of a job (never their data).
_OWNERS_TEMPLATE = (
    'go-template={{range .items}}{{.kind}} {{.metadata.name}} '
    '{{range .metadata.ownerReferences}}{{.uid}},{{end}}{{"\\n"}}{{end}}'
)


# Field validation by the API server alone: with kubectl's default (`--validate=strict`) kubectl first loads the
# server's whole OpenAPI v2 document to validate on its own side too, about twice the CPU of the rest of a
# `create`. With `warn` the server still checks every field and names an unknown or duplicate one in a warning;
# a dry run refuses on those warnings (`field_problems`), as strict would, and `create` sends only a stream that
# passed that dry run.
VALIDATE = "--validate=warn"
_FIELD_WARNING = re.compile(r"^Warning: (?:unknown|duplicate) field ")


def field_problems(stderr: str) -> list[str]:
    """The server's unknown/duplicate-field warnings in kubectl's stderr (what strict validation refuses)."""
    lines = [line.strip() for line in stderr.splitlines()]
    return [line.removeprefix("Warning: ") for line in lines if _FIELD_WARNING.match(line)]


def field_error(stderr: str) -> KubectlError | None:
    """A KubectlError (Invalid) naming the fields the server did not accept, or None."""
    problems = field_problems(stderr)
    if not problems:
        return None
    return KubectlError(
        f"the API server does not accept {'; '.join(problems[:3])}", stderr=stderr, reason="Invalid"
    )


def secret_object(name: str, namespace: str, labels: dict[str, str], data: dict[str, str]) -> dict[str, Any]:
    """The per-job credential Secret; it only ever travels to kubectl through stdin."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "type": "Opaque",
        "stringData": dict(data),
    }


def stream(objects: list[dict[str, Any]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})


def parse_created(text: str) -> list[dict[str, Any]]:
    """Kind, name and UID of each object `create -o CREATED_TEMPLATE` printed."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3:
            out.append({"kind": parts[0], "metadata": {"name": parts[1], "uid": parts[2]}})
    return out


def created_job(created: list[dict[str, Any]]) -> dict[str, Any]:
    """The Job among the created objects, with a UID that can be pinned (TaoError otherwise)."""
    job = next((o for o in created if o.get("kind") == "Job"), None)
    if job is None:
        raise TaoError("kubectl create returned no Job object; nothing was launched")
    uid = job["metadata"]["uid"]
    if not UID_RE.fullmatch(uid):
        raise TaoError(f"kubectl create returned the Job UID {uid!r}, which is not a UID; the Job cannot be pinned")
    return job


def dry_run(kc: Kubectl, objects: list[dict[str, Any]], namespace: str | None = None) -> None:
    """`kubectl create --dry-run=server` of `objects` (in `namespace`, else kubectl's own)."""
    where = ["-n", namespace] if namespace else []
    result = kc.run(
        ["create", "--dry-run=server", "-f", "-", *where, "-o", "name", VALIDATE],
        stdin=stream(objects),
        namespaced=namespace is None,
    )
    error = field_error(result.stderr)
    if error is not None:
        raise error


def create(kc: Kubectl, objects: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """Create `objects` in one call (a stream that passed a server dry run: see VALIDATE); kind, name and UID of
    each created one."""
    result = kc.run(
        ["create", "-f", "-", "-n", namespace, "-o", CREATED_TEMPLATE, VALIDATE],
        stdin=stream(objects),
        namespaced=False,
    )
    return parse_created(result.stdout)


def adopt(kc: Kubectl, job: dict[str, Any], dependents: list[dict[str, Any]], namespace: str) -> None:
    """Make the Secret and Service children of the Job (one patch call), so TTL or cancel removes them with it."""
    meta = job["metadata"]
    owner = [{"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"], "uid": meta["uid"]}]
    targets = [
        {"apiVersion": "v1", "kind": obj["kind"], "metadata": {"name": obj["metadata"]["name"], "namespace": namespace}}
        for obj in dependents
    ]
    kc.run(
        ["patch", "-f", "-", "--type=merge", "-p", json.dumps({"metadata": {"ownerReferences": owner}}), "-o", "name"],
        stdin=stream(targets),
        namespaced=False,
    )


def adopt_orphans(kc: Kubectl, job: dict[str, Any], namespace: str, record_id: str) -> None:
    """The Job of an interrupted submit exists after all: give its Secret/Service the owner reference the submit
    could not set, so TTL or cancel removes them with it. Refused for a Job not made for `record_id`."""
    meta = job["metadata"]
    owner = contract.record_annotation(meta)
    if owner != record_id:
        raise GateError(
            f"Job {namespace}/{meta['name']} belongs to record {owner or '(none)'}, not {record_id}; "
            "refusing to adopt it"
        )
    listed = kc.run(
        ["get", "secrets,services", "-n", namespace, "-l", contract.job_selector(meta["name"]), "-o", _OWNERS_TEMPLATE],
        namespaced=False,
    )
    orphans = []
    for line in listed.stdout.splitlines():
        kind, _, rest = line.partition(" ")
        name, _, owners = rest.partition(" ")
        if kind and name and meta["uid"] not in owners.split(","):
            orphans.append({"kind": kind, "metadata": {"name": name}})
    if orphans:
        adopt(kc, job, orphans, namespace)


def set_ttl(kc: Kubectl, namespace: str, name: str, uid: str | None, ttl: int | None) -> bool:
    """Set (None: remove) the Job's ttlSecondsAfterFinished; a pinned `uid` makes the patch fail on any other
    Job of the same name. False when the patch did not apply (no permission, the Job is gone)."""
    body: dict[str, Any] = {"spec": {"ttlSecondsAfterFinished": ttl}}
    if uid:
        body["metadata"] = {"uid": uid}
    result = kc.run(
        ["patch", "job", name, "-n", namespace, "--type=merge", "-p", json.dumps(body)],
        namespaced=False,
        check=False,
        best_effort=True,
    )
    return result.returncode == 0


def owned_job_uid(kc: Kubectl, namespace: str, name: str, record_id: str) -> str | None:
    """The UID of Job `name` when kubectl-tao made it for this record; None when there is no such Job.
    Used when the record pins no UID: a Job of that name without our label, or made for another record,
    belongs to someone else and is refused."""
    try:
        job = kc.json(["get", "job", name, "-n", namespace], namespaced=False)
    except KubectlError as exc:
        if exc.reason == "NotFound":
            return None
        raise
    meta = (job or {}).get("metadata") or {}
    if not contract.owned_by_record(meta, record_id):
        managed = (meta.get("labels") or {}).get(contract.MANAGED_BY_LABEL)
        raise GateError(
            f"Job {namespace}/{name} was not made by kubectl-tao for record {record_id} (label "
            f"{contract.MANAGED_BY_LABEL}={managed or '(none)'}, annotation {contract.RECORD_ID_ANNOTATION}="
            f"{contract.record_annotation(meta) or '(none)'}); it was not deleted, with or without --force: if it "
            "is yours, delete it with kubectl"
        )
    return str(meta.get("uid") or "") or None


# ---------------------------------------------------------------- teardown


@record(frozen=True)
class Teardown(Value):
    deleted: list[str]  # `kind/name` removed by this call (when kubectl said)
    left: list[str]  # `kind/name` that could not be removed
    unreachable: bool = False  # the API server did not answer: what is `left` may or may not exist


def _delete_options(uid: str | None) -> str:
    body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"}
    if uid:
        body["preconditions"] = {"uid": uid}
    return json.dumps(body)


def _delete_job(kc: Kubectl, namespace: str, name: str, uid: str | None, *, workload: bool = False) -> bool:
    """True when a Job (WORKLOAD: a queued workflow step's Kueue Workload) was deleted, False when there was
    none. Conflict = a different object: refuse."""
    path = (f"/apis/{contract.KUEUE_WORKLOAD_API}/namespaces/{namespace}/workloads/{name}" if workload
            else f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}")
    kind = "Workload" if workload else "Job"
    try:
        kc.run(["delete", "--raw", path, "-f", "-"], stdin=_delete_options(uid), namespaced=False)
    except KubectlError as exc:
        if exc.reason == "NotFound":
            return False
        if exc.reason == "Conflict" or "precondition" in exc.message.lower():
            raise GateError(
                f"{kind} {namespace}/{name} does not have the UID {uid} the record was pinned to: it is a different "
                f"{kind} with the same name; it was not deleted"
            ) from None
        raise
    return True


def teardown(
    kc: Kubectl,
    namespace: str,
    name: str,
    *,
    job: str = "label",
    uid: str | None = None,
    labelled: bool = True,
    strict: bool = False,
    created: list[str] | None = None,
    selector: str | None = None,
    kinds: str | None = None,
    workloads: list[tuple[str, str]] | None = None,
) -> Teardown:
    """Remove the objects of job `name` in `namespace`; idempotent.

    job: "label"  the Job goes with its labelled Secret and Service in one call (a submit's rollback, which may
                  not know the Job's UID yet);
         "name"   the Job is deleted alone first, by name, in the foreground, with `uid` as precondition when
                  given: a Job of that name with another UID raises GateError and nothing else is touched;
         "keep"   the Job is not touched (known gone, or not ours).
    labelled: also delete the Secret/Service carrying the job's labels (False for a Job made elsewhere).
    strict: a failed label delete raises; otherwise what is left is listed into `left` (when even that listing
    fails: `created`, what the caller may have created, else a description of the selector).
    selector, kinds: other labelled objects than a job's (a workflow run's release RBAC), with job="keep".
    workloads: name and UID of Kueue Workloads to delete, each with its UID as precondition (a queued workflow
    step's; gone already: nothing to do; another Workload has the name now: left alone, named in `left`).
    """
    done = Teardown([], [])
    if job == "name" and _delete_job(kc, namespace, name, uid):
        done.deleted.append(f"job.batch/{name}")
    for workload, workload_uid in workloads or []:
        try:
            if _delete_job(kc, namespace, workload, workload_uid, workload=True):
                done.deleted.append(f"{contract.KUEUE_WORKLOAD_RESOURCE}/{workload}")
        except GateError:
            done.left.append(f"{contract.KUEUE_WORKLOAD_RESOURCE}/{workload} (another Workload has the name now)")
    if not labelled:
        return done
    selector = selector or contract.job_selector(name)
    kinds = kinds or ("jobs,services,secrets" if job == "label" else "services,secrets")
    # With the Job: foreground, so its pods go before it; not waited for here (see wait_gone).
    with_job = ["--cascade=foreground", "--wait=false"] if job == "label" else []
    result = kc.run(
        ["delete", kinds, "-n", namespace, "-l", selector, "--ignore-not-found", *with_job, "-o", "name"],
        namespaced=False,
        check=strict,
        best_effort=not strict,
    )
    if result.returncode == 0:
        names = (line.strip() for line in result.stdout.splitlines())
        done.deleted.extend(name for name in names if "/" in name and " " not in name)
        return done
    listed = kc.run(
        ["get", kinds, "-n", namespace, "-l", selector, "-o", _LEFT_TEMPLATE],
        namespaced=False,
        check=False,
        best_effort=True,  # a server gone mid-rollback: name what was created, and still settle the record
    )
    if listed.returncode != 0:
        unreachable = kubectl_error_kind(listed.stderr) == "Unreachable"
        return Teardown(done.deleted, created or [f"objects labelled {selector}"], unreachable)
    for line in listed.stdout.splitlines():
        kind, _, left_name = line.strip().partition("/")
        if kind and left_name:
            done.left.append(f"{_RESOURCE_OF_KIND.get(kind, kind.lower())}/{left_name}")
    return done


def remove_helper_pod(kc: Kubectl, namespace: str, name: str, uid: str | None) -> str | None:
    """Delete a volume helper pod by name with its UID as precondition and no grace period (it only sleeps):
    None when it was deleted, was gone already or the name now belongs to another pod (left alone); else why it
    could not be deleted (kubectl's line: the cluster unreachable, permission refused, ...).
    No UID (the create was interrupted before it answered): by its name alone, a random one this process chose.
    Never raises for the cluster's answer: it runs on every way out, Ctrl-C included."""
    return _remove_raw(kc, f"/api/v1/namespaces/{namespace}/pods/{name}", uid)


def remove_helper_secret(kc: Kubectl, namespace: str, name: str, uid: str | None) -> str | None:
    """Delete a helper pod's short-lived credential Secret as `remove_helper_pod` deletes the pod (UID-pinned; gone
    already, e.g. with its owner the pod, is no error)."""
    return _remove_raw(kc, f"/api/v1/namespaces/{namespace}/secrets/{name}", uid)


def owned_by_pod(obj: dict[str, Any], pod: str, pod_uid: str) -> dict[str, Any]:
    """OBJ (a helper pod's Secret) created as a child of the helper pod: the garbage collector removes it with the
    pod, whoever deletes the pod and whenever (a killed kubectl-tao included)."""
    meta = dict(obj["metadata"], ownerReferences=[{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": pod_uid}])
    return dict(obj, metadata=meta)


def lift_scheduling_gate(kc: Kubectl, namespace: str, pod: str, pod_uid: str, gate: str) -> None:
    """Remove GATE, the pod's first scheduling gate (the one it was created with; a gate an admission webhook
    added after it stays), so nothing of kubectl-tao holds it back; one JSON patch whose steps first test the pod's
    UID (another pod of that name is left alone) and that the first gate is GATE. KubectlError when the cluster
    refuses it."""
    steps = [{"op": "test", "path": "/metadata/uid", "value": pod_uid},
             {"op": "test", "path": "/spec/schedulingGates/0/name", "value": gate},
             {"op": "remove", "path": "/spec/schedulingGates/0"}]
    kc.run(["patch", "pod", pod, "-n", namespace, "--type=json", "-p", json.dumps(steps), "-o", "name"],
           namespaced=False)


_REMOVALS_AT_ONCE = 8  # a namespace that piled up hundreds of leftovers must not start hundreds of kubectls


def remove_left_helper_pods(kc: Kubectl, namespace: str, pods: list[tuple[str, str]]) -> list[str]:
    """Delete the helper pods (name, UID) a killed kubectl-tao left, a few at once, each UID-pinned with no grace
    period; the names this call removed (one gone already, renamed or refused is left out, silently)."""
    removed: list[str] = []
    for first in range(0, len(pods), _REMOVALS_AT_ONCE):
        started = [(name, _start_remove(kc, f"/api/v1/namespaces/{namespace}/pods/{name}", uid))
                   for name, uid in pods[first:first + _REMOVALS_AT_ONCE]]
        removed += [name for name, running in started if running.wait(check=False, best_effort=True).returncode == 0]
    return removed


def _start_remove(kc: Kubectl, path: str, uid: str | None) -> Running:
    """The delete of a helper's object at PATH (UID-pinned when UID is known, no grace period), started."""
    body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
    if uid:
        body["preconditions"] = {"uid": uid}
    return kc.start(["delete", "--raw", path, "-f", "-"], stdin=json.dumps(body), namespaced=False)


def _remove_raw(kc: Kubectl, path: str, uid: str | None) -> str | None:
    result = _start_remove(kc, path, uid).wait(check=False, best_effort=True)
    if result.returncode == 0 or kubectl_error_kind(result.stderr) in ("NotFound", "Conflict"):
        return None  # deleted; or gone already; or the UID precondition failed (another pod of that name)
    return first_error_line(result.stderr) or f"kubectl exited with {result.returncode}"


def left_behind_note(namespace: str, left: list[str]) -> str:
    """What a teardown could not remove, and the command that removes it."""
    running = " (the Job may still run)" if any(name.startswith("job.batch/") for name in left) else ""
    return (
        f"could not remove {', '.join(left)} in namespace {namespace}{running}: delete "
        f"{'it' if len(left) == 1 else 'them'} with `kubectl delete -n {namespace} {' '.join(left)}`"
    )


def remaining(kc: Kubectl, namespace: str, name: str, *, launched_here: bool = True) -> list[str]:
    """`kind/name` of the job's objects (and pods) still on the cluster."""
    if launched_here:
        query = ["get", "jobs,pods,services,secrets", "-n", namespace, "-l", contract.job_selector(name)]
    else:  # a Job without kubectl-tao's labels: only the Job itself, by name
        query = ["get", "job", name, "-n", namespace, "--ignore-not-found"]
    result = kc.run([*query, "-o", "name"], namespaced=False)
    pods = kc.run(
        ["get", "pods", "-n", namespace, "-l", contract.pod_selector(name, launched_here=False), "-o", "name"],
        namespaced=False,
    )
    names = {line.strip() for line in (result.stdout + pods.stdout).splitlines() if line.strip()}
    return sorted(names)


def wait_gone(
    kc: Kubectl,
    namespace: str,
    name: str,
    timeout: float,
    *,
    launched_here: bool = True,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> list[str]:
    """Poll until the job's objects are gone or `timeout` passed; what is still there."""
    deadline = clock() + timeout
    left = remaining(kc, namespace, name, launched_here=launched_here)
    while left and clock() < deadline:
        sleep(0.5)
        left = remaining(kc, namespace, name, launched_here=launched_here)
    return left
