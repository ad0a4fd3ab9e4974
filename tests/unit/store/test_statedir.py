"""Files kubectl-tao writes are never written through a planted link, are private, and an unsafe state
directory is refused (issue 17, item 4)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from kubectl_tao.cli import app as app_module
from kubectl_tao.cli import main as cli_module
from kubectl_tao.core.errors import TaoError, UsageError
from kubectl_tao.jobs import probe
from kubectl_tao.store import probecache
from kubectl_tao.store.locking import exclusive
from kubectl_tao.store.records import RecordStore
from kubectl_tao.store.statedir import check_private

OPEN = ["record", "open", "--platform", "kubernetes", "--image", "busybox", "--network-arch", "dino",
        "--action", "train", "--storage-tier", "A", "--results-root", "/workspace/results"]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _state(tao_env: Path) -> Path:
    return Path(os.environ["TAO_STATE_DIR"])


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o1777])
def test_a_state_directory_writable_by_others_is_refused(cli: Any, tao_env: Path, mode: int) -> None:
    state = _state(tao_env)
    state.mkdir()
    state.chmod(mode)
    code, out, err = cli(*OPEN)
    assert code == 2 and out == ""
    assert err == (
        f"error: {state} is writable by other users (mode {mode:o}); run `chmod go-w {state}` or point "
        "TAO_STATE_DIR at a private directory\n"
    )
    assert not (state / "jobs").exists()


def test_a_jobs_directory_symlinked_elsewhere_is_refused(cli: Any, tao_env: Path) -> None:
    state, elsewhere = _state(tao_env), tao_env / "elsewhere"
    state.mkdir(mode=0o700)
    elsewhere.mkdir()
    (state / "jobs").symlink_to(elsewhere)
    code, _, err = cli("list")
    assert code == 2
    assert err.startswith(f"error: {state / 'jobs'} is a symbolic link; kubectl-tao writes only into real directories")
    code, _, err = cli(*OPEN)
    assert code == 2 and list(elsewhere.iterdir()) == []


def test_a_state_directory_of_another_user_is_refused(tao_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = _state(tao_env)
    state.mkdir(mode=0o700)
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)
    with pytest.raises(UsageError, match=r"belongs to uid \d+, not to you .*point TAO_STATE_DIR at a directory"):
        check_private(state)


def test_a_linked_state_directory_is_judged_by_its_target(tao_env: Path) -> None:
    target, link = tao_env / "disk" / "tao", tao_env / "link"
    target.mkdir(parents=True, mode=0o700)
    link.symlink_to(target)
    store = RecordStore(link)
    record = store.open(platform="k8s", image="i", network_arch="a", action="b", storage_tier="A", results_root="/r")
    assert (target / "jobs" / f"{record.id}.json").is_file()


def test_created_directories_and_records_are_private(cli: Any, tao_env: Path) -> None:
    code, out, _ = cli(*OPEN)
    assert code == 0
    state = _state(tao_env)
    assert _mode(state) == 0o700 and _mode(state / "jobs") == 0o700 and _mode(state / "jobs" / ".kubectl-tao") == 0o700
    assert _mode(state / "jobs" / f"{out.strip()}.json") == 0o600


def test_a_planted_lock_link_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    target = tmp_path / "bashrc"
    target.write_text("keep\n", encoding="utf-8")
    lock = tmp_path / "r.json.lock"
    lock.symlink_to(target)
    with pytest.raises(TaoError, match="is a symbolic link; remove it"), exclusive(lock, 1, "busy"):
        pass
    dangling = tmp_path / "d.json.lock"
    dangling.symlink_to(tmp_path / "created-elsewhere")
    with pytest.raises(TaoError), exclusive(dangling, 1, "busy"):
        pass
    assert target.read_text(encoding="utf-8") == "keep\n" and not (tmp_path / "created-elsewhere").exists()


def _crash(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    def boom(**_: Any) -> None:
        raise RuntimeError("a bug, HF_TOKEN=CrashCanary123")

    monkeypatch.setattr(app_module, "app", boom)
    code = cli_module.main(["list"])
    return code, capsys.readouterr().err


def test_the_crash_log_is_private(tao_env: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _crash(monkeypatch, capsys)
    log = _state(tao_env) / "kubectl-tao-crash.log"
    assert code == 1 and err == f"error: internal error (RuntimeError); details in {log}\n"
    assert _mode(log) == 0o600 and _mode(log.parent) == 0o700
    assert "CrashCanary123" not in log.read_text(encoding="utf-8")


def test_a_planted_crash_log_link_is_replaced_never_written_through(
    tao_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    state, victim = _state(tao_env), tao_env / "victim"
    state.mkdir(mode=0o700)
    victim.write_text("precious\n", encoding="utf-8")
    log = state / "kubectl-tao-crash.log"
    log.symlink_to(victim)
    code, err = _crash(monkeypatch, capsys)
    assert code == 1 and err == f"error: internal error (RuntimeError); details in {log}\n"
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert not log.is_symlink() and _mode(log) == 0o600 and "RuntimeError" in log.read_text(encoding="utf-8")


def test_no_crash_log_in_a_world_writable_state_directory(
    tao_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    state = _state(tao_env)
    state.mkdir()
    state.chmod(0o777)
    code, err = _crash(monkeypatch, capsys)
    assert code == 1 and err == "error: internal error (RuntimeError)\n"
    assert list(state.iterdir()) == []


def test_the_probe_cache_is_private(tmp_path: Path) -> None:
    state = tmp_path / "state"
    report = probe.ProbeReport(
        result="pass", reason="", message="ok", server="https://127.0.0.1:6443", version="v1.36.3",
        checked_at="2026-01-01T00:00:00Z", record_id=None, nodes=2, gpus=1, image=probe.DEFAULT_IMAGE,
    )
    probecache.save_result(probecache.cache_path(state), report)
    assert _mode(state / "probes" / "nccl.json") == 0o600 and _mode(state / "probes") == 0o700
