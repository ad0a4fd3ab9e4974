"""The volume helper: a short-lived pod that mounts a PersistentVolumeClaim so `data push` (and the results
verbs) reach the volume with nothing but kubectl (`exec -i` streams).

The pod runs as a fixed non-root user with no service-account token, no privilege escalation and every
capability dropped; it only sleeps, and ends by itself after `lifetime` seconds should kubectl-tao be killed
outright. It is deleted on every way out (an error, Ctrl-C, SIGTERM, SIGHUP): by name, with its UID as the
precondition. A pod that cannot start is reported in one line with the reason the cluster gave. Before a verb starts
its pod, it removes the helper pods of this namespace a killed kubectl-tao left (`sweep`): ended, or past their
lifetime; never one a live kubectl-tao may still use.
"""

from __future__ import annotations

import json
import secrets
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from kubectl_tao.core import contract
from kubectl_tao.core.errors import KubectlError, TaoError, UsageError
from kubectl_tao.k8s import objects
from kubectl_tao.k8s.kubectl import Completed, Kubectl, kubectl_error_kind

# A small image with sh, tar, find, stat and sha256sum (busybox); --helper-image or KUBECTL_TAO_HELPER_IMAGE
# replace it (an air-gapped registry's copy).
DEFAULT_HELPER_IMAGE = "docker.io/library/busybox:1.37.0"
HELPER_IMAGE_ENV = "KUBECTL_TAO_HELPER_IMAGE"
HELPER_UID = 1000  # user, group and fsGroup: a volume whose driver applies fsGroup is writable by it
# The kubelet applies fsGroup (group owner, setgid, group rw) only when the volume's root does not already carry
# it: without this, "Always" walks and rewrites every file of the volume at every mount.
FS_GROUP_CHANGE_POLICY = "OnRootMismatch"
HELPER_LIFETIME = 6 * 3600  # seconds: the pod's own end when nobody deletes it
CONTAINER = "helper"
# Waiting reasons of a container that will not start by waiting longer.
_STUCK_REASONS = frozenset({
    "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError",
    "CreateContainerError", "RunContainerError",
})
# A ReadWriteOnce volume attached to a pod on another node: the attach/detach controller's event ("Multi-Attach
# error for volume ... Volume is already used by pod(s) ..."), reported at once. Other FailedMount and
# FailedAttachVolume warnings are often transient (the kubelet retries: a node authorizer that has not yet seen
# the pod's binding refuses it the claim once), so they are only named when the start timeout passes.
_VOLUME_EVENT_REASONS = frozenset({"FailedAttachVolume", "FailedMount"})
_MULTI_ATTACH = "Multi-Attach error"


def helper_image(flag: str | None) -> str:
    """--helper-image, else $KUBECTL_TAO_HELPER_IMAGE, else the default busybox."""
    import os

    from kubectl_tao.core.names import validate_image

    chosen = flag or os.environ.get(HELPER_IMAGE_ENV) or DEFAULT_HELPER_IMAGE
    shown = "--helper-image" if flag else (HELPER_IMAGE_ENV if os.environ.get(HELPER_IMAGE_ENV) else "helper image")
    validate_image(chosen, shown)
    return chosen


def helper_name() -> str:
    return f"tao-volume-{secrets.token_hex(4)}"


def helper_pod_manifest(
    name: str,
    namespace: str,
    pvc: str,
    *,
    image: str,
    mount_path: str,
    read_only: bool,
    node_selector: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    lifetime: int = HELPER_LIFETIME,
    command: list[str] | None = None,
    port: int | None = None,
) -> dict[str, Any]:
    """The helper pod: PVC mounted at MOUNT_PATH (read-only for reads), placement as given, least privilege.
    COMMAND replaces the sleep (a server such as TensorBoard, listening on PORT): it gets a writable /tmp
    (an emptyDir, HOME there) as the root filesystem stays read-only."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 0,
        "activeDeadlineSeconds": lifetime,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": HELPER_UID,
            "runAsGroup": HELPER_UID,
            "fsGroup": HELPER_UID,
            "fsGroupChangePolicy": FS_GROUP_CHANGE_POLICY,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": CONTAINER,
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": command or ["sleep", str(lifetime)],
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]},
                },
                "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}},
                "volumeMounts": [{"name": "volume", "mountPath": mount_path, "readOnly": read_only}],
            }
        ],
        "volumes": [{"name": "volume", "persistentVolumeClaim": {"claimName": pvc, "readOnly": read_only}}],
    }
    if command:
        container = spec["containers"][0]
        container["volumeMounts"].append({"name": "tmp", "mountPath": "/tmp"})
        container["env"] = [{"name": "HOME", "value": "/tmp"}]
        spec["volumes"].append({"name": "tmp", "emptyDir": {}})
    if port is not None:
        spec["containers"][0]["ports"] = [{"name": "http", "containerPort": port, "protocol": "TCP"}]
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": contract.volume_helper_labels()},
        "spec": spec,
    }


def check_claim(kc: Kubectl, namespace: str, pvc: str) -> dict[str, Any]:
    """The claim, which must exist and be Bound (UsageError, exit 2, otherwise; nothing is created)."""
    try:
        claim = kc.json(["get", "persistentvolumeclaim", pvc, "-n", namespace], namespaced=False)
    except KubectlError as exc:
        if exc.reason == "NotFound":
            raise UsageError(
                f"--pvc {pvc}: no PersistentVolumeClaim of that name in namespace {namespace}; "
                f"list them with `kubectl get pvc -n {namespace}`"
            ) from None
        raise
    phase = ((claim or {}).get("status") or {}).get("phase") or "unknown"
    if phase != "Bound":
        raise UsageError(
            f"--pvc {pvc}: the claim is {phase}, not Bound; see `kubectl describe pvc {pvc} -n {namespace}`"
        )
    return dict(claim)


def start_problem(pod: dict[str, Any], events: list[dict[str, Any]]) -> str | None:
    """Why the helper pod will not start (one line), or None while it may still start. Pure: the pod and its
    events as kubectl returns them."""
    status = pod.get("status") or {}
    phase = status.get("phase")
    if phase in ("Failed", "Succeeded"):
        ended = next((c["state"]["terminated"] for c in status.get("containerStatuses") or []
                      if (c.get("state") or {}).get("terminated")), {})
        said = " ".join(str(x) for x in (ended.get("reason"), ended.get("message")) if x)
        why = said or status.get("reason") or status.get("message") or phase
        return f"it ended ({phase}) before it was used: {_one_line(why)}"
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and cond.get("reason") == \
                "Unschedulable":
            return f"it cannot be scheduled: {_one_line(cond.get('message') or 'Unschedulable')}"
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in _STUCK_REASONS:
            message = _one_line(waiting.get("message") or "")
            return f"{waiting['reason']}" + (f": {message}" if message else "")
    for event in events:
        if event.get("type") == "Warning" and event.get("reason") in _VOLUME_EVENT_REASONS \
                and _MULTI_ATTACH in (event.get("message") or ""):
            return f"{event['reason']}: {_one_line(event.get('message') or '')}"
    return None


def last_warning(events: list[dict[str, Any]]) -> str | None:
    warnings = [e for e in events if e.get("type") == "Warning"]
    if not warnings:
        return None
    last = warnings[-1]
    return f"{last.get('reason')}: {_one_line(last.get('message') or '')}"


def _one_line(text: str) -> str:
    return " ".join(text.split())[:400]


def is_running(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any((c.get("state") or {}).get("running") is not None for c in status.get("containerStatuses") or [])


def _gated(manifest: dict[str, Any]) -> dict[str, Any]:
    """MANIFEST held by the credentials scheduling gate: no container starts until its Secret exists."""
    spec = dict(manifest["spec"], schedulingGates=[{"name": contract.HELPER_CREDENTIALS_GATE}])
    return dict(manifest, spec=spec)


def _seconds(stamp: Any) -> float | None:
    """An API server timestamp (RFC 3339, `2026-12-07T01:20:00Z`) as seconds since the epoch, or None."""
    import datetime

    if not isinstance(stamp, str):
        return None
    try:
        when = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when.timestamp() if when.tzinfo is not None else None


# A pod still held by its credential gate this long was left by a killed kubectl-tao: a live one lifts the gate (or
# removes the pod) within a few calls of creating it.
GATED_FOR_SECONDS = 900
# Beyond a pod's own lifetime, the age a pod that the kubelet does not end by itself (never started, or on a lost
# node) must reach before another kubectl-tao removes it: a margin for this machine's clock against the API server's.
CLOCK_MARGIN_SECONDS = 3600


def left_behind(pods: list[dict[str, Any]], now: float) -> list[tuple[str, str]]:
    """Name and UID of the helper pods among PODS (kubectl's JSON) a killed kubectl-tao left, at NOW (seconds since
    the epoch): ended (Succeeded, Failed: a started pod's `activeDeadlineSeconds` is enforced by its kubelet, which
    fails it); still held by the credential gate GATED_FOR_SECONDS after its creation; or, the kubelet not ending
    it (never started, or on a lost node), past its own lifetime by CLOCK_MARGIN_SECONDS. A pod within its lifetime
    may be a live kubectl-tao's and is kept; so is one already being deleted, or not labelled a helper."""
    wanted = contract.volume_helper_labels()
    out = []
    for pod in pods:
        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
        labels = meta.get("labels") or {}
        name, uid = meta.get("name"), meta.get("uid")
        if any(labels.get(k) != v for k, v in wanted.items()) or meta.get("deletionTimestamp") or not name or not uid:
            continue
        created = _seconds(meta.get("creationTimestamp"))
        gates = spec.get("schedulingGates") or []
        gated = any((g or {}).get("name") == contract.HELPER_CREDENTIALS_GATE for g in gates)
        lifetime = spec.get("activeDeadlineSeconds")
        since = [t for t in (created, _seconds(status.get("startTime"))) if t]
        if (
            status.get("phase") in ("Succeeded", "Failed")
            or (gated and created is not None and created + GATED_FOR_SECONDS < now)
            or (isinstance(lifetime, int) and since and max(since) + lifetime + CLOCK_MARGIN_SECONDS < now)
        ):
            out.append((str(name), str(uid)))
    return out


def sweep(kc: Kubectl, namespace: str, out: TextIO) -> list[str]:
    """Remove the helper pods of NAMESPACE a killed kubectl-tao left (`left_behind`), each UID-pinned, with one
    line on OUT for each; the names removed. A listing or delete refused (RBAC) or failed, kubectl itself not
    starting included, says nothing: the verb goes on."""
    try:
        listed = kc.run(["get", "pods", "-n", namespace, "-l", contract.volume_helper_selector(), "-o", "json"],
                        namespaced=False, check=False, best_effort=True)
        if listed.returncode != 0:
            return []
        pods = (json.loads(listed.stdout) or {}).get("items") or []
        stale = left_behind(list(pods), time.time())
        removed = objects.remove_left_helper_pods(kc, namespace, stale) if stale else []
    except (ValueError, AttributeError, TaoError):
        return []
    for name in removed:
        out.write(f"removed the volume helper pod {namespace}/{name} a killed kubectl-tao left\n")
    if removed:
        out.flush()
    return removed


class HelperPod:
    """One helper pod: `start` creates it and waits until it runs, `exec` streams a command in it, `remove`
    deletes it (UID-pinned; safe to call twice). SECRETS are short-lived Secrets the pod reads (credentials given
    for this one run): the pod is created first, held by a scheduling gate, then the Secrets already carrying an
    owner reference to its UID (their values only on kubectl's stdin), then the gate is lifted. Killed at any
    point (SIGKILL, which no handler sees), this process leaves at most a pod that owns its Secrets: the garbage
    collector removes them with it. They are deleted after it on every way out."""

    def __init__(self, kc: Kubectl, manifest: dict[str, Any], image_flag: str = "--helper-image",
                 secrets: list[dict[str, Any]] | None = None) -> None:
        self.kc = kc
        self.secrets = list(secrets or [])
        self.manifest = _gated(manifest) if self.secrets else manifest
        self.secret_uids: dict[str, str | None] = {s["metadata"]["name"]: None for s in self.secrets}
        self.image_flag = image_flag  # the verb's flag that picks the image, named when the pod cannot start
        self.name: str = manifest["metadata"]["name"]
        self.namespace: str = manifest["metadata"]["namespace"]
        self.uid: str | None = None
        self.created = False
        self.secrets_sent = False  # their create was started: from here on a way out deletes them
        self.removed = False
        self.not_removed: str | None = None  # why the delete failed, when it did

    def start(self, timeout: float) -> None:
        self.created = True  # from here on, a way out removes it (by name while the UID is not known yet)
        made = objects.create(self.kc, [self.manifest], self.namespace)
        self.uid = next((o["metadata"]["uid"] for o in made if o.get("kind") == "Pod"), None)
        if self.secrets:
            self._give_secrets()
        deadline = time.monotonic() + timeout
        polls = 0
        while True:
            pod = self.kc.json(["get", "pod", self.name, "-n", self.namespace], namespaced=False) or {}
            if is_running(pod):
                return
            events = self.events() if polls % 4 == 3 else []
            problem = start_problem(pod, events)
            if problem is None and time.monotonic() >= deadline:
                events = events or self.events()
                problem = (f"it did not start within {timeout:g}s ("
                           f"{last_warning(events) or (pod.get('status') or {}).get('phase') or 'Pending'})")
            if problem is not None:
                raise TaoError(
                    f"the volume helper pod {self.namespace}/{self.name} could not start: {problem}; "
                    f"fix it ({self.image_flag}, --node-selector, --toleration) and run again"
                )
            polls += 1
            time.sleep(0.5)

    def _give_secrets(self) -> None:
        """The gated pod's Secrets, created as its children, then its gate lifted."""
        if not self.uid or not objects.UID_RE.fullmatch(self.uid):
            raise TaoError(f"kubectl create returned no UID for the volume helper pod {self.namespace}/{self.name}; "
                           "its credential Secret was not created: run again")
        self.secrets_sent = True
        owned = [objects.owned_by_pod(secret, self.name, self.uid) for secret in self.secrets]
        for obj in objects.create(self.kc, owned, self.namespace):
            if obj.get("kind") == "Secret" and obj["metadata"]["name"] in self.secret_uids:
                self.secret_uids[obj["metadata"]["name"]] = obj["metadata"]["uid"]
        try:
            objects.lift_scheduling_gate(self.kc, self.namespace, self.name, self.uid, contract.HELPER_CREDENTIALS_GATE)
        except KubectlError as exc:
            why = ("--env-file needs `patch` on pods" if kubectl_error_kind(exc.message) == "Forbidden" else
                   "the pod was deleted or replaced meanwhile, or this cluster dropped its scheduling gate "
                   "(Kubernetes before 1.27); run again")
            raise TaoError(
                f"could not lift the scheduling gate of the volume helper pod {self.namespace}/{self.name}: "
                f"{_one_line(exc.message)}; {why}"
            ) from None

    def events(self) -> list[dict[str, Any]]:
        selector = f"involvedObject.kind=Pod,involvedObject.name={self.name}"
        if self.uid:
            selector += f",involvedObject.uid={self.uid}"
        try:
            listed = self.kc.json(
                ["get", "events", "-n", self.namespace, "--field-selector", selector, "--sort-by=.lastTimestamp"],
                namespaced=False,
            )
        except KubectlError:
            return []
        return list((listed or {}).get("items") or [])

    def exec_args(self, command: list[str]) -> list[str]:
        return ["exec", "-i", self.name, "-n", self.namespace, "-c", CONTAINER, "--", *command]

    def exec(
        self,
        command: list[str],
        *,
        feed: Callable[[Any], None] | None = None,
        sink: Callable[[bytes], None] | None = None,
        reader: Callable[[Any], None] | None = None,
    ) -> Completed:
        """COMMAND in the pod, stdin from FEED and stdout to SINK (or READER) as they flow; the caller reads the
        exit code."""
        return self.kc.pipe(self.exec_args(command), feed=feed, sink=sink, reader=reader, namespaced=False,
                            check=False)

    def script(self, text: str, *args: str, stdin: bytes | None = None) -> Completed:
        """`sh -c TEXT sh ARGS...` in the pod (fixed text; values only as positional arguments, or as STDIN: a
        list of names goes there, never on the command line), stdout kept: for listings, never for file data."""
        chunks: list[bytes] = []
        feed = None if stdin is None else (lambda pipe: pipe.write(stdin))
        done = self.exec(["sh", "-c", text, "sh", *args], feed=feed, sink=chunks.append)
        return Completed(b"".join(chunks).decode("utf-8", errors="replace"), done.stderr, done.returncode)

    def remove(self) -> str | None:
        """Delete the pod; None when it is gone, else one line saying it was not, with the command that removes
        it."""
        if self.created and not self.removed:
            self.removed = True
            failed = objects.remove_helper_pod(self.kc, self.namespace, self.name, self.uid)
            left = [f"pod/{self.name}"] if failed is not None else []
            for secret, uid in self.secret_uids.items() if self.secrets_sent else ():
                gone = objects.remove_helper_secret(self.kc, self.namespace, secret, uid)
                if gone is not None:
                    failed = failed or gone
                    left.append(f"secret/{secret}")
            if left == [f"pod/{self.name}"]:
                self.not_removed = (
                    f"warning: could not remove the volume helper pod {self.namespace}/{self.name} "
                    f"({_one_line(str(failed))}); delete it with `kubectl delete pod -n {self.namespace} {self.name}`"
                )
            elif left:
                self.not_removed = (
                    f"warning: could not remove the volume helper's {', '.join(left)} in namespace {self.namespace} "
                    f"({_one_line(str(failed))}); delete them with "
                    f"`kubectl delete -n {self.namespace} {' '.join(left)}`"
                )
        return self.not_removed


def _interrupted(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


_HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP ignored for the body (a cleanup that must run to its end), then restored as
    they were. Off the main thread (where signals cannot be set) the body just runs."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {sig: signal.signal(sig, signal.SIG_IGN) for sig in _HELD}
    try:
        yield
    finally:
        for sig, handler in held.items():
            signal.signal(sig, handler)


@contextmanager
def helper_pod(
    kc: Kubectl,
    manifest: dict[str, Any],
    *,
    timeout: float,
    image_flag: str = "--helper-image",
    out: TextIO | None = None,
    secrets: list[dict[str, Any]] | None = None,
) -> Iterator[HelperPod]:
    """A started helper pod for the body of the `with` (the namespace's helper pods a killed kubectl-tao left swept
    first); removed afterwards whatever happened (SIGTERM and SIGHUP are turned into the Ctrl-C path meanwhile,
    and the removal itself is not interrupted by them). A removal that fails is told in one line on OUT (stderr),
    with the command that removes the pod; so is each leftover pod swept."""
    import sys

    pod = HelperPod(kc, manifest, image_flag, secrets)
    watched = (signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, _interrupted) for sig in watched}
    stream = out if out is not None else sys.stderr
    try:
        sweep(kc, pod.namespace, stream)
        pod.start(timeout)
        yield pod
    finally:
        try:
            with signals_held():
                failed = pod.remove()
            if failed is not None:
                stream.write(failed + "\n")
                stream.flush()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
