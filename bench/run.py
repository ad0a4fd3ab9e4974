#!/usr/bin/env python3
"""kubectl-tao benchmarks against the running local cluster (`make cluster && make bench`).

Measures, each several times (--repeat, default 5), and prints medians, ratios, targets and MET / MISSED:

- submit: `kubectl tao submit` (tier A with a PVC, no --wait) vs the bare kubectl calls it must make for the
  same manifest (`kubectl get nodes`, `kubectl apply --dry-run=server -f M`, `kubectl apply -f M`) back to back;
- status: kubectl calls per `status` and its wall time vs one bare `kubectl get job NAME`;
- list: wall time with 1, 50 and 200 records (jobs really submitted) and the kubectl calls of each;
- capacity gate, for each --capacity-sizes (default 1,000 nodes / 5,000 pods and 5,000 / 50,000): the parse
  and gpufit.node_gpus + gpufit.fit in-process, `kubectl tao fit` over the same JSON served by a stub kubectl,
  and (unless --no-big-cluster) `kubectl tao fit` with its peak RSS against a separate local API server holding
  those nodes and pods, next to the bare kubectl reads (`--only capacity` needs the built kubectl, not the running
  cluster: with the cluster down nothing else takes CPU from the measurement);
- with --before CHECKOUT: the same start-up, submit, status (running and finished) and explain runs of
  CHECKOUT/kubectl-tao, interleaved with this checkout's, and the difference ("cost") of each;
- CLI start-up: `--help` and `version` through ./kubectl-tao and the virtualenv's console script, plus a
  -X importtime check that jsonschema, ruamel.yaml and sh stay out of start-up;
- instructions (when valgrind is installed): what the plugin's Python process executes for `status JOB` with a
  stub kubectl, `version`, `--help` and the bare interpreter (callgrind; the same on a busy machine as on an
  idle one, so start-up work can be compared across runs and machines);
- per verb: kubectl calls (from the KUBECTL_TAO_TRACE file), wall time, peak memory of the Python process
  (its VmHWM) and of its largest kubectl child (/usr/bin/time around each kubectl);
- explain: `kubectl tao explain` of a failed two-rank job on the real nodes whose ending was not captured yet
  (it reads every rank's log, bounded, and names the cause) vs one bare `kubectl logs POD --tail=300`; the same
  explain once the record holds the cause; and diagnosis/causes.diagnose over 64 ranks of 300 lines in-process;
- redaction (no cluster needed: `--only redaction` runs without one): `redact_log_line` and `sanitize` over one
  log line of 100 KB, 400 KB and 1 MB of three kinds (training-log text, a random base64-like run, and a run that
  made the old rules rescan the line from every word), and the growth 100 KB -> 1 MB (linear: 10x); the
  readers of job text (causes.cause_in_log, causes.error_blocks, nccldebug.read) over six hostile texts, and
  over the same texts ten times as long; each family of job-text patterns (a cause's signs and facts reader, the
  line readers, nccldebug, the attempt history) over adversarial lines (runs of digits, repeated separators, a
  pattern's own start repeated) of 1 KB and 4 KB, and the growth between them (linear: 4x);
- progress (no cluster needed: `--only progress`): the progress readers over a 64 KiB status.json tail (and
  640 KiB) and a training log of 1 MB and 10 MB, and the growth with ten times the text (linear: <= 12x);
- progress-status (two real nodes): `status JOB` of a running busybox job on a real node whose rank 0 writes a
  TAO-shaped status.json, vs the bare calls it stands for run one after the other (`kubectl get job` + one
  `kubectl exec POD -- tail -c 65536 PATH`), and its kubectl calls; then the same job finished (the record keeps
  its progress) vs one `kubectl get job`;
- top (two real nodes): `top JOB -o json` of an 8-rank Indexed Job on the real nodes (one fake GPU and a stand-in
  nvidia-smi a rank; a Job made by hand and tracked by `record open` + `record mark`, since kubectl-tao's own
  multi-node Jobs put one rank on each node) vs the same 8 bare `kubectl exec POD -- nvidia-smi --query-gpu=...`
  calls run at once, its wall time, and whether the machine was idle (1-min load average; with who used the CPU:
  the cluster, the bench, the rest, from /proc, as for submit, status and explain);
- workflow: `workflow run` of a 5-step workflow (every step's gates, the release RBAC, 5 held-or-running Jobs) vs
  the bare `kubectl create -f` calls of the objects it renders, one after the other; on the real nodes, the
  release latency (a step's command ending to its successor's pod created) over 10 two-step runs, median and max;
- peers (unless --no-peers): `sky --help` (SkyPilot) and `torchx --help`, each installed from PyPI into its own
  virtualenv under ~/.cache/kubectl-tao/bench-peers/ (skipped with a note when the install fails).

It uses the cluster in KUBECTL_TAO_CLUSTER_DIR (default: the one `make cluster` starts), works in namespaces
and a state directory of its own, and removes them at the end. With --markdown FILE, every phase that completed
replaces its record in FILE's results file (FILE.json: command line, time, commit, machine, load, rows, tables,
notes), and FILE's part between the bench:begin and bench:end lines is rewritten from the whole results file
(benchlib.current_figures); --regenerate only rewrites it. Exit 0 when every measurement ran (missed targets are
reported, not failed), 1 when one failed (the phases that completed are still recorded), 2 when the cluster is
not up (for `--only capacity`: when kubectl is not built) or the results file cannot be read as one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "lib"))

import benchlib as bl  # noqa: E402

from kubectl_tao.k8s.kubectl import SHORT_CALL_GO_ENV  # noqa: E402  (the Go settings of the plugin's short calls)

PLUGIN = ROOT / "kubectl-tao"
# --before CHECKOUT: another checkout's entrypoint, timed beside this one (start-up, submit, status, explain) so the
# bench reports what a change cost; it needs its own `make venv`.
BEFORE: Path | None = None
CONSOLE_SCRIPT = ROOT / ".venv" / "bin" / "kubectl-tao"
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt"
STAY_RUNNING = "kwok.kubectl-tao.io/stay-running=true"
RUN_SECONDS = "kwok.kubectl-tao.io/run-seconds=1"
HEAVY_MODULES = ("jsonschema", "ruamel.yaml", "sh")
# The targets against bare kubectl: submit 1.5x (1.3x while submit was parsed by hand before typer; every verb
# goes through the one parser now), status 2x.
SUBMIT_TARGET = 1.5
STATUS_TARGET = 2.0
EXPLAIN_TARGET = 2.0  # explain of a failed multi-rank job (reading every rank's log) vs one `kubectl logs --tail`
PROGRESS_STATUS_TARGET = 1.5  # status of a running job with progress vs `kubectl get job` + one `kubectl exec` tail
TOP_TARGET = 1.5  # top of an 8-rank job vs the same 8 bare `kubectl exec nvidia-smi` calls at once ...
TOP_SECONDS = 2.0  # ... and its wall time (on an idle 2-core machine)
IDLE_LOAD = 0.5  # a 1-min load average below this: the machine counts as idle
REAL_NODE_LABEL = "kubectl-tao.io/real-node"
PEERS = (  # (name, PyPI package, command)
    ("skypilot", "skypilot", "sky"),
    ("torchx", "torchx", "torchx"),
)
PEER_INSTALL_TIMEOUT_S = 300
PHASES = ("startup", "instructions", "peers", "capacity", "submit", "status", "verbs", "list", "redaction", "explain",
          "progress", "progress-status", "top", "data", "workflow")
DATA_TARGET = 1.3  # data push of a tree vs `kubectl cp` of the same tree into a pod that mounts the same claim
DATA_RESKIP_SECONDS = 3.0  # a second push of the same tree (every file skipped)
DATA_RSS_KIB = 64 * 1024  # the plugin's peak memory during a push, whatever the size
LOCAL_PHASES = frozenset({"redaction", "progress"})  # phases that need no cluster
# Phases that need the built kubectl but not the running cluster: capacity starts API servers of its own, and
# measures best with nothing else running (the running cluster's kubelets and controllers take CPU from it).
OWN_CLUSTER_PHASES = frozenset({"capacity"})
MARK_BEGIN = "<!-- bench:begin (bench/run.py --markdown writes between these lines) -->"
MARK_END = "<!-- bench:end -->"

# Runs a Python entrypoint in-process and writes the peak RSS of that process when it exits (VmHWM of its
# own memory map; getrusage would also count the memory of whoever started it, and of forked children).
RSS_WRAPPER = """
import atexit, os, runpy, sys
def report():
    with open("/proc/self/status") as f:
        peak = next((line.split()[1] for line in f if line.startswith("VmHWM:")), "0")
    with open(os.environ["BENCH_RSS_OUT"], "w") as f:
        f.write(peak + "\\n")
atexit.register(report)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


class BenchError(Exception):
    """A measurement could not run (the cluster refused, a command failed): the bench stops and cleans up."""


def log(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------- cluster


def _versions() -> dict[str, str]:
    out: dict[str, str] = {}
    for line in (ROOT / "cluster" / "versions.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            out[key] = value.strip().strip('"')
    return out


def _data_dir() -> Path:
    explicit = os.environ.get("KUBECTL_TAO_CLUSTER_DIR")
    if explicit:
        return Path(explicit).resolve()
    return Path(os.environ.get("TMPDIR") or "/tmp") / "kubectl-tao-cluster"


def _cache_dir() -> Path:
    return Path(os.environ.get("KUBECTL_TAO_CACHE") or Path.home() / ".cache" / "kubectl-tao")


@dataclass
class Bench:
    """Where the bench runs: the cluster's kubectl and kubeconfig, its own namespaces and state directories."""

    repeat: int
    work: Path  # throwaway directory: state dirs, traces, manifests, stubs
    run_id: str = field(default_factory=lambda: secrets.token_hex(3))
    kubectl: str = ""
    env: dict[str, str] = field(default_factory=dict)
    namespaces: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    traces: int = 0

    def setup(self, *, cluster: bool = True) -> None:
        """The kubectl and environment of the local cluster; with CLUSTER, the check that it is up."""
        data = _data_dir()
        bin_dir = _cache_dir() / f"k8s-{_versions()['K8S_VERSION']}" / "bin"
        self.kubectl = str(bin_dir / "kubectl")
        env = dict(os.environ)
        env["KUBECONFIG"] = str(data / "kubeconfig")
        env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
        env["TAO_K8S_SKIP_NODE_RUNTIME_CHECK"] = "1"
        # Bytecode as an installed package has it (pip compiles it; a checkout writes __pycache__ on the
        # first run): kept out of the tree, in the bench's cache, whatever PYTHONDONTWRITEBYTECODE says.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(_cache_dir() / "bench-pycache")
        for name in ("KUBECTL_TAO_TRACE", "KUBECTL_TAO_KUBECTL", "TAO_K8S_CONTEXT"):
            env.pop(name, None)
        self.env = env
        if not cluster:
            if not Path(self.kubectl).exists():
                print(f"bench: no kubectl at {self.kubectl}; build it with `make cluster-build`", file=sys.stderr)
                raise SystemExit(2)
            return
        status = subprocess.run(
            [str(ROOT / "scripts" / "local-cluster"), "status"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if status.returncode != 0 or not Path(self.kubectl).exists():
            print(f"bench: the local cluster in {data} is not up; start it with `make cluster` (or set "
                  f"KUBECTL_TAO_CLUSTER_DIR)\n{status.stdout}", file=sys.stderr)
            raise SystemExit(2)

    # -- processes

    def k(self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120) -> str:
        """The cluster's kubectl, as a bench helper (not measured)."""
        proc = subprocess.run(
            [self.kubectl, *args], env=self.env, input=input, capture_output=True, text=True, timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise BenchError(f"kubectl {' '.join(args[:3])} failed: {proc.stderr.strip()[-400:]}")
        return proc.stdout

    def trace_file(self) -> Path:
        self.traces += 1
        return self.work / "traces" / f"{self.traces:05d}.jsonl"

    def tao_env(self, namespace: str, state: Path, trace: Path | None = None, **extra: str) -> dict[str, str]:
        env = {**self.env, "TAO_STATE_DIR": str(state), "TAO_K8S_NAMESPACE": namespace, **extra}
        if trace is not None:
            env["KUBECTL_TAO_TRACE"] = str(trace)
        return env

    # -- namespaces

    def namespace(self, suffix: str) -> tuple[str, Path]:
        """A fresh namespace with a Bound PVC `tao-data`, and a state directory of its own."""
        ns = f"tao-bench-{self.run_id}-{suffix}"
        pv = f"{ns}-pv"
        self.k("create", "namespace", ns)
        self.namespaces.append(ns)
        self.volumes.append(pv)
        objects = [
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": pv, "labels": {"kubectl-tao.io/bench": self.run_id}},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteMany"],
                    "storageClassName": "manual",
                    "hostPath": {"path": f"/tmp/{pv}"},
                    "claimRef": {"namespace": ns, "name": "tao-data"},
                },
            },
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": "tao-data", "namespace": ns},
                "spec": {
                    "accessModes": ["ReadWriteMany"],
                    "storageClassName": "manual",
                    "volumeName": pv,
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
        ]
        self.k("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
        wait_until(
            lambda: self.k("get", "pvc", "tao-data", "-n", ns, "-o", "jsonpath={.status.phase}") == "Bound",
            60,
            f"PVC tao-data in {ns} Bound",
        )
        for _ in range(120):  # the default ServiceAccount comes from the controller manager
            if self.k("get", "serviceaccount", "default", "-n", ns, check=False, timeout=30):
                break
            time.sleep(0.25)
        state = self.work / f"state-{suffix}"
        state.mkdir(parents=True, exist_ok=True)
        return ns, state

    def drop_namespace(self, ns: str, wait: bool) -> None:
        self.k("delete", "namespace", ns, f"--wait={'true' if wait else 'false'}", "--ignore-not-found",
               check=False, timeout=180)
        if ns in self.namespaces:
            self.namespaces.remove(ns)

    def cleanup(self) -> None:
        for ns in list(self.namespaces):
            self.drop_namespace(ns, wait=False)
        if self.volumes:
            self.k("delete", "pv", *self.volumes, "--ignore-not-found", "--wait=false", check=False)
        if self.nodes:
            self.k("delete", "node", *self.nodes, "--ignore-not-found", "--wait=false", check=False)
        shutil.rmtree(self.work, ignore_errors=True)


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def timed(argv: Sequence[str], env: dict[str, str], *, input: str | None = None, ok: Sequence[int] = (0,),
          timeout: float = 300) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    proc = subprocess.run(list(argv), env=env, input=input, capture_output=True, text=True, timeout=timeout,
                          check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode not in ok:
        shown = " ".join(str(a) for a in argv[:4])
        raise BenchError(f"{shown} exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-600:]}")
    return elapsed, proc


def read_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def job_args(gpus: int, annotation: str, *extra: str) -> list[str]:
    return [
        "--image", IMAGE, "--network-arch", "bench", "--action", "run", "--gpus", str(gpus), "--pvc", "tao-data",
        "--command", "python train.py", "--annotation", annotation, *extra,
    ]


def submit_job(b: Bench, ns: str, state: Path, gpus: int = 0, annotation: str = STAY_RUNNING) -> str:
    _, proc = timed([str(PLUGIN), "submit", *job_args(gpus, annotation)], b.tao_env(ns, state))
    return proc.stdout.strip().splitlines()[-1]


# ----------------------------------------------------------------------------------------------- start-up


def bench_startup(b: Bench, rows: list[bl.Row], info: dict[str, Any]) -> None:
    log("CLI start-up")
    env = b.tao_env("default", b.work / "state-startup")
    plugin_bin = b.work / "plugin-bin"
    plugin_bin.mkdir(exist_ok=True)
    (plugin_bin / "kubectl-tao").symlink_to(PLUGIN)
    dispatch_env = {**env, "PATH": f"{plugin_bin}{os.pathsep}{env['PATH']}"}
    pip_bin = b.work / "plugin-bin-pip"  # the console script pip wrote into the virtualenv
    pip_bin.mkdir(exist_ok=True)
    (pip_bin / "kubectl-tao").symlink_to(CONSOLE_SCRIPT)
    pip_dispatch_env = {**env, "PATH": f"{pip_bin}{os.pathsep}{env['PATH']}"}
    cases: list[tuple[str, list[str], dict[str, str], float | None]] = [
        ("./kubectl-tao --help", [str(PLUGIN), "--help"], env, 0.150),
        ("./kubectl-tao version", [str(PLUGIN), "version"], env, 0.150),
        (".venv/bin/kubectl-tao --help", [str(CONSOLE_SCRIPT), "--help"], env, 0.150),
        (".venv/bin/kubectl-tao version", [str(CONSOLE_SCRIPT), "version"], env, 0.150),
        ("kubectl tao version (plugin dispatch, ./kubectl-tao)", [b.kubectl, "tao", "version"], dispatch_env, None),
        ("kubectl tao version (plugin dispatch, pip console script)", [b.kubectl, "tao", "version"],
         pip_dispatch_env, None),
        ("python -c pass (venv, bare interpreter)", [str(VENV_PYTHON), "-c", "pass"], env, None),
        ("python -S -c pass (no site)", [str(VENV_PYTHON), "-S", "-c", "pass"], env, None),
        ("kubectl version --client", [b.kubectl, "version", "--client"], env, None),
    ]
    if BEFORE is not None:
        cases += [(f"before: {BEFORE}/kubectl-tao {arg}", [str(BEFORE / "kubectl-tao"), arg], env, None)
                  for arg in ("--help", "version")]
    samples: dict[str, list[float]] = {name: [] for name, *_ in cases}
    for _, argv, case_env, _ in cases:  # warm-up: bytecode cache, page cache
        timed(argv, case_env)
    for _ in range(b.repeat):  # round robin: background load spreads over every case alike
        for name, argv, case_env, _ in cases:
            samples[name].append(timed(argv, case_env)[0])
    for name, _, _, limit in cases:
        value = bl.median(samples[name])
        rows.append(bl.Row("start-up", name, bl.fmt_seconds(value), target="<= 150 ms" if limit else "",
                           result=bl.verdict(value, limit)))
    if BEFORE is not None:
        for arg in ("--help", "version"):
            now, then = samples[f"./kubectl-tao {arg}"], samples[f"before: {BEFORE}/kubectl-tao {arg}"]
            cost = bl.median(now) - bl.median(then)
            rows.append(bl.Row("start-up", f"  cost of this checkout over --before at `{arg}`",
                               f"{cost * 1000:+.0f} ms"))
    info["startup_python"] = bl.median(samples["python -c pass (venv, bare interpreter)"])
    info["startup_console"] = bl.median(samples[".venv/bin/kubectl-tao version"])

    for label, argv in (("--help", [str(PLUGIN), "--help"]), ("submit --help", [str(PLUGIN), "submit", "--help"])):
        heavy, total_ms = imports_of(argv, env, HEAVY_MODULES)
        rows.append(bl.Row("start-up", f"heavy imports at `{label}` ({', '.join(HEAVY_MODULES)})",
                           ", ".join(heavy) or "none", reference=f"imports {total_ms:.0f} ms",
                           target="none", result=bl.MISSED if heavy else bl.MET))


def import_profile(argv: Sequence[str], env: dict[str, str],
                   ok: Sequence[int] = (0,)) -> tuple[float, list[tuple[str, float]]]:
    """One run of ARGV under `python -X importtime`: the milliseconds spent importing, and the top-level imports
    (the modules the program itself asked for, each with everything it pulled in) by cumulative time, largest
    first."""
    proc = subprocess.run([str(VENV_PYTHON), "-X", "importtime", *argv], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    if proc.returncode not in ok:
        raise BenchError(f"{' '.join(argv[:3])} under -X importtime exited {proc.returncode}: {proc.stderr[-300:]}")
    top: list[tuple[str, float]] = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        _, cumulative, name = line.split("|")
        if cumulative.strip().isdigit() and not name.startswith("  "):  # depth 0: asked for by the program
            top.append((name.strip(), int(cumulative) / 1000))
    return sum(ms for _, ms in top), sorted(top, key=lambda item: -item[1])


def import_rows(rows: list[bl.Row], phase: str, verb: str, argv: Sequence[str], env: dict[str, str],
                ok: Sequence[int] = (0,), before_argv: Sequence[str] | None = None) -> None:
    """Rows for `python -X importtime` of VERB: the total and the five costliest top-level imports, for this
    checkout and (with --before) for the other one."""
    runs = [("", argv)] + ([(f" (--before {BEFORE})", before_argv)] if before_argv is not None else [])
    for label, args in runs:
        timed(list(args), env, ok=ok)  # bytecode written: the profile counts imports, not compiles
        total, top = import_profile(args, env, ok)
        rows.append(bl.Row(phase, f"imports of `{verb}`{label} (python -X importtime)", f"{total:.0f} ms",
                           reference=", ".join(f"{name} {ms:.0f} ms" for name, ms in top[:5])))


def cluster_roots() -> set[int]:
    """The local cluster's own processes: the pids scripts/local-cluster recorded, and every process in a real
    node's cgroup tree (its containers, whose shims are not the kubelet's children)."""
    roots: set[int] = set()
    for pid_file in (_data_dir() / "pids").glob("*.pid"):
        with contextlib.suppress(OSError, ValueError):
            roots.add(int(pid_file.read_text().strip()))
    for base in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory", "/sys/fs/cgroup"):
        for node in Path(base).glob("kubectl-tao-*"):
            for folder, _, files in os.walk(node):
                if "cgroup.procs" in files:
                    with contextlib.suppress(OSError, ValueError):
                        roots.update(int(x) for x in Path(folder, "cgroup.procs").read_text().split())
    return roots


def cpu_sample() -> bl.CpuSample:
    """What the machine's CPU has done so far (/proc), for the conditions a phase was timed under."""
    total, idle = bl.stat_jiffies(Path("/proc/stat").read_text())
    ticks = os.sysconf("SC_CLK_TCK")
    uptime = round(float(Path("/proc/uptime").read_text().split()[0]) * ticks)
    parents: dict[int, int] = {}
    used: dict[int, tuple[int, int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                parent, started, cpu = bl.proc_stat(Path(entry.path, "stat").read_text())
            except (OSError, ValueError, IndexError):  # gone since the listing
                continue
            parents[int(entry.name)], used[int(entry.name)] = parent, (started, cpu)
    own = os.times()
    return bl.CpuSample(total, idle, uptime, {pid: used[pid] for pid in bl.descendants(parents, cluster_roots())},
                        own.user + own.system + own.children_user + own.children_system, os.getloadavg()[0])


def machine_idle_row(rows: list[bl.Row], phase: str, before: bl.CpuSample, after: bl.CpuSample) -> None:
    """Whether the machine was idle while PHASE was timed (the 1-min load average), and who used the CPU then:
    with the local cluster up the load stays near 1, so the shares say how much of the machine the measurement
    had."""
    idle = max(before.load, after.load) < IDLE_LOAD
    rows.append(bl.Row(phase, f"machine idle while {phase} was timed (1-min load average below {IDLE_LOAD:g})",
                       "yes" if idle else "no",
                       reference=bl.conditions(before, after, ticks_per_second=os.sysconf("SC_CLK_TCK"),
                                               cores=os.cpu_count() or 1)))


def imports_of(argv: Sequence[str], env: dict[str, str], watched: Sequence[str]) -> tuple[list[str], float]:
    """Which of the `watched` modules one run of ARGV imports (python -X importtime), and the import time."""
    proc = subprocess.run([str(VENV_PYTHON), "-X", "importtime", *argv], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    imported = set()
    total_us = 0
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            parts = line.split("|")
            imported.add(parts[-1].strip())
            if not parts[-1].startswith("  ") and parts[1].strip().isdigit():
                total_us += int(parts[1].strip())
    return sorted(m for m in watched if m in imported), total_us / 1000


# ----------------------------------------------------------------------------------------------- peers


def bench_peers(b: Bench, rows: list[bl.Row]) -> None:
    base = _cache_dir() / "bench-peers"
    for name, package, command in PEERS:
        venv = base / name
        exe = venv / "bin" / command
        marker = venv / ".installed"
        if not marker.exists():
            log(f"peer {name}: installing {package} from PyPI into {venv} (once; up to {PEER_INSTALL_TIMEOUT_S}s)")
            shutil.rmtree(venv, ignore_errors=True)
            started = time.monotonic()
            try:
                subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True,
                               timeout=120)
                left = PEER_INSTALL_TIMEOUT_S - (time.monotonic() - started)
                subprocess.run([str(venv / "bin" / "pip"), "install", "-q", package], check=True,
                               capture_output=True, text=True, timeout=max(left, 1))
            except subprocess.TimeoutExpired:
                log(f"peer {name}: install took over {PEER_INSTALL_TIMEOUT_S}s; skipped")
                rows.append(bl.Row("peers", f"{command} --help ({name})", "skipped",
                                   reference=f"install > {PEER_INSTALL_TIMEOUT_S} s"))
                continue
            except (subprocess.CalledProcessError, OSError) as exc:
                detail = getattr(exc, "stderr", "") or str(exc)
                log(f"peer {name}: install failed, skipped: {str(detail).strip()[-300:]}")
                rows.append(bl.Row("peers", f"{command} --help ({name})", "skipped", reference="install failed"))
                continue
            marker.write_text(f"installed in {time.monotonic() - started:.0f}s\n")
            log(f"peer {name}: installed in {time.monotonic() - started:.0f}s")
        version = subprocess.run(
            [str(venv / "bin" / "python"), "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
            capture_output=True, text=True, timeout=60, check=False,
        ).stdout.strip()
        env = {k: v for k, v in b.env.items() if k != "PYTHONPYCACHEPREFIX"}
        try:
            timed([str(exe), "--help"], env, timeout=120)  # warm-up
            samples = [timed([str(exe), "--help"], env, timeout=120)[0] for _ in range(b.repeat)]
        except (BenchError, OSError, subprocess.TimeoutExpired) as exc:
            log(f"peer {name}: `{command} --help` failed, skipped: {exc}")
            rows.append(bl.Row("peers", f"{command} --help ({name})", "skipped", reference="--help failed"))
            continue
        rows.append(bl.Row("peers", f"{command} --help ({name} {version})", bl.fmt_seconds(bl.median(samples)),
                           target="reference"))


# ----------------------------------------------------------------------------------------------- capacity


def _conditions(kinds: Sequence[str], status: str = "True") -> list[dict[str, str]]:
    return [{"type": k, "status": status, "lastTransitionTime": "2026-01-01T00:00:00Z", "lastHeartbeatTime":
             "2026-01-01T00:00:00Z", "reason": f"{k}Reason", "message": f"condition {k} is {status}"} for k in kinds]


def synthetic_cluster(nodes: int, pods: int, seed: int = 0) -> dict[str, Any]:
    """`kubectl get nodes,pods -A -o json` of a big GPU cluster, objects about as large as real ones (node
    image lists, pod env, volumes, statuses): mixed GPU products and sizes, CPU nodes, taints, cordons,
    NotReady nodes, and pods in every phase (some holding GPUs)."""
    rng = random.Random(seed)  # noqa: S311 - reproducible synthetic data, not a secret
    products = ["NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "NVIDIA-L40S"]
    images = [{"names": [f"registry.example.com/team/image-{k}@sha256:{k:064x}", f"registry.example.com/team/"
                         f"image-{k}:v{k}.0"], "sizeBytes": 1_000_000 * (k + 1)} for k in range(20)]
    items: list[dict[str, Any]] = []
    names = []
    for i in range(nodes):
        gpu = i % 5 != 4  # 80 % GPU nodes
        name = f"{'gpu' if gpu else 'cpu'}-node-{i:04d}"
        names.append(name)
        labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  "node.kubernetes.io/instance-type": "p5.48xlarge" if gpu else "m7i.8xlarge",
                  "topology.kubernetes.io/zone": f"zone-{i % 3}", "topology.kubernetes.io/region": "region-1"}
        allocatable = {"cpu": "191450m", "memory": "2044Gi", "pods": "110", "ephemeral-storage": "3Ti"}
        taints = []
        if gpu:
            labels |= {"nvidia.com/gpu.product": products[i % len(products)], "nvidia.com/gpu.present": "true",
                       "nvidia.com/gpu.count": "8", "nvidia.com/cuda.driver.major": "570"}
            allocatable["nvidia.com/gpu"] = str(rng.choice((4, 8, 8, 8)))
            taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
        if i % 50 == 7:
            taints.append({"key": "dedicated", "value": "infra", "effect": "NoSchedule"})
        ready = "False" if i % 97 == 3 else "True"
        items.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"{i:08x}-0000-4000-8000-{i:012x}", "resourceVersion": str(1000 + i),
                         "creationTimestamp": "2026-01-01T00:00:00Z", "labels": labels,
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                                         "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
            "spec": {"taints": taints, "podCIDR": f"10.{i // 250}.{i % 250}.0/24",
                     **({"unschedulable": True} if i % 89 == 5 else {})},
            "status": {
                "allocatable": allocatable, "capacity": dict(allocatable),
                "conditions": [*_conditions(("MemoryPressure", "DiskPressure", "PIDPressure"), "False"),
                               *_conditions(("Ready",), ready)],
                "addresses": [{"type": "InternalIP", "address": f"10.0.{i // 250}.{i % 250}"},
                              {"type": "Hostname", "address": name}],
                "images": images,
                "nodeInfo": {"kubeletVersion": "v1.36.3", "containerRuntimeVersion": "containerd://2.1.0",
                             "kernelVersion": "6.8.0", "osImage": "Ubuntu 24.04", "architecture": "amd64"},
            },
        })
    phases = ["Running"] * 7 + ["Pending", "Succeeded", "Failed"]
    for j in range(pods):
        node = rng.choice(names)
        gpus = rng.choice((0, 0, 1, 2, 4, 8)) if node.startswith("gpu") else 0
        resources: dict[str, Any] = {"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"memory": "8Gi"}}
        if gpus:
            resources["limits"]["nvidia.com/gpu"] = str(gpus)
            resources["requests"]["nvidia.com/gpu"] = str(gpus)
        name = f"app-{j % 40}-{j:05d}-x7k2p"
        phase = rng.choice(phases)
        items.append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": name, "generateName": f"app-{j % 40}-{j:05d}-", "namespace": f"team-{j % 20}",
                "uid": f"{j:08x}-1111-4000-8000-{j:012x}", "resourceVersion": str(50000 + j),
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"app": f"app-{j % 40}", "pod-template-hash": "5d8f7c9b6", "team": f"team-{j % 20}"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"app-{j % 40}-5d8f7c9b6",
                                     "uid": f"{j % 40:08x}-2222-4000-8000-000000000000", "controller": True,
                                     "blockOwnerDeletion": True}],
            },
            "spec": {
                "nodeName": node, "restartPolicy": "Always", "schedulerName": "default-scheduler",
                "serviceAccountName": "default", "dnsPolicy": "ClusterFirst", "priority": 0,
                "terminationGracePeriodSeconds": 30, "enableServiceLinks": True,
                "containers": [{
                    "name": "main", "image": f"registry.example.com/team/app-{j % 40}:v1.2.3",
                    "imagePullPolicy": "IfNotPresent", "command": ["/bin/sh", "-c"],
                    "args": ["exec python -m service --port 8080 --workers 4"],
                    "env": [{"name": f"SETTING_{k}", "value": f"value-{k}-{j}"} for k in range(5)],
                    "ports": [{"containerPort": 8080, "protocol": "TCP", "name": "http"}],
                    "resources": resources,
                    "volumeMounts": [{"name": "data", "mountPath": "/data"},
                                     {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/"
                                      "serviceaccount", "readOnly": True}],
                    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                }],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-{j % 40}"}},
                            {"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt",
                                                                                      "path": "ca.crt"}]}},
                                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
                                    "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}],
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                 "effect": "NoExecute", "tolerationSeconds": 300},
                                {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                 "effect": "NoExecute", "tolerationSeconds": 300}],
            },
            "status": {
                "phase": phase, "qosClass": "Burstable", "hostIP": "10.0.0.1", "podIP": f"10.1.{j // 250}.{j % 250}",
                "startTime": "2026-01-01T00:00:00Z",
                "conditions": _conditions(("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                                           "PodScheduled")),
                "containerStatuses": [{"name": "main", "ready": phase == "Running", "restartCount": 0,
                                       "image": f"registry.example.com/team/app-{j % 40}:v1.2.3",
                                       "imageID": f"registry.example.com/team/app@sha256:{j:064x}",
                                       "containerID": f"containerd://{j:064x}", "started": phase == "Running",
                                       "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}],
            },
        })
    return {"apiVersion": "v1", "kind": "List", "items": items}


def raw_lists(data: dict[str, Any]) -> tuple[str, str]:
    """The two answers of the gate's `get --raw` reads over a synthetic cluster, as the API server sends them:
    compact JSON, items without `kind` and `apiVersion` (each starts at its metadata, where the streamed read
    cuts), finished pods left out by the field selector."""
    def listing(items: list[dict[str, Any]]) -> str:
        return json.dumps({"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
                           "items": [{k: v for k, v in i.items() if k not in ("kind", "apiVersion")}
                                     for i in items]},
                          separators=(",", ":"))

    items = data["items"]
    return (listing([i for i in items if i["kind"] == "Node"]),
            listing([i for i in items if i["kind"] == "Pod"
                     and i.get("status", {}).get("phase") not in ("Succeeded", "Failed")]))


def capacity_target(nodes: int) -> float:
    """The issue's targets: 1 s up to 1,000 nodes / 5,000 pods, 3 s up to 5,000 nodes / 50,000 pods."""
    return 1.0 if nodes <= 1000 else 3.0


def bench_capacity(b: Bench, rows: list[bl.Row], nodes: int = 1000, pods: int = 5000) -> None:
    log(f"capacity gate over {nodes} nodes / {pods} pods")
    from kubectl_tao.gates import capacity, gatelists, gpufit
    from kubectl_tao.k8s.kubectl import Completed

    nodes_text, pods_text = raw_lists(synthetic_cluster(nodes, pods))
    requests = [(8, 1), (8, 4), (4, 16), (16, 1)]  # fits, fits or queues, ..., never (no 16-GPU node)

    def gate(runs: int) -> tuple[list[float], list[float]]:
        gate_only: list[float] = []
        with_parse: list[float] = []
        for _ in range(runs):
            started = time.perf_counter()
            seen = capacity.read({"nodes": Completed(nodes_text, "", 0), "pods": Completed(pods_text, "", 0)})
            parsed = time.perf_counter()
            table = gpufit.node_gpus(seen.nodes, seen.pods)
            for gpus, count in requests:
                gpufit.fit(table, gpus, count, tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists",
                                                            "effect": "NoSchedule"}])
            done = time.perf_counter()
            gate_only.append(done - parsed)
            with_parse.append(done - started)
        return gate_only, with_parse

    gate_only, with_parse = gate(b.repeat)
    typed = gatelists._decoders()
    gatelists_decoders = gatelists._decoders
    gatelists._decoders = lambda: None  # type: ignore[assignment] # the json.loads fallback, once
    try:
        _, fallback = gate(1)
    finally:
        gatelists._decoders = gatelists_decoders  # type: ignore[assignment]
    target = capacity_target(nodes)
    size = f"{(len(nodes_text) + len(pods_text)) / 2**20:.1f} MiB JSON"
    rows.append(bl.Row("capacity", f"node_gpus + fit x{len(requests)}, {nodes} nodes / {pods} pods (in-process)",
                       bl.fmt_seconds(bl.median(gate_only)), target=f"<= {target:.0f} s",
                       result=bl.verdict(bl.median(gate_only), target)))
    rows.append(bl.Row("capacity", f"  + decoding the --raw answers into the gate's fields ({size}, "
                       f"{'msgspec' if typed else 'json: msgspec missing'})",
                       bl.fmt_seconds(bl.median(with_parse)), target=f"<= {target:.0f} s",
                       result=bl.verdict(bl.median(with_parse), target)))
    rows.append(bl.Row("capacity", "  the same with the json.loads fallback (one run)", bl.fmt_seconds(fallback[0])))

    # End to end: the real CLI, with a stub kubectl that serves the same JSON (no API server in the way).
    nodes_file, pods_file = b.work / f"nodes-{nodes}.json", b.work / f"pods-{pods}.json"
    nodes_file.write_text(nodes_text)
    pods_file.write_text(pods_text)
    stub = b.work / "stub-kubectl"
    stub.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        f'  *--raw\\ /api/v1/nodes*) exec cat "{nodes_file}" ;;\n'
        f'  *--raw\\ /api/v1/pods*) exec cat "{pods_file}" ;;\n'
        '  *) echo "error: the server doesn\'t have a resource type \\"localqueues\\"" >&2; exit 1 ;;\n'
        "esac\n"
    )
    stub.chmod(0o755)
    env = b.tao_env("default", b.work / "state-capacity", KUBECTL_TAO_KUBECTL=str(stub))
    argv = [str(PLUGIN), "fit", "--gpus", "8", "--nodes", "4"]
    timed(argv, env, ok=(0, 1, 4))
    samples = [timed(argv, env, ok=(0, 1, 4))[0] for _ in range(b.repeat)]
    rows.append(bl.Row("capacity", f"kubectl tao fit, same JSON from a stub kubectl ({nodes} nodes, the plugin's "
                       "own share)", bl.fmt_seconds(bl.median(samples))))


REDACTION_SIZES = (100_000, 400_000, 1_000_000)


def redaction_lines(size: int, seed: int = 0) -> dict[str, str]:
    """One log line of SIZE characters per kind; each ends with a token the redactor must still find."""
    rng = random.Random(seed)  # noqa: S311 - reproducible filler, not a secret
    token = " hf_" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
                              for _ in range(34))
    unit = ('step 1234 | loss=0.4321 lr=3.0e-04 grad_norm: 1.27 "phase": "train" tokens/s 45678 '
            "\x1b[32mok\x1b[0m epoch 3/90 ")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    kinds = {
        "training-log text": unit * (size // len(unit) + 1),
        "base64-like run": "".join(rng.choice(alphabet) for _ in range(size)),
        "'curl -H a: password: x' repeated": "curl -H a: password: x " * (size // 23 + 1),
        # header flags glued into one unquoted value that runs into a quote (each flag's value reads to that quote)
        "'-H=X-Key:' glued, a quote each 15 KB": ("-H=X-Key:" * 1700 + "'") * (size // 15301 + 1),
        # terminal strings whose payloads are read as text, and encoded separators the view decodes
        "OSC 8 links and %3D/%22 escapes": ("\x1b]8;;https://x.example/a?sig%3D%22hf_x\x1b\\link\x1b]8;;\x1b\\ "
                                             "echo a | --password-stdin <<< ") * (size // 70 + 1),
    }
    return {kind: text[: size - len(token)] + token for kind, text in kinds.items()}


def hostile_logs(scale: int) -> list[str]:
    """Log texts shaped to make a careless reader slow (long runs, one huge line, many error lines), SCALE
    times the size the diagnosis was first checked on."""
    return [
        "Error: " * 50_000 * scale,
        "[rank1]: " + "a" * 300_000 * scale,
        ("Timed out waiting " + "9" * 1000 + "ms ") * 200 * scale,
        "loss " + " " * 100_000 * scale + "is nan",
        "\n".join("ValueError: x" for _ in range(50_000 * scale)),
        ("x NCCL INFO Channel 00/0 : " + "a" * 100_000 + " via NET/IB/0\n") * 20 * scale,
    ]


def read_hostile(texts: list[str]) -> float:
    """Seconds the job-text readers (cause_in_log, error_blocks, nccldebug.read) take over TEXTS."""
    from kubectl_tao.diagnosis import causes, nccldebug

    started = time.perf_counter()
    for text in texts:
        causes.cause_in_log(text)
        causes.error_blocks(text)
        nccldebug.read(text)
    return time.perf_counter() - started


PATTERN_LINE_SIZES = (1024, 4096)  # the readers cut a line to 4,096 characters (diagnosis/causes.LINE_CHARS)


def pattern_families() -> dict[str, list[Callable[[str], object]]]:
    """The readers of job text, one family per cause of diagnosis/causes.py's table (its signs and its facts reader),
    then the line readers every cause shares, diagnosis/nccldebug.py and restarts/history.py's attempt history."""
    from kubectl_tao.diagnosis import causes, nccldebug
    from kubectl_tao.restarts import history

    families: dict[str, list[Callable[[str], object]]] = {}
    for cause in causes.CAUSES:
        readers: list[Callable[[str], object]] = [sign.pattern.search for sign in cause.signs]
        if cause.facts is not None:
            readers.append(cause.facts)
        families[f"causes: {cause.name}"] = readers
    families["causes: line readers"] = [causes._PREFILTER.search, causes._LOGGER.match, causes._FRAME.match,
                                        causes._RANK_PREFIX.match, causes._ERRORISH_WORDS.search]
    families["nccldebug"] = [nccldebug.read]
    families["retry: attempt history"] = [lambda line: history.parse_history([line])]
    families.update(redactor_families())
    return families


# The redactor's patterns by what they read (core/redact.py); a pattern named in none is in "other rules".
REDACTOR_FAMILIES = {
    "token formats": ("_TOKEN_RULES", "_TOKEN_HINT_RE", "_SPLIT_TOKEN_RE", "_SPLIT_PREFIX_RE", "_SPLIT_TOKEN_START_RE",
                      "_TOKEN_RUN_RE", "_PRIVATE_KEY_RE", "_BASE64_RE"),
    "URLs and headers": ("_PRESIGNED_RE", "_URL_USERINFO_RE", "_AUTH_HEADER_RE", "_BEARER_RE", "_HEADER_FLAG_RE",
                         "_USER_FLAG_RE"),
    "named values": ("_FLAG_RE", "_FROM_LITERAL_RE", "_ASSIGN_RE", "_INI_RE", "_JSON_KEY_RE", "_DICT_KEY_RE",
                     "_ENV_PAIR_RE", "_COLON_RE", "_INLINE_COLON_RE", "_VALUE_RUN_RE", "_QUOTED_ASSIGN_RE",
                     "_SUBSCRIPT_RE", "_SETENV_RE", "_KAGGLE_KEY_RE", "_NETRC_RE", "_AWS_CONFIGURE_RE",
                     "_JAVA_PROPERTY_RE"),
    "command forms": ("_COMMAND_PASSWORD_FLAGS", "_MYSQL_FLAG_RE", "_DASH_PASS_RE", "_STDIN_FLAG_RE", "_ECHO_RE",
                      "_SHELL_TOKEN_RE", "_HERESTRING_RE", "_ARG_RE", "_HEREDOC_RE", "_SEGMENT_END_RE"),
    "names and placeholders": ("_WORD_RE", "_REFERENCE_RE", "_PLACEHOLDER_RE", "_PLACEHOLDER_WORD_RE",
                               "_PATH_VALUE_RE", "_DEFAULT_RE", "_AWS_SECRET_SHAPE_RE", "_RANDOM_SEGMENT_RE",
                               "_CALL_RE", "_OPEN_CALL_RE", "_SETTING_RE", "_FLAG_SHAPE_RE", "_SECRET_SPEC_RE"),
    "hidden text": ("_HIDDEN_HINT_RE", "_HIDDEN_RE", "_STRING_SEQUENCE_RE", "_LONG_LINE_RE"),
}


def redactor_families() -> dict[str, list[Callable[[str], object]]]:
    """The redactor's patterns (core/redact.py compiles each on first use; here each is compiled from its
    arguments), each read as the redactor reads it: over the whole line (findall), or from its first character
    where the redactor only ever matches it whole (fullmatch); one family per kind of rule, and the redactor."""
    import inspect
    import re

    from kubectl_tao.core import redact

    source = inspect.getsource(redact)

    def lazy_in(value: object) -> list[re.Pattern[str]]:
        if isinstance(value, redact._Lazy):
            return [re.compile(*value._args)]
        if isinstance(value, tuple | list):
            return [p for item in value for p in lazy_in(item)]
        return []

    def reader(name: str, pattern: re.Pattern[str]) -> Callable[[str], object]:
        used = set(re.findall(rf"\b{name}\.(\w+)", source))
        return pattern.fullmatch if used and used <= {"fullmatch", "match"} else pattern.findall

    named = {name: lazy_in(value) for name, value in vars(redact).items()}
    families: dict[str, list[Callable[[str], object]]] = {}
    listed: set[str] = set()
    for family, names in REDACTOR_FAMILIES.items():
        families[f"redact: {family}"] = [reader(name, p) for name in names for p in named.get(name, [])]
        listed.update(names)
    families["redact: other rules"] = [reader(name, p) for name, ps in named.items() if name not in listed for p in ps]
    families["redact: redact_log_line"] = [redact.redact_log_line]
    return families


def _literal_heads(readers: Sequence[Callable[[str], object]]) -> list[str]:
    """The literal text each pattern of READERS starts with (a search finds a candidate start at each one)."""
    from re import _constants as sre  # type: ignore[attr-defined]
    from re import _parser as sre_parse  # type: ignore[attr-defined]

    heads = []
    for reader in readers:
        pattern = getattr(getattr(reader, "__self__", None), "pattern", None)
        if not isinstance(pattern, str):
            continue
        head = ""
        items = list(sre_parse.parse(pattern))
        while items:
            op, av = items.pop(0)
            if op is sre.SUBPATTERN:  # a group's start is the pattern's start
                items[:0] = list(av[3])
            elif op in (sre.ASSERT, sre.ASSERT_NOT, sre.AT) and not head:
                continue  # a guard before the start: takes no character
            elif op is sre.LITERAL:
                head += chr(av)
            else:
                break
        if head:
            heads.append(head)
    return heads


def adversarial_lines(readers: Sequence[Callable[[str], object]], size: int) -> list[str]:
    """Lines of SIZE characters shaped against a search: runs of digits, word characters and spaces, separators
    repeated, and each pattern's own literal start repeated (alone, and before digits and separators)."""
    def fill(unit: str) -> str:
        return (unit * (size // max(len(unit), 1) + 1))[:size]

    lines = [fill("9"), fill("a"), fill(" "), fill("a1_"), fill("/"), fill(", "), fill("[0,"), fill(":1"),
             fill("-"), fill("."), fill("$"), fill("`")]
    for head in _literal_heads(readers):
        lines += [fill(head), fill(head + "9"), fill(head + " "), head + fill("9")[len(head):]]
    return lines


def _time_family(readers: Sequence[Callable[[str], object]], lines: Sequence[str], loops: int) -> float:
    started = time.perf_counter()
    for _ in range(loops):
        for line in lines:
            for reader in readers:
                reader(line)
    return time.perf_counter() - started


def bench_pattern_families(b: Bench, rows: list[bl.Row]) -> None:
    """Each family of job-text readers over adversarial lines of 1 KB and 4 KB: the time of the 4 KB lines, and
    the growth from 1 KB (linear: 4x; a search that reads a run again from each of its characters: 16x)."""
    log("readers of job text over adversarial lines, per pattern family (in-process, no cluster)")
    small, big = PATTERN_LINE_SIZES
    for family, readers in pattern_families().items():
        per_size: dict[int, float] = {}
        # enough passes that the small lines take 50 ms: a family of a few literal searches takes microseconds
        loops = max(1, min(10_000, int(0.05 / max(_time_family(readers, adversarial_lines(readers, small), 1), 1e-6))))
        for size in PATTERN_LINE_SIZES:
            lines = adversarial_lines(readers, size)
            # the fastest of the runs: these are milliseconds, and a busy machine only ever adds to them
            per_size[size] = min(_time_family(readers, lines, loops) for _ in range(max(3, b.repeat)))
        growth = per_size[big] / max(per_size[small], 1e-9)
        count = len(adversarial_lines(readers, big))
        rows.append(bl.Row("redaction", f"{family}: {count} adversarial {big // 1024} KB lines x {loops}",
                           bl.fmt_seconds(per_size[big]), reference=f"{bl.fmt_seconds(per_size[small])} at "
                           f"{small // 1024} KB", ratio=f"{growth:.1f}x", target=f"<= {big // small * 2}x",
                           result=bl.verdict(growth, big // small * 2)))


def bench_redaction(b: Bench, rows: list[bl.Row]) -> None:
    """redact_log_line and sanitize over one long line: figures per size, and the growth with size."""
    from kubectl_tao.core.redact import REDACTED, redact_log_line
    from kubectl_tao.core.sanitize import sanitize

    log("redaction of one long log line (in-process, no cluster)")
    per_kind: dict[str, dict[int, float]] = {}
    for size in REDACTION_SIZES:
        for kind, line in redaction_lines(size).items():
            redacted = redact_log_line(line)  # warm-up, and the check that the token is still found
            if not redacted.endswith(REDACTED):
                raise BenchError(f"redaction: the token at the end of the {kind} line was not redacted")
            runs = max(1, b.repeat if size < 1_000_000 else min(b.repeat, 3))
            samples = []
            for _ in range(runs):
                started = time.perf_counter()
                sanitize(redact_log_line(line), multiline=True)
                samples.append(time.perf_counter() - started)
            per_kind.setdefault(kind, {})[size] = bl.median(samples)
            rows.append(bl.Row("redaction", f"{kind}, one {size // 1000} KB line (redact + sanitize)",
                               bl.fmt_seconds(bl.median(samples)),
                               target="<= 10 s" if size == 1_000_000 else "",
                               result=bl.verdict(bl.median(samples), 10.0) if size == 1_000_000 else bl.INFO))
    small, big = REDACTION_SIZES[0], REDACTION_SIZES[-1]
    for kind, times in per_kind.items():
        growth = times[big] / max(times[small], 1e-6)
        rows.append(bl.Row("redaction", f"{kind}: {big // 1000} KB vs {small // 1000} KB (linear: "
                           f"{big // small}x)", f"{growth:.1f}x", target=f"<= {big // small * 2}x",
                           result=bl.verdict(growth, big // small * 2)))
    log("diagnosis of hostile log text (in-process, no cluster)")
    read_hostile(hostile_logs(1))  # warm-up: the patterns compiled
    once = bl.median([read_hostile(hostile_logs(1)) for _ in range(max(1, min(b.repeat, 3)))])
    tenfold = read_hostile(hostile_logs(10))
    growth = tenfold / max(once, 1e-6)
    rows.append(bl.Row("redaction", "explain/logs --errors readers over 6 hostile texts (3.7 MB)",
                       bl.fmt_seconds(once), target="< 5 s", result=bl.verdict(once, 5.0, strict=True)))
    rows.append(bl.Row("redaction", "  the same texts 10x as long (linear: 10x)", f"{growth:.1f}x",
                       reference=bl.fmt_seconds(tenfold), target="<= 20x", result=bl.verdict(growth, 20.0)))
    bench_pattern_families(b, rows)


def progress_texts(status_bytes: int, log_bytes: int) -> tuple[str, str]:
    """A status.json tail of STATUS_BYTES (TAO 6 epoch and kpi lines, cut mid-line at both ends, as a tail read
    while the file grows) and a training log of LOG_BYTES (Lightning's bar redrawn with carriage returns, twenty
    log lines an epoch between the bars)."""
    lines, epoch = [], 0
    while sum(len(line) for line in lines) < status_bytes + 400:
        kpi = {"val_mAP": f"0.{epoch % 1000:03d}1", "val_mAP50": "0.5902", "val_loss": 8.113}
        lines.append(json.dumps({"epoch": epoch, "step": 500 * (epoch + 1), "max_epoch": 99999, "max_step": 50000000,
                                 "time_per_epoch": "0:05:12.300000", "time_per_step": "0:00:00.624600",
                                 "eta": "6:51:21.700000", "date": "12/6/2026", "time": "9:9:44", "status": "RUNNING",
                                 "verbosity": "INFO", "message": "Training loop in progress", "kpi": kpi}) + "\n")
        lines.append(json.dumps({"date": "12/6/2026", "time": "9:9:44", "status": "RUNNING", "verbosity": "INFO",
                                 "message": "Train metrics generated.", "kpi": {"train_loss": 0.412}}) + "\n")
        epoch += 1
    status = "".join(lines)[-status_bytes - 100:-100]
    parts, size, epoch = [], 0, 0
    while size < log_bytes:
        bars = "\r".join(f"Epoch {epoch}: {n // 10:3d}%|{'#' * (n // 100):<10}| {n}/1000 [01:02<01:16,  7.20it/s, "
                         f"v_num=0, train_loss=0.{n:03d}]" for n in range(0, 1000, 7))
        info = "".join(f"[2026-12-06 09:04:07,553][INFO] rank 0 step {epoch * 1000 + n} data 0.012 s "
                       f"batch 0.198 s {{'loss': 0.{n:03d}, 'learning_rate': 4.5e-05, 'epoch': {epoch}.5}}\n"
                       for n in range(0, 1000, 50))
        part = f"{info}INFO: epoch {epoch} checkpoint saved to /results/train/model_epoch_{epoch:03d}.pth\n\r{bars}\n"
        parts.append(part)
        size += len(part)
        epoch += 1
    return status, "".join(parts)[:log_bytes]


def bench_progress(b: Bench, rows: list[bl.Row]) -> None:
    """The progress readers: a 64 KiB status.json tail and a 10 MB log, and the growth with ten times the text."""
    from kubectl_tao.progress.logtext import read_log
    from kubectl_tao.progress.statusjson import read_status_json

    log("progress readers over a status.json tail and a training log (in-process, no cluster)")
    cases = (("status.json tail", read_status_json, 65536, 655360), ("log", read_log, 1_000_000, 10_000_000))
    for kind, reader, small, big in cases:
        times: dict[int, float] = {}
        for size in (small, big):
            status, text = progress_texts(size, 0) if kind != "log" else ("", progress_texts(0, size)[1])
            body = status or text
            if reader(body) is None:  # warm-up, and the check that the text shows progress
                raise BenchError(f"progress: the {kind} of {size} bytes showed no progress")
            samples = []
            for _ in range(max(1, b.repeat if size < 5_000_000 else min(b.repeat, 3))):
                started = time.perf_counter()
                reader(body)
                samples.append(time.perf_counter() - started)
            times[size] = bl.median(samples)
            rows.append(bl.Row("progress", f"{kind}, {size // 1024} KiB" if size < 1_000_000 else
                               f"{kind}, {size // 1_000_000} MB", bl.fmt_seconds(times[size])))
        growth = times[big] / max(times[small], 1e-6)
        rows.append(bl.Row("progress", f"{kind}: 10x the text (linear: 10x)", f"{growth:.1f}x", target="<= 12x",
                           result=bl.verdict(growth, 12.0)))


def big_cluster_objects(nodes: int, pods: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                          list[dict[str, Any]]]:
    """The synthetic cluster as objects the API server accepts on create: namespaces, nodes, pods bound to the
    nodes (no scheduler involved) without status, service-account token or server-set metadata."""
    data = synthetic_cluster(nodes, pods)
    node_items = [i for i in data["items"] if i["kind"] == "Node"]
    pod_items = [i for i in data["items"] if i["kind"] == "Pod"]
    for item in node_items + pod_items:
        for key in ("uid", "resourceVersion", "creationTimestamp", "ownerReferences", "generateName"):
            item["metadata"].pop(key, None)
    for pod in pod_items:
        pod.pop("status", None)
        spec = pod["spec"]
        spec["automountServiceAccountToken"] = False
        spec["volumes"] = [v for v in spec["volumes"] if v["name"] != "kube-api-access"]
        for container in spec["containers"]:
            container["volumeMounts"] = [m for m in container["volumeMounts"] if m["name"] != "kube-api-access"]
    namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
                  for n in sorted({p["metadata"]["namespace"] for p in pod_items})]
    return namespaces, node_items, pod_items


def bench_big_cluster(b: Bench, rows: list[bl.Row], nodes: int, pods: int) -> None:
    """`kubectl tao fit` end to end against a real API server holding `nodes` nodes and `pods` pods: a separate
    local control plane started for this and stopped after it. The nodes are plain Node objects (not run by
    kwok: a thousand simulated kubelets are too slow to start on a small machine), so they would turn NotReady
    after a minute; the gate reads them all the same. Its controller manager is stopped once they are in: with
    no kubelet behind thousands of nodes, its node lifecycle controller would rewrite every node and pod while
    the reads are timed, on the same two CPUs (a moving answer, and noise of a third in the bare reads)."""
    from kubectl_tao.gates import capacity

    log(f"capacity gate end to end: a separate API server with {nodes} nodes and {pods} pods")
    cluster_dir = b.work / "big-cluster"
    env = {**b.env, "KUBECTL_TAO_CLUSTER_DIR": str(cluster_dir), "KUBECTL_TAO_GPU_NODES": "0",
           "KUBECTL_TAO_CPU_NODES": "1", "KUBECTL_TAO_REAL_NODES": "0", "KUBECTL_TAO_KUEUE": "0",
           "KUBECONFIG": str(cluster_dir / "kubeconfig")}
    script = str(ROOT / "scripts" / "local-cluster")
    label = (f"kubectl tao fit --gpus 8 --nodes 4 --topology topology.kubernetes.io/zone, {nodes} nodes / {pods} pods "
             "(real API server; GPU health judged on every node)")
    started = time.monotonic()
    up = subprocess.run([script, "up"], env=env, capture_output=True, text=True, timeout=300, check=False)
    try:
        if up.returncode != 0:
            log(f"the separate cluster did not start, skipped: {(up.stderr or up.stdout).strip()[-300:]}")
            rows.append(bl.Row("capacity", label, "skipped", reference="cluster did not start"))
            return
        namespaces, node_items, pod_items = big_cluster_objects(nodes, pods)

        def create(items: list[dict[str, Any]], *flags: str) -> None:
            path = b.work / f"big-{secrets.token_hex(4)}.json"
            path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
            timed([b.kubectl, "create", *flags, "-f", str(path), "-o", "name"], env, timeout=600)

        create(namespaces)
        create(node_items, "--validate=false")  # status (allocatable) is kept on create for nodes
        batch = 1000
        with ThreadPoolExecutor(max_workers=4) as pool:
            for future in [pool.submit(create, pod_items[i:i + batch]) for i in range(0, len(pod_items), batch)]:
                future.result()
        timed([script, "stop-component", "kube-controller-manager"], env, timeout=60)
        log(f"big cluster ready in {time.monotonic() - started:.0f}s (controller manager stopped)")
        tao_env = {**b.tao_env("default", b.work / "state-big"), **{k: env[k] for k in ("KUBECONFIG",)}}
        argv = [str(PLUGIN), "fit", "--gpus", "8", "--nodes", "4", "--topology", "topology.kubernetes.io/zone"]
        timed(argv, tao_env, ok=(0, 1, 4), timeout=120)
        apart_value = 0.0
        for apart in (True, False) if len(os.sched_getaffinity(0)) > 1 else (True,):
            with bl.server_apart(cluster_dir / "pids", apart) as where:
                walls: list[float] = []
                busy: list[float] = []
                bare: list[float] = []  # interleaved with the fit runs: the same minutes of a noisy machine
                pod_reads = 0
                for _ in range(b.repeat):
                    trace = b.trace_file()
                    walls.append(timed(argv, {**tao_env, "KUBECTL_TAO_TRACE": str(trace)}, ok=(0, 1, 4),
                                       timeout=120)[0])
                    busy.append(bl.kubectl_busy_seconds(read_lines(trace)))
                    pod_reads = sum("/api/v1/pods?" in line for line in read_lines(trace))
                    bare.append(bare_once(b, [capacity.NODES_READ, capacity.PODS_READ], env))
                as_raw = bl.median(bare)
            value = bl.median(walls)
            if apart:
                rss_out = b.work / f"rss-big-{nodes}.txt"
                timed([str(VENV_PYTHON), "-c", RSS_WRAPPER, *argv], {**tao_env, "BENCH_RSS_OUT": str(rss_out)},
                      ok=(0, 1, 4), timeout=120)
                peak_kib = int(rss_out.read_text().strip() or 0)
                target = capacity_target(nodes)
                rows.append(bl.Row("capacity", f"{label}, {where}", bl.fmt_seconds(value),
                                   reference=f"of which kubectl {bl.fmt_seconds(bl.median(busy))}; {pod_reads} pods "
                                             f"read; peak RSS Python {bl.fmt_kib(peak_kib)}",
                                   target=f"<= {target:.0f} s", result=bl.verdict(value, target)))
                rows.append(bl.Row("capacity", "  bare kubectl get --raw nodes + non-finished pods, at once (what the "
                                   "gate reads), the same CPUs", bl.fmt_seconds(as_raw),
                                   reference=bl.fmt_seconds(value), ratio=f"fit = {value / as_raw:.2f}x",
                                   target="<= 1.3x", result=bl.verdict(value / as_raw, 1.3)))
                apart_value = value
            else:
                rows.append(bl.Row("capacity", f"  the same, {where}: fit against the bare --raw reads",
                                   bl.fmt_seconds(value), reference=f"{bl.fmt_seconds(as_raw)} bare",
                                   ratio=f"fit = {value / as_raw:.2f}x"))
        as_json = bl.median([bare_once(b, [["get", "nodes,pods", "--all-namespaces", "-o", "json"]], env)
                             for _ in range(b.repeat)])
        rows.append(bl.Row("capacity", "  bare kubectl get nodes,pods -A -o json (what the gate read before)",
                           bl.fmt_seconds(as_json), reference=bl.fmt_seconds(apart_value),
                           ratio=f"fit = {apart_value / as_json:.2f}x"))
    finally:
        subprocess.run([script, "down"], env=env, capture_output=True, text=True, timeout=300, check=False)


# ----------------------------------------------------------------------------------------------- submit


def render_manifest(b: Bench, ns: str, state: Path, gpus: int) -> tuple[str, str]:
    """`kubectl tao render -o json` of the submit under test; returns (manifest text, the name in it)."""
    _, proc = timed([str(PLUGIN), "render", "-o", "json", *job_args(gpus, RUN_SECONDS)], b.tao_env(ns, state))
    data = json.loads(proc.stdout)
    first = data["items"][0] if data.get("kind") == "List" else data
    return proc.stdout, str(first["metadata"]["name"])


def bench_submit(b: Bench, rows: list[bl.Row], ns: str, state: Path, gpus: int, info: dict[str, Any]) -> None:
    log(f"submit --gpus {gpus} vs bare kubectl")
    manifest, name = render_manifest(b, ns, state, gpus)
    tao: list[float] = []
    bare: list[float] = []
    busy: list[float] = []
    calls: list[int] = []

    before: list[float] = []

    def run_tao() -> None:
        trace = b.trace_file()
        elapsed, _ = timed([str(PLUGIN), "submit", *job_args(gpus, RUN_SECONDS)], b.tao_env(ns, state, trace))
        lines = read_lines(trace)
        tao.append(elapsed)
        busy.append(bl.kubectl_busy_seconds(lines))
        calls.append(len(lines))
        if BEFORE is not None:
            before.append(timed([str(BEFORE / "kubectl-tao"), "submit", *job_args(gpus, RUN_SECONDS)],
                                b.tao_env(ns, state))[0])

    def run_bare(index: int, tuned: bool = False) -> None:
        path = b.work / f"manifest-{gpus}-{index}{'-tuned' if tuned else ''}.json"
        path.write_text(manifest.replace(name, f"bench-bare-{b.run_id}-{gpus}-{index}{'-t' if tuned else ''}"))
        env = {**b.env, **SHORT_CALL_GO_ENV} if tuned else b.env
        started = time.perf_counter()
        timed([b.kubectl, "get", "nodes"], env)
        timed([b.kubectl, "apply", "--dry-run=server", "-f", str(path)], env)
        timed([b.kubectl, "apply", "-f", str(path)], env)
        (bare_tuned if tuned else bare).append(time.perf_counter() - started)

    bare_tuned: list[float] = []  # the same calls with the Go settings the plugin gives its short kubectl calls
    sample_before = cpu_sample()
    run_tao()  # warm-up (bytecode cache, API server caches); not counted
    run_bare(0)
    tao.clear(), busy.clear(), calls.clear(), bare.clear(), before.clear()
    for index in range(1, b.repeat + 1):
        if index % 2:
            run_tao()
            run_bare(index)
            run_bare(index, tuned=True)
        else:
            run_bare(index, tuned=True)
            run_bare(index)
            run_tao()
    sample_after = cpu_sample()
    value, reference = bl.median(tao), bl.median(bare)
    r = bl.ratio(value, reference)
    rows.append(bl.Row("submit", f"kubectl tao submit --gpus {gpus} (tier A, PVC)", bl.fmt_seconds(value),
                       reference=f"{bl.fmt_seconds(reference)} bare", ratio=f"{r:.2f}x",
                       target=f"<= {SUBMIT_TARGET}x", result=bl.verdict(r, SUBMIT_TARGET)))
    tuned = bl.median(bare_tuned)
    go_env = " ".join(f"{k}={v}" for k, v in SHORT_CALL_GO_ENV.items())
    rows.append(bl.Row("submit", f"  the same against bare kubectl run with {go_env}, as the plugin runs it",
                       bl.fmt_seconds(value), reference=f"{bl.fmt_seconds(tuned)} bare",
                       ratio=f"{bl.ratio(value, tuned):.2f}x", target=""))
    if before:
        rows.append(bl.Row("submit", f"  the same with --before {BEFORE}", bl.fmt_seconds(bl.median(before)),
                           reference=f"{bl.fmt_seconds(reference)} bare",
                           ratio=f"{bl.ratio(bl.median(before), reference):.2f}x"))
        rows.append(bl.Row("submit", "  cost of this checkout over --before",
                           f"{(value - bl.median(before)) * 1000:+.0f} ms"))
    kubectl_busy = bl.median(busy)
    rows.append(bl.Row("submit", f"  of which kubectl running ({max(calls)} calls, gates at once)",
                       bl.fmt_seconds(kubectl_busy), reference="", ratio="", target=""))
    rows.append(bl.Row("submit", "  of which Python (start-up + validation, record, render, lint)",
                       bl.fmt_seconds(max(value - kubectl_busy, 0.0))))
    machine_idle_row(rows, "submit", sample_before, sample_after)
    submit_argv = ["submit", *job_args(gpus, RUN_SECONDS)]
    import_rows(rows, "submit", f"submit --gpus {gpus}", [str(PLUGIN), *submit_argv], b.tao_env(ns, state),
                before_argv=[str(BEFORE / "kubectl-tao"), *submit_argv] if BEFORE is not None else None)
    info[f"submit{gpus}"] = {"tao": value, "bare": reference, "busy": kubectl_busy, "calls": max(calls)}


# ----------------------------------------------------------------------------------------------- status


def bench_status(b: Bench, rows: list[bl.Row], ns: str, state: Path) -> str:
    log("status vs kubectl get job")
    record_id = submit_job(b, ns, state)
    job = json.loads((state / "jobs" / ".kubectl-tao" / f"{record_id}.json").read_text())["job_name"]
    wait_until(lambda: b.k("get", "pods", "-n", ns, "-l", f"tao-job={job}", "-o",
                           "jsonpath={.items[*].status.phase}") == "Running", 60, f"pod of {job} Running")
    argv = [str(PLUGIN), "status", record_id]
    timed(argv, b.tao_env(ns, state))  # warm-up: the first status may write RUNNING into the record
    tao: list[float] = []
    bare: list[float] = []
    bare_tuned: list[float] = []  # with the Go settings the plugin gives its short kubectl calls
    calls: list[int] = []
    before: list[float] = []
    before_argv = [str(BEFORE / "kubectl-tao"), "status", record_id] if BEFORE is not None else None
    sample_before = cpu_sample()
    for _ in range(b.repeat):
        trace = b.trace_file()
        tao.append(timed(argv, b.tao_env(ns, state, trace))[0])
        calls.append(len(read_lines(trace)))
        if before_argv is not None:
            before.append(timed(before_argv, b.tao_env(ns, state))[0])
        bare.append(timed([b.kubectl, "get", "job", job, "-n", ns], b.env)[0])
        bare_tuned.append(timed([b.kubectl, "get", "job", job, "-n", ns], {**b.env, **SHORT_CALL_GO_ENV})[0])
    sample_after = cpu_sample()
    value, reference, tuned = bl.median(tao), bl.median(bare), bl.median(bare_tuned)
    watched = HEAVY_MODULES
    loaded, total_ms = imports_of(argv, b.tao_env(ns, state), watched)
    rows.append(bl.Row("status", f"imports at `status JOB` ({', '.join(watched)})", ", ".join(loaded) or "none",
                       reference=f"imports {total_ms:.0f} ms", target="none",
                       result=bl.MISSED if loaded else bl.MET))
    rows.append(bl.Row("status", "kubectl calls per `kubectl tao status` (the Job's read, rank 0's progress read)",
                       "/".join(map(str, calls)), target="<= 2", result=bl.MET if max(calls) <= 2 else bl.MISSED))
    rows.append(bl.Row("status", "kubectl tao status JOB", bl.fmt_seconds(value),
                       reference=f"{bl.fmt_seconds(reference)} kubectl get job",
                       ratio=f"{bl.ratio(value, reference):.2f}x", target=f"<= {STATUS_TARGET:g}x",
                       result=bl.verdict(bl.ratio(value, reference), STATUS_TARGET)))
    if before:
        rows.append(bl.Row("status", f"  the same with --before {BEFORE}", bl.fmt_seconds(bl.median(before)),
                           reference=f"{bl.fmt_seconds(reference)} kubectl get job",
                           ratio=f"{bl.ratio(bl.median(before), reference):.2f}x"))
        rows.append(bl.Row("status", "  cost of this checkout over --before",
                           f"{(value - bl.median(before)) * 1000:+.0f} ms"))
    go_env = " ".join(f"{k}={v}" for k, v in SHORT_CALL_GO_ENV.items())
    rows.append(bl.Row("status", f"  the same against kubectl get job run with {go_env}, as the plugin runs it",
                       bl.fmt_seconds(value), reference=f"{bl.fmt_seconds(tuned)} kubectl get job",
                       ratio=f"{bl.ratio(value, tuned):.2f}x", target=""))
    machine_idle_row(rows, "status", sample_before, sample_after)
    import_rows(rows, "status", "status JOB", argv, b.tao_env(ns, state), before_argv=before_argv)
    return record_id


# ----------------------------------------------------------------------------------------------- explain


FAILING_RANKS = (  # every rank prints 250 progress lines, then a traceback; exit 1
    "seq 250 | sed 's/^/step /'; echo 'Traceback (most recent call last):' >&2; "
    "echo \"ValueError: corrupt record in shard $JOB_COMPLETION_INDEX\" >&2; exit 1"
)


def bench_explain(b: Bench, rows: list[bl.Row]) -> None:
    log("explain of a failed multi-rank job vs kubectl logs --tail")
    started = time.perf_counter()
    diagnosed = diagnose_in_process(64, 300)
    rows.append(bl.Row("explain", "diagnosis/causes.diagnose: 64 ranks x 300 lines, in-process",
                       bl.fmt_seconds(diagnosed), reference=f"{bl.fmt_seconds(time.perf_counter() - started)} "
                       "with the import", target="< 1 s", result=bl.verdict(diagnosed, 1.0, strict=True)))
    images_env = _data_dir() / "real" / "images.env"
    real = b.k("get", "nodes", "-l", f"{REAL_NODE_LABEL}=true", "-o", "name").split()
    if len(real) < 2 or not images_env.exists():
        rows.append(bl.Row("explain", "explain of a failed two-rank job: skipped (needs two real nodes)", "-"))
        return
    images = dict(line.split("=", 1) for line in images_env.read_text().splitlines() if "=" in line)
    ns, state = b.namespace("explain")
    _, proc = timed([str(PLUGIN), "submit", "--image", images["BUSYBOX_IMAGE"], "--network-arch", "bench", "--action",
                     "run", "--gpus", "1", "--nodes", "2", "--pvc", "tao-data", "--command", FAILING_RANKS,
                     "--node-selector", f"{REAL_NODE_LABEL}=true", "--toleration",
                     f"{REAL_NODE_LABEL}=true:NoSchedule", "--ttl-seconds", "900"], b.tao_env(ns, state))
    record_id = proc.stdout.strip().splitlines()[-1]
    files = [state / "jobs" / f"{record_id}.json", state / "jobs" / ".kubectl-tao" / f"{record_id}.json"]
    job = json.loads(files[1].read_text())["job_name"]
    failed = "jsonpath={.status.conditions[?(@.type==\"Failed\")].status}"
    wait_until(lambda: b.k("get", "job", job, "-n", ns, "-o", failed) == "True", 180, f"job {job} to fail")
    pristine = [path.read_bytes() for path in files]  # the ending not captured: explain reads the logs itself

    def restore() -> None:
        for path, data in zip(files, pristine, strict=True):
            path.write_bytes(data)

    pod = b.k("get", "pods", "-n", ns, "-l", f"tao-job={job},batch.kubernetes.io/job-completion-index=0", "-o",
              "jsonpath={.items[0].metadata.name}")
    argv = [str(PLUGIN), "explain", record_id]
    timed(argv, b.tao_env(ns, state), ok=(1,))  # warm-up
    tao: list[float] = []
    bare: list[float] = []
    before: list[float] = []
    calls: list[int] = []
    said = ""
    before_argv = [str(BEFORE / "kubectl-tao"), "explain", record_id] if BEFORE is not None else None
    sample_before = cpu_sample()
    for _ in range(b.repeat):
        restore()
        trace = b.trace_file()
        elapsed, out = timed(argv, b.tao_env(ns, state, trace), ok=(1,))
        tao.append(elapsed)
        calls.append(sum(1 for line in read_lines(trace) if "logs" in json.loads(line)["argv"]))
        said = out.stdout
        if before_argv is not None:
            restore()
            before.append(timed(before_argv, b.tao_env(ns, state), ok=(1,))[0])
        bare.append(timed([b.kubectl, "logs", pod, "-n", ns, "-c", "tao", "--tail=300"], b.env)[0])
    sample_after = cpu_sample()
    if "(ProgramError, ERR_PROGRAM)" not in said:
        raise BenchError(f"explain did not name the cause: {said.strip()[-300:]}")
    restore()
    import_rows(rows, "explain", "explain JOB (failed, every rank's log read)", argv, b.tao_env(ns, state), ok=(1,),
                before_argv=before_argv)
    timed([str(PLUGIN), "status", record_id], b.tao_env(ns, state))  # captures the ending and the cause
    kept = [timed(argv, b.tao_env(ns, state), ok=(1,))[0] for _ in range(b.repeat)]
    value, reference = bl.median(tao), bl.median(bare)
    rows.append(bl.Row("explain", "`kubectl logs` calls per `explain` of a failed job (every rank read)",
                       "/".join(map(str, calls)), target="1", result=bl.MET if set(calls) == {1} else bl.MISSED))
    rows.append(bl.Row("explain", "kubectl tao explain JOB: failed 2-rank job, reads every rank's log",
                       bl.fmt_seconds(value), reference=f"{bl.fmt_seconds(reference)} kubectl logs --tail=300",
                       ratio=f"{bl.ratio(value, reference):.2f}x", target=f"<= {EXPLAIN_TARGET:g}x",
                       result=bl.verdict(bl.ratio(value, reference), EXPLAIN_TARGET)))
    before_rows(rows, "explain", value, before, reference, "kubectl logs --tail=300")
    rows.append(bl.Row("explain", "  the same once the record holds the cause (no log read)",
                       bl.fmt_seconds(bl.median(kept)), reference=f"{bl.fmt_seconds(reference)} kubectl logs",
                       ratio=f"{bl.ratio(bl.median(kept), reference):.2f}x"))
    machine_idle_row(rows, "explain", sample_before, sample_after)
    b.drop_namespace(ns, wait=False)


def diagnose_in_process(ranks: int, lines: int) -> float:
    """Seconds diagnosis/causes.diagnose takes over RANKS logs of LINES lines, one rank raising, the others
    followers (the gloo texts of the failure corpus)."""
    from kubectl_tao.diagnosis import causes

    corpus = ROOT / "tests" / "fixtures" / "failures"
    follower = (corpus / "python-exception--remote-rank-died.rank0.log").read_text()
    raiser = (corpus / "python-exception--remote-rank-died.rank1.log").read_text()
    progress = "\n".join(f"step {i} loss 0.{i:04d} lr 1e-4 tokens/s 12345" for i in range(lines - 30))
    logs = [causes.RankLog(r, progress + "\n" + follower.replace("[rank0]", f"[rank{r}]")) for r in range(ranks)]
    logs[ranks // 2] = causes.RankLog(ranks // 2, progress + "\n" + raiser.replace("[rank1]", f"[rank{ranks // 2}]"))
    times = []
    for _ in range(3):
        started = time.perf_counter()
        found = causes.diagnose(logs)
        times.append(time.perf_counter() - started)
    if found is None or found.rank != ranks // 2:
        raise BenchError("diagnosis/causes.diagnose did not name the raising rank")
    return bl.median(times)


# ----------------------------------------------------------------------------------------------- progress-status


def real_node_images(b: Bench) -> dict[str, str] | None:
    """The images local-cluster imported into the real nodes, or None without two real nodes."""
    images_env = _data_dir() / "real" / "images.env"
    real = b.k("get", "nodes", "-l", f"{REAL_NODE_LABEL}=true", "-o", "name").split()
    if len(real) < 2 or not images_env.exists():
        return None
    return dict(line.split("=", 1) for line in images_env.read_text().splitlines() if "=" in line)


# A TAO-shaped rank 0 (busybox, no torch): status.json under $TAO_RESULTS_ROOT/train as TAO 6's StatusLogger writes
# it (the lifecycle lines, then per epoch an epoch line and a kpi line; tests/fixtures/progress), 40 of 80 epochs
# done; it runs until bench-done appears beside status.json, then writes TAO's last line and exits 0.
TAO_SHAPED_RANK = (
    'd="${TAO_RESULTS_ROOT:?}/train"; f="$d/status.json"; mkdir -p "$d"; '
    "printf '%s\\n' '{\"date\": \"12/6/2026\", \"time\": \"9:4:7\", \"status\": \"STARTED\", \"verbosity\": \"INFO\", "
    "\"message\": \"Starting DINO train.\"}' > \"$f\"; i=0; while [ $i -lt 40 ]; do s=$(( (79 - i) * 313 )); "
    "printf '{\"epoch\": %d, \"step\": %d, \"max_epoch\": 79, \"max_step\": 40000, \"time_per_epoch\": "
    "\"0:05:12.300000\", \"time_per_step\": \"0:00:00.624600\", \"eta\": \"%d:%02d:%02d.700000\", \"date\": "
    "\"12/6/2026\", \"time\": \"9:9:44\", \"status\": \"RUNNING\", \"verbosity\": \"INFO\", \"message\": "
    "\"Training loop in progress\", \"kpi\": {\"val_mAP\": \"0.3771\", \"val_mAP50\": \"0.5902\", \"val_loss\": "
    "8.113}}\\n' $i $(( (i + 1) * 500 )) $((s / 3600)) $((s % 3600 / 60)) $((s % 60)) >> \"$f\"; "
    "printf '%s\\n' '{\"date\": \"12/6/2026\", \"time\": \"9:9:44\", \"status\": \"RUNNING\", \"verbosity\": "
    "\"INFO\", \"message\": \"Train metrics generated.\", \"kpi\": {\"train_loss\": 0.412}}' >> \"$f\"; "
    "i=$((i + 1)); done; echo status.json written; while [ ! -e \"$d/bench-done\" ]; do sleep 1; done; "
    "printf '%s\\n' '{\"date\": \"12/6/2026\", \"time\": \"9:15:2\", \"status\": \"SUCCESS\", \"verbosity\": "
    "\"INFO\", \"message\": \"Train finished successfully.\"}' >> \"$f\""
)


def split_rows(rows: list[bl.Row], phase: str, value: float, busy: list[float], before_exec: list[float], *,
               tuned: tuple[float, str], kubectl: str, python: str, gap: str) -> None:
    """The rows that split a verb's median VALUE: against the bare calls run with SHORT_CALL_GO_ENV (TUNED: their
    median and what they are), kubectl's share (BUSY: the time kubectl ran, each run), Python's, and the time
    before the first exec."""
    go_env = " ".join(f"{k}={v}" for k, v in SHORT_CALL_GO_ENV.items())
    rows.append(bl.Row(phase, f"  the same against the bare calls run with {go_env}", bl.fmt_seconds(value),
                       reference=f"{bl.fmt_seconds(tuned[0])} {tuned[1]}", ratio=f"{bl.ratio(value, tuned[0]):.2f}x"))
    kubectl_busy = bl.median(busy)
    rows.append(bl.Row(phase, f"  of which kubectl running ({kubectl})", bl.fmt_seconds(kubectl_busy)))
    rows.append(bl.Row(phase, f"  of which Python ({python})", bl.fmt_seconds(max(value - kubectl_busy, 0.0))))
    rows.append(bl.Row(phase, f"  {gap}", bl.fmt_seconds(bl.median(before_exec))))


def bench_progress_status(b: Bench, rows: list[bl.Row]) -> None:
    """`status JOB` of a running job whose rank 0 has a status.json vs the bare calls it stands for (`kubectl get
    job` + one `kubectl exec POD -- tail -c 65536 PATH`, one after the other, as status makes them); then the same
    job finished vs one `kubectl get job`."""
    log("status of a running job with progress vs kubectl get job + kubectl exec tail")
    images = real_node_images(b)
    if images is None:
        rows.append(bl.Row("progress-status", "status of a running job with progress: skipped (needs two real "
                           "nodes)", "-"))
        return
    ns, state = b.namespace("progress")
    _, proc = timed([str(PLUGIN), "submit", "--image", images["BUSYBOX_IMAGE"], "--network-arch", "bench", "--action",
                     "train", "--gpus", "0", "--pvc", "tao-data", "--command", TAO_SHAPED_RANK, "--node-selector",
                     f"{REAL_NODE_LABEL}=true", "--toleration", f"{REAL_NODE_LABEL}=true:NoSchedule",
                     "--ttl-seconds", "900"], b.tao_env(ns, state))
    record_id = proc.stdout.strip().splitlines()[-1]
    record = json.loads((state / "jobs" / f"{record_id}.json").read_text())
    job = json.loads((state / "jobs" / ".kubectl-tao" / f"{record_id}.json").read_text())["job_name"]
    path = f"{record['results_dir']}/train/status.json"
    wait_until(lambda: "status.json written" in b.k("logs", "-n", ns, f"job/{job}", "-c", "tao", check=False),
               180, f"job {job} to write its status.json")
    pod = b.k("get", "pods", "-n", ns, "-l", f"tao-job={job}", "-o", "jsonpath={.items[0].metadata.name}")
    argv = [str(PLUGIN), "status", record_id]
    env = b.tao_env(ns, state)
    timed(argv, env)  # warm-up: the first status writes RUNNING and the progress into the record
    shown = json.loads(timed([*argv, "-o", "json"], env)[1].stdout)
    progress = shown.get("progress") or {}
    if shown.get("state") != "RUNNING" or progress.get("source") != "status.json" or progress.get("epoch") is None:
        raise BenchError(f"status did not read the running job's status.json: {json.dumps(shown)[-400:]}")
    get_job = [b.kubectl, "get", "job", job, "-n", ns]
    tail = [b.kubectl, "exec", pod, "-n", ns, "-c", "tao", "--", "tail", "-c", str(65536), path]
    tuned_env = {**b.env, **SHORT_CALL_GO_ENV}
    tao: list[float] = []
    bare: list[float] = []
    bare_tuned: list[float] = []
    calls: list[int] = []
    execs: list[int] = []
    busy: list[float] = []
    before_exec: list[float] = []  # from the first call's start to the exec's
    for index in range(b.repeat):
        for step in (0, 1, 2) if index % 2 == 0 else (2, 1, 0):  # alternate the order: drift spreads over both
            if step == 0:
                trace = b.trace_file()
                tao.append(timed(argv, b.tao_env(ns, state, trace))[0])
                lines = read_lines(trace)
                calls.append(len(lines))
                busy.append(bl.kubectl_busy_seconds(lines))
                before_exec.append(bl.seconds_before(lines, "exec") or 0.0)
                execs.append(sum(1 for line in lines if "exec" in json.loads(line)["argv"]))
            else:
                started = time.perf_counter()
                for call in (get_job, tail):
                    timed(call, b.env if step == 1 else tuned_env)
                (bare if step == 1 else bare_tuned).append(time.perf_counter() - started)
    value, reference, tuned = bl.median(tao), bl.median(bare), bl.median(bare_tuned)
    shown_epoch = f"epoch {progress.get('epoch')}/{progress.get('max_epoch')}"
    rows.append(bl.Row("progress-status", "kubectl calls per `status` of a running job (of which exec)",
                       "/".join(f"{c} ({e})" for c, e in zip(calls, execs, strict=True)), target="2 (1)",
                       result=bl.MET if set(calls) == {2} and set(execs) == {1} else bl.MISSED))
    rows.append(bl.Row("progress-status", f"kubectl tao status JOB: running, status.json read ({shown_epoch})",
                       bl.fmt_seconds(value), reference=f"{bl.fmt_seconds(reference)} get job + exec tail -c 65536",
                       ratio=f"{bl.ratio(value, reference):.2f}x", target=f"<= {PROGRESS_STATUS_TARGET:g}x",
                       result=bl.verdict(bl.ratio(value, reference), PROGRESS_STATUS_TARGET)))
    split_rows(rows, "progress-status", value, busy, before_exec, tuned=(tuned, "get job + exec tail"),
               kubectl="the Job and pods read and the exec, started together",
               python="start-up, the job state read, the status.json read, table",
               gap="from the first call's start to the exec's (one-pod job: both start at once)")

    log("status of the same job finished vs kubectl get job")
    b.k("exec", pod, "-n", ns, "-c", "tao", "--", "touch", f"{record['results_dir']}/train/bench-done")
    complete = "jsonpath={.status.conditions[?(@.type==\"Complete\")].status}"
    wait_until(lambda: b.k("get", "job", job, "-n", ns, "-o", complete) == "True", 120, f"job {job} to complete")
    timed(argv, env)  # warm-up: captures the ending and the final progress
    shown = json.loads(timed([*argv, "-o", "json"], env)[1].stdout)
    if shown.get("state") != "COMPLETE" or not shown.get("progress"):
        raise BenchError(f"status of the finished job kept no progress: {json.dumps(shown)[-400:]}")
    tao, bare, calls, before = [], [], [], []
    before_argv = [str(BEFORE / "kubectl-tao"), *argv[1:]] if BEFORE is not None else None
    sample_before = cpu_sample()
    for _ in range(b.repeat):
        trace = b.trace_file()
        tao.append(timed(argv, b.tao_env(ns, state, trace))[0])
        calls.append(len(read_lines(trace)))
        if before_argv is not None:
            before.append(timed(before_argv, env)[0])
        bare.append(timed(get_job, b.env)[0])
    sample_after = cpu_sample()
    value, reference = bl.median(tao), bl.median(bare)
    rows.append(bl.Row("progress-status", "kubectl calls per `status` of the finished job", "/".join(map(str, calls)),
                       target="<= 1", result=bl.MET if max(calls) <= 1 else bl.MISSED))
    rows.append(bl.Row("progress-status", "kubectl tao status JOB: finished, progress kept in the record",
                       bl.fmt_seconds(value), reference=f"{bl.fmt_seconds(reference)} kubectl get job",
                       ratio=f"{bl.ratio(value, reference):.2f}x", target=f"<= {STATUS_TARGET:g}x",
                       result=bl.verdict(bl.ratio(value, reference), STATUS_TARGET)))
    before_rows(rows, "progress-status", value, before, reference, "kubectl get job")
    machine_idle_row(rows, "progress-status", sample_before, sample_after)
    import_rows(rows, "progress-status", "status JOB (finished)", argv, env, before_argv=before_argv)
    b.drop_namespace(ns, wait=False)


def before_rows(rows: list[bl.Row], phase: str, value: float, before: Sequence[float], reference: float,
                bare: str) -> None:
    """With --before: the same runs of the other checkout, timed in the same loop, and what this one costs over
    it (nothing without --before)."""
    if not before:
        return
    then = bl.median(before)
    rows.append(bl.Row(phase, f"  the same with --before {BEFORE}", bl.fmt_seconds(then),
                       reference=f"{bl.fmt_seconds(reference)} {bare}", ratio=f"{bl.ratio(then, reference):.2f}x"))
    rows.append(bl.Row(phase, "  cost of this checkout over --before", f"{(value - then) * 1000:+.0f} ms"))


# ----------------------------------------------------------------------------------------------- top


TOP_RANKS = 8
BUSY_UUID = "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"
IDLE_UUID = "GPU-3c5e1f7a-0b9d-4e21-8f6a-2d7c9b1e4a03"
# A stand-in nvidia-smi printing the CSV the real one prints for top's query (tests/e2e/test_real_top.py): rank 0
# busy, the others idle. Anything else is refused as nvidia-smi refuses an unknown field.
NVIDIA_SMI_STANDIN = (
    "#!/bin/sh\n"
    '[ "$*" = "--query-gpu=index,uuid,utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits" ] || {\n'
    '  echo "Field \\"$1\\" is not a valid field to query."; exit 2; }\n'
    'if [ "$JOB_COMPLETION_INDEX" = "0" ]; then\n'
    f"  printf '0, {BUSY_UUID}, 87, 40213, 81559\\n'\n"
    "else\n"
    f"  printf '0, {IDLE_UUID}, 0, 3, 81559\\n'\n"
    "fi\n"
)
TOP_RANK = (  # each rank installs the stand-in where kubectl exec finds it, then runs until deleted
    f"mkdir -p /usr/local/bin && cat > /usr/local/bin/nvidia-smi <<'EOF'\n{NVIDIA_SMI_STANDIN}EOF\n"
    "chmod 755 /usr/local/bin/nvidia-smi && echo stand-in installed && sleep 900\n"
)


def top_job(name: str, ns: str, image: str) -> dict[str, Any]:
    """An Indexed Job of TOP_RANKS pods holding one (fake) GPU each on the real nodes, made by hand: kubectl-tao's
    own multi-node Jobs put one rank on each node, and the local cluster has two real nodes."""
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
        "spec": {
            "completionMode": "Indexed", "completions": TOP_RANKS, "parallelism": TOP_RANKS, "backoffLimit": 0,
            "template": {"spec": {
                "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                "nodeSelector": {REAL_NODE_LABEL: "true"},
                "tolerations": [{"key": REAL_NODE_LABEL, "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
                "containers": [{"name": "train", "image": image, "imagePullPolicy": "Never",
                                "command": ["/bin/sh", "-c", TOP_RANK],
                                "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            }},
        },
    }


def bench_top(b: Bench, rows: list[bl.Row]) -> None:
    """`top JOB -o json` of an 8-rank job (nvidia-smi in each rank, no DCGM exporter) vs the same 8 bare `kubectl
    exec POD -- nvidia-smi --query-gpu=...` calls run at once."""
    from kubectl_tao.progress.gpuuse import NVIDIA_SMI_QUERY

    log(f"top of a {TOP_RANKS}-rank job vs {TOP_RANKS} bare kubectl exec nvidia-smi at once")
    images = real_node_images(b)
    if images is None:
        rows.append(bl.Row("top", f"top of a {TOP_RANKS}-rank job: skipped (needs two real nodes)", "-"))
        return
    ns, state = b.namespace("top")
    env = b.tao_env(ns, state)
    image = images["BUSYBOX_IMAGE"]
    record_id = timed([str(PLUGIN), "record", "open", "--image", image, "--network-arch", "bench", "--action", "run",
                       "--storage-tier", "A", "--results-root", "/workspace/results"], env)[1].stdout.strip()
    job = f"bench-top-{b.run_id}"
    b.k("apply", "-f", "-", input=json.dumps(top_job(job, ns, image)))
    timed([str(PLUGIN), "record", "mark", record_id, "--state", "RUNNING", "--backend-ref", f"{ns}/{job}"], env)
    argv = [str(PLUGIN), "top", record_id, "-o", "json"]

    def all_read() -> bool:
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
        if proc.returncode != 0:
            return False
        data = json.loads(proc.stdout)
        return len(data) == TOP_RANKS and all(rank["gpus"] and rank["source"] == "nvidia-smi" for rank in data)

    wait_until(all_read, 300, f"top to read nvidia-smi in all {TOP_RANKS} ranks of {job}", interval=2)
    pods = json.loads(b.k("get", "pods", "-n", ns, "-l", f"job-name={job}", "-o", "json"))["items"]
    nodes = sorted({pod["spec"]["nodeName"] for pod in pods})
    bare_calls = [[b.kubectl, "exec", pod["metadata"]["name"], "-n", ns, "-c", "train", "--", *NVIDIA_SMI_QUERY]
                  for pod in pods]

    def bare_once(call_env: dict[str, str]) -> float:
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=len(bare_calls)) as pool:
            list(pool.map(lambda call: timed(call, call_env), bare_calls))
        return time.perf_counter() - started

    tuned_env = {**b.env, **SHORT_CALL_GO_ENV}
    timed(argv, env)  # warm-up
    bare_once(b.env)
    sample_before = cpu_sample()
    tao: list[float] = []
    bare: list[float] = []
    bare_tuned: list[float] = []
    calls: list[int] = []
    busy: list[float] = []
    before_exec: list[float] = []  # from the first call's start to the first exec's
    for index in range(b.repeat):
        for step in (0, 1, 2) if index % 2 == 0 else (2, 1, 0):
            if step == 0:
                trace = b.trace_file()
                tao.append(timed(argv, b.tao_env(ns, state, trace))[0])
                lines = read_lines(trace)
                calls.append(len(lines))
                busy.append(bl.kubectl_busy_seconds(lines))
                before_exec.append(bl.seconds_before(lines, "exec") or 0.0)
            else:
                (bare if step == 1 else bare_tuned).append(bare_once(b.env if step == 1 else tuned_env))
    sample_after = cpu_sample()
    value, reference, tuned = bl.median(tao), bl.median(bare), bl.median(bare_tuned)
    where = f"{TOP_RANKS} ranks on {len(nodes)} real node(s)"
    rows.append(bl.Row("top", f"kubectl calls per `top` ({where}; job, pods, exporter look-ups, execs)",
                       "/".join(map(str, calls))))
    rows.append(bl.Row("top", f"kubectl tao top JOB -o json: {where}, nvidia-smi in each", bl.fmt_seconds(value),
                       reference=f"{bl.fmt_seconds(reference)} {TOP_RANKS} bare exec at once",
                       ratio=f"{bl.ratio(value, reference):.2f}x", target=f"<= {TOP_TARGET:g}x",
                       result=bl.verdict(bl.ratio(value, reference), TOP_TARGET)))
    rows.append(bl.Row("top", f"kubectl tao top JOB -o json: {where}, wall time", bl.fmt_seconds(value),
                       target=f"<= {TOP_SECONDS:g} s", result=bl.verdict(value, TOP_SECONDS)))
    split_rows(rows, "top", value, busy, before_exec, tuned=(tuned, f"{TOP_RANKS} bare exec at once"),
               kubectl="the Job, pods and exporter reads, then the execs at once",
               python="start-up, the reads' answers, the table",
               gap="from the first read's start (Job, pods, exporter look-ups) to the first exec's")
    machine_idle_row(rows, "top", sample_before, sample_after)
    b.drop_namespace(ns, wait=False)


# ----------------------------------------------------------------------------------------------- workflow

WORKFLOW_TARGET = 2.0  # `workflow run` of a 5-step workflow vs the bare kubectl creates of the same objects
RELEASE_TARGET_S = 5.0  # median, a step's end to its successor's pod created (in the cluster, no client)
RELEASE_RUNS = 10
WORKFLOW_STEP_LABEL = "kubectl-tao.io/workflow-step"


def five_step_workflow(image: str) -> str:
    """A TAO-shaped chain of 5 steps on the kwok GPU nodes (the first stays running: only creation is timed)."""
    steps = [("train", "train", None), ("evaluate", "evaluate", "train.val_mAP >= 0.5"), ("prune", "prune", None),
             ("retrain", "retrain", None), ("export", "export", None)]
    lines = ["apiVersion: kubectl-tao/v1", "kind: Workflow", "metadata: {name: bench}",
             f"defaults: {{image: {json.dumps(image)}, pvc: tao-data, gpus: 1, network-arch: dino, "
             f"annotation: {json.dumps(STAY_RUNNING)}}}", "steps:"]
    for name, action, when in steps:
        lines.append(f"- name: {name}")
        lines.append(f"  action: {action}")
        if when:
            lines.append(f"  when: {when}")
        lines.append(f"  command: dino {action} -e /workspace/specs/{action}.yaml results_dir=${{{name}.results}}")
    return "\n".join(lines) + "\n"


def bare_workflow_creates(rendered: dict[str, Any], ns: str) -> list[str]:
    """The objects `workflow render` printed, as the run creates them (the release RBAC in one call, then each
    step's objects in one call, the last step first), moved into namespace NS: one JSON List per call."""
    rbac, steps = [], {}
    for obj in rendered["items"]:
        obj = json.loads(json.dumps(obj))
        obj["metadata"].pop("namespace", None)
        for subject in obj.get("subjects") or []:
            subject["namespace"] = ns
        step = (obj["metadata"].get("labels") or {}).get(WORKFLOW_STEP_LABEL)
        if step is None:
            rbac.append(obj)
        else:
            steps.setdefault(step, []).append(obj)
    return [json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
            for items in [rbac, *reversed(list(steps.values()))] if items]


def bench_workflow_run(b: Bench, rows: list[bl.Row]) -> None:
    """`workflow run` of a 5-step workflow (every step's gates and server dry run, the RBAC, 5 Jobs, the RBAC's
    owners) vs the bare `kubectl create -f` calls that create the same objects, one after the other."""
    log("workflow run of 5 steps vs the bare kubectl creates")
    ns, state = b.namespace("workflow")
    path = b.work / "five-steps.yaml"
    path.write_text(five_step_workflow(IMAGE))
    _, proc = timed([str(PLUGIN), "workflow", "render", str(path), "-o", "json"], b.tao_env(ns, state))
    payloads = bare_workflow_creates(json.loads(proc.stdout), ns)
    tao: list[float] = []
    bare: list[float] = []
    busy: list[float] = []
    calls: list[int] = []

    def run_tao() -> None:
        trace = b.trace_file()
        elapsed, out = timed([str(PLUGIN), "workflow", "run", str(path), "-o", "json"], b.tao_env(ns, state, trace))
        lines = read_lines(trace)
        tao.append(elapsed)
        busy.append(bl.kubectl_busy_seconds(lines))
        calls.append(len(lines))
        timed([str(PLUGIN), "workflow", "cancel", json.loads(out.stdout)["name"]], b.tao_env(ns, state))

    def run_bare(index: int) -> None:
        target = f"tao-bench-{b.run_id}-wfbare{index}"
        b.k("create", "namespace", target)
        b.namespaces.append(target)
        started = time.perf_counter()
        for payload in payloads:
            timed([b.kubectl, "create", "-n", target, "-f", "-", "-o", "name"], b.env, input=payload)
        bare.append(time.perf_counter() - started)
        b.drop_namespace(target, wait=False)

    run_tao()  # warm-up (bytecode cache, API server caches); not counted
    run_bare(0)
    tao.clear(), busy.clear(), calls.clear(), bare.clear()
    for index in range(1, b.repeat + 1):
        if index % 2:
            run_tao()
            run_bare(index)
        else:
            run_bare(index)
            run_tao()
    value, reference = bl.median(tao), bl.median(bare)
    r = bl.ratio(value, reference)
    rows.append(bl.Row("workflow", "kubectl tao workflow run: 5 steps (gates, RBAC, 5 Jobs)", bl.fmt_seconds(value),
                       reference=f"{bl.fmt_seconds(reference)} bare ({len(payloads)} creates)", ratio=f"{r:.2f}x",
                       target=f"<= {WORKFLOW_TARGET:g}x", result=bl.verdict(r, WORKFLOW_TARGET)))
    kubectl_busy = bl.median(busy)
    rows.append(bl.Row("workflow", f"  of which kubectl running ({max(calls)} calls, every step's gates at once)",
                       bl.fmt_seconds(kubectl_busy)))
    rows.append(bl.Row("workflow", "  of which Python (start-up, file, plans, records, render, lint)",
                       bl.fmt_seconds(max(value - kubectl_busy, 0.0))))
    b.drop_namespace(ns, wait=False)


def release_workflow(image: str) -> str:
    """Two steps on the real nodes: the first prints the time its command ends, the second is released by it."""
    toleration = json.dumps(f"{REAL_NODE_LABEL}=true:NoSchedule")
    placement = f"node-selector: {REAL_NODE_LABEL}=true, toleration: {toleration}"
    return (
        "apiVersion: kubectl-tao/v1\nkind: Workflow\nmetadata: {name: release}\n"
        f"defaults: {{image: {json.dumps(image)}, pvc: tao-data, gpus: 0, network-arch: bench, {placement}}}\n"
        "steps:\n"
        "- name: first\n  action: run\n"
        "  command: python3 -c 'import time; print(\"step-end %.6f\" % time.time(), flush=True)'\n"
        "- name: second\n  action: run\n  command: 'true'\n"
    )


def bench_workflow_release(b: Bench, rows: list[bl.Row]) -> None:
    """Release latency: from the first step's command ending (the time it prints, this machine's clock: the real
    nodes run here) to the second step's pod created (seen by a watch on it), RELEASE_RUNS runs of a two-step
    workflow on the real nodes, one after the other, with nothing on the client between `workflow run` and the
    release (the release runs in the first step's pod)."""
    images = real_node_images(b)
    if images is None:
        rows.append(bl.Row("workflow", "release latency: skipped (needs two real nodes)", "-"))
        return
    log(f"workflow release latency, {RELEASE_RUNS} runs on the real nodes")
    ns, state = b.namespace("release")
    path = b.work / "release.yaml"
    path.write_text(release_workflow(images["TORCH_IMAGE"]))
    latencies: list[float] = []
    for _ in range(RELEASE_RUNS):
        _, out = timed([str(PLUGIN), "workflow", "run", str(path), "-o", "json"], b.tao_env(ns, state))
        created = json.loads(out.stdout)
        first, second = (step["job"].split("/", 1)[1] for step in created["steps"])
        watch = subprocess.Popen([b.kubectl, "get", "pods", "-n", ns, "-l", f"job-name={second}", "--watch", "-o",
                                  "name"], env=b.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert watch.stdout is not None
            line = watch.stdout.readline()  # blocks until the pod exists
            seen = time.time()
        finally:
            watch.kill()
            watch.wait()
        if not line.strip():
            raise BenchError(f"the watch on step second's pods of {created['name']} ended without a pod")
        said = b.k("logs", "-n", ns, f"job/{first}", "-c", "tao")
        ends = [float(text.split()[1]) for text in said.splitlines() if text.startswith("step-end ")]
        if not ends:
            raise BenchError(f"step first of {created['name']} printed no end time: {said.strip()[-300:]}")
        latencies.append(seen - ends[-1])
    value = bl.median(latencies)
    rows.append(bl.Row("workflow", f"release latency: a step's end to its successor's pod ({RELEASE_RUNS} runs, "
                       "real nodes)", f"median {value:.2f} s", reference=f"max {max(latencies):.2f} s",
                       target=f"<= {RELEASE_TARGET_S:g} s median",
                       result=bl.verdict(value, RELEASE_TARGET_S)))
    b.drop_namespace(ns, wait=False)


# ----------------------------------------------------------------------------------------------- data


def data_tree(root: Path, files: int, total_bytes: int) -> None:
    """FILES files of random bytes (TOTAL_BYTES in all) in 10 folders: what `data push` and `kubectl cp` copy."""
    each = max(total_bytes // files, 1)
    for i in range(files):
        folder = root / f"part-{i % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"file-{i:05d}.bin").write_bytes(os.urandom(each))


def bench_data(b: Bench, rows: list[bl.Row], files: int, mib: int) -> None:
    """`data push` of a tree (helper pod start included) vs `kubectl cp` of the same tree into a running busybox pod
    that mounts the same claim; a second push of the same tree (every file skipped); the plugin's peak memory."""
    log(f"data push of {files} files, {mib} MiB vs kubectl cp")
    images = real_node_images(b)
    if images is None:
        rows.append(bl.Row("data", "data push: skipped (needs two real nodes)", "-"))
        return
    ns, state = b.namespace("data")
    host_dir = Path(f"/tmp/{ns}-pv")  # the bench claim's hostPath, on this machine's real nodes
    host_dir.mkdir(parents=True, exist_ok=True)
    host_dir.chmod(0o777)  # hostPath ignores fsGroup: writable by the helper's non-root user
    tree = b.work / "data" / "tree"
    data_tree(tree, files, mib << 20)
    image = images["BUSYBOX_IMAGE"]
    placement = ["--node-selector", f"{REAL_NODE_LABEL}=true", "--toleration", f"{REAL_NODE_LABEL}=true:NoSchedule"]
    env = b.tao_env(ns, state, KUBECTL_TAO_HELPER_IMAGE=image)
    pod = f"bench-cp-{b.run_id}"
    b.k("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": ns},
        "spec": {"containers": [{"name": "cp", "image": image, "command": ["sleep", "3600"],
                                 "volumeMounts": [{"name": "v", "mountPath": "/workspace"}]}],
                 "nodeSelector": {REAL_NODE_LABEL: "true"},
                 "tolerations": [{"key": REAL_NODE_LABEL, "operator": "Equal", "value": "true",
                                  "effect": "NoSchedule"}],
                 "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "tao-data"}}]},
    }))
    b.k("wait", "--for=condition=Ready", f"pod/{pod}", "-n", ns, "--timeout=180s", timeout=200)

    def push(target: str) -> float:
        return timed([str(PLUGIN), "data", "push", str(tree), "--pvc", "tao-data", "--to", target, *placement],
                     env, timeout=1800)[0]

    def copy(target: str) -> float:
        b.k("exec", pod, "-n", ns, "--", "mkdir", "-p", f"/workspace/{target}")
        return timed([b.kubectl, "cp", str(tree), f"{ns}/{pod}:/workspace/{target}/tree"], b.env, timeout=1800)[0]

    pushed: list[float] = []
    copied: list[float] = []
    for index in range(b.repeat):
        for step in (0, 1) if index % 2 == 0 else (1, 0):
            if step == 0:
                pushed.append(push(f"push-{index}"))
            else:
                copied.append(copy(f"cp-{index}"))
    again = [push("push-0") for _ in range(b.repeat)]
    rss_out = b.work / "data-rss.txt"
    timed([str(VENV_PYTHON), "-c", RSS_WRAPPER, str(PLUGIN), "data", "push", str(tree), "--pvc", "tao-data", "--to",
           "push-rss", *placement], {**env, "BENCH_RSS_OUT": str(rss_out)}, timeout=1800)
    rss = int(rss_out.read_text().strip() or 0)
    value, reference = bl.median(pushed), bl.median(copied)
    what = f"{files} files, {mib} MiB"
    rows.append(bl.Row("data", f"kubectl tao data push ({what}; helper pod start, listing, verify included)",
                       bl.fmt_seconds(value), reference=f"{bl.fmt_seconds(reference)} kubectl cp into a running pod",
                       ratio=f"{bl.ratio(value, reference):.2f}x", target=f"<= {DATA_TARGET:g}x",
                       result=bl.verdict(bl.ratio(value, reference), DATA_TARGET)))
    rows.append(bl.Row("data", f"a second data push of the same tree ({what}, every file skipped)",
                       bl.fmt_seconds(bl.median(again)), target=f"<= {DATA_RESKIP_SECONDS:g} s",
                       result=bl.verdict(bl.median(again), DATA_RESKIP_SECONDS)))
    rows.append(bl.Row("data", f"peak memory of the plugin during data push ({what}; VmHWM)", bl.fmt_kib(rss),
                       target=f"<= {bl.fmt_kib(DATA_RSS_KIB)}", result=bl.verdict(rss, DATA_RSS_KIB)))
    bench_results(b, rows, ns, state, env, pod, tree, placement, what)
    b.drop_namespace(ns, wait=False)
    shutil.rmtree(host_dir, ignore_errors=True)
    shutil.rmtree(tree, ignore_errors=True)


def bench_results(b: Bench, rows: list[bl.Row], ns: str, state: Path, env: dict[str, str], pod: str, tree: Path,
                  placement: list[str], what: str) -> None:
    """`results JOB` vs one `kubectl exec POD -- ls -lR DIR`, and `results pull` vs `kubectl cp POD:DIR LOCAL`, of
    a job whose results directory holds the data phase's tree (pushed there: the job itself writes nothing)."""
    image = env["KUBECTL_TAO_HELPER_IMAGE"]
    _, proc = timed([str(PLUGIN), "submit", "--image", image, "--network-arch", "bench", "--action", "train",
                     "--gpus", "0", "--pvc", "tao-data", "--command", "echo done", "--wait", "--timeout", "180",
                     *placement], env)
    record_id = proc.stdout.strip().splitlines()[-1]
    results_dir = json.loads((state / "jobs" / f"{record_id}.json").read_text())["results_dir"]
    b.k("exec", pod, "-n", ns, "--", "sh", "-c", 'mkdir -p "$1" && chmod 0777 "$1" "${1%/*}"', "sh", results_dir)
    timed([str(PLUGIN), "data", "push", str(tree), "--pvc", "tao-data", "--to", results_dir, *placement], env,
          timeout=1800)
    listing: list[float] = []
    listing_exec: list[float] = []  # the listing's own `kubectl exec`, from the trace: the pod start set aside
    ls: list[float] = []
    pulled: list[float] = []
    copied: list[float] = []
    out = b.work / "data" / "pulled"
    for index in range(b.repeat):
        order = (0, 1) if index % 2 == 0 else (1, 0)
        for step in order:
            if step == 0:
                trace = b.trace_file()
                listing.append(timed([str(PLUGIN), "results", record_id, "-o", "json"],
                                     {**env, "KUBECTL_TAO_TRACE": str(trace)})[0])
                calls = [json.loads(line) for line in read_lines(trace)]
                listing_exec.append(sum(c["ms"] for c in calls if c["argv"][:1] == ["exec"]) / 1000)
            else:
                ls.append(timed([b.kubectl, "exec", pod, "-n", ns, "--", "ls", "-lR", results_dir], b.env)[0])
        for step in order:
            if step == 0:
                pulled.append(timed([str(PLUGIN), "results", "pull", record_id, "--dest", str(out / f"tao-{index}")],
                                    env, timeout=1800)[0])
            else:
                copied.append(timed([b.kubectl, "cp", f"{ns}/{pod}:{results_dir}", str(out / f"cp-{index}")], b.env,
                                    timeout=1800)[0])
        shutil.rmtree(out, ignore_errors=True)
    value, reference = bl.median(listing), bl.median(ls)
    rows.append(bl.Row("data", f"kubectl tao results JOB -o json ({what}; helper pod start included)",
                       bl.fmt_seconds(value), reference=f"{bl.fmt_seconds(reference)} kubectl exec ls -lR",
                       ratio=f"{bl.ratio(value, reference):.2f}x", target="<= 2x (pod start aside)",
                       result=bl.INFO))
    value = bl.median(listing_exec)
    rows.append(bl.Row("data", f"kubectl tao results JOB: its listing exec alone ({what}; from the trace, the pod "
                               "start set aside)",
                       bl.fmt_seconds(value), reference=f"{bl.fmt_seconds(reference)} kubectl exec ls -lR",
                       ratio=f"{bl.ratio(value, reference):.2f}x", target="<= 2x",
                       result=bl.verdict(bl.ratio(value, reference), 2.0)))
    value, reference = bl.median(pulled), bl.median(copied)
    rows.append(bl.Row("data", f"kubectl tao results pull JOB ({what}; helper pod start, hashing included)",
                       bl.fmt_seconds(value), reference=f"{bl.fmt_seconds(reference)} kubectl cp out of a running pod",
                       ratio=f"{bl.ratio(value, reference):.2f}x", target=f"<= {DATA_TARGET:g}x",
                       result=bl.verdict(bl.ratio(value, reference), DATA_TARGET)))


# ----------------------------------------------------------------------------------------------- per verb


@dataclass
class VerbRun:
    verb: str
    calls: int
    wall: float
    busy: float  # kubectl running (concurrent calls counted once)
    python_kib: int
    kubectl_kib: int | None  # the largest kubectl child; None without /usr/bin/time


KUBECTL_RSS = """#!/bin/sh
exec /usr/bin/time -a -o "$BENCH_KUBECTL_RSS" -f %M "$BENCH_REAL_KUBECTL" "$@"
"""


def run_verb(b: Bench, verb: str, args: list[str], ns: str, state: Path, *, memory: bool,
             ok: Sequence[int] = (0,)) -> VerbRun:
    """One run of a verb: plain (kubectl calls from the trace, wall time) or with memory probes (peak RSS of
    the Python process, and of each kubectl child through /usr/bin/time, whose own fork is tiny)."""
    trace = b.trace_file()
    if not memory:
        elapsed, _ = timed([str(PLUGIN), *args], b.tao_env(ns, state, trace), ok=ok)
        lines = read_lines(trace)
        return VerbRun(verb, len(lines), elapsed, bl.kubectl_busy_seconds(lines), 0, None)
    out = b.work / f"rss-{b.traces}.txt"
    kids = b.work / f"kubectl-rss-{b.traces}.txt"
    extra = {"BENCH_RSS_OUT": str(out)}
    probe = Path("/usr/bin/time").exists()
    if probe:
        wrapper = b.work / "kubectl-rss"
        if not wrapper.exists():
            wrapper.write_text(KUBECTL_RSS)
            wrapper.chmod(0o755)
        extra |= {"KUBECTL_TAO_KUBECTL": str(wrapper), "BENCH_KUBECTL_RSS": str(kids), "BENCH_REAL_KUBECTL": b.kubectl}
    elapsed, _ = timed([str(VENV_PYTHON), "-c", RSS_WRAPPER, str(PLUGIN), *args], b.tao_env(ns, state, trace, **extra),
                       ok=ok)
    sizes = [int(line) for line in read_lines(kids) if line.strip().isdigit()]
    return VerbRun(verb, len(read_lines(trace)), elapsed, 0.0, int(out.read_text().strip() or 0),
                   max(sizes) if sizes else None)


def bench_verbs(b: Bench, ns: str, state: Path, status_id: str) -> list[VerbRun]:
    """kubectl calls, wall time and peak memory of each verb (one plain run, one run with memory probes)."""
    log("kubectl calls and peak memory per verb")
    merged: list[VerbRun] = []

    def both(verb: str, make_args: Callable[[], list[str]], ok: Sequence[int] = (0,)) -> None:
        plain = run_verb(b, verb, make_args(), ns, state, memory=False, ok=ok)
        probed = run_verb(b, verb, make_args(), ns, state, memory=True, ok=ok)
        merged.append(VerbRun(verb, plain.calls, plain.wall, plain.busy, probed.python_kib, probed.kubectl_kib))

    submitted: list[str] = []

    def newest() -> list[str]:
        records = sorted((state / "jobs").glob("bench-run-*.json"), key=lambda p: p.stat().st_mtime)
        return [p.stem for p in records]

    before = set(newest())
    both("preflight", lambda: ["preflight", "--gpus", "8", "--pvc", "tao-data", "--credentials"])
    both("fit", lambda: ["fit", "--gpus", "8", "--nodes", "1"], ok=(0, 1))
    both("submit", lambda: ["submit", *job_args(0, STAY_RUNNING)])
    submitted = [r for r in newest() if r not in before]
    both("status", lambda: ["status", status_id])
    both("logs", lambda: ["logs", status_id, "--tail", "20"])
    both("explain", lambda: ["explain", status_id], ok=(0, 1))
    both("list", lambda: ["list"])
    both("cancel", lambda: ["cancel", submitted.pop()])
    return merged


# ----------------------------------------------------------------------------------------------- list


def pod_room(b: Bench) -> int:
    """Pods the schedulable Ready nodes can still take (allocatable pods minus the non-terminal pods on them)."""
    nodes = json.loads(b.k("get", "nodes", "-o", "json"))["items"]
    room: dict[str, int] = {}
    for node in nodes:
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in node.get("status", {}).get("conditions", []))
        if ready and not node.get("spec", {}).get("unschedulable"):
            room[node["metadata"]["name"]] = int(node["status"].get("allocatable", {}).get("pods", "0"))
    pods = json.loads(b.k("get", "pods", "-A", "-o", "json",
                          "--field-selector=status.phase!=Succeeded,status.phase!=Failed"))["items"]
    for pod in pods:
        node = pod.get("spec", {}).get("nodeName")
        if node in room:
            room[node] -= 1
    return sum(max(v, 0) for v in room.values())


def add_cpu_nodes(b: Bench, count: int) -> None:
    """Temporary kwok CPU nodes for the bench (removed at the end), from the cluster's own node template."""
    template = (ROOT / "cluster" / "kwok" / "cpu-node.yaml.tmpl").read_text()
    docs = []
    for i in range(count):
        name = f"tao-bench-{b.run_id}-cpu-{i}"
        b.nodes.append(name)
        docs.append(template.replace("@@NAME@@", name))
    b.k("apply", "-f", "-", input="\n---\n".join(docs))
    wait_until(lambda: all(
        b.k("get", "node", n, "-o", 'jsonpath={.status.conditions[?(@.type=="Ready")].status}', check=False)
        == "True" for n in b.nodes), 90, "the bench's extra kwok nodes Ready")


def submit_many(b: Bench, ns: str, state: Path, count: int, parallel: int) -> float:
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        for future in [pool.submit(submit_job, b, ns, state) for _ in range(count)]:
            future.result()
    return time.monotonic() - started


LIST_SELECTOR = "app.kubernetes.io/managed-by=kubectl-tao"
LIST_SELECTOR_Q = "app.kubernetes.io%2Fmanaged-by%3Dkubectl-tao"


def bare_reads(b: Bench, one: list[list[str]], other: list[list[str]], env: dict[str, str] | None = None,
               repeat: int | None = None) -> tuple[float, float]:
    """Median wall time of two ways to read the same objects with bare kubectl, each way's calls run at once
    (as run_many does): e.g. `get -o json` (kubectl decodes and re-encodes every object) vs `get --raw`."""
    a: list[float] = []
    z: list[float] = []
    for _ in range(repeat or b.repeat):
        a.append(bare_once(b, one, env))
        z.append(bare_once(b, other, env))
    return bl.median(a), bl.median(z)


def bare_once(b: Bench, calls: list[list[str]], env: dict[str, str] | None = None) -> float:
    """Wall time of bare kubectl CALLS run at once."""
    started = time.perf_counter()
    procs = [subprocess.Popen([b.kubectl, *c], env=env or b.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for c in calls]
    for proc in procs:
        proc.wait(timeout=300)
    return time.perf_counter() - started


def bench_list(b: Bench, rows: list[bl.Row], sizes: Sequence[int], parallel: int, info: dict[str, Any]) -> None:
    ns, state = b.namespace("list")
    need = max(sizes)
    room = pod_room(b)
    log(f"list with {', '.join(map(str, sizes))} records: {room} pod slots free for {need} stay-running pods")
    if room < need + 5:
        extra = -(-(need + 5 - room) // 110)
        log(f"adding {extra} temporary kwok CPU node(s) for pod capacity")
        add_cpu_nodes(b, extra)
    have = 0
    medians: dict[int, float] = {}
    counts: dict[int, list[int]] = {}
    submit_time = 0.0
    for size in sorted(sizes):
        if size > have:
            log(f"list: submitting {size - have} job(s), {parallel} at a time")
            submit_time += submit_many(b, ns, state, size - have, parallel)
            have = size
        wait_until(lambda: b.k("get", "pods", "-n", ns, "--no-headers", "--field-selector=status.phase!=Running",
                               "-o", "name") == "", 300, f"{have} pods Running", interval=2)
        argv = [str(PLUGIN), "list", "--all"]
        # Warm-up: the first run writes RUNNING into records seen running the first time; the second indexes
        # what the first wrote (a running record is served from the index while its files are unchanged).
        for _ in range(2):
            timed(argv, b.tao_env(ns, state))
        samples = []
        counts[size] = []
        for _ in range(b.repeat):
            trace = b.trace_file()
            samples.append(timed(argv, b.tao_env(ns, state, trace))[0])
            counts[size].append(len(read_lines(trace)))
        medians[size] = bl.median(samples)
        as_json, as_raw = bare_reads(b, [["get", "jobs,pods", "--all-namespaces", "-l", LIST_SELECTOR, "-o", "json"]],
                                     [["get", "--raw", f"/apis/batch/v1/jobs?labelSelector={LIST_SELECTOR_Q}"],
                                      ["get", "--raw", f"/api/v1/pods?labelSelector={LIST_SELECTOR_Q}"]])
        rows.append(bl.Row("list", f"kubectl tao list, {size} record(s) ({counts[size][0]} kubectl call)",
                           bl.fmt_seconds(medians[size]),
                           reference=f"its kubectl -o json alone {bl.fmt_seconds(as_json)}; "
                                     f"--raw jobs + pods {bl.fmt_seconds(as_raw)}"))
    small, large = min(sizes), max(sizes)
    r = bl.ratio(medians[large], medians[small])
    rows.append(bl.Row("list", f"list {large} records vs {small}", bl.fmt_seconds(medians[large]),
                       reference=bl.fmt_seconds(medians[small]), ratio=f"{r:.2f}x", target="<= 1.5x",
                       result=bl.verdict(r, 1.5)))
    distinct = {c for values in counts.values() for c in values}
    rows.append(bl.Row("list", "kubectl calls per list, any record count", "/".join(
        str(counts[s][0]) for s in sorted(sizes)), target="constant",
        result=bl.MET if len(distinct) == 1 else bl.MISSED))
    info["list_submit_s"] = submit_time
    info["list_jobs"] = have
    log(f"list: {have} jobs submitted in {submit_time:.0f}s ({parallel} at a time)")


# ----------------------------------------------------------------------------------------------- instructions

STUB_KUBECONFIG = """\
apiVersion: v1
kind: Config
current-context: bench
clusters:
- name: bench
  cluster:
    server: https://127.0.0.1:6443
contexts:
- name: bench
  context:
    cluster: bench
    user: bench
    namespace: tao-jobs
users:
- name: bench
  user:
    token: placeholder
"""


def callgrind_instructions(argv: Sequence[str], env: dict[str, str]) -> int:
    """Instructions the Python process of ARGV executes (valgrind's callgrind; its children are not followed)."""
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:  # the count of an error path would say nothing about the verb
        shown = " ".join(argv[1:4])
        raise BenchError(f"{shown} exited {proc.returncode} under callgrind: {proc.stderr.strip()[-300:]}")
    count = bl.collected_instructions(proc.stderr)
    if count is not None:
        return count
    raise BenchError(f"callgrind counted nothing for {' '.join(argv[:3])}: {proc.stderr.strip()[-300:]}")


def bench_instructions(b: Bench, rows: list[bl.Row]) -> None:
    """Python instructions of the start-up paths (load-independent, unlike wall time): `status JOB` with a stub
    kubectl that prints recorded JSON (so kubectl's own cost is in no number), a client-side `submit` dry run
    (parsing, plan, render, lint: what a submit runs before its gates), `version`, `--help`, and the bare
    interpreter. 100 M instructions are about 23 ms on an idle core here."""
    log("Python instructions (callgrind)")
    if shutil.which("valgrind") is None:
        rows.append(bl.Row("instructions", "Python instructions of status, version, --help", "skipped",
                           reference="valgrind is not installed"))
        return
    from kubectl_tao.store.records import RecordStore

    work = b.work / "instructions"
    work.mkdir()
    fixtures = ROOT / "tests" / "fixtures" / "k8s"
    job = json.loads((fixtures / "running.job.json").read_text())
    pods = json.loads((fixtures / "running.pods.json").read_text())["items"]
    answer = work / "answer.json"
    answer.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [job, *pods]}))
    stub = work / "kubectl"
    stub.write_text(f"#!/bin/sh\nexec cat '{answer}'\n")
    stub.chmod(0o755)
    (work / "kubeconfig").write_text(STUB_KUBECONFIG)
    state = work / "state"
    store = RecordStore(str(state))
    name = job["metadata"]["name"]
    record = store.open(platform="kubernetes", image="busybox", network_arch="dino", action="train",
                        storage_tier="A", results_dir="/workspace/results/x")
    store.mark(record.id, "RUNNING", message="applied", backend_ref=f"tao-jobs/{name}")
    store.update_extra(record.id, namespace="tao-jobs", job_name=name, gpus=8, nodes=1)
    env = {**b.env, "KUBECONFIG": str(work / "kubeconfig"), "TAO_STATE_DIR": str(state),
           "KUBECTL_TAO_KUBECTL": str(stub), "HOME": str(work)}
    cases = [
        ("status JOB (stub kubectl)", [str(VENV_PYTHON), str(PLUGIN), "status", record.id]),
        ("submit --gpus 8 --dry-run=client -o json (no kubectl)", [str(VENV_PYTHON), str(PLUGIN), "submit",
                                                                   *job_args(8, RUN_SECONDS), "--dry-run=client",
                                                                   "-o", "json"]),
        ("version", [str(VENV_PYTHON), str(PLUGIN), "version"]),
        ("--help", [str(VENV_PYTHON), str(PLUGIN), "--help"]),
        ("python -c pass", [str(VENV_PYTHON), "-c", "pass"]),
    ]
    for label, argv in cases:
        timed(argv, env)  # warm-up: bytecode written once
        count = callgrind_instructions(argv, env)
        rows.append(bl.Row("instructions", f"Python instructions of `{label}`", f"{count / 1e6:.0f} M"))


# ----------------------------------------------------------------------------------------------- report


def finished_history(state: Path, count: int) -> None:
    """A store of `count` finished records: one written by RecordStore, the rest copies under other ids and
    submission times (writing each through the store would take minutes and measure nothing of list)."""
    from kubectl_tao.store.records import RecordStore

    store = RecordStore(str(state))
    record = store.open(platform="kubernetes", image="nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt",
                        network_arch="dino", action="train", storage_tier="A", results_dir="/results/dino")
    store.mark(record.id, "RUNNING", message="applied", backend_ref=f"tao-bench/{record.id}")
    store.mark(record.id, "COMPLETE", message="Completed")
    store.update_extra(record.id, namespace="tao-bench", job_name=record.id, gpus=8, nodes=1,
                       history={"captured_at": "2026-01-01T00:00:00Z",
                                "ranks": [{"rank": 0, "pod": "p-0", "log_tail": "step done\n" * 200}]})
    body = json.loads(store.path(record.id).read_text())
    extra = json.loads(store.extra_path(record.id).read_text())
    for i in range(count - 1):
        rid = f"dino-train-{i:06x}"
        stamp = f"2025-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00.000Z"
        store.path(rid).write_text(json.dumps({**body, "id": rid, "submitted_at": stamp}, indent=2))
        store.extra_path(rid).write_text(json.dumps({**extra, "id": rid, "job_name": rid}, indent=2))


def bench_list_history(b: Bench, rows: list[bl.Row], count: int = 10_000) -> None:
    """`kubectl tao list` over a store of `count` finished records (no kubectl call is needed for them)."""
    log(f"list over {count} finished records")
    state = b.work / "state-history"
    finished_history(state, count)
    env = b.tao_env("default", state)
    argv = [str(PLUGIN), "list"]
    cold, _ = timed(argv, env)  # builds the list index
    samples = [timed(argv, env)[0] for _ in range(b.repeat)]
    value = bl.median(samples)
    rows.append(bl.Row("list", f"kubectl tao list, {count} finished records (newest 100 shown)", bl.fmt_seconds(value),
                       reference=f"first run, building the index: {bl.fmt_seconds(cold)}", target="<= 1 s",
                       result=bl.verdict(value, 1.0)))


def shown_path(path: str) -> str:
    """PATH relative to the checkout when it lies in it (the results file is committed: no machine's layout)."""
    try:
        return str(Path(path).relative_to(ROOT))
    except ValueError:
        return path


def machine(b: Bench, *, cluster: bool = True) -> list[tuple[str, str]]:
    mem = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    version = json.loads(b.k("version", "-o", "json")) if cluster else {}
    load = os.getloadavg()
    facts = [
        ("cores", str(os.cpu_count())),
        ("memory", mem),
        ("load average at start (1/5/15 min)", " / ".join(f"{x:.2f}" for x in load)),
        ("OS", f"{platform.system()} {platform.release()} {platform.machine()}"),
        ("Python", f"{platform.python_version()} ({shown_path(sys.executable)})"),
    ]
    if cluster:
        facts += [
            ("kubectl", version.get("clientVersion", {}).get("gitVersion", "?")),
            ("server", f"{version.get('serverVersion', {}).get('gitVersion', '?')} "
                       f"(scripts/local-cluster: kube-apiserver + kwok nodes on 127.0.0.1)"),
        ]
    return [*facts, ("repeat", f"{b.repeat} runs per measurement (medians)")]


def verb_cells(runs: Sequence[VerbRun]) -> list[list[str]]:
    return [[r.verb, str(r.calls), bl.fmt_seconds(r.wall), bl.fmt_seconds(r.busy), bl.fmt_kib(r.python_kib),
             bl.fmt_kib(r.kubectl_kib) if r.kubectl_kib is not None else "n/a"] for r in runs]


VERB_HEADERS = ["verb", "kubectl calls", "wall (1 run)", "of which kubectl", "peak RSS Python",
                "peak RSS largest kubectl"]


def write_markdown(path: Path, section: str) -> None:
    if path.exists():
        text = path.read_text()
    else:
        text = ("# Benchmarks\n\nReproduce: `make cluster && make bench` "
                "(`.venv/bin/python bench/run.py --markdown BENCHMARKS.md` rewrites the figures below).\n\n"
                "## Current figures\n\n")
    path.write_text(bl.replace_section(text, section, MARK_BEGIN, MARK_END))


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def load_text() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def commit_measured() -> str:
    """The commit whose code a run measured, marked when the code differs from it (a checkout with changes)."""
    def git(*args: str) -> str:
        proc = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30,
                              check=False)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    head = git("rev-parse", "--short=12", "HEAD")
    if not head:
        return "unknown (not a git checkout)"
    changed = git("status", "--porcelain", "--", "kubectl-tao", "lib", "bench", "scripts", "templates", "schemas")
    return f"{head} with uncommitted changes" if changed else head


class Recorder:
    """What each phase of this run measured, for the results file: its rows (those it added to ROWS), its own
    tables and notes, when it ran, the load around it and how long it took. Only a phase that ends without an
    error is recorded, so a results file never holds half a phase."""

    def __init__(self, rows: list[bl.Row], command: str, facts: Sequence[tuple[str, str]]) -> None:
        self.rows, self.command, self.facts = rows, command, list(facts)
        self.commit = ""
        self.done: dict[str, dict[str, Any]] = {}
        self.durations: dict[str, float] = {}

    @contextmanager
    def phase(self, key: str) -> Iterator[None]:
        first, started, when, load = len(self.rows), time.monotonic(), utc_now(), load_text()
        completed = False
        try:
            yield
            completed = True
        finally:
            seconds = time.monotonic() - started
            self.durations[key] = seconds
            if completed:
                self.commit = self.commit or commit_measured()
                facts = [*self.facts, ("load average at phase start", load), ("load average at phase end", load_text())]
                self.done[key] = {"command": self.command, "started": when, "commit": self.commit,
                                  "seconds": round(seconds, 1), "facts": [list(f) for f in facts],
                                  "rows": [row.cells() for row in self.rows[first:]], "tables": [], "notes": []}

    def note(self, key: str, text: str) -> None:
        if key in self.done:
            self.done[key]["notes"].append(text)

    def table(self, key: str, caption: str, headers: Sequence[str], cells: Sequence[Sequence[str]]) -> None:
        if key in self.done:
            self.done[key]["tables"].append({"caption": caption, "headers": list(headers),
                                             "rows": [list(c) for c in cells]})


def read_results_file(path: Path) -> dict[str, Any]:
    """The results file next to the Markdown file (empty when there is none yet); exit 2 naming it when it
    cannot be read as one."""
    if not path.exists():
        return bl.empty_results()
    try:
        return bl.read_results(path.read_text(), str(path))
    except (OSError, ValueError) as exc:
        print(f"bench: {exc}; restore it from git or delete it (the next run with --markdown starts it anew)",
              file=sys.stderr)
        raise SystemExit(2) from None


def write_results(markdown_path: Path, phases: dict[str, dict[str, Any]]) -> Path:
    """Merge PHASES into the results file next to MARKDOWN_PATH and rewrite the Markdown file's generated part
    from the whole results file. Returns the results file."""
    path = bl.results_path(markdown_path)
    results = bl.merge_results(read_results_file(path), phases)
    path.write_text(bl.dump_results(results))
    write_markdown(markdown_path, bl.current_figures(results, PHASES, path.name))
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement (default 5)")
    parser.add_argument("--no-peers", action="store_true", help="skip SkyPilot / TorchX start-up")
    parser.add_argument("--markdown", type=Path,
                        help="record the phases that ran in the results file next to this Markdown file (FILE.json) "
                             "and rewrite the file's generated figures from it (BENCHMARKS.md)")
    parser.add_argument("--regenerate", action="store_true",
                        help="with --markdown: rewrite the file's figures from its results file, measuring nothing")
    parser.add_argument("--list-sizes", default="1,50,200", help="record counts for list (default 1,50,200)")
    parser.add_argument("--parallel", type=int, default=4, help="concurrent submits when filling list (default 4)")
    parser.add_argument("--no-big-cluster", action="store_true",
                        help="skip `kubectl tao fit` against a separate API server holding the synthetic cluster")
    parser.add_argument("--capacity-sizes", default="1000x5000,5000x50000",
                        help="NODESxPODS of the synthetic clusters (default 1000x5000,5000x50000)")
    parser.add_argument("--before", metavar="CHECKOUT",
                        help="another checkout (with its own .venv) timed beside this one at start-up, submit, "
                             "status and explain; the bench reports the difference")
    parser.add_argument("--data-files", type=int, default=1000, help="files in the data phase's tree (default 1000)")
    parser.add_argument("--data-mib", type=int, default=1024, help="MiB in the data phase's tree (default 1024)")
    parser.add_argument("--only", default=",".join(PHASES),
                        help=f"phases to run, comma-separated (default all: {','.join(PHASES)})")
    args = parser.parse_args(argv)
    sizes = sorted({int(s) for s in args.list_sizes.split(",") if s.strip()})
    if args.repeat < 1 or not sizes or min(sizes) < 1 or not 1 <= args.parallel <= 16:
        parser.error("--repeat >= 1, --list-sizes positive integers, 1 <= --parallel <= 16")
    try:
        capacity_sizes = [tuple(int(n) for n in size.split("x", 1)) for size in args.capacity_sizes.split(",")]
    except ValueError:
        parser.error("--capacity-sizes: NODESxPODS[,NODESxPODS...], e.g. 1000x5000")
    if any(len(size) != 2 or min(size) < 1 for size in capacity_sizes):
        parser.error("--capacity-sizes: NODESxPODS[,NODESxPODS...] with positive counts, e.g. 1000x5000")
    global BEFORE
    if args.before:
        BEFORE = Path(args.before).resolve()
        if not (BEFORE / "kubectl-tao").is_file():
            parser.error(f"--before {args.before}: no kubectl-tao entrypoint there (give a checkout of the project)")
    only = {p.strip() for p in args.only.split(",") if p.strip()}
    if not only or only - set(PHASES):
        parser.error(f"--only: comma-separated phases out of {','.join(PHASES)}")

    if args.regenerate:
        if not args.markdown:
            parser.error("--regenerate rewrites the --markdown file from its results file: give --markdown FILE")
        path = bl.results_path(args.markdown)
        if not path.exists():
            parser.error(f"--regenerate: no results file {path} (a run with --markdown {args.markdown} writes it)")
        write_markdown(args.markdown, bl.current_figures(read_results_file(path), PHASES, path.name))
        print(f"wrote {args.markdown} from {path}")
        return 0
    if args.markdown:
        read_results_file(bl.results_path(args.markdown))  # a results file it cannot update stops it before it runs
    command = shlex.join(["bench/run.py", *(sys.argv[1:] if argv is None else argv)])

    started = time.monotonic()
    b = Bench(repeat=args.repeat, work=Path(tempfile.mkdtemp(prefix="kubectl-tao-bench-")))
    cluster = bool(only - LOCAL_PHASES - OWN_CLUSTER_PHASES)
    try:
        if cluster or only & OWN_CLUSTER_PHASES:
            b.setup(cluster=cluster)
    except BaseException:
        shutil.rmtree(b.work, ignore_errors=True)
        raise
    facts: list[tuple[str, str]] = []
    rows: list[bl.Row] = []
    verbs: list[VerbRun] = []
    info: dict[str, Any] = {}
    rec = Recorder(rows, command, [])
    failed = ""

    def run_phase(name: str, *steps: Callable[[], object]) -> None:
        """The phase NAME, when asked for: its steps in order, timed and noted as one phase."""
        if name in only:
            with rec.phase(name):
                for step in steps:
                    step()

    try:
        facts = machine(b, cluster=cluster)
        rec.facts = [f for f in facts if not f[0].startswith("load average")]
        run_phase("redaction", lambda: bench_redaction(b, rows))
        run_phase("progress", lambda: bench_progress(b, rows))
        run_phase("startup", lambda: bench_startup(b, rows, info))
        run_phase("instructions", lambda: bench_instructions(b, rows))
        if not args.no_peers:
            run_phase("peers", lambda: bench_peers(b, rows))
        for nodes, pods in capacity_sizes if "capacity" in only else []:
            with rec.phase(f"capacity {nodes}x{pods}"):
                bench_capacity(b, rows, nodes, pods)
            if not args.no_big_cluster:
                with rec.phase(f"capacity {nodes}x{pods} real API server"):
                    bench_big_cluster(b, rows, nodes, pods)
        if only & {"submit", "status", "verbs"}:
            ns, state = b.namespace("main")
            if "submit" in only:
                with rec.phase("submit"):
                    bench_submit(b, rows, ns, state, 8, info)
                    bench_submit(b, rows, ns, state, 0, info)
            if only & {"status", "verbs"}:
                with rec.phase("status"):
                    status_id = bench_status(b, rows, ns, state)
                if "verbs" in only:
                    with rec.phase("verbs"):
                        verbs = bench_verbs(b, ns, state, status_id)
            b.drop_namespace(ns, wait=True)  # list counts every kubectl-tao object in the cluster: start clean
        run_phase("explain", lambda: bench_explain(b, rows))
        run_phase("progress-status", lambda: bench_progress_status(b, rows))
        run_phase("top", lambda: bench_top(b, rows))
        run_phase("data", lambda: bench_data(b, rows, args.data_files, args.data_mib))
        run_phase("workflow", lambda: bench_workflow_run(b, rows), lambda: bench_workflow_release(b, rows))
        run_phase("list", lambda: bench_list_history(b, rows), lambda: bench_list(b, rows, sizes, args.parallel, info))
    except (BenchError, subprocess.TimeoutExpired) as exc:
        failed = str(exc)
        log(f"FAILED: {failed}")
    finally:
        log("cleaning up (namespaces, volumes, state)")
        b.cleanup()

    facts.append(("load average at end", load_text()))
    total = time.monotonic() - started
    notes = [f"bench wall time {total:.0f} s (" + ", ".join(f"{k} {v:.0f} s" for k, v in rec.durations.items()) + ")"]
    if "list_submit_s" in info:
        filled = (f"filling list: {info['list_jobs']} jobs submitted in {info['list_submit_s']:.0f} s "
                  f"({args.parallel} at a time)")
        notes.append(filled)
        rec.note("list", filled)
    cache = ("plugin runs use a bytecode cache, as an installed package has (./kubectl-tao starts Python with -I, "
             "which ignores PYTHONPYCACHEPREFIX: its cache is lib/'s __pycache__; the console script's is under "
             "~/.cache/kubectl-tao/bench-pycache); a warm-up run precedes every measurement")
    notes.append(cache)
    for key in ("startup", "submit", "status", "verbs", "list", "explain"):
        rec.note(key, cache)
    rec.note("progress-status", "the running job: busybox on a real node writing 40 of 80 epochs of TAO 6's "
             "status.json lines (no torch); the bare calls are the two status stands for, one after the other (the "
             "exec needs the pod the first one names)")
    rec.note("top", f"the {TOP_RANKS} ranks: an Indexed Job made by hand (one fake GPU each, on the two real nodes) "
             "and tracked by `kubectl tao record open` + `record mark --backend-ref`, as the reference's tools "
             "track a Job; kubectl-tao's own multi-node Jobs put one rank on each node and the local cluster has two "
             "real nodes. A Job made elsewhere is read in two calls (the Job, its pods) where kubectl-tao's own is "
             "read in one; no DCGM exporter Service runs, so top reads nvidia-smi in every rank")
    if verbs:
        per_verb = ("per verb: `list` also runs one `kubectl logs` per job that ended since the last look (the "
                    "history capture, once per job); `submit`/`cancel` act on jobs of their own")
        notes.append(per_verb)
        rec.note("verbs", per_verb)
        rec.table("verbs", "Per verb (one run each with KUBECTL_TAO_TRACE; peak RSS: VmHWM of the Python process, "
                  "/usr/bin/time of each kubectl child, in a second run):", VERB_HEADERS, verb_cells(verbs))
    for gpus in (8, 0):
        s = info.get(f"submit{gpus}")
        if s:
            split = (f"submit --gpus {gpus}: {bl.fmt_seconds(s['tao'])} = kubectl {bl.fmt_seconds(s['busy'])} "
                     f"({s['calls']} calls) + Python {bl.fmt_seconds(max(s['tao'] - s['busy'], 0))}; bare kubectl "
                     f"{bl.fmt_seconds(s['bare'])}")
            if "startup_console" in info:
                split += f"; Python start-up alone (version) {bl.fmt_seconds(info['startup_console'])}"
            notes.append(split)
            rec.note("submit", split)

    print()
    for key, value in facts:
        print(f"{key}: {value}")
    print()
    print(bl.text_table(rows))
    if verbs:
        print()
        print(bl.text_table(verb_cells(verbs), VERB_HEADERS))
    print()
    for note in notes:
        print(note)
    met, missed = bl.summary(rows)
    print(f"targets: {met} met, {missed} missed")
    if args.markdown:
        if rec.done:
            path = write_results(args.markdown, rec.done)
            print(f"wrote {args.markdown} and {path} (phases recorded: {', '.join(rec.done)})")
        else:
            print(f"{args.markdown} left as it was: no phase completed")
    if failed:
        print(f"bench: a measurement failed: {failed}", file=sys.stderr)
        return 1
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
