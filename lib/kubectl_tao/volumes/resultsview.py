"""A job's results directory as `results` shows it: files with sizes and times, checkpoints in epoch order,
the target of each `*_latest.pth` marked, links that would leave the directory told apart (pure).

The helper pod's listing (results_listing_script) is one entry a line:
  `F <size> <mtime> ./<name>`      a regular file
  `D <mtime> ./<name>`             a directory (its size is the total of the files under it, summed here)
  `L <mtime> ./<name>`, `T <target>`  a symbolic link and what it points to
  `@@status ./<dir>/status.json` ... `@@end`  the tail of each status.json (the progress/ parser reads it)
"""

from __future__ import annotations

import posixpath
import re

from kubectl_tao.core.valueclass import Value, record

CHECKPOINT_SUFFIXES = (".pth", ".ckpt", ".tlt", ".pt", ".hdf5")
LATEST_SUFFIX = "_latest.pth"
_EPOCH = re.compile(r"(?:epoch|ep)[_=-]?(\d+)|_(\d+)\.[a-z0-9]+$", re.IGNORECASE)
STATUS_TAIL_BYTES = 65536


def results_listing_script() -> str:
    """The helper's listing of results directory $1 (exit 3 when it does not exist). Fixed text."""
    return (
        'cd -- "$1" 2>/dev/null || exit 3; '
        "find . -type f -exec stat -c 'F %s %Y %n' {} + && "
        "find . -mindepth 1 -type d -exec stat -c 'D %Y %n' {} + && "
        "find . -type l -exec sh -c 'for f do printf \"L %s %s\\nT %s\\n\" \"$(stat -c %Y \"$f\")\" \"$f\" "
        "\"$(readlink \"$f\")\"; done' sh {} + && "
        + _STATUS_TAILS
    )


# The tail of each status.json at the top of the current directory and one level down, between `@@status` and
# `@@end` lines.
_STATUS_TAILS = (
    f"for s in ./status.json ./*/status.json; do if [ -f \"$s\" ]; then printf '@@status %s\\n' \"$s\"; "
    f"tail -c {STATUS_TAIL_BYTES} \"$s\"; printf '\\n@@end\\n'; fi; done"
)


def status_tails_script() -> str:
    """The helper's `@@status` part of the listing alone, over directory $1 (exit 3 when it does not exist)."""
    return 'cd -- "$1" 2>/dev/null || exit 3; ' + _STATUS_TAILS


def status_paths(entries: list[Entry]) -> list[str]:
    """The status.json files `results` reads: at the top and one level down."""
    return sorted(e.path for e in entries if e.link is None and (
        e.path == "status.json" or (e.path.count("/") == 1 and e.path.endswith("/status.json"))))


def parse_s3_listing(text: str, prefix: str) -> list[Entry]:
    """The objects under PREFIX as entries, from `aws s3api list-objects-v2 --output json` (AWS CLI v1 or v2;
    the CLI joins the pages). A key ending in `/` (a console's folder marker) and the prefix itself are left out;
    S3 has no links. `LastModified` is ISO 8601 (`...T12:00:00+00:00` or `...T12:00:00.000Z`)."""
    import json
    from datetime import datetime

    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ValueError(f"the S3 listing is not JSON: {exc.msg}") from None
    entries = []
    for item in (data or {}).get("Contents") or []:
        key = str(item.get("Key") or "")
        if not key.startswith(prefix) or key.endswith("/") or key == prefix:
            continue
        try:
            mtime: int | None = int(datetime.fromisoformat(str(item.get("LastModified"))).timestamp())
        except ValueError:
            mtime = None
        entries.append(Entry(key[len(prefix):], int(item.get("Size") or 0), mtime))
    return entries


@record(frozen=True)
class Entry(Value):
    path: str  # relative to the results directory
    size: int | None
    mtime: int | None
    link: str | None = None  # a symbolic link's target, relative to the results directory when inside it
    link_out: bool = False  # the link leaves the results directory (never followed)
    epoch: int | None = None
    latest: bool = False  # the file a `*_latest.pth` points to (or that file itself when it is not a link)


@record(frozen=True)
class Folder(Value):
    path: str  # relative to the results directory
    size: int  # the total of the regular files under it, at any depth (links count nothing)
    mtime: int | None  # its own time when listed, else the newest entry under it (an S3 prefix has none)
    files: int  # how many regular files are under it, at any depth


def parse_results_listing(text: str, folders: list[str] | None = None) -> tuple[list[Entry], dict[str, str]]:
    """Entries (unsorted) and each status.json's tail by its path; FOLDERS, when given, gets each directory's
    `path mtime` line (`D` lines) appended."""
    entries: list[Entry] = []
    statuses: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith("F "):
            parts = line[2:].split(" ", 2)
            if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit() and parts[2].startswith("./"):
                entries.append(Entry(parts[2][2:], int(parts[0]), int(parts[1])))
        elif line.startswith("D "):
            mtime, _, name = line[2:].partition(" ")
            if folders is not None and mtime.isdigit() and name.startswith("./") and len(name) > 2:
                folders.append(f"{name[2:]} {mtime}")
        elif line.startswith("L ") and i < len(lines) and lines[i].startswith("T "):
            mtime, _, name = line[2:].partition(" ")
            target = lines[i][2:]
            i += 1
            if name.startswith("./"):
                inside = link_target(name[2:], target)
                entries.append(Entry(name[2:], None, int(mtime) if mtime.isdigit() else None,
                                     link=inside or target, link_out=inside is None))
        elif line.startswith("@@status ./"):
            path = line[len("@@status ./"):]
            body: list[str] = []
            while i < len(lines) and lines[i] != "@@end":
                body.append(lines[i])
                i += 1
            i += 1
            statuses[path] = "\n".join(body)
    return entries, statuses


def link_target(name: str, target: str) -> str | None:
    """Where link NAME points, relative to the results directory, or None when it leaves it."""
    if not target or target.startswith("/"):
        return None
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
    if joined == ".." or joined.startswith("../") or joined == ".":
        return None
    return joined


def checkpoint_epoch(name: str) -> int | None:
    """The epoch a checkpoint's file name carries (`model_epoch_012.pth`, `dino_ep5.ckpt`, `model_079.pth`)."""
    base = posixpath.basename(name)
    if not base.lower().endswith(CHECKPOINT_SUFFIXES) or base.endswith(LATEST_SUFFIX):
        return None
    found = _EPOCH.search(base)
    if found is None:
        return None
    return int(found.group(1) or found.group(2))


def arrange(entries: list[Entry]) -> list[Entry]:
    """Entries in tree order: by directory, then other files by name, then checkpoints by epoch; each one a
    `*_latest.pth` points to marked `latest` (a `*_latest.pth` that is a file of its own is marked itself)."""
    latest = {e.link for e in entries if e.path.endswith(LATEST_SUFFIX) and e.link and not e.link_out}
    latest |= {e.path for e in entries if e.path.endswith(LATEST_SUFFIX) and e.link is None}
    marked = [e.replaced(epoch=checkpoint_epoch(e.path), latest=e.path in latest) for e in entries]

    def key(e: Entry) -> tuple[str, int, int, str]:
        folder, base = posixpath.split(e.path)
        return (folder, 1 if e.epoch is not None else 0, e.epoch if e.epoch is not None else 0, base)

    return sorted(marked, key=key)


def folders_of(entries: list[Entry], listed: list[str] | None = None) -> list[Folder]:
    """Every directory of the tree (those LISTED as `path mtime`, and every parent of an entry), each with the
    total size and number of the regular files under it."""
    times: dict[str, int | None] = {}
    for line in listed or []:
        path, _, mtime = line.rpartition(" ")
        times[path] = int(mtime)
    sizes: dict[str, int] = dict.fromkeys(times, 0)
    counts: dict[str, int] = dict.fromkeys(times, 0)
    newest: dict[str, int] = {}
    for e in entries:
        folder = posixpath.dirname(e.path)
        while folder:
            sizes.setdefault(folder, 0)
            counts.setdefault(folder, 0)
            if e.link is None:
                sizes[folder] += e.size or 0
                counts[folder] += 1
            if e.mtime is not None:
                newest[folder] = max(newest.get(folder, e.mtime), e.mtime)
            folder = posixpath.dirname(folder)
    return [Folder(path, sizes[path], times[path] if times.get(path) is not None else newest.get(path),
                   counts[path]) for path in sorted(sizes)]


def tree(entries: list[Entry], folders: list[Folder]) -> list[Entry | Folder]:
    """Entries (as `arrange` orders them) and folders in one tree order: in each directory its files (other files
    by name, then checkpoints by epoch), then its subdirectories by name, each followed by its contents."""

    def key(item: Entry | Folder) -> list[tuple[int, int, str]]:
        parts = item.path.split("/")
        head = [(2, 0, part) for part in parts[:-1]]
        if isinstance(item, Folder):
            return [*head, (2, 0, parts[-1])]
        return [*head, (1 if item.epoch is not None else 0, item.epoch or 0, parts[-1])]

    return sorted([*entries, *folders], key=key)


def latest_files(entries: list[Entry]) -> list[str]:
    """What `results pull --latest` takes: the file each `*_latest.pth` stands for (inside the directory)."""
    return sorted({e.path for e in arrange(entries) if e.latest and e.link is None})


def note(e: Entry) -> str:
    parts = []
    if e.epoch is not None:
        parts.append(f"epoch {e.epoch}")
    if e.latest:
        parts.append("latest")
    if e.link is not None:
        parts.append(f"-> {e.link}" + (" (outside the results directory: not followed)" if e.link_out else ""))
    return ", ".join(parts)
