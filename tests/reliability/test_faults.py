"""Real faults in the middle of `submit`: the API server is killed (SIGKILL: gone, connection refused) or
frozen (SIGSTOP: a hang, cut short by a --request-timeout on the calls from the fault on) at each step
after the record opened, by the tests/reliability/fault-kubectl wrapper given as KUBECTL_TAO_KUBECTL (and at
the gates' server dry run, before it opens: then no record and nothing on the cluster). Then:

- right away the record is truthful: ERROR with a reason, or UNKNOWN (the Job may exist), or RUNNING with
  the Job there;
- while the server is still down, `status` exits 3, says so, and changes nothing;
- once the server is back, `status` settles the record (ERROR when no Job was created, RUNNING with the
  Job's UID pinned and its Secret/Service owned by it when it was), and `cancel` leaves nothing behind.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cluster import STAY_RUNNING, Cluster, Tao, bound_claim_objects, get, kubectl, unique_name, wait_for

from .helpers import (
    CLIENTS,
    FAULT_KUBECTL,
    ControlPlane,
    api_ready,
    check_record,
    names_of,
    objects,
    owned_by,
    record_ids,
    snapshot,
    wait_gone,
)
from .helpers import states as record_states
from .stats import STATS

# (name, regex on the space-joined kubectl argv, when, delay before the signal in `during`)
POINTS = {
    # the record has just opened (submit's server dry run is a gate: it ran before the open)
    "between-dry-run-and-create": (r" create -f - ", "before", 0.0),
    "during-create": (r" create -f - ", "during", 0.07),
    "after-create-before-adopt": (r" create -f - ", "after", 0.0),
    "during-adopt-patch": (r" patch -f - ", "during", 0.05),
}
KINDS = ("kill", "stop")
VARIANTS = {
    # one pod with a credential Secret created in the same stream as the Job
    "single-node-credentials": ["--gpus", "0", "--env-file", "{env_file}"],
    # an Indexed Job of two pods with its headless Service, no credentials
    "multi-node-service": ["--gpus", "0", "--nodes", "2"],
}
# kubectl --request-timeout from the fault on (the wrapper adds it for a frozen server), per request
SUBMIT_TIMEOUT = "1500ms"
DOWN_TIMEOUT = "400ms"


@pytest.fixture(scope="module")
def fault_namespace(cluster: Cluster) -> Iterator[str]:
    """One namespace with a Bound ReadWriteMany PVC for every fault (created before any fault, so no
    test waits on volume binding right after a restart)."""
    name = unique_name("faults")
    pv = f"pv-{name}"
    kubectl("create", "namespace", name)
    items = bound_claim_objects(name, pv)
    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    wait_for(
        lambda: kubectl("get", "pvc", "tao-data", "-o", "jsonpath={.status.phase}", ns=name).stdout == "Bound",
        timeout=60,
        message="PVC tao-data to bind",
    )
    yield name
    kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)
    kubectl("delete", "pv", pv, "--wait=false", "--ignore-not-found", check=False)


@pytest.fixture(scope="module", autouse=True)
def fresh_clients_afterwards(control_plane: ControlPlane) -> Iterator[None]:
    """After ten API server kills the controllers reconnect only after a long backoff: restart them."""
    yield
    control_plane.restart(*CLIENTS)


@pytest.fixture()
def plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """The control plane, guaranteed whole again after each test (even a failed one)."""
    yield control_plane
    control_plane.resume("kube-apiserver")
    if control_plane.state("kube-apiserver") in ("", "Z", "X"):
        control_plane.start("kube-apiserver")
    wait_for(api_ready, timeout=60, message="the API server after the fault")


def _one_line_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, f"expected one error line: {stderr!r}"
    assert "Traceback" not in stderr
    return lines[0]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("point", list(POINTS))
def test_api_server_fault_mid_submit_leaves_a_truthful_record_and_no_orphans(
    point: str, kind: str, variant: str, cluster: Cluster, fault_namespace: str, plane: ControlPlane, tmp_path: Path
) -> None:
    STATS.faults_injected += 1
    tao = Tao(cluster, fault_namespace, tmp_path / "state")
    env_file = tmp_path / "creds.env"
    env_file.write_text("HF_TOKEN=hf_FaultInjection0123456789abcdefgh\n", encoding="utf-8")
    match, when, delay = POINTS[point]
    fired = tmp_path / "fired"
    fault_env = {
        "KUBECTL_TAO_KUBECTL": str(FAULT_KUBECTL),
        "FAULT_REAL_KUBECTL": str(cluster.bin_dir / "kubectl"),
        "FAULT_PIDFILE": str(plane.pidfile("kube-apiserver")),
        "FAULT_MATCH": match,
        "FAULT_WHEN": when,
        "FAULT_KIND": kind,
        "FAULT_DELAY": str(delay),
        "FAULT_FIRED": str(fired),
        "FAULT_TIMEOUT": SUBMIT_TIMEOUT,
    }
    args = [a.replace("{env_file}", str(env_file)) for a in VARIANTS[variant]]
    clean_env = dict(tao.env)
    tao.env.update(fault_env)
    submit = tao(
        "submit", "--image", "busybox:1.36", "--command", "sleep 3600", "--pvc", "tao-data",
        "--network-arch", "fault", "--action", point.split("-")[0], "--annotation", f"{STAY_RUNNING}=true",
        *args, timeout=60,
    )  # fmt: skip
    tao.env = clean_env
    assert fired.exists(), f"the fault never fired: {submit.stderr}"
    assert "Traceback" not in submit.stderr

    # 1. Right away: one record, and what it says is true.
    [record_id] = record_ids(tao.state_dir)
    record, extra = check_record(tao.state_dir, record_id)
    state = record_states(record)[-1]
    job_name = extra["job_name"]
    if submit.returncode == 0:
        assert state == "RUNNING"  # the fault came too late to matter (e.g. the patch had finished)
    else:
        assert submit.returncode in (1, 3), submit.stderr
        _one_line_error(submit.stderr)
        assert state in ("ERROR", "UNKNOWN"), f"{state} after a failed submit"
        assert record["transitions"][-1]["message"], "a state without a reason"
        if state == "ERROR":
            assert record["err_class"] == "ERR_INFRA" and "not launched" in record["transitions"][-1]["message"]
        else:
            assert f"kubectl tao status {record_id}" in submit.stderr

    # 2. Server still down or frozen: status says so (exit 3) and leaves the record alone.
    before = snapshot(tao.state_dir)
    down = tao(f"--request-timeout={DOWN_TIMEOUT}", "status", record_id, timeout=60)
    assert down.returncode == 3, down.stdout + down.stderr
    assert "unreachable" in _one_line_error(down.stderr)
    assert snapshot(tao.state_dir) == before, "status changed the record while the cluster was unreachable"

    # 3. The server comes back (restarted with the same flags and data, or resumed).
    if kind == "kill":
        plane.start("kube-apiserver")
    else:
        plane.resume("kube-apiserver")
    wait_for(api_ready, timeout=60, message="the API server to come back")

    # 4. status settles the record; the contract holds for whatever happened.
    settled = tao("status", record_id, "-o", "json", timeout=60)
    assert settled.returncode == 0, settled.stderr
    shown = json.loads(settled.stdout)
    record, extra = check_record(tao.state_dir, record_id)
    state = record_states(record)[-1]
    assert shown["state"] == state, "status shows one state and records another"
    job = get("job", job_name, fault_namespace)
    if state in ("RUNNING", "PENDING"):
        assert job is not None, f"record says {state} but there is no Job"
        for item in objects(fault_namespace, job_name, kinds="secrets,services"):
            assert owned_by(item, job["metadata"]["uid"]), f"{item['kind']} {item['metadata']['name']} has no owner"
        assert job["metadata"]["uid"] == extra.get("job_uid"), "the record does not pin the Job's UID"
        assert extra.get("submit_phase") == "created"
    else:
        assert state == "ERROR", f"status left the record {state}"
        assert record["transitions"][-1]["message"]
        assert job is None or job["metadata"].get("deletionTimestamp"), "record says ERROR but the Job exists"

    # 5. cancel (when there is something to cancel): the Secret and Service go at once, the Job is being
    # deleted (its pods go with the garbage collector: test_no_fault_left_anything_behind waits for them).
    if not record["terminal_state"]:
        cancel = tao("cancel", record_id, "--no-wait", timeout=60)
        assert cancel.returncode == 0, cancel.stderr
        record, _extra = check_record(tao.state_dir, record_id)
        assert record["terminal_state"] == "CANCELED"
    wait_gone(fault_namespace, job_name, kinds="secrets,services", timeout=30)
    job = get("job", job_name, fault_namespace)
    assert job is None or job["metadata"].get("deletionTimestamp"), "the Job outlived cancel"
    STATS.faults_survived += 1


# The gates' server dry run, which carries the permission reviews (`-o go-template={{if eq .kind ...`): before it
# (single node) or the gang check's (multi-node) the record has not opened yet.
GATES_DRY_RUN = r" create --dry-run=server -f - -n [^ ]+ -o go-template=\{\{if eq \.kind "


@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", KINDS)
def test_api_server_fault_at_the_gates_dry_run_opens_no_record_and_creates_nothing(
    kind: str, cluster: Cluster, fault_namespace: str, plane: ControlPlane, tmp_path: Path
) -> None:
    STATS.faults_injected += 1
    tao = Tao(cluster, fault_namespace, tmp_path / "state")
    fired = tmp_path / "fired"
    tao.env.update({
        "KUBECTL_TAO_KUBECTL": str(FAULT_KUBECTL),
        "FAULT_REAL_KUBECTL": str(cluster.bin_dir / "kubectl"),
        "FAULT_PIDFILE": str(plane.pidfile("kube-apiserver")),
        "FAULT_MATCH": GATES_DRY_RUN,
        "FAULT_WHEN": "before",
        "FAULT_KIND": kind,
        "FAULT_DELAY": "0",
        "FAULT_FIRED": str(fired),
        "FAULT_TIMEOUT": SUBMIT_TIMEOUT,
    })
    submit = tao(
        "submit", "--image", "busybox:1.36", "--command", "sleep 3600", "--pvc", "tao-data", "--gpus", "0",
        "--network-arch", "fault", "--action", "gates", "--annotation", f"{STAY_RUNNING}=true", timeout=60,
    )  # fmt: skip
    assert fired.exists(), f"the fault never fired: {submit.stderr}"
    assert submit.returncode == 3, submit.stdout + submit.stderr
    assert "unreachable" in _one_line_error(submit.stderr)
    assert record_ids(tao.state_dir) == []
    if kind == "kill":
        plane.start("kube-apiserver")
    else:
        plane.resume("kube-apiserver")
    wait_for(api_ready, timeout=60, message="the API server to come back")
    made = names_of(objects(fault_namespace, kinds="jobs,secrets,services"))
    assert [name for name in made if "/fault-gates-" in name] == []
    STATS.faults_survived += 1


@pytest.mark.timeout(240)
def test_no_fault_left_anything_behind(fault_namespace: str) -> None:
    """After every fault above: no Job, pod, Service or Secret of kubectl-tao remains in the namespace."""
    wait_gone(fault_namespace, timeout=180)
