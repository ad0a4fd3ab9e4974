"""`preflight`: every check the reference names, one line each (OK / WARN / MISSING with the fix).

This machine: the GPU host runtime and kubectl on PATH. The cluster: the gate list submit goes through
(jobs/gates.py), for a job of the flags' shape, so preflight prints the same verdicts submit acts on (a refusal
is MISSING), plus what preflight alone reports: whether there is a cluster at all, whether it offers GPUs to
pods, and which gang mechanism a multi-node job would get. Their reads run at once (one round trip).
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

from kubectl_tao.core.templates import data_dir
from kubectl_tao.core.valueclass import Value, record
from kubectl_tao.k8s.kubectl import Kubectl, run_host_check

if TYPE_CHECKING:
    from kubectl_tao.core.verdicts import Verdict

OK, WARN, MISSING = "OK", "WARN", "MISSING"


@record(frozen=True)
class Check(Value):
    name: str
    status: str  # OK | WARN | MISSING
    message: str
    fix: str = ""

    @classmethod
    def of(cls, verdict: Verdict) -> Check:
        """A gate's verdict as a line: a refusal is MISSING."""
        from kubectl_tao.core.verdicts import REFUSE

        status = MISSING if verdict.status == REFUSE else verdict.status
        return cls(verdict.gate, status, verdict.message, verdict.fix)

    def line(self) -> str:
        text = f"{self.status}: {self.name}: {self.message}"
        return text + (f" -- {self.fix}" if self.fix and self.status != OK else "")

    def to_dict(self) -> dict[str, str]:
        return {"check": self.name, "status": self.status, "message": self.message, "fix": self.fix}


def host_runtime_check() -> Check:
    if os.environ.get("TAO_K8S_SKIP_NODE_RUNTIME_CHECK", "0") == "1":
        return Check("node-runtime", OK, "skipped (TAO_K8S_SKIP_NODE_RUNTIME_CHECK=1: managed GPU nodes)")
    script = data_dir("scripts") / "setup-nvidia-gpu-host.sh"
    code, output = run_host_check(str(script), ["--backend", "kubernetes", "--check-only"])
    if code == 0:
        return Check("node-runtime", OK, "GPU driver, CUDA and NVIDIA Container Toolkit meet the minimums")
    detail = next((ln for ln in output.splitlines() if ln.startswith("MISSING")), output.strip()[:200])
    return Check(
        "node-runtime",
        MISSING,
        f"the GPU node host runtime is not ready ({detail})",
        f"on self-managed GPU nodes run `{script} --backend kubernetes --install --yes` (after approval); "
        "on managed clusters verify the node image / GPU Operator installs driver 580 and toolkit 1.19.0, then set "
        "TAO_K8S_SKIP_NODE_RUNTIME_CHECK=1",
    )


def kubectl_check(binary: str) -> Check:
    path = shutil.which(binary)
    if path:
        return Check("kubectl", OK, f"found at {path}")
    return Check("kubectl", MISSING, "kubectl not found on PATH", "install kubectl (a single static binary)")


def cluster_checks(
    kc: Kubectl,
    namespace: str,
    *,
    gpus: int,
    nodes: int,
    pvc: str | None,
    need_secrets: bool,
    gpu_product: str | None = None,
    queue: str | None = None,
    server: str = "",
) -> list[Check]:
    """The gates' verdicts for a job of GPUS x NODES (the GPU taint tolerated, as submit does) in NAMESPACE,
    with the PVC and, with NEED_SECRETS, a credential Secret; SERVER: the API server's URL (its cached NCCL
    probe result)."""
    from kubectl_tao.core.contract import GPU_TOLERATION
    from kubectl_tao.core.gaterequest import PREFLIGHT, GateRequest
    from kubectl_tao.core.serverversion import MULTI_NODE_MIN_VERSION
    from kubectl_tao.jobs import gates

    request = GateRequest(
        PREFLIGHT,
        namespace,
        gpus=gpus,
        nodes=nodes,
        tolerations=[dict(GPU_TOLERATION)] if gpus > 0 else [],
        gpu_product=gpu_product,
        queue=queue,
        min_version=MULTI_NODE_MIN_VERSION if nodes > 1 else None,
        min_version_feature="multi-node jobs" if nodes > 1 else "",
        pvc=pvc,
        credentials=need_secrets,
        server=server,
    )
    return [Check.of(verdict) for verdict in gates.for_preflight(kc, request)]
