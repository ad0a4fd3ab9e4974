"""`kubectl tao probe nccl`: a 2-node all_reduce that says whether NCCL works between this cluster's nodes."""

from __future__ import annotations

import typer

from kubectl_tao.commands.common import DATA_FORMATS, VerbCommand, lazy_record_store, output_option, session, verb_group
from kubectl_tao.commands.jobflags import typer_option

EPILOG = """\b
Examples:
  # Two nodes x 1 GPU, NGC's PyTorch image; a result younger than 24h is shown instead of probing again
  kubectl tao probe nccl
  # Every GPU of two nodes, a longer deadline, and probe again even if a result is cached
  kubectl tao probe nccl --nodes 2 --gpus 8 --timeout 5m --force
  # After a hang: pin the interface, turn on NCCL's own log, and re-probe
  kubectl tao probe nccl --force --nccl-socket-ifname eth0 --nccl-env NCCL_DEBUG=INFO
  # For scripts
  kubectl tao probe nccl -o json
  # On chosen nodes only (submit's own flags): here the local cluster's real nodes, with its torch image
  kubectl tao probe nccl --image kubectl-tao.local/torch:TAG --node-selector kubectl-tao.io/real-node=true \\
      --toleration kubectl-tao.io/real-node=true:NoSchedule

\b
The probe is a multi-node job like any other (Indexed Job + headless Service, one rank per node, every
submit gate, a job record with network_arch nccl and action probe, label kubectl-tao.io/probe=nccl). Each
rank runs torchrun with templates/k8s/nccl-probe.py passed as `python3 -c` text: one all_reduce checked
for the right sum, then 5 timed ones (64 MiB). Results:
  pass  the job completed                  fail  it ended in ERROR (reason shown)
  hang  every rank started and it was not done --timeout later; the job is canceled
fail and hang print the NCCL settings to try next. --pending-timeout and --image-pull-timeout apply until
every rank has started (the first pull of the PyTorch image takes minutes); a probe stopped by them did not
exercise NCCL and is not cached. Results are cached per API server URL and server version in
$TAO_STATE_DIR/probes/nccl.json (else ~/.tao/probes/nccl.json); multi-node submits warn when the cluster
has no cached result or it is fail or hang. A pass caches the NCCL settings it ran with (NCCL_DEBUG* left
out), and later multi-node submits on the cluster apply them (printed; a flag for the same variable wins).
--node-selector, --gpu-product and --toleration place the ranks as they place a submit's pods.
A real pass needs real GPU nodes with CUDA and NCCL in the image. Without them (CPU nodes, a CPU-only
torch, the local cluster's real nodes with their fake GPUs) every rank falls back to gloo on CPU and says
so: the report reads "pass over gloo, not NCCL" with "backend: gloo"; such a pass shows the pods, DNS and
TCP between nodes work, is cached with backend gloo, applies no NCCL settings to later submits, and
multi-node submits still warn. On simulated nodes (KWOK) no container runs, and a pass only shows that the
probe's objects are accepted, placed one rank per node and complete.
Exit codes: 0 pass, 1 fail or hang (or a gate refused it), 2 bad flags, 3 unreachable, 4 never fits."""

probe_app = verb_group("probe", "Check the cluster's multi-node plumbing with a small probe job.", EPILOG)


NCCL_ENV_OPTION = typer.Option(
    None, "--nccl-env", help="NCCL_NAME=VALUE set in every rank, e.g. NCCL_DEBUG=INFO (repeat)."
)
# Hidden: pod annotations, for tests that steer simulated pods (kwok.kubectl-tao.io/...).
ANNOTATION_OPTION = typer.Option(None, "--annotation", hidden=True, help="KEY=VALUE pod annotation (repeat).")
# Where the ranks may run: submit's own options, parsed the same way (flagvalues.targeting).
NODE_SELECTOR_OPTION = typer_option("node_selector")
TOLERATION_OPTION = typer_option("toleration")
GPU_PRODUCT_OPTION = typer_option("gpu_product")


@probe_app.command("nccl", epilog=EPILOG, cls=VerbCommand)
def nccl(
    nodes: int = typer.Option(2, "--nodes", help="Nodes to probe across (>= 2), one rank each."),
    gpus: int = typer.Option(1, "--gpus", help="nvidia.com/gpu per node (torchrun starts one process per GPU)."),
    timeout: str = typer.Option("120s", "--timeout", help="Once every rank has started: a hang after this long."),
    pending_timeout: str = typer.Option(
        "600s", "--pending-timeout", help="Cancel (fail) when not every rank has started after this long."
    ),
    image_pull_timeout: str = typer.Option(
        "300s", "--image-pull-timeout", help="Cancel (fail) when an image pull has failed for this long."
    ),
    image: str = typer.Option(None, "--image", help="Image with torch, torchrun and NCCL [nvcr.io/nvidia/pytorch]."),
    image_pull_secret: str = typer.Option(None, "--image-pull-secret", help="Existing image-pull Secret."),
    pvc: str = typer.Option(None, "--pvc", help="Also mount this (ReadWriteMany) claim on every rank."),
    nccl_socket_ifname: str = typer.Option(None, "--nccl-socket-ifname", help="NCCL_SOCKET_IFNAME, e.g. eth0."),
    nccl_ib_hca: str = typer.Option(None, "--nccl-ib-hca", help="NCCL_IB_HCA for RDMA nodes, e.g. mlx5."),
    nccl_env: list[str] | None = NCCL_ENV_OPTION,
    node_selector: list[str] | None = NODE_SELECTOR_OPTION,
    toleration: list[str] | None = TOLERATION_OPTION,
    gpu_product: str | None = GPU_PRODUCT_OPTION,
    force: bool = typer.Option(False, "--force", help="Probe even when a result younger than 24h is cached."),
    annotation: list[str] | None = ANNOTATION_OPTION,
    output: str = output_option(DATA_FORMATS),
) -> int:
    """Run a 2-node all_reduce job and report pass, fail or hang (cached per cluster)."""
    from kubectl_tao.cli.output import check_format, emit, emit_data, info
    from kubectl_tao.core.flagvalues import parse_key_values, targeting
    from kubectl_tao.jobs.probe import DEFAULT_IMAGE, PASS, ProbeOptions, describe, parse_duration, run_probe
    from kubectl_tao.store.probecache import cache_path

    fmt = check_format(output, DATA_FORMATS)
    selector, tolerations = targeting(node_selector or (), toleration or (), gpu_product)
    opts = ProbeOptions(
        nodes=nodes,
        gpus=gpus,
        image=image or DEFAULT_IMAGE,
        timeout_s=parse_duration(timeout, "--timeout"),
        pending_timeout_s=parse_duration(pending_timeout, "--pending-timeout"),
        image_pull_timeout_s=parse_duration(image_pull_timeout, "--image-pull-timeout"),
        image_pull_secret=image_pull_secret,
        pvc=pvc,
        nccl_socket_ifname=nccl_socket_ifname,
        nccl_ib_hca=nccl_ib_hca,
        nccl_env=parse_key_values(nccl_env, "--nccl-env"),
        annotations=parse_key_values(annotation, "annotation"),
        node_selector=selector,
        tolerations=tuple(tolerations),
    )
    cache_file = cache_path()  # a bad TAO_STATE_DIR is bad input: before any cluster call
    sess = session()
    namespace = sess.namespace()
    target = sess.target()
    store = lazy_record_store()

    report = run_probe(
        sess.kubectl(),
        opts,
        namespace=namespace,
        server=target.server,
        context=target.context,
        force=force,
        store_factory=store,
        cache_file=cache_file,
        on_progress=info,
    )
    if not emit_data(fmt, report.to_dict()):
        emit(describe(report))
    return 0 if report.result == PASS else 1


def register(app: typer.Typer) -> None:
    app.add_typer(probe_app, name="probe")
