"""What the gates are asked (gates/checks.py): a job (jobs/plan.Job), and what only the verb asking knows. Pure
data, the one thing the gates need before their reads start; their judges (gates/verdicts.py) are loaded once the
reads are on their way. `asked` is the one place a GateRequest is made."""

from __future__ import annotations

from typing import Any

from kubectl_tao.core.valueclass import Factory, Value, record

SUBMIT, PREFLIGHT, FIT = "submit", "preflight", "fit"
NO_KUBECONFIG = "(none exists)"  # how k8s/kubeconfig.searched marks a kubeconfig path with no file behind it


@record
class GateRequest(Value):
    """What the gates are asked about: the job's fields by the Job's own names (`asked`), then the verb's."""

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
    patches_job: bool = False  # `status` patches the Job (--keep-until-captured)
    gang_mode: str = "auto"  # --gang
    server: str = ""  # the API server's URL: its cached NCCL probe result (multi-node)
    skip_probe_warning: bool = False  # the NCCL probe itself: no warning about the last probe
    topology: Any = None  # topology.Topology of --topology (None: anywhere)
    max_restarts: int = 0  # --max-restarts: the server must keep container restart rules
    objects: list[dict[str, Any]] | None = None  # the job's objects, dry-run by the server with the reviews
    node_runtime: bool = False  # preflight: judge the GPU nodes' driver, CUDA and container runtime
    min_driver: str = "580"  # their minimums (TAO_MIN_DRIVER, TAO_MIN_CUDA)
    min_cuda: str = "13.0"
    optional_permissions: bool = False  # preflight: also ask for exec, port-forward and service proxy (WARN)
    kubeconfig: str = ""  # where kubectl looks for its kubeconfig, and the context: named when unreachable
    context: str = ""


# What the verb knows and the job does not: the rest of a GateRequest's fields are the Job's, by the same names.
VERB_FIELDS = frozenset(
    {"verb", "namespace", "server", "objects", "node_runtime", "min_driver", "min_cuda", "optional_permissions",
     "kubeconfig", "context"}
)


def asked(verb: str, namespace: str, job: Any, **told: Any) -> GateRequest:
    """What VERB asks the gates about JOB (jobs/plan.Job: built by plan.build, or plan.shape for preflight and
    fit) in NAMESPACE: every field the gates read of a job, taken from it by its own name (whether credentials
    come with it: whether the Job has any), then TOLD, what only the verb knows (the server, the dry-run
    objects, preflight's node checks; preflight's `credentials`, which it is told as a yes or no)."""
    taken = {name: getattr(job, name) for name in GateRequest._fields if name not in VERB_FIELDS}
    taken["credentials"] = bool(taken["credentials"])
    return GateRequest(verb, namespace, **{**taken, **told})
