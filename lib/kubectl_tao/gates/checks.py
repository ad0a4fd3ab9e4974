"""The gate list: every read-only check before a job is launched, one list for `submit`, `preflight` and `fit`.

A Gate (GATES, at the end) names the verbs that run it and when it is wanted, the kubectl reads it needs (keyed:
gates naming the same key share one process), how it looks at their answers (`look`, here: answers -> what it
saw, gates/gatefacts.py, where a follow-up read may be made) and how it judges what it saw (`judge`: the name of
a pure function in gates/verdicts.py that returns Verdicts; loaded once the reads are on their way, so that
nothing but the reads themselves comes before them). `Run` starts the reads of every gate a verb runs at once
(one round trip), looks at the capacity as soon as the nodes and pods are in (`early`: a DRA read that may be
needed starts while the other reads still run), waits for the rest, then looks and judges gate by gate in list
order:
- submit stops at the first refusal (its error: the class is the exit code) and keeps the warnings;
- preflight prints every verdict: OK, WARN, MISSING for a refusal;
- fit reports what the capacity gate saw and raises any other refusal.
So the order of GATES is the order in which refusals win and warnings are printed.

A new gate is one Gate in GATES, placed where its refusal should come: its reads and look below, its judge in
gates/verdicts.py. The verbs pick it up from the list.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from kubectl_tao.core.errors import ClusterUnreachableError, GateError, KubectlError, TaoError, UsageError
from kubectl_tao.core.valueclass import Value, record
from kubectl_tao.gates import permissions
from kubectl_tao.gates.gaterequest import FIT, PREFLIGHT, SUBMIT, GateRequest
from kubectl_tao.k8s import gang
from kubectl_tao.k8s.kubectl import Completed, Kubectl, Running
from kubectl_tao.restarts import servercheck

if TYPE_CHECKING:
    from kubectl_tao.gates import gatefacts
    from kubectl_tao.gates.verdicts import Verdict

Call = tuple[list[str], dict[str, Any]]
VERSION_READ: Call = (["version", "-o", "json"], {"namespaced": False})
EVERY_VERB = (SUBMIT, PREFLIGHT, FIT)


@record(frozen=True)
class Gate(Value):
    name: str  # preflight's check name
    verbs: tuple[str, ...]
    wanted: Callable[[GateRequest], bool]
    reads: Callable[[GateRequest], dict[str, Call]]
    look: Callable[[Run], Any]  # what the gate saw; a TaoError it raises is its refusal
    judge: str  # its judge: (GateRequest, what it saw) -> list[Verdict], a function of gates/verdicts.py
    early: Callable[[Run], None] | None = None  # run once the reads started, before waiting for all of them
    early_first: bool = False  # its early hook waits only for a quick read: run it before the others'
    stops: bool = False  # a refusal here ends the run: nothing after it could be read


class FollowUp:
    """A read after the first round trip (kubectl running), or the first round trip's own answer to it."""

    def __init__(self, running: Running | None = None, answer: Completed | TaoError | None = None) -> None:
        self._running, self._answer = running, answer

    def answer(self) -> Completed | TaoError:
        if self._running is None:
            assert self._answer is not None
            return self._answer
        try:
            return self._running.wait()
        except TaoError as exc:
            return exc

    def stop(self) -> None:
        if self._running is not None:
            self._running.stop()


class Run:
    """One verb's pass through the gate list: the reads started at once, what each gate saw (`facts`, by gate
    name; a TaoError for a look that refused) and, for submit, the LaterFit still reading DRA GPUs."""

    def __init__(self, kc: Kubectl, request: GateRequest, shared: SharedReads | None = None) -> None:
        self.kc, self.request = kc, request
        self.gates = [g for g in GATES if request.verb in g.verbs and g.wanted(request)]
        calls: dict[str, Call] = {}
        for gate in self.gates:
            calls.update(gate.reads(request))
        self.facts: dict[str, Any] = {}
        self.later: LaterFit | None = None
        self._shared: dict[str, Any] = {}
        self._follow_ups: dict[str, FollowUp] = {}
        self._read = set(calls)
        self.reader: Any = shared or kc  # round trip 2's reads (`json`): once for every Run sharing SharedReads
        self._batch: Any = self.reader.start_many(calls)

    def reads(self, key: str) -> bool:
        return key in self._read

    def answer(self, key: str) -> Completed | TaoError:
        return self._batch.result(key)

    def shared(self, key: str, make: Callable[[], Any]) -> Any:
        """What `make` returns, made once for every gate that asks (a TaoError it raised is raised again)."""
        if key not in self._shared:
            try:
                self._shared[key] = make()
            except TaoError as exc:
                self._shared[key] = exc
        found = self._shared[key]
        if isinstance(found, TaoError):
            raise found
        return found

    def follow_up(self, key: str, call: Call, *, keep: bool = False) -> FollowUp:
        """The read `call` after the first round trip, started once (the first round trip's answer when it made
        that read already). `keep`: the caller stops it; else `close` does, if nobody waited for it."""
        if key not in self._follow_ups:
            if self.reads(key):
                self._follow_ups[key] = FollowUp(answer=self.answer(key))
            else:
                args, kwargs = call
                self._follow_ups[key] = FollowUp(self.kc.start(args, **kwargs))
        return self._follow_ups.pop(key) if keep else self._follow_ups[key]

    def verdicts(self) -> Iterator[Verdict]:
        """Every gate's verdicts in list order, each with its gate's name."""
        for gate in sorted(self.gates, key=lambda g: not g.early_first):
            if gate.early is not None:
                with contextlib.suppress(TaoError):  # raised again by the gate's look, in its turn
                    gate.early(self)
        from kubectl_tao.gates import verdicts

        self._batch.results()
        for gate in self.gates:
            found: list[Verdict]
            try:
                seen = gate.look(self)
            except TaoError as exc:
                seen, found = exc, [verdicts.refused(exc)]
            else:
                found = getattr(verdicts, gate.judge)(self.request, seen)
            self.facts[gate.name] = seen
            for verdict in found:
                yield verdict.replaced(gate=gate.name)
            if gate.stops and any(v.status == verdicts.REFUSE for v in found):
                return

    def close(self) -> None:
        """Stop the follow-up reads nobody waited for (a refusal came first)."""
        for follow_up in self._follow_ups.values():
            follow_up.stop()


class SharedReads:
    """The first round trip of several Runs at once (a workflow's steps, gated before any is created): each
    distinct read (its key, command line and options) is started once, by the first Run that names it, and every
    Run that names it reads that one answer. Each Run still looks and judges on its own, so every verdict is the
    one it would be alone; only identical reads are shared (the nodes, the pods, the version, the same PVC), never a
    step's server dry run (its objects differ)."""

    def __init__(self, kc: Kubectl) -> None:
        self.kc = kc
        self._started: dict[str, tuple[Any, str]] = {}
        self._read: dict[str, Any] = {}

    def json(self, args: list[str], **options: Any) -> Any:
        """Kubectl.json for a read after the first round trip (a queued step's ClusterQueue and topology), made
        once for every Run that asks it alike; each gets its own copy of the answer (a TaoError is raised
        again)."""
        import copy

        key = _identity("json", (args, options))
        if key not in self._read:
            try:
                self._read[key] = self.kc.json(args, **options)
            except TaoError as exc:
                self._read[key] = exc
        found = self._read[key]
        if isinstance(found, TaoError):
            raise found
        return copy.deepcopy(found)

    def start_many(self, calls: dict[str, Call]) -> SharedBatch:
        fresh = {key: call for key, call in calls.items() if _identity(key, call) not in self._started}
        if fresh:
            batch = self.kc.start_many(fresh)
            for key, call in fresh.items():
                self._started[_identity(key, call)] = (batch, key)
        return SharedBatch({key: self._started[_identity(key, call)] for key, call in calls.items()})


class SharedBatch:
    """A Run's view of SharedReads: its keys, each answered by the batch that started that read."""

    def __init__(self, picks: dict[str, tuple[Any, str]]) -> None:
        self._picks = picks

    def result(self, key: str) -> Completed | TaoError:
        batch, started_as = self._picks[key]
        answer: Completed | TaoError = batch.result(started_as)
        return answer

    def results(self) -> dict[str, Completed | TaoError]:
        return {key: self.result(key) for key in self._picks}


def _identity(key: str, call: Call) -> str:
    """A read as SharedReads compares them: its key, arguments and options; a reader function by its name (the
    same reader reduces the same answer the same way; gates/capacity.calls makes a fresh closure per call)."""
    args, options = call
    shown = {name: (f"{value.__module__}.{value.__qualname__}" if callable(value) else value)
             for name, value in options.items()}
    return json.dumps([key, args, shown], sort_keys=True, default=repr)


# ------------------------------------------------------------------------------------------- the verbs


def for_submit(kc: Kubectl, request: GateRequest, warnings: list[str]) -> Gates:
    """Submit's gates: the first refusal is raised (nothing was created); the warnings are added to WARNINGS."""
    return judge_submit(Run(kc, request), warnings)


def judge_submit(run: Run, warnings: list[str]) -> Gates:
    """for_submit over a Run whose reads were started already (a workflow starts every step's at once)."""
    try:
        for verdict in run.verdicts():
            _act_on(verdict, warnings)
    except BaseException:
        if run.later is not None:
            run.later.stop()
        raise
    finally:
        run.close()
    fit = run.facts.get("capacity")
    fit_dict = fit.noted.to_dict() if fit is not None and fit.verdict is not None else None
    return Gates(run.request, fit_dict, warnings, run.facts["gang"].mechanism, run.later)


def _act_on(verdict: Verdict, warnings: list[str]) -> None:
    """Submit's reading of a verdict: a refusal is raised, a warning kept, OK is silent."""
    from kubectl_tao.gates.verdicts import REFUSE, WARN

    if verdict.status == REFUSE:
        assert verdict.error is not None
        raise verdict.error
    if verdict.status == WARN:
        warnings.append(verdict.text)


def for_preflight(kc: Kubectl, request: GateRequest) -> list[Verdict]:
    """Every verdict of the gates preflight runs."""
    run = Run(kc, request)
    try:
        return list(run.verdicts())
    finally:
        run.close()


def for_fit(kc: Kubectl, request: GateRequest) -> dict[str, Any]:
    """What the gates fit runs saw (by gate name); a refusal other than the capacity gate's verdict is raised."""
    run = Run(kc, request)
    try:
        for verdict in run.verdicts():
            if verdict.gate != "capacity" or isinstance(run.facts.get("capacity"), TaoError):
                _act_on(verdict, [])
    finally:
        run.close()
    return run.facts


class Gates:
    """What submit's gates found: the fit verdict (as a dict; None while `later` settles it or without a capacity
    read), warnings, the gang.Mechanism and, for a job that must queue, the LaterFit still reading DRA GPUs."""

    def __init__(
        self, request: GateRequest, fit: dict[str, Any] | None, warnings: list[str], mechanism: Any,
        later: LaterFit | None,
    ) -> None:
        self.request = request
        self.fit, self.warnings, self.mechanism, self.later = fit, warnings, mechanism, later

    def settle(self) -> list[str]:
        """The fit verdict with DRA GPUs counted, once `later` has them; the warnings that adds."""
        from kubectl_tao.gates import verdicts

        if self.later is None:
            return []
        seen = self.later.settle()
        self.later = None
        self.fit = seen.noted.to_dict()
        added: list[str] = []
        for verdict in verdicts.capacity(self.request, seen):
            _act_on(verdict, added)
        self.warnings += added
        return added

    def stop(self) -> None:
        """Stop the DRA read of a submit that ends before settling it."""
        if self.later is not None:
            self.later.stop()
            self.later = None


class LaterFit:
    """A "queue" verdict judged without DRA devices and their read, still running: counting them can only
    make it "fits" (gpuinventory.gate_nodes), so submit settles it after the create instead of before."""

    def __init__(self, judge: Callable[[Any], Any], first: Any, dra: FollowUp, usage_known: bool) -> None:
        self._judge, self._first, self._dra, self._usage_known = judge, first, dra, usage_known

    def settle(self) -> gatefacts.FitSeen:
        from kubectl_tao.gates import gatefacts

        verdict, note = judge_counting_dra(self._judge, self._first, lambda: self._dra)
        return gatefacts.FitSeen(verdict, note, self._usage_known)

    def stop(self) -> None:
        self._dra.stop()


def judge_counting_dra(judge: Callable[[Any], Any], first: Any, dra: Callable[[], FollowUp]) -> tuple[Any, str]:
    """The fit verdict FIRST, judged without DRA devices (`judge(None)`), or, when it does not fit, `judge(dra)`
    with the DRA devices read. DRA devices only ever add GPUs to nodes the device plugins leave at zero
    (gpuinventory.gate_nodes), so a job that fits without them fits with them, and their read (the costliest
    of the gate on a big cluster) is waited for only when it could change the verdict; devices that cannot
    change it (none published) are not judged again. Returns the verdict and, when it still does not fit,
    why DRA GPUs were not counted ('' when they were or there are none)."""
    from kubectl_tao.gates import gpufit, gpuinventory

    if first.verdict == gpufit.FITS:
        return first, ""
    devices, note = gpuinventory.read_dra(dra().answer())
    verdict = judge(devices) if gpuinventory.counts_for_fit(devices) else first
    return verdict, note if verdict.verdict != gpufit.FITS else ""


# ------------------------------------------------------------------------------------------- the gates
# Each gate's reads and look; its judge is named in its Gate (a function of gates/verdicts.py).


def _always(_request: GateRequest) -> bool:
    return True


def _no_reads(_request: GateRequest) -> dict[str, Call]:
    return {}


def _version_reads(_request: GateRequest) -> dict[str, Call]:
    return {"version": VERSION_READ}


def _cluster_look(run: Run) -> gatefacts.ClusterSeen:
    """The server version, or the error that kept kubectl from reading it."""
    from kubectl_tao.core.serverversion import parse_server_version
    from kubectl_tao.gates import gatefacts

    answer = run.answer("version")
    if isinstance(answer, UsageError):
        raise answer  # bad input (a --context kubectl does not know): exit 2
    if isinstance(answer, TaoError):
        return gatefacts.ClusterSeen(error=answer)
    try:
        return gatefacts.ClusterSeen(parse_server_version(json.loads(answer.stdout)))
    except (TaoError, ValueError) as exc:
        return gatefacts.ClusterSeen(unreadable=str(exc))


def _needed(request: GateRequest) -> list[permissions.Permission]:
    return permissions.needed(credentials=request.credentials, service=request.nodes > 1, patch_job=request.patches_job)


def _optional(request: GateRequest) -> list[permissions.Permission]:
    return permissions.optional() if request.optional_permissions else []


def _permission_reads(request: GateRequest) -> dict[str, Call]:
    """One SelfSubjectAccessReview per verb the job's objects need (and, for preflight, the optional ones);
    they ride in the server dry run of the job's objects when those are known (one `kubectl create
    --dry-run=server` for both)."""
    needed, ns = _needed(request) + _optional(request), request.namespace
    if request.objects is None:
        return {"permissions": permissions.review_call(needed, ns)}
    return {"permissions": permissions.with_dry_run(needed, ns, request.objects)}


def _reviews(run: Run) -> tuple[Completed | TaoError, TaoError | None]:
    """The reviews' answer, and the server dry run's own error (None: it passed, or none rode with them)."""

    def split() -> tuple[Completed | TaoError, TaoError | None]:
        answer = run.answer("permissions")
        if run.request.objects is None:
            return answer, None
        return permissions.split(answer, run.kc.error_for)

    found: tuple[Completed | TaoError, TaoError | None] = run.shared("reviews", split)
    return found


def _permission_look(run: Run) -> gatefacts.PermissionsSeen:
    from kubectl_tao.gates import gatefacts

    reviews, _ = _reviews(run)
    if isinstance(reviews, ClusterUnreachableError):
        raise reviews  # an unreachable server is exit 3, not a denial
    needed, optional = _needed(run.request), _optional(run.request)
    texts = tuple(p.text for p in needed)
    if isinstance(reviews, TaoError):
        return gatefacts.PermissionsSeen(texts, unchecked=reviews.message)
    return gatefacts.PermissionsSeen(
        texts,
        tuple(p.text for p in permissions.denied(needed, reviews.stdout)),
        optional=tuple(p.text for p in optional),
        optional_missing=tuple(p.text for p in permissions.denied(optional, reviews.stdout)),
    )


def _fit_wanted(request: GateRequest) -> bool:
    """A job of GPUs or of several nodes (one rank of no GPUs fits any node); `fit` judges whatever it asks."""
    return request.verb == FIT or request.gpus > 0 or request.nodes > 1


def _gpus_wanted(request: GateRequest) -> bool:
    return request.verb == PREFLIGHT or _fit_wanted(request)


def _capacity_reads(request: GateRequest) -> dict[str, Call]:
    from kubectl_tao.gates import capacity

    return capacity.calls()


def _dra_call() -> Call:
    from kubectl_tao.gates.gpuinventory import DRA_READ

    return DRA_READ, {"namespaced": False}


def _gpu_reads(request: GateRequest) -> dict[str, Call]:
    """The nodes and the pods on them; preflight also reads the DRA devices at once (it reports them); submit
    and fit only when the device plugins' GPUs do not fit (`_start_dra_when_short`)."""
    calls = _capacity_reads(request)
    if request.verb == PREFLIGHT:
        calls["dra"] = _dra_call()
    return calls


def _capacity(run: Run) -> Any:
    """The nodes and the pods on them (gates/capacity.py: Capacity). fit has no fallback: a read error is its
    answer; submit and preflight go on with what they could list, with a warning (capacity.view)."""
    from kubectl_tao.gates import capacity

    def read() -> Any:
        answers = {key: run.answer(key) for key in ("nodes", "pods")}
        return capacity.read(answers) if run.request.verb == FIT else capacity.view(answers)

    return run.shared("capacity", read)


def _counted(run: Run, seen: Any) -> Any:
    """gpufit.node_gpus over the capacity read, once per run for every gate that judges it."""
    from kubectl_tao.gates.gpufit import node_gpus

    return run.shared("counted", lambda: node_gpus(seen.nodes, seen.pods))


def _fit_verdict(run: Run, seen: Any, dra: Any = None, quota: Any = None) -> Any:
    from kubectl_tao.gates.verdicts import fit_verdict

    return fit_verdict(run.request, _counted(run, seen), dra, quota)


def _plain_verdict(run: Run, seen: Any) -> Any:
    """The fit verdict without DRA devices or a queue's quota (which only takes GPUs away)."""
    return run.shared("plain", lambda: _fit_verdict(run, seen))


def _start_dra_when_short(run: Run) -> None:
    """When the device plugins' GPUs do not fit, the DRA read starts now, instead of after the slowest read."""
    from kubectl_tao.gates.gpufit import FITS

    if not _fit_wanted(run.request):
        return
    seen = _capacity(run)
    if seen.nodes is not None and _plain_verdict(run, seen).verdict != FITS:
        run.follow_up("dra", _dra_call())


def _gpu_look(run: Run) -> gatefacts.GpusSeen:
    from kubectl_tao.gates import gatefacts

    seen = _capacity(run)
    if not run.reads("dra"):
        return gatefacts.GpusSeen(seen)
    from kubectl_tao.gates import gpuinventory

    dra, note = gpuinventory.read_dra(run.answer("dra"))
    return gatefacts.GpusSeen(seen, dra, note, _counted(run, seen) if seen.nodes is not None else None)


RUNTIME_CLASSES_READ: Call = (
    ["get", "runtimeclasses.node.k8s.io", "-o", 'jsonpath={range .items[*]}{.metadata.name}{"\\n"}{end}'],
    {"namespaced": False},
)


def _node_runtime_wanted(request: GateRequest) -> bool:
    return request.node_runtime


def _node_runtime_reads(request: GateRequest) -> dict[str, Call]:
    """The nodes (the capacity read: one process for both gates) and the RuntimeClass names."""
    return {**_capacity_reads(request), "runtimeclasses": RUNTIME_CLASSES_READ}


def _node_runtime_look(run: Run) -> gatefacts.NodeRuntimeSeen:
    from kubectl_tao.gates import gatefacts, noderuntime

    try:
        seen = _capacity(run)
    except TaoError:
        return gatefacts.NodeRuntimeSeen(None)  # the gpu-operator gate refused with it
    if seen.nodes is None:
        return gatefacts.NodeRuntimeSeen(None)
    nodes = noderuntime.gpu_nodes(seen.nodes["items"], run.request.gpu_product)
    answer = run.answer("runtimeclasses")
    if isinstance(answer, ClusterUnreachableError):
        raise answer
    if isinstance(answer, TaoError):
        note = "forbidden" if isinstance(answer, KubectlError) and answer.reason == "Forbidden" else answer.message
        return gatefacts.NodeRuntimeSeen(nodes, None, note)
    return gatefacts.NodeRuntimeSeen(nodes, noderuntime.runtime_classes(answer.stdout))


def _server_version(run: Run) -> Any:
    from kubectl_tao.core.serverversion import parse_server_version

    def parse() -> Any:
        answer = run.answer("version")
        if isinstance(answer, TaoError):
            raise answer
        return parse_server_version(json.loads(answer.stdout))

    return run.shared("version", parse)


def _probe_wanted(request: GateRequest) -> bool:
    wanted = request.nodes > 1 and bool(request.server) and request.min_version is not None
    return wanted and not request.skip_probe_warning


def _probe_look(run: Run) -> str | None:
    """What the NCCL probe cache (store/probecache.py) says of this cluster at this server version."""
    from kubectl_tao.store.probecache import cached_probe_warning

    return cached_probe_warning(run.request.server, _server_version(run).text)


def _refs_wanted(request: GateRequest) -> bool:
    return bool(request.pvc or request.secret_refs or request.image_pull_secret)


def _refs_reads(request: GateRequest) -> dict[str, Call]:
    """The PVC, the Secrets and the image-pull Secret in one `get`: names and key names only, through a
    go-template that never prints a Secret's values. One name gets the object itself back, several a List:
    the template prints a row for either."""
    names = []
    if request.pvc:
        names.append(f"persistentvolumeclaim/{request.pvc}")
    names += [f"secret/{name}" for name in sorted(request.secret_refs)]
    if request.image_pull_secret and request.image_pull_secret not in request.secret_refs:
        names.append(f"secret/{request.image_pull_secret}")
    row = (
        "{{.kind}} {{.metadata.name}} {{if .status}}{{.status.phase}}{{else}}-{{end}} "
        '{{range $k, $v := .data}}{{$k}},{{end}}{{"\\n"}}'
    )
    template = (
        f'{{{{define "row"}}}}{row}{{{{end}}}}'
        '{{if .items}}{{range .items}}{{template "row" .}}{{end}}{{else}}{{template "row" .}}{{end}}'
    )
    return {"refs": (["get", *names, "-o", f"go-template={template}"], {"check": False})}


def parse_refs(text: str) -> dict[tuple[str, str], tuple[str, set[str]]]:
    """The rows of the references' read: (kind, name) -> (phase or "-", key names)."""
    found: dict[tuple[str, str], tuple[str, set[str]]] = {}
    for line in text.splitlines():
        parts = line.split(" ")
        if len(parts) < 3:
            continue
        kind, name, phase = parts[0], parts[1], parts[2]
        keys = {k for k in (parts[3] if len(parts) > 3 else "").split(",") if k}
        found[(kind, name)] = (phase, keys)
    return found


def _refs_look(run: Run) -> dict[tuple[str, str], tuple[str, set[str]]]:
    result = run.answer("refs")
    if isinstance(result, ClusterUnreachableError):
        raise result
    if isinstance(result, KubectlError) and result.reason == "Forbidden":
        raise GateError(f"cannot read PVCs/Secrets in namespace {run.request.namespace}: {result.message}")
    return parse_refs(result.stdout if isinstance(result, Completed) else "")


def _queue_wanted(request: GateRequest) -> bool:
    """--queue; `fit` also without it (the namespace's default LocalQueue, or its only one)."""
    return bool(request.queue) or request.verb == FIT


def _queue_reads(request: GateRequest) -> dict[str, Call]:
    from kubectl_tao.gates.queues import queue_call

    return {"queues": queue_call(request.namespace)}


def _queue_look(run: Run) -> gatefacts.QueueSeen:
    from kubectl_tao.gates import gatefacts
    from kubectl_tao.gates.queues import check_topology, read_queue

    request = run.request
    quota, local_queue, notes = read_queue(run.reader, run.answer("queues"), request.queue, request.namespace)
    if request.queue and request.topology is not None:
        notes += check_topology(run.reader, quota, request.topology)
    return gatefacts.QueueSeen(quota, local_queue, tuple(notes), _capacity_known(run))


def _capacity_known(run: Run) -> bool:
    """Whether the nodes were read (so the capacity gate judges with the quota counted)."""
    try:
        return run.reads("nodes") and _capacity(run).nodes is not None
    except TaoError:
        return False


def _fit_look(run: Run) -> gatefacts.FitSeen | None:
    """The fit verdict over the capacity read, a queue's quota and, only where they could change it, the DRA
    devices. For submit, a "queue" verdict (without --require-fit-now) is settled after the create: DRA GPUs
    can only turn it into "fits", never refuse the job (the LaterFit)."""
    from kubectl_tao.gates import gatefacts
    from kubectl_tao.gates.gpufit import QUEUE

    try:
        seen = _capacity(run)
    except TaoError:
        return None  # the gpu-operator gate refused with it
    if seen.nodes is None:
        return None  # nodes could not be listed: no capacity to judge (the gpu-operator gate warned)
    request = run.request
    queue = run.facts.get("queue")
    quota = queue.quota if isinstance(queue, gatefacts.QueueSeen) else None

    def judge(dra: Any) -> Any:
        return _fit_verdict(run, seen, dra, quota)

    first = _plain_verdict(run, seen) if quota is None else judge(None)
    if request.verb == SUBMIT and first.verdict == QUEUE and not request.require_fit_now:
        run.later = LaterFit(judge, first, run.follow_up("dra", _dra_call(), keep=True), seen.usage_known)
        return gatefacts.FitSeen(None, usage_known=seen.usage_known)
    verdict, note = judge_counting_dra(judge, first, lambda: run.follow_up("dra", _dra_call()))
    return gatefacts.FitSeen(verdict, note, seen.usage_known)


def _detects_gang(request: GateRequest) -> bool:
    """Whether the gang mechanism must be found out (multi-node, no --queue, --gang not off)."""
    return request.nodes > 1 and not request.queue and request.gang_mode != "off"


def _gang_reads(request: GateRequest) -> dict[str, Call]:
    return {"gang": gang.DISCOVERY_CALL} if _detects_gang(request) else {}


def _gang_dry_run(run: Run) -> FollowUp:
    return run.follow_up("gang-dry-run", gang.dry_run_call(run.request.namespace, run.request.nodes))


def _start_gang_dry_run(run: Run) -> None:
    """Where the discovery says PodGroups are served, the gang dry run starts at once, while the slower reads
    (the pods of a big cluster) still run."""
    if run.reads("gang") and gang.served(run.answer("gang"))[0]:
        _gang_dry_run(run)


def _gang_look(run: Run) -> gatefacts.GangSeen:
    from kubectl_tao.gates import gatefacts

    request = run.request
    # fit judges a --topology gang's room; only submit and preflight ask who keeps it in one domain
    topology = request.topology if request.verb != FIT else None
    key = topology.label if topology is not None and topology.required else None
    support = (
        gang.detect(run.kc, request.namespace, run.answer("gang"), request.nodes, key,
                    dry_run=lambda: _gang_dry_run(run).answer())
        if run.reads("gang")
        else None
    )
    mechanism = gang.choose(request.nodes, request.queue, support, request.gang_mode, topology)
    return gatefacts.GangSeen(mechanism, gang.ENABLE_HINT)


def _restarts_wanted(request: GateRequest) -> bool:
    """submit with --max-restarts; preflight always; fit for a multi-node request."""
    if request.verb == SUBMIT:
        return request.max_restarts > 0
    return request.verb == PREFLIGHT or request.nodes > 1


def _restarts_reads(request: GateRequest) -> dict[str, Call]:
    return {"version": VERSION_READ, "restarts": servercheck.dry_run_call(request.namespace)}


def _restarts_look(run: Run) -> gatefacts.RestartsSeen:
    from kubectl_tao.gates import gatefacts

    answer = run.answer("restarts")
    if isinstance(answer, ClusterUnreachableError):
        raise answer
    try:
        version = _server_version(run).text
    except TaoError:
        version = ""
    return gatefacts.RestartsSeen(servercheck.kept(answer), version)


def _dry_run_look(run: Run) -> TaoError | None:
    return _reviews(run)[1]


GATES = (
    Gate("cluster", (PREFLIGHT,), _always, _version_reads, _cluster_look, "cluster", stops=True),
    Gate("permissions", (SUBMIT, PREFLIGHT), _always, _permission_reads, _permission_look, "permissions"),
    Gate("gpu-operator", EVERY_VERB, _gpus_wanted, _gpu_reads, _gpu_look, "gpu_operator",
         early=_start_dra_when_short),
    Gate("node-runtime", (PREFLIGHT,), _node_runtime_wanted, _node_runtime_reads, _node_runtime_look,
         "node_runtime"),
    Gate("version", (SUBMIT, PREFLIGHT), lambda r: r.min_version is not None, _version_reads, _server_version,
         "version"),
    Gate("nccl-probe", (SUBMIT, PREFLIGHT), _probe_wanted, _version_reads, _probe_look, "nccl_probe"),
    Gate("references", (SUBMIT, PREFLIGHT), _refs_wanted, _refs_reads, _refs_look, "references"),
    Gate("queue", EVERY_VERB, _queue_wanted, _queue_reads, _queue_look, "queue"),
    Gate("capacity", EVERY_VERB, _fit_wanted, _capacity_reads, _fit_look, "capacity"),
    Gate("gang", EVERY_VERB, _always, _gang_reads, _gang_look, "gang", early=_start_gang_dry_run, early_first=True),
    Gate("restarts", EVERY_VERB, _restarts_wanted, _restarts_reads, _restarts_look, "restarts"),
    # Its objects ride in the permissions gate's call (one `kubectl create --dry-run=server` for both).
    Gate("dry-run", (SUBMIT,), lambda r: r.objects is not None, _no_reads, _dry_run_look, "dry_run"),
    Gate("image-pull", (SUBMIT,), _always, _no_reads, lambda _run: None, "image_pull"),
)
