"""`kubectl tao gpus`: which GPUs are free right now, per node and per namespace."""

from __future__ import annotations

from typing import Any

import typer

from kubectl_tao.commands.common import NoHeadersOption, VerbCommand, output_option, session

GPUS_FORMATS = ("table", "wide", "json", "yaml")

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
  # Also what is left of the Kueue quota behind LocalQueue team (its ClusterQueue, per flavor)
  kubectl tao gpus --queue team -n ml
  # Free GPUs per rack (the node label of the racks): where a --topology gang can go
  kubectl tao gpus --by example.com/rack

\b
A node's GPUs come from its device plugin (allocatable nvidia.com/gpu, used by pod requests) or from
DRA (devices a GPU driver publishes in ResourceSlices, used by allocated ResourceClaims), or both.
The same reads as the fit gate, in one round trip whatever the number of nodes. With --queue: the
ClusterQueue's nvidia.com/gpu quota per flavor (nominal, reserved as Kueue counts it, remaining; the
borrowing limit in a cohort), read as `fit --queue` reads it. A LocalQueue that does not exist, a cluster
without Kueue and an inactive queue exit 2."""


def register(app: typer.Typer) -> None:
    @app.command("gpus", epilog=EPILOG, cls=VerbCommand)
    def gpus(
        device_class: str = typer.Option(
            None, "--device-class", help="Count DRA devices of this GPU DeviceClass's driver only."
        ),
        queue: str = typer.Option(
            None, "--queue", help="Kueue LocalQueue of the namespace: also show its ClusterQueue's remaining quota."
        ),
        by: str = typer.Option(
            None, "--by", help="Node label (a rack, block or zone label): free GPUs per domain of that label."
        ),
        output: str = output_option(GPUS_FORMATS),
        no_headers: bool = NoHeadersOption,
    ) -> int:
        """Show which GPUs are free right now, per node and per namespace."""
        from kubectl_tao.cli.output import check_format, emit, emit_data, info, table
        from kubectl_tao.gates.gpus import gather

        fmt = check_format(output, GPUS_FORMATS)
        sess = session()
        view = gather(
            sess.kubectl(), device_class=device_class, queue=queue, namespace=sess.namespace() if queue else "",
            by=by,
        )
        if emit_data(fmt, view.to_dict()):
            return 0
        inv = view.inventory
        for note in inv.notes:
            info(f"note: {note}")
        headers = ["node", "product", "total", "allocated", "free", "cordoned", "taints"]
        unhealthy = any(n.health for n in inv.nodes)
        if unhealthy or fmt == "wide":
            headers.append("gpu-health")
        if fmt == "wide":
            headers += ["source", "ready", "gpu-pods"]
        rows = []
        for n in inv.nodes:
            row = [n.name, n.product or "-", n.total, n.allocated, n.free, "yes" if n.cordoned else "no",
                   ",".join(n.taints) or "-"]
            if unhealthy or fmt == "wide":
                row.append(n.health or "ok")
            if fmt == "wide":
                row += [n.source, "yes" if n.ready else "no", n.gpu_pods]
            rows.append(row)
        totals = inv.totals
        if rows and by:
            emit(domain_table(inv, by, no_headers=no_headers))
        elif rows:
            rows.append(["TOTAL", "", totals["total"], totals["allocated"], totals["free"], "", "",
                         *([""] * (len(headers) - 7))])
            emit(table(rows, headers, no_headers=no_headers))
        else:
            info("no node offers GPUs (neither nvidia.com/gpu allocatable nor DRA GPU devices)")
        if inv.namespaces:
            emit("\n" + table(sorted(inv.namespaces.items()), ["namespace", "gpus-in-use"], no_headers=no_headers))
        if view.queue is not None and view.queue.quota is not None:
            emit("\n" + queue_table(view.queue, wide=fmt == "wide", no_headers=no_headers))
        return 0


def domain_table(inv: Any, by: str, *, no_headers: bool) -> str:
    """One row per value of the --by label: where a gang that must stay in one domain can go."""
    from kubectl_tao.cli.output import table

    headers = [by, "nodes", "total", "allocated", "free", "free-schedulable", "largest-free", "unhealthy"]
    keys = ["domain", "nodes", "total", "allocated", "free", "freeSchedulable", "largestFree", "unhealthyNodes"]
    return table([[d[k] for k in keys] for d in inv.domains()], headers, no_headers=no_headers)


def queue_table(view: Any, *, wide: bool, no_headers: bool) -> str:
    """One row per ResourceFlavor of the ClusterQueue behind the LocalQueue (a jobs.gpus.QueueView)."""
    from kubectl_tao.cli.output import table
    from kubectl_tao.gates.gpus import borrowing_limit

    quota = view.quota
    headers = ["localqueue", "clusterqueue", "flavor", "nominal", "reserved", "remaining"]
    show_borrowing = wide or bool(quota.cohort)
    if show_borrowing:
        headers += ["borrowing-limit"]
    if wide:
        headers += ["borrowed", "used", "cohort", "admitted-workloads", "pending-workloads"]
    rows = []
    for flavor in quota.flavors:
        row: list[Any] = [view.local_queue, quota.cluster_queue, flavor.name or "-", flavor.nominal, flavor.used,
                          flavor.remaining]
        if show_borrowing:
            limit = borrowing_limit(quota, flavor)
            row.append("-" if limit is None else limit)
        if wide:
            row += [flavor.borrowed, flavor.admitted, quota.cohort or "-", quota.admitted_workloads,
                    quota.pending_workloads]
        rows.append(row)
    return table(rows, headers, no_headers=no_headers)
