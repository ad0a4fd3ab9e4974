"""How each gate judges: what it saw -> Verdicts, pure. The gate list, with each gate's reads and how its
answers become what it saw, is gates/checks.py; `submit`, `preflight` and `fit` all go through it.

A Verdict is OK (submit says nothing; preflight prints OK), SKIPPED (nothing was judged: preflight says why),
WARN (submit prints it as a warning and keeps it in the record; preflight prints WARN) or REFUSE (submit stops
with `error`, whose class is the exit code: 1 a gate refused, 2 bad input, 3 unreachable, 4 never fits;
preflight prints MISSING). `message` and `fix` read as one line, `text`, which is what submit prints;
preflight prints the fix after " -- ".

A judge never asks the cluster: its request (GateRequest) and what the gate saw are all it knows. Where a
verb asks more than submit acts on (preflight's survey of the cluster's GPUs and gang mechanism), the judge
says so by `request.verb`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubectl_tao.core import contract
from kubectl_tao.core.errors import (
    ClusterUnreachableError,
    CredentialsRefusedError,
    GateError,
    NeverFitsError,
    TaoError,
)
from kubectl_tao.core.valueclass import Value, record
from kubectl_tao.gates.gaterequest import NO_KUBECONFIG, PREFLIGHT, SUBMIT, GateRequest

if TYPE_CHECKING:
    from kubectl_tao.gates.gatefacts import (
        ClusterSeen,
        FitSeen,
        GangSeen,
        GpusSeen,
        NodeRuntimeSeen,
        PermissionsSeen,
        QueueSeen,
        RestartsSeen,
    )

OK, SKIP, WARN, REFUSE = "OK", "SKIPPED", "WARN", "REFUSE"
PRIVATE_REGISTRIES = ("nvcr.io",)
GET_KUBECONFIG = (
    "`aws eks update-kubeconfig`, `gcloud container clusters get-credentials`, `az aks get-credentials`, or your "
    "admin's file"
)
GPU_OPERATOR_FIX = (
    "install the NVIDIA GPU Operator or device plugin: "
    "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html"
)


@record(frozen=True)
class Verdict(Value):
    status: str  # OK | WARN | REFUSE
    message: str
    fix: str = ""
    error: TaoError | None = None  # REFUSE: what submit raises
    gate: str = ""  # the gate's name, set by the runner (gates/checks.py)

    @property
    def text(self) -> str:
        return f"{self.message}; {self.fix}" if self.fix else self.message


def ok(message: str) -> Verdict:
    return Verdict(OK, message)


def skipped(message: str) -> Verdict:
    return Verdict(SKIP, message)


def warn(message: str, fix: str = "") -> Verdict:
    return Verdict(WARN, message, fix)


def refuse(message: str, fix: str = "", kind: type[TaoError] = GateError) -> Verdict:
    verdict = Verdict(REFUSE, message, fix)
    return verdict.replaced(error=kind(verdict.text))


def refused(error: TaoError) -> Verdict:
    """ERROR as a refusal (a read that failed: submit raises it as it is, exit code and all)."""
    return Verdict(REFUSE, error.message, error=error)


# ------------------------------------------------------------------------------------------- judges


def cluster(request: GateRequest, seen: ClusterSeen) -> list[Verdict]:
    """preflight: the server version, or one line saying which kubeconfig and context kubectl tried, what it
    said, and the one fix (exit 3: nothing else can be checked without a cluster)."""
    if seen.version is not None:
        return [ok(f"reachable, Kubernetes {seen.version.text}")]
    error = seen.error
    if not isinstance(error, ClusterUnreachableError):
        why = seen.unreadable or (error.message if isinstance(error, TaoError) else "no answer")
        return [refuse(f"cannot read the server version: {why}")]
    where = request.kubeconfig or "the kubeconfig"
    tried = f"context {request.context} in {where}" if request.context else where
    if error.no_config and request.kubeconfig and not request.context and NO_KUBECONFIG not in request.kubeconfig:
        return [refuse(f"no context selected in {where}: kubectl fell back to localhost:8080",
                       "pick one (`kubectl config get-contexts`, then --context NAME or `kubectl config use-context "
                       "NAME`)", kind=ClusterUnreachableError)]
    if error.no_config:
        return [refuse(f"no cluster configured: {error.detail}", f"get your cluster's kubeconfig ({GET_KUBECONFIG}), "
                       "then pass --kubeconfig FILE or set $KUBECONFIG", kind=ClusterUnreachableError)]
    server = f" {request.server}" if request.server else ""
    if isinstance(error, CredentialsRefusedError):
        return [refuse(f"the API server{server} refused the credentials of {tried}: {error.detail}",
                       f"refresh them ({GET_KUBECONFIG}), then check with `kubectl get nodes`",
                       kind=ClusterUnreachableError)]
    return [refuse(f"cannot reach the API server{server} ({tried}): {error.detail}",
                   "start the cluster or pick the right one (`kubectl config get-contexts`, then --context NAME)",
                   kind=ClusterUnreachableError)]


def permissions(request: GateRequest, seen: PermissionsSeen) -> list[Verdict]:
    """Every verb the job's objects will need (create and patch to launch, delete to roll back and cancel, get
    and list to follow it): a role that could create but not delete is refused before anything exists."""
    ns = request.namespace
    if seen.unchecked:
        return [refuse(
            f"could not check your permissions in namespace {ns} ({seen.unchecked}); submit needs to know it may "
            "create, patch and delete what it creates before it creates anything"
        )]
    if seen.missing:
        names = ", ".join(seen.missing)
        return [refuse(
            f"permission denied: you may not {names} in namespace {ns}; submit needs them to launch the job, to "
            "remove it if a later step fails, and to follow or cancel it (check with `kubectl auth can-i "
            f"{seen.missing[0]} -n {ns}`)",
            "ask a cluster admin for a Role that grants them, or use -n",
        )]
    found = [ok(f"you may {_verbs_by_resource(seen.needed)} in namespace {ns}")]
    if seen.optional_missing:
        names = _verbs_by_resource(seen.optional_missing)
        found.append(warn(
            f"optional: you may not {names} in namespace {ns}; reading from a running job's pods needs them "
            "(exec, port-forward, service proxy: progress, GPU use, TensorBoard; a helper pod: `data push`, "
            "`results`; Secrets: a storage tier C job's `results` after its Job is gone); jobs still run",
            "ask a cluster admin for a Role that grants them",
        ))
    elif seen.optional:
        found.append(ok(f"optional: you may {_verbs_by_resource(seen.optional)} in namespace {ns}"))
    return found


def _verbs_by_resource(texts: tuple[str, ...]) -> str:
    """`create jobs.batch`, `get jobs.batch`, `list pods` -> `create and get jobs.batch; list pods`."""
    verbs: dict[str, list[str]] = {}
    for text in texts:
        verb, resource = text.split(" ", 1)
        verbs.setdefault(resource, []).append(verb)
    return "; ".join(f"{_and(names)} {resource}" for resource, names in verbs.items())


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def gpu_operator(request: GateRequest, seen: GpusSeen) -> list[Verdict]:
    """A capacity read that could not list nodes or pods warns (the fit gate then judges with what it has, or
    not at all); preflight also says whether the cluster offers GPUs to pods at all."""
    capacity = seen.capacity
    found = []
    if request.verb == PREFLIGHT and seen.counted is not None:
        from kubectl_tao.gates import gpuinventory

        nodes = gpuinventory.gate_nodes(seen.counted, seen.dra)
        total = sum(n.allocatable for n in nodes)
        hint = gpuinventory.no_gpu_hint(seen.dra)
        if total == 0 and hint:
            found.append(warn(f"no node offers {contract.GPU_RESOURCE} to pods", hint))
        elif total == 0:
            note = f" ({seen.dra_note})" if seen.dra_note else ""
            found.append(warn(f"no {contract.GPU_RESOURCE} allocatable on this cluster{note}", GPU_OPERATOR_FIX))
        else:
            gpu_nodes = sum(1 for n in nodes if n.allocatable > 0)
            dra = seen.dra
            via = f" (DRA devices via DeviceClass {dra.serving_class} included)" if dra and dra.serving_class and (
                dra.total) else ""
            found.append(ok(f"{total} {contract.GPU_RESOURCE} allocatable on {gpu_nodes} node(s){via}"))
    if capacity.warning:
        found.append(warn(capacity.warning))
    return found


def node_runtime(request: GateRequest, seen: NodeRuntimeSeen) -> list[Verdict]:
    """preflight: the GPU nodes' NVIDIA driver and CUDA (GPU Feature Discovery's labels) against the minimums, and
    their container runtime where the cluster injects GPUs through CDI (gates/noderuntime.py). Every GPU node too
    old is MISSING (no node can run a TAO container); some too old, or some not labelled, is a WARN naming them."""
    from kubectl_tao.gates import noderuntime as nr

    if seen.nodes is None:
        return []  # the nodes could not be listed: the gpu-operator gate warned
    if not seen.nodes:
        what = f" labelled {contract.GPU_PRODUCT_LABEL}={request.gpu_product}" if request.gpu_product else ""
        return [skipped(f"no GPU node{what} to judge")]
    classes = seen.classes or ()
    cdi = nr.uses_cdi(classes)
    minimums = dict(min_driver=request.min_driver, min_cuda=request.min_cuda)
    bad = {n.name: nr.problems(n, cdi=cdi, **minimums) for n in seen.nodes}
    bad = {name: found for name, found in bad.items() if found}
    unknown = [n.name for n in seen.nodes if not n.driver and n.name not in bad]
    good = [n for n in seen.nodes if n.name not in bad and n.name not in unknown]
    need = f"driver >= {request.min_driver}, CUDA >= {request.min_cuda}"
    found: list[Verdict] = []
    if bad:
        names = sorted(bad)
        text = "; ".join(f"{name}: {', '.join(bad[name])}" for name in names[:3])
        text += f"; and {len(names) - 3} more" if len(names) > 3 else ""
        if len(bad) == len(seen.nodes):
            found.append(refuse(f"no GPU node can run a TAO container ({need}): {text}",
                                "upgrade what is named: the driver (the GPU Operator's driver version, or the node "
                                "image) or the container runtime"))
        else:
            found.append(warn(f"{len(bad)} of {len(seen.nodes)} GPU node(s) cannot run a TAO container ({need}): "
                              f"{text}", "upgrade them, or keep jobs off them (--gpu-product, --node-selector)"))
    if unknown:
        found.append(warn(
            f"driver and CUDA of {len(unknown)} GPU node(s) not known: {nr.listed(unknown)} carry no GPU Feature "
            f"Discovery labels ({contract.GFD_DRIVER_PREFIXES[0]}*)",
            f"deploy GPU Feature Discovery (the GPU Operator and the device plugin's Helm chart include it), or "
            f"check the node image has {need} and set TAO_K8S_SKIP_NODE_RUNTIME_CHECK=1",
        ))
    if good:
        cuda = nr.summary(good, "cuda")
        found.append(ok(f"{len(good)} GPU node(s) meet {need}: driver {nr.summary(good, 'driver')}"
                        + (f", CUDA {cuda}" if cuda else "")))
    found.append(ok(_runtime_line(seen, cdi)))
    return found


def _runtime_line(seen: NodeRuntimeSeen, cdi: bool) -> str:
    from kubectl_tao.gates import noderuntime as nr

    assert seen.nodes is not None
    runtimes = nr.summary(seen.nodes, "runtime_text") or "not reported"
    if seen.classes is None:
        classes = f"RuntimeClasses not read ({seen.classes_note})" if seen.classes_note else "RuntimeClasses not read"
    else:
        nvidia = [c for c in seen.classes if c.startswith(contract.NVIDIA_RUNTIME_CLASS)]
        classes = f"RuntimeClass {', '.join(nvidia)}" if nvidia else "no NVIDIA RuntimeClass"
        classes += "; GPUs injected through CDI" if cdi else ""
    return f"container runtime on the GPU nodes: {runtimes}; {classes}"


def version(request: GateRequest, seen: Any) -> list[Verdict]:
    """The server version (serverversion.ServerVersion) the job needs: multi-node 1.28, --retries-per-index 1.29."""
    from kubectl_tao.core import serverversion

    minimum = request.min_version or serverversion.MULTI_NODE_MIN_VERSION
    feature = request.min_version_feature or "multi-node jobs"
    too_old = serverversion.too_old(seen, minimum, feature)
    if too_old:
        return [refuse(too_old)]
    why = serverversion.why_needed(feature)
    need = ".".join(str(part) for part in minimum)
    return [ok(f"Kubernetes {seen.text} >= {need}" + (f" ({why})" if why else ""))]


def nccl_probe(request: GateRequest, seen: str | None) -> list[Verdict]:
    """A multi-node job on a cluster whose last NCCL probe failed or hung, or that was never probed: a warning
    (SEEN: store/probecache.py's words; None when the cache has nothing against the cluster)."""
    return [warn(seen)] if seen else [ok("the NCCL probe cache has nothing against this cluster")]


def references(request: GateRequest, found: Mapping[tuple[str, str], tuple[str, set[str]]]) -> list[Verdict]:
    """The PVC (exists and Bound), the Secrets and their keys, the image-pull Secret. FOUND: (kind, name) ->
    (phase, key names), names only: no value is ever read."""
    ns = request.namespace
    out = []
    if request.pvc:
        pvc = found.get(("PersistentVolumeClaim", request.pvc))
        if pvc is None:
            return [refuse(
                f"--pvc: PersistentVolumeClaim {request.pvc!r} not found in namespace {ns}",
                "create it (storage tier A mounts a Bound claim holding the data) or choose --storage-tier C",
            )]
        if pvc[0] != "Bound":
            return [refuse(
                f"--pvc: PersistentVolumeClaim {request.pvc!r} is {pvc[0]}, not Bound",
                "the pod would stay Pending until it binds (check its StorageClass / PersistentVolume)",
            )]
        out.append(ok(f"PersistentVolumeClaim {request.pvc} is Bound"))
    for name, keys in sorted(request.secret_refs.items()):
        secret = found.get(("Secret", name))
        if secret is None:
            return [refuse(
                f"Secret {name!r} not found in namespace {ns}",
                "create it first (values from stdin, e.g. `kubectl create secret generic NAME "
                "--from-env-file=/dev/stdin`)",
            )]
        missing = sorted(set(keys) - secret[1])
        if missing:
            return [refuse(f"Secret {name!r} lacks key(s) {', '.join(missing)}", "add them or drop them")]
        out.append(ok(f"Secret {name} has key(s) {', '.join(sorted(keys))}" if keys else f"Secret {name} exists"))
    pull = request.image_pull_secret
    if pull and ("Secret", pull) not in found:
        return [refuse(
            f"--image-pull-secret: Secret {pull!r} not found in namespace {ns}",
            f"create it with `kubectl tao secret image-pull {pull} --registry <host>`",
        )]
    if pull and pull not in request.secret_refs:
        out.append(ok(f"image-pull Secret {pull} exists"))
    return out


def queue(request: GateRequest, seen: QueueSeen) -> list[Verdict]:
    """The LocalQueue's notes, and a ClusterQueue that admits nothing: "never" here when no capacity was read
    (else the capacity gate says it, with the quota counted)."""
    from kubectl_tao.gates import quota as quotas

    found = [warn(note) for note in seen.notes]
    quota = seen.quota
    if quota is None:
        return found
    if quota.inactive:
        if not seen.capacity_known:
            found.append(refuse(quotas.inactive_queue_message(quota), kind=NeverFitsError))
        return found
    found.append(ok(f"LocalQueue {seen.local_queue}: ClusterQueue {quota.cluster_queue}, {quotas.room_text(quota)}"))
    return found


def fit_verdict(request: GateRequest, counted: Any, dra: Any = None, quota: Any = None) -> Any:
    """The fit verdict (gpufit.FitVerdict) of the request over the nodes the gate read with the GPUs their pods
    hold (gpufit.node_gpus, counted once for every verdict of a run), DRA devices (gpuinventory.read_dra, or
    None) and a queue's quota (or None)."""
    from kubectl_tao.gates import gpufit, gpuinventory

    return gpufit.fit(
        gpuinventory.gate_nodes(counted, dra),
        request.gpus,
        request.nodes,
        node_selector=request.node_selector or None,
        tolerations=request.tolerations or None,
        gpu_product=request.gpu_product,
        quota=quota,
        no_gpu_hint=gpuinventory.no_gpu_hint(dra),
        topology=request.topology,
    )


def capacity(request: GateRequest, seen: FitSeen | None) -> list[Verdict]:
    """"never" refuses (exit 4); "queue" warns, or refuses with --require-fit-now, which also refuses when the
    pods could not be listed (whether GPUs are free now is then unknown). Nothing when no capacity was read."""
    from kubectl_tao.gates.gpufit import FITS, NEVER, QUEUE

    if seen is None or seen.verdict is None:
        return []
    verdict = seen.noted
    if verdict.verdict == NEVER:
        return [refuse(verdict.message, kind=NeverFitsError)]
    if request.require_fit_now and verdict.verdict != FITS:
        return [refuse(f"{verdict.message} (--require-fit-now)")]
    if request.require_fit_now and not seen.usage_known:
        return [refuse(
            "--require-fit-now: cannot tell whether the GPUs are free now, as listing pods in all namespaces is "
            "forbidden",
            "ask for `list pods` cluster-wide, or drop --require-fit-now",
        )]
    return [warn(verdict.message) if verdict.verdict == QUEUE else ok(verdict.message)]


def gang(request: GateRequest, seen: GangSeen) -> list[Verdict]:
    """preflight, multi-node: which mechanism keeps the ranks from starting one by one; none warns (a partial
    start can hold GPUs). submit and fit print the mechanism themselves (it is not a verdict to act on)."""
    if request.verb != PREFLIGHT or request.nodes < 2:
        return []
    mechanism = seen.mechanism
    line = f"{mechanism.kind}: {mechanism.message}"
    if mechanism.kind == contract.GANG_NONE:
        return [warn(line, f"submit with --queue (Kueue), or {seen.enable_hint}")]
    return [ok(line)]


def restarts(request: GateRequest, seen: RestartsSeen) -> list[Verdict]:
    """--max-restarts needs container restart rules (RestartAllContainers): refused in one line where the server
    drops or refuses them (exit 2: the flag cannot apply here); preflight says whether they are available; fit
    reports it in its own output."""
    from kubectl_tao.core.errors import UsageError

    support = seen.support
    server = f"Kubernetes {seen.version}" if seen.version else "this API server"
    if support.available:
        return [ok(f"restarts in place (--max-restarts): available on {server}")] if request.verb == PREFLIGHT else []
    if request.max_restarts > 0 and request.verb == SUBMIT:
        return [refuse(
            f"--max-restarts {request.max_restarts}: {server} cannot restart a rank's containers in place: "
            f"{support.detail}",
            f"drop --max-restarts, or use {RESTARTS_NEED}",
            kind=UsageError,
        )]
    if request.verb == PREFLIGHT:
        return [warn(f"restarts in place (--max-restarts): not available on {server}: {support.detail}",
                     f"needs {RESTARTS_NEED}")]
    return []


RESTARTS_NEED = (
    "Kubernetes 1.36+ with the ContainerRestartRules and RestartAllContainersOnContainerExits feature gates on "
    "(their default)"
)


def dry_run(request: GateRequest, error: TaoError | None) -> list[Verdict]:
    """The server dry run of the job's objects (it rode with the permission reviews)."""
    return [] if error is None else [refused(dry_run_refused(error))]


def dry_run_refused(error: TaoError) -> TaoError:
    """The error of a refused server dry run, before any record opened (unreachable stays exit 3)."""
    if isinstance(error, ClusterUnreachableError):
        return error
    verdict = refuse(
        f"server dry run refused the job: {error.message}",
        "fix that and submit again (nothing was created, no record opened)",
    )
    assert verdict.error is not None
    return verdict.error


def registry_of(image: str) -> str:
    first = image.split("/", 1)[0]
    if "/" in image and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def image_pull(request: GateRequest, _seen: None = None) -> list[Verdict]:
    """An image on a registry that needs credentials, with no --image-pull-secret: a warning."""
    registry = registry_of(request.image)
    if registry in PRIVATE_REGISTRIES and not request.image_pull_secret:
        return [warn(
            f"image {request.image} is on {registry}, which needs credentials, and no --image-pull-secret was "
            f"given: the pod may stay in ImagePullBackOff (create one with `kubectl tao secret image-pull NAME "
            f"--registry {registry}`)"
        )]
    return []
