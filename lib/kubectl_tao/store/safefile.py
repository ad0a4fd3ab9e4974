"""Reading a file under the state directory, where whoever could write there may have left a link, a FIFO, a
device, a huge file or JSON nested thousands deep.

A file is opened without following a link in its last component (O_NOFOLLOW: the state directory's own
subdirectories are checked to be real directories by statedir.check_private, so nothing is read from outside
it) and without blocking (O_NONBLOCK: opening a FIFO nobody writes to would wait for ever); only a regular file
of at most MAX_BYTES is read, and JSON nested deeper than MAX_DEPTH is refused before any recursive code (the
redactor, the schema check) walks it. Each refusal is a TaoError naming the file and what is wrong with it,
never its content; a missing file is FileNotFoundError. Standard library only: `status JOB` reads through it
before anything else is imported (jobs/early_read.py).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from typing import Any

from kubectl_tao.core.errors import TaoError

MAX_BYTES = 16 * 1024 * 1024  # a record with the captured history of many ranks is well under 1 MiB
MAX_DEPTH = 64  # a record nests 4 deep
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def read_bytes(path: str | os.PathLike[str], what: str, limit: int = MAX_BYTES) -> bytes:
    """The bytes of the regular file PATH, at most LIMIT; TaoError for anything else, FileNotFoundError when it
    is missing."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise
        if exc.errno == errno.ELOOP:
            raise TaoError(f"{what} {path} is a symbolic link; kubectl-tao reads only regular files") from None
        raise TaoError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise TaoError(f"{what} {path} is {_kind(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise TaoError(f"{what} {path} is larger than {_size(limit)}")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise TaoError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > limit:  # it grew while being read
        raise TaoError(f"{what} {path} is larger than {_size(limit)}")
    return b"".join(chunks)


def read_json(path: str | os.PathLike[str], what: str, limit: int = MAX_BYTES) -> dict[str, Any]:
    """The JSON object in PATH (read_bytes' refusals, and TaoError for text that is not UTF-8, not JSON, not
    an object, or nested deeper than MAX_DEPTH)."""
    data = read_bytes(path, what, limit)
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise TaoError(f"{what} {path} is not UTF-8 text") from None
    except RecursionError:
        raise TaoError(f"{what} {path} is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        where = f"line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else "its text"
        raise TaoError(f"{what} {path} is not valid JSON (at {where})") from None
    if not isinstance(value, dict):
        raise TaoError(f"{what} {path} is not a JSON object")
    if too_deep(value):
        raise TaoError(f"{what} {path} is nested deeper than {MAX_DEPTH} levels")
    return value


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether VALUE nests lists and objects deeper than LIMIT (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        for child in children:
            if isinstance(child, (dict, list)):
                if depth >= limit:
                    return True
                stack.append((child, depth + 1))
    return False


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit} bytes"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"
