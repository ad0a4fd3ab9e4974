"""How observations of jobs are shown: the kubectl-style table, wide columns, rank tables, names."""

from __future__ import annotations

from typing import Any

from kubectl_tao.cli.output import as_list, check_format, dump_json, dump_yaml, emit, table
from kubectl_tao.core.ages import age
from kubectl_tao.core.sanitize import sanitize
from kubectl_tao.jobs.track import Observation

HEADERS = ["NAME", "STATE", "GPUS", "NODES", "AGE", "REASON"]
WIDE = ["NAMESPACE", "JOB", "IMAGE", "RESULTS"]


def row(obs: Observation, wide: bool) -> list[Any]:
    extra = obs.tracked.extra
    reason = obs.reason or ("" if obs.state in ("RUNNING", "COMPLETE") else obs.message)
    cells: list[Any] = [
        obs.tracked.id,
        obs.state,
        extra.get("gpus", "-"),
        extra.get("nodes", "-"),
        age(obs.tracked.record.get("submitted_at")),
        (reason or "")[:80],
    ]
    if wide:
        cells += [
            obs.tracked.namespace or "-",
            obs.tracked.job_name or "-",
            obs.tracked.record.get("image", "-"),
            obs.tracked.record.get("results_dir", "-"),
        ]
    return cells


def _restarts_cell(view: dict[str, Any] | None) -> str:
    return "-" if view is None else f"{view['restarts']}/{view['max_restarts']}"


def rank_rows(obs: Observation) -> list[list[Any]]:
    ranks = (obs.live or {}).get("ranks") or (obs.tracked.extra.get("history") or {}).get("ranks") or []
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
        if any(view is not None for view in views):  # a column only where a job was submitted with --max-restarts
            headers = [*headers, "RESTARTS"]
            rows_shown = [[*cells, _restarts_cell(view)] for cells, view in zip(rows_shown, views, strict=True)]
        emit(table(_scrubbed(rows_shown) if ranks else rows_shown, headers, no_headers=no_headers))
        if ranks:
            for obs in observations:
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
