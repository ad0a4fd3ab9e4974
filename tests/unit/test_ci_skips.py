"""In CI (CI=true) a skipped real-path test fails the run, naming why it could not run (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support import ROOT
from support.ci import real_path

TESTS = ROOT / "tests"
DEMO_TEST = "tests/e2e/test_demo.py"


def _pytest(ci: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(KUBECTL_TAO_SKIP_E2E="1", PYTHONPATH=str(ROOT / "lib"))
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", DEMO_TEST, "-q", "-rA", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_skipped_e2e_test_fails_in_ci_naming_why() -> None:
    run = _pytest("true")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "CI=true: a real-path test may not skip, and this one could not run: KUBECTL_TAO_SKIP_E2E=1" in run.stdout
    summary = run.stdout.splitlines()[-1]
    assert "1 error" in summary and "skipped" not in summary, run.stdout  # a skip in setup: an error there


def test_outside_ci_the_same_test_is_a_skip() -> None:
    run = _pytest(None)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 skipped" in run.stdout.splitlines()[-1], run.stdout


@pytest.mark.parametrize(
    ("path", "fixtures", "real"),
    [
        ("e2e/test_demo.py", (), True),
        ("install/test_krew.py", (), True),
        ("reliability/test_faults.py", ("tao", "cluster"), True),
        ("reliability/test_tools.py", ("tmp_path",), False),
        ("unit/test_house_rules.py", (), False),
    ],
)
def test_what_counts_as_a_real_path_test(path: str, fixtures: tuple[str, ...], real: bool) -> None:
    assert real_path(TESTS / path, fixtures) is real
