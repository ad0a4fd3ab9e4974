"""Following a submitted job: find it from its record, refuse the wrong cluster or object, read its live
state in one kubectl call, write state changes back to the record, and capture its history at the end.

The record is the source of truth once the Job is gone (ttlSecondsAfterFinished deletes it and its logs),
so at the terminal transition each rank's pod, node, exit code, reason and last log lines are copied into
the record's sibling file before the record is marked terminal.
"""

from __future__ import annotations

import json
from typing import Any

from kubectl_tao.core import contract
from kubectl_tao.core.errors import GateError, TaoError
from kubectl_tao.core.valueclass import Factory, Value, record
from kubectl_tao.k8s.kubectl import Kubectl
from kubectl_tao.restarts import history
from kubectl_tao.store.jobrecord import CapturedHistory, JobRecord, K8sRecord, RankCapture
from kubectl_tao.store.records import INCOMPLETE_SUBMIT_PHASES, ROLLING_BACK

LOG_TAIL_LINES = 50
DEFAULT_TTL_SECONDS = 3600


@record
class Tracked(Value):
    """A record with what kubectl-tao knows about its Kubernetes objects. `record` and `extra` are the two
    files as the store last read or wrote them; `job` and `k8s` are the same, typed (store/jobrecord.py), and
    are what every reader uses. A write goes through the store, typed (`update_k8s`, `merge_k8s`, `mark`)."""

    record: dict[str, Any]
    extra: dict[str, Any]

    def _typed(self, key: str, stored: dict[str, Any], kind: Any) -> Any:
        """STORED read as KIND once, and again only after the dict it came from is replaced."""
        cached = self.__dict__.get(key)
        if cached is None or cached[0] is not stored:
            cached = (stored, kind.from_stored(stored))
            self.__dict__[key] = cached
        return cached[1]

    @property
    def job(self) -> JobRecord:
        """The record, typed (read again after `record` is replaced)."""
        return self._typed("_job", self.record, JobRecord)

    @property
    def k8s(self) -> K8sRecord:
        """kubectl-tao's additions, typed (read again after `extra` is replaced)."""
        return self._typed("_k8s", self.extra, K8sRecord)

    @property
    def id(self) -> str:
        return self.job.id

    @property
    def namespace(self) -> str | None:
        return self.k8s.namespace or self._ref_part(0)

    @property
    def job_name(self) -> str | None:
        return self.k8s.job_name or self._ref_part(1)

    def _ref_part(self, part: int) -> str | None:
        """PART (0 namespace, 1 name) of the record's backend_ref NAMESPACE/NAME."""
        ref = self.job.backend_ref or ""
        return ref.split("/", 1)[part] if "/" in ref else None

    @property
    def platform(self) -> str:
        return self.job.platform

    @property
    def on_kubernetes(self) -> bool:
        """Records of other platforms (slurm, brev, ...) share the store; kubectl-tao never touches them."""
        return self.platform in contract.KUBERNETES_PLATFORMS

    @property
    def launched_here(self) -> bool:
        """True when kubectl-tao's submit created the Job (its objects carry the tao-job label); False for a
        Job launched the reference's way (the record tool plus a Job made by hand or by another tool)."""
        return bool(self.k8s.job_name)

    @property
    def pod_selector(self) -> str:
        return contract.pod_selector(str(self.job_name), launched_here=self.launched_here)

    @property
    def record_state(self) -> str:
        return self.job.state

    @property
    def terminal(self) -> bool:
        return self.job.terminal


@record
class Observation(Value):
    """One look at a tracked job: what to show, and what the live Job said."""

    tracked: Tracked
    state: str  # what to show: live state, or the record's terminal / UNKNOWN state
    reason: str
    message: str
    err_class: str | None
    live: dict[str, Any] | None  # JobStatus.to_dict() when the Job was found
    notes: list[str] = Factory(list)
    job_ttl: int | None = None  # the live Job's ttlSecondsAfterFinished
    restarts: dict[str, Any] | None = None  # --max-restarts: restarts/history.History.view
    progress: Any = None  # progress.model.Progress read now (jobs/liveprogress.py), else the record's
    progress_where: str | None = None  # where it was read

    def shown_progress(self) -> Any:
        """The progress to show: read now, else what the record keeps (None when nothing is known)."""
        if self.progress is not None:
            return self.progress
        from kubectl_tao.progress.model import from_stored

        return from_stored(self.tracked.k8s.progress)[0]

    def restart_view(self) -> dict[str, Any] | None:
        """Restarts, attempt and why each attempt ended, for a job submitted with --max-restarts (else None)."""
        if self.restarts is not None:
            return self.restarts
        found = history.of_job(self.tracked.k8s.max_restarts, self.tracked.k8s.attempts)
        return None if found is None else found.view()

    def to_dict(self) -> dict[str, Any]:
        job, k8s = self.tracked.job, self.tracked.k8s
        return {
            "id": self.tracked.id,
            "state": self.state,
            "reason": self.reason,
            "message": self.message,
            "err_class": self.err_class,
            "namespace": self.tracked.namespace,
            "job": self.tracked.job_name,
            "backend_ref": job.backend_ref,
            "image": job.image or None,  # null when the record has none, as stored
            "gpus": k8s.gpus,
            "nodes": k8s.nodes,
            "submitted_at": job.submitted_at or None,  # null when the record has none, as stored
            "results_dir": job.results_dir or None,  # null when the record has none, as stored
            "live": self.live,
            "history": _stored(k8s.history),
            "notes": self.notes,
            **self._restart_fields(),
            **self._progress_field(),
        }

    def _progress_field(self) -> dict[str, Any]:
        progress = self.shown_progress()
        return {"progress": progress.as_json()} if progress is not None and progress.known() else {}

    def _restart_fields(self) -> dict[str, Any]:
        view = self.restart_view()
        if view is None:
            return {}
        return {"restarts": view["restarts"], "attempt": view["attempt"], "attempts": view["attempts"],
                "max_restarts": view["max_restarts"]}


def load(store: Any, record_id: str) -> Tracked:
    """The record and its additions; TaoError (exit 1) for a Kubernetes record that names its Job in a way no
    kubectl call may carry (lookup_problem)."""
    record = store.show(record_id)
    extra = store.get_extra(record_id) or {}
    tracked = Tracked(record, extra)
    problem = lookup_problem(tracked)
    if problem is not None:
        raise TaoError(f"job record {record_id}: {problem}")
    return tracked


def lookup_problem(tracked: Tracked) -> str | None:
    """Why a Kubernetes record's Job must not be looked up: its backend_ref is not NAMESPACE/NAME, or the
    namespace or Job name kubectl-tao stored is not a Kubernetes name (another tool's record, a hand-edited
    file). Checked before any kubectl call; the bad value is never quoted."""
    if not tracked.on_kubernetes:
        return None
    from kubectl_tao.store.recordfields import is_kubernetes_ref, is_namespace, is_object_name

    ref, k8s = tracked.job.backend_ref, tracked.k8s
    fix = "kubectl-tao does not look it up; open a new record for the Job"
    if ref and not is_kubernetes_ref(ref):
        return f"its backend_ref is not NAMESPACE/NAME (a DNS-1123 label, '/', a DNS-1123 subdomain); {fix}"
    if "namespace" in k8s.other or (k8s.namespace and not is_namespace(k8s.namespace)):
        return f"its kubectl-tao data names a namespace that is not a DNS-1123 label; {fix}"
    if "job_name" in k8s.other or (k8s.job_name and not is_object_name(k8s.job_name)):
        return f"its kubectl-tao data names a Job that is not a DNS-1123 subdomain; {fix}"
    return None


def check_pin(tracked: Tracked, server: str, *, force: bool = False) -> None:
    """Refuse to act for a record on a cluster other than the one it was submitted to."""
    pinned = tracked.k8s.api_server
    if force or not pinned or not server or pinned == server:
        return
    raise GateError(
        f"job {tracked.id} was submitted to {pinned} (context {tracked.k8s.context or '?'}), but kubectl "
        f"now points at {server}; switch with --context/--kubeconfig, or pass --force to look anyway"
    )


def refuse_other_platform(tracked: Tracked, verb: str) -> None:
    if not tracked.on_kubernetes:
        raise GateError(
            f"job {tracked.id} runs on platform {tracked.platform or '?'} (backend_ref "
            f"{tracked.job.backend_ref}); kubectl-tao does not {verb} it: use that platform's own tools"
        )


def _stored(part: Any) -> Any:
    """A typed part as the record stores it (None stays None)."""
    return None if part is None else part.to_stored()


class Fetching:
    """The live read of a tracked job, started at once: the Job and its pods in one kubectl call by the tao-job
    label for a Job kubectl-tao launched (plus the namespace's PodGroups and Workloads for a native gang); for
    one launched another way, the Job by its backend_ref name and its pods by job-name= (two calls). `status`
    starts it before importing what reads the answer, so kubectl and that import overlap."""

    def __init__(self, kc: Kubectl, tracked: Tracked) -> None:
        self.tracked = tracked
        self.calls: dict[str, Any] = {}
        ns, name = tracked.namespace, tracked.job_name
        if not ns or not name:
            return
        problem = lookup_problem(tracked)
        if problem is not None:
            raise TaoError(f"job record {tracked.id}: {problem}")
        if not tracked.launched_here:
            self._start(kc, "job", ["get", "job", name, "-n", ns, "--ignore-not-found", "-o", "json"])
            self._start(kc, "pods", ["get", "pods", "-n", ns, "-l", tracked.pod_selector, "-o", "json"])
            return
        self._start(kc, "objects", contract.job_objects_read(ns, name))
        if reads_gang(tracked):
            from kubectl_tao.k8s.gang import groups_call

            args, kwargs = groups_call(ns)
            self._start(kc, "groups", args, **kwargs)

    def _start(self, kc: Kubectl, key: str, args: list[str], **kwargs: Any) -> None:
        try:
            self.calls[key] = kc.start(args, **{"namespaced": False, **kwargs})
        except TaoError as exc:
            self.calls[key] = exc

    def result(self) -> tuple[dict[str, Any] | None, list[dict[str, Any]], Any]:
        """The Job (None when gone), its pods, and the PodGroups/Workloads List (None when not read or not
        readable); raises the first failed read of the Job or pods once every process has ended."""
        answers: dict[str, Any] = {}
        for key, call in self.calls.items():
            try:
                answers[key] = call.wait() if not isinstance(call, TaoError) else call
            except TaoError as exc:
                answers[key] = exc
        for key in ("objects", "job", "pods"):
            if isinstance(answers.get(key), TaoError):
                raise answers[key]
        if "objects" in answers:
            items = _items(answers["objects"].stdout)
            name = self.tracked.job_name
            jobs = [i for i in items if i.get("kind") == "Job" and i["metadata"]["name"] == name]
            pods = [i for i in items if i.get("kind") == "Pod"]
            job = jobs[0] if jobs else None
        elif "job" in answers:
            job, pods = _parsed(answers["job"].stdout) or None, _items(answers["pods"].stdout)
        else:
            return None, [], None
        groups = answers.get("groups")
        try:
            listed = _parsed(groups.stdout) if groups is not None and not isinstance(groups, TaoError) else None
        except TaoError:
            listed = None  # as an unreadable List: status words the gang from the Job alone
        return job, pods, listed


def _parsed(stdout: str) -> Any:
    try:
        return json.loads(stdout) if stdout.strip() else None
    except json.JSONDecodeError as exc:
        raise TaoError(f"kubectl get returned output that is not JSON: {exc.msg}") from None


def _items(stdout: str) -> list[dict[str, Any]]:
    return list((_parsed(stdout) or {}).get("items", []))


def fetch(kc: Kubectl, tracked: Tracked) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The Job and its pods (see Fetching)."""
    job, pods, _ = Fetching(kc, tracked).result()
    return job, pods


def start_fetch(kc: Kubectl, tracked: Tracked, *, server: str, force: bool = False) -> Fetching | None:
    """The read `observe` would make, started now (None when it reads nothing: the record answers)."""
    if not tracked.on_kubernetes:
        return None
    check_pin(tracked, server, force=force)
    if (tracked.terminal and tracked.record_state == "CANCELED") or not tracked.job_name:
        return None
    return Fetching(kc, tracked)


def reads_gang(tracked: Tracked) -> bool:
    """A live job submitted with native gang scheduling: its PodGroup is read along with the Job."""
    # contract's spelling, not k8s.gang's: importing gang for this test cost status more than its own work
    return tracked.k8s.gang == contract.GANG_NATIVE and not tracked.terminal and tracked.launched_here


def read_admission(kc: Kubectl, job: dict[str, Any] | None) -> Any:
    """Kueue's account of a Job it holds suspended (kueue.Admission), from its Workload; None for a Job
    without a queue, or when the Workload cannot be read (status then words the wait from the label)."""
    from kubectl_tao.diagnosis import kueue

    meta = (job or {}).get("metadata") or {}
    if kueue.queue_of(job) is None or not meta.get("uid") or not meta.get("namespace"):
        return None
    try:
        found = kc.json(kueue.workload_read(str(meta["namespace"]), str(meta["uid"])), namespaced=False)
    except TaoError:
        return None
    return kueue.admission(job, found)


def check_uid(tracked: Tracked, job: dict[str, Any] | None, *, force: bool = False) -> None:
    pinned = tracked.k8s.job_uid
    if job is None or not pinned or force:
        return
    uid = job["metadata"].get("uid")
    if uid != pinned:
        raise GateError(
            f"Job {tracked.namespace}/{tracked.job_name} now has UID {uid}, but record {tracked.id} was pinned "
            f"to UID {pinned}: it is a different Job with the same name; refusing to act on it"
        )


def observe(
    kc: Kubectl,
    store: Any,
    tracked: Tracked,
    *,
    server: str,
    force: bool = False,
    update: bool = True,
    job: dict[str, Any] | None = None,
    pods: list[dict[str, Any]] | None = None,
    fetched: bool = False,
    started: Fetching | None = None,
) -> Observation:
    """Live state of a record's Job, written back to the record (state changes only). JOB and PODS when
    `fetched` (read by the caller), else STARTED's answer (start_fetch), else read here."""
    if not tracked.on_kubernetes:
        return _from_record(
            tracked, [f"platform {tracked.platform or '?'}: shown as recorded; kubectl-tao leaves it to that platform"]
        )
    check_pin(tracked, server, force=force)
    if tracked.terminal and tracked.record_state == "CANCELED":
        return _from_record(tracked, ["canceled; the Job was deleted by `kubectl tao cancel`"])
    if not tracked.job_name:
        return _from_record(tracked, ["never launched: the record has no backend_ref"])
    from kubectl_tao.diagnosis.jobstate import job_status  # here: imported while status's kubectl runs

    groups = None
    if not fetched:
        job, pods, groups = (started or Fetching(kc, tracked)).result()
    check_uid(tracked, job, force=force)
    if not tracked.terminal and tracked.k8s.submit_phase == ROLLING_BACK:
        return finish_rollback(kc, store if update else None, tracked)
    pods = pods or []
    if job is None and not tracked.terminal and store is not None:
        # Another process (a `status`, a `list`) may have captured the ending and let the TTL delete the Job
        # since this record was read: the record on disk knows.
        tracked.record, tracked.extra = store.show(tracked.id), store.get_extra(tracked.id)
    if job is None and tracked.terminal:
        return _from_record(tracked, ["the Job is gone (ttlSecondsAfterFinished); showing the record"])
    status = job_status(job, pods, [])
    if not fetched and status.reason == "Suspended":
        status = job_status(job, pods, [], admission=read_admission(kc, job))
    if job is not None and groups is not None:
        from kubectl_tao.k8s.gang import annotate

        annotate(status, job, groups, pods)
    message = status.message
    if message:  # the kubelet's or the program's words (a termination message): redacted before anyone shows it
        from kubectl_tao.core.redact import redact_cluster_text

        message = redact_cluster_text(message)
    obs = Observation(tracked, status.state, status.reason, message, status.err_class, status.to_dict())
    _told_by_logs(obs)
    obs.job_ttl = ((job or {}).get("spec") or {}).get("ttlSecondsAfterFinished")
    if tracked.k8s.max_restarts and job is not None:
        obs.restarts = observe_restarts(kc, store if update else None, tracked, pods).view()
    if job is None:
        return _settle_missing(kc, store, tracked, obs, update)
    if update and not tracked.terminal and tracked.k8s.submit_phase in INCOMPLETE_SUBMIT_PHASES:
        # The submit was cut off (API server gone) after the Job was created: finish what it left undone (owner
        # references for its Secret/Service, the UID pin), so TTL or cancel removes them with it.
        from kubectl_tao.k8s import objects

        objects.adopt_orphans(kc, job, tracked.namespace or "default", tracked.id)
        tracked.extra = store.update_k8s(tracked.id, job_uid=job["metadata"]["uid"], submit_phase="created")
    if update:
        _write_back(kc, store, tracked, obs, pods)
    return obs


def observe_restarts(kc: Kubectl, store: Any, tracked: Tracked, pods: list[dict[str, Any]]) -> history.History:
    """The restarts of a job with --max-restarts (restarts/history.of_job: the record's ends, the kubelet's
    restart counts and the termination messages the ranks left) and, for restarts not explained yet, the ends the
    head of the current attempt's log tells (the entrypoint prints the ends of the earlier attempts first: the
    kubelet removes the containers of a RestartAllContainers, their messages with them). New ends are kept in
    the record (STORE; None: not written)."""
    found = history.of_job(tracked.k8s.max_restarts, tracked.k8s.attempts, pods) or history.History(0, ())
    if found.unexplained and tracked.namespace:
        pod = max(pods, key=lambda p: max([s.get("restartCount") or 0 for s in
                                           (p.get("status") or {}).get("containerStatuses") or []] or [0]))
        result = kc.run(
            ["logs", "-n", tracked.namespace, str(pod["metadata"]["name"]), "-c", "tao", "--limit-bytes=8192"],
            namespaced=False, check=False, best_effort=True,
        )
        from kubectl_tao.core.redact import redact_log_line

        said = "\n".join(redact_log_line(line) for line in result.stdout.split("\n"))  # redacted as it is read
        found = found.with_said([said])
    if store is not None and found.changed:
        tracked.extra = store.update_k8s(tracked.id, attempts=tuple(found.stored()))
    return found


def diagnosis_of(tracked: Tracked) -> dict[str, Any] | None:
    """The cause the job's logs showed, as its history captured it (diagnosis/ranklogs.py), or None."""
    return tracked.k8s.history.cause if tracked.k8s.history is not None else None


def cause_told(tracked: Tracked) -> dict[str, Any] | None:
    """diagnosis_of, when it names a cause (not only the last lines of output no sign matched)."""
    found = diagnosis_of(tracked)
    if found is None:
        return None
    from kubectl_tao.diagnosis.causes import names_a_cause  # its table of signs: only when there is a cause

    return found if names_a_cause(found) else None


def _told_by_logs(obs: Observation) -> None:
    """A failed job whose ending was captured shows the cause its logs showed, not `ExitCode`."""
    if obs.state != "ERROR":
        return  # nothing to override: status of a running or finished job imports no diagnosis
    found = cause_told(obs.tracked)
    if found is None:
        return
    from kubectl_tao.diagnosis.ranklogs import OVERRIDDEN_REASONS

    if obs.reason in OVERRIDDEN_REASONS:
        obs.reason = str(found["cause"])
        obs.err_class = found.get("err_class") or obs.err_class
        kept = obs.tracked.k8s.history
        obs.message = str((kept.message if kept is not None else None) or obs.message)


def _from_record(tracked: Tracked, notes: list[str]) -> Observation:
    found = cause_told(tracked) if tracked.record_state == "ERROR" else None
    return Observation(
        tracked,
        tracked.record_state,
        str(found["cause"]) if found else "",
        tracked.job.last_message,
        tracked.job.err_class,
        None,
        notes,
    )


def _settle_missing(kc: Kubectl, store: Any, tracked: Tracked, obs: Observation, update: bool) -> Observation:
    """Job not found: either a submit that never finished creating it, or a Job deleted (TTL, by hand)."""
    phase = tracked.k8s.submit_phase
    if phase in ("dry-run", "creating") and not tracked.k8s.job_uid:
        namespace = tracked.namespace or "default"
        from kubectl_tao.k8s import objects

        left = objects.teardown(kc, namespace, tracked.job_name or "").left
        note = f"; {objects.left_behind_note(namespace, left)}" if left else ""
        if update:
            store.mark(
                tracked.id,
                "ERROR",
                message="submit did not complete: the Job was never created" + note,
                source="poller",
                err_class="ERR_INFRA",
            )
            tracked.record = store.show(tracked.id)
        obs.state, obs.reason = "ERROR", "NotLaunched"
        obs.message = "submit did not complete: the Job was never created" + (note or "; leftovers removed")
        return obs
    obs.notes.append("the Job is gone (deleted by hand or by ttlSecondsAfterFinished); the record keeps its history")
    if update and tracked.record_state != "UNKNOWN":
        store.mark(tracked.id, "UNKNOWN", message="Job not found (TTL-deleted or removed)", source="poller")
        tracked.record = store.show(tracked.id)
    return obs


def finish_rollback(kc: Kubectl, store: Any, tracked: Tracked) -> Observation:
    """A submit failed after its create and the API server went away before its rollback finished: remove what
    it may have created (the Job by label, with its Secret and Service) and mark the record ERROR with the
    submit's reason. Whatever still cannot be removed keeps the record UNKNOWN. STORE None: nothing written."""
    from kubectl_tao.k8s import objects

    namespace = tracked.namespace or "default"
    rollback = tracked.k8s.rollback or {}
    reason = str(rollback.get("message") or "not launched")
    if store is None:
        return _from_record(tracked, ["the submit failed; `status` removes what it may have left and settles it"])
    left = objects.teardown(kc, namespace, tracked.job_name or "").left
    if left:
        note = objects.left_behind_note(namespace, left)
        return Observation(tracked, "UNKNOWN", "RollbackIncomplete", f"{reason}; {note}", None, None, [])
    message = f"{reason}; what the submit may have created was removed once the cluster answered again"
    store.mark(
        tracked.id, "ERROR", message=message, source="poller",
        err_class=str(rollback.get("err_class") or "ERR_INFRA"),
        k8s=K8sRecord.partial(submit_phase="rolled-back", left_behind=()),
    )
    tracked.record, tracked.extra = store.show(tracked.id), store.get_extra(tracked.id)
    return Observation(tracked, "ERROR", "NotLaunched", message, tracked.job.err_class, None, [])


def _write_back(kc: Kubectl, store: Any, tracked: Tracked, obs: Observation, pods: list[dict[str, Any]]) -> None:
    if tracked.terminal:
        return
    message = obs.message or obs.reason or obs.state.lower()
    last = tracked.job.last
    if obs.state in ("COMPLETE", "ERROR"):
        capture_history(kc, store, tracked, obs, pods)
        message = obs.message or obs.reason or obs.state.lower()  # the logs may have named the cause
    elif last is not None and last.state == obs.state and last.message == message:
        return
    store.mark(
        tracked.id,
        obs.state,
        message=message,
        source="poller",
        err_class=obs.err_class if obs.state == "ERROR" else None,
    )
    tracked.record = store.show(tracked.id)


def capture_history(kc: Kubectl, store: Any, tracked: Tracked, obs: Observation, pods: list[dict[str, Any]]) -> None:
    """Per rank: pod, node, exit code, reason and the last log lines, into the record (redacted by the store).
    A failed job's logs are read further back (diagnosis/ranklogs.py, the same one kubectl call) and the cause
    they show becomes the observation's reason, class and message, and the history's `diagnosis`."""
    from kubectl_tao.diagnosis import causes, ranklogs

    texts: dict[str, str] = {}
    found = None
    # where a [rankN]: is torch's (ranklogs.own_ranks)
    per_pod = ranklogs.ranks_per_pod(tracked.k8s.flags, tracked.k8s.nodes, tracked.k8s.gpus)
    if pods and tracked.namespace and tracked.job_name:
        container = "tao" if tracked.launched_here else None  # a Job made elsewhere: its default container
        failed = obs.state == "ERROR"
        # A failed job's logs are read further back (for the diagnosis); either way each rank's end is read
        # whole and every line of it is bounded and redacted as it is read (diagnosis/ranklogs.read_logs).
        read = ranklogs.read_logs(
            kc, tracked.namespace, tracked.pod_selector, len(pods), container=container,
            names=ranklogs.pod_names(pods), lines=ranklogs.READ_LINES if failed else LOG_TAIL_LINES,
        )
        texts = read.texts
        if failed:
            if obs.reason in ranklogs.OVERRIDDEN_REASONS:
                found = ranklogs.diagnose(read, obs.live, gpus=tracked.k8s.gpus, per_pod=per_pod)
                found = ranklogs.with_dumps(found, pods) if found is not None else None
            obs.notes.extend(read.notes)
    from datetime import UTC, datetime

    from kubectl_tao.core.redact import redact_log_line, redact_text

    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ranks: list[RankCapture] = []
    for rank in (obs.live or {}).get("ranks", []):
        text = texts.get(str(rank.get("pod")))
        captured = RankCapture.partial(
            rank=rank.get("rank"),
            pod=rank.get("pod"),
            node=rank.get("node"),
            phase=rank.get("phase"),
            exit_code=rank.get("exit_code"),
            reason=rank.get("reason"),
            log_tail=tuple(redact_log_line(line) for line in ranklogs.tail(text)) if text else (),
            captured_at=now,
        )
        if text and obs.state == "ERROR":
            captured = captured.changed(errors=tuple(ranklogs.first_errors(text, rank.get("rank"), per_pod)))
        ranks.append(captured)
    if found is not None and causes.names_a_cause(found):
        obs.reason, obs.err_class, obs.message = found.cause, found.err_class, ranklogs.message(found)
    captured_history = CapturedHistory.partial(
        state=obs.state,
        reason=obs.reason,
        message=redact_text(obs.message),
        err_class=obs.err_class,
        first_failed_rank=(obs.live or {}).get("first_failed_rank"),
        ranks=tuple(ranks),
        captured_at=now,
    )
    if found is not None:
        captured_history = captured_history.changed(diagnosis=found.to_dict())
    held = bool(tracked.k8s.keep_until_captured)
    from kubectl_tao.progress.kept import ended

    rank0 = next((r for r in ranks if r.rank in (0, None)), None)
    progress = ended(tracked.k8s.progress, texts.get(str(rank0.pod)) if rank0 else None)
    part = K8sRecord.partial(history=captured_history)
    if progress is not None:
        # the final progress: `status` and `list -o wide` show it once the Job is gone
        part = part.changed(progress=progress)
    if tracked.k8s.ttl_hold:
        part = part.changed(ttl_hold=None)  # captured: a waiter leaving now has nothing to give back
    tracked.extra = store.merge_k8s(tracked.id, part)
    if held:
        # The history is safe in the record now: let ttlSecondsAfterFinished remove the Job.
        set_ttl(kc, tracked, held_ttl(tracked))


def held_ttl(tracked: Tracked) -> int:
    ttl = tracked.k8s.ttl_seconds
    return DEFAULT_TTL_SECONDS if ttl is None else int(ttl)


def set_ttl(kc: Kubectl, tracked: Tracked, ttl: int | None) -> bool:
    """Set (None: remove) the Job's ttlSecondsAfterFinished, on the pinned UID only (objects.set_ttl)."""
    if not tracked.namespace or not tracked.job_name:
        return False
    from kubectl_tao.k8s import objects

    return objects.set_ttl(kc, tracked.namespace, tracked.job_name, tracked.k8s.job_uid, ttl)


def hold_ttl(kc: Kubectl, store: Any, tracked: Tracked, ttl: int, holder: str) -> bool:
    """Keep a waited-on Job from being deleted by its TTL before its ending is captured: the record says so
    first (so whoever captures the history sets the TTL back), then the TTL is removed from the Job."""
    if tracked.k8s.history is not None and not tracked.k8s.history.empty:
        return False
    ours = not tracked.k8s.keep_until_captured  # else already held (--wait, --keep-until-captured)
    if ours:
        tracked.extra = store.update_k8s(tracked.id, keep_until_captured=True, ttl_seconds=ttl, ttl_hold=holder)
    if set_ttl(kc, tracked, None):
        return True
    if ours:
        tracked.extra = store.update_k8s(tracked.id, keep_until_captured=False, ttl_hold=None)
    return False


def release_ttl(kc: Kubectl, store: Any, tracked: Tracked) -> None:
    """A waiter leaving before the ending was captured gives the Job its TTL back."""
    if not tracked.k8s.ttl_hold:
        return
    set_ttl(kc, tracked, held_ttl(tracked))
    tracked.extra = store.update_k8s(tracked.id, keep_until_captured=False, ttl_hold=None)
