"""Whether the state directory ($TAO_STATE_DIR, else ~/.tao) is safe to write in (files are written there with
core/atomicwrite.py, which replaces a planted link at the final name instead of writing through it).

kubectl-tao keeps records, locks, the probe cache and its crash log under the state directory. Another
user who can write there could plant a symlink (`jobs -> /elsewhere`, `x.json.lock -> ~/.bashrc`) or a
record, so the directory must be the user's own and writable by nobody else, and its `jobs/`,
`jobs/.kubectl-tao/` and `probes/` must be real directories. The state directory itself may be a link
(~/.tao on another disk): it is judged by what it points at.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path

from kubectl_tao.core.errors import UsageError

SUBDIRS = ("jobs", "jobs/.kubectl-tao", "probes")


def state_dir(env: Mapping[str, str] | None = None, *, value: str | os.PathLike[str] | None = None) -> Path:
    """The state directory: `value` when given, else ``$TAO_STATE_DIR``, else ``~/.tao``; it must be absolute.
    The one place that reads TAO_STATE_DIR."""
    if value is None or str(value) == "":
        value = (os.environ if env is None else env).get("TAO_STATE_DIR", "")
    if not value:
        return Path.home() / ".tao"
    if not os.path.isabs(value):
        raise UsageError(
            f"TAO_STATE_DIR must be an absolute path (got {str(value)!r}); e.g. export TAO_STATE_DIR=$HOME/.tao"
        )
    return Path(value)


def check_private(root: Path) -> None:
    """Raise UsageError when `root` or one of its SUBDIRS (those that exist) is unsafe; the message says
    the fix. A missing directory is fine: kubectl-tao creates it private."""
    _check(root, os.stat)
    for sub in SUBDIRS:
        _check(root / sub, os.lstat)


def _check(path: Path, stat_fn: Callable[[Path], os.stat_result]) -> None:
    try:
        info = stat_fn(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(f"cannot check the state directory {path}: {exc.strerror or exc}; check TAO_STATE_DIR") \
            from None
    if stat.S_ISLNK(info.st_mode):
        raise UsageError(
            f"{path} is a symbolic link; kubectl-tao writes only into real directories: remove the link and "
            f"let kubectl-tao create the directory (or point TAO_STATE_DIR elsewhere)"
        )
    if not stat.S_ISDIR(info.st_mode):
        raise UsageError(f"{path} is not a directory; move it aside or point TAO_STATE_DIR elsewhere")
    if info.st_uid != os.geteuid():
        raise UsageError(
            f"{path} belongs to uid {info.st_uid}, not to you (uid {os.geteuid()}); point TAO_STATE_DIR at a "
            "directory of your own"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UsageError(
            f"{path} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}); run `chmod go-w {path}` "
            "or point TAO_STATE_DIR at a private directory"
        )


def make_private_dirs(*paths: Path) -> None:
    """mkdir each path (parents as needed) with mode 0700; existing directories are left as they are."""
    for path in paths:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)

