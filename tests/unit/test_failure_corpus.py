"""The failure-text corpus under tests/fixtures/failures/ (issue 27) is well formed: every log is listed once in
corpus.json, every entry's evidence line is a whole line of its log, causes and classes come from fixed lists,
and every text says where it came from. The format is in that directory's README."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

CORPUS_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "failures"

CAUSES = {
    "cuda-oom",
    "nccl-invalid-usage",
    "nccl-system-error",
    "nccl-remote-error",
    "nccl-internal-error",
    "nccl-watchdog-timeout",
    "gloo-timeout",
    "store-timeout",
    "rendezvous-timeout",
    "remote-rank-died",
    "rank-killed",
    "shm",
    "cuda-device-assert",
    "cuda-illegal-memory-access",
    "nan",
    "no-gpu",
    "gpu-hardware",
    "module-not-found",
    "file-not-found",
    "hf-auth",
    "s3-access-denied",
    "ngc-auth",
    "python-exception",
    "stalled",
}
ERR_CLASSES = {"ERR_INFRA", "ERR_PROGRAM"}
HOW = {"real-run", "source", "report"}
KEYS = {"file", "cause", "err_class", "key_line", "facts", "provenance", "case", "case_cause", "contains_credential"}
NAME = re.compile(r"^(?P<cause>[a-z0-9-]+?)--(?P<variant>[a-z0-9.-]+?)(?:\.rank(?P<rank>\d+))?\.log$")
# A credential in the real formats this corpus uses (made-up values).
CREDENTIAL = re.compile(r"hf_[A-Za-z0-9]{34}\b|\bAKIA[0-9A-Z]{16}\b|nvapi-[A-Za-z0-9_-]{20,}")


def _corpus() -> list[dict[str, Any]]:
    data = json.loads((CORPUS_DIR / "corpus.json").read_text(encoding="utf-8"))
    assert isinstance(data, list)
    return data


CORPUS = _corpus()


def _lines(name: str) -> list[str]:
    return (CORPUS_DIR / name).read_text(encoding="utf-8").splitlines()


def test_every_log_is_listed_once_and_every_listed_log_exists() -> None:
    listed = [entry["file"] for entry in CORPUS]
    assert len(listed) == len(set(listed)), "a file is listed twice"
    on_disk = sorted(path.name for path in CORPUS_DIR.glob("*.log"))
    assert sorted(listed) == on_disk


@pytest.mark.parametrize("entry", CORPUS, ids=[entry["file"] for entry in CORPUS])
def test_entry_is_well_formed(entry: dict[str, Any]) -> None:
    assert set(entry) <= KEYS, f"unknown keys {set(entry) - KEYS}"
    match = NAME.match(entry["file"])
    assert match, "name is <cause>--<variant>[.rankN].log"
    assert entry["cause"] in CAUSES
    if "case" in entry:
        assert entry["case_cause"] in CAUSES
        assert entry["file"].startswith(entry["case"] + "."), "a case's files are named <case>.rankN.log"
    assert match["cause"] == entry.get("case_cause", entry["cause"]), "the name starts with the (case's) cause"
    assert entry["err_class"] in ERR_CLASSES
    assert isinstance(entry["facts"], dict)
    if match["rank"] is not None:
        assert entry["facts"].get("rank") == int(match["rank"]), "a .rankN file says its rank in facts"
        assert "case" in entry, "a per-rank file names its case"


@pytest.mark.parametrize("entry", CORPUS, ids=[entry["file"] for entry in CORPUS])
def test_key_line_is_a_whole_line_of_its_log(entry: dict[str, Any]) -> None:
    assert entry["key_line"].strip(), "an evidence line is not blank"
    assert entry["key_line"] in _lines(entry["file"])


@pytest.mark.parametrize("entry", CORPUS, ids=[entry["file"] for entry in CORPUS])
def test_provenance_says_where_the_text_came_from(entry: dict[str, Any]) -> None:
    prov = entry["provenance"]
    assert prov["how"] in HOW
    for key in ("project", "version", "path"):
        assert isinstance(prov.get(key), str) and prov[key].strip(), f"provenance.{key} is missing"
    assert prov.get("function") or prov.get("line"), "provenance names a function or a line"
    if prov["how"] == "real-run":
        assert prov.get("command", "").strip(), "a real run records its command"
    else:
        assert prov.get("notes", "").strip(), "a text not captured here says how it was put together"


def test_cases_of_several_ranks_have_one_file_per_rank() -> None:
    ranks: dict[str, list[int]] = {}
    for entry in CORPUS:
        if "case" in entry and "rank" in entry["facts"]:
            ranks.setdefault(entry["case"], []).append(entry["facts"]["rank"])
    multi = {case: sorted(found) for case, found in ranks.items() if len(found) > 1}
    assert multi, "the corpus has multi-rank cases"
    for case, found in multi.items():
        assert len(found) == len(set(found)), f"{case}: a rank is listed twice"


def test_credentials_appear_only_in_entries_marked_so() -> None:
    marked = [entry for entry in CORPUS if entry.get("contains_credential")]
    assert marked, "at least one case prints a credential, for the redaction tests"
    for entry in CORPUS:
        text = (CORPUS_DIR / entry["file"]).read_text(encoding="utf-8")
        found = CREDENTIAL.findall(text)
        if entry.get("contains_credential"):
            assert found, f"{entry['file']} is marked but shows no credential"
            assert all("FakeCanary" in value or "FAKECANARY" in value for value in found), "only made-up values"
        else:
            assert not found, f"{entry['file']} shows a credential but is not marked contains_credential"
