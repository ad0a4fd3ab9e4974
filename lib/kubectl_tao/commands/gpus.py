"""`kubectl tao gpus`: which GPUs are free right now, per node and per namespace."""

from __future__ import annotations

import typer

from kubectl_tao.commands.common import NoHeadersOption, OutputOption, session, with_cluster_flags

EPILOG = """\b
Examples:
  # Free GPUs per node, GPUs in use per namespace, totals
  kubectl tao gpus
  # Also the source (device plugin or DRA), readiness and GPU pods per node
  kubectl tao gpus -o wide
  # For scripts
  kubectl tao gpus -o json
  # Count DRA devices through one DeviceClass (its driver)
  kubectl tao gpus --device-class gpu.nvidia.com

\b
A node's GPUs come from its device plugin (allocatable nvidia.com/gpu, used by pod requests) or from
DRA (devices a GPU driver publishes in ResourceSlices, used by allocated ResourceClaims), or both.
Two kubectl calls in one round trip, whatever the number of nodes: the same reads as the fit gate."""


def register(app: typer.Typer) -> None:
    @app.command("gpus", epilog=EPILOG)
    @with_cluster_flags
    def gpus(
        device_class: str = typer.Option(
            None, "--device-class", help="Count DRA devices of this GPU DeviceClass's driver only."
        ),
        output: str = OutputOption,
        no_headers: bool = NoHeadersOption,
    ) -> int:
        """Show which GPUs are free right now, per node and per namespace."""
        from kubectl_tao.jobs.gpus import gather
        from kubectl_tao.output import check_format, emit, emit_data, info, table

        fmt = check_format(output, ("table", "wide", "json", "yaml"))
        inv = gather(session().kubectl(), device_class=device_class)
        if emit_data(fmt, inv.to_dict()):
            return 0
        for note in inv.notes:
            info(f"note: {note}")
        headers = ["node", "product", "total", "allocated", "free", "cordoned", "taints"]
        if fmt == "wide":
            headers += ["source", "ready", "gpu-pods"]
        rows = []
        for n in inv.nodes:
            row = [n.name, n.product or "-", n.total, n.allocated, n.free, "yes" if n.cordoned else "no",
                   ",".join(n.taints) or "-"]
            if fmt == "wide":
                row += [n.source, "yes" if n.ready else "no", n.gpu_pods]
            rows.append(row)
        totals = inv.totals
        if rows:
            rows.append(["TOTAL", "", totals["total"], totals["allocated"], totals["free"], "", "",
                         *([""] * 3 if fmt == "wide" else [])])
            emit(table(rows, headers, no_headers=no_headers))
        else:
            info("no node offers GPUs (neither nvidia.com/gpu allocatable nor DRA GPU devices)")
        if inv.namespaces:
            emit("\n" + table(sorted(inv.namespaces.items()), ["namespace", "gpus-in-use"], no_headers=no_headers))
        return 0
