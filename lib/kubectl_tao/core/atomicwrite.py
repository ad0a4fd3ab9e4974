"""The one way kubectl-tao writes a file: a reader, or a crash at any moment, sees the old file or the whole
new one, never a part of it.

The data goes to a temporary file next to the target (created with O_EXCL and mode 0600), is fsynced, and is
then published under the final name: `os.replace` when an existing file is to be replaced, `link(2)` when it
must not be (link fails on an existing name exactly as O_CREAT|O_EXCL does). The directory is fsynced last,
so the new name itself survives a crash. A symbolic link planted at the final name is replaced, never written
through. Used by the job records and their additions, list's index, the probe cache, the crash log and the
action configs `render_action_job materialize-config` writes; `publish_streamed` publishes the files `results
pull` streams in.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

# link(2) is not offered by every filesystem; publishing falls back to O_CREAT|O_EXCL on the final name.
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK})


def write_atomically(path: Path, data: bytes, *, replace: bool = True) -> bool:
    """Publish DATA at PATH (mode 0600). REPLACE=False keeps an existing file: False is returned and nothing is
    written. OSError when the directory cannot be written."""
    tmp = _write_temp(path, data)
    try:
        if replace:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
            except OSError as exc:
                if exc.errno not in _NO_HARD_LINKS:
                    raise
                return _create_exclusively(path, data)
    finally:
        tmp.unlink(missing_ok=True)  # after os.replace the name is gone already
    fsync_dir(path.parent)
    return True


def publish_streamed(part: Path, path: Path) -> None:
    """A file a streaming copy wrote in pieces under PART (next to PATH, never read by anyone) published at PATH
    the same way: fsynced, `os.replace`d, the directory fsynced (`results pull`: a file too big to hold whole)."""
    fsync_file(part)
    publish_synced([(part, path)])


def fsync_file(path: Path) -> None:
    """PATH's data on disk (a part file once written; a copy of many files does it beside the stream)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish_synced(pairs: list[tuple[Path, Path]]) -> None:
    """Parts already fsynced (fsync_file), each `os.replace`d to its path, then each directory fsynced once."""
    for part, path in pairs:
        os.replace(part, path)
    for directory in sorted({path.parent for _part, path in pairs}):
        fsync_dir(directory)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_temp(path: Path, data: bytes) -> Path:
    tmp = path.with_name(f".{path.name}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _create_exclusively(path: Path, data: bytes) -> bool:
    """Where hard links are not supported: O_CREAT|O_EXCL on the final name (a reader may see it part-written)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    except FileExistsError:
        return False
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)
    return True
