"""Gang scheduling of multi-node jobs: which mechanism keeps a job from starting half-way, how a Job asks for
the native one, and what the scheduler says about a native gang.

Three mechanisms, chosen in this order for a job of N > 1 ranks:

- kueue   `--queue` names a Kueue LocalQueue: the Job is created suspended and Kueue admits it whole (its quota);
          Job spec.scheduling is not sent: the Job's admission is Kueue's alone;
- native  the API server gang-schedules Jobs (Kubernetes 1.37+ with the GenericWorkload and WorkloadWithJob
          feature gates and scheduling.k8s.io/v1beta1 served): the Job carries
          `spec.scheduling.schedulingPolicy.gang.minCount: N`, the Job controller creates a Workload and a
          PodGroup, and the scheduler binds all N pods together or none;
- none    neither: the capacity gate before submit and the rendezvous barrier in the pods are the only guard
          against a partial start.

Detection (`detect`): discovery of scheduling.k8s.io/v1beta1 (PodGroups served: GenericWorkload on and the
version enabled) in the caller's first round trip, then, only where PodGroups are served, a server dry run of a
small Indexed Job with spec.scheduling: the API server keeps the field only with WorkloadWithJob on (it drops
it silently otherwise). A server without the API never sees the field, not even in a dry run.

Everything but `detect` is pure.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubectl_tao.core import contract
from kubectl_tao.core.errors import ClusterUnreachableError, TaoError, UsageError
from kubectl_tao.core.valueclass import Value, plain, record
from kubectl_tao.k8s.kubectl import Completed, Kubectl

NATIVE, KUEUE, NONE = contract.GANG_NATIVE, contract.GANG_KUEUE, contract.GANG_NONE
MODES = ("auto", "native", "off")  # --gang
API_VERSION = "scheduling.k8s.io/v1beta1"
DISCOVERY_CALL = (["get", "--raw", f"/apis/{API_VERSION}"], {"namespaced": False})
PODGROUPS = "podgroups.v1beta1.scheduling.k8s.io"
WORKLOADS = "workloads.v1beta1.scheduling.k8s.io"
SCHEDULED = "PodGroupInitiallyScheduled"
DISRUPTION = "DisruptionTarget"
ENABLE_HINT = (
    "an admin enables it with the kube-apiserver, kube-controller-manager and kube-scheduler flag "
    "--feature-gates=GenericWorkload=true,WorkloadWithJob=true and the kube-apiserver flag "
    f"--runtime-config={API_VERSION}=true (Kubernetes 1.37+)"
)
NONE_GUARD = "the capacity gate and the rendezvous barrier are the only guard against a partial start"
_SCHEDULER_SAID = ("Unschedulable", contract.INSUFFICIENT_GPU)
_SCHEDULING_REASONS = ("", "Pending", "NoPods", *_SCHEDULER_SAID)
_DRY_RUN_TEMPLATE = 'go-template={{if .spec.scheduling}}{{if .spec.scheduling.schedulingPolicy.gang}}gang{{end}}{{end}}'
_TOPOLOGY_TEMPLATE = "go-template={{if .spec.schedulingConstraints}}topology{{end}}"
TOPOLOGY_HINT = (
    "an admin enables PodGroup topology constraints with --feature-gates=TopologyAwareWorkloadScheduling=true on "
    "the kube-apiserver and kube-scheduler (alpha since 1.36)"
)


@record(frozen=True)
class Support(Value):
    """Whether this API server gang-schedules Jobs natively, and why (or why not)."""

    native: bool
    detail: str
    topology: bool = False  # the server also keeps Job spec.scheduling.schedulingConstraints (topology)


@record(frozen=True)
class Mechanism(Value):
    """The gang mechanism of one job: kind native | kueue | none, and the sentence that says why."""

    kind: str
    message: str
    min_count: int | None = None
    topology_key: str | None = None  # native: every rank in one domain of this node label

    def to_dict(self) -> dict[str, Any]:
        return plain(self)

    def line(self) -> str:
        return f"gang scheduling: {self.kind} ({self.message})"


def check_mode(mode: str | None, *, nodes: int, queue: str | None) -> str:
    """--gang auto|native|off, checked against the other flags before any cluster call."""
    value = (mode or "auto").strip().lower()
    if value not in MODES:
        raise UsageError(f"--gang {mode!r}: use auto (native where the server has it), native or off")
    if value == "native" and nodes < 2:
        raise UsageError("--gang native needs --nodes 2 or more (one pod is always scheduled whole); drop --gang")
    if value == "native" and queue:
        raise UsageError(
            f"--gang native and --queue {queue}: Kueue admits the Job whole by itself and owns its suspension; "
            "give one of them"
        )
    return value


# --------------------------------------------------------------------------------------------------------
# Detection


def served(result: Completed | TaoError | None) -> tuple[bool, str]:
    """From the discovery call: are PodGroups served at scheduling.k8s.io/v1beta1? (served, why not)."""
    if result is None:
        return False, "not checked"
    if isinstance(result, TaoError):
        if "could not find the requested resource" in result.message or "NotFound" in result.message:
            return False, f"{API_VERSION} is not served by this API server"
        return False, f"cannot read the discovery of {API_VERSION} ({_short(result.message)})"
    try:
        data = json.loads(result.stdout) if result.stdout.strip() else {}
    except json.JSONDecodeError:
        return False, f"the discovery document of {API_VERSION} is not JSON"
    resources = {str(r.get("name")) for r in (data or {}).get("resources") or [] if isinstance(r, Mapping)}
    if "podgroups" not in resources:
        return False, f"{API_VERSION} serves no podgroups (the GenericWorkload feature gate is off)"
    return True, ""


def probe_job(nodes: int) -> dict[str, Any]:
    """The Job a server dry run is asked to accept with spec.scheduling (never created)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "generateName": "kubectl-tao-gang-check-",
            "labels": {contract.MANAGED_BY_LABEL: contract.MANAGED_BY},
        },
        "spec": {
            "completionMode": "Indexed",
            "completions": nodes,
            "parallelism": nodes,
            "suspend": True,
            "scheduling": scheduling_field(nodes),
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "check", "image": "registry.k8s.io/pause:3.10"}],
                }
            },
        },
    }


def dry_run_call(namespace: str, nodes: int) -> tuple[list[str], dict[str, Any]]:
    return (
        ["create", "--dry-run=server", "-f", "-", "-n", namespace, "-o", _DRY_RUN_TEMPLATE],
        {"namespaced": False, "stdin": json.dumps(probe_job(max(nodes, 2)))},
    )


def topology_dry_run_call(namespace: str, nodes: int, topology_key: str) -> tuple[list[str], dict[str, Any]]:
    """A server dry run of a PodGroup with a topology constraint: the API server keeps the field only with the
    TopologyAwareWorkloadScheduling feature gate on (it drops it from the PodGroups the Job controller makes
    otherwise, while the Job itself keeps it)."""
    group = {
        "apiVersion": API_VERSION,
        "kind": "PodGroup",
        "metadata": {"generateName": "kubectl-tao-topology-check-",
                     "labels": {contract.MANAGED_BY_LABEL: contract.MANAGED_BY}},
        "spec": {"schedulingPolicy": {"gang": {"minCount": max(nodes, 2)}},
                 "schedulingConstraints": {"topology": [{"key": topology_key}]}},
    }
    return (
        ["create", "--dry-run=server", "-f", "-", "-n", namespace, "-o", _TOPOLOGY_TEMPLATE],
        {"namespaced": False, "stdin": json.dumps(group)},
    )


def kept(result: Completed | TaoError) -> Support:
    """From the dry run: did the API server keep spec.scheduling.schedulingPolicy.gang?"""
    if isinstance(result, TaoError):
        return Support(False, f"a server dry run of a Job with spec.scheduling failed ({_short(result.message)})")
    if result.stdout.strip() == "gang":
        return Support(True, f"the API server keeps Job spec.scheduling and serves {API_VERSION} PodGroups")
    return Support(False, "the API server drops Job spec.scheduling (the WorkloadWithJob feature gate is off)")


def detect(
    kc: Kubectl, namespace: str, discovery: Completed | TaoError | None, nodes: int, topology_key: str | None = None,
    *, dry_run: Callable[[], Completed | TaoError] | None = None,
) -> Support:
    """Native gang support, from the discovery result the caller read in its first round trip; the dry run
    follows only where PodGroups are served (`dry_run`: its answer, when the caller started it already)."""
    if isinstance(discovery, ClusterUnreachableError):
        raise discovery  # an unreachable server says nothing about gang support
    ok, why = served(discovery)
    if not ok:
        return Support(False, why)
    answer = dry_run() if dry_run is not None else _dry_run(kc, *dry_run_call(namespace, nodes))
    if isinstance(answer, ClusterUnreachableError):
        raise answer
    support = kept(answer)
    if not support.native or not topology_key:
        return support
    answer = _dry_run(kc, *topology_dry_run_call(namespace, nodes, topology_key))
    return support.replaced(topology=isinstance(answer, Completed) and answer.stdout.strip() == "topology")


def _dry_run(kc: Kubectl, args: list[str], kwargs: dict[str, Any]) -> Completed | TaoError:
    try:
        return kc.run(args, **kwargs)
    except ClusterUnreachableError:
        raise
    except TaoError as exc:
        return exc


def choose(
    nodes: int, queue: str | None, support: Support | None, mode: str = "auto", topology: Any = None
) -> Mechanism:
    """The mechanism for a job of `nodes` ranks (see the module docstring). `support` None: not checked.
    `topology` (core/topology.Topology, --topology without --queue): a required one is kept by a native gang
    whose server keeps Job spec.scheduling.schedulingConstraints, else refused (UsageError); a preferred one is
    never set (the API has no preference), the plan warned about it."""
    mechanism = _choose(nodes, queue, support, mode)
    if topology is None or not topology.required or nodes < 2 or queue:
        return mechanism
    label = topology.label
    if mechanism.kind == NATIVE and (support is None or support.topology):
        return mechanism.replaced(
            topology_key=label,
            message=f"{mechanism.message}; every rank in one {label} domain (Job spec.scheduling topology)",
        )
    why = (
        f"this API server gang-schedules Jobs but drops the topology constraints of their PodGroups; {TOPOLOGY_HINT}"
        if mechanism.kind == NATIVE
        else f"no native gang here ({mechanism.message})"
    )
    raise UsageError(
        f"--topology {label}: nothing keeps every rank in one {label} domain without --queue: {why}; add --queue "
        f"with a LocalQueue whose ResourceFlavor names a Topology, or ask for --topology {label}:preferred"
    )


def _choose(nodes: int, queue: str | None, support: Support | None, mode: str) -> Mechanism:
    if nodes < 2:
        return Mechanism(NONE, "one rank: its pod is scheduled whole")
    if queue:
        return Mechanism(KUEUE, f"Kueue admits the Job whole from LocalQueue {queue}, within its quota")
    if mode == "off":
        return Mechanism(NONE, f"--gang off: {NONE_GUARD}")
    if support is None and mode == "native":
        return Mechanism(NATIVE, "--gang native, not checked without the cluster: Job spec.scheduling asks the "
                         f"scheduler to bind all {nodes} ranks together or none", min_count=nodes)
    if support is None:
        return Mechanism(NONE, f"not checked without the cluster; {NONE_GUARD}")
    if support.native:
        return Mechanism(
            NATIVE,
            f"the scheduler binds all {nodes} ranks together or none; {support.detail}",
            min_count=nodes,
        )
    if mode == "native":
        raise UsageError(f"--gang native: this cluster does not gang-schedule Jobs: {support.detail}; {ENABLE_HINT}, "
                         "or use --gang auto / --queue")
    return Mechanism(NONE, f"this cluster does not gang-schedule Jobs: {support.detail}; {NONE_GUARD}")


def scheduling_field(min_count: int, topology_key: str | None = None) -> dict[str, Any]:
    field: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if topology_key:
        field["schedulingConstraints"] = {"topology": [{"key": topology_key}]}
    return field


def apply(objects: Sequence[dict[str, Any]], mechanism: Mechanism) -> list[dict[str, Any]]:
    """The objects with spec.scheduling on the Indexed Job when the mechanism is native (copies, not in place)."""
    if mechanism.kind != NATIVE or not mechanism.min_count:
        return list(objects)
    out = []
    for obj in objects:
        if obj.get("kind") == "Job" and (obj.get("spec") or {}).get("completionMode") == "Indexed":
            field = scheduling_field(mechanism.min_count, mechanism.topology_key)
            obj = {**obj, "spec": {**obj["spec"], "scheduling": field}}
        out.append(obj)
    return out


# --------------------------------------------------------------------------------------------------------
# What the scheduler says about a native gang


@record
class GangView(Value):
    """A Job's PodGroup (and Workload) as status and explain show them."""

    podgroup: str | None
    workload: str | None
    policy: str  # gang | basic | unknown
    min_count: int | None
    state: str  # Scheduled | Waiting | Preempted | SchedulerError | Pending | NoPodGroup
    reason: str  # the condition's reason, as the scheduler wrote it
    message: str  # the scheduler's own message
    summary: str  # one line for people (status adds the scheduler's message to it)

    def to_dict(self) -> dict[str, Any]:
        return plain(self)


def groups_call(namespace: str) -> tuple[list[str], dict[str, Any]]:
    """The namespace's PodGroups and Workloads in one call, for the caller's `Kubectl.run_many`."""
    return (["get", f"{PODGROUPS},{WORKLOADS}", "-n", namespace, "-o", "json"], {"namespaced": False})


def _owned_by(obj: Mapping[str, Any], uid: str | None, name: str) -> bool:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") != "Job" or not ref.get("controller"):
            continue
        if (ref.get("uid") == uid) if uid else (ref.get("name") == name):
            return True
    return False


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return condition
    return None


def _policy(spec: Mapping[str, Any]) -> tuple[str, int | None]:
    policy = spec.get("schedulingPolicy") or {}
    if "gang" in policy:
        count = (policy.get("gang") or {}).get("minCount")
        return "gang", int(count) if isinstance(count, int) else None
    if "basic" in policy:
        return "basic", None
    return "unknown", None


def view(job: Mapping[str, Any], groups: Any, pods: Sequence[Mapping[str, Any]] = ()) -> GangView | None:
    """The Job's PodGroup and Workload from `groups` (a List of both kinds), or None when the Job does not ask
    for a gang. A gang Job whose PodGroup is not there (yet, or the controller lacks WorkloadWithJob) says so."""
    spec = job.get("spec") or {}
    asked, asked_count = _policy(spec.get("scheduling") or {})
    if asked != "gang":
        return None
    meta = job.get("metadata") or {}
    uid, name = meta.get("uid"), str(meta.get("name") or "")
    raw = groups.get("items") if isinstance(groups, Mapping) else None
    items = [i for i in raw or [] if isinstance(i, Mapping)]
    wanted = {str(((p.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName") or "") for p in pods} - {""}
    podgroup = next(
        (i for i in items if i.get("kind") == "PodGroup"
         and (_owned_by(i, uid, name) or (i.get("metadata") or {}).get("name") in wanted)),
        None,
    )
    workload = next(
        (i for i in items if i.get("kind") == "Workload"
         and (_owned_by(i, uid, name) or ((i.get("spec") or {}).get("controllerRef") or {}).get("name") == name)),
        None,
    )
    workload_name = str((workload.get("metadata") or {}).get("name")) if workload else None
    if podgroup is None:
        total = asked_count or int(spec.get("parallelism") or 1)
        return GangView(
            None, workload_name, "gang", asked_count, "NoPodGroup", "", "",
            f"gang of {total} asked for, but no PodGroup exists for the Job yet: the Job controller creates it "
            "before the pods (it needs the WorkloadWithJob feature gate)",
        )
    pg_spec = podgroup.get("spec") or {}
    policy, count = _policy(pg_spec)
    count = count or asked_count
    pg_name = str((podgroup.get("metadata") or {}).get("name") or "")
    if workload_name is None:
        workload_name = str((pg_spec.get("workloadRef") or {}).get("workloadName") or "") or None
    disrupted = _condition(podgroup, DISRUPTION)
    scheduled = _condition(podgroup, SCHEDULED)
    ranks = f"{count} ranks" if count else "the gang"
    if disrupted is not None and disrupted.get("status") == "True":
        reason, message = str(disrupted.get("reason") or ""), _one_line(disrupted.get("message"))
        return GangView(pg_name, workload_name, policy, count, "Preempted", reason, message,
                        f"the gang is being disrupted ({reason}): {message}".rstrip(": "))
    if scheduled is None:
        return GangView(pg_name, workload_name, policy, count, "Pending", "", "",
                        f"waiting for the scheduler to place {ranks} together")
    reason, message = str(scheduled.get("reason") or ""), _one_line(scheduled.get("message"))
    if scheduled.get("status") == "True":
        return GangView(pg_name, workload_name, policy, count, "Scheduled", reason, message,
                        f"all {ranks} were placed together")
    if reason == "SchedulerError":
        return GangView(pg_name, workload_name, policy, count, "SchedulerError", reason, message,
                        f"the scheduler could not place the gang: {message}")
    return GangView(pg_name, workload_name, policy, count, "Waiting", reason, message,
                    f"waiting until {ranks} fit together; no pod is bound meanwhile")


def _one_line(text: Any, limit: int = 400) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _short(text: str) -> str:
    return _one_line(text, 160)


def annotate(status: Any, job: Mapping[str, Any], groups: Any, pods: Sequence[Mapping[str, Any]]) -> None:
    """Add the gang view to a status.JobStatus; a pending gang's message becomes the gang's own reason."""
    found = view(job, groups, pods)
    if found is None:
        return
    status.gang = found.to_dict()
    waiting = found.state in ("Waiting", "Pending", "NoPodGroup", "SchedulerError")
    if status.state == "PENDING" and waiting and status.reason in _SCHEDULING_REASONS:
        # The pods' own reason is kept when it names the shortage (explain's findings key on it).
        status.reason = status.reason if status.reason in _SCHEDULER_SAID else "GangWaiting"
        said = f" (scheduler: {found.message})" if found.message and found.state == "Waiting" else ""
        status.message = found.summary + said


def describe(gang: Mapping[str, Any]) -> str:
    """One line for `status`: `native gang, PodGroup NAME (minCount N): <summary>`."""
    parts = ["native gang"]
    if gang.get("podgroup"):
        parts.append(f"PodGroup {gang['podgroup']}")
    head = ", ".join(parts) + (f" (minCount {gang['min_count']})" if gang.get("min_count") else "")
    return f"{head}: {gang.get('summary') or gang.get('state')}"


def finding(found: GangView, *, gpus: Any = None) -> Any:
    """explain's finding for a native gang that is not placed yet (None once it is)."""
    from kubectl_tao.diagnosis.diagnose import Finding

    if found.state == "Scheduled":
        return None
    where = f"PodGroup {found.podgroup}" if found.podgroup else "no PodGroup"
    evidence = f"{where}: {SCHEDULED}=False ({found.reason}): {found.message}" if found.reason else where
    count = found.min_count or 0
    fit = f"`kubectl tao fit --gpus {gpus if gpus is not None else 'G'} --nodes {count or 'N'}`"
    if found.state == "NoPodGroup":
        return Finding(
            "the Job asks for native gang scheduling but has no PodGroup, so none of its pods is created",
            evidence,
            "the kube-controller-manager needs the WorkloadWithJob feature gate (and the API server "
            f"{API_VERSION}); ask the cluster admin, or cancel and resubmit with --gang off or --queue",
            "gang-no-podgroup",
        )
    if found.state == "SchedulerError":
        return Finding(
            "the scheduler failed to place the gang",
            evidence,
            "read the scheduler's message above; fix the pod template or ask the cluster admin",
            "gang-scheduler-error",
        )
    return Finding(
        f"native gang scheduling holds all {count or 'the'} ranks until they fit together; no pod is bound and no "
        "GPU is held meanwhile",
        evidence,
        f"nothing to repair: it starts whole as soon as {count or 'N'} nodes have the GPUs free ({fit} says whether "
        "that is now, later or never); or cancel and ask for fewer nodes",
        "gang-waiting",
    )
