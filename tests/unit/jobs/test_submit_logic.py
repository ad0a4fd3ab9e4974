from __future__ import annotations

from kubectl_tao.gates.checks import parse_refs
from kubectl_tao.k8s.objects import secret_object


def test_refs_output_is_parsed_without_values() -> None:
    text = "PersistentVolumeClaim data Bound \nSecret creds - HF_TOKEN,AWS_ACCESS_KEY_ID,\n"
    found = parse_refs(text)
    assert found[("PersistentVolumeClaim", "data")] == ("Bound", set())
    assert found[("Secret", "creds")] == ("-", {"HF_TOKEN", "AWS_ACCESS_KEY_ID"})


def test_secret_object_carries_values_only_in_string_data() -> None:
    obj = secret_object("tao-creds-j", "ns", {"tao-job": "j"}, {"K": "v"})
    assert obj["stringData"] == {"K": "v"} and obj["metadata"]["labels"] == {"tao-job": "j"}
