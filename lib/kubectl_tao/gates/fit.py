"""`kubectl tao fit`: the capacity gate's verdict (gates/checks.py), the same one submit acts on.

Round trip 1 (three processes at once, four for --nodes > 1 without --queue): the nodes and running pods
(capacity.calls), `get localqueues.kueue.x-k8s.io -n NS -o json` and the discovery of scheduling.k8s.io/v1beta1
(gang.py). Then, only when a LocalQueue is used: `get clusterqueues.kueue.x-k8s.io CQ -o json`; only when the
device plugins' GPUs do not fit, the DRA devices and claims (gpuinventory.DRA_READ, started as soon as the nodes
and pods are read); and only where PodGroups are served, the gang dry run.
A cluster without Kueue answers the LocalQueue call with "the server doesn't have a resource type"; that is not
an error, it means no quota to check (nor is it when the DRA read gets that answer: no resource.k8s.io/v1, no
DRA GPUs).
"""

from __future__ import annotations

from typing import Any

from kubectl_tao.core.valueclass import Factory, Value, record
from kubectl_tao.k8s.kubectl import Kubectl


@record
class FitReport(Value):
    verdict: Any  # gpufit.FitVerdict
    namespace: str
    local_queue: str | None = None
    notes: list[str] = Factory(list)
    gang: Any = None  # gang.Mechanism
    restarts: Any = None  # restarts/servercheck.Support (multi-node requests), None when not checked

    def to_dict(self) -> dict[str, Any]:
        data = self.verdict.to_dict()
        data["namespace"] = self.namespace
        data["localQueue"] = self.local_queue
        data["notes"] = list(self.notes)
        data["gang"] = self.gang.to_dict() if self.gang is not None else None
        if self.restarts is not None:
            data["restarts"] = {"available": self.restarts.available, "detail": self.restarts.detail}
        return data


def check(kc: Kubectl, namespace: str, job: Any) -> FitReport:
    """The fit verdict of JOB (jobs/plan.Job; `fit` tells its shape, plan.shape), with the LocalQueue whose quota
    counted (its queue, else the namespace's default or only one), notes (the queue's; why DRA GPUs were not
    counted) and the gang mechanism."""
    from kubectl_tao.gates import checks
    from kubectl_tao.gates.gaterequest import FIT, asked

    request = asked(FIT, namespace, job)
    seen = checks.for_fit(kc, request)
    queued, fitted = seen["queue"], seen["capacity"]
    notes = [*queued.notes, *([fitted.dra_note] if fitted.dra_note else [])]
    restarts = seen.get("restarts")
    return FitReport(
        fitted.verdict, namespace, queued.local_queue, notes, seen["gang"].mechanism,
        getattr(restarts, "support", None),
    )
