"""CI's rule for skips: in CI (CI=true) a real-path test cannot pass by skipping (tests/conftest.py applies it)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
REAL_PATH_DIRS = ("e2e", "install")


def real_path(path: Path | str, fixturenames: Iterable[str]) -> bool:
    """A test of the real path: under tests/e2e or tests/install, or one that uses the local cluster."""
    try:
        top = Path(str(path)).resolve().relative_to(TESTS).parts[0]
    except ValueError:
        return False
    return top in REAL_PATH_DIRS or "cluster" in fixturenames


def skip_in_ci(reason: str) -> str:
    """The failure a real-path test's skip becomes in CI."""
    return f"CI=true: a real-path test may not skip, and this one could not run: {reason.removeprefix('Skipped: ')}"
