"""`kubectl tao probe nccl`: a small multi-node all_reduce job that says whether NCCL works between nodes.

The probe is an ordinary multi-node job: a job request (the job flags submit takes, launcher torchrun)
planned by `plan.build` and created by `submit.execute`, so every gate applies (fit x nodes, version, PVC,
pull Secret, secret lint, server dry-run) and a job record is opened (network_arch `nccl`, action `probe`).
Its own additions: the kubectl-tao.io/probe=nccl label and, without --pvc, an emptyDir workspace.
Each rank runs `torchrun ... --no-python python3 -c <templates/k8s/nccl-probe.py> SIZE ITERATIONS
TIMEOUT`: the script text is one container argument, never shell text. Outcomes:

  pass  the Job completed: every process got the right sum
  fail  the Job ended in ERROR (the reason is kept), or a watchdog removed it before every rank started
  hang  every rank had started and the Job was still not finished `timeout` seconds later: canceled

Without CUDA or NCCL in the pods (CPU nodes, a CPU-only torch) the script falls back to gloo on CPU and
each rank's last line says so (`result ok backend=gloo`); a pass reads those lines back. A gloo pass shows
that the pods, DNS and TCP between the nodes work and nothing about NCCL: the report and the cached entry
say `backend: gloo`, its NCCL settings are not applied to later submits, and multi-node submits still warn.

Results are cached per cluster, keyed by the API server URL and the server version, in
`$TAO_STATE_DIR/probes/nccl.json` (else `~/.tao/probes/nccl.json`). A cached result younger than 24 h
is reported instead of probing again (unless forced). A probe that never got every rank started says
nothing about NCCL and is not cached. `probe_warning` turns a cached fail or hang into the warning
that multi-node submits print.

On simulated nodes (the KWOK local cluster) no container runs: a pass there only shows the objects are
accepted, scheduled one rank per node and complete. Only real GPU nodes exercise NCCL.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubectl_tao.core import contract, templates
from kubectl_tao.core.ages import age_text
from kubectl_tao.core.errors import TaoError, UsageError
from kubectl_tao.core.serverversion import parse_server_version
from kubectl_tao.core.valueclass import Factory, Value, plain, record
from kubectl_tao.jobs import cancel as cancelling
from kubectl_tao.jobs import track, wait
from kubectl_tao.jobs.flags import job_request
from kubectl_tao.jobs.plan import Job, JobRequest, build
from kubectl_tao.jobs.submit import execute
from kubectl_tao.jobs.track import Observation, Tracked
from kubectl_tao.jobs.wait import PULL_REASONS
from kubectl_tao.k8s.kubectl import Kubectl
from kubectl_tao.manifests import render
from kubectl_tao.store import probecache
from kubectl_tao.store.probecache import FAIL, GLOO, HANG, NCCL, NCCL_ENV_RE, NOT_CARRIED, PASS, RESULTS

NETWORK_ARCH = "nccl"
ACTION = "probe"
PROBE_KIND = "nccl"
# NGC's PyTorch container: torch with NCCL, torchrun and python3 on PATH. Public on nvcr.io.
DEFAULT_IMAGE = "nvcr.io/nvidia/pytorch:25.01-py3"
SCRIPT_TEMPLATE = "nccl-probe.py"
MOUNT_PATH = "/workspace"
SCRATCH_CLAIM = "nccl-probe-scratch"  # the stand-in claim name of a probe without --pvc (an emptyDir instead)
DEFAULT_NODES = 2
DEFAULT_GPUS = 1
DEFAULT_TIMEOUT_S = 120
DEFAULT_PENDING_TIMEOUT_S = 600  # first pulls of the PyTorch image take minutes
DEFAULT_IMAGE_PULL_TIMEOUT_S = 300
SIZE_MIB = 64
ITERATIONS = 5
__all__ = ["FAIL", "HANG", "PASS", "RESULTS"]  # the outcomes, defined with the cache that keeps them
# Set through their own flags, which submit has too.
_NCCL_FLAG_VARS = {"NCCL_SOCKET_IFNAME": "--nccl-socket-ifname", "NCCL_IB_HCA": "--nccl-ib-hca"}
_DURATION_RE = re.compile(r"(\d{1,7})(s|m|h)?")
_UNIT_SECONDS = {None: 1, "s": 1, "m": 60, "h": 3600}
# The last line of each rank of templates/k8s/nccl-probe.py.
_RESULT_LINE_RE = re.compile(r"nccl-probe: rank \d+ result (?:ok|WRONG) backend=(nccl|gloo)\b")


# --------------------------------------------------------------------------------------------------
# Options


def parse_duration(value: object, flag: str) -> int:
    """`90`, `120s`, `5m`, `1h` -> seconds (a positive whole number)."""
    text = str(value).strip()
    match = _DURATION_RE.fullmatch(text)
    if match is None or int(match.group(1)) == 0:
        raise UsageError(f"{flag} {value!r}: give a positive duration such as 90, 120s, 5m or 1h")
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2)]


@record(frozen=True)
class ProbeOptions(Value):
    nodes: int = DEFAULT_NODES
    gpus: int = DEFAULT_GPUS
    image: str = DEFAULT_IMAGE
    timeout_s: int = DEFAULT_TIMEOUT_S  # once every rank has started
    pending_timeout_s: int = DEFAULT_PENDING_TIMEOUT_S  # until every rank has started
    image_pull_timeout_s: int = DEFAULT_IMAGE_PULL_TIMEOUT_S
    image_pull_secret: str | None = None
    pvc: str | None = None  # mounted at /workspace when given (checks a ReadWriteMany claim too)
    nccl_socket_ifname: str | None = None
    nccl_ib_hca: str | None = None
    nccl_env: Mapping[str, str] = Factory(dict)
    annotations: Mapping[str, str] = Factory(dict)
    master_port: int = render.DEFAULT_MASTER_PORT
    node_selector: Mapping[str, str] = Factory(dict)  # --node-selector, --gpu-product
    tolerations: tuple[Mapping[str, Any], ...] = ()  # --toleration (the GPU taint's is always added)


def validate_options(opts: ProbeOptions) -> ProbeOptions:
    """Checks that need no cluster; the rendered spec validates the rest."""
    if isinstance(opts.nodes, bool) or not isinstance(opts.nodes, int) or not 2 <= opts.nodes <= render.MAX_NODES:
        raise UsageError(
            f"--nodes {opts.nodes!r}: the probe needs 2 to {render.MAX_NODES} nodes (it checks NCCL between nodes)"
        )
    if isinstance(opts.gpus, bool) or not isinstance(opts.gpus, int) or not 1 <= opts.gpus <= render.MAX_GPUS_PER_NODE:
        raise UsageError(
            f"--gpus {opts.gpus!r}: give 1 to {render.MAX_GPUS_PER_NODE} GPUs per node (NCCL needs a GPU in every rank)"
        )
    for flag, seconds in (
        ("--timeout", opts.timeout_s),
        ("--pending-timeout", opts.pending_timeout_s),
        ("--image-pull-timeout", opts.image_pull_timeout_s),
    ):
        if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds <= 0:
            raise UsageError(f"{flag} {seconds!r}: give a positive number of seconds")
    for position, (key, value) in enumerate(opts.nccl_env.items(), start=1):
        if key in _NCCL_FLAG_VARS:
            raise UsageError(f"--nccl-env #{position} ({key}): use {_NCCL_FLAG_VARS[key]} instead")
        if NCCL_ENV_RE.fullmatch(key) is None:  # neither name nor value quoted: either may be a pasted secret
            raise UsageError(f"--nccl-env #{position}: only NCCL_* variables are passed (e.g. NCCL_DEBUG=INFO)")
        if not isinstance(value, str) or render.NCCL_VALUE_RE.fullmatch(value) is None:
            raise UsageError(
                f"--nccl-env #{position} ({key}) value must be 1-256 characters of letters, digits and "
                "_ . , : = ^ + -"
            )
    return opts


def nccl_settings(opts: ProbeOptions) -> dict[str, str]:
    """The NCCL environment a probe runs with, as cached with its result (debug logging left out)."""
    settings = {key: value for key, value in opts.nccl_env.items() if key not in NOT_CARRIED}
    if opts.nccl_socket_ifname:
        settings["NCCL_SOCKET_IFNAME"] = opts.nccl_socket_ifname
    if opts.nccl_ib_hca:
        settings["NCCL_IB_HCA"] = opts.nccl_ib_hca
    return dict(sorted(settings.items()))


# --------------------------------------------------------------------------------------------------
# Rendering (pure)


def probe_argv(timeout_s: int) -> list[str]:
    """What torchrun runs in each rank: python3 -c <the probe script> SIZE_MIB ITERATIONS TIMEOUT_S."""
    script = templates.load_template(SCRIPT_TEMPLATE)
    return ["--no-python", "python3", "-c", script, str(SIZE_MIB), str(ITERATIONS), str(timeout_s)]


def _pairs(values: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(f"{key}={value}" for key, value in values.items())


def _toleration_text(toleration: Mapping[str, Any]) -> str:
    """A toleration as --toleration writes it (KEY[=VALUE][:EFFECT]), the inverse of its parser."""
    text = str(toleration["key"])
    if toleration.get("operator", "Equal" if "value" in toleration else "Exists") == "Equal":
        text += f"={toleration.get('value', '')}"
    return f"{text}:{toleration['effect']}" if toleration.get("effect") else text


def probe_request(opts: ProbeOptions) -> JobRequest:
    """The probe as a job request: the job flags `submit` would be given for it. Without --pvc the claim is a
    stand-in that `_finish` swaps for an emptyDir, so no claim is ever referenced."""
    return job_request(
        image=opts.image,
        # torchrun's argument list, quoted so that render's shlex.split gives back exactly these items
        command=shlex.join(probe_argv(opts.timeout_s)),
        gpus=opts.gpus,
        nodes=opts.nodes,
        network_arch=NETWORK_ARCH,
        action=ACTION,
        pvc=opts.pvc or SCRATCH_CLAIM,
        mount_path=MOUNT_PATH,
        image_pull_secret=opts.image_pull_secret,
        annotation=_pairs(opts.annotations),
        master_port=opts.master_port,
        launcher="torchrun",
        nccl_socket_ifname=opts.nccl_socket_ifname,
        nccl_ib_hca=opts.nccl_ib_hca,
        nccl_env=_pairs(dict(sorted(opts.nccl_env.items()))),
        node_selector=_pairs(opts.node_selector),
        toleration=tuple(_toleration_text(t) for t in opts.tolerations),
        # ranks may start as far apart as the pending timeout allows (image pulls on different nodes)
        rendezvous_timeout=min(opts.pending_timeout_s, render.MAX_RENDEZVOUS_TIMEOUT),
    )


def _finish(opts: ProbeOptions) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    """What is the probe's own in its objects: the kubectl-tao.io/probe=nccl label, and without --pvc an
    emptyDir in place of the stand-in claim."""

    def finish(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        service, job = objects
        template = job["spec"]["template"]
        for meta in (service["metadata"], job["metadata"], template["metadata"]):
            meta.setdefault("labels", {})[contract.PROBE_LABEL] = PROBE_KIND
        if opts.pvc is None:
            pod = template["spec"]
            pod["volumes"] = [
                {"name": "workspace", "emptyDir": {}} if volume["name"] == "workspace" else volume
                for volume in pod["volumes"]
            ]
        return [service, job]

    return finish


def build_plan(opts: ProbeOptions, namespace: str) -> Job:
    """The Job of a probe: plan.build's, from the probe's job request. No server is given, so the NCCL
    settings of an earlier probe are not applied to this one; its warnings are about the stand-in claim
    (a given --pvc is checked by the PVC gate), so there are none."""
    validate_options(opts)
    plan = build(probe_request(opts), namespace, {}, finish=_finish(opts))
    return plan.replaced(pvc=opts.pvc, warnings=[], skip_probe_warning=True)


def render_probe(opts: ProbeOptions, namespace: str, job_name: str, record_id: str) -> list[dict[str, Any]]:
    """The headless Service and Indexed Job of the probe, labelled kubectl-tao.io/probe=nccl."""
    return build_plan(opts, namespace).render(job_name, record_id, None)


# --------------------------------------------------------------------------------------------------
# What to try next


@record(frozen=True)
class Hint(Value):
    flag: str  # how to set it on `kubectl tao probe nccl` ('' when it is not a setting)
    why: str

    def to_dict(self) -> dict[str, str]:
        return plain(self)


_NCCL_HINTS = (
    Hint(
        "--nccl-env NCCL_DEBUG=INFO",
        "NCCL logs the interfaces and transports it picks; read them with `kubectl tao logs {job}`",
    ),
    Hint(
        "--nccl-socket-ifname eth0",
        "pin the interface the pods reach each other on (ib0 for IPoIB, or ^lo,docker to exclude some); "
        "NCCL may pick one the other node cannot reach",
    ),
    Hint("--nccl-env NCCL_IB_DISABLE=1", "use TCP sockets when InfiniBand/RoCE is missing or not exposed to pods"),
    Hint("--nccl-env NCCL_P2P_DISABLE=1", "rule out GPU peer-to-peer inside a node (PCIe ACS, virtualized GPUs)"),
)


def hints_for(result: str, reason: str, exercised: bool, master_port: int, record_id: str | None = None) -> list[Hint]:
    """The NCCL settings (and checks) to try next for a probe outcome."""
    if result == PASS:
        return []
    nccl = [hint.replaced(why=hint.why.replace("{job}", record_id or "JOB")) for hint in _NCCL_HINTS]
    if not exercised:
        return [Hint("", f"NCCL was not exercised: {wait.fix_for(reason)}")]
    if reason == "RendezvousTimeout":
        return [
            Hint(
                "",
                f"let TCP {master_port} through between the job's pods (NetworkPolicy) and check that the "
                "headless Service's names resolve",
            ),
            nccl[0],
        ]
    return nccl


# --------------------------------------------------------------------------------------------------
# Reports and the cache


@record
class ProbeReport(Value):
    result: str  # pass | fail | hang
    reason: str
    message: str
    server: str
    version: str
    checked_at: str  # UTC, ISO 8601
    record_id: str | None
    nodes: int
    gpus: int
    image: str
    duration_s: float | None = None
    hints: list[Hint] = Factory(list)
    cached: bool = False
    exercised: bool = True  # every rank started; False: a watchdog fired first (not cached)
    settings: dict[str, str] = Factory(dict)  # the NCCL_* env the probe ran with
    backend: str = ""  # nccl | gloo, as the ranks said; "" when no rank said (simulated nodes)
    transport: str = ""  # with NCCL_DEBUG=INFO: the transports NCCL's channels used (NET/IB, NET/Socket, P2P)
    transport_warning: str = ""  # RDMA devices found and TCP sockets used

    def to_dict(self) -> dict[str, Any]:
        data = plain(self)
        data["hints"] = [hint.to_dict() for hint in self.hints]
        return data

    def to_entry(self) -> dict[str, Any]:
        data = self.to_dict()
        data.pop("cached")
        return data

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any], *, cached: bool = True) -> ProbeReport:
        hints = [
            Hint(str(h.get("flag", "")), str(h.get("why", "")))
            for h in entry.get("hints") or []
            if isinstance(h, Mapping)
        ]
        duration = entry.get("duration_s")
        return cls(
            result=str(entry["result"]),
            reason=str(entry.get("reason") or ""),
            message=str(entry.get("message") or ""),
            server=str(entry.get("server") or ""),
            version=str(entry.get("version") or ""),
            checked_at=str(entry["checked_at"]),
            record_id=entry.get("record_id") if isinstance(entry.get("record_id"), str) else None,
            nodes=int(entry.get("nodes") or 0),
            gpus=int(entry.get("gpus") or 0),
            image=str(entry.get("image") or ""),
            duration_s=float(duration) if isinstance(duration, int | float) else None,
            hints=hints,
            cached=cached,
            exercised=bool(entry.get("exercised", True)),
            settings=probecache.valid_settings(entry.get("settings")),
            backend=str(entry.get("backend")) if entry.get("backend") in (NCCL, GLOO) else "",
            transport=str(entry.get("transport") or "")[:200],
            transport_warning=str(entry.get("transport_warning") or "")[:600],
        )


# --------------------------------------------------------------------------------------------------
# Running it


def backend_from_logs(text: str) -> str:
    """gloo when any rank says it ran over gloo, nccl when the ranks that said anything all ran over NCCL,
    "" when none said (simulated nodes run no container)."""
    found = set(_RESULT_LINE_RE.findall(text))
    if GLOO in found:
        return GLOO
    return NCCL if found else ""


def read_backend(kc: Kubectl, tracked: Tracked, nodes: int) -> str:
    """The backend the probe's ranks ran over, from their last log lines; "" when they cannot be read."""
    return backend_from_logs(read_probe_logs(kc, tracked, nodes, tail=50))


DEBUG_TAIL = 3000  # with NCCL_DEBUG=INFO each rank prints some hundred lines before its result


def read_probe_logs(kc: Kubectl, tracked: Tracked, nodes: int, *, tail: int) -> str:
    """The last TAIL lines of every rank (one kubectl call); "" when they cannot be read."""
    from kubectl_tao.core.logs import kubectl_args

    if not tracked.namespace or not tracked.job_name:
        return ""
    args = kubectl_args(tracked.namespace, tracked.job_name, tail=tail, follow=False, rank=None, nodes=nodes)
    try:
        result = kc.run(args, namespaced=False, check=False, timeout=60)
    except TaoError:
        return ""
    return result.stdout if result.returncode == 0 else ""


def add_transport(report: ProbeReport, text: str) -> None:
    """With NCCL_DEBUG=INFO: the transport NCCL chose, and a warning when RDMA devices exist but sockets
    were used (diagnosis/nccldebug.py)."""
    from kubectl_tao.diagnosis import nccldebug

    net = nccldebug.read(text)
    report.transport = net.summary() if net.said else ""
    report.transport_warning = nccldebug.warning(net)


@record
class Waited(Value):
    result: str
    obs: Observation
    exercised: bool


def _started(obs: Observation, nodes: int) -> bool:
    """Every rank has left Pending (running, or already finished)."""
    live = obs.live or {}
    ranks = live.get("ranks") or []
    total = int(live.get("total") or nodes)
    return len([r for r in ranks if r.get("phase") in ("Running", "Succeeded", "Failed")]) >= total


def _pull_problem(obs: Observation) -> tuple[str, str] | None:
    if obs.reason in PULL_REASONS:
        return obs.reason, obs.message
    for rank in (obs.live or {}).get("ranks") or []:
        if rank.get("reason") in PULL_REASONS:
            return str(rank["reason"]), f"rank {rank.get('rank')}: {rank.get('message') or rank['reason']}"
    return None


def wait_for_probe(
    kc: Kubectl,
    store: Any,
    tracked: Tracked,
    opts: ProbeOptions,
    *,
    server: str,
    on_progress: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    interval: float = 2.0,
) -> Waited:
    """Follow the probe job: watchdogs until every rank has started, then `timeout_s` to finish."""
    start = clock()
    started_at: float | None = None
    pull = wait.Since()
    last = ""

    def step(obs: Observation, now: float) -> Waited | None:
        nonlocal started_at, last
        key = f"{obs.state}|{obs.reason}"
        if key != last:
            on_progress(wait.progress_line(obs, now - start))
            last = key
        if obs.state == "COMPLETE":
            return Waited(PASS, obs, True)
        if obs.state in ("ERROR", "CANCELED", "UNKNOWN"):
            return Waited(FAIL, obs, obs.state == "ERROR")
        if started_at is None and _started(obs, opts.nodes):
            started_at = now
        if started_at is not None:
            if now - started_at >= opts.timeout_s:
                message = (
                    f"NCCL probe hung: every rank had started and the all_reduce was not done after "
                    f"{opts.timeout_s}s; canceled"
                )
                cancelling.cancel(kc, store, tracked, server=server, wait=True, timeout=60, message=message)
                return Waited(HANG, obs, True)
            return None
        problem = _pull_problem(obs)
        pull.update(problem is not None, now)
        if problem and pull.longer_than(opts.image_pull_timeout_s, now):
            stuck = obs.replaced(reason=problem[0], message=problem[1])
            dog = wait.fire(kc, store, tracked, stuck, "image-pull-timeout", opts.image_pull_timeout_s, server=server)
            return Waited(FAIL, dog, False)
        if now - start >= opts.pending_timeout_s:
            dog = wait.fire(kc, store, tracked, obs, "pending-timeout", opts.pending_timeout_s, server=server)
            return Waited(FAIL, dog, False)
        return None

    return wait.poll(kc, store, tracked, step, server=server, interval=interval, sleep=sleep, clock=clock)


def report_for(
    waited: Waited, opts: ProbeOptions, *, server: str, version: str, checked_at: str, duration_s: float
) -> ProbeReport:
    obs = waited.obs
    if waited.result == PASS:
        reason, message = "Completed", obs.message or f"{opts.nodes}/{opts.nodes} ranks succeeded"
    elif waited.result == HANG:
        reason = "Timeout"
        message = (
            f"every rank had started and the all_reduce was not done after {opts.timeout_s}s; the probe job "
            "was canceled"
        )
    else:
        reason, message = obs.reason or obs.state, obs.message or obs.state
    return ProbeReport(
        result=waited.result,
        reason=reason,
        message=message,
        server=server,
        version=version,
        checked_at=checked_at,
        record_id=obs.tracked.id,
        nodes=opts.nodes,
        gpus=opts.gpus,
        image=opts.image,
        duration_s=round(duration_s, 1),
        hints=hints_for(waited.result, reason, waited.exercised, opts.master_port, obs.tracked.id),
        exercised=waited.exercised,
        settings=nccl_settings(opts),
    )


def run_probe(
    kc: Kubectl,
    opts: ProbeOptions,
    *,
    namespace: str,
    server: str,
    context: str,
    force: bool,
    store_factory: Callable[[], Any],
    cache_file: Path,
    on_progress: Callable[[str], None],
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    interval: float = 2.0,
) -> ProbeReport:
    """Validate, read the server version, answer from the cache when allowed, else submit the probe,
    wait for it, cache the result and return it."""
    plan = build_plan(opts, namespace)
    version = parse_server_version(kc.json(["version"], namespaced=False)).text
    cache, warning = probecache.load_cache(cache_file)
    if warning:
        on_progress(f"warning: {warning}")
    if not force:
        entry = probecache.lookup(cache, server, version, now=now())
        if entry is not None:
            return ProbeReport.from_entry(entry, cached=True)
    began = clock()
    outcome = execute(
        kc,
        plan,
        namespace=namespace,
        target_server=server,
        target_context=context,
        dry_run="none",
        store_factory=store_factory,
        on_progress=on_progress,
    )
    assert outcome.record_id is not None
    store = store_factory()
    tracked = track.load(store, outcome.record_id)
    waited = wait_for_probe(
        kc, store, tracked, opts, server=server, on_progress=on_progress, sleep=sleep, clock=clock, interval=interval
    )
    report = report_for(
        waited, opts, server=server, version=version, checked_at=probecache.utc_stamp(now()), duration_s=clock() - began
    )
    debug = "NCCL_DEBUG" in opts.nccl_env
    if report.result == PASS or (debug and report.exercised):
        text = read_probe_logs(kc, tracked, opts.nodes, tail=DEBUG_TAIL if debug else 50)
        if report.result == PASS:
            report.backend = backend_from_logs(text)
        if debug:
            add_transport(report, text)
    if report.exercised:
        probecache.save_result(cache_file, report)
    return report


def describe(report: ProbeReport, now: datetime | None = None) -> str:
    """The human-readable report (stdout of `kubectl tao probe nccl`)."""
    shape = f"{report.nodes} nodes x {report.gpus} GPU{'s' if report.gpus != 1 else ''}"
    parts = [shape]
    if report.duration_s is not None:
        parts.append(f"{int(report.duration_s)}s")
    if report.record_id:
        parts.append(f"job {report.record_id}")
    gloo = report.backend == GLOO
    line = f"nccl probe: {report.result}{' over gloo, not NCCL' if gloo else ''} ({', '.join(parts)})"
    if report.result != PASS:
        line += f": {report.reason}: {report.message}"
    lines = [line]
    if report.cached:
        stamp = probecache.parse_stamp(report.checked_at)
        age = age_text(((now or datetime.now(UTC)) - stamp).total_seconds()) if stamp else "?"
        lines.append(
            f"cached {age} ago for {report.server} ({report.version}); `kubectl tao probe nccl --force` probes again"
        )
    elif not report.exercised:
        lines.append("not cached: the ranks never all started, so NCCL was not exercised")
    if gloo:
        lines.append(
            "backend: gloo on CPU (no CUDA or NCCL in the pods): NCCL was NOT exercised. This pass shows that the "
            "pods, DNS and TCP between the nodes work, not that NCCL or its settings do; they are not applied to "
            "later submits"
        )
    elif report.backend == NCCL:
        lines.append("backend: nccl")
    if report.transport:
        lines.append(f"transport: {report.transport} (as NCCL_DEBUG=INFO showed it)")
    if report.transport_warning:
        lines.append(f"warning: {report.transport_warning}")
    if report.result == PASS and report.settings and not gloo:
        applied = " ".join(f"{key}={value}" for key, value in report.settings.items())
        lines.append(f"settings cached with the pass: later multi-node submits on this cluster apply {applied}")
    lines += [f"note: {hint.why}" for hint in report.hints if not hint.flag]
    settings = [hint for hint in report.hints if hint.flag]
    if settings:
        lines.append("try next (`kubectl tao probe nccl --force` with one or more of):")
        width = max(len(hint.flag) for hint in settings)
        lines += [f"  {hint.flag.ljust(width)}  {hint.why}" for hint in settings]
    return "\n".join(lines) + "\n"
