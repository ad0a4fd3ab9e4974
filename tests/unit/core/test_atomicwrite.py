"""core/atomicwrite.py: the one way kubectl-tao writes a file; a reader sees the old file or the whole new one."""

from __future__ import annotations

import ast
import errno
import os
import stat
from pathlib import Path

import pytest
from support import ROOT

from kubectl_tao.core import atomicwrite
from kubectl_tao.core.atomicwrite import write_atomically

LIB = ROOT / "lib" / "kubectl_tao"
# What writing a file takes, besides the helper; an append-only log (KUBECTL_TAO_TRACE) is no such write.
WRITING_CALLS = {"replace", "rename", "link", "fsync", "write", "write_text", "write_bytes", "mkstemp",
                 "NamedTemporaryFile"}


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_it_replaces_a_file_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    target.write_bytes(b"old")
    assert write_atomically(target, b"new") is True
    assert target.read_bytes() == b"new" and _mode(target) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_without_replace_an_existing_file_is_kept(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    assert write_atomically(target, b"first", replace=False) is True
    assert write_atomically(target, b"second", replace=False) is False
    assert target.read_bytes() == b"first" and sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


@pytest.mark.parametrize("replace", [True, False])
def test_a_planted_link_is_never_written_through(tmp_path: Path, replace: bool) -> None:
    victim = tmp_path / "bashrc"
    victim.write_bytes(b"keep\n")
    link = tmp_path / "crash.log"
    link.symlink_to(victim)
    published = write_atomically(link, b"log", replace=replace)
    assert victim.read_bytes() == b"keep\n"
    assert published is replace  # replaced: the link itself goes; kept: the name exists, nothing is written
    assert link.is_symlink() is not replace


def test_short_writes_are_completed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    monkeypatch.setattr(atomicwrite.os, "write", lambda fd, data: real_write(fd, bytes(data[:3])))
    target = tmp_path / "big.json"
    write_atomically(target, b"0123456789" * 10)
    assert target.read_bytes() == b"0123456789" * 10


def test_where_hard_links_are_refused_it_creates_the_file_exclusively(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def no_links(*_: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(atomicwrite.os, "link", no_links)
    target = tmp_path / "r.json"
    assert write_atomically(target, b"first", replace=False) is True
    assert write_atomically(target, b"second", replace=False) is False
    assert target.read_bytes() == b"first" and sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "r.json"
    target.write_bytes(b"old")

    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomicwrite.os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_atomically(target, b"new")
    assert target.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_no_other_module_writes_files_its_own_way() -> None:
    offenders = []
    for path in sorted(LIB.rglob("*.py")):
        if path == LIB / "core" / "atomicwrite.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITING_CALLS:
                owner = node.func.value
                if node.func.attr in ("replace", "write") and not (isinstance(owner, ast.Name) and owner.id == "os"):
                    continue  # str.replace, a stream's write
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.func.attr}")
    assert offenders == []
