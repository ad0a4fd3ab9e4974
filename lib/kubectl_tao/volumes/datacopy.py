"""`data push`: local files and folders onto a volume through the volume helper pod.

A listing of what the target holds under the pushed names (sizes and `stat`, with the volume's record of the
hashes it verified earlier; then the SHA-256 of the other files whose size matches a local one) decides what is
skipped; the rest travels as one tar stream over `kubectl exec -i` into a staging directory on the same volume (no
archive on either side, memory flat), hashed there file by file as tar extracts it and checked against the hashes
taken while it was read here, and only then moved under its final names (a rename), batch by batch. An
interrupted push leaves nothing half-written under a final name, nor its staging directory, and keeps the batches
already moved: the next push skips those.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubectl_tao.core.errors import TaoError, UsageError
from kubectl_tao.core.valueclass import Value, record
from kubectl_tao.k8s.kubectl import Kubectl
from kubectl_tao.volumes import volume_helper, volumecopy

_READ = 1 << 20

# Moves every staged file ($1) under its final name in the target ($2): its directories made first (one mkdir for
# all), then the files, whose `stat` afterwards (STAT_FORMAT) is what the volume's record keeps; then removes the
# staging directory.
_MOVE_SCRIPT = (
    'mkdir -p -- "$2" && cd -- "$1" && find . -type d -exec sh -c \'cd -- "$0" && mkdir -p -- "$@"\' "$2" {} + '
    "&& find . -type f -exec sh -c 'for f do mv -f -- \"$f\" \"$0/$f\" || exit 1; done; "
    f"cd -- \"$0\" && stat -c \"{volumecopy.STAT_FORMAT}\" -- \"$@\"' \"$2\" {{}} + "
    '&& cd / && rm -rf -- "$1"'
)
# Extracts the tar on stdin into the staging directory $1 and hashes each file as soon as tar has moved on to the
# next one (tar -v names a member before it writes it), so the verification runs while the stream still flows:
# `<sha256>  ./<name>` a file. The last line of the names is "/" (never a member's name) only when tar succeeded;
# without it the last, maybe partial, file is not hashed and the script fails.
_EXTRACT_SCRIPT = (
    'mkdir -p -- "$1" && cd -- "$1" || exit 1; { tar -xvf - && echo /; } | '
    '{ IFS= read -r prev || exit 1; while IFS= read -r n; do sha256sum -- "./$prev" || :; prev=$n; done; '
    '[ "$prev" = / ]; }'
)
_REMOVE_SCRIPT = 'rm -rf -- "$1"'


@record(frozen=True)
class PushRequest(Value):
    sources: list[str]
    pvc: str
    to: str | None = None
    mount_path: str = "/workspace"
    image: str = volume_helper.DEFAULT_HELPER_IMAGE
    node_selector: dict[str, str] | None = None
    tolerations: list[dict[str, Any]] | None = None
    start_timeout: float = 120.0


@record(frozen=True)
class PushResult(Value):
    namespace: str
    pvc: str
    target: str
    sent: int
    sent_bytes: int
    skipped: int
    skipped_bytes: int
    verified: int

    def summary(self) -> str:
        return (
            f"pushed {self.sent} file(s) ({volumecopy.human_bytes(self.sent_bytes)}) to pvc/{self.pvc}:{self.target}"
            f", {self.skipped} unchanged skipped ({volumecopy.human_bytes(self.skipped_bytes)}), "
            f"{self.verified} verified"
        )


def collect(sources: list[str]) -> list[volumecopy.LocalFile]:
    """The files SOURCES name, each under the name it gets in the target (a folder keeps its own name): bad
    input is refused in one line before anything is created."""
    if not sources:
        raise UsageError("LOCAL: name at least one file or folder to push")
    found: dict[str, volumecopy.LocalFile] = {}
    for source in sources:
        if not os.path.lexists(source):
            raise UsageError(f"LOCAL {source}: no such file or folder; check the path")
        top = os.path.basename(os.path.normpath(os.path.abspath(source)))
        top = volumecopy.member_name(top, "LOCAL")
        items = _walk(source, top) if os.path.isdir(source) else [_regular(source, top)]
        for item in items:
            if item.name in found:
                raise UsageError(f"LOCAL {source}: {item.name} is also pushed from {found[item.name].path}; push "
                                 "one of them, or the other to another --to")
            found[item.name] = item
    return list(found.values())


def _regular(path: str, name: str) -> volumecopy.LocalFile:
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(f"LOCAL {path}: not a regular file or folder (a device, socket or FIFO); leave it out")
    return volumecopy.LocalFile(name, path, info.st_size)


def _walk(root: str, top: str) -> list[volumecopy.LocalFile]:
    real_root = os.path.realpath(root)
    out: list[volumecopy.LocalFile] = []
    for folder, dirs, files in os.walk(root):
        rel_folder = os.path.relpath(folder, root)
        for entry in sorted(dirs):
            path = os.path.join(folder, entry)
            if os.path.islink(path):
                _inside(path, real_root, root)  # a link to a folder inside is not followed: its files go anyway
        dirs.sort()
        for entry in sorted(files):
            path = os.path.join(folder, entry)
            if os.path.islink(path):
                _inside(path, real_root, root)
            rel = entry if rel_folder == "." else posixpath.join(rel_folder.replace(os.sep, "/"), entry)
            out.append(_regular(path, volumecopy.member_name(f"{top}/{rel}", "LOCAL")))
    return out


def _inside(path: str, real_root: str, root: str) -> None:
    target = os.path.realpath(path)
    if target != real_root and not target.startswith(real_root.rstrip(os.sep) + os.sep):
        raise UsageError(f"LOCAL {path}: a link out of {root} (to {target}); copy what it points to, or leave it out")


def sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_READ):
            digest.update(chunk)
    return digest.hexdigest()


_RACY_NS = 2_000_000_000  # a file changed this close to its hashing is not remembered (timestamps are coarse)


def _stat_key(st: os.stat_result) -> str:
    return f"{st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns}"


def cache_path(sources: list[str]) -> Path | None:
    """This machine's record of the hashes of SOURCES' files: `$XDG_CACHE_HOME/kubectl-tao/sha256/<name>` (else
    `~/.cache/...`), one file per set of sources (named after their real paths)."""
    root = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(root):
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        root = os.path.join(home, ".cache")
    name = hashlib.sha256("\0".join(sorted(os.path.realpath(s) for s in sources)).encode("utf-8", "surrogateescape"))
    return Path(root) / "kubectl-tao" / "sha256" / name.hexdigest()[:32]


class _LocalHashes:
    """The SHA-256 of the local files. A file whose device, inode, size, modification and change times (ns) are
    those this machine's record (cache_path) holds for it takes the hash recorded; the others are hashed on a
    thread started at once (while the helper pod starts and lists the target), stopped once the listing is back (a
    first push, into an empty target, wastes almost nothing), or on demand. A hash is remembered only when the
    file's stat was the same before and after it was read, and its change time more than _RACY_NS older than the
    read (a write since changes the change time, which no program can set). What the stream hashed is remembered
    the same way (`remember`); `save` writes the record back after a push that succeeded."""

    def __init__(self, items: list[volumecopy.LocalFile], record: Path | None) -> None:
        import threading

        self._record = record
        self._known: dict[str, tuple[str, str]] = self._load(record)  # path -> (stat key, sha256)
        self._done: dict[str, str] = {}
        self._fresh: dict[str, tuple[str, str]] = {}
        self._paths = [item.path for item in items]
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(list(items),), daemon=True)
        self._thread.start()

    @staticmethod
    def _load(record: Path | None) -> dict[str, tuple[str, str]]:
        known: dict[str, tuple[str, str]] = {}
        if record is None:
            return known
        try:
            with open(record, encoding="utf-8", errors="surrogateescape") as handle:
                text = handle.read(64 << 20)
        except OSError:
            return known
        for line in text.splitlines():
            fields = line.split(" ", 6)
            if len(fields) == 7 and len(fields[0]) == 64:
                known[fields[6]] = (" ".join(fields[1:6]), fields[0])
        return known

    def _hash(self, path: str, stop: Any = None) -> str | None:
        started = time.time_ns()
        before = os.stat(path)
        key = _stat_key(before)
        if (known := self._known.get(path)) is not None and known[0] == key:
            return known[1]
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            while chunk := handle.read(_READ):
                if stop is not None and stop.is_set():
                    return None  # checked a chunk at a time: stopping never waits for a big file
                digest.update(chunk)
        self.remember(path, before, digest.hexdigest(), started)
        return digest.hexdigest()

    def remember(self, path: str, before: os.stat_result, sha256: str, started: int) -> None:
        """SHA256 of PATH read from STARTED (ns) on, whose stat was BEFORE then: kept when it still is."""
        try:
            after = os.stat(path)
        except OSError:
            return
        if _stat_key(after) == _stat_key(before) and before.st_ctime_ns < started - _RACY_NS:
            self._fresh[path] = (_stat_key(before), sha256)

    def _run(self, items: list[volumecopy.LocalFile]) -> None:
        for item in items:
            try:
                found = self._hash(item.path, self._stopped)
            except OSError:
                return  # the plan hashes it again and reports the error there
            if found is None:
                return
            self._done[item.path] = found

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()

    def sha256(self, item: volumecopy.LocalFile) -> str:
        return self._done.get(item.path) or self._hash(item.path) or ""

    def save(self) -> None:
        """The record of this push's files (best effort: one that cannot be written costs a hashing, no more)."""
        if self._record is None:
            return
        lines = []
        for path in self._paths:
            entry = self._fresh.get(path) or self._known.get(path)
            if entry is not None and "\n" not in path:
                lines.append(f"{entry[1]} {entry[0]} {path}\n")
        if sorted(lines) == sorted(f"{sha} {key} {path}\n" for path, (key, sha) in self._known.items()):
            return
        from kubectl_tao.core.atomicwrite import write_atomically

        try:
            self._record.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            write_atomically(self._record, "".join(lines).encode("utf-8", "surrogateescape"))
        except OSError:
            pass


_BLOCK = 512  # a tar archive is made of 512-byte blocks; two zero blocks end it


def _tar_member(pipe: Any, info: Any, handle: Any, buffer: memoryview, on_bytes: Callable[[int], None] | None) -> str:
    """One regular file into the tar stream PIPE: INFO's header (GNU format: a long name as tar's LongLink
    member), then INFO.size bytes of HANDLE read into BUFFER, hashed as they pass, then the padding to a block.
    Returns their SHA-256. The bytes go from the read buffer to the pipe with no copy in between."""
    import tarfile

    digest = hashlib.sha256()
    pipe.write(info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape"))
    left = info.size
    while left:
        count = handle.readinto(buffer[:min(len(buffer), left)])
        if not count:
            raise TaoError(f"LOCAL {handle.name}: it changed while it was pushed (shorter than it was); push again")
        chunk = buffer[:count]
        digest.update(chunk)
        pipe.write(chunk)
        if on_bytes is not None:
            on_bytes(count)
        left -= count
    pipe.write(bytes(-info.size % _BLOCK))
    return digest.hexdigest()


def push(
    kc: Kubectl,
    namespace: str,
    request: PushRequest,
    *,
    on_plan: Callable[[int, int], None] | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> PushResult:
    """Push REQUEST's files; ON_PLAN(files, bytes) once what travels is known, ON_BYTES as it travels."""
    import time

    target = volumecopy.target_dir(request.mount_path, request.to)
    local = collect(request.sources)
    volume_helper.check_claim(kc, namespace, request.pvc)
    name = volume_helper.helper_name()
    manifest = volume_helper.helper_pod_manifest(
        name, namespace, request.pvc, image=request.image, mount_path=request.mount_path, read_only=False,
        node_selector=request.node_selector, tolerations=request.tolerations,
    )
    stage = posixpath.join(request.mount_path, volumecopy.STAGING_DIR, name)
    record = _Record(volumecopy.record_path(request.mount_path, target), time.time())
    early = _LocalHashes(local, cache_path(request.sources))  # while the helper pod starts and lists
    try:
        with volume_helper.helper_pod(kc, manifest, timeout=request.start_timeout) as pod:
            remote, local_sha256 = _remote(pod, target, local, record, early)
            plan = volumecopy.plan_push(local, remote, local_sha256)
            for item in plan.skip:
                record.keep(item.name, remote[item.name])
            sent_bytes = sum(item.size for item in plan.send)
            if on_plan is not None:
                on_plan(len(plan.send), sent_bytes)
            verified = 0
            if plan.send:
                verified = _send(pod, plan.send, stage, target, on_bytes, record, early)
            record.write(pod)
        early.save()
    finally:
        early.stop()
    return PushResult(
        namespace, request.pvc, target, len(plan.send), sent_bytes, len(plan.skip),
        sum(item.size for item in plan.skip), verified,
    )


class _Record:
    """The volume's record of the target's hashes (volumecopy.RECORD_DIR): the lines the listing read, updated
    with the files this push skipped (their hash taken after the stat the listing made, or the record's own) and
    the files it moved (their verified hash with the stat taken after the move), written back whole at the end
    when it changed. A moved file is recorded only when that stat shows it as tar wrote it (the size sent, the
    local modification time to the second) and that time is older than the push by more than _RACY seconds: a
    write to it since would show in its modification time."""

    _RACY = 2

    def __init__(self, path: str, started: float) -> None:
        self.path, self.started = path, started
        self.read: dict[str, str] = {}
        self.lines: dict[str, str] = {}

    def load(self, listing: str) -> None:
        self.read = volumecopy.parse_record(listing)
        self.lines = dict(self.read)

    def keep(self, name: str, there: volumecopy.RemoteFile) -> None:
        if there.sha256 and there.stat:
            self.lines[name] = volumecopy.record_line(name, there.sha256, there.stat)

    def moved(self, name: str, sha256: str, size: int, mtime: int, stat: str | None) -> None:
        self.lines.pop(name, None)
        seen = volumecopy.stat_mtime(stat) if stat else None
        if stat is None or seen is None or seen != (mtime, True) or mtime > self.started - self._RACY:
            return
        if stat.split(" ")[1] == str(size):
            self.lines[name] = volumecopy.record_line(name, sha256, stat)

    def write(self, pod: volume_helper.HelperPod) -> None:
        """Best effort: a record that cannot be written only costs the next push a hashing."""
        if self.lines == self.read:
            return
        import contextlib

        text = "".join(self.lines[name] for name in sorted(self.lines))
        with contextlib.suppress(TaoError):  # the files are pushed and verified whatever becomes of the record
            pod.script(volumecopy.record_write_script(), posixpath.dirname(self.path), self.path,
                       stdin=text.encode("utf-8", "surrogateescape"))


def _remote(
    pod: volume_helper.HelperPod, target: str, local: list[volumecopy.LocalFile], record: _Record,
    early: _LocalHashes,
) -> tuple[dict[str, volumecopy.RemoteFile], Callable[[volumecopy.LocalFile], str]]:
    """What the target holds under the names pushed: sizes (and directories) of those top-level names only, with
    the hashes the volume's record still vouches for; then the SHA-256 of the other files whose size matches a
    local one. This side hashes its own meanwhile (EARLY), stopped once the listing is back."""
    tops = sorted({item.name.split("/", 1)[0] for item in local})
    try:
        listed = pod.script(volumecopy.names_listing_script(), target, record.path, *(f"./{top}" for top in tops))
        _check(listed, f"listing {target}")
        remote = volumecopy.parse_listing(listed.stdout)
        record.load(listed.stdout)
        candidates = [item for item in volumecopy.to_hash(local, remote) if not remote[item.name].sha256]
        if candidates:
            hashed = pod.script(volumecopy.hash_script(), target, stdin=volumecopy.names_stdin(
                item.name for item in candidates))
            _check(hashed, f"hashing files in {target}")
            for name, found in volumecopy.parse_listing(hashed.stdout).items():
                if name in remote and found.sha256:
                    remote[name] = remote[name].replaced(sha256=found.sha256)
    finally:
        early.stop()
    return remote, early.sha256


# A push travels in batches, each its own tar stream, verified and moved under its final names before the next
# starts: an interrupted push keeps every batch already moved, and the next push skips those files.
_BATCH_BYTES = 1 << 30
_BATCH_FILES = 5000


def batches(items: list[volumecopy.LocalFile]) -> list[list[volumecopy.LocalFile]]:
    """ITEMS in order, cut so a batch holds at most _BATCH_FILES files and, unless one file is larger,
    _BATCH_BYTES."""
    out: list[list[volumecopy.LocalFile]] = []
    size = 0
    for item in items:
        if not out or len(out[-1]) >= _BATCH_FILES or (out[-1] and size + item.size > _BATCH_BYTES):
            out.append([])
            size = 0
        out[-1].append(item)
        size += item.size
    return out


def _send(
    pod: volume_helper.HelperPod,
    items: list[volumecopy.LocalFile],
    stage: str,
    target: str,
    on_bytes: Callable[[int], None] | None,
    record: _Record,
    hashes: _LocalHashes,
) -> int:
    """Send ITEMS batch by batch; the staging directory is removed on every way out (an error, Ctrl-C,
    SIGTERM), with those signals held meanwhile, before the helper pod goes."""
    moved = 0
    try:
        for batch in batches(items):
            moved += _send_batch(pod, batch, stage, target, on_bytes, moved, record, hashes)
    except BaseException:
        import contextlib

        with volume_helper.signals_held(), contextlib.suppress(Exception):
            pod.script(_REMOVE_SCRIPT, stage)  # best effort: a staged file never carries a final name anyway
        raise
    return moved


def _kept(moved: int) -> str:
    if moved:
        return f"{moved} file(s) already verified and moved are kept and skipped by the next push"
    return "nothing was written under its final name"


def _send_batch(
    pod: volume_helper.HelperPod,
    items: list[volumecopy.LocalFile],
    stage: str,
    target: str,
    on_bytes: Callable[[int], None] | None,
    moved: int,
    record: _Record,
    hashes: _LocalHashes,
) -> int:
    """One tar stream into the staging directory, hashed there file by file as it is extracted; the hashes must
    equal those taken here while each file was read; then the batch is moved under its final names."""
    import tarfile

    digests: dict[str, str] = {}
    mtimes: dict[str, int] = {}
    current: list[str] = []

    def feed(pipe: Any) -> None:
        buffer = memoryview(bytearray(_READ))
        for item in items:
            current[:] = [item.name]
            info = tarfile.TarInfo(item.name)
            st = os.stat(item.path)
            if st.st_size != item.size:
                raise TaoError(f"LOCAL {item.path}: it changed while it was pushed; push again")
            info.size, info.mtime, info.mode = item.size, int(st.st_mtime), 0o644 | (st.st_mode & 0o111)
            started = time.time_ns()
            try:
                with open(item.path, "rb", buffering=0) as handle:
                    digests[item.name] = _tar_member(pipe, info, handle, buffer, on_bytes)
            except BrokenPipeError:
                raise  # kubectl ended: its exit code and message say why
            except OSError as exc:
                raise TaoError(f"LOCAL {item.path}: {exc}; push again") from None
            mtimes[item.name] = int(st.st_mtime)
            hashes.remember(item.path, st, digests[item.name], started)
        pipe.write(bytes(2 * _BLOCK))

    hashed: list[bytes] = []
    sent = pod.exec(["sh", "-c", _EXTRACT_SCRIPT, "sh", stage], feed=feed, sink=hashed.append)
    if sent.returncode != 0:
        at = f" while sending {current[0]}" if current else ""
        raise TaoError(f"the copy to the volume stopped{at}: {_said(sent.stderr)}; {_kept(moved)}; free space or "
                       "fix the cause and push again (what arrived is skipped)")
    arrived = volumecopy.parse_listing(b"".join(hashed).decode("utf-8", "surrogateescape"))
    problems = volumecopy.verify(digests, arrived)
    if problems:
        where = "nothing of this batch was moved under its final name" if moved else \
            "nothing was moved under its final name"
        raise TaoError(f"verification failed for {len(problems)} file(s): {problems[0]}; {where}; push again")
    moved_now = pod.script(_MOVE_SCRIPT, stage, target)
    _check(moved_now, f"moving the verified files into {target}")
    after = volumecopy.parse_listing(moved_now.stdout)
    for item in items:
        record.moved(item.name, digests[item.name], item.size, mtimes[item.name],
                     (after.get(item.name) or volumecopy.RemoteFile()).stat)
    return len(digests)


def _check(done: Any, what: str) -> None:
    if done.returncode != 0:
        raise TaoError(f"{what} on the volume failed: {_said(done.stderr)}")


def _said(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip() and not ln.startswith("command terminated")]
    return (lines[-1] if lines else stderr.strip() or "no message")[:300]
