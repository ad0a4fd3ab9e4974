"""`kubectl tao preflight`."""

from __future__ import annotations

from typing import Any

import typer

from kubectl_tao.commands.common import DATA_FORMATS, VerbCommand, output_option, session

EPILOG = """\b
Examples:
  kubectl tao preflight
  kubectl tao preflight --gpus 8 --nodes 2
  TAO_K8S_SKIP_NODE_RUNTIME_CHECK=1 kubectl tao preflight --pvc tao-data

\b
Each check prints OK, WARN or MISSING with the fix. With --nodes > 1 the gang check says which mechanism
keeps the ranks from starting one by one: native, kueue (--queue) or none (WARN). Exit 0 only when nothing is
MISSING. Set
TAO_K8S_SKIP_NODE_RUNTIME_CHECK=1 on managed GPU nodes (EKS/GKE/AKS node images, GPU Operator policy)."""


def register(app: typer.Typer) -> None:
    @app.command("preflight", epilog=EPILOG, cls=VerbCommand)
    def preflight(
        gpus: int = typer.Option(0, "--gpus", min=0, help="GPUs per node the job will ask for."),
        nodes: int = typer.Option(1, "--nodes", min=1, help="Nodes (ranks) the job will use."),
        pvc: str = typer.Option(None, "--pvc", help="PersistentVolumeClaim the job mounts (tier A)."),
        credentials: bool = typer.Option(False, "--credentials", help="Also check you may create Secrets."),
        gpu_product: str = typer.Option(None, "--gpu-product", help="Required nvidia.com/gpu.product label."),
        queue: str = typer.Option(None, "--queue", help="Kueue LocalQueue the job will use (for the gang check)."),
        output: str = output_option(DATA_FORMATS, "OK/WARN/MISSING lines"),
    ) -> int:
        """Check that this machine and cluster can run TAO jobs."""
        from kubectl_tao.cli.output import check_format, emit, emit_data
        from kubectl_tao.jobs.preflight import MISSING, cluster_checks, host_runtime_check, kubectl_check

        fmt = check_format(output, DATA_FORMATS)
        sess = session()
        kc = sess.kubectl()
        checks = [host_runtime_check(), kubectl_check(kc.binary)]
        if checks[-1].status != MISSING:
            checks += cluster_checks(
                kc,
                sess.namespace(),
                gpus=gpus,
                nodes=nodes,
                pvc=pvc,
                need_secrets=credentials,
                gpu_product=gpu_product,
                queue=queue,
                server=_server(sess),
            )
        if not emit_data(fmt, {"checks": [c.to_dict() for c in checks]}):
            emit("".join(c.line() + "\n" for c in checks))
        return 1 if any(c.status == MISSING for c in checks) else 0


def _server(sess: Any) -> str:
    """The API server's URL from the kubeconfig ('' when it names none: the cluster check says what is wrong)."""
    from kubectl_tao.core.errors import TaoError

    try:
        return sess.target().server
    except TaoError:
        return ""
