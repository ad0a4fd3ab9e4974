"""core/retry.py: which rank failures restart the gang, and the attempt history read back."""

from __future__ import annotations

import pytest

from kubectl_tao.core import retry


@pytest.mark.parametrize(
    ("code", "signal"),
    [(137, "SIGKILL"), (139, "SIGSEGV"), (134, "SIGABRT"), (135, "SIGBUS"), (143, "SIGTERM"), (129, "SIGHUP")],
)
def test_a_rank_killed_or_crashed_by_a_signal_is_retried(code: int, signal: str) -> None:
    decision = retry.classify(code)
    assert decision.verdict == retry.RETRY
    assert signal in decision.reason


@pytest.mark.parametrize("code", [1, 2, 3, 127, 126, 255, 136])
def test_a_program_error_is_never_retried(code: int) -> None:
    decision = retry.classify(code)
    assert decision.verdict == retry.FINAL
    assert "program error" in decision.reason


def test_exit_0_is_done() -> None:
    assert retry.classify(0).verdict == retry.DONE


def test_the_barriers_88_is_retried_once_and_final_when_it_repeats() -> None:
    assert retry.classify(88).verdict == retry.RETRY
    assert retry.classify(88, previous_code=137).verdict == retry.RETRY
    repeated = retry.classify(88, previous_code=88)
    assert repeated.verdict == retry.FINAL
    assert "twice" in repeated.reason


def test_the_restart_request_code_itself_is_never_a_failure_to_retry() -> None:
    assert retry.classify(retry.EXIT_RESTART).verdict == retry.FINAL


def test_a_diagnosis_class_decides_over_the_exit_code() -> None:
    # a device-side assert aborts (SIGABRT) yet fails again; an NCCL error exits 1 yet is worth a retry
    assert retry.classify(134, diagnosis="ERR_PROGRAM").verdict == retry.FINAL
    assert retry.classify(1, diagnosis="ERR_INFRA").verdict == retry.RETRY
    assert retry.classify(1, diagnosis="SOMETHING_ELSE").verdict == retry.FINAL


def test_an_attempt_ended_by_a_printed_cause_names_it_and_says_what_it_means() -> None:
    line = "kubectl-tao attempt=1 rank=1 exit=1 decision=restart counted=1 reason=NcclSystemError"
    final = "kubectl-tao attempt=2 rank=0 exit=134 decision=fail counted=0 reason=DeviceAssert (no restarts left)"
    first, second = retry.parse_history([line + "\n" + final])
    assert (first.reason, first.decision, first.counted) == ("NcclSystemError", "restart", True)
    assert first.sentence() == (
        "attempt 1 ended: rank 1 exit 1 (NcclSystemError: NCCL failed in a system call (network, RDMA, memory)); "
        "the gang restarted (counted)"
    )
    assert second.sentence().startswith(
        "attempt 2 ended: rank 0 exit 134 (DeviceAssert (no restarts left): a CUDA kernel's assertion failed"
    )


@pytest.mark.parametrize("code", [-1, 256, True, "137", None])
def test_a_value_that_is_no_exit_code_is_refused(code: object) -> None:
    with pytest.raises(ValueError, match="exit code"):
        retry.classify(code)  # type: ignore[arg-type]


def test_the_codes_the_entrypoint_retries_are_the_retryable_signals_88_and_the_stall() -> None:
    codes = retry.retryable_exit_codes()
    assert codes == [retry.EXIT_STALLED, 88, 129, 130, 134, 135, 137, 139, 143]
    assert all(retry.classify(code).verdict == retry.RETRY for code in codes)
    assert retry.EXIT_RESTART not in codes


def test_the_budget_allows_exactly_max_restarts() -> None:
    assert [retry.within_budget(used, 2) for used in range(4)] == [True, True, False, False]
    assert retry.within_budget(0, 0) is False


def test_history_is_read_from_termination_messages_one_end_per_attempt_sorted() -> None:
    rank0 = (
        "kubectl-tao attempt=2 rank=0 exit=143 decision=disrupted counted=0 reason=pod stopped (SIGTERM)\n"
        "kubectl-tao attempt=1 rank=1 exit=137 decision=restart counted=1 reason=SIGKILL\n"
    )
    rank1 = "garbage line\nkubectl-tao attempt=1 rank=1 exit=137 decision=restart counted=1 reason=SIGKILL\n"
    history = retry.parse_history([rank0, rank1, ""])
    assert [(end.attempt, end.rank, end.exit_code, end.decision, end.counted) for end in history] == [
        (1, 1, 137, "restart", True),
        (2, 0, 143, "disrupted", False),
    ]
    assert history[0].sentence() == (
        "attempt 1 ended: rank 1 exit 137 (SIGKILL); the gang restarted (counted)"
    )
    assert "not counted" in history[1].sentence()


def test_history_ignores_lines_that_do_not_match_exactly() -> None:
    assert retry.parse_history(["kubectl-tao attempt=1 rank=1 exit=137 decision=maybe counted=1 reason=x"]) == []
    assert retry.parse_history(["kubectl-tao attempt=1 rank=1 exit=1377 decision=fail counted=0 reason=x"]) == []


def test_a_stall_ended_by_the_watch_is_retried_and_named_stalled() -> None:
    assert retry.EXIT_STALLED == 86
    assert retry.EXIT_STALLED not in retry.RESERVED and retry.EXIT_STALLED != retry.EXIT_RESTART
    assert retry.classify(retry.EXIT_STALLED) == retry.Decision(retry.RETRY, "Stalled (exit 86)")
    end = retry.AttemptEnd(1, 0, 86, "restart", True, "Stalled")
    assert end.sentence() == (
        "attempt 1 ended: rank 0 exit 86 (Stalled: the program stopped making progress: the stall watch "
        "(--stall-timeout) ended it); the gang restarted (counted)"
    )


def test_the_stall_line_is_the_sign_the_entrypoint_restarts_on() -> None:
    line = (
        "kubectl-tao: stalled: no output and no status.json growth for 21s (--stall-timeout 20s); last progress: "
        "epoch=1 max_epoch=4 (train/status.json); last output: Epoch 1: 100%|##########| 10/10; stopping the "
        "program (TERM, then KILL after 30s)"
    )
    row = retry.output_cause(f"Epoch 1: 100%|##########| 10/10\n{line}\n")
    assert row is not None and (row.err_class, row.cause) == ("ERR_INFRA", "Stalled")
    assert retry.output_cause("kubectl-tao: stalled: said by the program itself\n") is None
