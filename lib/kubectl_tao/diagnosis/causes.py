"""Why a job's program failed, read from what its ranks printed: THE table of causes and the diagnosis.

Each cause (``CAUSES``) has a name (the REASON `status` shows: ``CudaOOM``, ``NcclSystemError``, ...), a class
(``ERR_INFRA``: the platform, network or hardware failed and a retry can help; ``ERR_PROGRAM``: it fails again
until the job or its settings change), the signs that show it (regular expressions over one line of output,
each may refine the class or the fix) and the fix. ``docs/diagnosis.md`` holds the same table, checked against
this one by a unit test. What an evidence line tells (sizes, ranks, the NCCL operation, the CUDA error) is
read by the fact readers of ``diagnosis/causefacts.py``, which the table names.

Two entry points, both pure (text in, a ``Diagnosis`` out):

* ``cause_in_log(text, rank=None)``: one log (one pod's output), or ``None`` when it shows no error;
* ``diagnose(logs, ...)``: a job from the logs of its ranks (``RankLog``): which rank failed first and why.
  A hang or a timeout names the rank that stopped first: the one that printed no timeout of its own.

Every line a diagnosis quotes (``evidence``, ``context``) is sanitized (terminal sequences removed), redacted
(credentials the job printed) and capped. The work is linear in the text: each line is cut to ``LINE_CHARS``
before it is matched, one prefilter decides whether a line needs the signs at all, and no sign nests
quantifiers.

Tiers decide between causes. Within one rank's output: a specific cause (``PRIMARY``) beats a killed rank
(``KILLED``), which beats a timeout (``TIMEOUT``), which beats an exception the table does not know
(``GENERIC``), which beats a rank that only saw a peer go away (``FOLLOWER``). Across ranks, the rank that
raised an exception of its own (``GENERIC``) comes before a killed one and before timeouts: the others timed
out or lost their peer because it failed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kubectl_tao.core.valueclass import Factory, Value, record
from kubectl_tao.diagnosis.causefacts import (
    CUDA_BY_NAME,
    assert_facts,
    collective_facts,
    cuda_facts,
    first,
    merged,
    oom_facts,
    peer_facts,
    store_facts,
)
from kubectl_tao.diagnosis.causefacts import CUDA_ERRORS as CUDA_ERRORS  # the CUDA errors the causes name
from kubectl_tao.diagnosis.causefacts import rx as _rx

ERR_INFRA = "ERR_INFRA"
ERR_PROGRAM = "ERR_PROGRAM"

PRIMARY, KILLED, TIMEOUT, GENERIC, FOLLOWER = "primary", "killed", "timeout", "generic", "follower"
_RANK_ORDER = {PRIMARY: 0, KILLED: 1, TIMEOUT: 2, GENERIC: 3, FOLLOWER: 4}
RANK_ORDER = _RANK_ORDER  # how the causes one rank printed are weighed (restarts/signs.py orders its signs so)
_JOB_ORDER = {PRIMARY: 0, GENERIC: 1, KILLED: 2, TIMEOUT: 3, FOLLOWER: 4}

LINE_CHARS = 4096  # a line is matched on its first LINE_CHARS bytes (UTF-8): `cut -b` in the pod
EVIDENCE_CHARS = 640  # a quoted line is cut to this many characters
FALLBACK_LINES = 3  # an unknown failure quotes this many error-looking lines


@record
class Sign(Value):
    """One way a cause shows in a line. ``err_class``/``fix`` replace the cause's own when set."""

    pattern: re.Pattern[str]
    err_class: str | None = None
    fix: str | None = None
    what: str = ""  # a few words naming what this sign tells (the service refusing, the CUDA error)


@record
class Cause(Value):
    name: str  # the REASON `status` shows
    tier: str
    err_class: str
    summary: str  # what happened, in a few words
    fix: str
    signs: tuple[Sign, ...]
    facts: Callable[[str], dict[str, Any]] | None = None  # what the evidence line tells (sizes, ranks, ...)


@record
class RankLog(Value):
    """What one rank (or one pod) printed. ``rank`` is the pod's rank (its completion index)."""

    rank: int | None
    text: str
    pod: str = ""
    node: str = ""
    exit_code: int | None = None


@record
class RootCause(Value):
    """torchrun's ``Root Cause (first observed failure)`` block."""

    rank: int | None
    local_rank: int | None
    time: str
    exitcode: int | None
    signal: str
    line: str  # the exitcode line


@record
class Diagnosis(Value):
    cause: str
    err_class: str
    summary: str
    fix: str
    rank: int | None
    evidence: str  # the line that shows it (sanitized, redacted, capped); "" when no rank printed it
    context: list[str] = Factory(list)  # lines that go with the evidence (NCCL's "Last error:", the kernel's assert)
    facts: dict[str, Any] = Factory(dict)
    tier: str = PRIMARY
    pod: str = ""
    node: str = ""
    detail: str = ""  # one line of what the facts say ("asked for 20.00 GiB; GPU 3: 139.81 GiB, 17.94 GiB free")

    def to_dict(self) -> dict[str, Any]:
        out = self.as_dict()
        out["context"], out["facts"] = list(self.context), dict(self.facts)
        return out


_KILL_SIGNALS = {-9: "SIGKILL", 137: "SIGKILL"}


def _cuda_names(runtime: str, what: str = "") -> tuple[Sign]:
    """The sign of one CUDA error by its names: the runtime's or the driver's (no name of either enumeration
    starts or ends another of these)."""
    error = CUDA_BY_NAME[runtime]
    return (Sign(_rx(f"{error.runtime}|{error.driver}"), what=what),)


# ----------------------------------------------------------------------------------------------------------
# The table

_NCCL_DEBUG = "rerun with NCCL_DEBUG=INFO to see the interface and transport NCCL picked"

CAUSES: tuple[Cause, ...] = (
    # First: the stall watch ended the program, so an error the rank printed and went on from did not end it.
    Cause(
        "Stalled",
        PRIMARY,
        ERR_INFRA,
        "the program stopped making progress: the stall watch (--stall-timeout) ended it",
        "with --max-restarts the gang restarts from its last checkpoint; else resubmit (`kubectl tao resubmit "
        "JOB`); the line names the last output and epoch: find where it stopped (a data read waiting on storage, "
        "a collective waiting for a peer, a deadlock), and raise --stall-timeout when a silent phase (an "
        "evaluation that prints nothing) takes that long",
        (Sign(_rx(r"^kubectl-tao: stalled: no output and no status\.json growth for \w+ \(--stall-timeout ")),),
        first(_rx(r"^kubectl-tao: stalled: no output and no status\.json growth for (\w+) "), "stalled_for"),
    ),
    Cause(
        "GpuHardware",
        PRIMARY,
        ERR_INFRA,
        "the GPU failed (hardware error)",
        "cordon the node (`kubectl cordon NODE`) and have its GPU checked (nvidia-smi -q, the node's kernel log "
        "for Xid); resubmit: the job runs elsewhere",
        (
            Sign(_rx(r"uncorrectable ECC error"), what="uncorrectable ECC error"),
            *_cuda_names("cudaErrorECCUncorrectable", "uncorrectable ECC error"),
            # CUDA's own text: torch's `CUDA error: ...`, TensorRT's `Cuda Runtime (...)`, CuPy's and JAX's
            Sign(_rx(r"unspecified launch failure"), what="unspecified launch failure (often an Xid)"),
            *_cuda_names("cudaErrorLaunchFailure", "unspecified launch failure (often an Xid)"),
            Sign(_rx(r"GPU has fallen off the bus"), what="GPU fell off the bus"),
            Sign(_rx(r"NVRM: Xid \(PCI:"), what="Xid"),
            Sign(_rx(r"Unable to determine the device handle for GPU"), what="GPU unreachable"),
            Sign(_rx(r"ncclUnhandledCudaError|unhandled cuda error"), what="CUDA call failed inside NCCL"),
        ),
        merged(first(_rx(r"Xid \(PCI:[0-9a-fA-F:]+\): (\d+)"), "xid", int), cuda_facts),
    ),
    Cause(
        "CudaOOM",
        PRIMARY,
        ERR_PROGRAM,
        "CUDA out of memory",
        "use a smaller batch (the spec's batch size), gradient checkpointing or gradient "
        "accumulation, mixed precision, or more GPUs",
        (
            Sign(_rx(r"CUDA out of memory\. Tried to allocate")),
            Sign(_rx(r"OutOfMemoryError: CUDA out of memory")),
            # c10's CUDA check ("CUDA error: " + cudaGetErrorString) and CUDA's own error name, as programs
            # outside PyTorch's caching allocator print them
            Sign(_rx(r"CUDA error: out of memory")),
            *_cuda_names("cudaErrorMemoryAllocation"),
            Sign(_rx(r"Cuda Runtime \(out of memory\)")),  # TensorRT's `Error Code 1: Cuda Runtime (TEXT)`
        ),
        merged(oom_facts, cuda_facts),
    ),
    Cause(
        "DeviceAssert",
        PRIMARY,
        ERR_PROGRAM,
        "a CUDA kernel's assertion failed (device-side assert)",
        "rerun with CUDA_LAUNCH_BLOCKING=1 in the command's environment to see the failing call; most often "
        "a label or index out of range (labels must be in [0, num_classes)): check the data and the model's "
        "number of classes",
        (
            Sign(_rx(r"device-side assert triggered")),
            *_cuda_names("cudaErrorAssert"),
            Sign(_rx(r"Assertion `[^`]*` failed\.$")),
        ),
        merged(assert_facts, cuda_facts),
    ),
    Cause(
        "IllegalMemoryAccess",
        PRIMARY,
        ERR_PROGRAM,
        "a CUDA kernel read or wrote memory it does not own (illegal memory access)",
        "rerun with CUDA_LAUNCH_BLOCKING=1 in the command's environment to see the failing call; an index "
        "out of range, a custom kernel or extension bug, or mismatched tensor shapes",
        (Sign(_rx(r"an illegal memory access was encountered")), *_cuda_names("cudaErrorIllegalAddress")),
        cuda_facts,
    ),
    Cause(
        "NoGpuVisible",
        PRIMARY,
        ERR_INFRA,
        "the program saw no GPU",
        "the pod asked for GPUs but the node's runtime did not pass them in: check the NVIDIA container "
        "toolkit and device plugin on the node (`kubectl tao gpus`), restart the pod",
        (
            Sign(_rx(r"No CUDA GPUs are available"), what="no CUDA device"),
            Sign(_rx(r"no CUDA-capable device is detected"), what="no CUDA device"),
            *_cuda_names("cudaErrorNoDevice", "no CUDA device"),
            Sign(_rx(r"Found no NVIDIA driver on your system"), what="no NVIDIA driver in the container"),
            Sign(_rx(r"Failed to initialize NVML"), what="NVML failed (the container lost its GPU device nodes)"),
            Sign(_rx(r"nccl2 requires at least one CUDA device"), what="NCCL backend without a GPU"),
            Sign(
                _rx(r"Torch not compiled with CUDA enabled"),
                ERR_PROGRAM,
                "the image's torch is a CPU-only build: use an image with a CUDA build of torch",
                "torch built without CUDA",
            ),
            Sign(
                _rx(r"Distributed package doesn't have NCCL"),
                ERR_PROGRAM,
                "the image's torch has no NCCL (a CPU-only build): use an image with a CUDA build of torch, or "
                "the gloo backend",
                "torch built without NCCL",
            ),
        ),
        cuda_facts,
    ),
    Cause(
        "ShmExhausted",
        PRIMARY,
        ERR_PROGRAM,
        "shared memory (/dev/shm) ran out",
        "give the pod more shared memory (--shm-size, e.g. --shm-size 16Gi) or use fewer DataLoader workers",
        (
            Sign(_rx(r"unable to allocate shared memory\(shm\)")),
            Sign(_rx(r"insufficient shared memory \(shm\)")),
            Sign(_rx(r"workers are out of shared memory")),
            # a bounded span of printable ASCII: the same count of characters in Python as of bytes in the pod
            Sign(
                _rx(r"Error while creating shared memory segment \S+ \(size \d+\)[ -/:-~]{0,20}No space left on device")
            ),
            Sign(_rx(r"/dev/shm[ -9;-~]{0,64}: No space left on device")),
        ),
        first(_rx(r"shared memory segment \S+ \(size (\d+)\)"), "segment_size", int),
    ),
    Cause(
        "NanLoss",
        PRIMARY,
        ERR_PROGRAM,
        "the loss or the gradients became NaN/Inf",
        "lower the learning rate, add warm-up or gradient clipping, check the precision (bf16 instead of fp16, "
        "loss scaling) and the data (log(0), division by zero, bad samples)",
        (
            Sign(_rx(r"Function '\w+' returned (?:nan|inf) values")),
            Sign(_rx(r"is non-finite, so it cannot be clipped")),
            Sign(_rx(r"\bloss\b[^\n]{0,40}?\b(?:is|=|:|became)\s*(?:nan|inf)\b", re.IGNORECASE)),
        ),
        first(_rx(r"Function '(\w+)' returned"), "function"),
    ),
    Cause(
        "NcclInvalidUsage",
        PRIMARY,
        ERR_PROGRAM,
        "NCCL refused how it was used",
        "one process per GPU: --nproc_per_node no larger than the GPUs a pod gets, and "
        "torch.cuda.set_device(local_rank) before init_process_group",
        (
            Sign(_rx(r"Duplicate GPU detected"), what="two ranks on one GPU"),
            Sign(
                _rx(r"Bootstrap : no socket interface found"),
                fix="NCCL_SOCKET_IFNAME names no interface of the pod: drop --nccl-socket-ifname or name the "
                "pod's interface (eth0); " + _NCCL_DEBUG,
                what="no network interface matched NCCL_SOCKET_IFNAME",
            ),
            Sign(_rx(r"ncclInvalidUsage|NCCL error in: \S+, invalid usage")),
        ),
    ),
    Cause(
        "NcclSystemError",
        PRIMARY,
        ERR_INFRA,
        "NCCL failed in a system call (network, RDMA, memory)",
        "check --nccl-socket-ifname and --nccl-ib-hca against the node's interfaces, the pod's locked-memory limit "
        "(IPC_LOCK) for InfiniBand/RoCE, and run `kubectl tao probe nccl`; " + _NCCL_DEBUG,
        (
            Sign(_rx(r"NCCL error in: \S+, unhandled system error")),
            Sign(_rx(r"ncclSystemError")),
        ),
        first(_rx(r"NCCL version ([\d.]+)"), "nccl_version"),
    ),
    Cause(
        "NcclInternalError",
        PRIMARY,
        ERR_INFRA,
        "NCCL failed internally",
        "make every rank run the same image (the same NCCL version); " + _NCCL_DEBUG,
        (
            Sign(_rx(r"Message truncated : received \d+ bytes instead of \d+"), what="ranks run different NCCL"),
            Sign(_rx(r"ncclInternalError|NCCL error in: \S+, internal error")),
        ),
    ),
    Cause(
        "MissingModule",
        PRIMARY,
        ERR_PROGRAM,
        "a Python module the program imports is not in the image",
        "install it in the image (or pip install it before the command), or fix the import",
        (Sign(_rx(r"(?:ModuleNotFoundError|ImportError): No module named ")),),
        first(_rx(r"No module named '([^']{1,200})'"), "module"),
    ),
    Cause(
        "MissingFile",
        PRIMARY,
        ERR_PROGRAM,
        "a file the program opens does not exist",
        "check the path against the job's mounts (--mount-path, the results and data paths) and that the file was "
        "uploaded there",
        (Sign(_rx(r"FileNotFoundError: \[Errno 2\] No such file or directory")),),
        first(_rx(r"No such file or directory: '([^']{1,400})'"), "path"),
    ),
    Cause(
        "AccessDenied",
        PRIMARY,
        ERR_PROGRAM,
        "a service refused the job's credentials",
        "give the job a credential with access (--env NAME from your environment, or --env-secret SECRET), never "
        "a literal in the command",
        (
            Sign(
                _rx(r"Invalid credentials in Authorization header"),
                fix="the HF_TOKEN the job was given is invalid: give a valid one (--env HF_TOKEN or "
                "--env-secret SECRET)",
                what="Hugging Face: invalid token",
            ),
            Sign(
                _rx(r"You are trying to access a gated repo"),
                fix="the model is gated: accept its terms on huggingface.co and give the job a token of that "
                "account (--env HF_TOKEN or --env-secret SECRET)",
                what="Hugging Face: gated repository",
            ),
            Sign(
                _rx(r"GatedRepoError: 40[13]"),
                fix="the model is gated: accept its terms on huggingface.co and give the job a token of that "
                "account (--env HF_TOKEN or --env-secret SECRET)",
                what="Hugging Face: gated repository",
            ),
            Sign(
                _rx(r"HfHubHTTPError: [ -/:-~]{0,40}40[13]"),
                fix="give the job a Hugging Face token with access (--env HF_TOKEN or --env-secret SECRET)",
                what="Hugging Face: refused",
            ),
            Sign(
                _rx(r"An error occurred \((?:AccessDenied|403|InvalidAccessKeyId|SignatureDoesNotMatch)\) when "),
                fix="the S3 credentials lack access to the bucket or object: check the policy, the bucket and key, "
                "and give them from a Secret (--env AWS_ACCESS_KEY_ID --env AWS_SECRET_ACCESS_KEY, or --env-secret)",
                what="S3: access denied",
            ),
            Sign(
                _rx(r"AuthenticationException: Invalid apikey"),
                fix="the NGC API key is wrong or expired: give a valid one (--env NGC_API_KEY or --env-secret SECRET)",
                what="NGC: invalid API key",
            ),
        ),
        first(_rx(r"when calling the (\w+) operation"), "operation"),
    ),
    Cause(
        "RankKilled",
        KILLED,
        ERR_INFRA,
        "a rank was killed (SIGKILL)",
        "most often the container's memory limit (the kernel's OOM killer): lower the host-memory use "
        "(DataLoader workers, prefetch, pinned memory) or run on nodes with more memory; else the node was "
        "drained or preempted (`kubectl tao explain` shows the pod's events)",
        (Sign(_rx(r"^\s*exitcode\s*: -9 \(pid: \d+\)")), Sign(_rx(r"Signal 9 \(SIGKILL\) received by PID"))),
    ),
    Cause(
        "CollectiveTimeout",
        TIMEOUT,
        ERR_INFRA,
        "a collective operation timed out: a rank stalled or died first",
        "read the log of the rank that stopped first (`kubectl tao logs JOB --rank N`): a slow data read, a "
        "rank stuck in its own code, or one that skipped a collective; raise the process group's timeout only "
        "when the wait is expected",
        (
            Sign(_rx(r"Watchdog caught collective operation timeout")),
            Sign(_rx(r"Timed out waiting \d+ms for \w+ operation to complete")),
        ),
        collective_facts,
    ),
    Cause(
        "RendezvousTimeout",
        TIMEOUT,
        ERR_INFRA,
        "torchrun's rendezvous did not complete",
        "check that every pod started and can reach the rendezvous endpoint (rank 0's pod, its port), "
        "NetworkPolicies and DNS; raise --rendezvous-timeout when nodes start slowly",
        (
            Sign(_rx(r"^\s*raise RendezvousTimeoutError")),
            Sign(_rx(r"RendezvousTimeoutError")),
            Sign(_rx(r"RendezvousConnectionError: The connection to the C10d store has failed")),
        ),
    ),
    Cause(
        "StoreTimeout",
        TIMEOUT,
        ERR_INFRA,
        "not every rank reached the rendezvous store in time",
        "the missing ranks never started or cannot reach rank 0: see their pods (`kubectl tao explain`), "
        "NetworkPolicies and DNS of the headless Service; raise --rendezvous-timeout when nodes start slowly",
        (
            Sign(_rx(r"DistStoreError: Timed out after \d+ seconds waiting for clients")),
            Sign(_rx(r"The client socket has timed out after \d+m?s while trying to connect to")),
            Sign(_rx(r"^(?:\[rank\d+\]: )?RuntimeError: Socket Timeout$")),
        ),
        store_facts,
    ),
    Cause(
        "NcclRemoteError",
        FOLLOWER,
        ERR_INFRA,
        "NCCL lost a peer (a remote rank exited or the network failed)",
        "read the log of the rank that failed first; if none did, the network between the pods: "
        "NetworkPolicies, NCCL_SOCKET_IFNAME, `kubectl tao probe nccl`; " + _NCCL_DEBUG,
        (
            Sign(_rx(r"connect to \S+ returned Connection refused, exceeded error retry count")),
            Sign(_rx(r"ncclRemoteError")),
            Sign(_rx(r"NCCL error in: \S+, remote process exited or there was a network error")),
        ),
        peer_facts,
    ),
    Cause(
        "RemoteRankDied",
        FOLLOWER,
        ERR_INFRA,
        "a peer rank went away",
        "read the log of the rank that failed first (`kubectl tao logs JOB --rank N`)",
        (
            Sign(_rx(r"Connection closed by peer \[")),
            Sign(_rx(r"Read error \[[^\]\[]+\]:\d+: Connection reset by peer")),
        ),
        peer_facts,
    ),
    Cause(
        "ProgramError",
        GENERIC,
        ERR_PROGRAM,
        "the program raised an exception",
        "fix the program or its inputs: the evidence is the exception it raised (`kubectl tao logs JOB "
        "--errors` for every rank's)",
        (Sign(_rx(r"^(?:[A-Za-z_]\w*\.){0,6}([A-Z]\w*(?:Error|Exception|Exit|Interrupt))(?::|$)")),),
        first(_rx(r"^(?:[A-Za-z_]\w*\.){0,6}([A-Z]\w*(?:Error|Exception|Exit|Interrupt))(?::|$)"), "exception"),
    ),
)

BY_NAME: dict[str, Cause] = {cause.name: cause for cause in CAUSES}
_INDEX = {cause.name: i for i, cause in enumerate(CAUSES)}
TIMEOUT_CAUSES = frozenset(c.name for c in CAUSES if c.tier == TIMEOUT)
UNKNOWN = "ProgramError"
_NOT_AN_ERROR = ("ChildFailedError",)  # torchrun's closing banner names the failure, it is not one

# A line is matched against the signs only when this prefilter finds something in it.
_PREFILTER = _rx(
    r"rror|xception|xit|nterrupt|Xid|fallen off|device handle|out of memory|assert|shared memory|shm|nan|inf\b|"
    r"non-finite|Duplicate GPU|socket interface|ncclRemote|nccl\w{0,32}Error|Message truncated|No module named|"
    r"exitcode|SIGKILL|Watchdog|Timed out|timed out|Timeout|Connection (?:closed|refused|reset)|gated repo|"
    r"Invalid credentials|NVML|NVIDIA driver|CUDA|NCCL|"
    r"kubectl-tao: stalled",
    re.IGNORECASE,
)
_RANK_PREFIX = _rx(r"^\[rank(\d+)\]: ?")
RANK_PREFIX = _RANK_PREFIX  # torch's `[rankN]: ` before a line: dropped before the signs are matched
# A logger's line (glog, NCCL's WARN/INFO, torchrun's logging) that repeats what the exception line says: the
# exception line is quoted when both show the same sign.
_LOGGER = _rx(
    r"^(?:\[?[IWEF]\d{4} |[IWEF]\d{8} |\[\d{4}-\d\d-\d\d [\d:]+\] |\S+:\d+:\d+ \[\d+\] |(?:WARNING|ERROR|INFO):\S)"
)
_ERRORISH_WORDS = _rx(r"error|exception|fatal|failed|traceback|killed|abort|denied|refused", re.IGNORECASE)
_FRAME = _rx(r"^(?:\[rank\d+\]: ?)?(?:\s+File \"|\s{4}|\s*\^+\s*$)")  # a traceback's frames and code


def _errorish(line: str) -> bool:
    """A line that looks like an error, not a traceback frame that happens to name one (errors/__init__.py)."""
    return bool(_ERRORISH_WORDS.search(line)) and not _FRAME.match(line)


# ----------------------------------------------------------------------------------------------------------
# torchrun's closing banner

_ROOT_START = "Root Cause (first observed failure):"
_FIELD = re.compile(r"^\s{1,4}(time|rank|exitcode)\s*: (.*)$")


def root_cause(lines: Sequence[str]) -> RootCause | None:
    """The ``Root Cause (first observed failure)`` block of torchrun's ChildFailedError banner, or None."""
    start = None
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].strip() == _ROOT_START:
            start = i
            break
    if start is None:
        return None
    fields: dict[str, str] = {}
    exit_line = ""
    for line in lines[start + 1 : start + 12]:
        m = _FIELD.match(line)
        if m:
            fields.setdefault(m.group(1), m.group(2).strip())
            if m.group(1) == "exitcode":
                exit_line = line
        elif line.startswith("====="):
            break
    rank = local = code = None
    m = re.match(r"(-?\d+)(?: \(local_rank: (\d+)\))?", fields.get("rank", ""))
    if m:
        rank = int(m.group(1))
        local = int(m.group(2)) if m.group(2) else None
    m = re.match(r"(-?\d+)", fields.get("exitcode", ""))
    if m:
        code = int(m.group(1))
    sig = re.search(r"\((SIG[A-Z]+)\)", fields.get("exitcode", ""))
    signal = sig.group(1) if sig else _KILL_SIGNALS.get(code or 0, "")
    return RootCause(rank, local, fields.get("time", ""), code, signal, exit_line)


# ----------------------------------------------------------------------------------------------------------
# One text


@record
class _Hit(Value):
    cause: Cause
    sign: int
    line: int
    logged: int  # 0: the exception's own line; 1: a logger's line; 2: C++'s `what():` echo


class _Lines(list[str]):
    """A text's lines as they are matched (sanitized, cut to LINE_CHARS) and, in ``raw``, as they were printed:
    a quoted line is redacted from its raw form, then sanitized (the redactor sees through what a terminal
    hides; an escape the sanitizer writes would hide a credential's edges from it)."""

    raw: list[str]


def _clean(text: str) -> _Lines:
    from kubectl_tao.core.sanitize import sanitize

    raw = [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]
    lines = _Lines(sanitize(cut(line), multiline=True).replace("\n", " ") for line in raw)
    lines.raw = raw
    return lines


def cut(line: str) -> str:
    """LINE as it is matched: its first LINE_CHARS bytes of UTF-8 (a character cut in two dropped), as the pod's
    `cut -b` keeps them; an ASCII line: its first LINE_CHARS characters."""
    head = line[:LINE_CHARS]
    if head.isascii():
        return head
    return head.encode("utf-8", "surrogatepass")[:LINE_CHARS].decode("utf-8", "ignore")


def matched_lines(text: str) -> list[str]:
    """TEXT's lines as the signs are matched against them: a trailing carriage return dropped, cut (``cut``),
    terminal sequences removed and controls escaped (core/sanitize.py), a carriage return inside a line a space."""
    return list(_clean(text))


def _show(lines: Sequence[str], at: int) -> str:
    """Line AT of LINES as a diagnosis quotes it (from the raw line when the lines came from _clean)."""
    raw = getattr(lines, "raw", None)
    return _shown(raw[at] if raw is not None else lines[at])


def _shown(line: str) -> str:
    """A line as a diagnosis quotes it: redacted, then sanitized to one line, then capped."""
    from kubectl_tao.core.redact import redact_log_line
    from kubectl_tao.core.sanitize import cap, sanitize

    return cap(sanitize(redact_log_line(line.rstrip())), EVIDENCE_CHARS)


def _hits(lines: Sequence[str]) -> list[_Hit]:
    hits: list[_Hit] = []
    for number, line in enumerate(lines):
        if not _PREFILTER.search(line):
            continue
        body = _RANK_PREFIX.sub("", line, count=1)
        for cause in CAUSES:
            found = next((i for i, sign in enumerate(cause.signs) if sign.pattern.search(body)), None)
            if found is None:
                continue
            if cause.tier == GENERIC and any(word in body for word in _NOT_AN_ERROR):
                continue
            logged = 2 if body.lstrip().startswith("what():") else 1 if _LOGGER.match(body) else 0
            hits.append(_Hit(cause, found, number, logged))
            break
    return hits


def _best(hits: Iterable[_Hit]) -> _Hit | None:
    return min(
        hits,
        key=lambda h: (_RANK_ORDER[h.cause.tier], _INDEX[h.cause.name], h.sign, h.logged, h.line),
        default=None,
    )


def _context(cause: Cause, lines: Sequence[str], at: int) -> list[int]:
    """The lines that go with the evidence: NCCL's ``Last error:`` detail, the kernel's assertion line."""
    out: list[int] = []
    if cause.name.startswith("Nccl") or cause.name in ("GpuHardware", "ShmExhausted"):
        for i in range(at + 1, min(at + 4, len(lines))):
            if _RANK_PREFIX.sub("", lines[i]).strip() == "Last error:" and i + 1 < len(lines):
                out.append(i + 1)
                break
    if cause.name == "DeviceAssert":
        out += [i for i, line in enumerate(lines) if "Assertion `" in line][:1]
    return out


def _diagnosis(hit: _Hit, lines: Sequence[str], rank: int | None, root: RootCause | None) -> Diagnosis:
    cause, sign = hit.cause, hit.cause.signs[hit.sign]
    line = lines[hit.line]
    prefixed = _RANK_PREFIX.match(line)
    if prefixed:
        rank = int(prefixed.group(1))
    elif root is not None and root.rank is not None:
        rank = root.rank
    context = _context(cause, lines, hit.line)
    facts: dict[str, Any] = {}
    for source in (line, *(lines[i] for i in context)):
        if cause.facts is not None:
            for key, value in cause.facts(_RANK_PREFIX.sub("", source)).items():
                facts.setdefault(key, value)
    if sign.what:
        facts["what"] = sign.what
    if root is not None and root.time:
        facts.setdefault("time", root.time)
    if root is not None and root.local_rank is not None and root.rank == rank:
        facts.setdefault("local_rank", root.local_rank)
    return Diagnosis(
        cause=cause.name,
        err_class=sign.err_class or cause.err_class,
        summary=cause.summary,
        fix=sign.fix or cause.fix,
        rank=rank,
        evidence=_show(lines, hit.line),
        context=[_show(lines, i) for i in context],
        facts=facts,
        tier=cause.tier,
    )


def names_a_cause(found: Diagnosis | Mapping[str, Any]) -> bool:
    """Whether a diagnosis names a cause, rather than quoting the last lines of output no sign matched (then
    the cluster's own reason, `ExitCode` and its code, stays the job's reason)."""
    facts = found.facts if isinstance(found, Diagnosis) else (found.get("facts") or {})
    return not facts.get("unrecognized")


def _fallback(lines: Sequence[str], rank: int | None, exit_code: int | None = None) -> Diagnosis | None:
    """The last error-looking lines (else the last lines) of a text no sign matched: never nothing."""
    shown = [i for i, line in enumerate(lines) if line.strip()]
    if not shown:
        return None
    errorish = [i for i in shown if _errorish(lines[i])] or shown
    picked = errorish[-FALLBACK_LINES:]
    cause = BY_NAME[UNKNOWN]
    return Diagnosis(
        cause=UNKNOWN,
        err_class=ERR_PROGRAM,
        summary=(
            f"the program exited with code {exit_code}; no known cause in its output"
            if exit_code
            else "the program failed; no known cause in its output"
        ),
        fix=cause.fix,
        rank=rank,
        evidence=_show(lines, picked[-1]),
        context=[_show(lines, i) for i in picked[:-1]],
        tier=GENERIC,
        facts={"unrecognized": True},
    )


def _by_rank(lines: Sequence[str], rank: int | None) -> dict[int | None, list[int]]:
    """Line numbers per ``[rankN]:`` prefix; lines without one belong to the pod's own rank."""
    out: dict[int | None, list[int]] = {}
    for number, line in enumerate(lines):
        m = _RANK_PREFIX.match(line)
        out.setdefault(int(m.group(1)) if m else rank, []).append(number)
    return out


_TIME = re.compile(r"^\s{1,4}time\s*: (\S+)")
_RANK_FIELD = re.compile(r"^\s{1,4}rank\s*: (\d+)")


def failure_times(lines: Sequence[str]) -> dict[int, str]:
    """Rank -> the time torchrun's banner gives its failure (``Failures:`` and ``Root Cause`` entries)."""
    out: dict[int, str] = {}
    for i, line in enumerate(lines):
        m = _TIME.match(line)
        if not m:
            continue
        for other in lines[i + 1 : i + 4]:
            r = _RANK_FIELD.match(other)
            if r:
                out.setdefault(int(r.group(1)), m.group(1))
                break
    return out


@record
class _Read(Value):
    """One pod's output, read: its lines, each rank's own diagnosis (with the line it quotes), the banner."""

    lines: list[str]
    found: list[tuple[Diagnosis, int]]
    root: RootCause | None
    times: dict[int, str]


def _read(text: str, rank: int | None) -> _Read:
    """Every rank's own diagnosis in one pod's output (ranks told apart by torch's ``[rankN]:`` prefix)."""
    lines = _clean(text)
    root = root_cause(lines) if _ROOT_START in text else None
    times = failure_times(lines) if root is not None else {}
    hits = _hits(lines)
    groups = _by_rank(lines, rank)
    found: list[tuple[Diagnosis, int]] = []
    if len(groups) <= 1:
        best = _best(hits)
        if best is not None:
            found.append((_diagnosis(best, lines, rank, root), best.line))
    else:
        # Lines without a [rankN]: prefix (a CUDA kernel's assertion, torchrun's own) belong to the rank the
        # banner names: the groups are merged by the rank each one's diagnosis names, then judged together.
        merged: dict[int | None, list[_Hit]] = {}
        for members in groups.values():
            allowed = set(members)
            mine = [h for h in hits if h.line in allowed]
            best = _best(mine)
            if best is not None:
                merged.setdefault(_diagnosis(best, lines, rank, root).rank, []).extend(mine)
        for mine in merged.values():
            best = _best(mine)
            if best is not None:
                found.append((_diagnosis(best, lines, rank, root), best.line))
    if root is not None and root.signal == "SIGKILL" and not any(d.tier == PRIMARY for d, _ in found):
        killed = next((h for h in hits if h.cause.name == "RankKilled"), None)
        if killed is not None and not any(d.cause == "RankKilled" for d, _ in found):
            found.append((_diagnosis(killed, lines, rank, root), killed.line))
    return _Read(lines, found, root, times)


def cause_in_log(text: str, rank: int | None = None) -> Diagnosis | None:
    """One pod's output -> the cause it shows (its ``err_class`` says whether a retry can help), or None when
    it shows no error. ``rank``: the pod's rank, used where the text does not say one. Pure, linear."""
    return diagnose([RankLog(rank, text)])


# ----------------------------------------------------------------------------------------------------------
# A job


def _first_error(lines: Sequence[str]) -> int:
    hits = _hits(lines)
    if hits:
        return min(h.line for h in hits)
    return next((i for i, line in enumerate(lines) if _errorish(line)), len(lines))


def _last_progress(lines: Sequence[str]) -> int:
    """The last line a rank printed before its first warning or error (where it stopped), or -1."""
    for at in range(_first_error(lines) - 1, -1, -1):
        body = _RANK_PREFIX.sub("", lines[at]).strip()
        if body and not _LOGGER.match(body) and not _errorish(body) and not body.startswith(("=", "-", "*")):
            return at
    return -1


def diagnose(
    logs: Sequence[RankLog],
    *,
    first_failed_rank: int | None = None,
    gpus_requested: int | None = None,
) -> Diagnosis | None:
    """The job's cause from what its ranks printed: the rank that failed first (torchrun's failure times,
    then ``first_failed_rank`` from the pods, then the order of the lines, then the lowest rank) and why. A
    timeout names the rank that stopped first: one that printed no timeout of its own. Unknown output gives
    the last error-looking lines of the first failed rank. ``gpus_requested`` 0 makes NoGpuVisible the job's
    own error."""
    found: list[tuple[Diagnosis, int]] = []
    times: dict[int, str] = {}
    reads: dict[int | None, _Read] = {}
    for log in logs:
        read = _read(log.text, log.rank)
        reads[log.rank] = read
        for rank, when in read.times.items():
            times.setdefault(rank, when)
        found += [(d.replaced(pod=log.pod, node=log.node), line) for d, line in read.found]
    if not found:
        return _unknown(logs, reads, first_failed_rank)

    def key(item: tuple[Diagnosis, int]) -> tuple[Any, ...]:
        d, line = item
        return (
            _JOB_ORDER[d.tier],
            times.get(d.rank, "~") if d.rank is not None else "~",
            0 if d.rank == first_failed_rank else 1,
            line,
            d.rank if d.rank is not None else 1 << 30,
        )

    chosen = min(found, key=key)[0]
    if chosen.tier == FOLLOWER and "peer_rank" in chosen.facts:
        chosen = chosen.replaced(facts={**chosen.facts, "remote_rank": chosen.facts["peer_rank"]})
    if chosen.tier == TIMEOUT:
        chosen = _stalled(chosen, [d for d, _ in found], reads)
    if chosen.cause == "NoGpuVisible" and gpus_requested == 0:
        chosen = chosen.replaced(
            err_class=ERR_PROGRAM, fix="the job asked for no GPU: submit it with --gpus N (or run it on the CPU)"
        )
    return chosen.replaced(detail=describe(chosen))


def _unknown(logs: Sequence[RankLog], reads: Mapping[int | None, _Read], first: int | None) -> Diagnosis | None:
    order = sorted(logs, key=lambda log: (log.rank != first, log.exit_code in (None, 0), log.rank or 0))
    for log in order:
        d = _fallback(reads[log.rank].lines, log.rank, log.exit_code)
        if d is not None:
            d = d.replaced(pod=log.pod, node=log.node)
            return d.replaced(detail=describe(d))
    return None


def _stalled(chosen: Diagnosis, found: Sequence[Diagnosis], reads: Mapping[int | None, _Read]) -> Diagnosis:
    """The ranks that printed no timeout of their own stopped first; the lowest of them is named, with the
    line it printed (its own error, else the last line before its first warning)."""
    timed_out = sorted({d.rank for d in found if d.tier == TIMEOUT and d.rank is not None})
    ranks = {d.rank for d in found if d.rank is not None} | {r for r in reads if r is not None}
    candidates = sorted(ranks - set(timed_out))
    if not candidates:
        return chosen
    stalled = candidates[0]
    facts = {**chosen.facts, "stalled_rank": stalled, "timed_out_ranks": timed_out}
    if len(candidates) > 1:
        facts["stalled_ranks"] = candidates
    own = next((d for d in found if d.rank == stalled), None)
    if own is not None:
        facts["stalled_evidence"] = own.evidence
    elif stalled in reads:
        last = _last_progress(reads[stalled].lines)
        if last >= 0:
            facts["stalled_evidence"] = _show(reads[stalled].lines, last)
    return chosen.replaced(facts=facts)


def describe(d: Diagnosis) -> str:
    """One line of what the facts say, for `explain`."""
    f = d.facts
    parts: list[str] = []
    if d.cause == "CudaOOM" and f.get("tried"):
        gpu = f"GPU {f['gpu']}" if "gpu" in f else "the GPU"
        parts.append(f"asked for {f['tried']}; {gpu} has {f.get('capacity', '?')} in total, {f.get('free', '?')} free")
        if f.get("reserved_unallocated"):
            parts.append(f"{f['reserved_unallocated']} reserved by PyTorch but unallocated")
        if f.get("fragmented"):
            parts.append(
                "that is at least the size asked: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the "
                "command's environment against fragmentation"
            )
    elif d.cause == "StoreTimeout" and "expected" in f:
        parts.append(f"{f['joined']}/{f['expected']} ranks joined; {f['expected'] - f['joined']} never reached rank 0")
    elif d.cause == "StoreTimeout" and "master" in f:
        parts.append(f"rank {d.rank} could not reach the store at {f['master']} (rank 0 not up, or not reachable)")
    elif d.cause in TIMEOUT_CAUSES and "stalled_rank" in f:
        op = f" in {f['op']}" if f.get("op") else ""
        parts.append(f"rank {d.rank} timed out{op}; rank {f['stalled_rank']} stopped first (printed no timeout)")
        if f.get("stalled_evidence"):
            parts.append(f"rank {f['stalled_rank']} printed: {f['stalled_evidence']}")
    elif d.cause == "Stalled" and f.get("stalled_for"):
        parts.append(f"no output and no status.json growth for {f['stalled_for']}")
    elif d.tier == FOLLOWER and "remote_rank" in f:
        parts.append(f"rank {d.rank} lost rank {f['remote_rank']} ({f.get('peer', '')})")
    elif f.get("what"):
        parts.append(str(f["what"]))
    if "cuda_error" in f:
        parts.append(f"CUDA error {f['cuda_code']} ({f['cuda_error']})")
    if d.cause == UNKNOWN and f.get("exception"):
        parts.append(f"{f['exception']} raised by rank {d.rank}" if d.rank is not None else str(f["exception"]))
    for key, words in (("module", "module"), ("path", "path"), ("operation", "operation"), ("kernel_assert", "kernel")):
        if key in f:
            parts.append(f"{words}: {f[key]}")
    return "; ".join(parts)


def first_error_block(text: str, *, max_lines: int = 40) -> list[str]:
    """The first error block of one rank's output: from its traceback's start (or the first error line) to
    the end of that exception, at most ``max_lines``; sanitized and redacted. [] when it shows no error."""
    lines = _clean(text)
    return _block(lines, range(len(lines)), max_lines)


def error_blocks(text: str, rank: int | None = None, *, max_lines: int = 40) -> list[tuple[int | None, list[str]]]:
    """The first error block of each rank in one pod's output (ranks told apart by ``[rankN]:``), in rank
    order: `logs --errors`."""
    lines = _clean(text)
    out: list[tuple[int | None, list[str]]] = []
    groups = _by_rank(lines, rank)
    for r in sorted(groups, key=lambda r: -1 if r is None else r):
        # In a pod of several ranks, the unprefixed lines are torchrun's own: shown only for a known cause.
        block = _block(lines, groups[r], max_lines, known_only=len(groups) > 1 and r == rank)
        if block:
            out.append((r, block))
    return out


def _block(lines: Sequence[str], members: Iterable[int], max_lines: int, *, known_only: bool = False) -> list[str]:
    allowed = list(members)
    if not allowed:
        return []
    mine = [lines[i] for i in allowed]
    raw = getattr(lines, "raw", lines)
    hits = [h for h in _hits(mine) if h.cause.name != "RankKilled"]
    if hits:
        at = min(h.line for h in hits)
    elif known_only:
        return []
    else:
        at = next((i for i, line in enumerate(mine) if _errorish(line)), -1)
        if at < 0:
            return []
    start = at
    for i in range(at, max(at - max_lines, -1), -1):
        if "Traceback (most recent call last)" in mine[i]:
            start = i
            break
    end = at + 1
    while end < len(mine) and end - at < 8 and mine[end].strip() and not _LOGGER.match(_RANK_PREFIX.sub("", mine[end])):
        body = _RANK_PREFIX.sub("", mine[end])
        if body.startswith(("Traceback", "  File ", "===")):
            break
        end += 1
    return [_shown(raw[allowed[i]]) for i in range(max(start, end - max_lines), end)]


def markdown_table() -> str:
    """THE table as docs/diagnosis.md shows it (a unit test keeps the page equal to this)."""
    rows = [
        "| REASON | class | what happened | shown by (one line of a rank's output) | fix |",
        "| --- | --- | --- | --- | --- |",
    ]
    for cause in CAUSES:
        shown = "; ".join(
            f"`{_readable(sign.pattern.pattern)}`" + (f" ({sign.err_class})" if sign.err_class else "")
            for sign in cause.signs
        )
        rows.append(f"| `{cause.name}` | {cause.err_class} | {cause.summary} | {shown} | {cause.fix} |")
    return "\n".join(rows) + "\n"


def _readable(pattern: str) -> str:
    """A sign's regular expression as a reader scans for it: escapes dropped, pipes of a table cell escaped."""
    text = re.sub(r"\\(.)", r"\1", pattern.replace("\\b", "")).replace("(?:", "(")
    return text.replace("|", "\\|").replace("`", "'")
