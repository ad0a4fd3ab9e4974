"""The wait loop's watchdogs and progress output, with a fake clock and scripted observations."""

from __future__ import annotations

import io
from typing import Any

import pytest

from kubectl_tao.jobs import wait as watch_mod
from kubectl_tao.jobs.track import Observation, Tracked
from kubectl_tao.jobs.wait import WaitTimeout, Watchdogs, fix_for, progress_line, watch


def tracked() -> Tracked:
    return Tracked({"id": "dino-train-abc123", "platform": "kubernetes", "transitions": []}, {"nodes": 2})


def obs(t: Tracked, state: str, reason: str = "") -> Observation:
    return Observation(t, state, reason, reason, None, {"total": 2, "ranks": []})


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def run(monkeypatch: pytest.MonkeyPatch, states: list[tuple[str, str]], dogs: Watchdogs, tty: bool = False) -> Any:
    t = tracked()
    seq = iter(states)
    monkeypatch.setattr(watch_mod, "observe", lambda *a, **k: obs(t, *next(seq)))
    fired: list[tuple[str, float]] = []

    def fake_fire(kc: Any, store: Any, tr: Tracked, o: Observation, dog: str, seconds: float, *, server: str) -> Any:
        fired.append((dog, seconds))
        return obs(tr, "ERROR", o.reason)

    monkeypatch.setattr(watch_mod, "fire", fake_fire)
    clock = Clock()
    out = io.StringIO()
    result = watch(None, None, t, server="s", dogs=dogs, out=out, tty=tty, sleep=clock.sleep, clock=clock)  # type: ignore[arg-type]
    return result, fired, out.getvalue()


def test_ends_on_a_terminal_state_and_prints_one_line_per_change(monkeypatch: pytest.MonkeyPatch) -> None:
    states = [("PENDING", "ContainerCreating"), ("RUNNING", ""), ("RUNNING", ""), ("COMPLETE", "Completed")]
    result, fired, out = run(monkeypatch, states, Watchdogs(interval=1))
    assert result.state == "COMPLETE" and fired == []
    assert len(out.splitlines()) == 3


def test_pending_watchdog_fires_after_its_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    states = [("PENDING", "Insufficient nvidia.com/gpu")] * 10
    result, fired, _ = run(monkeypatch, states, Watchdogs(pending_timeout=3, interval=1))
    assert result.state == "ERROR" and fired == [("pending-timeout", 3)]


def test_image_pull_watchdog_wins_over_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    states = [("PENDING", "ImagePullBackOff")] * 10
    _, fired, _ = run(monkeypatch, states, Watchdogs(pending_timeout=5, image_pull_timeout=2, interval=1))
    assert fired == [("image-pull-timeout", 2)]


def test_running_resets_the_pending_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    states = [("PENDING", "x"), ("PENDING", "x"), ("RUNNING", ""), ("PENDING", "x"), ("COMPLETE", "")]
    result, fired, _ = run(monkeypatch, states, Watchdogs(pending_timeout=2.5, interval=1))
    assert result.state == "COMPLETE" and fired == []


def test_overall_timeout_leaves_the_job_running(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(
        WaitTimeout, match="--timeout: gave up waiting after 3s; job dino-train-abc123 is still RUNNING"
    ):
        run(monkeypatch, [("RUNNING", "")] * 10, Watchdogs(timeout=3, interval=1))


def test_terminal_progress_rewrites_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    _, _, out = run(monkeypatch, [("RUNNING", ""), ("COMPLETE", "")], Watchdogs(interval=1), tty=True)
    assert out.count("\r\033[K") == 2 and out.endswith("\n")


def test_progress_line_and_fixes() -> None:
    line = progress_line(obs(tracked(), "PENDING", "Unschedulable"), 12.7)
    assert line == "dino-train-abc123  PENDING   ranks running 0/2  12s  Unschedulable"
    assert "image-pull Secret" in fix_for("ImagePullBackOff")
    assert "fewer GPUs" in fix_for("Insufficient nvidia.com/gpu")
