"""What `data push` decides without touching anything: where a copy lands on the volume, which names may travel,
which files are already there (same size and SHA-256) and whether what arrived is what was sent.

Names are POSIX paths relative to the target directory. A name may not be absolute, may not climb (`..`), and may
not hold a NUL, a newline or a carriage return (the helper pod's listing is one file a line).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kubectl_tao.core.errors import TaoError, UsageError
from kubectl_tao.core.valueclass import Value, record

_BAD_CHARS = re.compile(r"[\x00\n\r]")
_SHA256 = re.compile(r"[0-9a-f]{64}")
# Where a push stages what it sends before it is verified and moved under its final name (same volume, so the
# move is a rename): outside the target, so a listing of the target never sees a half-sent file.
STAGING_DIR = ".kubectl-tao-staging"
# Where the volume keeps, per push target, the SHA-256 of each file a push verified or hashed there, keyed by the
# file's inode, size, modification and change times (`stat`): a later push takes a file's hash from it while that
# key is unchanged instead of reading the file again (any write changes the change time, which no program sets).
RECORD_DIR = ".kubectl-tao-sha256"
# `stat -c` of a file in the listings: F <inode> <size> <mtime s> <mtime>|<ctime>|./<name> (busybox and GNU alike).
STAT_FORMAT = "F %i %s %Y %y|%z|%n"


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
    stat: str | None = None  # "<inode> <size> <mtime s> <mtime>|<ctime>" as listed: the key of the volume's record


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
    """The helper's listing under directory $1 of only the names after $2 (`./<top>`, what a push sends there):
    `F <inode> <size> <mtime s> <mtime>|<ctime>|./<name>` for a file (STAT_FORMAT), `D ./<name>` for a directory,
    then the volume's record for this target ($2, `R <sha256> <stat key>|./<name>` lines), no hash of its own
    (hash_script takes those, for the files whose size matches and whose record does not hold). The staging and
    record directories are never walked. A name that is not there, or a directory it cannot read, lists nothing
    (what is not listed is sent again): it always exits 0."""
    return (
        'cd -- "$1" 2>/dev/null || exit 0; record=$2; shift 2; '
        'for t do if [ -e "$t" ] || [ -L "$t" ]; then '
        f"find \"$t\" \\( -path ./{STAGING_DIR} -o -path ./{RECORD_DIR} \\) -prune "
        f"-o -type d -exec stat -c 'D %n' {{}} + -o -type f -exec stat -c '{STAT_FORMAT}' {{}} + || :; "
        'fi; done; cat -- "$record" 2>/dev/null; exit 0'
    )


def record_path(mount_path: str, target: str) -> str:
    """The volume's record file for a push into TARGET: one per target directory, named after its path relative
    to the mount path (the same file whatever the mount path of a later push)."""
    import hashlib

    relative = posixpath.relpath(target, mount_path)
    return posixpath.join(mount_path, RECORD_DIR, hashlib.sha256(relative.encode("utf-8", "surrogateescape"))
                          .hexdigest()[:32])


def record_write_script() -> str:
    """Replaces the record file $2 (in directory $1) by stdin, whole (a temporary file renamed over it)."""
    return 'mkdir -p -- "$1" && cat > "$2.$$" && mv -f -- "$2.$$" "$2"'


def record_line(name: str, sha256: str, stat: str) -> str:
    return f"R {sha256} {stat}|./{name}\n"


def hash_script() -> str:
    """`<sha256>  ./<name>` for each name read from stdin (one a line, under directory $1); a file it cannot read
    is left out (and so sent again), never a failure."""
    return 'cd -- "$1" || exit 1; tr \'\\n\' \'\\000\' | xargs -0 sha256sum || :; exit 0'


def names_stdin(names: Iterable[str]) -> bytes:
    """NAMES as a helper script reads them from stdin: `./<name>`, one a line (a name holds no newline)."""
    return "".join(f"./{name}\n" for name in names).encode("utf-8", "surrogateescape")


def _stat_line(rest: str) -> tuple[str, str, int] | None:
    """`<inode> <size> <mtime s> <mtime>|<ctime>|./<name>` -> (name, stat key, size), or None."""
    parts = rest.split("|", 2)
    if len(parts) != 3 or not parts[2].startswith("./"):
        return None
    fields = parts[0].split(" ")
    if len(fields) < 3 or not fields[1].isdigit():
        return None
    return parts[2][2:], f"{parts[0]}|{parts[1]}", int(fields[1])


def stat_mtime(stat: str) -> tuple[int, bool] | None:
    """The modification time of a stat key in whole seconds, and whether it is exactly that (no fraction)."""
    fields = stat.split(" ")
    if len(fields) < 4 or not fields[2].lstrip("-").isdigit():
        return None
    fraction = fields[4].partition(".")[2] if len(fields) > 4 else ""
    return int(fields[2]), fraction.strip("0") == ""


def parse_listing(text: str) -> dict[str, RemoteFile]:
    """The helper's listings (names_listing_script, hash_script, sha256sum lines) as name -> size and hash; a
    record line gives the hash of a file listed with the very same stat key; lines it cannot read are left out."""
    sizes: dict[str, int] = {}
    stats: dict[str, str] = {}
    hashes: dict[str, str] = {}
    recorded: dict[str, tuple[str, str]] = {}
    dirs: set[str] = set()
    for line in text.splitlines():
        if line.startswith("D ./"):
            dirs.add(line[4:])
            continue
        if line.startswith("F "):
            found = _stat_line(line[2:])
            if found is not None:
                sizes[found[0]], stats[found[0]] = found[2], found[1]
            continue
        if line.startswith("R "):
            digest, found = line[2:66], _stat_line(line[67:])
            if _SHA256.fullmatch(digest) and found is not None:
                recorded[found[0]] = (found[1], digest)
            continue
        if line.startswith("S "):
            size, _, name = line[2:].partition(" ")
            if size.isdigit() and name.startswith("./"):
                sizes[name[2:]] = int(size)
            continue
        digest, _, name = line.partition("  ")
        if _SHA256.fullmatch(digest) and name.startswith("./"):
            hashes[name[2:]] = digest
    for name, (stat, digest) in recorded.items():
        if name not in hashes and stats.get(name) == stat:
            hashes[name] = digest
    found = {name: RemoteFile(sizes.get(name), hashes.get(name), stat=stats.get(name)) for name in {*sizes, *hashes}}
    found.update((name, RemoteFile(is_dir=True)) for name in dirs if name not in found)
    return found


def parse_record(text: str) -> dict[str, str]:
    """The record lines of a listing, by name: the line as it stands (kept for the names a push leaves alone)."""
    kept: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("R ") and _SHA256.fullmatch(line[2:66]):
            found = _stat_line(line[67:])
            if found is not None:
                kept[found[0]] = line + "\n"
    return kept


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


class StreamCut(TaoError):
    """A tar stream that ended in the middle of a member (the connection cut, the far end stopped)."""

    def __init__(self) -> None:
        super().__init__("the tar stream from the volume ended in the middle of a file; pull again")


def _exactly(stream: Any, count: int) -> bytes | None:
    """COUNT bytes of STREAM; None at its end before the first byte; a TaoError when it ends within them."""
    data = stream.read(count)
    while data and len(data) < count:
        more = stream.read(count - len(data))
        if not more:
            break
        data += more
    if not data:
        return None
    if len(data) < count:
        raise StreamCut
    return bytes(data)


def _pax_values(data: bytes) -> dict[str, str]:
    """A pax extended header's records (`<length> <key>=<value>\\n`) by key."""
    values: dict[str, str] = {}
    at = 0
    while at < len(data):
        length = data[at:].split(b" ", 1)[0]
        if not length.isdigit() or int(length) <= 0:
            break
        record = data[at:at + int(length)]
        key, _, value = record[len(length) + 1:].rstrip(b"\n").partition(b"=")
        values[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        at += int(length)
    return values


def tar_entries(stream: Any, buffer: memoryview) -> Iterator[tuple[Any, Iterator[memoryview]]]:
    """The members of the tar archives on STREAM, one after the other (zero blocks between them skipped), each
    with its data as chunks read into BUFFER (valid until the next chunk; what the caller leaves is skipped).
    GNU long names and pax `path`/`size` records are applied. Reads each byte once, without copies between the
    stream and the buffer (tarfile's stream mode copies every chunk more than once)."""
    import tarfile

    pending: dict[str, str] = {}
    while True:
        header = _exactly(stream, tarfile.BLOCKSIZE)
        if header is None:
            return
        if header == bytes(tarfile.BLOCKSIZE):
            continue  # the end of one archive; another may follow
        try:
            info = tarfile.TarInfo.frombuf(header, "utf-8", "surrogateescape")
        except tarfile.HeaderError as exc:
            raise TaoError(f"the stream from the volume is not a tar archive ({exc}); pull again") from None
        padded = info.size + (-info.size % tarfile.BLOCKSIZE)
        if info.type in (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE):
            data = (_exactly(stream, padded) or b"")[:info.size]
            if info.type == tarfile.GNUTYPE_LONGNAME:
                pending["path"] = data.rstrip(b"\0").decode("utf-8", "surrogateescape")
            elif info.type == tarfile.XHDTYPE:
                pending.update((k, v) for k, v in _pax_values(data).items() if k in ("path", "size"))
            continue
        if "path" in pending:
            info.name = pending["path"]
        if pending.get("size", "").isdigit() and info.isreg():
            info.size = int(pending["size"])
            padded = info.size + (-info.size % tarfile.BLOCKSIZE)
        pending = {}
        left = [info.size if info.isreg() else 0]
        chunks = _chunks(stream, left, buffer)
        yield info, chunks
        for _ in chunks:
            pass  # what the caller did not read
        _skip(stream, padded - info.size if info.isreg() else padded)


def _chunks(stream: Any, left: list[int], buffer: memoryview) -> Iterator[memoryview]:
    while left[0]:
        count = stream.readinto(buffer[:min(len(buffer), left[0])])
        if not count:
            raise StreamCut
        left[0] -= count
        yield buffer[:count]


def _skip(stream: Any, count: int) -> None:
    while count:
        data = stream.read(min(count, 1 << 20))
        if not data:
            raise StreamCut
        count -= len(data)
