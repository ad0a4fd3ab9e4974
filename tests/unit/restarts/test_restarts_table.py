"""restarts/table.py: the one table of the exit codes the pod scripts reserve or decide on, as the pod reads it."""

from __future__ import annotations

import re
from pathlib import Path

from kubectl_tao.restarts import table

TEMPLATES = Path(__file__).resolve().parents[3] / "templates" / "k8s"


def test_each_row_has_a_number_and_a_name_of_its_own_and_a_known_decision() -> None:
    numbers = [row.number for row in table.EXIT_CODES]
    names = [row.name for row in table.EXIT_CODES]
    assert len(set(numbers)) == len(numbers) and len(set(names)) == len(names)
    assert all(0 < number < 256 for number in numbers)
    assert {row.decision for row in table.EXIT_CODES} == set(table.DECISIONS)
    assert all(re.fullmatch(r"[A-Za-z][A-Za-z0-9-]*", name) for name in names)


def test_the_scripts_own_codes_are_no_shell_or_signal_code_and_a_signals_row_is_128_plus_the_signal() -> None:
    # 126, 127: a shell's "cannot execute" and "not found"; 128 and above: a signal
    assert all(2 < number < 126 for number in table.RESERVED)
    for row in table.EXIT_CODES:
        if row.number > table.SIGNAL_BASE:
            assert row.name.startswith("SIG") and row.reason == row.name and row.decision == table.RETRY


def test_the_pod_reads_one_row_a_line_number_name_decision_reason() -> None:
    lines = table.pod_text().split("\n")
    assert len(lines) == len(table.EXIT_CODES)
    for line, row in zip(lines, table.EXIT_CODES, strict=True):
        number, name, decision, reason = line.split(" ", 3)
        assert (int(number), name, decision, reason) == (row.number, row.name, row.decision, row.reason)
    # the entrypoint takes an infra row's REASON as the cause's name: one word
    assert all(" " not in row.reason for row in table.EXIT_CODES if row.decision == table.INFRA)


def test_the_restart_rule_matches_the_restart_code_only() -> None:
    assert table.restart_rules() == [
        {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [table.EXIT_RESTART]}}
    ]


def _numbers() -> re.Pattern[str]:
    """A number of the table, standing alone (not part of a longer number, an address or a decimal)."""
    return re.compile(r"(?<![0-9.])(" + "|".join(str(row.number) for row in table.EXIT_CODES) + r")(?![0-9.])")


def test_no_pod_script_or_template_writes_a_number_of_the_table() -> None:
    numbers = _numbers()
    found = [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted(TEMPLATES.iterdir())
        if path.suffix in (".sh", ".tmpl")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if numbers.search(line)
    ]
    assert found == []


def test_the_literal_check_finds_a_planted_number() -> None:
    numbers = _numbers()
    assert numbers.search(f'exit {table.EXIT_RESTART}') and numbers.search(f"[ $rc = {table.EXIT_SIGKILL} ]")
    assert not numbers.search("sleep 0.85; port 18888; 10.88.0.1")
