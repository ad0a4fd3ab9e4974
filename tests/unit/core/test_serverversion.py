"""The server version gate over `kubectl version -o json` recorded from EKS, GKE, AKS and plain clusters."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import FIXTURES as FIXTURES_ROOT

from kubectl_tao.core import serverversion as versions
from kubectl_tao.core.errors import TaoError

FIXTURES = FIXTURES_ROOT / "k8s"


def load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


# ------------------------------------------------------------------------------------------- versions


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("version-eks-1.28.json", (1, 28, 3, "v1.28.3-eks-4f4795d")),
        ("version-gke-1.30.json", (1, 30, 5, "v1.30.5-gke.1014001")),
        ("version-aks-1.29.json", (1, 29, 7, "v1.29.7")),
        ("version-1.27.json", (1, 27, 9, "v1.27.9")),
    ],
)
def test_parse_server_version_reads_git_version_with_vendor_suffixes(fixture: str, expected: tuple) -> None:
    version = versions.parse_server_version(load(fixture))
    assert (version.major, version.minor, version.patch, version.text) == expected


def test_parse_server_version_falls_back_to_major_minor_with_plus_suffix() -> None:
    raw = {"serverVersion": {"major": "1", "minor": "28+", "gitVersion": "unknown-build"}}
    version = versions.parse_server_version(raw)
    assert (version.major, version.minor, version.patch) == (1, 28, 0)
    assert version.text == "unknown-build"


def test_parse_server_version_without_git_version_names_major_minor() -> None:
    version = versions.parse_server_version({"serverVersion": {"major": "1", "minor": "31"}})
    assert version.text == "v1.31"


@pytest.mark.parametrize(
    ("raw", "what"),
    [
        (load("version-client-only.json"), "no serverVersion"),
        ([], "not a JSON object"),
        (None, "not a JSON object"),
        ({"serverVersion": {"major": "one", "minor": "x"}}, "unrecognised version fields"),
        ({"serverVersion": {"major": "1"}}, "unrecognised version fields"),
        ({"serverVersion": "v1.28"}, "no serverVersion"),
    ],
)
def test_parse_server_version_rejects_malformed_output(raw: Any, what: str) -> None:
    with pytest.raises(TaoError) as info:
        versions.parse_server_version(raw)
    assert str(info.value).startswith("cannot read the server version from `kubectl version -o json`: ")
    assert what in str(info.value)


def test_multi_node_on_1_27_is_too_old_and_says_why() -> None:
    version = versions.parse_server_version(load("version-1.27.json"))
    message = versions.too_old(version, versions.MULTI_NODE_MIN_VERSION, "multi-node jobs")
    assert message.startswith("multi-node jobs need Kubernetes >= 1.28 (stable Indexed Job pod hostnames")
    assert "<job>-<index> for MASTER_ADDR" in message
    assert "this cluster runs v1.27.9" in message
    assert "\n" not in message


@pytest.mark.parametrize("fixture", ["version-eks-1.28.json", "version-gke-1.30.json", "version-aks-1.29.json"])
def test_1_28_and_newer_run_multi_node_jobs(fixture: str) -> None:
    assert versions.too_old(versions.parse_server_version(load(fixture))) == ""


def test_retries_per_index_needs_1_29() -> None:
    minimum = versions.RETRIES_PER_INDEX_MIN_VERSION
    eks_128 = versions.parse_server_version(load("version-eks-1.28.json"))
    message = versions.too_old(eks_128, minimum, "--retries-per-index")
    assert "--retries-per-index need Kubernetes >= 1.29" in message
    assert "backoffLimitPerIndex" in message
    assert versions.too_old(versions.parse_server_version(load("version-aks-1.29.json")), minimum,
                            "--retries-per-index") == ""


def test_version_comparison_uses_patch_level() -> None:
    version = versions.ServerVersion(1, 28, 3, "v1.28.3")
    assert version.at_least((1, 28))
    assert version.at_least((1, 28, 3))
    assert not version.at_least((1, 28, 4))
    assert not version.at_least((2, 0))
