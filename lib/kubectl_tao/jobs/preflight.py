"""`preflight`: every check the reference names, one line each (OK / WARN / MISSING with the fix).

The cluster checks run at once (one round trip): server version, nodes and pods (GPU allocatable and fit),
`auth can-i create jobs` and `... secrets` in the namespace, the PVC when one is named, and for --nodes > 1
without --queue the discovery of scheduling.k8s.io/v1beta1 (gang.py; its dry run follows where PodGroups are
served).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from typing import Any

from kubectl_tao.core.errors import TaoError
from kubectl_tao.core.templates import data_dir
from kubectl_tao.k8s.kubectl import Completed, Kubectl, run_host_check

OK, WARN, MISSING = "OK", "WARN", "MISSING"


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    message: str
    fix: str = ""

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


REACH_FIX = (
    "configure kubectl: EKS `aws eks update-kubeconfig --name <cluster> --region <region>`; GKE `gcloud container "
    "clusters get-credentials <cluster> --region <region>`; AKS `az aks get-credentials --resource-group <rg> "
    "--name <cluster>`; or set $KUBECONFIG / --kubeconfig; local: `make cluster`"
)


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
) -> list[Check]:
    from kubectl_tao.core import gpufit, gpuinventory, serverversion
    from kubectl_tao.k8s import capacity, gang

    calls: dict[str, tuple[list[str], dict[str, Any]]] = {
        "version": (["version", "-o", "json"], {"namespaced": False}),
        **capacity.calls(paged=True),
        "dra": (gpuinventory.DRA_READ, {"namespaced": False}),
        "jobs": (["auth", "can-i", "create", "jobs.batch", "-n", namespace], {"namespaced": False, "check": False}),
    }
    if need_secrets:
        calls["secrets"] = (
            ["auth", "can-i", "create", "secrets", "-n", namespace],
            {"namespaced": False, "check": False},
        )
    if pvc:
        calls["pvc"] = (["get", "persistentvolumeclaim", pvc, "-n", namespace, "-o", "json"], {"namespaced": False})
    if nodes > 1 and not queue:
        calls["gang"] = gang.DISCOVERY_CALL
    results = kc.run_many(calls)
    version = results["version"]
    if isinstance(version, TaoError):
        return [Check("cluster", MISSING, f"no reachable cluster: {version.message}", REACH_FIX)]
    assert isinstance(version, Completed)
    checks: list[Check] = []
    try:
        server = serverversion.parse_server_version(json.loads(version.stdout))
        checks.append(Check("cluster", OK, f"reachable, Kubernetes {server.text}"))
    except (TaoError, ValueError) as exc:
        return [Check("cluster", MISSING, f"cannot read the server version: {exc}", REACH_FIX)]
    try:
        seen = capacity.view(results, kc)
        nodes_json, pods_json, usage_known, usage_note = seen.nodes, seen.pods, seen.usage_known, seen.warning
    except TaoError as exc:
        nodes_json, pods_json, usage_known, usage_note = None, {}, True, f"cannot list nodes: {exc.message}"
    if nodes_json is None:
        checks.append(Check("gpu-operator", WARN, usage_note or "cannot list nodes", "ask for `get nodes`"))
    else:
        dra, dra_note = gpuinventory.read_dra(results["dra"])
        node_list = gpuinventory.fit_nodes(nodes_json, pods_json, dra)
        total = sum(n.allocatable for n in node_list)
        hint = gpuinventory.no_gpu_hint(dra)
        if total == 0 and hint:
            checks.append(Check("gpu-operator", WARN, "no node offers nvidia.com/gpu to pods", hint))
        elif total == 0:
            checks.append(
                Check(
                    "gpu-operator",
                    WARN,
                    "no nvidia.com/gpu allocatable on this cluster" + (f" ({dra_note})" if dra_note else ""),
                    "install the NVIDIA GPU Operator or device plugin: "
                    "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html",
                )
            )
        else:
            gpu_nodes = sum(1 for n in node_list if n.allocatable > 0)
            via = ""
            if dra and dra.serving_class and dra.total:
                via = f" (DRA devices via DeviceClass {dra.serving_class} included)"
            checks.append(Check("gpu-operator", OK, f"{total} nvidia.com/gpu allocatable on {gpu_nodes} node(s){via}"))
        if gpus > 0 or nodes > 1:
            from kubectl_tao.core.contract import GPU_TOLERATION

            verdict = gpufit.fit(
                node_list,
                gpus,
                nodes,
                node_selector=None,
                tolerations=[GPU_TOLERATION] if gpus > 0 else None,
                gpu_product=gpu_product,
                quota=None,
                no_gpu_hint=hint,
            )
            status = {"fits": OK, "queue": WARN, "never": MISSING}[verdict.verdict]
            if not usage_known and status == OK:
                checks.append(Check("capacity", WARN, f"{verdict.message}; {usage_note}", "ask for `list pods` in all "
                                    "namespaces so usage can be counted"))
            else:
                checks.append(
                    Check(
                        "capacity",
                        status,
                        verdict.message,
                        "" if status == OK else "ask for fewer GPUs or nodes (`kubectl tao fit --gpus G --nodes N`)",
                    )
                )
    checks.append(_can_i(results["jobs"], "create jobs", namespace))
    if "secrets" in results:
        checks.append(_can_i(results["secrets"], "create secrets", namespace))
    if pvc:
        checks.append(_pvc(results["pvc"], pvc, namespace))
    if nodes > 1:
        ok = (server.major, server.minor) >= (1, 28)
        checks.append(
            Check(
                "version",
                OK if ok else MISSING,
                f"Kubernetes {server.text} {'>=' if ok else '<'} 1.28 (Indexed Job pod hostnames for MASTER_ADDR)",
                "" if ok else "upgrade the cluster to 1.28+ or run single-node",
            )
        )
        support = gang.detect(kc, namespace, results["gang"], nodes) if "gang" in results else None
        checks.append(gang_check(gang.choose(nodes, queue, support)))
    return checks


def gang_check(mechanism: Any) -> Check:
    """The gang mechanism of a multi-node job; none is a warning (a partial start can hold GPUs)."""
    from kubectl_tao.k8s.gang import ENABLE_HINT, NONE

    if mechanism.kind == NONE:
        return Check("gang", WARN, f"none: {mechanism.message}", f"submit with --queue (Kueue), or {ENABLE_HINT}")
    return Check("gang", OK, f"{mechanism.kind}: {mechanism.message}")


def _can_i(result: Completed | TaoError, verb: str, namespace: str) -> Check:
    name = "rbac-" + verb.split()[-1]
    if isinstance(result, TaoError):
        return Check(name, MISSING, f"cannot ask whether you may {verb}: {result.message}", "check your credentials")
    answer = result.stdout.strip().lower()
    if answer == "yes":
        return Check(name, OK, f"you may {verb} in namespace {namespace}")
    return Check(
        name,
        MISSING,
        f"you may not {verb} in namespace {namespace} (`kubectl auth can-i {verb} -n {namespace}` says "
        f"{answer or 'no'})",
        f"ask a cluster admin for a Role granting {verb} in {namespace}, or pick another namespace with -n",
    )


def _pvc(result: Completed | TaoError, pvc: str, namespace: str) -> Check:
    if isinstance(result, TaoError):
        return Check(
            "pvc",
            MISSING,
            f"PersistentVolumeClaim {pvc} not found in {namespace}",
            "create it (tier A mounts a Bound claim holding the data) or use --storage-tier C",
        )
    assert isinstance(result, Completed)
    phase = (json.loads(result.stdout).get("status") or {}).get("phase", "Unknown")
    if phase == "Bound":
        return Check("pvc", OK, f"PersistentVolumeClaim {pvc} is Bound")
    return Check(
        "pvc",
        MISSING,
        f"PersistentVolumeClaim {pvc} is {phase}, not Bound",
        "check its StorageClass or PersistentVolume; the pod waits until the claim binds",
    )
