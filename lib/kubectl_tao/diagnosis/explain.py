"""`kubectl tao explain JOB`: fetch what diagnose.explain reads, in as few kubectl calls as possible.

Round trip 1 (two processes at once, three for a job submitted with native gang scheduling): the Job and its
pods (one call, by label, as tracking.fetch does), the namespace's events (filtered here to the Job and its pods)
and the namespace's PodGroups and Workloads (gang.py); `explain` prestarts the first two from the raw record
(jobs/early_read.py). Round trip 2, when the scheduler has refused a pod: nodes and pods of every namespace, and
the DRA devices and claims (two processes at once), so that "no GPUs anywhere" (the GPU Operator is missing) is
told from "GPUs busy"; when the job failed: the nodes its pods ran on and, unless they rode in round 1 or the
record kept their cause, the ranks' logs (two processes at once). A Job that is gone is explained from the
history the record captured at its end.
Nothing here writes to the record: explain only reads.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from kubectl_tao.core import contract
from kubectl_tao.core.errors import TaoError
from kubectl_tao.core.valueclass import Factory, Value, record
from kubectl_tao.jobs.track import Tracked, check_pin, check_uid, diagnosis_of, reads_gang
from kubectl_tao.k8s.kubectl import Batch, Completed, Kubectl

if TYPE_CHECKING:
    from kubectl_tao.diagnosis import jobstate as st
    from kubectl_tao.diagnosis.diagnose import Finding

# What reads the answers (diagnosis/diagnose.py, causes.py and its table of signs, jobstate, kueue, k8s/gang.py) is
# imported inside the functions, after explain's first round of kubectl calls has started: the import then
# overlaps kubectl instead of delaying it.


@record
class Explanation(Value):
    id: str
    namespace: str | None
    job: str | None
    state: str
    reason: str
    message: str
    source: str  # "cluster" (live objects) or "record" (the Job is gone or was never created)
    findings: list[Finding] = Factory(list)
    notes: list[str] = Factory(list)
    gang: dict[str, Any] | None = None  # gang.GangView.to_dict() of a native gang job
    restarts: list[str] = Factory(list)  # --max-restarts: why each attempt ended (restarts/history.History.said)
    diagnosis: dict[str, Any] | None = None  # diagnosis/causes.Diagnosis.to_dict(): what the ranks' output showed

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "namespace": self.namespace,
            "job": self.job,
            "state": self.state,
            "reason": self.reason,
            "message": self.message,
            "source": self.source,
            "findings": [f.to_dict() for f in self.findings],
            "notes": list(self.notes),
            "gang": self.gang,
            "restarts": list(self.restarts),
            "diagnosis": self.diagnosis,
        }


def redacted(e: Explanation) -> Explanation:
    """``e`` with every text that may quote the cluster (events, conditions, container messages, the
    record's last message, the attempts' ends) through the redactor: explain prints them as evidence. The
    diagnosis was derived from log lines redacted as they were read (diagnosis/ranklogs.py)."""
    from kubectl_tao.core.redact import redact_cluster_text as redact_text
    from kubectl_tao.diagnosis.diagnose import Finding

    findings = [
        Finding(redact_text(f.cause), redact_text(f.evidence), redact_text(f.fix), f.code) for f in e.findings
    ]
    gang = {k: redact_text(v) if isinstance(v, str) else v for k, v in e.gang.items()} if e.gang else None
    return Explanation(
        e.id, e.namespace, e.job, e.state, redact_text(e.reason), redact_text(e.message), e.source, findings,
        [redact_text(note) for note in e.notes], gang, [redact_text(line) for line in e.restarts], e.diagnosis,
    )


def _last_message(tracked: Tracked) -> str:
    return tracked.job.last_message


def _loads(result: Completed) -> Any:
    try:
        return json.loads(result.stdout) if result.stdout.strip() else {}
    except json.JSONDecodeError:
        raise TaoError("kubectl get returned output that is not JSON") from None


def from_history(tracked: Tracked) -> Explanation:
    """Explain a job whose Job object is gone (or was never created) from what its record kept."""
    from kubectl_tao.diagnosis import jobstate as st
    from kubectl_tao.diagnosis.causes import names_a_cause
    from kubectl_tao.diagnosis.diagnose import Finding, explain

    rid, ns, name = tracked.id, tracked.namespace, tracked.job_name
    state = tracked.record_state
    last = _last_message(tracked)
    if state == "CANCELED":
        finding = Finding(
            "the job was canceled",
            last or "record state CANCELED",
            f"nothing to repair; to run it again submit it anew (the record keeps its history: "
            f"`kubectl tao record show {rid}`)",
            "canceled",
        )
        return Explanation(rid, ns, name, state, "", last, "record", [finding])
    if not name:
        finding = Finding(
            "the job was never launched (the record names no Kubernetes Job)",
            last or "record state " + state,
            "read the reason above; fix it and submit again (a record follows one launch)",
            "not-launched",
        )
        return Explanation(rid, ns, name, state, "", last, "record", [finding])
    history = tracked.k8s.history
    if history is not None and history.state:
        status = st.JobStatus(
            state=history.state,
            reason=history.reason or "",
            message=history.message or "",
            err_class=history.err_class,
            total=max(len(history.ranks), 1),
            first_failed_rank=history.first_failed_rank,
        )
        note = f"the Job is gone; explained from the history the record captured at {history.captured_at}"
    elif tracked.terminal:
        status = st.JobStatus(state=state, reason="", message=last, err_class=tracked.job.err_class)
        note = "the Job is gone and the record kept no history; explained from the record's last state"
    else:
        status = st.job_status(None, [])
        note = ""
    cause = diagnosis_of(tracked) if status.state == st.ERROR else None
    found = explain(status, None, [], job=rid, namespace=ns, job_name=name, diagnosis=cause)
    reason = str(cause["cause"]) if cause and names_a_cause(cause) else status.reason
    result = Explanation(rid, ns, name, status.state, reason, status.message, "record", found, diagnosis=cause)
    if note:
        result.notes.append(note)
    return result


def _nodes_ran_on(kc: Kubectl, pods: list[Any], notes: list[str]) -> Any:
    """The nodes a failed job's pods ran on (one `get nodes`), for their GPU health marks; None when none or
    they cannot be read (a note)."""
    from kubectl_tao.gates import capacity, gpufit

    names = sorted({str((p.get("spec") or {}).get("nodeName")) for p in pods if (p.get("spec") or {}).get("nodeName")})
    if not names:
        return None
    try:
        listed = kc.json(["get", "nodes", *names, "--ignore-not-found"], namespaced=False)
        signals = capacity.health_signals()
    except TaoError as exc:
        notes.append(f"nodes not read ({exc.message}); cannot tell whether a rank's GPUs failed")
        return None
    items = listed.get("items", [listed] if listed.get("kind") == "Node" else []) if isinstance(listed, dict) else []
    from kubectl_tao.gates import gatelists

    # json.loads: for the few nodes a job ran on, importing the typed decoders would cost more than they save
    reduced = gatelists.reduce(json.dumps({"items": items}), "nodes", fast=False, signals=signals).items
    return gpufit.node_gpus({"items": reduced}, {"items": []})


def _needs_nodes(status: st.JobStatus, events: list[Any]) -> bool:
    from kubectl_tao.diagnosis import jobstate as st

    if status.state not in (st.PENDING, st.RUNNING):
        return False
    if status.reason in ("Unschedulable", contract.INSUFFICIENT_GPU):
        return True
    return any(st.event_fields(event)[2] == "FailedScheduling" for event in events)


def _kueue_view(kc: Kubectl, ns: str, job: dict[str, Any], notes: list[str]) -> tuple[Any, Any]:
    """Round trip 2 for a Job Kueue holds suspended (three reads at once): its Workload, its LocalQueue and
    the ClusterQueues. Returns (kueue.Admission | None, quota.QueueQuota | None); what cannot be read
    becomes a note (a namespace user may not read ClusterQueues, which are cluster-scoped)."""
    from kubectl_tao.diagnosis import kueue
    from kubectl_tao.gates.queues import CLUSTERQUEUES, LOCALQUEUES
    from kubectl_tao.gates.quota import queue_quota

    queue = str(kueue.queue_of(job))
    uid = str((job.get("metadata") or {}).get("uid") or "")
    reads = kc.run_many(
        {
            "workloads": ([*kueue.workload_read(ns, uid), "-o", "json"], {"namespaced": False}),
            "localqueue": (["get", LOCALQUEUES, queue, "-n", ns, "-o", "json"], {"namespaced": False}),
            "clusterqueues": (["get", CLUSTERQUEUES, "-o", "json"], {"namespaced": False}),
        }
    )
    answers: dict[str, Any] = {}
    for key, answer in reads.items():
        if isinstance(answer, TaoError):
            if key != "localqueue" or "not found" not in answer.message.lower():
                notes.append(f"Kueue's {key} not read ({answer.message})")
            answers[key] = None
        else:
            assert isinstance(answer, Completed)
            answers[key] = _loads(answer)
    admission = kueue.admission(job, answers["workloads"]) if answers["workloads"] is not None else None
    lq = answers["localqueue"]
    cq_name = ((lq or {}).get("spec") or {}).get("clusterQueue")
    listed = (answers["clusterqueues"] or {}).get("items") or []
    cqs = [c for c in listed if (c.get("metadata") or {}).get("name") == cq_name]
    return admission, (queue_quota(lq, cqs[0]) if lq and cqs else None)


def explain_job(kc: Kubectl, tracked: Tracked, *, server: str, force: bool = False) -> Explanation:
    """Findings for a record's Job: live when the Job exists, else from the record; redacted. A job submitted
    with --max-restarts also says why each of its attempts ended."""
    found = _explain_job(kc, tracked, server=server, force=force)
    if tracked.k8s.max_restarts:
        found.restarts = _restarts_said(kc, tracked, found)
    return redacted(found)


def _restarts_said(kc: Kubectl, tracked: Tracked, found: Explanation) -> list[str]:
    from kubectl_tao.jobs.track import observe_restarts
    from kubectl_tao.restarts import history

    if found.source == "cluster" and tracked.namespace and tracked.job_name:
        result = kc.run(["get", "pods", "-n", tracked.namespace, "-l", tracked.pod_selector, "-o", "json"],
                        namespaced=False, check=False, best_effort=True)
        try:
            pods = json.loads(result.stdout).get("items") or [] if result.stdout.strip() else []
        except json.JSONDecodeError:
            pods = []
        view = observe_restarts(kc, None, tracked, pods)
    else:
        view = history.of_job(tracked.k8s.max_restarts, tracked.k8s.attempts) or history.History(0, ())
    return view.said()


def _explain_job(kc: Kubectl, tracked: Tracked, *, server: str, force: bool = False) -> Explanation:
    if not tracked.on_kubernetes:
        result = from_history(tracked)
        result.notes.append(f"platform {tracked.platform or '?'}: explained from the record only")
        return result
    check_pin(tracked, server, force=force)
    ns, name = tracked.namespace, tracked.job_name
    if tracked.record_state == "CANCELED" or not ns or not name:
        return from_history(tracked)
    # The events and (for a Job kubectl-tao launched) the Job with its pods: the reads jobs/early_read.py prestarts
    calls = {"events": contract.events_read(ns)}
    if tracked.launched_here:
        calls["objects"] = contract.job_objects_read(ns, name)
    else:  # a Job launched another way: by its name, its pods by job-name=
        calls["objects"] = ["get", "job", name, "-n", ns, "--ignore-not-found", "-o", "json"]
        calls["pods"] = ["get", "pods", "-n", ns, "-l", tracked.pod_selector, "-o", "json"]
    requests = {key: (args, {"namespaced": False}) for key, args in calls.items()}
    if reads_gang(tracked):
        from kubectl_tao.k8s.gang import groups_call

        requests["groups"] = groups_call(ns)
    if tracked.record_state == "ERROR" and diagnosis_of(tracked) is None:
        requests["logs"] = _logs_call(tracked)  # known failed: its logs ride in the first round
    first_round = kc.start_many(requests)
    from kubectl_tao.diagnosis import jobstate as st
    from kubectl_tao.diagnosis import kueue
    from kubectl_tao.diagnosis.causes import names_a_cause
    from kubectl_tao.diagnosis.diagnose import explain
    from kubectl_tao.gates import capacity, gpuinventory
    from kubectl_tao.k8s import gang

    results = first_round.results()
    items: list[Any] = []
    for key in ("objects", "pods"):
        answer = results.get(key)
        if isinstance(answer, TaoError):
            raise answer
        if isinstance(answer, Completed):
            data = _loads(answer)
            items += data.get("items") or ([data] if data.get("kind") else [])
    jobs = [i for i in items if i.get("kind") == "Job" and (i.get("metadata") or {}).get("name") == name]
    pods = [i for i in items if i.get("kind") == "Pod"]
    job = jobs[0] if jobs else None
    check_uid(tracked, job, force=force)
    if job is None:
        return from_history(tracked)
    notes: list[str] = []
    events_result = results["events"]
    events: list[Any] = []
    if isinstance(events_result, TaoError):
        notes.append(f"events not read ({events_result.message}); findings come from the Job and pods only")
    else:
        assert isinstance(events_result, Completed)
        pod_names = [str((p.get("metadata") or {}).get("name")) for p in pods]
        events = st.job_events(_loads(events_result), name, pod_names)
    status = st.job_status(job, pods, events)
    queue_quota = None
    if status.reason == "Suspended" and kueue.queue_of(job):
        admission, queue_quota = _kueue_view(kc, ns, job, notes)
        status = st.job_status(job, pods, events, admission=admission)
    groups = results.get("groups")
    gang_view = gang.view(job, _loads(groups), pods) if isinstance(groups, Completed) else None
    if gang_view is not None:
        gang.annotate(status, job, _loads(groups), pods)
    node_list = None
    hint = None
    if _needs_nodes(status, events):
        reads = kc.run_many({**capacity.calls(), "dra": (gpuinventory.DRA_READ, {"namespaced": False})})
        try:
            seen = capacity.read(reads)
        except TaoError as exc:
            notes.append(f"nodes not read ({exc.message}); cannot tell a missing GPU Operator from busy GPUs")
        else:
            dra, dra_note = gpuinventory.read_dra(reads["dra"])
            if dra_note:
                notes.append(dra_note)
            node_list = gpuinventory.fit_nodes(seen.nodes, seen.pods, dra)
            hint = gpuinventory.no_gpu_hint(dra)
    elif status.state == st.ERROR:
        reading = None if "logs" in results else _start_logs(kc, tracked, status)
        node_list = _nodes_ran_on(kc, pods, notes)  # while the logs, when they are read now, come in
        if reading is not None:
            results = {**results, "logs": reading.result("logs")}
    cause = _log_diagnosis(kc, tracked, status, results.get("logs"), notes, pods)
    found = explain(
        status, events, pods, nodes=node_list, job=tracked.id, namespace=ns, job_name=name, no_gpu_hint=hint,
        queue_quota=queue_quota, diagnosis=cause,
    )
    gang_finding = gang.finding(gang_view, gpus=tracked.k8s.gpus) if gang_view else None
    if gang_finding is not None and status.state == st.PENDING:
        found.insert(0, gang_finding)
    reason = str(cause["cause"]) if cause and names_a_cause(cause) else status.reason
    return Explanation(
        tracked.id, ns, name, status.state, reason, status.message, "cluster", found, notes,
        gang_view.to_dict() if gang_view else None, diagnosis=cause,
    )


def _start_logs(kc: Kubectl, tracked: Tracked, status: st.JobStatus) -> Batch | None:
    """The ranks' logs of a job the first round found failed, started now when _log_diagnosis will read them (no
    cause kept in the record), so that they come in beside the nodes' read; None: no read."""
    from kubectl_tao.diagnosis.ranklogs import OVERRIDDEN_REASONS

    if status.reason not in OVERRIDDEN_REASONS or diagnosis_of(tracked) is not None:
        return None
    return kc.start_many({"logs": _logs_call(tracked)})


def _logs_call(tracked: Tracked) -> tuple[list[str], dict[str, Any]]:
    from kubectl_tao.diagnosis import ranklogs

    ranks = int(tracked.k8s.nodes or 1)
    container = "tao" if tracked.launched_here else None
    return ranklogs.logs_call(tracked.namespace or "default", tracked.pod_selector, ranks + 4, container=container)


def _log_diagnosis(
    kc: Kubectl, tracked: Tracked, status: st.JobStatus, answer: Any, notes: list[str], pods: list[Any]
) -> dict[str, Any] | None:
    """What the ranks printed, for a program that failed: the record's (captured at the end), else read now
    (already read in the first round when the record knew the job had failed)."""
    from kubectl_tao.diagnosis import jobstate as st
    from kubectl_tao.diagnosis import ranklogs

    if status.state != st.ERROR or status.reason not in ranklogs.OVERRIDDEN_REASONS:
        return None
    kept = diagnosis_of(tracked)
    if kept is not None:
        return kept
    ranks = int(tracked.k8s.nodes or 1)
    read = ranklogs.read_logs(
        kc, tracked.namespace or "default", tracked.pod_selector, ranks + 4,
        container="tao" if tracked.launched_here else None, names=ranklogs.pod_names(pods), answer=answer,
    )
    notes.extend(read.notes)
    per_pod = ranklogs.ranks_per_pod(tracked.k8s.flags, tracked.k8s.nodes, tracked.k8s.gpus)
    found = ranklogs.diagnose(read, status.to_dict(), gpus=tracked.k8s.gpus, per_pod=per_pod)
    if found is not None:
        found = ranklogs.with_dumps(found, pods)
    if found is None and not read.notes:
        notes.append("the failed ranks printed nothing")
    return found.to_dict() if found is not None else None
