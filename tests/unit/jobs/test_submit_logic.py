from __future__ import annotations

import pytest

from kubectl_tao.core.errors import GateError
from kubectl_tao.jobs.submit import Plan, check_refs, image_pull_warning, parse_refs, registry_of
from kubectl_tao.k8s.kubectl import Completed
from kubectl_tao.k8s.objects import secret_object


def plan(**over: object) -> Plan:
    base: dict = {"record": {}, "render": lambda *a: [], "image": "busybox", "gpus": 0, "nodes": 1}
    base.update(over)
    return Plan(**base)


def test_refs_output_is_parsed_without_values() -> None:
    text = "PersistentVolumeClaim data Bound \nSecret creds - HF_TOKEN,AWS_ACCESS_KEY_ID,\n"
    found = parse_refs(text)
    assert found[("PersistentVolumeClaim", "data")] == ("Bound", set())
    assert found[("Secret", "creds")] == ("-", {"HF_TOKEN", "AWS_ACCESS_KEY_ID"})


def test_missing_pvc_is_refused_before_launch() -> None:
    with pytest.raises(GateError, match="PersistentVolumeClaim 'data' not found in namespace ns"):
        check_refs(plan(pvc="data"), "ns", Completed("", "not found", 1))


def test_unbound_pvc_is_refused() -> None:
    with pytest.raises(GateError, match="is Pending, not Bound"):
        check_refs(plan(pvc="data"), "ns", Completed("PersistentVolumeClaim data Pending \n", "", 0))


def test_missing_secret_key_is_refused() -> None:
    result = Completed("Secret creds - HF_TOKEN,\n", "", 0)
    with pytest.raises(GateError, match="lacks key\\(s\\) NGC_KEY"):
        check_refs(plan(secret_refs={"creds": ["HF_TOKEN", "NGC_KEY"]}), "ns", result)


def test_missing_image_pull_secret_is_refused() -> None:
    with pytest.raises(GateError, match="--image-pull-secret: Secret 'ngc' not found"):
        check_refs(plan(image_pull_secret="ngc"), "ns", Completed("", "", 1))


@pytest.mark.parametrize(
    ("image", "registry"),
    [("nvcr.io/nvidia/tao:6", "nvcr.io"), ("busybox", "docker.io"), ("library/busybox", "docker.io"),
     ("localhost:5000/x", "localhost:5000")],
)
def test_registry_of_image(image: str, registry: str) -> None:
    assert registry_of(image) == registry


def test_nvcr_image_without_pull_secret_warns() -> None:
    assert "nvcr.io" in (image_pull_warning(plan(image="nvcr.io/nvidia/tao:6")) or "")
    assert image_pull_warning(plan(image="nvcr.io/nvidia/tao:6", image_pull_secret="ngc")) is None


def test_secret_object_carries_values_only_in_string_data() -> None:
    obj = secret_object("tao-creds-j", "ns", {"tao-job": "j"}, {"K": "v"})
    assert obj["stringData"] == {"K": "v"} and obj["metadata"]["labels"] == {"tao-job": "j"}
