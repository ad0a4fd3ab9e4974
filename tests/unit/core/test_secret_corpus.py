"""The secret linter on its two corpora (issue 17, item 6): no credential missed, no honest job refused.
The figures are in docs/secrets.md."""

from __future__ import annotations

import json

import pytest
from support.secret_corpus import CORPUS_DIR, cases, findings

CREDENTIALS = cases("credentials.txt")
HONEST = cases("honest.txt")


def test_the_corpora_are_a_few_hundred_cases() -> None:
    assert len(CREDENTIALS) >= 150 and len(HONEST) >= 150


def test_no_credential_is_missed_as_a_file_or_as_a_command() -> None:
    misses = []
    for number, case in CREDENTIALS:
        as_file, as_command = findings(case)
        if not as_file or not as_command:
            misses.append(f"credentials.txt:{number} ({'file' if not as_file else 'command'})")
    assert misses == [], f"{len(misses)} of {len(CREDENTIALS)} missed: {misses}"


def test_no_honest_case_is_refused() -> None:
    refused = []
    for number, case in HONEST:
        as_file, as_command = findings(case)
        for finding in as_file + as_command:
            refused.append(f"honest.txt:{number}: {finding.kind} {finding.name} ({finding.rule})")
    assert refused == [], f"{len(refused)} refusals in {len(HONEST)} honest cases: {refused}"


def test_findings_never_quote_the_canaries() -> None:
    for _, case in CREDENTIALS:
        as_file, as_command = findings(case)
        for finding in as_file + as_command:
            assert "FakeCanary" not in finding.format()


# Corpora written apart from the rules (tests/fixtures/secrets/): the measure of what the rules do on forms they
# were not written for. Target for each: at most 3 credential forms missed and at most 2 honest commands refused.
# - blind-corpus.json: as its author wrote it.
# - blind-corpus-2.json: written after the rules had been tuned on the first. Measured before any change it
#   prompted: 0 of 30 missed, 3 of 34 refused; the three refusals had general causes (a format field as a URL's
#   password, `existingSecret: NAME`, `tao` read inside `tao-data`), fixed since.
# - blind-corpus-3.json: written after the second's fixes, and never used to change them: the blind figure of the
#   rules as they are. 2 of 30 missed (a Kaggle API key under a bare "key", ClearML's access/secret pair in HOCON),
#   1 of 34 refused (a masked `token=hf_****`).
BLIND_CORPORA = [
    ("blind-corpus.json", "blind corpus"),
    ("blind-corpus-2.json", "second blind corpus"),
    ("blind-corpus-3.json", "third blind corpus"),
]


@pytest.mark.parametrize(("name", "label"), BLIND_CORPORA, ids=[name for name, _ in BLIND_CORPORA])
def test_each_blind_corpus_is_measured_within_its_targets(name: str, label: str) -> None:
    blind = json.loads((CORPUS_DIR / name).read_text(encoding="utf-8"))
    credentials, honest = blind["credentials"], blind["honest"]
    assert len(credentials) >= 27 and len(honest) >= 31
    missed = [case["form"] for case in credentials if not all(findings(case["text"]))]
    refused = [case["form"] for case in honest if any(findings(case["text"]))]
    print(f"{label}: {len(missed)} of {len(credentials)} credential forms missed, "
          f"{len(refused)} of {len(honest)} honest commands refused")
    assert len(missed) <= 3, missed
    assert len(refused) <= 2, refused
