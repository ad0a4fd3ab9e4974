"""The capacity gate never disappears silently: without `list pods` cluster-wide it falls back to the nodes'
allocatable (per-node fit, usage unknown) and says so; without `list nodes` either it warns that capacity
was not checked. Driven through `submit --dry-run=server` with recorded kubectl answers."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl, fixture_json, review_answer

from kubectl_tao.gates.capacity import NODES_READ, PODS_READ

PODS_FORBIDDEN = (
    'Error from server (Forbidden): pods is forbidden: User "system:serviceaccount:t:u" cannot list resource '
    '"pods" in API group "" at the cluster scope'
)
NODES_FORBIDDEN = (
    'Error from server (Forbidden): nodes is forbidden: User "system:serviceaccount:t:u" cannot list resource '
    '"nodes" in API group "" at the cluster scope'
)
SUBMIT = ["submit", "--image", "busybox", "--command", "true", "--storage-tier", "C", "--s3-output", "s3://bucket/out",
          "--dry-run=server"]


def allowed(fake: FakeKubectl) -> None:
    review, granted = review_answer()
    fake.on(*review, stdout=granted)
    fake.on("create", "--dry-run=server", stdout="job.batch/x created (server dry run)\n")


def pods_forbidden(fake: FakeKubectl) -> None:
    """Every permission submit asks for, two 8-GPU nodes, and the pods of all namespaces refused."""
    allowed(fake)
    fake.capacity_refused(pods=PODS_FORBIDDEN)
    fake.capacity(fixture_json("nodes-2x8.json"))


def test_forbidden_pods_fall_back_to_per_node_allocatable(cli: Any, fake_kubectl: FakeKubectl) -> None:
    pods_forbidden(fake_kubectl)
    code, _, err = cli(*SUBMIT, "--gpus", "8")
    assert code == 0, err
    assert "warning: cannot list pods in all namespaces" in err
    assert "checked each node's allocatable nvidia.com/gpu only, not what is in use" in err
    # the nodes were read alongside the pods: the fallback costs no further kubectl call
    reads = [call.argv for call in fake_kubectl.calls if call.argv[:2] == ["get", "--raw"]]
    assert sorted(reads) == sorted([NODES_READ, PODS_READ])


def test_forbidden_pods_still_refuse_what_no_node_can_hold(cli: Any, fake_kubectl: FakeKubectl) -> None:
    pods_forbidden(fake_kubectl)
    code, out, err = cli(*SUBMIT, "--gpus", "12")
    assert code == 4, err
    [line] = err.strip().splitlines()[-1:]
    assert out == "" and line.startswith("error: ") and "12 nvidia.com/gpu" in line


def test_require_fit_now_refuses_when_usage_is_unknown(cli: Any, fake_kubectl: FakeKubectl) -> None:
    pods_forbidden(fake_kubectl)
    code, _, err = cli(*SUBMIT, "--gpus", "8", "--require-fit-now")
    assert code == 1
    assert err.strip().splitlines()[-1].startswith("error: --require-fit-now: cannot tell whether the GPUs are free")


def test_forbidden_nodes_warn_that_capacity_was_not_checked(cli: Any, fake_kubectl: FakeKubectl) -> None:
    allowed(fake_kubectl)
    fake_kubectl.capacity_refused(nodes=NODES_FORBIDDEN, pods=PODS_FORBIDDEN)
    code, _, err = cli(*SUBMIT, "--gpus", "8")
    assert code == 0, err
    [warning] = [line for line in err.splitlines() if "capacity" in line]
    assert warning.startswith("warning: cannot list nodes") and "GPU capacity was not checked" in warning


def test_preflight_prints_the_warning_submit_prints_without_cluster_wide_pods(fake_kubectl: FakeKubectl) -> None:
    from kubectl_tao.jobs.preflight import OK, WARN, cluster_checks
    from kubectl_tao.k8s.kubectl import Kubectl

    fake_kubectl.on("version", data=fixture_json("version-gke-1.30.json"))
    pods_forbidden(fake_kubectl)
    checks = cluster_checks(Kubectl(), "ns", gpus=8, nodes=1, pvc=None, need_secrets=False)
    gpus = [check for check in checks if check.name == "gpu-operator"]
    assert [check.status for check in gpus] == [OK, WARN]
    assert gpus[0].message.startswith("16 nvidia.com/gpu allocatable on 2 node(s)")
    assert gpus[1].message.startswith("cannot list pods in all namespaces")
    assert "checked each node's allocatable nvidia.com/gpu only, not what is in use" in gpus[1].message
    [capacity] = [check for check in checks if check.name == "capacity"]
    assert capacity.status == OK and capacity.message.startswith("fits: ")


DRA_FORBIDDEN = (
    'Error from server (Forbidden): resourceslices.resource.k8s.io is forbidden: User "system:serviceaccount:t:u" '
    'cannot list resource "resourceslices" in API group "resource.k8s.io" at the cluster scope'
)


def test_forbidden_dra_read_is_named_when_the_job_does_not_fit_without_it(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    allowed(fake_kubectl)
    fake_kubectl.capacity(fixture_json("nodes-2x8.json"))
    fake_kubectl.on("get", "resourceslices", stderr=DRA_FORBIDDEN, rc=1)
    code, _, err = cli(*SUBMIT, "--gpus", "12")
    assert code == 4
    assert "DRA GPUs not counted: cannot list ResourceSlices" in err
    assert sum("resourceslices" in " ".join(argv) for argv in fake_kubectl.argvs()) == 1


def test_forbidden_dra_read_stays_quiet_when_device_plugin_gpus_fit(cli: Any, fake_kubectl: FakeKubectl) -> None:
    allowed(fake_kubectl)
    fake_kubectl.capacity(fixture_json("nodes-2x8.json"))
    fake_kubectl.on("get", "resourceslices", stderr=DRA_FORBIDDEN, rc=1)
    code, _, err = cli(*SUBMIT, "--gpus", "8")
    assert code == 0, err
    assert "DRA" not in err
    # DRA devices can only add GPUs: with the device plugins' GPUs enough, they are not even read
    assert not any("resourceslices" in " ".join(argv) for argv in fake_kubectl.argvs())


def test_a_job_that_fits_only_on_dra_gpus_reads_them_after_the_device_plugins_fall_short(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    from kubectl_tao.gates.gpuinventory import DRA_READ

    allowed(fake_kubectl)
    capacity = fixture_json("dra-nodes-pods.json")  # dra-node-0: 4 DRA GPUs, 3 allocated; no device plugin
    capacity["items"] = [i for i in capacity["items"] if not i["metadata"]["name"].startswith("gpu-node-")]
    fake_kubectl.capacity(capacity)
    fake_kubectl.on(*DRA_READ[:2], data=fixture_json("dra-objects.json"))
    code, _, err = cli(*SUBMIT, "--gpus", "1")
    assert code == 0, err  # without the DRA devices: exit 4, no node has allocatable nvidia.com/gpu
    assert "queue:" not in err and "never" not in err  # it fits now, on the DRA node's free GPU
    reads = [argv for argv in fake_kubectl.argvs() if "resourceslices" in " ".join(argv)]
    assert len(reads) == 1
    # read once the nodes and pods showed the device plugins short, not beside them
    order = [" ".join(argv) for argv in fake_kubectl.argvs()]
    assert order.index(" ".join(reads[0])) > max(i for i, a in enumerate(order) if "--raw" in a)


def _dra_short(fake: FakeKubectl) -> None:
    """Device plugins' GPUs short for `--gpus 1` (no device plugin on the DRA node), DRA devices that fit it."""
    from kubectl_tao.gates.gpuinventory import DRA_READ

    capacity = fixture_json("dra-nodes-pods.json")
    capacity["items"] = [i for i in capacity["items"] if not i["metadata"]["name"].startswith("gpu-node-")]
    fake.capacity(capacity)
    fake.on(*DRA_READ[:2], data=fixture_json("dra-objects.json"))


def test_the_dra_read_starts_while_the_slowest_gate_still_runs(
    cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server dry run (with the permission reviews) is answered only once the DRA read has started: the
    DRA read waits for the nodes and pods, not for every gate."""
    from support import fake_kubectl as fake_module

    allowed(fake_kubectl)
    _dra_short(fake_kubectl)
    dra_started = threading.Event()
    waited: list[bool] = []
    real_wait, real_spawn = fake_module.FakeRunning.wait, fake_kubectl.spawn

    def spawn(kc: Any, args: list[str], full: list[str], stdin: bytes) -> Any:
        running = real_spawn(kc, args, full, stdin)
        if "resourceslices" in " ".join(args):
            dra_started.set()
        return running

    def wait(self: Any, **kwargs: Any) -> Any:
        if "--dry-run=server" in self.args:
            waited.append(dra_started.wait(timeout=10))
        return real_wait(self, **kwargs)

    monkeypatch.setattr(fake_kubectl, "spawn", spawn)
    monkeypatch.setattr(fake_module.FakeRunning, "wait", wait)
    code, _, err = cli(*SUBMIT, "--gpus", "1")
    assert code == 0, err
    assert waited == [True]


def test_a_refused_permission_stops_the_dra_read_unread(cli: Any, fake_kubectl: FakeKubectl) -> None:
    review, denied = review_answer(deny=("create jobs.batch",))
    fake_kubectl.on(*review, stdout=denied)
    fake_kubectl.on("create", "--dry-run=server", stdout="job.batch/x created (server dry run)\n")
    _dra_short(fake_kubectl)
    code, _, err = cli(*SUBMIT, "--gpus", "1")
    assert code == 1 and "permission denied" in err and "create jobs.batch" in err
    (killed,) = fake_kubectl.killed()  # started once the device plugins fell short, stopped unread
    assert "resourceslices" in " ".join(killed)
