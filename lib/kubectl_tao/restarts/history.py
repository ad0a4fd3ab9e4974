"""The attempt history of a job with --max-restarts: THE view `status`, `explain` and `logs` show.

Each attempt's end is one line the gang entrypoint writes into the rank container's termination message (and
first into the next attempt's log); the record keeps the ends already read (``attempts`` in its extra). ``of_job``
merges the record's ends with those the pods' termination messages hold; `status` adds the ends it reads from a
log (``History.with_said``) when the kubelet removed the containers that held them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from kubectl_tao.core.valueclass import Value, record

# Each attempt's end, one line in the rank container's termination message (written by the entrypoint):
#   kubectl-tao attempt=2 rank=1 exit=137 decision=restart counted=1 reason=SIGKILL
_LINE_RE = re.compile(
    r"kubectl-tao attempt=(?P<attempt>\d{1,4}) rank=(?P<rank>\d{1,5}) exit=(?P<exit>\d{1,3}) "
    r"decision=(?P<decision>restart|fail|disrupted) counted=(?P<counted>[01]) "
    r"reason=(?P<reason>[A-Za-z0-9_ ()-]{0,80})$"
)


@record(frozen=True)
class AttemptEnd(Value):
    """How one attempt of a gang ended: which rank ended it first, with what, and what followed."""

    attempt: int
    rank: int
    exit_code: int
    decision: str  # restart | fail | disrupted (a restart that does not count: eviction, preemption)
    counted: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {**self.as_dict(), "said": self.sentence()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AttemptEnd:
        return cls(
            attempt=int(data["attempt"]),
            rank=int(data["rank"]),
            exit_code=int(data["exit_code"]),
            decision=str(data["decision"]),
            counted=bool(data["counted"]),
            reason=str(data["reason"]),
        )

    def sentence(self) -> str:
        then = {
            "restart": "the gang restarted (counted)",
            "disrupted": "the gang restarted (not counted: the pod was evicted or preempted)",
            "fail": "the job failed",
        }[self.decision]
        from kubectl_tao.diagnosis import causes

        why = self.reason
        cause = causes.BY_NAME.get(why.split(" (", 1)[0])
        if cause is not None:  # a cause the rank printed (diagnosis/causes.py): what it means
            why = f"{why}: {cause.summary}"
        return f"attempt {self.attempt} ended: rank {self.rank} exit {self.exit_code} ({why}); {then}"


def rank_restarts(pods: Iterable[Mapping[str, Any]], container: str = "tao") -> tuple[int, list[str]]:
    """From a job's pods: the most in-place restarts of the rank container in any pod (the kubelet keeps the count
    across RestartAllContainers), and the termination messages its containers left (the attempt history)."""
    most, messages = 0, []
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            if status.get("name") != container:
                continue
            count = status.get("restartCount")
            if isinstance(count, int) and not isinstance(count, bool):
                most = max(most, count)
            for key in ("state", "lastState"):
                message = ((status.get(key) or {}).get("terminated") or {}).get("message")
                if isinstance(message, str) and message:
                    messages.append(message)
    return most, messages


def restart_view(max_restarts: int, ends: Iterable[AttemptEnd], in_place: int = 0) -> dict[str, Any]:
    """What `status` shows of a job with --max-restarts: restarts so far (the kubelet's count IN_PLACE, or the
    attempt ends known, whichever is more), those counted against MAX_RESTARTS, the attempt now, and why each
    attempt ended."""
    known = sorted(ends, key=lambda end: end.attempt)
    restarted = sum(1 for end in known if end.decision != "fail")
    restarts = max(in_place, restarted)
    failed = [end for end in known if end.decision == "fail"]
    return {
        "restarts": restarts,
        "counted": sum(1 for end in known if end.counted),
        "max_restarts": max_restarts,
        "attempt": failed[-1].attempt if failed else restarts + 1,
        "attempts": [end.to_dict() for end in known],
    }


def parse_history(messages: Iterable[str]) -> list[AttemptEnd]:
    """The attempt ends found in termination messages (any pods', in any order), one per attempt, sorted."""
    found: dict[int, AttemptEnd] = {}
    for message in messages:
        for line in (message or "").splitlines():
            match = _LINE_RE.match(line.strip())
            if match is None:
                continue
            end = AttemptEnd(
                attempt=int(match["attempt"]),
                rank=int(match["rank"]),
                exit_code=int(match["exit"]),
                decision=match["decision"],
                counted=match["counted"] == "1",
                reason=match["reason"].strip(),
            )
            found.setdefault(end.attempt, end)
    return [found[key] for key in sorted(found)]


@record(frozen=True)
class History(Value):
    """What is known of a job's attempts: the ends (one per attempt, sorted), the kubelet's count of in-place
    restarts, and the ends the record kept when it was read (``recorded``: whether the record needs them)."""

    max_restarts: int
    ends: tuple[AttemptEnd, ...]
    in_place: int = 0
    recorded: tuple[AttemptEnd, ...] = ()

    @property
    def unexplained(self) -> bool:
        """Did the kubelet restart the gang more often than the known ends say (their lines are in a log)?"""
        return self.in_place > sum(1 for end in self.ends if end.decision != "fail")

    @property
    def changed(self) -> bool:
        """Does the record miss ends known now?"""
        return self.ends != self.recorded

    def with_said(self, texts: Iterable[str]) -> History:
        """These ends, and those TEXTS (a log's head, termination messages) say of attempts not known yet."""
        return self.replaced(ends=_merged(self.ends, parse_history(texts)))

    def stored(self) -> list[dict[str, Any]]:
        """The ends as the record keeps them (``attempts``)."""
        return [end.to_dict() for end in self.ends]

    def view(self) -> dict[str, Any]:
        """restart_view of these ends: what `status` shows (and `-o json` prints)."""
        return restart_view(self.max_restarts, self.ends, self.in_place)

    @property
    def attempt(self) -> int:
        """The attempt running now (or the one that failed)."""
        return int(self.view()["attempt"])

    def said(self) -> list[str]:
        """What `explain` says: the budget used and the attempt now, then why each attempt ended."""
        view = self.view()
        head = f"restart budget: {view['counted']} of {view['max_restarts']} used; attempt {view['attempt']}"
        return [head] + [str(end["said"]) for end in view["attempts"]]


def _merged(known: Iterable[AttemptEnd], found: Iterable[AttemptEnd]) -> tuple[AttemptEnd, ...]:
    ends = {end.attempt: end for end in known}
    for end in found:
        ends.setdefault(end.attempt, end)
    return tuple(ends[key] for key in sorted(ends))


def of_job(
    max_restarts: int | None, attempts: Iterable[Mapping[str, Any]] = (), pods: Iterable[Mapping[str, Any]] = ()
) -> History | None:
    """THE history of a job from what its record keeps (its --max-restarts, the ATTEMPTS' ends, as
    store/jobrecord.K8sRecord types them) and, when the Job is live, its PODS (restart counts, termination
    messages); None for a job without --max-restarts."""
    limit = max_restarts
    if not limit:
        return None
    recorded = tuple(AttemptEnd.from_dict(end) for end in attempts)
    in_place, messages = rank_restarts(pods)
    ends = _merged(recorded, parse_history(messages))
    return History(int(limit), ends, in_place, tuple(sorted(recorded, key=lambda end: end.attempt)))
