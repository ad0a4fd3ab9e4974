"""`list`'s index of records: what the table needs of each terminal record, so a long history is listed
without opening every record file, and each running record as read, so it is not parsed and redacted again.

The index lives in `jobs/.kubectl-tao/.list-index.json` (a cache: deleting it is always safe). A terminal
record's entry holds the record with its last transition only and the kubectl-tao additions without the
captured history, next to the stamp (inode, size, mtime in ns) of both files as they were *before* they were
read. A file written since (every write replaces the file, so its inode changes) no longer matches its stamp
and is read again; a record file that is gone drops out. A running record's files are written while its job
runs, so its entry is keyed by their content instead: the whole record (redacted, as `RecordStore.show` gave
it) and additions, next to a digest of both files' bytes taken *before* they were read; `list` reads the
bytes (cheap) and uses the entry only when the digest matches, which spares the parse, the schema check and
the redaction (most of its time per running record). The index is written atomically (core/atomicwrite.py),
so a crash leaves the old index or the new one, and two `list`s at once each write an index that is right for
the files it saw. An index that cannot be read or has another version is rebuilt from the records.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kubectl_tao.core.atomicwrite import write_atomically
from kubectl_tao.core.errors import TaoError
from kubectl_tao.store import safefile

INDEX_NAME = ".list-index.json"
VERSION = 2  # 2: the kept progress of a finished record (list -o wide)
INDEX_MAX_BYTES = 1024 * 1024 * 1024  # a few hundred bytes a record: far more records than any store holds

Stamp = list[int]


# What a table row, `-o name` and list's own choices read of a finished record (json/yaml read the files).
RECORD_KEYS = ("id", "platform", "backend_ref", "image", "submitted_at", "results_dir", "terminal_state", "err_class")
EXTRA_KEYS = ("namespace", "job_name", "gpus", "nodes", "api_server", "progress", "workflow", "workflow_step")


def stamp(path: str) -> Stamp | None:
    """(inode, size, mtime_ns) of a file, or None when it does not exist."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def digest(record_path: str, extra_path: str) -> str | None:
    """A digest of both files' bytes (a missing additions file counts as such); None when the record file
    cannot be read."""
    h = hashlib.blake2b(digest_size=16)
    for path in (record_path, extra_path):
        try:
            data = safefile.read_bytes(path, "job record")
        except (OSError, TaoError):  # a link, a FIFO, too large...: the read that follows says which
            if path is record_path:
                return None
            h.update(b"-")
            continue
        h.update(b"%d:" % len(data))
        h.update(data)
    return h.hexdigest()


def slim(record: dict[str, Any], extra: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a table row needs: a few fields of the record and its last transition, a few of the additions."""
    last = list(record.get("transitions") or [])[-1:]
    small = {k: record[k] for k in RECORD_KEYS if k in record}
    small["transitions"] = [{k: t[k] for k in ("state", "message") if k in t} for t in last if isinstance(t, dict)]
    return small, {k: extra[k] for k in EXTRA_KEYS if k in extra}


class ListIndex:
    def __init__(self, extras_dir: Path) -> None:
        self.path = extras_dir / INDEX_NAME
        self.entries = self._load()
        self.changed = False

    def _load(self) -> dict[str, Any]:
        try:
            data = safefile.read_json(self.path, "list index", INDEX_MAX_BYTES)
        except (OSError, TaoError):
            return {}
        if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("records"), dict):
            return {}
        return data["records"]

    def lookup(self, record_id: str, stamps: tuple[Stamp | None, Stamp | None]) -> tuple[dict, dict] | None:
        """The cached (record, extra) when both files are exactly as they were when cached."""
        entry = self.entries.get(record_id)
        if not isinstance(entry, dict) or [entry.get("record_stamp"), entry.get("extra_stamp")] != list(stamps):
            return None
        record, extra = entry.get("record"), entry.get("extra")
        if not isinstance(record, dict) or not isinstance(extra, dict):
            return None
        return record, extra

    def lookup_running(self, record_id: str, content: str | None) -> tuple[dict, dict] | None:
        """The cached (record, extra) of a running record whose files hold exactly the bytes they held then."""
        entry = self.entries.get(record_id)
        if content is None or not isinstance(entry, dict) or entry.get("digest") != content:
            return None
        record, extra = entry.get("record"), entry.get("extra")
        if not isinstance(record, dict) or not isinstance(extra, dict):
            return None
        return record, extra

    def remember_running(self, record_id: str, content: str, record: dict, extra: dict) -> None:
        self.entries[record_id] = {"digest": content, "record": record, "extra": extra}
        self.changed = True

    def remember(self, record_id: str, stamps: tuple[Stamp | None, Stamp | None], record: dict, extra: dict) -> None:
        small_record, small_extra = slim(record, extra)
        self.entries[record_id] = {
            "record_stamp": stamps[0],
            "extra_stamp": stamps[1],
            "record": small_record,
            "extra": small_extra,
        }
        self.changed = True

    def forget_except(self, record_ids: set[str]) -> None:
        gone = set(self.entries) - record_ids
        for record_id in gone:
            del self.entries[record_id]
        self.changed = self.changed or bool(gone)

    def save(self) -> None:
        """Write the index atomically when it changed; a cache that cannot be written is left alone."""
        if not self.changed or not self.path.parent.parent.is_dir():
            return
        data = json.dumps({"version": VERSION, "records": self.entries}, separators=(",", ":")).encode("utf-8")
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(mode=0o700, exist_ok=True)
            write_atomically(self.path, data)


def load(
    ids: list[str],
    jobs_dir: Path,
    extras_dir: Path,
    read: Callable[[str], tuple[dict, dict] | None],
    index: ListIndex,
    terminal: Callable[[dict], bool],
) -> Iterator[tuple[dict, dict, bool]]:
    """(record, extra, slim) for each readable id: terminal records from the index when their files are
    unchanged (slim: the few fields a table needs), running ones from the index when their files hold the same
    bytes (whole), everything else through `read` (None: unreadable, skipped and not indexed). Keeps the index
    up to date."""
    jobs, extras = str(jobs_dir), str(extras_dir)  # plain strings: 20,000 Path objects cost more than the stats
    for record_id in ids:
        paths = (f"{jobs}/{record_id}.json", f"{extras}/{record_id}.json")
        stamps = (stamp(paths[0]), stamp(paths[1]))
        if stamps[0] is None:
            continue
        hit = index.lookup(record_id, stamps)
        if hit is not None:
            yield hit[0], hit[1], True
            continue
        entry = index.entries.get(record_id)
        fresh = not isinstance(entry, dict) or "digest" in entry
        content = digest(*paths) if fresh else None  # taken before the read: see the module's docstring
        hit = index.lookup_running(record_id, content)
        if hit is not None:
            yield hit[0], hit[1], False
            continue
        found = read(record_id)
        if found is not None and terminal(found[0]):
            index.remember(record_id, stamps, *found)
        elif found is not None and content is not None:
            index.remember_running(record_id, content, *found)
        elif record_id in index.entries:  # unreadable now, or running again: its entry describes an old file
            del index.entries[record_id]
            index.changed = True
        if found is not None:
            yield found[0], found[1], False
    index.forget_except(set(ids))
