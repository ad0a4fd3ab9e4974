"""GPU use of a running job's ranks, from the two texts that tell it: NVIDIA's DCGM exporter's metrics page and
`nvidia-smi`'s CSV query. Pure: text in, values out (the reads are jobs/top.py's).

nvidia-smi: `nvidia-smi --query-gpu=index,uuid,utilization.gpu,memory.used,memory.total --format=csv,noheader,
nounits` prints one line per GPU the container sees, the fields joined by ", " (`0, GPU-604ac76c-...,
87, 40213, 143771`); a value the driver cannot give reads `[N/A]` or `[Not Supported]`. When it cannot run it
prints one line instead ("Failed to initialize NVML: Unknown Error", "NVIDIA-SMI has failed because it couldn't
communicate with the NVIDIA driver. ...", "No devices were found"): that line is the rank's reason.

DCGM exporter (NVIDIA/dcgm-exporter, internal/pkg/rendermetrics): the Prometheus text format, a `# HELP` and a
`# TYPE` line per field, then one line per GPU: `FIELD{gpu="0",UUID="GPU-...",pci_bus_id="...",device="nvidia0",
modelName="...",Hostname="..."[,container="...",namespace="...",pod="..."]} VALUE`. The pod attribution labels
(`pod`, `namespace`, `container`; `pod_name`, `pod_namespace`, `container_name` with the exporter's old-names
option) name the container that was allocated the GPU; the UUID key is `UUID` (`uuid` with the old-names
option). Fields read: DCGM_FI_DEV_GPU_UTIL (%), DCGM_FI_DEV_FB_USED and DCGM_FI_DEV_FB_FREE (MiB); the total
is their sum. The label values are written by Go's text/template, unescaped: a value holding `"` or `,` is not
one this reader trusts, and its line is skipped.

Every line is redacted (core/redact.py) and sanitized (core/sanitize.py) before it is parsed; a line longer
than MAX_LINE is skipped unread, and a torn last line (a page read while it was written) reads as nothing."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from kubectl_tao.core.redact import redact_log_line
from kubectl_tao.core.sanitize import sanitize
from kubectl_tao.core.valueclass import Value, record

SOURCE_DCGM = "dcgm"
SOURCE_NVIDIA_SMI = "nvidia-smi"

NVIDIA_SMI_QUERY = [
    "nvidia-smi",
    "--query-gpu=index,uuid,utilization.gpu,memory.used,memory.total",
    "--format=csv,noheader,nounits",
]
DCGM_UTIL, DCGM_FB_USED, DCGM_FB_FREE = "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"
DCGM_FIELDS = (DCGM_UTIL, DCGM_FB_USED, DCGM_FB_FREE)

IDLE_PERCENT = 5.0  # a GPU busy less than this over the sample is idle
LOW_MEMORY_SHARE = 0.05  # a rank whose every GPU holds less than this share of its memory uses little memory
MAX_LINE = 4096  # no line either program prints for one GPU is longer
MAX_GPUS = 64  # GPUs kept per rank (no node has more)
MAX_REASON = 300  # a longer reason keeps its start and its end (where kubectl's wrapped errors say what failed)
_UNKNOWN_VALUES = ("[N/A]", "[Not Supported]", "[Unknown Error]", "[Insufficient Permissions]", "N/A")
_NUMBER = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,6})?")
_INDEX = re.compile(r"[0-9]{1,3}")
_UUID = re.compile(r"(?:GPU|MIG)-[0-9A-Za-z-]{1,80}")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]{0,63})="([^"\\,{}]{0,256})"')
_POD_KEYS = (("pod", "namespace", "container"), ("pod_name", "pod_namespace", "container_name"))


@record
class GpuUse(Value):
    """One GPU as read: `utilization` in % and the memory in MiB, None where the source could not say."""

    index: int | None
    uuid: str | None
    utilization: float | None
    memory_used_mib: int | None
    memory_total_mib: int | None

    @property
    def idle(self) -> bool | None:
        """Busy less than IDLE_PERCENT over the sample; None when the utilization is unknown."""
        return None if self.utilization is None else self.utilization < IDLE_PERCENT

    @property
    def low_memory(self) -> bool | None:
        if self.memory_used_mib is None or not self.memory_total_mib:
            return None
        return self.memory_used_mib < self.memory_total_mib * LOW_MEMORY_SHARE

    def to_dict(self) -> dict[str, Any]:
        return {**self.as_dict(), "idle": self.idle}


@record
class RankUse(Value):
    """A rank's pod, its node, its GPUs as read from SOURCE, or the reason it could not be read."""

    rank: int
    pod: str
    node: str | None
    gpus: tuple[GpuUse, ...] = ()
    source: str | None = None
    reason: str | None = None

    @property
    def idle(self) -> bool:
        """Every GPU the rank holds is idle (and at least one was read)."""
        return bool(self.gpus) and all(gpu.idle for gpu in self.gpus)

    @property
    def low_memory(self) -> bool:
        """The rank holds GPUs but uses little of their memory (every GPU under LOW_MEMORY_SHARE)."""
        return bool(self.gpus) and all(gpu.low_memory for gpu in self.gpus)

    def flags(self) -> list[str]:
        out = []
        if self.idle:
            out.append("idle")
        if self.low_memory:
            out.append("low-memory")
        return out

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "rank": self.rank,
            "pod": self.pod,
            "node": self.node,
            "gpus": [gpu.to_dict() for gpu in self.gpus],
            "source": self.source,
            "idle": self.idle,
            "low_memory": self.low_memory,
        }
        if self.reason is not None:
            data["reason"] = self.reason
        return data


def clean_lines(text: str | bytes) -> Iterable[str]:
    """The lines of TEXT a reader may parse: each redacted and sanitized; a line over MAX_LINE is dropped
    unread; a last line without its newline is torn (still being written) and dropped too, unless it is the
    only line (a one-line answer such as an error, printed whole)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] != "":
        lines = lines[:-1]  # torn
    for line in lines:
        if not line or len(line) > MAX_LINE:
            continue
        yield sanitize(redact_log_line(line.rstrip("\r")))


def shorten(text: str) -> str:
    """TEXT at most MAX_REASON characters: its start and its end around " ... "."""
    if len(text) <= MAX_REASON:
        return text
    head = MAX_REASON // 3
    return f"{text[:head]} ... {text[len(text) - (MAX_REASON - head - 5):]}"


def _number(value: str) -> float | None:
    value = value.strip()
    if value in _UNKNOWN_VALUES or not _NUMBER.fullmatch(value):
        return None
    return float(value)


def _mib(value: str) -> int | None:
    number = _number(value)
    return None if number is None else int(number)


def _percent(value: float | None) -> float | None:
    return None if value is None or value > 100 else value


def parse_nvidia_smi(text: str | bytes) -> tuple[list[GpuUse], str | None]:
    """The GPUs of nvidia-smi's CSV query (NVIDIA_SMI_QUERY), and None; or no GPU and the reason: the line
    nvidia-smi printed instead of its CSV, or a note that it printed nothing readable."""
    gpus: list[GpuUse] = []
    other: str | None = None
    for line in clean_lines(text):
        fields = [field.strip() for field in line.split(",")]
        if len(fields) == 5 and _INDEX.fullmatch(fields[0]) and len(gpus) < MAX_GPUS:
            index, uuid, util, used, total = fields
            gpus.append(
                GpuUse(
                    index=int(index),
                    uuid=uuid if _UUID.fullmatch(uuid) else None,
                    utilization=_percent(_number(util)),
                    memory_used_mib=_mib(used),
                    memory_total_mib=_mib(total),
                )
            )
        elif other is None and line.strip():
            other = line.strip()
    if gpus:
        return gpus, None
    if other is not None:
        return [], f"nvidia-smi: {shorten(other)}"
    return [], "nvidia-smi printed no GPU"


def _labels(inside: str) -> dict[str, str] | None:
    """The labels between `{` and `}`, or None when they are not plain `key="value"` pairs joined by commas."""
    labels: dict[str, str] = {}
    pos = 0
    while pos < len(inside):
        found = _LABEL.match(inside, pos)
        if found is None:
            return None
        labels[found.group(1)] = found.group(2)
        pos = found.end()
        if pos < len(inside):
            if inside[pos] != ",":
                return None
            pos += 1
            while pos < len(inside) and inside[pos] == " ":
                pos += 1
    return labels


def _pod_of(labels: dict[str, str]) -> tuple[str, str] | None:
    for pod_key, namespace_key, _container_key in _POD_KEYS:
        pod, namespace = labels.get(pod_key), labels.get(namespace_key)
        if pod and namespace:
            return namespace, pod
    return None


def parse_dcgm(text: str | bytes) -> dict[tuple[str, str], list[GpuUse]]:
    """The GPUs of the DCGM exporter's metrics page, by (namespace, pod) of the container each is allocated
    to; GPUs attributed to no pod are left out. A GPU is keyed by its UUID (else its `gpu` index); a field
    missing for it reads None."""
    fields: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for line in clean_lines(text):
        name, brace, rest = line.partition("{")
        if not brace or name not in DCGM_FIELDS:
            continue
        inside, close, value = rest.rpartition("}")
        if not close:
            continue
        labels = _labels(inside)
        if labels is None:
            continue
        owner = _pod_of(labels)
        number = _number(value.strip().split(" ")[0]) if value.strip() else None
        if owner is None:
            continue
        uuid = labels.get("UUID") or labels.get("uuid")
        index = labels.get("gpu")
        key = uuid or f"gpu{index}"
        gpus = fields.setdefault(owner, {})
        if key not in gpus and len(gpus) >= MAX_GPUS:
            continue
        gpu = gpus.setdefault(key, {"uuid": uuid if uuid and _UUID.fullmatch(uuid) else None, "index": index})
        gpu[name] = number
    out: dict[tuple[str, str], list[GpuUse]] = {}
    for owner, gpus in fields.items():
        read = []
        for gpu in gpus.values():
            used, free = gpu.get(DCGM_FB_USED), gpu.get(DCGM_FB_FREE)
            index = gpu["index"]
            read.append(
                GpuUse(
                    index=int(index) if index is not None and _INDEX.fullmatch(index) else None,
                    uuid=gpu["uuid"],
                    utilization=_percent(gpu.get(DCGM_UTIL)),
                    memory_used_mib=None if used is None else int(used),
                    memory_total_mib=None if used is None or free is None else int(used + free),
                )
            )
        out[owner] = sorted(read, key=lambda g: (g.index is None, g.index or 0, g.uuid or ""))
    return out


def memory_cell(gpu: GpuUse) -> str:
    used = "?" if gpu.memory_used_mib is None else str(gpu.memory_used_mib)
    total = "?" if gpu.memory_total_mib is None else str(gpu.memory_total_mib)
    return f"{used}/{total} MiB"


def table_rows(ranks: Iterable[RankUse]) -> list[list[str]]:
    """One row per GPU (RANK POD NODE GPU UUID UTIL MEMORY FLAGS SOURCE); a rank not read gets one row with
    its reason in FLAGS."""
    rows: list[list[str]] = []
    for rank in ranks:
        node = rank.node or "<none>"
        if not rank.gpus:
            rows.append([str(rank.rank), rank.pod, node, "-", "-", "-", "-", rank.reason or "no GPU read", "-"])
            continue
        flags = rank.flags()
        for gpu in rank.gpus:
            gpu_flags = ["idle"] if gpu.idle else []
            gpu_flags += [flag for flag in flags if flag != "idle"]
            rows.append([
                str(rank.rank),
                rank.pod,
                node,
                "?" if gpu.index is None else str(gpu.index),
                gpu.uuid or "?",
                "?" if gpu.utilization is None else f"{gpu.utilization:g}%",
                memory_cell(gpu),
                ",".join(gpu_flags) or "-",
                rank.source or "-",
            ])
    return rows


HEADERS = ("RANK", "POD", "NODE", "GPU", "UUID", "UTIL", "MEMORY", "FLAGS", "SOURCE")


def summary(ranks: Iterable[RankUse]) -> str | None:
    """One line naming the idle and low-memory ranks, or None when there is none."""
    ranks = list(ranks)
    idle = [str(r.rank) for r in ranks if r.idle]
    low = [str(r.rank) for r in ranks if r.low_memory]
    parts = []
    if idle:
        parts.append(f"idle GPUs (below {IDLE_PERCENT:g}% busy) on rank {', '.join(idle)}")
    if low:
        parts.append(f"little GPU memory used (below {LOW_MEMORY_SHARE:.0%}) on rank {', '.join(low)}")
    return "; ".join(parts) or None
