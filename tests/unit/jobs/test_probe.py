"""probe.py: the NCCL probe's manifests, options, outcome handling and its per-cluster cache."""

from __future__ import annotations

import ast
import json
import re
import shlex
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support import ROOT as REPO_ROOT
from support.fake_kubectl import FakeKubectl, fixture_json

from kubectl_tao.core import contract
from kubectl_tao.core.errors import TaoError, UsageError
from kubectl_tao.core.lint import lint_documents
from kubectl_tao.jobs import probe
from kubectl_tao.jobs.plan import build as plan_build
from kubectl_tao.jobs.track import Observation, Tracked
from kubectl_tao.store import probecache

ROOT = REPO_ROOT
SCRIPT = (ROOT / "templates" / "k8s" / "nccl-probe.py").read_text(encoding="utf-8")
SERVER = "https://10.0.0.1:6443"
NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def objects(**over: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    service, job = probe.render_probe(probe.ProbeOptions(**over), "lab", "nccl-probe-1a2b3c", "nccl-probe-1a2b3c")
    return service, job


def container(job: dict[str, Any]) -> dict[str, Any]:
    (only,) = job["spec"]["template"]["spec"]["containers"]
    return only


def env(job: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(job)["env"]}


# ------------------------------------------------------------------ rendering


def test_probe_is_a_labelled_indexed_job_with_a_headless_service() -> None:
    service, job = objects()
    assert (service["kind"], job["kind"]) == ("Service", "Job")
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    for meta in (service["metadata"], job["metadata"], job["spec"]["template"]["metadata"]):
        assert meta["labels"]["kubectl-tao.io/probe"] == "nccl"
        assert meta["labels"]["tao-job"] == "nccl-probe-1a2b3c"
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == 2
    assert container(job)["resources"] == {"limits": {"nvidia.com/gpu": "1"}}
    assert container(job)["image"] == probe.DEFAULT_IMAGE
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["template"]["spec"][
        "tolerations"
    ]


def test_probe_script_is_one_argument_of_torchrun_never_shell_text() -> None:
    _, job = objects(timeout_s=90)
    args = container(job)["args"]
    assert container(job)["command"] == ["/bin/sh", "-c"]
    assert args[3] == "torchrun"
    assert args[4:] == ["--no-python", "python3", "-c", SCRIPT, "64", "5", "90"]
    assert all(SCRIPT not in part for part in args[:3])  # not pasted into the entrypoint or the barrier


def test_probe_script_is_python_with_a_main_and_the_documented_argv() -> None:
    tree = ast.parse(SCRIPT)
    functions = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    assert "main" in functions
    assert "dist.all_reduce" in SCRIPT and "init_process_group(backend" in SCRIPT
    assert {"main", "pick_backend"} <= functions
    # the line probe.backend_from_logs reads, with both backends
    assert 'result {\'ok\' if correct else \'WRONG\'} backend={backend}' in SCRIPT
    assert shlex.split(shlex.join(probe.probe_argv(120))) == probe.probe_argv(120)


def test_without_a_pvc_the_workspace_is_an_empty_dir_and_no_claim_is_referenced() -> None:
    service, job = objects()
    volumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
    assert volumes["workspace"] == {"name": "workspace", "emptyDir": {}}
    assert "persistentVolumeClaim" not in json.dumps([service, job])


def test_a_given_pvc_is_mounted_on_every_rank() -> None:
    _, job = objects(pvc="shared-rwx")
    volumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
    assert volumes["workspace"]["persistentVolumeClaim"] == {"claimName": "shared-rwx"}


def test_nccl_settings_reach_every_rank_and_rendezvous_env_is_set() -> None:
    _, job = objects(
        nodes=3,
        gpus=8,
        nccl_socket_ifname="eth0",
        nccl_ib_hca="mlx5",
        nccl_env={"NCCL_DEBUG": "INFO", "NCCL_IB_DISABLE": "1"},
    )
    values = env(job)
    assert values["NCCL_SOCKET_IFNAME"] == "eth0" and values["NCCL_IB_HCA"] == "mlx5"
    assert values["NCCL_DEBUG"] == "INFO" and values["NCCL_IB_DISABLE"] == "1"
    assert values["NNODES"] == "3" and values["NPROC_PER_NODE"] == "8"
    assert values["MASTER_ADDR"] == "nccl-probe-1a2b3c-0.nccl-probe-1a2b3c"
    assert values["RENDEZVOUS_TIMEOUT"] == str(probe.DEFAULT_PENDING_TIMEOUT_S)


def test_hidden_annotations_reach_the_pod_template() -> None:
    _, job = objects(annotations={"kwok.kubectl-tao.io/exit-code": "1"})
    assert job["spec"]["template"]["metadata"]["annotations"]["kwok.kubectl-tao.io/exit-code"] == "1"


def test_the_probe_manifest_passes_the_secret_linter() -> None:
    assert lint_documents(list(objects(nccl_env={"NCCL_DEBUG": "INFO"})), "probe") == []


def test_plan_opens_an_nccl_probe_record_and_needs_1_28() -> None:
    plan = probe.build_plan(probe.ProbeOptions(), "lab")
    assert plan.record["network_arch"] == "nccl" and plan.record["action"] == "probe"
    assert plan.min_version == (1, 28) and plan.nodes == 2 and plan.gpus == 1
    assert plan.pvc is None and plan.skip_probe_warning is True
    kinds = [o["kind"] for o in plan.render("nccl-probe-abcdef", "nccl-probe-abcdef", None)]
    assert kinds == ["Service", "Job"]


# ------------------------------------------------------------------ options


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"nodes": 1}, "--nodes 1: the probe needs 2 to 1024 nodes"),
        ({"gpus": 0}, "--gpus 0: give 1 to 64 GPUs per node"),
        ({"timeout_s": 0}, "--timeout 0: give a positive number of seconds"),
        ({"nccl_env": {"HF_HOME": "/x"}}, "--nccl-env #1: only NCCL_* variables"),
        ({"nccl_env": {"NCCL_SOCKET_IFNAME": "eth0"}}, "--nccl-env #1 (NCCL_SOCKET_IFNAME): use --nccl-socket-ifname"),
        ({"nccl_env": {"NCCL_DEBUG": "a b"}}, "--nccl-env #1 (NCCL_DEBUG) value must be"),
        ({"image": "bad image"}, "image"),
        ({"nccl_socket_ifname": "eth0;rm"}, "nccl socket ifname"),
    ],
)
def test_bad_options_are_refused_naming_the_flag(over: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        probe.build_plan(probe.ProbeOptions(**over), "lab")


@pytest.mark.parametrize(("text", "seconds"), [("90", 90), ("120s", 120), ("5m", 300), ("1h", 3600), (" 7s ", 7)])
def test_durations(text: str, seconds: int) -> None:
    assert probe.parse_duration(text, "--timeout") == seconds


@pytest.mark.parametrize("text", ["0", "0s", "-5", "1.5m", "2d", "", "soon"])
def test_bad_durations_name_the_flag(text: str) -> None:
    with pytest.raises(UsageError, match=r"^--timeout .*: give a positive duration such as 90, 120s, 5m or 1h$"):
        probe.parse_duration(text, "--timeout")


# ------------------------------------------------------------------ cache


def report(result: str = "fail", *, server: str = SERVER, version: str = "v1.30.2", when: datetime = NOW,
           reason: str = "ExitCode") -> probe.ProbeReport:
    return probe.ProbeReport(
        result=result, reason=reason, message="rank 0 exited with code 1", server=server, version=version,
        checked_at=probecache.utc_stamp(when), record_id="nccl-probe-1a2b3c", nodes=2, gpus=1,
        image=probe.DEFAULT_IMAGE,
        duration_s=12.5, hints=probe.hints_for(result, reason, True, 29500, "nccl-probe-1a2b3c"),
    )


def saved(tmp_path: Path, *reports: probe.ProbeReport) -> Path:
    path = tmp_path / "probes" / "nccl.json"
    for item in reports:
        probecache.save_result(path, item)
    return path


def test_cache_path_follows_tao_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAO_STATE_DIR", str(tmp_path))
    assert probecache.cache_path() == tmp_path / "probes" / "nccl.json"
    monkeypatch.delenv("TAO_STATE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert probecache.cache_path() == tmp_path / "home" / ".tao" / "probes" / "nccl.json"


def test_a_saved_result_round_trips_and_is_keyed_by_server_and_version(tmp_path: Path) -> None:
    path = saved(tmp_path, report("pass"))
    cache, warning = probecache.load_cache(path)
    assert warning is None
    entry = probecache.lookup(cache, SERVER, "v1.30.2", now=NOW + timedelta(hours=1))
    assert entry is not None and entry["result"] == "pass" and entry["record_id"] == "nccl-probe-1a2b3c"
    again = probe.ProbeReport.from_entry(entry)
    assert again.cached is True and again.result == "pass" and again.duration_s == 12.5
    assert probecache.lookup(cache, SERVER, "v1.31.0", now=NOW) is None  # the cluster was upgraded
    assert probecache.lookup(cache, "https://other:6443", "v1.30.2", now=NOW) is None


def test_results_of_several_clusters_live_side_by_side(tmp_path: Path) -> None:
    path = saved(tmp_path, report("pass"), report("hang", server="https://b:6443"), report("fail"))
    cache, _ = probecache.load_cache(path)
    assert sorted(cache["probes"]) == [f"{SERVER} v1.30.2", "https://b:6443 v1.30.2"]
    assert cache["probes"][f"{SERVER} v1.30.2"]["result"] == "fail"  # the newer result replaced the older


@pytest.mark.parametrize(
    ("age", "hit"),
    [(timedelta(0), True), (timedelta(hours=23, minutes=59), True), (timedelta(hours=24), False),
     (timedelta(days=3), False), (timedelta(minutes=-5), False)],
)
def test_cached_results_expire_after_24_hours(tmp_path: Path, age: timedelta, hit: bool) -> None:
    cache, _ = probecache.load_cache(saved(tmp_path, report("pass")))
    assert (probecache.lookup(cache, SERVER, "v1.30.2", now=NOW + age) is not None) is hit


def test_a_missing_cache_is_empty_without_a_warning(tmp_path: Path) -> None:
    assert probecache.load_cache(tmp_path / "none.json") == (probecache.empty_cache(), None)


@pytest.mark.parametrize(
    ("text", "warning"),
    [("{not json", "is not valid JSON; it is ignored and will be rewritten"),
     ('["a list"]', "has no 'probes' object"),
     ('{"probes": 3}', "has no 'probes' object")],
)
def test_a_corrupt_cache_is_ignored_with_a_warning_and_rewritten(tmp_path: Path, text: str, warning: str) -> None:
    path = tmp_path / "probes" / "nccl.json"
    path.parent.mkdir()
    path.write_text(text, encoding="utf-8")
    cache, said = probecache.load_cache(path)
    assert cache == probecache.empty_cache() and said is not None and warning in said and str(path) in said
    probecache.save_result(path, report("pass"))
    assert probecache.load_cache(path)[1] is None


def test_malformed_entries_are_dropped(tmp_path: Path) -> None:
    path = tmp_path / "nccl.json"
    path.write_text(json.dumps({"probes": {
        "a v1": {"result": "maybe", "checked_at": "2026-03-01T12:00:00Z"},
        "b v1": {"result": "pass", "checked_at": "yesterday"},
        "c v1": "pass",
        f"{SERVER} v1.30.2": report("pass").to_entry(),
    }}), encoding="utf-8")
    cache, warning = probecache.load_cache(path)
    assert warning is None and list(cache["probes"]) == [f"{SERVER} v1.30.2"]


def test_an_unwritable_cache_names_the_path(tmp_path: Path) -> None:
    blocker = tmp_path / "probes"
    blocker.write_text("a file where the directory should be", encoding="utf-8")
    with pytest.raises(TaoError, match=r"cannot write the probe cache .*probes/nccl.json: .*; check TAO_STATE_DIR"):
        probecache.save_result(blocker / "nccl.json", report("pass"))


# ------------------------------------------------------------------ the submit warning


def test_probe_warning_for_a_failed_hung_or_missing_probe_of_this_cluster(tmp_path: Path) -> None:
    cache, _ = probecache.load_cache(saved(tmp_path, report("fail"), report("hang", server="https://b:6443"),
                                      report("pass", server="https://c:6443")))
    later = NOW + timedelta(hours=2)
    warning = probecache.probe_warning(cache, SERVER, "v1.30.2", later)
    assert warning is not None
    assert warning.startswith("the last NCCL probe of this cluster failed 2h ago (ExitCode): multi-node jobs")
    assert "kubectl tao probe nccl --force" in warning
    assert "hung" in (probecache.probe_warning(cache, "https://b:6443", "v1.30.2", later) or "")
    assert probecache.probe_warning(cache, "https://c:6443", "v1.30.2", later) is None
    # No result for this cluster at this version: say so, with the command to run.
    for missing in (probecache.probe_warning(cache, SERVER, "v1.31.0", later),
                    probecache.probe_warning(probecache.empty_cache(), SERVER, "v1.30.2")):
        assert missing is not None and missing.startswith("no NCCL probe result is cached for this cluster")
        assert "`kubectl tao probe nccl`" in missing


def submit_answers(fake: FakeKubectl, version: str = "version-gke-1.30.json") -> None:
    from kubectl_tao.gates import permissions

    every = permissions.needed(credentials=True, service=True)
    granted = "".join(f"{p.verb} {p.resource} {p.group or '<no value>'} true\n" for p in every)
    fake.on("create", "-o", permissions.REVIEW_TEMPLATE, stdout=granted)
    fake.on("version", data=fixture_json(version))
    fake.capacity({"kind": "List", "items": fixture_json("nodes-2x8.json")["items"]})
    fake.on("get", "persistentvolumeclaim/data", stdout="PersistentVolumeClaim data Bound \n")
    fake.on("create", "--dry-run=server", stdout="job.batch/x\n")


def submit_argv(nodes: int) -> list[str]:
    return ["submit", "--image", "busybox:1.36", "--command", "true", "--gpus", "8", "--nodes", str(nodes),
            "--pvc", "data"]


MULTI = [*submit_argv(2), "--dry-run=server"]


def test_multi_node_submit_warns_about_the_cached_failed_probe(cli: Any, fake_kubectl: FakeKubectl,
                                                               tao_env: Path) -> None:
    submit_answers(fake_kubectl)
    probecache.save_result(tao_env / "state" / "probes" / "nccl.json",
                      report("hang", server="https://127.0.0.1:6443", version="v1.30.5-gke.1014001",
                             when=datetime.now(UTC) - timedelta(minutes=10), reason="Timeout"))
    code, _, err = cli(*MULTI)
    assert code == 0, err
    assert "warning: the last NCCL probe of this cluster hung 10m ago (Timeout)" in err
    code, _, err = cli(*submit_argv(1), "--dry-run=server")
    assert code == 0 and "NCCL probe" not in err  # single node: no rendezvous, no warning


def test_retries_per_index_is_refused_on_1_28_before_a_record_opens(cli: Any, fake_kubectl: FakeKubectl,
                                                                   tao_env: Path) -> None:
    submit_answers(fake_kubectl, "version-eks-1.28.json")
    code, _, err = cli(*submit_argv(2), "--retries-per-index", "1")
    assert code == 1
    assert err.startswith("error: --retries-per-index need Kubernetes >= 1.29")
    assert "v1.28.3-eks-4f4795d" in err
    assert not (tao_env / "state" / "jobs").exists() or list((tao_env / "state" / "jobs").glob("*.json")) == []
    assert ["version", "-o", "json"] in [call[-3:] for call in fake_kubectl.argvs()]


# ------------------------------------------------------------------ outcomes and hints


def test_hints_name_the_nccl_settings_and_the_job() -> None:
    hints = probe.hints_for("hang", "Timeout", True, 29500, "nccl-probe-1a2b3c")
    flags = [h.flag for h in hints]
    assert flags == ["--nccl-env NCCL_DEBUG=INFO", "--nccl-socket-ifname eth0", "--nccl-env NCCL_IB_DISABLE=1",
                     "--nccl-env NCCL_P2P_DISABLE=1"]
    assert "kubectl tao logs nccl-probe-1a2b3c" in hints[0].why
    assert probe.hints_for("pass", "Completed", True, 29500) == []


def test_a_rendezvous_timeout_points_at_the_network_first() -> None:
    hints = probe.hints_for("fail", "RendezvousTimeout", True, 29600)
    assert hints[0].flag == "" and "TCP 29600" in hints[0].why
    assert hints[1].flag == "--nccl-env NCCL_DEBUG=INFO"


def test_a_probe_that_never_started_says_nccl_was_not_exercised() -> None:
    (hint,) = probe.hints_for("fail", "ImagePullBackOff", False, 29500)
    assert hint.flag == "" and hint.why.startswith("NCCL was not exercised: check the image name")


def test_describe_pass_fail_and_cached() -> None:
    assert probe.describe(report("pass")) == "nccl probe: pass (2 nodes x 1 GPU, 12s, job nccl-probe-1a2b3c)\n"
    failed = probe.describe(report("fail"))
    assert failed.startswith(
        "nccl probe: fail (2 nodes x 1 GPU, 12s, job nccl-probe-1a2b3c): ExitCode: rank 0 exited with code 1\n"
        "try next (`kubectl tao probe nccl --force` with one or more of):\n  --nccl-env NCCL_DEBUG=INFO "
    )
    cached = report("pass").replaced(cached=True)
    assert "cached 3h ago for https://10.0.0.1:6443 (v1.30.2); `kubectl tao probe nccl --force` probes again" in (
        probe.describe(cached, NOW + timedelta(hours=3))
    )
    unexercised = report("fail", reason="ImagePullBackOff").replaced(exercised=False,
                          hints=probe.hints_for("fail", "ImagePullBackOff", False, 29500))
    text = probe.describe(unexercised)
    assert "not cached: the ranks never all started" in text and "note: NCCL was not exercised" in text


# ------------------------------------------------------------------ waiting (observe replaced by a script)


class Script:
    """observe() answers from a list of (state, reason, rank phases); a fake clock advances 1 s a poll."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, steps: list[tuple[str, str, list[str]]]) -> None:
        self.steps = steps
        self.now = 0.0
        self.canceled: list[str] = []
        self.fired: list[str] = []
        tracked = Tracked({"id": "nccl-probe-1a2b3c"}, {"nodes": 2})
        self.tracked = tracked

        def observe(*_a: Any, **_k: Any) -> Observation:
            state, reason, phases = self.steps[min(int(self.now), len(self.steps) - 1)]
            ranks = [{"rank": i, "phase": p, "reason": reason if p == "Pending" else "", "message": ""}
                     for i, p in enumerate(phases)]
            return Observation(tracked, state, reason, f"{state} {reason}", None, {"total": 2, "ranks": ranks})

        def cancel(*_a: Any, message: str = "", **_k: Any) -> None:
            self.canceled.append(message)

        def fire(_kc: Any, _store: Any, _t: Any, obs: Observation, dog: str, seconds: float, **_k: Any) -> Observation:
            self.fired.append(f"{dog} {int(seconds)} {obs.reason}")
            return obs.replaced(state="ERROR", message=f"{dog} fired")

        monkeypatch.setattr("kubectl_tao.jobs.wait.observe", observe)
        monkeypatch.setattr("kubectl_tao.jobs.cancel.cancel", cancel)
        monkeypatch.setattr("kubectl_tao.jobs.wait.fire", fire)

    def run(self, **over: Any) -> probe.Waited:
        def sleep(seconds: float) -> None:
            self.now += seconds

        opts = probe.ProbeOptions(**{"timeout_s": 3, "pending_timeout_s": 5, "image_pull_timeout_s": 2, **over})
        return probe.wait_for_probe(None, None, self.tracked, opts, server=SERVER, on_progress=lambda _m: None,  # type: ignore[arg-type]
                                    sleep=sleep, clock=lambda: self.now, interval=1.0)


def test_wait_passes_when_the_job_completes(monkeypatch: pytest.MonkeyPatch) -> None:
    script = Script(monkeypatch, [("PENDING", "ContainerCreating", ["Pending", "Pending"]),
                                  ("RUNNING", "", ["Running", "Running"]),
                                  ("COMPLETE", "Completed", ["Succeeded", "Succeeded"])])
    waited = script.run()
    assert (waited.result, waited.exercised, script.canceled) == ("pass", True, [])


def test_wait_calls_it_a_hang_once_every_rank_ran_for_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    script = Script(monkeypatch, [("PENDING", "ContainerCreating", ["Pending", "Pending"]),
                                  ("RUNNING", "1/2 ranks running", ["Running", "Pending"]),
                                  ("RUNNING", "", ["Running", "Running"])])
    waited = script.run()
    assert waited.result == "hang" and waited.exercised is True
    assert script.now == 5.0  # all ranks running from t=2, timeout 3 s
    assert script.canceled == ["NCCL probe hung: every rank had started and the all_reduce was not done after 3s; "
                               "canceled"]


def test_wait_fails_without_caching_when_the_image_never_pulls(monkeypatch: pytest.MonkeyPatch) -> None:
    script = Script(monkeypatch, [("RUNNING", "1/2 ranks running", ["Running", "Pending"])])
    script.steps = [("RUNNING", "1/2 ranks running", ["Running", "Pending"])]
    monkeypatch.setattr(probe, "_pull_problem", lambda obs: ("ImagePullBackOff", "rank 1: Back-off"))
    waited = script.run()
    assert (waited.result, waited.exercised) == ("fail", False)
    assert script.fired == ["image-pull-timeout 2 ImagePullBackOff"]


def test_wait_fails_without_caching_when_ranks_never_all_start(monkeypatch: pytest.MonkeyPatch) -> None:
    script = Script(monkeypatch, [("PENDING", "Insufficient nvidia.com/gpu", ["Pending", "Pending"])])
    waited = script.run()
    assert (waited.result, waited.exercised, script.now) == ("fail", False, 5.0)
    assert script.fired == ["pending-timeout 5 Insufficient nvidia.com/gpu"]


def test_wait_reports_an_error_as_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    script = Script(monkeypatch, [("ERROR", "RendezvousTimeout", ["Failed", "Failed"])])
    waited = script.run()
    assert (waited.result, waited.obs.reason, waited.exercised) == ("fail", "RendezvousTimeout", True)


# ------------------------------------------------------------------ the command


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nodes", "1"], "error: --nodes 1: the probe needs 2 to 1024 nodes (it checks NCCL between nodes)\n"),
        (["--timeout", "soon"], "error: --timeout 'soon': give a positive duration such as 90, 120s, 5m or 1h\n"),
        (["--nccl-env", "NCCL_DEBUG"], "error: --nccl-env #1 must look like KEY=VALUE (it has no '=' or no KEY)\n"),
        (["-o", "name"], "error: -o/--output: unknown format 'name'; use one of json, yaml\n"),
    ],
)
def test_probe_command_refuses_bad_flags_before_any_kubectl_call(
    cli: Any, fake_kubectl: FakeKubectl, argv: list[str], message: str
) -> None:
    code, out, err = cli("probe", "nccl", *argv)
    assert (code, out, err) == (2, "", message)
    assert fake_kubectl.calls == []


def test_probe_command_answers_from_a_fresh_cache_without_creating_anything(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path
) -> None:
    fake_kubectl.on("version", data=fixture_json("version-gke-1.30.json"))
    when = datetime.now(UTC) - timedelta(minutes=10)  # minutes, so a slow run cannot change the printed age
    cached = report("fail", server="https://127.0.0.1:6443", version="v1.30.5-gke.1014001", when=when)
    probecache.save_result(tao_env / "state" / "probes" / "nccl.json", cached)
    code, out, err = cli("probe", "nccl")
    assert err == ""
    assert code == 1
    assert out.startswith("nccl probe: fail (2 nodes x 1 GPU, 12s, job nccl-probe-1a2b3c): ExitCode: ")
    assert "cached 10m ago for https://127.0.0.1:6443 (v1.30.5-gke.1014001)" in out
    assert "--nccl-env NCCL_DEBUG=INFO" in out
    assert [call[-3:] for call in fake_kubectl.argvs()] == [["version", "-o", "json"]]
    code, out, _ = cli("probe", "nccl", "-o", "json")
    data = json.loads(out)
    assert (code, data["result"], data["cached"], data["hints"][0]["flag"]) == (1, "fail", True,
                                                                               "--nccl-env NCCL_DEBUG=INFO")


def test_status_counts_ranks_for_multi_node_jobs_only() -> None:
    from kubectl_tao.commands.present import rank_counts

    def obs(total: int, phases: list[str], succeeded: int, failed: int) -> Observation:
        live = {"total": total, "succeeded": succeeded, "failed": failed,
                "ranks": [{"rank": i, "phase": p} for i, p in enumerate(phases)]}
        return Observation(Tracked({"id": "x"}, {}), "RUNNING", "", "", None, live)

    assert rank_counts(obs(2, ["Running", "Failed"], 0, 1)) == "Ranks: 1 running, 0 succeeded, 1 failed (of 2)"
    assert rank_counts(obs(4, ["Succeeded", "Running"], 1, 0)) == "Ranks: 1 running, 1 succeeded, 0 failed (of 4)"
    assert rank_counts(obs(1, ["Running"], 0, 0)) == ""


# ------------------------------------------------------------------ targeting and the gloo fallback


def test_targeting_flags_place_every_rank_and_reach_the_fit_gate() -> None:
    over = {
        "node_selector": {"kubectl-tao.io/real-node": "true"},
        "tolerations": ({"key": "kubectl-tao.io/real-node", "operator": "Equal", "value": "true",
                         "effect": "NoSchedule"},),
    }
    _, job = objects(**over)
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"kubectl-tao.io/real-node": "true"}
    # in the order a submit of the same flags places them: the flags' own, then the GPU taint's
    assert pod["tolerations"] == [*over["tolerations"], contract.GPU_TOLERATION]
    plan = probe.build_plan(probe.ProbeOptions(**over), "lab")  # type: ignore[arg-type]
    assert plan.node_selector == {"kubectl-tao.io/real-node": "true"}
    assert plan.tolerations == [*over["tolerations"], contract.GPU_TOLERATION]


def test_the_probe_is_planned_as_submit_plans_its_job_request() -> None:
    opts = probe.ProbeOptions(pvc="shared-rwx", nccl_env={"NCCL_IB_DISABLE": "1"}, node_selector={"a": "b"})
    submitted = plan_build(probe.probe_request(opts), "lab", {}).render("nccl-probe-1a2b3c", "nccl-probe-1a2b3c", None)
    service, job = probe.render_probe(opts, "lab", "nccl-probe-1a2b3c", "nccl-probe-1a2b3c")
    for meta in (service["metadata"], job["metadata"], job["spec"]["template"]["metadata"]):
        assert meta["labels"].pop("kubectl-tao.io/probe") == "nccl"  # the one addition of the probe's own
    assert [service, job] == submitted


def test_probe_command_takes_submits_targeting_flags(cli: Any, fake_kubectl: FakeKubectl, tao_env: Path) -> None:
    code, out, err = cli("probe", "nccl", "--toleration", "=x:NoSchedule", "--node-selector", "a=b")
    assert (code, out) == (2, "")
    assert err.startswith("error: --toleration: the key is empty")
    code, out, err = cli("probe", "nccl", "--node-selector", "no-equals-sign")
    assert (code, out, err) == (2, "", "error: node selector #1 must look like KEY=VALUE (it has no '=' or no KEY)\n")
    assert fake_kubectl.calls == []


@pytest.mark.parametrize(
    ("logs", "backend"),
    [
        ("[rank 0] nccl-probe: rank 0 result ok backend=gloo\n[rank 1] nccl-probe: rank 1 result ok backend=gloo\n",
         "gloo"),
        ("nccl-probe: rank 0 result ok backend=nccl\nnccl-probe: rank 1 result ok backend=nccl\n", "nccl"),
        ("nccl-probe: rank 0 result ok backend=nccl\nnccl-probe: rank 1 result ok backend=gloo\n", "gloo"),
        ("simulated log line\n", ""),
    ],
)
def test_the_backend_is_read_from_each_ranks_last_line(logs: str, backend: str) -> None:
    assert probe.backend_from_logs(logs) == backend


def test_a_gloo_pass_says_nccl_was_not_exercised_everywhere(tmp_path: Path) -> None:
    gloo = report("pass").replaced(backend="gloo", settings={"NCCL_IB_DISABLE": "1"}, hints=[])
    text = probe.describe(gloo)
    assert text.startswith("nccl probe: pass over gloo, not NCCL (2 nodes x 1 GPU, 12s, job nccl-probe-1a2b3c)\n")
    assert "backend: gloo on CPU (no CUDA or NCCL in the pods): NCCL was NOT exercised" in text
    assert "later multi-node submits on this cluster apply" not in text
    assert gloo.to_dict()["backend"] == "gloo"
    path = saved(tmp_path, gloo)
    cache, _ = probecache.load_cache(path)
    entry = probecache.lookup(cache, SERVER, "v1.30.2", now=NOW)
    assert entry is not None and entry["backend"] == "gloo"
    assert probe.ProbeReport.from_entry(entry).backend == "gloo"
    # not proof that NCCL or its settings work: nothing applied, and multi-node submits still warn
    assert probecache.passing_settings(cache, SERVER) == ({}, "")
    warning = probecache.probe_warning(cache, SERVER, "v1.30.2", NOW)
    assert warning is not None and "passed over gloo on CPU, not NCCL" in warning


def test_an_nccl_pass_keeps_applying_its_settings(tmp_path: Path) -> None:
    nccl = report("pass").replaced(backend="nccl", settings={"NCCL_IB_DISABLE": "1"}, hints=[])
    assert "backend: nccl" in probe.describe(nccl)
    cache, _ = probecache.load_cache(saved(tmp_path, nccl))
    assert probecache.passing_settings(cache, SERVER)[0] == {"NCCL_IB_DISABLE": "1"}
    assert probecache.probe_warning(cache, SERVER, "v1.30.2", NOW) is None


def test_with_nccl_debug_the_report_names_the_transport_and_warns_of_unused_rdma(tmp_path: Path) -> None:
    logs = (
        "[rank 1] llama-ft-1:231:250 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.244.2.9<0>\n"
        "[rank 1] llama-ft-1:231:250 [0] NCCL INFO Using network Socket\n"
        "[rank 1] llama-ft-1:231:252 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n"
        "[rank 1] nccl-probe: rank 1 result ok backend=nccl\n"
    )
    passed = report("pass").replaced(hints=[])
    probe.add_transport(passed, logs)
    text = probe.describe(passed)
    assert "transport: NET/Socket (as NCCL_DEBUG=INFO showed it)" in text
    assert "warning: RDMA devices exist ([0]mlx5_0:1/IB) but NCCL used TCP sockets" in text
    cache, _ = probecache.load_cache(saved(tmp_path, passed))
    entry = probecache.lookup(cache, SERVER, "v1.30.2", now=NOW)
    assert entry is not None
    again = probe.ProbeReport.from_entry(entry)
    assert (again.transport, again.transport_warning) == (passed.transport, passed.transport_warning)
    quiet = report("pass").replaced(hints=[])
    probe.add_transport(quiet, "nccl-probe: rank 0 result ok backend=nccl\n")
    assert "transport:" not in probe.describe(quiet)
