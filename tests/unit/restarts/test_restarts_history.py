"""restarts/history.py: the attempt history read back from termination messages, logs and the record, and the
one view of it status, explain and logs show."""

from __future__ import annotations

from kubectl_tao.restarts import history, table


def test_an_attempt_ended_by_a_printed_cause_names_it_and_says_what_it_means() -> None:
    line = "kubectl-tao attempt=1 rank=1 exit=1 decision=restart counted=1 reason=NcclSystemError"
    final = "kubectl-tao attempt=2 rank=0 exit=134 decision=fail counted=0 reason=DeviceAssert (no restarts left)"
    first, second = history.parse_history([line + "\n" + final])
    assert (first.reason, first.decision, first.counted) == ("NcclSystemError", "restart", True)
    assert first.sentence() == (
        "attempt 1 ended: rank 1 exit 1 (NcclSystemError: NCCL failed in a system call (network, RDMA, memory)); "
        "the gang restarted (counted)"
    )
    assert second.sentence().startswith(
        "attempt 2 ended: rank 0 exit 134 (DeviceAssert (no restarts left): a CUDA kernel's assertion failed"
    )


def test_history_is_read_from_termination_messages_one_end_per_attempt_sorted() -> None:
    rank0 = (
        "kubectl-tao attempt=2 rank=0 exit=143 decision=disrupted counted=0 reason=pod stopped (SIGTERM)\n"
        "kubectl-tao attempt=1 rank=1 exit=137 decision=restart counted=1 reason=SIGKILL\n"
    )
    rank1 = "garbage line\nkubectl-tao attempt=1 rank=1 exit=137 decision=restart counted=1 reason=SIGKILL\n"
    ends = history.parse_history([rank0, rank1, ""])
    assert [(end.attempt, end.rank, end.exit_code, end.decision, end.counted) for end in ends] == [
        (1, 1, 137, "restart", True),
        (2, 0, 143, "disrupted", False),
    ]
    assert ends[0].sentence() == (
        "attempt 1 ended: rank 1 exit 137 (SIGKILL); the gang restarted (counted)"
    )
    assert "not counted" in ends[1].sentence()


def test_history_ignores_lines_that_do_not_match_exactly() -> None:
    assert history.parse_history(["kubectl-tao attempt=1 rank=1 exit=137 decision=maybe counted=1 reason=x"]) == []
    assert history.parse_history(["kubectl-tao attempt=1 rank=1 exit=1377 decision=fail counted=0 reason=x"]) == []


def test_a_stall_ended_by_the_watch_says_what_stalled_means() -> None:
    end = history.AttemptEnd(1, 0, table.EXIT_STALLED, "restart", True, table.BY_NAME["stalled"].reason)
    assert end.sentence() == (
        f"attempt 1 ended: rank 0 exit {table.EXIT_STALLED} (Stalled: the program stopped making progress: the "
        "stall watch (--stall-timeout) ended it); the gang restarted (counted)"
    )


RESTART_1 = "kubectl-tao attempt=1 rank=1 exit=137 decision=restart counted=1 reason=SIGKILL"
FAIL_2 = "kubectl-tao attempt=2 rank=0 exit=1 decision=fail counted=0 reason=program error"


def _pod(restarts: int, message: str = "") -> dict[str, object]:
    terminated = {"terminated": {"exitCode": 85, "message": message}} if message else {}
    return {"status": {"containerStatuses": [{"name": "tao", "restartCount": restarts, "lastState": terminated}]}}


def test_a_job_without_max_restarts_has_no_history() -> None:
    assert history.of_job(None) is None
    assert history.of_job(0, [], [_pod(3)]) is None


def test_the_history_merges_the_records_ends_with_the_pods_messages_and_says_when_the_record_misses_some() -> None:
    recorded = [end.to_dict() for end in history.parse_history([RESTART_1])]
    found = history.of_job(2, recorded, [_pod(1, FAIL_2)])
    assert found is not None
    assert [end.attempt for end in found.ends] == [1, 2] and found.changed and not found.unexplained
    view = found.view()
    assert (view["restarts"], view["counted"], view["max_restarts"], view["attempt"]) == (1, 1, 2, 2)
    assert found.stored() == view["attempts"]
    assert found.said() == [
        "restart budget: 1 of 2 used; attempt 2",
        "attempt 1 ended: rank 1 exit 137 (SIGKILL); the gang restarted (counted)",
        "attempt 2 ended: rank 0 exit 1 (program error); the job failed",
    ]
    same = history.of_job(2, found.stored())
    assert same is not None and not same.changed and same.attempt == 2


def test_restarts_the_kubelet_counted_that_no_end_explains_are_read_from_a_log() -> None:
    found = history.of_job(3, (), [_pod(2), _pod(1)])
    assert found is not None and found.unexplained and found.view()["restarts"] == 2 and found.attempt == 3
    told = found.with_said([f"{RESTART_1}\nkubectl-tao attempt=2 rank=0 exit=139 decision=restart counted=1 "
                            "reason=SIGSEGV\nEpoch 1"])
    assert not told.unexplained and told.changed and [end.attempt for end in told.ends] == [1, 2]
    # a record's end wins over another reading of the same attempt
    kept = history.of_job(3, told.stored()).with_said(  # type: ignore[union-attr]
        ["kubectl-tao attempt=1 rank=0 exit=1 decision=fail counted=0 reason=x"])
    assert kept.ends[0].exit_code == 137
