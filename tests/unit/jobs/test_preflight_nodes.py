"""preflight judges the GPU nodes from the cluster (GPU Feature Discovery's labels, the nodes' container runtime,
the NVIDIA RuntimeClasses), runs the host check only on a GPU node, and says in one short line which
kubeconfig and context it tried when there is no cluster (exit 3)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl, fixture_json, review_answer

from kubectl_tao.gates import checks, gatelists, noderuntime
from kubectl_tao.gates.capacity import NODES_READ
from kubectl_tao.gates.gpuinventory import DRA_READ
from kubectl_tao.jobs import preflight

RUNTIME_CLASSES = tuple(checks.RUNTIME_CLASSES_READ[0][:2])
IS_GPU_NODE = preflight.is_gpu_node
GPU_OPERATOR_CDI = "nvidia\nnvidia-cdi\nnvidia-legacy\n"  # the RuntimeClasses the GPU Operator makes with CDI on


@pytest.fixture(autouse=True)
def _laptop(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """A client that is not a GPU node; a host check that runs is recorded (and reports a missing driver)."""
    ran: list[Any] = []

    def host_check(script: str, args: list[str]) -> tuple[int, str]:
        ran.append((script, args))
        return 1, "MISSING: NVIDIA driver not found (nvidia-smi missing)\n  fix: install driver branch 580 (--install)"

    monkeypatch.setattr(preflight, "run_host_check", host_check)
    monkeypatch.setattr(preflight, "is_gpu_node", lambda: False)
    for name in ("TAO_K8S_SKIP_NODE_RUNTIME_CHECK", "TAO_MIN_DRIVER", "TAO_MIN_CUDA"):
        monkeypatch.delenv(name, raising=False)
    return ran


def nodes(fixture: str = "nodes-gfd.json", *, keep: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    items = copy.deepcopy(fixture_json(fixture)["items"])
    return [n for n in items if not keep or n["metadata"]["name"] in keep]


def cluster(fake: FakeKubectl, items: list[dict[str, Any]], *, classes: str | None = "nvidia\n") -> None:
    review, granted = review_answer()
    fake.on(*review, stdout=granted)
    fake.on("version", data=fixture_json("version-gke-1.30.json"))
    fake.capacity({"kind": "List", "items": [{"kind": "Node", **n} for n in items]})
    fake.on(*DRA_READ[:2], data={"kind": "List", "items": []})
    if classes is not None:
        fake.on(*RUNTIME_CLASSES, stdout=classes)


def lines(out: str, name: str) -> list[str]:
    return [line for line in out.splitlines() if line.split(": ", 2)[1:2] == [name]]


# ------------------------------------------------------------------------------------------- this machine


def test_a_client_that_is_not_a_gpu_node_skips_the_host_check_and_gets_no_missing(
    cli: Any, fake_kubectl: FakeKubectl, _laptop: list[Any]
) -> None:
    cluster(fake_kubectl, nodes(keep=("gpu-node-0", "gpu-node-1")))
    code, out, err = cli("preflight")
    assert code == 0, out + err
    assert _laptop == []
    assert lines(out, "host-runtime") == [
        "SKIPPED: host-runtime: this machine is not a GPU node (no /dev/nvidiactl): the GPU nodes are judged from "
        "the cluster (node-runtime)"
    ]
    assert not [line for line in out.splitlines() if line.startswith("MISSING")]


def test_on_a_gpu_node_the_host_check_runs_and_its_missing_names_the_installer(
    cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch, _laptop: list[Any]
) -> None:
    monkeypatch.setattr(preflight, "is_gpu_node", lambda: True)
    cluster(fake_kubectl, nodes(keep=("gpu-node-0",)))
    code, out, _ = cli("preflight")
    assert code == 1
    assert [args for _, args in _laptop] == [["--backend", "kubernetes", "--check-only"]]
    [line] = lines(out, "host-runtime")
    assert line.startswith("MISSING: host-runtime: this GPU node's host runtime is not ready (MISSING: NVIDIA driver "
                           "not found (nvidia-smi missing)) -- run `")
    assert "--backend kubernetes --install --yes` on it" in line


def test_the_gpu_node_test_looks_for_the_drivers_control_device(tmp_path: Path) -> None:
    assert not IS_GPU_NODE(tmp_path / "nvidiactl")
    (tmp_path / "nvidiactl").touch()
    assert IS_GPU_NODE(tmp_path / "nvidiactl")


def test_skipping_the_node_runtime_check_prints_skipped_and_reads_no_runtime_classes(
    cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch, _laptop: list[Any]
) -> None:
    monkeypatch.setenv("TAO_K8S_SKIP_NODE_RUNTIME_CHECK", "1")
    monkeypatch.setattr(preflight, "is_gpu_node", lambda: True)
    cluster(fake_kubectl, nodes(keep=("gpu-node-2",)))  # too old: not judged when skipped
    code, out, err = cli("preflight")
    assert code == 0, out + err
    assert _laptop == []
    [line] = lines(out, "host-runtime")
    assert line.startswith("SKIPPED: host-runtime: TAO_K8S_SKIP_NODE_RUNTIME_CHECK=1: ")
    assert not line.startswith("OK")
    assert lines(out, "node-runtime") == []
    assert not any(RUNTIME_CLASSES[1] in argv for argv in fake_kubectl.argvs())


# ------------------------------------------------------------------------------------------- the GPU nodes


def test_gpu_nodes_are_judged_from_their_gfd_labels_and_runtime(cli: Any, fake_kubectl: FakeKubectl) -> None:
    cluster(fake_kubectl, nodes())
    code, out, err = cli("preflight")
    assert code == 0, out + err
    assert lines(out, "node-runtime") == [
        "WARN: node-runtime: 1 of 4 GPU node(s) cannot run a TAO container (driver >= 580, CUDA >= 13.0): gpu-node-2: "
        "driver 570.172.08 < 580, CUDA 12.8 < 13.0 -- upgrade them, or keep jobs off them (--gpu-product, "
        "--node-selector)",
        "WARN: node-runtime: driver and CUDA of 1 GPU node(s) not known: gpu-node-3 carry no GPU Feature Discovery "
        "labels (nvidia.com/cuda.driver-version.*) -- deploy GPU Feature Discovery (the GPU Operator and the device "
        "plugin's Helm chart include it), or check the node image has driver >= 580, CUDA >= 13.0 and set "
        "TAO_K8S_SKIP_NODE_RUNTIME_CHECK=1",
        "OK: node-runtime: 2 GPU node(s) meet driver >= 580, CUDA >= 13.0: driver 580.95.05, CUDA 13.0",
        "OK: node-runtime: container runtime on the GPU nodes: containerd 1.7.22 (1), containerd 2.1.4 (2), "
        "cri-o 1.23.2 (1); RuntimeClass nvidia",
    ]


def test_where_the_cluster_injects_gpus_through_cdi_a_runtime_without_cdi_is_named(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    cluster(fake_kubectl, nodes(keep=("gpu-node-0", "gpu-node-3")), classes=GPU_OPERATOR_CDI)
    code, out, _ = cli("preflight")
    assert code == 0
    found = lines(out, "node-runtime")
    assert found[0] == (
        "WARN: node-runtime: 1 of 2 GPU node(s) cannot run a TAO container (driver >= 580, CUDA >= 13.0): gpu-node-3: "
        "cri-o 1.23.2 has no CDI support (needs >= 1.24) -- upgrade them, or keep jobs off them (--gpu-product, "
        "--node-selector)"
    )
    assert found[-1].endswith("; RuntimeClass nvidia, nvidia-cdi, nvidia-legacy; GPUs injected through CDI")


def test_every_gpu_node_too_old_is_missing(cli: Any, fake_kubectl: FakeKubectl) -> None:
    cluster(fake_kubectl, nodes(keep=("control-plane-0", "gpu-node-2")))
    code, out, _ = cli("preflight", "-o", "json")
    assert code == 1
    [check] = [c for c in json.loads(out)["checks"] if c["status"] == "MISSING"]
    assert check == {
        "check": "node-runtime",
        "status": "MISSING",
        "message": "no GPU node can run a TAO container (driver >= 580, CUDA >= 13.0): gpu-node-2: driver 570.172.08 "
                   "< 580, CUDA 12.8 < 13.0",
        "fix": "upgrade what is named: the driver (the GPU Operator's driver version, or the node image) or the "
               "container runtime",
    }


def test_the_minimums_follow_the_setup_scripts_settings(
    cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster(fake_kubectl, nodes(keep=("gpu-node-2",)))
    monkeypatch.setenv("TAO_MIN_DRIVER", "570")
    monkeypatch.setenv("TAO_MIN_CUDA", "12.8")
    code, out, _ = cli("preflight")
    assert code == 0
    assert lines(out, "node-runtime")[0] == (
        "OK: node-runtime: 1 GPU node(s) meet driver >= 570, CUDA >= 12.8: driver 570.172.08, CUDA 12.8"
    )


@pytest.mark.parametrize("name", ["TAO_MIN_DRIVER", "TAO_MIN_CUDA"])
def test_a_minimum_that_is_not_a_version_is_bad_input(
    cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv(name, "latest")
    code, out, err = cli("preflight")
    assert (code, out) == (2, "")
    assert err.splitlines() == [f"error: {name}='latest' is not a version; set a dotted number such as "
                                f"{'580' if name == 'TAO_MIN_DRIVER' else '13.0'}, or unset it"]
    assert fake_kubectl.calls == []


def test_the_deprecated_gfd_labels_are_read_where_the_current_ones_are_absent(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    [node] = nodes("nodes-2x8.json", keep=("gpu-node-0",))
    node["metadata"]["labels"]["nvidia.com/cuda.driver.major"] = "570"  # as the local cluster's simulated nodes
    cluster(fake_kubectl, [node])
    code, out, _ = cli("preflight")
    assert code == 1
    assert lines(out, "node-runtime")[0].startswith(
        "MISSING: node-runtime: no GPU node can run a TAO container (driver >= 580, CUDA >= 13.0): gpu-node-0: driver "
        "570 < 580 -- "
    )


def test_a_cluster_without_gpu_nodes_has_none_to_judge(cli: Any, fake_kubectl: FakeKubectl) -> None:
    cluster(fake_kubectl, nodes(keep=("control-plane-0",)))
    code, out, _ = cli("preflight")
    assert code == 0
    assert lines(out, "node-runtime") == ["SKIPPED: node-runtime: no GPU node to judge"]


def test_gpu_product_narrows_the_nodes_judged(cli: Any, fake_kubectl: FakeKubectl) -> None:
    cluster(fake_kubectl, nodes())
    code, out, _ = cli("preflight", "--gpu-product", "NVIDIA-H200")
    assert code == 0
    assert lines(out, "node-runtime") == ["SKIPPED: node-runtime: no GPU node labelled nvidia.com/gpu.product="
                                          "NVIDIA-H200 to judge"]


def test_unreadable_runtime_classes_are_said_and_the_nodes_still_judged(cli: Any, fake_kubectl: FakeKubectl) -> None:
    cluster(fake_kubectl, nodes(keep=("gpu-node-0",)), classes=None)
    fake_kubectl.on(*RUNTIME_CLASSES, rc=1, stderr='Error from server (Forbidden): runtimeclasses.node.k8s.io is '
                    'forbidden: User "dev" cannot list resource "runtimeclasses" in API group "node.k8s.io" at the '
                    "cluster scope")
    code, out, _ = cli("preflight")
    assert code == 0
    assert lines(out, "node-runtime") == [
        "OK: node-runtime: 1 GPU node(s) meet driver >= 580, CUDA >= 13.0: driver 580.95.05, CUDA 13.0",
        "OK: node-runtime: container runtime on the GPU nodes: containerd 2.1.4; RuntimeClasses not read (forbidden)",
    ]


def test_the_nodes_are_read_once_for_the_capacity_and_the_node_runtime(cli: Any, fake_kubectl: FakeKubectl) -> None:
    cluster(fake_kubectl, nodes())
    code, _, _ = cli("preflight", "--gpus", "8")
    assert code == 0
    assert sum(1 for argv in fake_kubectl.argvs() if NODES_READ[-1] in argv) == 1
    assert sum(1 for argv in fake_kubectl.argvs() if RUNTIME_CLASSES[1] in argv) == 1


@pytest.mark.parametrize("fast", [True, False])
def test_both_reducers_keep_the_container_runtime(fast: bool) -> None:
    text = json.dumps({"kind": "NodeList", "items": nodes()})
    page = gatelists.reduce(text, "nodes", fast=fast)
    found = {n["metadata"]["name"]: n["status"].get("nodeInfo", {}).get("containerRuntimeVersion")
             for n in page.items}
    assert found == {"control-plane-0": "containerd://2.1.4", "gpu-node-0": "containerd://2.1.4",
                     "gpu-node-1": "containerd://2.1.4", "gpu-node-2": "containerd://1.7.22",
                     "gpu-node-3": "cri-o://1.23.2"}


def test_versions_and_labels_are_read_as_gfd_and_the_kubelet_write_them() -> None:
    labels = nodes(keep=("gpu-node-0",))[0]["metadata"]["labels"]
    assert (noderuntime.driver_of(labels), noderuntime.cuda_of(labels)) == ("580.95.05", "13.0")
    current = {k: v for k, v in labels.items() if "-version." in k and not k.endswith(".full")}
    assert (noderuntime.driver_of(current), noderuntime.cuda_of(current)) == ("580.95.05", "13.0")
    deprecated = {k: v for k, v in labels.items() if "-version." not in k}
    assert (noderuntime.driver_of(deprecated), noderuntime.cuda_of(deprecated)) == ("580.95.05", "13.0")
    assert noderuntime.version("v1.7.23-k3s2") == (1, 7, 23)
    assert noderuntime.version("Unknown") is None
    assert noderuntime.GpuNode("n", runtime="containerd://2.1.4").runtime_text == "containerd 2.1.4"


# ------------------------------------------------------------------------------------------- no cluster


def test_no_kubeconfig_is_one_short_line_naming_where_kubectl_looked_and_exit_3(
    cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch, tao_env: Path
) -> None:
    monkeypatch.delenv("KUBECONFIG")
    fake_kubectl.on(stderr="E1206 10:00:00.000000   4242 memcache.go:265] couldn't get current server API group "
                    'list: Get "http://localhost:8080/api?timeout=32s": dial tcp [::1]:8080: connect: connection '
                    "refused\nThe connection to the server localhost:8080 was refused - did you specify the right "
                    "host or port?", rc=1)
    code, out, _ = cli("preflight")
    assert code == 3
    [line] = lines(out, "cluster")
    assert line == (
        "MISSING: cluster: no cluster configured: kubectl found no kubeconfig (~/.kube/config does not exist) and fell "
        "back to localhost:8080 -- get your cluster's kubeconfig (`aws eks update-kubeconfig`, `gcloud container "
        "clusters get-credentials`, `az aks get-credentials`, or your admin's file), then pass --kubeconfig FILE or "
        "set $KUBECONFIG"
    )
    assert len(line) < 340 and line.count("aws eks") == 1 and "make cluster" not in line


def test_refused_credentials_name_the_context_and_kubeconfig_and_exit_3(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path
) -> None:
    fake_kubectl.on(stderr="error: You must be logged in to the server (Unauthorized)", rc=1)
    code, out, _ = cli("preflight", "--context", "other")
    assert code == 3
    [line] = lines(out, "cluster")
    assert line == (
        f"MISSING: cluster: the API server https://127.0.0.1:6443 refused the credentials of context other in "
        f"$KUBECONFIG ({tao_env / 'kubeconfig'}): error: You must be logged in to the server (Unauthorized) -- refresh "
        "them (`aws eks update-kubeconfig`, `gcloud container clusters get-credentials`, `az aks get-credentials`, or "
        "your admin's file), then check with `kubectl get nodes`"
    )


def test_a_context_the_kubeconfig_lacks_is_bad_input(cli: Any, fake_kubectl: FakeKubectl) -> None:
    code, out, err = cli("preflight", "--context", "nope")
    assert (code, out) == (2, "")
    assert err.splitlines() == ["error: --context: context 'nope' is not in the kubeconfig; see `kubectl config "
                                "get-contexts`"]
    assert fake_kubectl.calls == []


def test_a_context_kubectl_does_not_know_is_bad_input_too(
    cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch, tao_env: Path
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tao_env / "none"))  # no kubeconfig: kubectl is the one to refuse it
    fake_kubectl.on(stderr='error: context "nope" does not exist', rc=1)
    code, out, _ = cli("preflight", "--context", "nope")
    assert code == 2
    [line] = lines(out, "cluster")
    assert line.startswith("MISSING: cluster: --context: ") and 'context "nope" does not exist' in line


def test_a_kubeconfig_without_a_current_context_says_so(
    cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch, tao_env: Path
) -> None:
    config = tao_env / "no-context"
    config.write_text((tao_env / "kubeconfig").read_text().replace("current-context: lab\n", ""))
    monkeypatch.setenv("KUBECONFIG", str(config))
    fake_kubectl.on(stderr="The connection to the server localhost:8080 was refused - did you specify the right host "
                    "or port?", rc=1)
    code, out, _ = cli("preflight")
    assert code == 3
    assert lines(out, "cluster") == [
        f"MISSING: cluster: no context selected in $KUBECONFIG ({config}): kubectl fell back to localhost:8080 -- pick "
        "one (`kubectl config get-contexts`, then --context NAME or `kubectl config use-context NAME`)"
    ]


def test_many_failing_nodes_are_named_three_then_counted() -> None:
    from kubectl_tao.gates import verdicts
    from kubectl_tao.gates.gatefacts import NodeRuntimeSeen
    from kubectl_tao.gates.gaterequest import PREFLIGHT, GateRequest

    old = tuple(noderuntime.GpuNode(f"gpu-{i}", "550.54.15", "12.4", "containerd://1.7.22") for i in range(5))
    found = verdicts.node_runtime(GateRequest(PREFLIGHT, "ns"), NodeRuntimeSeen(old, ()))
    assert [v.status for v in found] == [verdicts.REFUSE, verdicts.OK]
    assert found[0].message.endswith("gpu-2: driver 550.54.15 < 580, CUDA 12.4 < 13.0; and 2 more")
    assert found[1].message == "container runtime on the GPU nodes: containerd 1.7.22; no NVIDIA RuntimeClass"
