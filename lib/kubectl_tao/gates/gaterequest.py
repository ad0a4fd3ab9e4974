"""What the gates are asked (gates/checks.py): a job's shape, and the verb asking. Pure data, the one thing the
gates need before their reads start; their judges (gates/verdicts.py) are loaded once the reads are on their way."""

from __future__ import annotations

from typing import Any

from kubectl_tao.core.valueclass import Factory, Value, record

SUBMIT, PREFLIGHT, FIT = "submit", "preflight", "fit"
NO_KUBECONFIG = "(none exists)"  # how k8s/kubeconfig.searched marks a kubeconfig path with no file behind it


@record
class GateRequest(Value):
    """What the gates are asked about: a job (submit: from its Plan), or what preflight and fit were told."""

    verb: str  # SUBMIT | PREFLIGHT | FIT
    namespace: str
    gpus: int = 0  # per node (per rank)
    nodes: int = 1
    node_selector: dict[str, str] = Factory(dict)
    tolerations: list[dict[str, Any]] = Factory(list)
    gpu_product: str | None = None
    queue: str | None = None  # Kueue LocalQueue (--queue)
    require_fit_now: bool = False
    min_version: tuple[int, int] | None = None  # the server version the job needs, and for what
    min_version_feature: str = ""
    pvc: str | None = None
    secret_refs: dict[str, list[str]] = Factory(dict)  # existing Secret name -> keys required
    image_pull_secret: str | None = None
    image: str = ""
    credentials: bool = False  # a credential Secret is created with the job
    patch_job: bool = False  # `status` patches the Job (--keep-until-captured)
    gang_mode: str = "auto"  # --gang
    server: str = ""  # the API server's URL: its cached NCCL probe result (multi-node)
    probe_warning: bool = True  # False for the NCCL probe itself
    topology: Any = None  # topology.Topology of --topology (None: anywhere)
    max_restarts: int = 0  # --max-restarts: the server must keep container restart rules
    objects: list[dict[str, Any]] | None = None  # the job's objects, dry-run by the server with the reviews
    node_runtime: bool = False  # preflight: judge the GPU nodes' driver, CUDA and container runtime
    min_driver: str = "580"  # their minimums (TAO_MIN_DRIVER, TAO_MIN_CUDA)
    min_cuda: str = "13.0"
    optional_permissions: bool = False  # preflight: also ask for exec, port-forward and service proxy (WARN)
    kubeconfig: str = ""  # where kubectl looks for its kubeconfig, and the context: named when unreachable
    context: str = ""
