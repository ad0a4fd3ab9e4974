"""What `data push` decides without touching anything: where a copy lands on the volume, which names may travel,
which files are already there (same size and SHA-256) and whether what arrived is what was sent.

Names are POSIX paths relative to the target directory. A name may not be absolute, may not climb (`..`), and may
not hold a NUL, a newline or a carriage return (the helper pod's listing is one file a line).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable

from kubectl_tao.core.errors import UsageError
from kubectl_tao.core.valueclass import Value, record

_BAD_CHARS = re.compile(r"[\x00\n\r]")
_SHA256 = re.compile(r"[0-9a-f]{64}")
# Where a push stages what it sends before it is verified and moved under its final name (same volume, so the
# move is a rename): outside the target, so a listing of the target never sees a half-sent file.
STAGING_DIR = ".kubectl-tao-staging"


@record(frozen=True)
class LocalFile(Value):
    name: str  # relative to the target directory, checked by member_name
    path: str  # where it is read from on this machine
    size: int


@record(frozen=True)
class RemoteFile(Value):
    size: int | None = None
    sha256: str | None = None
    is_dir: bool = False


def member_name(name: str, what: str = "path") -> str:
    """NAME as a confined relative POSIX path (`a/./b` -> `a/b`), or a UsageError naming it."""
    if _BAD_CHARS.search(name):
        raise UsageError(f"{what} {name!r}: a name with a newline, carriage return or NUL cannot be copied; rename it")
    if name.startswith("/"):
        raise UsageError(f"{what} {name!r}: an absolute name would escape the target directory; give it relative")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise UsageError(f"{what} {name!r}: '..' would escape the target directory; remove it")
    if not parts:
        raise UsageError(f"{what} {name!r}: names no file; give a file or folder name")
    return "/".join(parts)


def target_dir(mount_path: str, to: str | None) -> str:
    """The absolute directory a push writes into: --to relative to the mount path, or absolute under it."""
    if to is None or to in ("", "."):
        return mount_path
    shown = to
    if _BAD_CHARS.search(to) or ".." in to.split("/"):
        raise UsageError(f"--to {shown!r}: the directory must stay under the volume's mount path {mount_path}; "
                         "remove '..'")
    if to.startswith("/"):
        normal = posixpath.normpath(to)
        if normal != mount_path and not normal.startswith(mount_path.rstrip("/") + "/"):
            raise UsageError(f"--to {shown!r}: not under the volume's mount path {mount_path}; give a path under "
                             f"it or one relative to it")
        return normal
    return posixpath.normpath(posixpath.join(mount_path, member_name(to, "--to")))


def listing_script() -> str:
    """The helper's listing of directory $1: `S <size> ./<name>` and `<sha256>  ./<name>` lines (empty when the
    directory does not exist yet). Fixed text: the directory reaches it as a positional argument."""
    return (
        'cd -- "$1" 2>/dev/null || exit 0; '
        "find . -type f -exec stat -c 'S %s %n' {} + && find . -type f -exec sha256sum {} +"
    )


def names_listing_script() -> str:
    """The helper's listing under directory $1 of only the names after it (`./<top>`, what a push sends there):
    `S <size> ./<name>` for a file, `D ./<name>` for a directory, no hash (hash_script takes those, for the files
    whose size matches). The staging directory is never walked. A name that is not there, or a directory it
    cannot read, lists nothing (what is not listed is sent again): it always exits 0."""
    return (
        'cd -- "$1" 2>/dev/null || exit 0; shift; '
        'for t do if [ -e "$t" ] || [ -L "$t" ]; then '
        f"find \"$t\" -path ./{STAGING_DIR} -prune "
        "-o -type d -exec stat -c 'D %n' {} + -o -type f -exec stat -c 'S %s %n' {} + || :; "
        "fi; done; exit 0"
    )


def hash_script() -> str:
    """`<sha256>  ./<name>` for each name read from stdin (one a line, under directory $1); a file it cannot read
    is left out (and so sent again), never a failure."""
    return 'cd -- "$1" || exit 1; tr \'\\n\' \'\\000\' | xargs -0 sha256sum || :; exit 0'


def names_stdin(names: Iterable[str]) -> bytes:
    """NAMES as a helper script reads them from stdin: `./<name>`, one a line (a name holds no newline)."""
    return "".join(f"./{name}\n" for name in names).encode("utf-8", "surrogateescape")


def parse_listing(text: str) -> dict[str, RemoteFile]:
    """The helper's listing (listing_script) as name -> size and hash; lines it cannot read are left out."""
    sizes: dict[str, int] = {}
    hashes: dict[str, str] = {}
    dirs: set[str] = set()
    for line in text.splitlines():
        if line.startswith("D ./"):
            dirs.add(line[4:])
            continue
        if line.startswith("S "):
            size, _, name = line[2:].partition(" ")
            if size.isdigit() and name.startswith("./"):
                sizes[name[2:]] = int(size)
            continue
        digest, _, name = line.partition("  ")
        if _SHA256.fullmatch(digest) and name.startswith("./"):
            hashes[name[2:]] = digest
    found = {name: RemoteFile(sizes.get(name), hashes.get(name)) for name in {*sizes, *hashes}}
    found.update((name, RemoteFile(is_dir=True)) for name in dirs if name not in found)
    return found


def to_hash(local: Iterable[LocalFile], remote: dict[str, RemoteFile]) -> list[LocalFile]:
    """The local files whose name is a file of the same size on the volume: only those are worth hashing there."""
    return [item for item in local if (there := remote.get(item.name)) is not None and not there.is_dir
            and there.size == item.size]


@record(frozen=True)
class PushPlan(Value):
    send: list[LocalFile]
    skip: list[LocalFile]


def plan_push(
    local: Iterable[LocalFile], remote: dict[str, RemoteFile], sha256_of: Callable[[LocalFile], str]
) -> PushPlan:
    """Which files travel: a file already there with the same size and SHA-256 is skipped (the local file is
    hashed only when the sizes match). A file where the volume has a directory of that name, or under a name the
    volume has as a file, is refused (it would be nested into the directory, or cannot be made)."""
    send: list[LocalFile] = []
    skip: list[LocalFile] = []
    for item in local:
        there = remote.get(item.name)
        if there is not None and there.is_dir:
            raise UsageError(f"LOCAL {item.path}: the target already has a directory {item.name}; remove or rename "
                             "it on the volume, or push to another --to")
        parts = item.name.split("/")
        for depth in range(1, len(parts)):
            above = remote.get("/".join(parts[:depth]))
            if above is not None and not above.is_dir:
                raise UsageError(f"LOCAL {item.path}: the target has a file {'/'.join(parts[:depth])} where "
                                 f"{item.name} needs a directory; remove or rename it, or push to another --to")
        if there is not None and there.size == item.size and there.sha256 and there.sha256 == sha256_of(item):
            skip.append(item)
        else:
            send.append(item)
    return PushPlan(send, skip)


def verify(expected: dict[str, str], arrived: dict[str, RemoteFile]) -> list[str]:
    """What did not arrive as sent, one text each (empty: every file is there with the hash it was sent with)."""
    problems: list[str] = []
    for name, digest in sorted(expected.items()):
        got = arrived.get(name)
        if got is None or got.sha256 is None:
            problems.append(f"{name}: missing after the copy")
        elif got.sha256 != digest:
            problems.append(f"{name}: SHA-256 {got.sha256[:12]}... differs from the {digest[:12]}... sent")
    return problems


def human_bytes(count: int) -> str:
    """1536 -> '1.5 KiB' (binary units, one decimal above bytes)."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{count} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"  # pragma: no cover - the loop returns at GiB
