"""status.job_events: which events belong to a Job and its pods (one suffix pattern for every Job name)."""

from __future__ import annotations

from typing import Any

from kubectl_tao.diagnosis.jobstate import job_events


def event(kind: str, name: str, when: str, reason: str = "Noted") -> dict[str, Any]:
    return {"involvedObject": {"kind": kind, "name": name}, "reason": reason, "lastTimestamp": when}


def test_events_of_the_job_and_its_pods_oldest_first() -> None:
    events = {
        "items": [
            event("Pod", "dino-train-abc-x7k2p", "2026-01-01T00:00:03Z", "Scheduled"),  # a pod already gone
            event("Job", "dino-train-abc", "2026-01-01T00:00:01Z", "SuccessfulCreate"),
            event("Pod", "dino-train-abc-1-q9w8e", "2026-01-01T00:00:02Z", "Pulling"),  # Indexed Job pod
            event("Pod", "named-by-hand", "2026-01-01T00:00:04Z", "Started"),  # listed by the caller
        ]
    }
    picked = job_events(events, "dino-train-abc", ["named-by-hand"])
    assert [e["reason"] for e in picked] == ["SuccessfulCreate", "Pulling", "Scheduled", "Started"]


def test_events_of_other_jobs_sharing_a_prefix_are_left_out() -> None:
    events = [
        event("Job", "dino-train-abcd", "2026-01-01T00:00:01Z"),
        event("Pod", "dino-train-abcd-x7k2p", "2026-01-01T00:00:01Z"),  # another Job's pod
        event("Pod", "dino-train-abc-x7k2", "2026-01-01T00:00:01Z"),  # suffix too short
        event("Pod", "dino-train-abc-x7k2pq", "2026-01-01T00:00:01Z"),  # suffix too long
        event("Pod", "dino-train-abc--x7k2p", "2026-01-01T00:00:01Z"),
        event("Pod", "dino-train-abc-X7K2P", "2026-01-01T00:00:01Z"),  # not a generated suffix
        event("Service", "dino-train-abc-x7k2p", "2026-01-01T00:00:01Z"),  # not a pod
    ]
    assert job_events(events, "dino-train-abc", []) == []


def test_no_events() -> None:
    assert job_events(None, "dino-train-abc", []) == []
    assert job_events({"items": []}, "dino-train-abc", ["p"]) == []
