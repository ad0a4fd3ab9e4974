"""`--queue` jobs against the real Kueue controller of the local cluster (scripts/local-cluster-kueue.sh):
admission by ClusterQueue quota, all ranks at once; fit, status and explain in Kueue's own words; the
errors of a queue that does not exist or cannot admit anything. GPUs are simulated (kwok nodes, 2 x 8).

Each test makes its own ResourceFlavor and ClusterQueue (cluster-scoped, named after the test's namespace)
and a LocalQueue `team` in its namespace, and deletes them at the end.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from support.cluster import STAY_RUNNING, TAO_IMAGE, Tao, submitted_id, wait_for

pytestmark = pytest.mark.e2e

WORKLOADS = "workloads.kueue.x-k8s.io"
GPU = "nvidia.com/gpu"


@pytest.fixture(scope="module", autouse=True)
def kueue_runs(cluster: Any) -> None:
    found = cluster.kubectl("get", "crd", "clusterqueues.kueue.x-k8s.io", "-o", "name", check=False)
    if found.returncode != 0:
        pytest.fail(
            "this cluster runs no Kueue: bring it up with KUBECTL_TAO_KUEUE=1 (the default of scripts/local-cluster)"
        )


class Queue:
    """A ResourceFlavor, a ClusterQueue with `gpus` nvidia.com/gpu of nominal quota, and LocalQueue `team`."""

    def __init__(self, tao: Tao, gpus: int, flavor: str | None = None) -> None:
        self.tao = tao
        self.cq = f"cq-{tao.namespace}"
        self.flavor = f"rf-{tao.namespace}"
        objects: list[dict[str, Any]] = [
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": self.flavor}},
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": self.cq},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": [GPU],
                            "flavors": [{"name": flavor or self.flavor,
                                         "resources": [{"name": GPU, "nominalQuota": gpus}]}],
                        }
                    ],
                },
            },
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "team", "namespace": tao.namespace},
                "spec": {"clusterQueue": self.cq},
            },
        ]
        tao.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))

    def delete(self) -> None:
        self.tao.kubectl("delete", "jobs", "--all", "--cascade=foreground", "--wait=false", check=False)
        wait_for(lambda: self.tao.kubectl("get", "pods", "-o", "name").stdout == "", 60, message="the pods to go")
        self.tao.kubectl("delete", "localqueues.kueue.x-k8s.io", "--all", "--ignore-not-found", check=False)
        self.tao.kubectl("delete", "clusterqueue.kueue.x-k8s.io", self.cq, "--ignore-not-found", check=False)
        self.tao.kubectl("delete", "resourceflavor.kueue.x-k8s.io", self.flavor, "--ignore-not-found", check=False)

    def get(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(
            self.tao.kubectl("get", "clusterqueue.kueue.x-k8s.io", self.cq, "-o", "json").stdout
        )
        return result

    def reserved(self) -> int:
        usage = self.get().get("status", {}).get("flavorsReservation") or []
        return sum(int(r.get("total", 0)) for f in usage for r in f.get("resources", []) if r["name"] == GPU)

    def active(self) -> bool:
        conditions = self.get().get("status", {}).get("conditions") or []
        return any(c["type"] == "Active" and c["status"] == "True" for c in conditions)


@pytest.fixture()
def queue16(tao: Tao) -> Iterator[Queue]:
    q = Queue(tao, 16)
    wait_for(q.active, 30, message="the ClusterQueue to become Active")
    yield q
    q.delete()


def submit(tao: Tao, *extra: str, nodes: int = 1, gpus: int = 8, stay: bool = False) -> str:
    args = ["submit", "--image", TAO_IMAGE, "--image-pull-secret", "ngc", "--network-arch", "dino", "--action",
            "train", "--gpus", str(gpus), "--nodes", str(nodes), "--pvc", "tao-data", "--queue", "team",
            "--command", "dino train -e /workspace/specs/train.yaml", *extra]
    if stay:
        args += ["--annotation", f"{STAY_RUNNING}=true"]
    return submitted_id(tao(*args))


def status(tao: Tao, record_id: str) -> dict[str, Any]:
    result = tao("status", record_id, "-o", "json")
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def job(tao: Tao, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(tao.kubectl("get", "job", name, "-o", "json").stdout)
    return data


def pod_phases(tao: Tao, name: str) -> list[str]:
    out = tao.kubectl("get", "pods", "-l", f"job-name={name}", "-o", "jsonpath={.items[*].status.phase}").stdout
    return out.split()


def workload(tao: Tao, name: str) -> dict[str, Any] | None:
    uid = job(tao, name)["metadata"]["uid"]
    items = json.loads(tao.kubectl("get", WORKLOADS, "-l", f"kueue.x-k8s.io/job-uid={uid}", "-o", "json").stdout)
    return (items.get("items") or [None])[0]


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return dict(c)
    return {}


def fit(tao: Tao, *args: str) -> tuple[int, dict[str, Any]]:
    result = tao("fit", *args, "-o", "json")
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else {}


def explain(tao: Tao, record_id: str) -> tuple[int, list[dict[str, Any]]]:
    result = tao("explain", record_id, "-o", "json")
    return result.returncode, json.loads(result.stdout)["findings"]


def test_a_queued_gang_waits_suspended_while_quota_is_used_and_is_admitted_whole(tao: Tao, queue16: Queue) -> None:
    holder = submit(tao, stay=True)  # 1 x 8 of the 16 GPUs of quota
    wait_for(lambda: pod_phases(tao, holder) == ["Running"], 60, message="the holder to run")
    wait_for(lambda: queue16.reserved() == 8, 30, message="the ClusterQueue's status to count the holder")

    gang = submit(tao, nodes=2)  # 2 x 8: the nodes have 8 free GPUs (one rank could start), the quota has not 16
    wl = wait_for(lambda: (w := workload(tao, gang)) and condition(w, "QuotaReserved").get("reason") == "Pending"
                  and w, 30, message="Kueue to leave the gang's Workload pending")
    kueue_says = condition(wl, "QuotaReserved")["message"]
    wait_for(lambda: queue16.get()["status"].get("pendingWorkloads") == 1, 30,
             message="the ClusterQueue's status to count the waiting gang")
    assert f"insufficient unused quota for {GPU}" in kueue_says, kueue_says
    assert job(tao, gang)["spec"]["suspend"] is True and pod_phases(tao, gang) == []  # no rank started

    data = status(tao, gang)
    assert (data["state"], data["reason"]) == ("PENDING", "Suspended")
    assert data["message"] == f"waiting for admission (Kueue LocalQueue team): {kueue_says}"
    assert data["live"]["kueue"]["state"] == "pending" and data["live"]["kueue"]["workload"] == wl["metadata"]["name"]
    assert kueue_says in tao("status", gang).stdout

    code, findings = explain(tao, gang)
    assert code == 1 and findings[0]["code"] == "awaiting-admission"
    assert kueue_says in findings[0]["evidence"]
    assert f"ClusterQueue {queue16.cq}: 8 of 16 {GPU} reserved in flavor {queue16.flavor}" in findings[0]["evidence"]
    assert "1 workload(s) admitted, 1 pending" in findings[0]["evidence"]

    code, verdict = fit(tao, "--gpus", "8", "--nodes", "2", "--queue", "team")
    assert code == 1 and verdict["verdict"] == "queue", verdict
    assert f"ClusterQueue {queue16.cq} has 8 of 16 {GPU} reserved in flavor {queue16.flavor} (8 unused)" in verdict[
        "message"]
    assert "1 workload pending" in verdict["message"]
    assert (verdict["quota"]["nominal"], verdict["quota"]["used"], verdict["quota"]["free"]) == (16, 8, 16 - 8)

    assert tao("cancel", holder).returncode == 0
    wait_for(lambda: condition(workload(tao, gang), "Admitted").get("status") == "True", 60,
             message="Kueue to admit the gang once the quota freed")
    assert job(tao, gang)["spec"].get("suspend") is False
    # Admitted whole: both ranks were created together and both run.
    wait_for(lambda: pod_phases(tao, gang) == ["Running", "Running"] or None, 60, message="both ranks to run")
    data = status(tao, gang)
    assert data["state"] in ("RUNNING", "COMPLETE"), data
    admission = workload(tao, gang)["status"]["admission"]  # type: ignore[index]
    assert admission["clusterQueue"] == queue16.cq
    assert admission["podSetAssignments"][0]["count"] == 2
    assert admission["podSetAssignments"][0]["resourceUsage"][GPU] == "16"


def test_fit_reads_the_cluster_queue_quota_and_what_kueue_reserved(tao: Tao) -> None:
    q = Queue(tao, 8)
    try:
        wait_for(q.active, 30, message="the ClusterQueue to become Active")
        code, data = fit(tao, "--gpus", "8", "--queue", "team")
        assert code == 0 and data["verdict"] == "fits" and data["localQueue"] == "team"
        assert data["quota"]["cluster_queue"] == q.cq and data["quota"]["nominal"] == 8
        code, data = fit(tao, "--gpus", "8", "--nodes", "2", "--queue", "team")
        assert code == 4 and data["verdict"] == "never"
        assert f"ClusterQueue {q.cq} can admit at most 8" in data["message"]
        submit(tao, stay=True)
        wait_for(lambda: q.reserved() == 8, 30, message="Kueue to reserve the quota")
        code, data = fit(tao, "--gpus", "4", "--queue", "team")
        assert code == 1 and data["verdict"] == "queue"
        assert f"has 8 of 8 {GPU} reserved in flavor {q.flavor} (0 unused)" in data["message"]
        # A request that can never be admitted is refused before anything is created (exit 4).
        result = tao("submit", "--image", TAO_IMAGE, "--network-arch", "dino", "--action", "train", "--gpus", "8",
                     "--nodes", "2", "--pvc", "tao-data", "--queue", "team", "--command", "true")
        assert result.returncode == 4 and f"ClusterQueue {q.cq} can admit at most 8" in result.stderr
    finally:
        q.delete()


def test_gpus_queue_shows_the_quota_an_admitted_job_left(tao: Tao, queue16: Queue) -> None:
    result = tao("gpus", "--queue", "team", "-o", "json")
    assert result.returncode == 0, result.stderr
    flavor = {"name": queue16.flavor, "nominalQuota": 16, "reserved": 0, "used": 0, "borrowed": 0, "remaining": 16,
              "borrowingLimit": None}
    assert json.loads(result.stdout)["queue"]["flavors"] == [flavor]

    holder = submit(tao, stay=True)  # 1 x 8, admitted at once
    wait_for(lambda: condition(workload(tao, holder), "Admitted").get("status") == "True", 30,
             message="Kueue to admit the job")
    wait_for(lambda: queue16.reserved() == 8, 30, message="the ClusterQueue's status to count the job")
    wait_for(lambda: pod_phases(tao, holder) == ["Running"], 60, message="the job to run")
    result = tao("gpus", "--queue", "team", "-o", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["queue"]["clusterQueue"] == queue16.cq and data["queue"]["remaining"] == 8
    assert data["queue"]["flavors"] == [{**flavor, "reserved": 8, "used": 8, "remaining": 8}]
    assert {"namespace": tao.namespace, "gpus": 8} in data["namespaces"]
    table = tao("gpus", "--queue", "team").stdout.split("\n\n")[-1].splitlines()
    assert table[0].split() == ["LOCALQUEUE", "CLUSTERQUEUE", "FLAVOR", "NOMINAL", "RESERVED", "REMAINING"]
    assert table[1].split() == ["team", queue16.cq, queue16.flavor, "16", "8", "8"]


def test_a_cluster_queue_kueue_holds_inactive_is_never(tao: Tao) -> None:
    q = Queue(tao, 8, flavor="no-such-flavor")
    try:
        wait_for(lambda: "FlavorNotFound" in json.dumps(q.get().get("status", {})), 30,
                 message="Kueue to mark the ClusterQueue inactive")
        code, data = fit(tao, "--gpus", "1", "--queue", "team")
        assert code == 4 and data["verdict"] == "never"
        assert data["message"].startswith(f"never (until the queue is fixed): ClusterQueue {q.cq} admits no workload: "
                                          "FlavorNotFound"), data["message"]
        result = tao("gpus", "--queue", "team")
        assert (result.returncode, result.stdout) == (2, "")
        assert result.stderr.startswith(f"error: --queue team: ClusterQueue {q.cq} admits no workload (FlavorNotFound")
        assert result.stderr.count("\n") == 1
    finally:
        q.delete()


def test_submit_to_a_queue_that_does_not_exist_is_refused_and_creates_nothing(tao: Tao) -> None:
    result = tao("submit", "--image", TAO_IMAGE, "--network-arch", "dino", "--action", "train", "--gpus", "8",
                 "--pvc", "tao-data", "--queue", "nosuch", "--command", "true")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        f"error: --queue nosuch: no LocalQueue 'nosuch' in namespace {tao.namespace} (found: none); "
        f"`kubectl get localqueues.kueue.x-k8s.io -n {tao.namespace}` lists them\n"
    )
    assert tao.leftovers() == [] and tao.records() == []
    result = tao("gpus", "--queue", "nosuch")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(f"error: --queue nosuch: no LocalQueue 'nosuch' in namespace {tao.namespace}")


def test_a_queue_deleted_under_a_waiting_job_is_inadmissible_and_cancel_removes_everything(
    tao: Tao, queue16: Queue
) -> None:
    holder = submit(tao, nodes=2, stay=True)
    wait_for(lambda: queue16.reserved() == 16, 30, message="the holder to take the quota")
    waiting = submit(tao)
    wait_for(lambda: condition(workload(tao, waiting), "QuotaReserved").get("reason") == "Pending", 30,
             message="the second job to wait")
    tao.kubectl("delete", "localqueue.kueue.x-k8s.io", "team")
    data = wait_for(lambda: (d := status(tao, waiting))["reason"] == "Inadmissible" and d, 30,
                    message="Kueue to call the job inadmissible")
    assert data["message"] == "Kueue cannot admit the job (Kueue LocalQueue team): LocalQueue team doesn't exist"
    code, findings = explain(tao, waiting)
    assert code == 1 and findings[0]["code"] == "kueue-inadmissible"
    assert f"create LocalQueue team in namespace {tao.namespace}" in findings[0]["fix"]
    wl = workload(tao, waiting)
    assert wl is not None
    for record_id in (waiting, holder):
        assert tao("cancel", record_id).returncode == 0
    assert tao.leftovers() == [] and tao.record(waiting)["terminal_state"] == "CANCELED"
    wait_for(lambda: tao.kubectl("get", WORKLOADS, wl["metadata"]["name"], "--ignore-not-found", "-o", "name").stdout
             == "", 30, message="the Workload to be collected with its Job")
