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
Each check prints OK, WARN or MISSING with the fix, or SKIPPED with why it did not apply. The GPU nodes'
driver and CUDA are judged from the cluster (GPU Feature Discovery's labels; minimums 580 and 13.0, or
TAO_MIN_DRIVER / TAO_MIN_CUDA), their container runtime from the nodes' status; this machine's own GPU runtime
is checked only when it is a GPU node (it has /dev/nvidiactl). With --nodes > 1 the gang check says which
mechanism keeps the ranks from starting one by one: native, kueue (--queue) or none (WARN). Exit 0 when nothing
is MISSING, 3 when the cluster cannot be reached, 2 for bad input, else 1. Set TAO_K8S_SKIP_NODE_RUNTIME_CHECK=1
where the node image or the GPU Operator owns the driver (EKS/GKE/AKS GPU node images)."""


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
        from kubectl_tao.jobs.preflight import (
            MISSING,
            cluster_checks,
            exit_code,
            host_runtime_check,
            kubectl_check,
            minimums,
        )
        fmt = check_format(output, DATA_FORMATS)
        minimums()  # a minimum that is not a version stops here, before anything runs
        sess = session()
        target = sess.target()  # a --context the kubeconfig lacks is bad input (exit 2)
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
                server=target.server,
                kubeconfig=_kubeconfig(sess, target),
                context=target.context,
            )
        if not emit_data(fmt, {"checks": [c.to_dict() for c in checks]}):
            emit("".join(c.line() + "\n" for c in checks))
        return exit_code(checks)


def _kubeconfig(sess: Any, target: Any) -> str:
    """Where kubectl took its configuration from, in words (named when the cluster cannot be reached)."""
    from kubectl_tao.k8s.kubeconfig import searched

    if target.source == "in-cluster":
        return "the in-cluster service account"
    return searched(sess.options.kubeconfig)
