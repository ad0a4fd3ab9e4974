"""`preflight`: every check the reference names, one line each (OK / WARN / MISSING with the fix, SKIPPED for a
check that did not apply).

This machine: kubectl on PATH and, only where this machine is itself a GPU node (it has NVIDIA device nodes),
the GPU host runtime (the setup script's check). The cluster: the gate list submit goes through
(gates/checks.py), for a job of the flags' shape, so preflight prints the same verdicts submit acts on (a refusal
is MISSING), plus what preflight alone reports: whether there is a cluster at all, whether it offers GPUs to
pods, the GPU nodes' driver, CUDA and container runtime as the cluster shows them, the optional permissions,
and which gang mechanism a multi-node job would get. Their reads run at once (one round trip).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from kubectl_tao.core.templates import data_dir
from kubectl_tao.core.valueclass import Value, record
from kubectl_tao.k8s.kubectl import Kubectl, run_host_check

if TYPE_CHECKING:
    from kubectl_tao.gates.verdicts import Verdict

OK, SKIPPED, WARN, MISSING = "OK", "SKIPPED", "WARN", "MISSING"
SKIP_SETTING = "TAO_K8S_SKIP_NODE_RUNTIME_CHECK"
# The control device every NVIDIA driver creates on a GPU host (with /dev/nvidia0, /dev/nvidia1, ...).
NVIDIA_CONTROL_DEVICE = Path("/dev/nvidiactl")


@record(frozen=True)
class Check(Value):
    name: str
    status: str  # OK | SKIPPED | WARN | MISSING
    message: str
    fix: str = ""
    exit_code: int = 1  # MISSING: the exit code it calls for (3: no reachable cluster)

    @classmethod
    def of(cls, verdict: Verdict) -> Check:
        """A gate's verdict as a line: a refusal is MISSING."""
        from kubectl_tao.gates.verdicts import REFUSE

        status = MISSING if verdict.status == REFUSE else verdict.status
        code = verdict.error.exit_code if verdict.error is not None else 1
        return cls(verdict.gate, status, verdict.message, verdict.fix, code)

    def line(self) -> str:
        text = f"{self.status}: {self.name}: {self.message}"
        return text + (f" -- {self.fix}" if self.fix and self.status in (WARN, MISSING) else "")

    def to_dict(self) -> dict[str, str]:
        return {"check": self.name, "status": self.status, "message": self.message, "fix": self.fix}


def exit_code(checks: list[Check]) -> int:
    """0 when nothing is MISSING; 3 when the cluster could not be reached (or refused the credentials), 2 when
    kubectl was given bad input (a --context it does not know); else 1 (a job that can never fit included)."""
    codes = {c.exit_code for c in checks if c.status == MISSING}
    if not codes:
        return 0
    from kubectl_tao.core.errors import EXIT_UNREACHABLE, EXIT_USAGE

    return next((code for code in (EXIT_UNREACHABLE, EXIT_USAGE) if code in codes), 1)


def skipping_node_runtime() -> bool:
    return os.environ.get(SKIP_SETTING, "0") == "1"


def is_gpu_node(control: Path = NVIDIA_CONTROL_DEVICE) -> bool:
    """Whether this machine has an NVIDIA driver's device nodes: it is a GPU node (or a GPU workstation)."""
    return control.exists()


def host_runtime_check() -> Check:
    """The setup script's host check, run only on a GPU node: a client that is not one (a laptop) runs no GPU
    containers, and the GPU nodes are judged from the cluster instead (the node-runtime gate)."""
    if skipping_node_runtime():
        return Check("host-runtime", SKIPPED, f"{SKIP_SETTING}=1: the GPU nodes' driver, CUDA and container toolkit "
                     "are owned by the node image or the GPU Operator, so neither this machine nor the nodes are "
                     "checked")
    if not is_gpu_node():
        return Check("host-runtime", SKIPPED, f"this machine is not a GPU node (no {NVIDIA_CONTROL_DEVICE}): the "
                     "GPU nodes are judged from the cluster (node-runtime)")
    script = data_dir("scripts") / "setup-nvidia-gpu-host.sh"
    code, output = run_host_check(str(script), ["--backend", "kubernetes", "--check-only"])
    if code == 0:
        return Check("host-runtime", OK, "GPU driver, CUDA and NVIDIA Container Toolkit meet the minimums")
    detail = next((ln for ln in output.splitlines() if ln.startswith("MISSING")), output.strip()[:200])
    return Check(
        "host-runtime",
        MISSING,
        f"this GPU node's host runtime is not ready ({detail})",
        f"run `{script} --backend kubernetes --install --yes` on it (after approval); where the node image or "
        f"the GPU Operator owns the driver, set {SKIP_SETTING}=1",
    )


def minimums() -> tuple[str, str]:
    """The driver and CUDA minimums: TAO_MIN_DRIVER / TAO_MIN_CUDA, as the setup script reads them (exit 2 for a
    value that is not a version)."""
    from kubectl_tao.core.errors import UsageError
    from kubectl_tao.gates import noderuntime

    found = []
    for name, default in (("TAO_MIN_DRIVER", noderuntime.MIN_DRIVER), ("TAO_MIN_CUDA", noderuntime.MIN_CUDA)):
        value = os.environ.get(name, "").strip() or default
        if not noderuntime.is_version(value):
            raise UsageError(f"{name}={value!r} is not a version; set a dotted number such as {default}, or unset it")
        found.append(value)
    return found[0], found[1]


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
    kubeconfig: str = "",
    context: str = "",
) -> list[Check]:
    """The gates' verdicts for a job of GPUS x NODES (the GPU taint tolerated, as submit does) in NAMESPACE,
    with the PVC and, with NEED_SECRETS, a credential Secret; SERVER: the API server's URL (its cached NCCL
    probe result); KUBECONFIG and CONTEXT: where kubectl looked (named if the cluster cannot be reached)."""
    from kubectl_tao.gates import checks
    from kubectl_tao.gates.gaterequest import PREFLIGHT, asked
    from kubectl_tao.jobs.plan import shape

    min_driver, min_cuda = minimums()
    job = shape(gpus, nodes, gpu_product=gpu_product, queue=queue, pvc=pvc)
    request = asked(
        PREFLIGHT,
        namespace,
        job,
        credentials=need_secrets,
        server=server,
        node_runtime=not skipping_node_runtime(),
        min_driver=min_driver,
        min_cuda=min_cuda,
        optional_permissions=True,
        kubeconfig=kubeconfig,
        context=context,
    )
    return [Check.of(verdict) for verdict in checks.for_preflight(kc, request)]
