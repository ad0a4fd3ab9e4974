"""An exclusive flock on a lock file, given up after a deadline (job records and the probe cache share it)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from kubectl_tao.core.errors import TaoError


@contextlib.contextmanager
def exclusive(lock_path: Path, timeout: float, busy_message: str) -> Iterator[None]:
    """Hold flock(LOCK_EX) on `lock_path` (created if missing, mode 0600, never through a symlink); raise
    TaoError(busy_message) after `timeout`."""
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise TaoError(f"lock file {lock_path} is a symbolic link; remove it (kubectl-tao recreates it)") from None
        raise
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise TaoError(busy_message) from None
                import secrets  # only when contended: importing it costs an uncontended status 5% of its start-up

                time.sleep(0.002 + secrets.randbelow(8) / 1000)  # jitter: waiters do not retry in lockstep
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
