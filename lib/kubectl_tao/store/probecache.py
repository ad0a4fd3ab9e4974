"""The NCCL probe's results, cached per cluster (API server URL and server version) in
`$TAO_STATE_DIR/probes/nccl.json` (else `~/.tao/probes/nccl.json`): read, look up, warn from, and add to.

A cached result younger than 24 h answers `probe nccl` instead of probing again; `probe_warning` turns a
cached fail or hang (or no result) into the warning multi-node submits print; a pass carries the NCCL
settings later multi-node submits apply (`passing_settings`). A pass over gloo (no CUDA or NCCL in the
pods) proves nothing about NCCL: it carries no settings, and multi-node submits still warn.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from kubectl_tao.core.ages import age_text
from kubectl_tao.core.atomicwrite import write_atomically
from kubectl_tao.core.errors import TaoError
from kubectl_tao.manifests import render
from kubectl_tao.store import safefile
from kubectl_tao.store.locking import exclusive
from kubectl_tao.store.statedir import check_private, make_private_dirs
from kubectl_tao.store.statedir import state_dir as default_state_dir

CACHE_MAX_AGE_S = 24 * 3600
CACHE_SCHEMA_VERSION = 1
PASS, FAIL, HANG = "pass", "fail", "hang"
RESULTS = (PASS, FAIL, HANG)
NCCL, GLOO = "nccl", "gloo"  # the backend a probe ran over, as its ranks said
NCCL_ENV_RE = re.compile(r"NCCL_[A-Z0-9_]+")
# NCCL's own logging helps to debug but fixes nothing: it is not carried over to later jobs.
NOT_CARRIED = ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE")


class Result(Protocol):
    """What is cached of a probe run (jobs.probe.ProbeReport)."""

    server: str
    version: str

    def to_entry(self) -> dict[str, Any]: ...


def valid_settings(raw: object) -> dict[str, str]:
    """Cached settings that could be rendered again (a hand-edited cache cannot inject anything else)."""
    if not isinstance(raw, Mapping):
        return {}
    return {
        key: value
        for key, value in sorted(raw.items())
        if isinstance(key, str) and NCCL_ENV_RE.fullmatch(key) and key not in NOT_CARRIED
        and isinstance(value, str) and render.NCCL_VALUE_RE.fullmatch(value)
    }


def utc_stamp(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_stamp(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return stamp if stamp.tzinfo is not None else None


def cache_path(state_dir: Path | None = None) -> Path:
    """`$TAO_STATE_DIR/probes/nccl.json`, else `~/.tao/probes/nccl.json`."""
    return (state_dir if state_dir is not None else default_state_dir()) / "probes" / "nccl.json"


def cache_key(server: str, version: str) -> str:
    return f"{server} {version}"


def empty_cache() -> dict[str, Any]:
    return {"schema_version": CACHE_SCHEMA_VERSION, "probes": {}}


def _valid_entry(entry: object) -> bool:
    return (
        isinstance(entry, Mapping)
        and entry.get("result") in RESULTS
        and parse_stamp(entry.get("checked_at")) is not None
    )


def load_cache(path: Path) -> tuple[dict[str, Any], str | None]:
    """The cache and, when the file could not be used, a warning (the cache is then empty and the next
    probe rewrites the file). A missing file is an empty cache without a warning."""
    try:
        text = safefile.read_bytes(path, "the probe cache").decode("utf-8")
    except FileNotFoundError:
        return empty_cache(), None
    except UnicodeDecodeError:
        return empty_cache(), f"the probe cache {path} is not UTF-8 text; it is ignored and will be rewritten"
    except OSError as exc:
        return empty_cache(), f"cannot read the probe cache {path} ({exc.strerror or exc}); it is ignored"
    except TaoError as exc:
        return empty_cache(), f"{exc.message}; it is ignored"
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return empty_cache(), f"the probe cache {path} is not valid JSON; it is ignored and will be rewritten"
    if not isinstance(data, dict) or not isinstance(data.get("probes"), dict):
        return empty_cache(), f"the probe cache {path} has no 'probes' object; it is ignored and will be rewritten"
    probes = {key: entry for key, entry in data["probes"].items() if _valid_entry(entry)}
    return {"schema_version": CACHE_SCHEMA_VERSION, "probes": probes}, None


def lookup(
    cache: Mapping[str, Any], server: str, version: str, *, now: datetime, max_age_s: int = CACHE_MAX_AGE_S
) -> dict[str, Any] | None:
    """The cached result for this cluster if it is younger than `max_age_s` (a time in the future, from
    a skewed clock, counts as stale)."""
    entry = (cache.get("probes") or {}).get(cache_key(server, version))
    if not _valid_entry(entry):
        return None
    stamp = parse_stamp(entry["checked_at"])
    assert stamp is not None
    age = (now - stamp).total_seconds()
    return dict(entry) if 0 <= age < max_age_s else None


def probe_warning(cache: Mapping[str, Any], server: str, version: str, now: datetime | None = None) -> str | None:
    """The warning for a multi-node submit when this cluster (at this server version) has no NCCL probe
    result, or its last probe failed or hung (pure)."""
    entry = (cache.get("probes") or {}).get(cache_key(server, version))
    if not _valid_entry(entry):
        return (
            f"no NCCL probe result is cached for this cluster ({server}, {version}): multi-node jobs may stall at "
            "their first collective if NCCL cannot reach the other nodes; check with `kubectl tao probe nccl`"
        )
    stamp = parse_stamp(entry["checked_at"])
    assert stamp is not None
    when = age_text(((now or datetime.now(UTC)) - stamp).total_seconds())
    if entry["result"] == PASS and entry.get("backend") == GLOO:
        return (
            f"the last probe of this cluster ({when} ago) passed over gloo on CPU, not NCCL: the pods reach each "
            "other, but NCCL was not exercised; on GPU nodes run `kubectl tao probe nccl --force` with an image "
            "that has CUDA and NCCL"
        )
    if entry["result"] == PASS:
        return None
    what = "hung" if entry["result"] == HANG else "failed"
    reason = f" ({entry['reason']})" if entry.get("reason") else ""
    return (
        f"the last NCCL probe of this cluster {what} {when} ago{reason}: multi-node jobs may stall or fail "
        "at their first collective; see `kubectl tao probe nccl` for the NCCL settings to try, then re-probe "
        "with `kubectl tao probe nccl --force`"
    )


def cached_probe_warning(server: str, version: str) -> str | None:
    """`probe_warning` over the cache file of the current TAO_STATE_DIR; never raises."""
    try:
        cache, _ = load_cache(cache_path())
    except TaoError:
        return None
    return probe_warning(cache, server, version)


def passing_settings(cache: Mapping[str, Any], server: str) -> tuple[dict[str, str], str]:
    """The NCCL settings of this cluster's newest probe result, when that result is a pass (else nothing),
    and when it was checked. Any server version counts: the settings describe the nodes' network."""
    entries = [
        entry
        for key, entry in (cache.get("probes") or {}).items()
        if isinstance(key, str) and key.rsplit(" ", 1)[0] == server and _valid_entry(entry)
    ]
    if not server or not entries:
        return {}, ""
    newest = max(entries, key=lambda entry: parse_stamp(entry["checked_at"]) or datetime.min.replace(tzinfo=UTC))
    if newest["result"] != PASS or newest.get("backend") == GLOO:  # a gloo pass proves nothing about NCCL
        return {}, ""
    return valid_settings(newest.get("settings")), str(newest["checked_at"])


def cached_settings(server: str) -> tuple[dict[str, str], str]:
    """`passing_settings` over the cache file of the current TAO_STATE_DIR; never raises."""
    try:
        cache, _ = load_cache(cache_path())
    except TaoError:
        return {}, ""
    return passing_settings(cache, server)


def _locked(path: Path, timeout: float = 10.0) -> contextlib.AbstractContextManager[None]:
    busy = f"the probe cache {path} is locked by another process; retry"
    return exclusive(path.with_name(path.name + ".lock"), timeout, busy)


def save_result(path: Path, report: Result) -> None:
    """Add this cluster's result to the cache (read-modify-write under a lock, atomic replace)."""
    try:
        make_private_dirs(path.parent.parent, path.parent)
        check_private(path.parent.parent)
        with _locked(path):
            cache, _ = load_cache(path)
            cache["probes"][cache_key(report.server, report.version)] = report.to_entry()
            write_atomically(path, (json.dumps(cache, indent=2) + "\n").encode("utf-8"))
    except OSError as exc:
        raise TaoError(f"cannot write the probe cache {path}: {exc.strerror or exc}; check TAO_STATE_DIR") from None


