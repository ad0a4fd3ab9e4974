"""status of a job submitted with --max-restarts: restarts, attempt and why each attempt ended (-o json and the
table's RESTARTS column), kept in the record; from the kubelet's counts, the ranks' termination messages, or the
head of the current attempt's log."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubectl_tao.commands import present
from kubectl_tao.jobs.track import Observation, Tracked, observe_restarts
from kubectl_tao.k8s.kubectl import Completed

RESTART_1 = "kubectl-tao attempt=1 rank=1 exit=137 decision=restart counted=1 reason=SIGKILL"
FAIL_2 = "kubectl-tao attempt=2 rank=0 exit=3 decision=fail counted=0 reason=program error"


def pod(name: str, restarts: int, *, state: dict[str, Any] | None = None, last: dict[str, Any] | None = None) -> dict:
    return {
        "metadata": {"name": name},
        "status": {"containerStatuses": [
            {"name": "tao", "restartCount": restarts, "state": state or {"running": {}}, "lastState": last or {}}
        ]},
    }


class Store:
    def __init__(self) -> None:
        self.extra: dict[str, Any] = {"max_restarts": 3}

    def update_k8s(self, _record_id: str, **fields: Any) -> dict[str, Any]:
        from kubectl_tao.store.jobrecord import K8sRecord

        self.extra = K8sRecord.from_stored(self.extra).changed(**fields).to_stored()
        return dict(self.extra)


class Kc:
    def __init__(self, log: str) -> None:
        self.log, self.calls = log, []

    def run(self, args: list[str], **_kw: Any) -> Completed:
        self.calls.append(args)
        return Completed(self.log, "", 0)


def tracked(extra: dict[str, Any]) -> Tracked:
    return Tracked({"id": "real-run-1", "submitted_at": "2026-12-05T07:00:00Z"},
                   {"namespace": "ns", "job_name": "real-run-1", "nodes": 2, "gpus": 1, **extra})


def test_a_restart_not_yet_explained_is_read_from_the_head_of_the_current_attempts_log() -> None:
    store, kc = Store(), Kc(f"kubectl-tao: rank 0 attempt 2\n{RESTART_1}\nkubectl-tao: rank 0 attempt 2 (...)\n")
    t = tracked(store.extra)
    view = observe_restarts(kc, store, t, [pod("j-0", 1), pod("j-1", 1)]).view()
    assert kc.calls == [["logs", "-n", "ns", "j-0", "-c", "tao", "--limit-bytes=8192"]]
    assert (view["restarts"], view["counted"], view["attempt"], view["max_restarts"]) == (1, 1, 2, 3)
    assert view["attempts"][0]["said"] == "attempt 1 ended: rank 1 exit 137 (SIGKILL); the gang restarted (counted)"
    # kept in the record: the next look needs no log read
    assert store.extra["attempts"] == view["attempts"]
    kc2 = Kc("")
    assert observe_restarts(kc2, store, tracked(store.extra), [pod("j-0", 1)]).view()["restarts"] == 1
    assert kc2.calls == []


def test_the_final_failure_brings_the_whole_history_in_its_termination_message() -> None:
    store, kc = Store(), Kc("")
    failed = {"terminated": {"exitCode": 3, "message": f"{RESTART_1}\n{FAIL_2}\n"}}
    view = observe_restarts(kc, store, tracked(store.extra), [pod("j-0", 1, state=failed), pod("j-1", 1)]).view()
    assert kc.calls == []
    assert [(a["attempt"], a["decision"]) for a in view["attempts"]] == [(1, "restart"), (2, "fail")]
    assert view["attempt"] == 2 and view["restarts"] == 1


def test_status_json_and_table_show_restarts_only_for_jobs_submitted_with_max_restarts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kubectl_tao.restarts import history

    with_restarts = Observation(tracked({"max_restarts": 2}), "RUNNING", "", "", None, {"ranks": []},
                                restarts=history.restart_view(2, history.parse_history([RESTART_1]), 1))
    plain = Observation(tracked({}), "RUNNING", "", "", None, {"ranks": []})
    data = with_restarts.to_dict()
    assert (data["restarts"], data["attempt"], data["max_restarts"]) == (1, 2, 2)
    assert data["attempts"][0]["reason"] == "SIGKILL"
    assert "restarts" not in plain.to_dict()
    present.show([plain], "table", False)
    assert "RESTARTS" not in capsys.readouterr().out
    present.show([with_restarts], "table", False, ranks=True)
    out = capsys.readouterr().out
    header, row = out.splitlines()[:2]
    assert header.split()[-1] == "RESTARTS" and row.split()[-1] == "1/2"
    assert "Restarts: 1 (1 of 2 counted); attempt 2" in out
    assert "  attempt 1 ended: rank 1 exit 137 (SIGKILL); the gang restarted (counted)" in out
    present.show([with_restarts], "json", False, ranks=True)
    assert json.loads(capsys.readouterr().out)["attempt"] == 2


def test_a_record_whose_job_is_gone_still_shows_its_restarts_from_the_record() -> None:
    from kubectl_tao.restarts import history

    ends = [end.to_dict() for end in history.parse_history([RESTART_1, FAIL_2])]
    obs = Observation(tracked({"max_restarts": 1, "attempts": ends}), "ERROR", "", "", "ERR_PROGRAM", None)
    data = obs.to_dict()
    assert (data["restarts"], data["attempt"]) == (1, 2)


def test_explain_names_why_each_attempt_ended() -> None:
    from kubectl_tao.commands.explain import _text
    from kubectl_tao.diagnosis.explain import explain_job
    from kubectl_tao.restarts import history

    ends = [end.to_dict() for end in history.parse_history([RESTART_1, FAIL_2])]
    t = Tracked({"id": "real-run-1", "terminal_state": "CANCELED", "platform": "kubernetes",
                 "transitions": [{"state": "CANCELED", "message": "canceled"}]},
                {"namespace": "ns", "job_name": "real-run-1", "max_restarts": 2, "attempts": ends})
    result = explain_job(Kc(""), t, server="")
    assert result.restarts == [
        "restart budget: 1 of 2 used; attempt 2",
        "attempt 1 ended: rank 1 exit 137 (SIGKILL); the gang restarted (counted)",
        "attempt 2 ended: rank 0 exit 3 (program error); the job failed",
    ]
    assert "restarts: attempt 1 ended: rank 1 exit 137 (SIGKILL)" in _text(result)
    assert result.to_dict()["restarts"] == result.restarts


def test_logs_attempt_says_where_an_earlier_attempts_output_is_and_refuses_attempts_that_never_were() -> None:
    from kubectl_tao.commands.logs import _check_attempt
    from kubectl_tao.core.errors import TaoError, UsageError

    t = tracked({"max_restarts": 2, "request": {"flags": {"mount_path": "/data", "pvc": "shared"}}})
    pods = [pod("j-0", 1), pod("j-1", 1)]  # attempt 2 now
    _check_attempt(t, pods, 2, False)  # the current attempt: the live log
    with pytest.raises(TaoError) as caught:
        _check_attempt(t, pods, None, True)
    assert caught.value.exit_code == 1
    assert caught.value.message.endswith(
        "each rank's output of it is on shared at /data/.kubectl-tao/restarts/real-run-1/attempt-1/rank-R.log"
    )
    for attempt in (0, 3):
        with pytest.raises(UsageError, match=r"has attempts 1\.\.2$"):
            _check_attempt(t, pods, attempt, False)
    with pytest.raises(UsageError, match=r"has attempts 1\.\.1 \(it is in its first\)"):
        _check_attempt(t, [pod("j-0", 0)], None, True)
    with pytest.raises(UsageError, match="was not submitted with --max-restarts"):
        _check_attempt(tracked({}), pods, 1, False)


def test_status_json_gives_null_for_a_record_field_the_record_does_not_have() -> None:
    data = Observation(tracked({}), "RUNNING", "", "", None, {"ranks": []}).to_dict()
    assert (data["image"], data["results_dir"], data["submitted_at"]) == (None, None, "2026-12-05T07:00:00Z")
