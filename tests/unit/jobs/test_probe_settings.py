"""The NCCL probe as the reference asks for it: a multi-node submit on a cluster with no cached result warns
with the command to run; the NCCL settings a probe passed with are cached with the result, and later
multi-node jobs on that cluster get them (printed, and each one overridable by a flag)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from support.fake_kubectl import FakeKubectl, answer_pvc_submit

from kubectl_tao.jobs import probe
from kubectl_tao.jobs.track import Observation, Tracked
from kubectl_tao.store import probecache

SERVER = "https://127.0.0.1:6443"  # the server of the tests' kubeconfig (tests/unit/conftest.py)
FIXED = probe.ProbeOptions(nccl_socket_ifname="eth0", nccl_env={"NCCL_IB_DISABLE": "1", "NCCL_DEBUG": "INFO"})


def passed(opts: probe.ProbeOptions, *, result: str = "pass", when: datetime | None = None,
           version: str = "v1.36.3") -> probe.ProbeReport:
    tracked = Tracked({"id": "nccl-probe-1a2b3c"}, {"nodes": 2})
    obs = Observation(tracked, "COMPLETE" if result == "pass" else "RUNNING", "", "", None, None)
    stamp = probecache.utc_stamp(when or datetime.now(UTC))
    return probe.report_for(
        probe.Waited(result, obs, True), opts, server=SERVER, version=version, checked_at=stamp, duration_s=20
    )


def cache_file(tao_env: Path) -> Path:
    return tao_env / "state" / "probes" / "nccl.json"


def test_a_passing_probe_caches_the_settings_it_ran_with_but_not_debug_logging(tmp_path: Path) -> None:
    path = tmp_path / "nccl.json"
    report = passed(FIXED)
    assert report.settings == {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "eth0"}
    probecache.save_result(path, report)
    cache, _ = probecache.load_cache(path)
    assert probecache.passing_settings(cache, SERVER) == ({"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "eth0"},
                                                     report.checked_at)
    assert "later multi-node submits on this cluster apply NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=eth0" in (
        probe.describe(report)
    )


def test_only_the_newest_result_counts_and_only_when_it_passed(tmp_path: Path) -> None:
    path = tmp_path / "nccl.json"
    probecache.save_result(path, passed(FIXED, when=datetime.now(UTC) - timedelta(hours=1), version="v1.35.0"))
    cache, _ = probecache.load_cache(path)
    assert probecache.passing_settings(cache, SERVER)[0], "a pass at another server version still describes the network"
    assert probecache.passing_settings(cache, "https://elsewhere:6443") == ({}, "")
    probecache.save_result(path, passed(probe.ProbeOptions(), result="hang"))
    cache, _ = probecache.load_cache(path)
    assert probecache.passing_settings(cache, SERVER) == ({}, "")


def test_a_hand_edited_cache_cannot_inject_other_variables(tmp_path: Path) -> None:
    path = tmp_path / "nccl.json"
    probecache.save_result(path, passed(FIXED))
    data = json.loads(path.read_text(encoding="utf-8"))
    [entry] = data["probes"].values()
    entry["settings"] = {"LD_PRELOAD": "/tmp/x.so", "NCCL_IB_DISABLE": "1; rm -rf /", "NCCL_P2P_DISABLE": "1"}
    path.write_text(json.dumps(data), encoding="utf-8")
    cache, _ = probecache.load_cache(path)
    assert probecache.passing_settings(cache, SERVER)[0] == {"NCCL_P2P_DISABLE": "1"}


def answers(fake: FakeKubectl) -> None:
    answer_pvc_submit(fake)


def submit(nodes: int) -> list[str]:
    return ["submit", "--image", "busybox:1.36", "--command", "true", "--gpus", "8", "--nodes", str(nodes),
            "--pvc", "data", "--dry-run=server"]


def test_multi_node_submit_without_a_cached_result_warns_with_the_command(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Path
) -> None:
    answers(fake_kubectl)
    code, _, err = cli(*submit(2))
    assert code == 0, err
    [warning] = [line for line in err.splitlines() if "NCCL probe" in line]
    assert warning.startswith("warning: no NCCL probe result is cached for this cluster")
    assert "`kubectl tao probe nccl`" in warning
    code, _, err = cli(*submit(1))
    assert code == 0 and "NCCL probe" not in err


def rank_env(out: str) -> dict[str, str]:
    document = json.loads(out)
    [job] = [item for item in document["items"] if item["kind"] == "Job"]
    return {e["name"]: e.get("value", "") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}


def test_later_multi_node_jobs_get_the_passing_settings_printed_and_overridable(cli: Any, tao_env: Path) -> None:
    probecache.save_result(cache_file(tao_env), passed(FIXED))
    render = ["render", "--image", "busybox:1.36", "--command", "true", "--gpus", "8", "--nodes", "2", "--pvc", "data",
              "-o", "json"]
    code, out, err = cli(*render)
    assert code == 0, err
    env = rank_env(out)
    assert env["NCCL_SOCKET_IFNAME"] == "eth0" and env["NCCL_IB_DISABLE"] == "1" and "NCCL_DEBUG" not in env
    assert "applying the NCCL settings this cluster's probe passed with" in err
    assert "NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=eth0" in err

    code, out, err = cli(*render, "--nccl-socket-ifname", "ib0", "--nccl-env", "NCCL_IB_DISABLE=0")
    assert code == 0, err
    env = rank_env(out)
    assert env["NCCL_SOCKET_IFNAME"] == "ib0" and env["NCCL_IB_DISABLE"] == "0"
    assert "applying the NCCL settings" not in err

    code, out, err = cli("render", "--image", "busybox:1.36", "--command", "true", "--gpus", "8", "--pvc", "data",
                         "-o", "json")
    assert code == 0 and "NCCL_SOCKET_IFNAME" not in out, "one node: nothing from the probe"


def test_nccl_env_flag_is_checked(cli: Any, tao_env: Path) -> None:
    code, out, err = cli("render", "--image", "busybox:1.36", "--command", "true", "--pvc", "data",
                         "--nccl-env", "LD_PRELOAD=/x.so")
    assert code == 2 and out == ""
    [line] = err.strip().splitlines()
    assert line.startswith("error: nccl env #1: the name is not an NCCL_* variable")


def test_the_probe_itself_runs_with_its_own_settings_never_a_cached_pass(tao_env: Path) -> None:
    probecache.save_result(cache_file(tao_env), passed(FIXED))
    assert probecache.cached_settings(SERVER)[0]  # a later multi-node submit here would apply them
    plan = probe.build_plan(probe.ProbeOptions(), "lab")
    assert plan.notes == [] and plan.skip_probe_warning is True
    names = [e["name"] for o in plan.render("nccl-probe-1a2b3c", "nccl-probe-1a2b3c", None) if o["kind"] == "Job"
             for e in o["spec"]["template"]["spec"]["containers"][0]["env"]]
    assert "NCCL_SOCKET_IFNAME" not in names and "NCCL_IB_DISABLE" not in names
