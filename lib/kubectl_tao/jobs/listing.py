"""`list`: the newest records, with live state from two kubectl calls at once whatever the record count.

All kubectl-tao Jobs and pods carry `app.kubernetes.io/managed-by=kubectl-tao`, so one cluster-wide read of
the labelled Jobs and one of the labelled pods serve every record. They go through `kubectl get --raw`: kubectl
hands the API server's JSON through instead of decoding and re-encoding every object (at 200 running jobs that
was most of list's time). Without cluster-wide list permission it falls back to the same two reads per
namespace that holds records (still independent of the number of records). A running Kubernetes record whose
Job another tool launched is looked up by its own name (two calls each); records of other platforms are shown
as recorded and never written.
"""

from __future__ import annotations

import json
import os
from typing import Any

from kubectl_tao.core import contract
from kubectl_tao.core.errors import KubectlError, TaoError
from kubectl_tao.jobs.track import Observation, Tracked, _from_record, lookup_problem, observe
from kubectl_tao.k8s.kubectl import Completed, Kubectl
from kubectl_tao.store.jobrecord import K8sRecord

SELECTOR = contract.MANAGED_SELECTOR
SELECTOR_QUERY = contract.MANAGED_SELECTOR_QUERY


def raw_reads(scope: str = "") -> dict[str, tuple[list[str], dict[str, Any]]]:
    """The labelled Jobs and pods, cluster-wide or under `scope` ("/namespaces/NS"), keyed by their kind."""
    return {
        "Job": (["get", "--raw", f"/apis/batch/v1{scope}/jobs?labelSelector={SELECTOR_QUERY}"], {"namespaced": False}),
        "Pod": (["get", "--raw", f"/api/v1{scope}/pods?labelSelector={SELECTOR_QUERY}"], {"namespaced": False}),
    }


def _tagged(results: dict[str, Completed | TaoError]) -> list[dict]:
    items: list[dict] = []
    for kind, result in results.items():
        if isinstance(result, TaoError):
            raise result
        try:
            data = json.loads(result.stdout) if result.stdout.strip() else {}
        except json.JSONDecodeError:
            raise TaoError(f"kubectl get --raw of the {kind.lower()}s returned output that is not JSON") from None
        # Items of a raw list carry no kind: the call says which.
        items += [{**item, "kind": kind} for item in (data or {}).get("items") or [] if isinstance(item, dict)]
    return items


def live_objects(kc: Kubectl, namespaces: set[str]) -> dict[tuple[str, str], tuple[dict | None, list[dict]]]:
    results = kc.run_many(raw_reads())
    refused = [r for r in results.values() if isinstance(r, KubectlError) and r.reason == "Forbidden"]
    if refused:
        items = []
        for ns in sorted(namespaces):
            items += _tagged(kc.run_many(raw_reads(f"/namespaces/{ns}")))
    else:
        items = _tagged(results)
    index: dict[tuple[str, str], tuple[dict | None, list[dict]]] = {}
    for item in items:
        meta = item.get("metadata", {})
        name = (meta.get("labels") or {}).get(contract.JOB_LABEL)
        if not name:
            continue
        key = (meta.get("namespace", ""), name)
        job, pods = index.get(key, (None, []))
        if item.get("kind") == "Job" and meta.get("name") == name:
            job = item
        elif item.get("kind") == "Pod":
            pods = [*pods, item]
        index[key] = (job, pods)
    return index


def _read(store: Any, record_id: str, problems: list[str]) -> tuple[dict, dict] | None:
    """One record and its additions from their files; None when the record cannot be read: not JSON, not
    valid against its schema (`store.show` validates with records.record_problem), naming another id, or with
    unreadable kubectl-tao data (or data of a schema_version this release does not read). Each such record is
    described in `problems` and skipped."""
    try:
        record = store.show(record_id)
    except TaoError as exc:
        problems.append(f"{exc.message}; job {record_id} skipped")
        return None
    try:
        extra = store.get_extra(record_id) or {}
        K8sRecord.from_stored(extra)  # a version this release cannot read (written by a newer one)
    except TaoError as exc:  # its kubectl-tao data is unreadable: skip it, not everyone's list
        problems.append(f"{exc.message}; job {record_id} skipped")
        return None
    return record, extra


def newest_records(
    store: Any, limit: int | None, *, full: bool, errors: list[str] | None = None
) -> tuple[list[Tracked], int]:
    """The newest `limit` records (None: all) and how many there are. Finished records come from the list
    index when their files are unchanged (recordindex); `full` reads the shown ones whole (-o json/yaml show
    the captured history, which the index leaves out). A record that cannot be read is skipped and described
    in `errors`; only records that were read and validated enter the index."""
    from kubectl_tao.store.index import ListIndex, load
    from kubectl_tao.store.recordids import ID_RE
    from kubectl_tao.store.records import Record
    from kubectl_tao.store.transitions import parse_ts

    if not store.jobs_dir.is_dir():
        return [], 0
    ids = sorted(
        p.name[:-5]
        for p in os.scandir(store.jobs_dir)
        if p.name.endswith(".json") and not p.name.startswith(".") and ID_RE.fullmatch(p.name[:-5])
    )
    problems: list[str] = [] if errors is None else errors
    index = ListIndex(store.extras_dir)
    rows = list(
        load(
            ids,
            store.jobs_dir,
            store.extras_dir,
            lambda rid: _read(store, rid, problems),
            index,
            lambda r: Record(r).terminal,
        )
    )
    index.save()
    rows.sort(key=lambda row: (parse_ts(row[0].get("submitted_at")), str(row[0].get("id"))), reverse=True)
    shown = rows if limit is None else rows[:limit]
    tracked = []
    for record, extra, cached in shown:
        if cached and full:
            record, extra = _read(store, Record(record).id, problems) or (record, extra)
        tracked.append(Tracked(Record(record), extra))
    return tracked, len(rows)


def observe_all(
    kc: Kubectl,
    store: Any,
    server: str,
    *,
    live: bool = True,
    limit: int | None = None,
    full: bool = True,
    errors: list[str] | None = None,
) -> tuple[list[Observation], int]:
    """Observations of the newest `limit` records (None: all), and the number of readable records in the store;
    a record that cannot be read is skipped and described in ``errors``."""
    tracked, total = newest_records(store, limit, full=full, errors=errors)
    unsafe = {t.id: problem for t in tracked if (problem := lookup_problem(t)) is not None}
    here = [
        t
        for t in tracked
        if t.on_kubernetes
        and t.id not in unsafe
        and (not t.k8s.api_server or t.k8s.api_server == server)
    ]
    need_live = live and any(not t.terminal and t.job_name and t.launched_here for t in here)
    index = live_objects(kc, {t.namespace for t in here if t.namespace}) if need_live else {}
    here_ids = {t.id for t in here}  # `t in here` compared whole records: quadratic in the record count
    out: list[Observation] = []
    for t in tracked:
        if not t.on_kubernetes:
            out.append(_from_record(t, [f"platform {t.platform or '?'}: left to that platform's tools"]))
        elif t.id in unsafe:
            out.append(_from_record(t, [unsafe[t.id]]))
        elif t.id not in here_ids:
            out.append(_from_record(t, [f"submitted to another cluster ({t.k8s.api_server})"]))
        elif t.terminal or not t.job_name or not live:
            out.append(_from_record(t, []))
        elif not t.launched_here:
            # A Job launched the reference's way carries no kubectl-tao label: look it up by its name.
            out.append(observe(kc, store, t, server=server))
        else:
            job, pods = index.get((t.namespace or "", t.job_name), (None, []))
            out.append(observe(kc, store, t, server=server, job=job, pods=pods, fetched=True))
    return out, total
