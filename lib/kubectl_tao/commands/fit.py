"""`kubectl tao fit --gpus G --nodes N`: will the job fit now, later, or never?"""

from __future__ import annotations

import typer

from kubectl_tao.commands.common import DATA_FORMATS, VerbCommand, output_option, session

EPILOG = """\b
Examples:
  # One node with 8 GPUs
  kubectl tao fit --gpus 8
  # Two ranks of 8 GPUs on A100 nodes, for scripts
  kubectl tao fit --gpus 8 --nodes 2 --gpu-product NVIDIA-A100-SXM4-80GB -o json
  # Nodes tainted dedicated=ml:NoSchedule
  kubectl tao fit --gpus 4 --toleration dedicated=ml:NoSchedule --node-selector pool=gpu
  # Two ranks of 8 GPUs inside one rack (the rack's node label), through Kueue
  kubectl tao fit --gpus 8 --nodes 2 --topology example.com/rack --queue team

\b
Each rank is one pod that must land whole on one node; ranks go to distinct nodes. The taint
nvidia.com/gpu:NoSchedule is tolerated for GPU jobs, as submit does. When the namespace has a Kueue
LocalQueue (--queue, else one named "default", else the only one), its ClusterQueue quota counts too.
For --nodes > 1 it also says which gang mechanism keeps the ranks from starting one by one: native (the API
server gang-schedules Jobs), kueue (--queue) or none, and whether a rank can be restarted in place
(--max-restarts: the server keeps container restart rules, found by a server dry run).
--topology LABEL: the gang must fit inside one domain of LABEL ("never" when no domain ever can, "queue"
when one could but not now); LABEL:preferred judges the cluster as a whole. Nodes whose GPUs are marked
unhealthy (docs/placement.md) are left out and named.
Exit codes: 0 fits now, 1 must queue (nodes busy or quota in use), 4 can never fit this cluster."""


def register(app: typer.Typer) -> None:
    @app.command("fit", epilog=EPILOG, cls=VerbCommand)
    def fit(
        gpus: int = typer.Option(..., "--gpus", help="nvidia.com/gpu per node (per rank), 0 to 64."),
        nodes: int = typer.Option(1, "--nodes", help="Nodes (ranks), each on its own node, 1 to 1024."),
        gpu_product: str = typer.Option(None, "--gpu-product", help="Only nodes labelled nvidia.com/gpu.product=P."),
        # Plain defaults, not Annotated: VerbCommand rebuilds the signature and typer would lose the help.
        node_selector: list[str] | None = typer.Option(
            None, "--node-selector", help="KEY=VALUE node label the pods require (repeat)."
        ),
        toleration: list[str] | None = typer.Option(
            None, "--toleration", help="KEY[=VALUE][:EFFECT] taint to tolerate (repeat)."
        ),
        queue: str = typer.Option(None, "--queue", help="Kueue LocalQueue whose quota to check."),
        topology: str = typer.Option(
            None, "--topology", help="Every rank in one domain of node label LABEL (LABEL:preferred: close)."
        ),
        output: str = output_option(DATA_FORMATS, "text"),
    ) -> int:
        """Say whether a job of G GPUs x N nodes fits now, must queue, or never fits."""
        from kubectl_tao.cli.output import check_format, emit, emit_data, info
        from kubectl_tao.core.errors import EXIT_FAILURE, EXIT_NEVER_FITS, EXIT_OK, UsageError
        from kubectl_tao.core.flagvalues import check_shape, check_toleration, parse_key_values, parse_toleration
        from kubectl_tao.core.topology import parse as parse_topology
        from kubectl_tao.gates import fit as fitting
        from kubectl_tao.jobs.plan import shape

        fmt = check_format(output, DATA_FORMATS)
        check_shape(gpus, nodes)  # the bounds submit and render apply
        wanted_topology = parse_topology(topology)
        selector = parse_key_values(node_selector, "--node-selector")
        tolerations = []
        for index, text in enumerate(toleration or []):
            item = parse_toleration(text)  # its errors name the flag already
            try:
                check_toleration(item, index)
            except UsageError as exc:
                raise UsageError(f"--toleration #{index + 1}: {exc.message}; use KEY[=VALUE][:EFFECT]") from None
            tolerations.append(item)
        job = shape(gpus, nodes, node_selector=selector, tolerations=tolerations, gpu_product=gpu_product,
                    queue=queue, topology=wanted_topology)
        sess = session()
        report = fitting.check(sess.kubectl(), sess.namespace(), job)
        if not emit_data(fmt, report.to_dict()):
            for note in report.notes:
                info(f"note: {note}")
            if nodes > 1:
                info(report.gang.line())
            if report.restarts is not None:
                said = "available" if report.restarts.available else "not available"
                info(f"restarts in place (--max-restarts): {said} ({report.restarts.detail})")
            emit(report.verdict.message + "\n")
        return {"fits": EXIT_OK, "queue": EXIT_FAILURE}.get(report.verdict.verdict, EXIT_NEVER_FITS)
