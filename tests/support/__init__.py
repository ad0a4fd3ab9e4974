"""What every test suite shares: the repository's paths here, the fake kubectl and recorded answers
(support.fake_kubectl), the local cluster helpers (support.cluster) and the secret corpus
(support.secret_corpus). No suite imports another suite's modules."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
