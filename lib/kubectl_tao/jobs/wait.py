"""Waiting for a job: a live line on a terminal, plain lines when piped, and fast-fail watchdogs.

`--pending-timeout` fires when no rank has started for that long (Unschedulable, PVC, admission);
`--image-pull-timeout` fires when a container has waited on its image (ImagePullBackOff, ErrImagePull) for
that long. A watchdog deletes the Job, records ERROR with the class and the fix, and ends the wait.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from kubectl_tao.errors import TaoError
from kubectl_tao.jobs.track import Observation, Tracked, hold_ttl, observe, refuse_other_platform, release_ttl
from kubectl_tao.k8s.kubectl import Kubectl

PULL_REASONS = ("ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull")
CONFIG_REASONS = ("CreateContainerConfigError", "CreateContainerError")
END_STATES = ("COMPLETE", "ERROR", "CANCELED", "UNKNOWN")


@dataclass
class Watchdogs:
    pending_timeout: float | None = None
    image_pull_timeout: float | None = None
    timeout: float | None = None
    interval: float = 2.0


class WaitTimeout(TaoError):
    pass


def progress_line(obs: Observation, elapsed: float) -> str:
    live = obs.live or {}
    total = live.get("total") or (obs.tracked.extra.get("nodes") or 1)
    running = sum(1 for r in live.get("ranks", []) if r.get("phase") == "Running")
    text = f"{obs.tracked.id}  {obs.state:<8}  ranks running {running}/{total}  {int(elapsed)}s"
    if obs.reason:
        text += f"  {obs.reason}"
    return text


def watch(
    kc: Kubectl,
    store: Any,
    tracked: Tracked,
    *,
    server: str,
    dogs: Watchdogs,
    out: TextIO = sys.stderr,
    tty: bool | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    force: bool = False,
) -> Observation:
    """Poll until the job ends. While waiting, the Job's TTL is held (removed, and put back once the history is
    captured, or when the wait ends without an ending), so a short ttlSecondsAfterFinished cannot delete the
    Job between two polls and lose its outcome."""
    refuse_other_platform(tracked, "watch")
    try:
        return _poll(kc, store, tracked, server, dogs, out, tty, sleep, clock, force)
    finally:
        if kc is not None and store is not None:
            release_ttl(kc, store, tracked)


def _poll(
    kc: Kubectl,
    store: Any,
    tracked: Tracked,
    server: str,
    dogs: Watchdogs,
    out: TextIO,
    tty: bool | None,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    force: bool,
) -> Observation:
    tty = out.isatty() if tty is None else tty
    start = clock()
    pending_since: float | None = None
    pull_since: float | None = None
    last = ""
    held = False
    while True:
        obs = observe(kc, store, tracked, server=server, force=force)
        if not held and obs.state not in END_STATES and obs.job_ttl is not None and kc is not None:
            held = True  # one try: without permission to patch Jobs the wait goes on as before
            hold_ttl(kc, store, tracked, int(obs.job_ttl), "watch")
        now = clock()
        line = progress_line(obs, now - start)
        key = f"{obs.state}|{obs.reason}"
        if tty:
            out.write("\r\033[K" + line)
            out.flush()
        elif key != last:
            out.write(line + "\n")
            out.flush()
        last = key
        if obs.state in END_STATES:
            if tty:
                out.write("\n")
            return obs
        pending_since = (pending_since or now) if obs.state == "PENDING" else None
        pull_since = (pull_since or now) if obs.reason in PULL_REASONS else None
        fired = None
        if (
            dogs.image_pull_timeout is not None
            and pull_since is not None
            and now - pull_since >= dogs.image_pull_timeout
        ):
            fired = ("image-pull-timeout", dogs.image_pull_timeout)
        elif (
            dogs.pending_timeout is not None
            and pending_since is not None
            and now - pending_since >= dogs.pending_timeout
        ):
            fired = ("pending-timeout", dogs.pending_timeout)
        if fired:
            if tty:
                out.write("\n")
            return fire(kc, store, tracked, obs, fired[0], fired[1], server=server)
        if dogs.timeout is not None and now - start >= dogs.timeout:
            if tty:
                out.write("\n")
            raise WaitTimeout(
                f"--timeout: gave up waiting after {int(dogs.timeout)}s; job {tracked.id} is still {obs.state}"
                f"{' (' + obs.reason + ')' if obs.reason else ''}; the job keeps running (`kubectl tao status "
                f"{tracked.id} --watch` to keep watching)"
            )
        sleep(dogs.interval)


def fix_for(reason: str) -> str:
    if reason in PULL_REASONS:
        return "check the image name and tag, and give an image-pull Secret for its registry (--image-pull-secret)"
    if reason in CONFIG_REASONS:
        return "a referenced Secret or key is missing; create it or fix the reference"
    if reason == "PVCNotFound":
        return "create the PersistentVolumeClaim (tier A) or use --storage-tier C"
    if "nvidia.com/gpu" in reason or reason == "Unschedulable":
        return "ask for fewer GPUs/nodes, or wait for capacity (`kubectl tao fit`)"
    if reason == "Suspended":
        return "the queue did not admit the job; check the Kueue ClusterQueue quota"
    return "see `kubectl tao explain JOB` for the events"


def fire(
    kc: Kubectl, store: Any, tracked: Tracked, obs: Observation, dog: str, seconds: float, *, server: str
) -> Observation:
    """The watchdog's action: remove the Job and its objects, then record ERROR with the class and the fix."""
    from kubectl_tao.jobs.cancel import _delete_job
    from kubectl_tao.jobs.track import JOB_LABEL

    klass = obs.reason or "Unschedulable"
    ns, name = tracked.namespace, tracked.job_name
    if ns and name:
        _delete_job(kc, ns, name, tracked.extra.get("job_uid"))
        kc.run(
            [
                "delete",
                "services,secrets",
                "-n",
                ns,
                "-l",
                f"{JOB_LABEL}={name},app.kubernetes.io/managed-by=kubectl-tao",
                "--ignore-not-found",
            ],
            namespaced=False,
            check=False,
            best_effort=True,
        )
    message = f"{dog} {int(seconds)}s exceeded while {klass}: {obs.message or obs.reason}; fix: {fix_for(klass)}"
    store.mark(tracked.id, "ERROR", message=message, source="agent", err_class="ERR_INFRA")
    tracked.record = store.show(tracked.id)
    return Observation(tracked, "ERROR", klass, message, "ERR_INFRA", obs.live, [f"{dog} fired; the Job was deleted"])
