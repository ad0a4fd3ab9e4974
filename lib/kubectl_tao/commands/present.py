"""How observations of jobs are shown: the kubectl-style table, wide columns, rank tables, names."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubectl_tao.cli.output import as_list, check_format, dump_json, dump_yaml, emit, table
from kubectl_tao.core.ages import age
from kubectl_tao.core.sanitize import sanitize
from kubectl_tao.jobs.track import Observation
from kubectl_tao.store.jobrecord import K8sRecord

HEADERS = ["NAME", "STATE", "GPUS", "NODES", "AGE", "REASON"]
WIDE = ["NAMESPACE", "JOB", "IMAGE", "RESULTS", "PROGRESS", "KPI"]
PROGRESS_HEADERS = ["PROGRESS", "ETA"]  # status: where a job's progress is known


def row(obs: Observation, wide: bool) -> list[Any]:
    job, k8s = obs.tracked.job, obs.tracked.k8s
    reason = obs.reason or ("" if obs.state in ("RUNNING", "COMPLETE") else obs.message)
    cells: list[Any] = [
        obs.tracked.id,
        obs.state,
        "-" if k8s.gpus is None else k8s.gpus,
        "-" if k8s.nodes is None else k8s.nodes,
        age(job.submitted_at),
        (reason or "")[:80],
    ]
    if wide:
        from kubectl_tao.progress.model import main_kpi, progress_cell

        progress = obs.shown_progress()
        cells += [
            obs.tracked.namespace or "-",
            obs.tracked.job_name or "-",
            job.image or "-",
            job.results_dir or "-",
            progress_cell(progress) or "-",
            main_kpi(progress) or "-",
        ]
    return cells


def progress_cells(obs: Observation, now: datetime) -> list[str]:
    """PROGRESS and ETA of status's table (the ETA of a running job only)."""
    from kubectl_tao.progress.model import eta_cell, progress_cell

    progress = obs.shown_progress()
    eta = eta_cell(progress, now) if obs.state == "RUNNING" else ""
    return [progress_cell(progress) or "-", eta or "-"]


def _written(updated: str | None) -> datetime | None:
    try:
        moment = datetime.fromisoformat(updated.replace("Z", "+00:00")) if updated else None
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment is not None and moment.tzinfo is None else moment


def progress_lines(obs: Observation, now: datetime) -> str:
    """status JOB: the progress, when and where it was written, the last metrics and the stall warning."""
    from kubectl_tao.core.ages import age_text
    from kubectl_tao.progress.model import eta_cell, metrics_summary, progress_cell, stall_warning

    progress = obs.shown_progress()
    if progress is None:
        return ""
    running = obs.state == "RUNNING"
    where = obs.progress_where if obs.progress is not None else None
    if where is None:
        from kubectl_tao.progress.model import from_stored

        where = from_stored(obs.tracked.k8s.progress)[1]
    cell = progress_cell(progress)
    eta = eta_cell(progress, now) if running else ""
    said = [cell or "no epoch or step count yet"]
    if eta:
        said.append(f"ETA {eta}")
    written = _written(progress.updated)
    if written is not None:
        said.append(f"written {age_text((now - written).total_seconds())} ago")
    text = f"\nProgress: {', '.join(said)}"
    source = where or progress.source
    text += f" (from {source}{'' if running or obs.progress is not None else ', as last seen'})\n"
    metrics = metrics_summary(progress)
    if metrics:
        text += f"Metrics: {metrics}\n"
    warning = stall_warning(progress, now) if running else None
    if warning:
        text += f"Warning: {warning}\n"
    return sanitize(_scrubbed(text), multiline=True)


def _workflow_cell(k8s: K8sRecord) -> str:
    """RUN/STEP of a job that is a step of a workflow run (`workflow run`), else empty."""
    run, step = k8s.workflow, k8s.workflow_step
    return f"{run}/{step}" if run is not None and step is not None else ""


def _restarts_cell(view: dict[str, Any] | None) -> str:
    return "-" if view is None else f"{view['restarts']}/{view['max_restarts']}"


def rank_rows(obs: Observation) -> list[list[Any]]:
    history = obs.tracked.k8s.history
    ranks = (obs.live or {}).get("ranks") or [r.to_stored() for r in (history.ranks if history else ())]
    return [
        [
            r.get("rank"),
            r.get("pod"),
            r.get("node") or "-",
            r.get("phase") or "-",
            "-" if r.get("exit_code") is None else r.get("exit_code"),
            r.get("reason") or "",
        ]
        for r in ranks
    ]


def rank_counts(obs: Observation) -> str:
    """Multi-node: `Ranks: R running, S succeeded, F failed (of N)` (pods Running now; the Job's own
    succeeded and failed pod counts, which include ranks the Job controller stopped)."""
    live = obs.live or {}
    total = int(live.get("total") or 1)
    if total < 2:
        return ""
    running = sum(1 for r in live.get("ranks") or [] if r.get("phase") == "Running")
    return (
        f"Ranks: {running} running, {int(live.get('succeeded') or 0)} succeeded, "
        f"{int(live.get('failed') or 0)} failed (of {total})"
    )


def _scrubbed(value: Any) -> Any:
    """Strings the cluster wrote (pod, condition and event messages) through the redactor."""
    from kubectl_tao.core.redact import redact_cluster_text

    if isinstance(value, str):
        return redact_cluster_text(value)
    if isinstance(value, list):
        return [_scrubbed(v) for v in value]
    if isinstance(value, dict):
        return {k: _scrubbed(v) for k, v in value.items()}
    return value


def show(observations: list[Observation], output: str, no_headers: bool, *, ranks: bool = False) -> None:
    """`ranks` (status of one job): also the message, the rank table and notes, all redacted."""
    fmt = check_format(output)
    if fmt in ("json", "yaml"):
        data: Any = [o.to_dict() for o in observations]
        shown = _scrubbed(data[0]) if ranks and len(data) == 1 else as_list(data)
        emit(dump_json(shown) if fmt == "json" else dump_yaml(shown))
    elif fmt == "name":
        emit("".join(f"job/{o.tracked.id}\n" for o in observations))
    else:
        wide = fmt == "wide"
        rows_shown = [row(o, wide) for o in observations]
        headers = HEADERS + (WIDE if wide else [])
        views = [o.restart_view() for o in observations]
        steps = [_workflow_cell(o.tracked.k8s) for o in observations]
        if any(steps):  # a column only where a job is a step of a workflow run
            headers = [*headers, "WORKFLOW"]
            rows_shown = [[*cells, step or "-"] for cells, step in zip(rows_shown, steps, strict=True)]
        if any(view is not None for view in views):  # a column only where a job was submitted with --max-restarts
            headers = [*headers, "RESTARTS"]
            rows_shown = [[*cells, _restarts_cell(view)] for cells, view in zip(rows_shown, views, strict=True)]
        now = datetime.now(UTC)
        if ranks and not wide and any(o.shown_progress() is not None for o in observations):
            headers = [*headers, *PROGRESS_HEADERS]
            rows_shown = [[*cells, *progress_cells(o, now)] for cells, o in zip(rows_shown, observations, strict=True)]
        emit(table(_scrubbed(rows_shown) if ranks else rows_shown, headers, no_headers=no_headers))
        if ranks:
            for obs in observations:
                lines = progress_lines(obs, now)
                if lines:
                    emit(lines)
                if obs.message and obs.state not in ("RUNNING", "COMPLETE"):
                    emit(f"\nMessage: {sanitize(_scrubbed(obs.message))}\n")
                rows = _scrubbed(rank_rows(obs))
                if rows and (len(rows) > 1 or obs.state == "ERROR" or wide):
                    emit("\n" + table(rows, ["RANK", "POD", "NODE", "PHASE", "EXIT", "REASON"]))
                counts = rank_counts(obs)
                if counts:
                    emit(f"\n{counts}\n")
                gang = (obs.live or {}).get("gang")
                if gang:
                    from kubectl_tao.k8s.gang import describe

                    emit(f"Gang: {sanitize(_scrubbed(describe(gang)))}\n")
                view = obs.restart_view()
                if view is not None:
                    emit(f"\nRestarts: {view['restarts']} ({view['counted']} of {view['max_restarts']} counted); "
                         f"attempt {view['attempt']}\n")
                    for end in view["attempts"]:
                        emit(f"  {end['said']}\n")
                first = (obs.live or {}).get("first_failed_rank")
                if first is not None:
                    emit(f"\nFirst failed rank: {first}\n")
                for note in obs.notes:
                    emit(f"Note: {sanitize(_scrubbed(note))}\n")
