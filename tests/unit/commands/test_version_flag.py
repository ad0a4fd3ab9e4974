"""`kubectl tao --version` prints exactly what `kubectl tao version` prints."""

from __future__ import annotations

from typing import Any

from kubectl_tao import __version__


def test_version_flag_prints_what_the_version_verb_prints(cli: Any) -> None:
    flag = cli("--version")
    assert flag == cli("version")
    assert flag == (0, f"kubectl-tao {__version__}\n", "")


def test_version_flag_wins_over_a_verb_and_the_global_flags(cli: Any) -> None:
    assert cli("--context", "lab", "--version", "status") == (0, f"kubectl-tao {__version__}\n", "")


def test_root_help_lists_the_version_flag(cli: Any) -> None:
    code, out, _ = cli("--help")
    assert code == 0
    assert "--version" in out and "Print the kubectl-tao version and exit." in out
