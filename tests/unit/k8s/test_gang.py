"""Gang scheduling (gang.py): the mechanism a multi-node job gets, how it asks for native gang scheduling, and
what status and explain read from its PodGroup. Pure logic, plus submit / fit / preflight through the fake
kubectl (a server with and without the scheduling.k8s.io/v1beta1 API)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl, answer_pvc_submit

from kubectl_tao.core.errors import ClusterUnreachableError, TaoError, UsageError
from kubectl_tao.diagnosis import jobstate as st
from kubectl_tao.k8s import gang
from kubectl_tao.k8s.kubectl import Completed

DISCOVERY = ("get", "--raw", "/apis/scheduling.k8s.io/v1beta1")
SERVED = {
    "kind": "APIResourceList",
    "groupVersion": "scheduling.k8s.io/v1beta1",
    "resources": [{"name": "podgroups"}, {"name": "podgroups/status"}, {"name": "workloads"}],
}


# ---------------------------------------------------------------- flags and choice


@pytest.mark.parametrize("mode", [None, "auto", "AUTO", "native", "off"])
def test_gang_modes_are_accepted(mode: str | None) -> None:
    assert gang.check_mode(mode, nodes=2, queue=None) == (mode or "auto").lower()


@pytest.mark.parametrize(
    ("mode", "nodes", "queue", "message"),
    [
        ("always", 2, None, "--gang 'always': use auto"),
        ("native", 1, None, "--gang native needs --nodes 2 or more"),
        ("native", 2, "team-a", "--gang native and --queue team-a: Kueue admits the Job whole"),
    ],
)
def test_bad_gang_flags_are_usage_errors(mode: str, nodes: int, queue: str | None, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        gang.check_mode(mode, nodes=nodes, queue=queue)


def test_the_mechanism_is_chosen_in_order_one_rank_queue_off_native_none() -> None:
    native = gang.Support(True, "served")
    absent = gang.Support(False, "scheduling.k8s.io/v1beta1 is not served")
    assert gang.choose(1, None, native).kind == gang.NONE
    assert gang.choose(2, "team-a", native).kind == gang.KUEUE
    assert "LocalQueue team-a" in gang.choose(2, "team-a", native).message
    off = gang.choose(2, None, native, "off")
    assert off.kind == gang.NONE and "--gang off" in off.message
    chosen = gang.choose(3, None, native)
    assert (chosen.kind, chosen.min_count) == (gang.NATIVE, 3)
    assert "binds all 3 ranks together or none" in chosen.message
    none = gang.choose(2, None, absent)
    assert none.kind == gang.NONE
    assert "capacity gate and the rendezvous barrier are the only guard" in none.message
    assert none.line().startswith("gang scheduling: none (this cluster does not gang-schedule Jobs")


def test_native_on_a_server_without_it_is_refused_and_client_dry_runs_trust_the_flag() -> None:
    with pytest.raises(UsageError, match="--gang native: this cluster does not gang-schedule Jobs: why; an admin"):
        gang.choose(2, None, gang.Support(False, "why"), "native")
    unchecked = gang.choose(2, None, None, "native")
    assert unchecked.kind == gang.NATIVE and unchecked.min_count == 2
    assert gang.choose(2, None, None).kind == gang.NONE


# ---------------------------------------------------------------- detection


def test_discovery_says_whether_podgroups_are_served() -> None:
    assert gang.served(Completed(json.dumps(SERVED), "", 0)) == (True, "")
    ok, why = gang.served(Completed(json.dumps({"resources": [{"name": "workloads"}]}), "", 0))
    assert not ok and "GenericWorkload" in why
    ok, why = gang.served(TaoError("Error from server (NotFound): the server could not find the requested resource"))
    assert (ok, why) == (False, "scheduling.k8s.io/v1beta1 is not served by this API server")
    ok, why = gang.served(TaoError("Error from server (Forbidden): forbidden"))
    assert not ok and why.startswith("cannot read the discovery of scheduling.k8s.io/v1beta1 (Error from server")
    assert gang.served(Completed("{", "", 0))[0] is False
    assert gang.served(None) == (False, "not checked")


def test_the_dry_run_tells_a_kept_field_from_a_dropped_one() -> None:
    assert gang.kept(Completed("gang", "", 0)).native
    dropped = gang.kept(Completed("", "", 0))
    assert not dropped.native and "WorkloadWithJob" in dropped.detail
    failed = gang.kept(TaoError("admission webhook denied the request"))
    assert not failed.native and "admission webhook denied" in failed.detail


def test_topology_support_is_a_podgroup_dry_run_after_the_gang_one() -> None:
    args, kwargs = gang.topology_dry_run_call("ns", 2, "example.com/rack")
    assert args[:2] == ["create", "--dry-run=server"] and args[-1].endswith("{{if .spec.schedulingConstraints}}"
                                                                            "topology{{end}}")
    group = json.loads(kwargs["stdin"])
    assert (group["apiVersion"], group["kind"]) == ("scheduling.k8s.io/v1beta1", "PodGroup")
    assert group["spec"]["schedulingConstraints"] == {"topology": [{"key": "example.com/rack"}]}

    class Answers:
        def __init__(self, *answers: Completed) -> None:
            self.answers, self.calls = list(answers), []

        def run(self, args: list[str], **kwargs: Any) -> Completed:
            self.calls.append(args)
            return self.answers.pop(0)

    served = Completed(json.dumps({"resources": [{"name": "podgroups"}]}), "", 0)
    kept_it = Answers(Completed("gang", "", 0), Completed("topology", "", 0))
    assert gang.detect(kept_it, "ns", served, 2, "example.com/rack").topology  # type: ignore[arg-type]
    dropped = Answers(Completed("gang", "", 0), Completed("", "", 0))
    support = gang.detect(dropped, "ns", served, 2, "example.com/rack")  # type: ignore[arg-type]
    assert support.native and not support.topology and len(dropped.calls) == 2
    no_topology_asked = Answers(Completed("gang", "", 0))
    assert not gang.detect(no_topology_asked, "ns", served, 2).topology  # type: ignore[arg-type]
    assert len(no_topology_asked.calls) == 1


def test_the_dry_run_job_asks_for_a_gang_and_is_never_created() -> None:
    args, kwargs = gang.dry_run_call("ns", 2)
    assert args[:2] == ["create", "--dry-run=server"] and "-n" in args and "ns" in args
    job = json.loads(kwargs["stdin"])
    assert job["spec"]["scheduling"] == {"schedulingPolicy": {"gang": {"minCount": 2}}}
    assert job["spec"]["parallelism"] == job["spec"]["completions"] == 2
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["suspend"] is True


class _Kc:
    def __init__(self, answer: Completed | TaoError) -> None:
        self.answer, self.calls = answer, []

    def run(self, args: list[str], **kwargs: Any) -> Completed:
        self.calls.append(args)
        if isinstance(self.answer, TaoError):
            raise self.answer
        return self.answer


def test_a_server_without_the_api_never_sees_the_field() -> None:
    kc = _Kc(Completed("gang", "", 0))
    support = gang.detect(kc, "ns", TaoError("NotFound"), 2)  # type: ignore[arg-type]
    assert not support.native and kc.calls == []
    support = gang.detect(kc, "ns", Completed(json.dumps(SERVED), "", 0), 2)  # type: ignore[arg-type]
    assert support.native and kc.calls[0][:2] == ["create", "--dry-run=server"]
    refused = gang.detect(_Kc(TaoError("forbidden")), "ns", Completed(json.dumps(SERVED), "", 0), 2)  # type: ignore[arg-type]
    assert not refused.native and "forbidden" in refused.detail


def test_an_unreachable_server_is_an_error_not_a_missing_feature() -> None:
    gone = ClusterUnreachableError("connection refused")
    with pytest.raises(ClusterUnreachableError):
        gang.detect(_Kc(Completed("", "", 0)), "ns", gone, 2)  # type: ignore[arg-type]
    with pytest.raises(ClusterUnreachableError):
        gang.detect(_Kc(gone), "ns", Completed(json.dumps(SERVED), "", 0), 2)  # type: ignore[arg-type]


# ---------------------------------------------------------------- the Job


def objects() -> list[dict[str, Any]]:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"completionMode": "Indexed", "completions": 2, "parallelism": 2}}
    return [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "j"}, "spec": {}}, job]


def test_native_adds_spec_scheduling_to_the_indexed_job_only() -> None:
    original = objects()
    out = gang.apply(original, gang.choose(2, None, gang.Support(True, "")))
    assert out[1]["spec"]["scheduling"] == {"schedulingPolicy": {"gang": {"minCount": 2}}}
    assert "scheduling" not in out[0]["spec"] and "scheduling" not in original[1]["spec"], "copies, not in place"
    for mechanism in (gang.choose(2, None, gang.Support(False, "")), gang.choose(2, "q", None)):
        assert all("scheduling" not in o["spec"] for o in gang.apply(objects(), mechanism))


# ---------------------------------------------------------------- the PodGroup


UID = "0f6c-job-uid"


def gang_job(min_count: int = 2) -> dict[str, Any]:
    return {"kind": "Job", "metadata": {"name": "dino-train-1", "uid": UID},
            "spec": {"parallelism": 2, "completions": 2, "scheduling": gang.scheduling_field(min_count)}}


def podgroup(conditions: list[dict[str, Any]] | None = None, owner: str = UID) -> dict[str, Any]:
    return {
        "kind": "PodGroup",
        "metadata": {"name": "dino-train-1-abc-pgt-0-xyz",
                     "ownerReferences": [{"kind": "Job", "name": "dino-train-1", "uid": owner, "controller": True},
                                         {"kind": "Workload", "name": "dino-train-1-abc", "uid": "w"}]},
        "spec": {"workloadRef": {"workloadName": "dino-train-1-abc", "templateName": "dino-train-1-pgt-0"},
                 "schedulingPolicy": {"gang": {"minCount": 2}}},
        "status": {"conditions": conditions or []},
    }


WORKLOAD = {
    "kind": "Workload",
    "metadata": {"name": "dino-train-1-abc",
                 "ownerReferences": [{"kind": "Job", "name": "dino-train-1", "uid": UID, "controller": True}]},
    "spec": {"controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "dino-train-1"}},
}
UNSCHEDULABLE = {
    "type": "PodGroupInitiallyScheduled", "status": "False", "reason": "Unschedulable",
    "message": "0/3 nodes are available: 2 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint.",
}


def groups(*items: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "List", "items": list(items)}


def test_a_job_without_a_gang_has_no_gang_view() -> None:
    job = gang_job()
    del job["spec"]["scheduling"]
    assert gang.view(job, groups(podgroup())) is None
    basic = {**gang_job(), "spec": {"scheduling": {"schedulingPolicy": {"basic": {}}}}}
    assert gang.view(basic, groups(podgroup())) is None


def test_a_waiting_gang_names_its_podgroup_workload_and_the_schedulers_reason() -> None:
    found = gang.view(gang_job(), groups(podgroup([UNSCHEDULABLE]), WORKLOAD))
    assert found is not None
    assert (found.podgroup, found.workload, found.policy, found.min_count, found.state) == (
        "dino-train-1-abc-pgt-0-xyz", "dino-train-1-abc", "gang", 2, "Waiting")
    assert found.summary == "waiting until 2 ranks fit together; no pod is bound meanwhile"
    assert found.message.startswith("0/3 nodes are available: 2 Insufficient nvidia.com/gpu")
    assert gang.describe(found.to_dict()).startswith("native gang, PodGroup dino-train-1-abc-pgt-0-xyz (minCount 2):")


@pytest.mark.parametrize(
    ("conditions", "state", "summary"),
    [
        ([], "Pending", "waiting for the scheduler to place 2 ranks together"),
        ([{"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled"}], "Scheduled",
         "all 2 ranks were placed together"),
        ([{"type": "PodGroupInitiallyScheduled", "status": "False", "reason": "SchedulerError", "message": "boom"}],
         "SchedulerError", "the scheduler could not place the gang: boom"),
        ([{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler", "message": "x"}],
         "Preempted", "the gang is being disrupted (PreemptionByScheduler): x"),
    ],
)
def test_podgroup_states(conditions: list[dict[str, Any]], state: str, summary: str) -> None:
    found = gang.view(gang_job(), groups(podgroup(conditions)))
    assert found is not None and (found.state, found.summary) == (state, summary)


def test_the_podgroup_is_found_by_owner_uid_or_by_the_pods_scheduling_group() -> None:
    other = podgroup(owner="another-uid")
    assert gang.view(gang_job(), groups(other)).state == "NoPodGroup"  # type: ignore[union-attr]
    pod = {"spec": {"schedulingGroup": {"podGroupName": "dino-train-1-abc-pgt-0-xyz"}}}
    assert gang.view(gang_job(), groups(other), [pod]).state == "Pending"  # type: ignore[union-attr]
    missing = gang.view(gang_job(), None)
    assert missing is not None and missing.state == "NoPodGroup" and "WorkloadWithJob" in missing.summary


def pending_status() -> st.JobStatus:
    pods = [{"metadata": {"name": f"p{i}", "annotations": {st.INDEX_KEY: str(i)}},
             "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                            "reason": "Unschedulable",
                                                            "message": UNSCHEDULABLE["message"]}]}}
            for i in range(2)]
    return st.job_status(gang_job(), pods)


def test_annotate_makes_a_waiting_gangs_reason_the_status_message() -> None:
    status = pending_status()
    assert status.reason == "Insufficient nvidia.com/gpu"
    gang.annotate(status, gang_job(), groups(podgroup([UNSCHEDULABLE])), [])
    assert status.state == "PENDING" and status.reason == "Insufficient nvidia.com/gpu"
    assert status.message == ("waiting until 2 ranks fit together; no pod is bound meanwhile (scheduler: "
                              f"{UNSCHEDULABLE['message']})")
    assert status.gang is not None and status.gang["state"] == "Waiting"
    nothing_yet = st.job_status(gang_job(), [])
    gang.annotate(nothing_yet, gang_job(), groups(podgroup()), [])
    assert (nothing_yet.reason, nothing_yet.message) == ("GangWaiting", "waiting for the scheduler to place 2 ranks "
                                                                        "together")


def test_explains_finding_for_a_waiting_gang_and_a_missing_podgroup() -> None:
    waiting = gang.finding(gang.view(gang_job(), groups(podgroup([UNSCHEDULABLE]))), gpus=8)  # type: ignore[arg-type]
    assert waiting.code == "gang-waiting" and "no GPU is held" in waiting.cause
    assert "PodGroupInitiallyScheduled=False (Unschedulable): 0/3 nodes" in waiting.evidence
    assert "`kubectl tao fit --gpus 8 --nodes 2`" in waiting.fix
    missing = gang.finding(gang.view(gang_job(), groups()))  # type: ignore[arg-type]
    assert missing.code == "gang-no-podgroup" and "WorkloadWithJob" in missing.fix
    scheduled = [{"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled"}]
    assert gang.finding(gang.view(gang_job(), groups(podgroup(scheduled)))) is None  # type: ignore[arg-type]


# ---------------------------------------------------------------- submit, fit, preflight


def answers(fake: FakeKubectl, *, served: bool, kept: bool = True) -> None:
    if served:
        fake.on(*DISCOVERY, data=SERVED)
        fake.on("create", "--dry-run=server", "-f", "-", "-n", "tao-jobs", "-o", gang._DRY_RUN_TEMPLATE,
                stdout="gang" if kept else "")
    else:
        fake.on(*DISCOVERY, stderr="Error from server (NotFound): the server could not find the requested resource",
                rc=1)
    answer_pvc_submit(fake)


SUBMIT = ["submit", "--image", "busybox", "--command", "true", "--gpus", "8", "--nodes", "2", "--pvc", "data",
          "--dry-run=server", "-o", "json"]


def submitted(cli: Any, fake: FakeKubectl, argv: list[str], **served: bool) -> tuple[str, str]:
    """ARGV submitted to a server answering as answers(SERVED) says: it succeeds; stdout and stderr."""
    answers(fake, **served)
    code, out, err = cli(*argv)
    assert code == 0, err
    return out, err


def the_job(out: str) -> dict[str, Any]:
    [job] = [item for item in json.loads(out)["items"] if item["kind"] == "Job"]
    return job


def test_submit_asks_for_native_gang_where_the_server_has_it(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path
) -> None:
    out, err = submitted(cli, fake_kubectl, [*SUBMIT], served=True)
    assert the_job(out)["spec"]["scheduling"] == {"schedulingPolicy": {"gang": {"minCount": 2}}}
    assert "gang scheduling: native (the scheduler binds all 2 ranks together or none" in err


def test_submit_on_an_older_server_sends_no_field_and_says_none(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path
) -> None:
    out, err = submitted(cli, fake_kubectl, [*SUBMIT], served=False)
    assert "scheduling" not in the_job(out)["spec"]
    assert "gang scheduling: none (this cluster does not gang-schedule Jobs" in err
    assert not any("--dry-run=server" in argv and "kubectl-tao-gang-check" in (call.stdin or "")
                   for argv, call in zip(fake_kubectl.argvs(), fake_kubectl.calls, strict=True))


def test_submit_where_the_api_server_drops_the_field_says_none(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path
) -> None:
    out, err = submitted(cli, fake_kubectl, [*SUBMIT], served=True, kept=False)
    assert "scheduling" not in the_job(out)["spec"]
    assert "WorkloadWithJob feature gate is off" in err


def test_submit_gang_off_and_queue_skip_detection(cli: Any, fake_kubectl: FakeKubectl, tao_env: Path) -> None:
    out, err = submitted(cli, fake_kubectl, [*SUBMIT, "--gang", "off"], served=True)
    assert "scheduling" not in the_job(out)["spec"] and "gang scheduling: none (--gang off" in err
    assert not any(argv[-len(DISCOVERY):] == list(DISCOVERY) for argv in fake_kubectl.argvs())


def test_submit_gang_native_on_a_server_without_it_exits_2_with_nothing_created(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path
) -> None:
    answers(fake_kubectl, served=False)
    code, out, err = cli(*SUBMIT[:-3], "--gang", "native")
    assert code == 2 and out == ""
    [line] = err.strip().splitlines()[-1:]
    assert line.startswith("error: --gang native: this cluster does not gang-schedule Jobs")
    assert "--feature-gates=GenericWorkload=true,WorkloadWithJob=true" in line
    assert not (tao_env / "state" / "jobs").exists() or not list((tao_env / "state" / "jobs").glob("*.json"))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--gang", "sometimes"], "error: --gang 'sometimes': use auto"),
        (["--gang", "native", "--queue", "team-a"], "error: --gang native and --queue team-a"),
    ],
)
def test_bad_gang_flags_exit_2_before_any_call(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path, flags: list[str], message: str
) -> None:
    code, out, err = cli(*SUBMIT, *flags)
    assert code == 2 and out == "" and err.strip().splitlines()[-1].startswith(message)
    assert fake_kubectl.calls == []


def test_render_touches_no_cluster_and_adds_the_field_only_for_gang_native(cli: Any, tao_env: Path) -> None:
    render = ["render", "--image", "busybox", "--command", "true", "--gpus", "8", "--nodes", "2", "--pvc", "data",
              "-o", "json"]
    code, out, _ = cli(*render)
    assert code == 0 and "scheduling" not in the_job(out)["spec"]
    code, out, _ = cli(*render, "--gang", "native")
    assert code == 0 and the_job(out)["spec"]["scheduling"]["schedulingPolicy"]["gang"]["minCount"] == 2


def test_fit_and_preflight_name_the_mechanism(cli: Any, fake_kubectl: FakeKubectl, tao_env: Path) -> None:
    answers(fake_kubectl, served=True)
    fake_kubectl.on("get", "localqueues.kueue.x-k8s.io", stderr="error: the server doesn't have a resource type "
                    '"localqueues"', rc=1)
    code, out, err = cli("fit", "--gpus", "8", "--nodes", "2", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["gang"]["kind"] == "native"
    code, out, err = cli("fit", "--gpus", "8", "--nodes", "2")
    assert "gang scheduling: native" in err
    code, out, err = cli("preflight", "--gpus", "8", "--nodes", "2", "-o", "json")
    [check] = [c for c in json.loads(out)["checks"] if c["check"] == "gang"]
    assert check["status"] == "OK" and check["message"].startswith("native: ")


def test_preflight_warns_when_nothing_gangs_and_names_kueue_with_a_queue(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path
) -> None:
    answers(fake_kubectl, served=False)
    _, out, _ = cli("preflight", "--gpus", "8", "--nodes", "2", "-o", "json")
    [check] = [c for c in json.loads(out)["checks"] if c["check"] == "gang"]
    assert check["status"] == "WARN" and check["message"].startswith("none: ")
    assert "--queue" in check["fix"] and "WorkloadWithJob" in check["fix"]
    _, out, _ = cli("preflight", "--gpus", "8", "--nodes", "2", "--queue", "team-a", "-o", "json")
    [check] = [c for c in json.loads(out)["checks"] if c["check"] == "gang"]
    assert check["status"] == "OK" and check["message"].startswith("kueue: ")


def test_the_record_keeps_the_mechanism_and_its_schema_knows_the_values() -> None:
    from kubectl_tao.core.schemas import is_valid

    base = {"schema_version": 1, "id": "dino-train-1a2b3c"}
    for kind in (gang.NATIVE, gang.KUEUE, gang.NONE, None):
        assert is_valid({**base, "gang": kind}, "job-record-k8s")
    assert not is_valid({**base, "gang": "volcano"}, "job-record-k8s")
