"""What each gate saw: the records a gate's look (gates/checks.py) hands its judge (gates/verdicts.py). Loaded
once the gates' reads are on their way, not before."""

from __future__ import annotations

from typing import Any

from kubectl_tao.core.valueclass import Value, record


@record(frozen=True)
class PermissionsSeen(Value):
    """The verbs the job's objects need (`kubectl auth can-i` form), those the reviews denied, and why the
    reviews went unanswered ('' when they were answered); for preflight also the optional ones asked about
    (exec, port-forward, service proxy) and those denied."""

    needed: tuple[str, ...]
    missing: tuple[str, ...] = ()
    unchecked: str = ""
    optional: tuple[str, ...] = ()
    optional_missing: tuple[str, ...] = ()


@record(frozen=True)
class ClusterSeen(Value):
    """The server version (serverversion.ServerVersion), or the error that kept kubectl from reading it."""

    version: Any = None
    error: Any = None  # a TaoError
    unreadable: str = ""  # a version answer that could not be read


@record(frozen=True)
class NodeRuntimeSeen(Value):
    """The GPU nodes (noderuntime.GpuNode; None when the nodes could not be read) and the RuntimeClass names
    (None when they could not be read, with why)."""

    nodes: tuple[Any, ...] | None
    classes: tuple[str, ...] | None = None
    classes_note: str = ""


@record(frozen=True)
class GpusSeen(Value):
    """The capacity read (gates/capacity.py: Capacity) and, for preflight, the DRA devices, why some were not
    counted and the nodes with the GPUs their pods hold (gpufit.node_gpus; None when no nodes were read)."""

    capacity: Any
    dra: Any = None
    dra_note: str = ""
    counted: Any = None


@record(frozen=True)
class QueueSeen(Value):
    quota: Any  # quota.QueueQuota, or None: no quota to check
    local_queue: str | None = None
    notes: tuple[str, ...] = ()
    capacity_known: bool = False  # the nodes were read, so the capacity gate judges the quota


@record(frozen=True)
class RestartsSeen(Value):
    """Whether the server keeps the container restart rules of --max-restarts (restarts/servercheck.py: Support),
    and the server version ('' when it could not be read)."""

    support: Any
    version: str = ""


@record(frozen=True)
class FitSeen(Value):
    """The fit verdict (gpufit.FitVerdict; None while submit settles a "queue" verdict after the create, see
    gates/checks.py: LaterFit), why DRA GPUs were not counted, and whether the pods could be listed."""

    verdict: Any
    dra_note: str = ""
    usage_known: bool = True

    @property
    def noted(self) -> Any:
        """The verdict with why DRA GPUs were not counted, where they could have changed it."""
        if not self.dra_note:
            return self.verdict
        return self.verdict.replaced(message=f"{self.verdict.message} ({self.dra_note})")


@record(frozen=True)
class GangSeen(Value):
    mechanism: Any  # k8s/gang.py: Mechanism
    enable_hint: str = ""  # how an admin turns native gang scheduling on
