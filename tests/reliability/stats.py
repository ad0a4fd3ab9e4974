"""Counters the reliability tests accumulate for the summary block `make test` prints (conftest.py).

One object per pytest process; tests add to it as they go, so a failed test shows up as tried but not
survived / rejected cleanly / intact.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ReliabilityStats:
    faults_injected: int = 0
    faults_survived: int = 0
    bad_inputs_tried: int = 0
    bad_inputs_rejected: int = 0
    records_checked: int = 0
    records_intact: int = 0
    round_trips: int = 0
    canary_checks: int = 0
    canary_hits: int = 0
    attacks_tried: int = 0
    attacks_held: int = 0
    terminal_attacks_tried: int = 0
    terminal_attacks_held: int = 0
    hidden_tokens_tried: int = 0
    hidden_tokens_redacted: int = 0

    def attack(self, held: bool) -> None:
        """Count one attack of the security pass (planted link, partial RBAC, echoed secret, ...)."""
        self.attacks_tried += 1
        self.attacks_held += int(held)

    def terminal(self, held: bool) -> None:
        """Count one piece of hostile text shown by a verb (escape sequences, C1 bytes, a carriage return,
        direction controls): held when none of it reaches the terminal."""
        self.terminal_attacks_tried += 1
        self.terminal_attacks_held += int(held)

    def hidden_token(self, redacted: bool) -> None:
        """Count one token hidden behind a terminal sequence in a log line: held when it is redacted."""
        self.hidden_tokens_tried += 1
        self.hidden_tokens_redacted += int(redacted)

    def touched(self) -> bool:
        return any(vars(self).values())

    def lines(self) -> list[str]:
        return [
            f"faults injected / survived:        {self.faults_injected} / {self.faults_survived}",
            f"bad inputs tried / rejected:       {self.bad_inputs_tried} / {self.bad_inputs_rejected} "
            "(one-line error, exit 2, nothing created)",
            f"weird-but-valid values round-tripped exactly: {self.round_trips}",
            f"records checked / intact:          {self.records_checked} / {self.records_intact} "
            "(parsed, schema-valid, legal transitions)",
            f"canary hits (must be 0):           {self.canary_hits} in {self.canary_checks} places looked at",
            f"attacks tried / held:              {self.attacks_tried} / {self.attacks_held}",
            f"hostile text shown / inert:        {self.terminal_attacks_tried} / {self.terminal_attacks_held} "
            "(no escape sequence, C1 byte, carriage return or direction control reaches the terminal)",
            f"tokens behind sequences / redacted: {self.hidden_tokens_tried} / {self.hidden_tokens_redacted} "
            "(live and captured logs)",
        ]


STATS = ReliabilityStats()
