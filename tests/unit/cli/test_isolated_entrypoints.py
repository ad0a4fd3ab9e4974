"""Every entrypoint starts Python isolated from the user's Python settings (issue 26, item 6): a sitecustomize.py
on PYTHONPATH never runs, PYTHONHOME and the user site-packages are not read, and lib/ (and a release archive's
vendor/) still import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT

ENTRYPOINTS = [
    (["kubectl-tao", "version"], 0),
    (["scripts/kubectl_complete-tao", ""], 0),
    (["scripts/redact_secrets", "--help"], 0),
    (["scripts/tao_job_record", "--help"], 0),
    (["scripts/render_job", "--help"], 0),
    (["scripts/render_action_job", "--help"], 0),
]


@pytest.fixture
def planted(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose PYTHONPATH holds a sitecustomize.py (and a module shadowing json) that leave a mark."""
    site = tmp_path / "planted"
    site.mkdir()
    mark = tmp_path / "ran"
    (site / "sitecustomize.py").write_text(f"open({str(mark)!r}, 'a').write('sitecustomize\\n')\n", encoding="utf-8")
    (site / "json.py").write_text(f"open({str(mark)!r}, 'a').write('json\\n')\nraise SystemExit(9)\n", encoding="utf-8")
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin",
        "HOME": str(tmp_path),
        "TAO_STATE_DIR": str(tmp_path / "state"),
        "PYTHONPATH": str(site),
        "PYTHONSTARTUP": str(site / "sitecustomize.py"),
        "PYTHONUSERBASE": str(tmp_path / "userbase"),
    }
    return env, mark


@pytest.mark.parametrize(("argv", "code"), ENTRYPOINTS, ids=[a[0] for a, _ in ENTRYPOINTS])
def test_a_planted_sitecustomize_never_runs(planted: tuple[dict[str, str], Path], argv: list[str], code: int) -> None:
    env, mark = planted
    result = subprocess.run([str(ROOT / argv[0]), *argv[1:]], env=env, capture_output=True, text=True, check=False,
                            timeout=120)
    assert result.returncode == code, result.stderr
    assert not mark.exists(), f"{argv[0]} ran {mark.read_text()!r} from PYTHONPATH"


def test_the_plugin_runs_isolated_and_still_imports_its_packages(planted: tuple[dict[str, str], Path]) -> None:
    env, mark = planted
    result = subprocess.run([str(ROOT / "kubectl-tao"), "render", "--image", "busybox", "--command", "true",
                             "--pvc", "data", "--gpus", "0", "-o", "json"],
                            env=env, capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    assert '"kind": "Job"' in result.stdout  # its packages came from the environment
    assert not mark.exists()
