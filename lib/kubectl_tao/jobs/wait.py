"""Waiting for a job: a live line on a terminal, plain lines when piped, and fast-fail watchdogs.

`--pending-timeout` fires when no rank has started for that long (Unschedulable, PVC, admission);
`--image-pull-timeout` fires when a container has waited on its image (ImagePullBackOff, ErrImagePull) for
that long. A watchdog deletes the Job, records ERROR with the class and the fix, and ends the wait.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TextIO, TypeVar

from kubectl_tao.core import contract
from kubectl_tao.core.contract import END_STATES
from kubectl_tao.core.errors import TaoError
from kubectl_tao.core.valueclass import Value, record
from kubectl_tao.jobs.track import Observation, Tracked, hold_ttl, observe, refuse_other_platform, release_ttl
from kubectl_tao.k8s import objects
from kubectl_tao.k8s.kubectl import Kubectl

T = TypeVar("T")

PULL_REASONS = ("ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull")
CONFIG_REASONS = ("CreateContainerConfigError", "CreateContainerError")


@record
class Watchdogs(Value):
    pending_timeout: float | None = None
    image_pull_timeout: float | None = None
    timeout: float | None = None
    interval: float = 2.0


class WaitTimeout(TaoError):
    pass


def progress_line(obs: Observation, elapsed: float) -> str:
    live = obs.live or {}
    total = live.get("total") or (obs.tracked.k8s.nodes or 1)
    running = sum(1 for r in live.get("ranks", []) if r.get("phase") == "Running")
    text = f"{obs.tracked.id}  {obs.state:<8}  ranks running {running}/{total}  {int(elapsed)}s"
    if obs.reason:
        text += f"  {obs.reason}"
    if obs.state == "RUNNING" and obs.progress is not None:
        from kubectl_tao.progress.model import eta_cell, progress_cell

        cell, eta = progress_cell(obs.progress), eta_cell(obs.progress, datetime.now(UTC))
        text += (f"  {cell}" if cell else "") + (f"  ETA {eta}" if eta else "")
    return text


def _progress_key(obs: Observation) -> str:
    if obs.state != "RUNNING" or obs.progress is None:
        return ""
    from kubectl_tao.progress.model import progress_cell

    return progress_cell(obs.progress)


def poll(
    kc: Kubectl,
    store: Any,
    tracked: Tracked,
    step: Callable[[Observation, float], T | None],
    *,
    server: str,
    interval: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    force: bool = False,
) -> T:
    """The one polling loop (`--wait`, `status --watch`, the NCCL probe): observe the job (writing state
    changes back to its record), hand the observation and the time to `step`, and sleep `interval` until
    `step` returns a result."""
    while True:
        obs = observe(kc, store, tracked, server=server, force=force)
        done = step(obs, clock())
        if done is not None:
            return done
        sleep(interval)


class Since:
    """When a condition that is still true first held (None while it does not hold)."""

    def __init__(self) -> None:
        self.at: float | None = None

    def update(self, holds: bool, now: float) -> float | None:
        self.at = (self.at if self.at is not None else now) if holds else None
        return self.at

    def longer_than(self, seconds: float | None, now: float) -> bool:
        return seconds is not None and self.at is not None and now - self.at >= seconds


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
        step = _Watching(kc, store, tracked, server, dogs, out, out.isatty() if tty is None else tty, clock())
        return poll(kc, store, tracked, step, server=server, interval=dogs.interval, sleep=sleep, clock=clock,
                    force=force)
    finally:
        if kc is not None and store is not None:
            release_ttl(kc, store, tracked)


class _Watching:
    """One step of `watch`: the TTL hold, the progress line, the end, the watchdogs and --timeout."""

    def __init__(
        self, kc: Kubectl, store: Any, tracked: Tracked, server: str, dogs: Watchdogs, out: TextIO, tty: bool,
        start: float,
    ) -> None:
        self.kc, self.store, self.tracked, self.server, self.dogs = kc, store, tracked, server, dogs
        self.out, self.tty, self.start = out, tty, start
        self.pending, self.pull = Since(), Since()
        self.last = ""
        self.held = False

    def __call__(self, obs: Observation, now: float) -> Observation | None:
        kc, dogs = self.kc, self.dogs
        if not self.held and obs.state not in END_STATES and obs.job_ttl is not None and kc is not None:
            self.held = True  # one try: without permission to patch Jobs the wait goes on as before
            hold_ttl(kc, self.store, self.tracked, int(obs.job_ttl), "watch")
        from kubectl_tao.core.sanitize import sanitize

        if obs.state == "RUNNING" and kc is not None:
            from kubectl_tao.jobs import liveprogress

            told = len(obs.notes)
            liveprogress.read(kc, self.store, obs)
            for note in obs.notes[told:]:  # why the log stands in for status.json: said once, when first met
                self.out.write(("\r\033[K" if self.tty else "") + sanitize(f"Note: {note}") + "\n")
        line = sanitize(progress_line(obs, now - self.start))  # a reason or message may quote the cluster
        key = f"{obs.state}|{obs.reason}|{_progress_key(obs)}"  # piped: a new line when one of them changes
        if self.tty:
            self.out.write("\r\033[K" + line)
            self.out.flush()
        elif key != self.last:
            self.out.write(line + "\n")
            self.out.flush()
        self.last = key
        if obs.state in END_STATES:
            self._end_line()
            return obs
        self.pending.update(obs.state == "PENDING", now)
        self.pull.update(obs.reason in PULL_REASONS, now)
        fired = None
        if self.pull.longer_than(dogs.image_pull_timeout, now):
            fired = ("image-pull-timeout", dogs.image_pull_timeout)
        elif self.pending.longer_than(dogs.pending_timeout, now):
            fired = ("pending-timeout", dogs.pending_timeout)
        if fired:
            self._end_line()
            return fire(kc, self.store, self.tracked, obs, fired[0], float(fired[1] or 0), server=self.server)
        if dogs.timeout is not None and now - self.start >= dogs.timeout:
            self._end_line()
            tracked = self.tracked
            raise WaitTimeout(
                f"--timeout: gave up waiting after {int(dogs.timeout)}s; job {tracked.id} is still {obs.state}"
                f"{' (' + obs.reason + ')' if obs.reason else ''}; the job keeps running (`kubectl tao status "
                f"{tracked.id} --watch` to keep watching)"
            )
        return None

    def _end_line(self) -> None:
        if self.tty:
            self.out.write("\n")


def follow(kc: Kubectl, store: Any, record_id: str, *, server: str, dogs: Watchdogs) -> Observation:
    """`watch` the job of record RECORD_ID until it ends (or a watchdog fires): `submit --wait`."""
    from kubectl_tao.jobs.track import load

    return watch(kc, store, load(store, record_id), server=server, dogs=dogs)


def fix_for(reason: str) -> str:
    if reason in PULL_REASONS:
        return "check the image name and tag, and give an image-pull Secret for its registry (--image-pull-secret)"
    if reason in CONFIG_REASONS:
        return "a referenced Secret or key is missing; create it or fix the reference"
    if reason == "PVCNotFound":
        return "create the PersistentVolumeClaim (tier A) or use --storage-tier C"
    if contract.GPU_RESOURCE in reason or reason == "Unschedulable":
        return "ask for fewer GPUs/nodes, or wait for capacity (`kubectl tao fit`)"
    if reason == "Suspended":
        return "the queue did not admit the job; check the Kueue ClusterQueue quota"
    if reason in ("Inadmissible", "Deactivated"):
        return "Kueue cannot admit the job; `kubectl tao explain JOB` names the queue to fix"
    return "see `kubectl tao explain JOB` for the events"


def fire(
    kc: Kubectl, store: Any, tracked: Tracked, obs: Observation, dog: str, seconds: float, *, server: str
) -> Observation:
    """The watchdog's action: remove the Job and its objects, then record ERROR with the class and the fix."""
    klass = obs.reason or "Unschedulable"
    ns, name = tracked.namespace, tracked.job_name
    if ns and name:
        objects.teardown(kc, ns, name, job="name", uid=tracked.k8s.job_uid)
    message = f"{dog} {int(seconds)}s exceeded while {klass}: {obs.message or obs.reason}; fix: {fix_for(klass)}"
    store.mark(tracked.id, "ERROR", message=message, source="agent", err_class="ERR_INFRA")
    tracked.record = store.show(tracked.id)
    return Observation(tracked, "ERROR", klass, message, "ERR_INFRA", obs.live, [f"{dog} fired; the Job was deleted"])
