"""`results JOB` as printed: the tree with its directories (total size, number of files), files, checkpoints by
epoch, the latest marked; `-o json` keeps files and directories apart."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl

from kubectl_tao.store.records import RecordStore

UID = "0b9b6c1e-1111-2222-3333-444455556666"
LISTING = (
    "F 2048 1796583000 ./train/model_epoch_2.pth\nF 1024 1796583000 ./train/model_epoch_10.pth\n"
    "F 10 1796583002 ./train/eval/kpi.json\nF 5 1796583003 ./log.txt\n"
    "L 1796583001 ./train/model_latest.pth\nT model_epoch_10.pth\n"
    "D 1796583100 ./train\nD 1796583200 ./train/eval\nD 1796583300 ./empty\n"
)


def _claim_job(fake: FakeKubectl, monkeypatch: pytest.MonkeyPatch, listing: str = LISTING) -> str:
    from kubectl_tao.jobs.flags import job_request
    from kubectl_tao.jobs.plan import stored
    from kubectl_tao.k8s.kubectl import Completed, Kubectl

    store = RecordStore()
    rid = store.open(platform="kubernetes", image="busybox", network_arch="dino", action="train",
                     storage_tier="A", results_root="/workspace/results").id
    store.mark(rid, "RUNNING", message="yes", backend_ref="tao-jobs/gone-job")
    store.update_extra(rid, namespace="tao-jobs", job_name="gone-job", api_server="https://127.0.0.1:6443",
                       request=stored(job_request(image="busybox", command="true", pvc="data", gpus=0)))
    fake.on("get", "persistentvolumeclaim", data={"status": {"phase": "Bound"}})
    fake.on("create", stdout=f"Pod tao-volume-x {UID}\n")
    fake.on("get", "pod", data={"status": {"phase": "Running", "containerStatuses": [{"state": {"running": {}}}]}})
    fake.on("delete", "--raw")

    def pipe(self: Kubectl, args: list[str], *, sink: Any = None, **_: Any) -> Completed:
        sink(listing.encode())
        return Completed("", "", 0)

    monkeypatch.setattr(Kubectl, "pipe", pipe)
    return rid


def test_the_table_shows_each_directory_with_its_total_before_its_contents(
    cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch
) -> None:
    rid = _claim_job(fake_kubectl, monkeypatch)
    code, out, err = cli("results", rid)
    assert code == 0, err
    rows = [line.split() for line in out.splitlines()[2:]]
    assert [row[0] for row in rows] == ["log.txt", "empty/", "train/", "model_latest.pth", "model_epoch_2.pth",
                                        "model_epoch_10.pth", "eval/", "kpi.json"]
    by_name = {row[0]: row for row in rows}
    assert by_name["train/"][1:3] == ["3.0", "KiB"] and by_name["train/"][-2:] == ["3", "file(s)"]
    assert by_name["empty/"][-2:] == ["0", "file(s)"]
    assert by_name["eval/"][1:3] == ["10", "B"] and by_name["eval/"][-2:] == ["1", "file(s)"]
    assert "2026-12-06T" in " ".join(by_name["train/"])  # the directory's own time, UTC
    assert "\n  eval/" in out and "\n    kpi.json" in out  # indented one level per directory


def test_json_lists_directories_apart_from_files(
    cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch
) -> None:
    rid = _claim_job(fake_kubectl, monkeypatch)
    code, out, err = cli("results", rid, "-o", "json")
    assert code == 0, err
    data = json.loads(out)
    assert {f["path"] for f in data["files"]} == {"train/model_epoch_2.pth", "train/model_epoch_10.pth",
                                                  "train/eval/kpi.json", "log.txt", "train/model_latest.pth"}
    assert data["dirs"] == [
        {"path": "empty", "size": 0, "mtime": 1796583300, "files": 0},
        {"path": "train", "size": 3082, "mtime": 1796583100, "files": 3},
        {"path": "train/eval", "size": 10, "mtime": 1796583200, "files": 1},
    ]


S3_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def _tier_c_job(fake: FakeKubectl, monkeypatch: pytest.MonkeyPatch) -> str:
    """A tier C job whose Job and per-job Secret are gone; the helper pod's S3 listing has one file."""
    from kubectl_tao.jobs.flags import job_request
    from kubectl_tao.jobs.plan import stored
    from kubectl_tao.k8s.kubectl import Completed, Kubectl
    from kubectl_tao.volumes import volume_helper

    store = RecordStore()
    rid = store.open(platform="kubernetes", image="busybox", network_arch="dino", action="train",
                     storage_tier="C", results_root="s3://bucket/out").id
    store.mark(rid, "RUNNING", message="yes", backend_ref="tao-jobs/gone-job")
    store.update_extra(rid, namespace="tao-jobs", job_name="gone-job", api_server="https://127.0.0.1:6443",
                       secret_names=["tao-creds-gone-job"],
                       request=stored(job_request(image="busybox", command="true", storage_tier="C", pvc=None,
                                                  s3_output="s3://bucket/out", gpus=0)))
    monkeypatch.setattr(volume_helper, "helper_name", lambda: "tao-volume-x")
    fake.on("get", "secret", stderr='Error from server (NotFound): secrets "tao-creds-gone-job" not found', rc=1)
    fake.on("create", stdout=f"Secret tao-volume-x-s3 {UID}\nPod tao-volume-x {UID}\n")
    fake.on("patch", "pod", stdout="pod/tao-volume-x\n")  # the credentials gate lifted
    fake.on("get", "pod", data={"status": {"phase": "Running", "containerStatuses": [
        {"name": "helper", "state": {"running": {}}}, {"name": "s3", "state": {"running": {}}}]}})
    fake.on("delete", "--raw")
    listing = {"Contents": [{"Key": f"out/{rid}/log.txt", "Size": 3, "LastModified": "2026-12-06T10:00:00+00:00"}]}

    def pipe(self: Kubectl, args: list[str], *, sink: Any = None, **_: Any) -> Completed:
        sink(json.dumps(listing).encode())
        return Completed("", "", 0)

    monkeypatch.setattr(Kubectl, "pipe", pipe)
    return rid


def test_env_file_on_stdin_reads_a_tier_c_job_whose_secret_is_gone(
    cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch
) -> None:
    rid = _tier_c_job(fake_kubectl, monkeypatch)
    refused = cli("results", rid)
    assert refused[0] == 2 and "--env-file FILE ('-' = stdin), or name an existing Secret with --env-secret" in \
        refused[2]
    code, out, err = cli("results", rid, "--env-file", "-", "-o", "json",
                         stdin=f"export ACCESS_KEY=AKIAIOSFODNN7EXAMPLE\nSECRET_KEY={S3_SECRET}\n")
    assert code == 0, err
    assert [f["path"] for f in json.loads(out)["files"]] == ["log.txt"]
    pod_create, create = [c for c in fake_kubectl.calls if c.argv[0] == "create"]  # the gated pod, then its Secret
    assert [i["kind"] for i in json.loads(pod_create.stdin or "")["items"]] == ["Pod"]
    (secret,) = json.loads(create.stdin or "")["items"]
    assert secret["stringData"] == {"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE", "AWS_SECRET_ACCESS_KEY": S3_SECRET}
    assert S3_SECRET not in out + err + refused[1] + refused[2]
    assert all(S3_SECRET not in " ".join(c.argv) for c in fake_kubectl.calls)


def test_results_env_file_is_checked_as_submits_and_not_given_with_env_secret(
    cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    rid = _tier_c_job(fake_kubectl, monkeypatch)
    code, _, err = cli("results", "pull", rid, "--env-file", "-", stdin=f"{S3_SECRET}\n")
    assert code == 2 and "stdin:1: env-file line has no '='" in err and S3_SECRET not in err
    code, _, err = cli("results", rid, "--env-file", "-", stdin="# nothing\n")
    assert code == 2 and "--env-file -: no KEY=VALUE line in it" in err
    code, _, err = cli("results", rid, "--env-file", str(tmp_path / "missing.env"))
    assert code == 2 and "--env-file: cannot read" in err
    code, _, err = cli("results", rid, "--env-file", "-", "--env-secret", "my-s3", stdin="A=b\n")
    assert code == 2 and "--env-file and --env-secret both name the S3 credentials: give one" in err
    assert not [c for c in fake_kubectl.calls if c.argv[0] == "create"]


def test_ctrl_c_mid_pull_exits_130_in_one_line_saying_how_many_verified_files_are_kept(
    cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubectl_tao.volumes import results

    rid = _claim_job(fake_kubectl, monkeypatch)

    def interrupted(*_args: Any, **_kwargs: Any) -> int:
        raise results.PullInterrupted(2)

    monkeypatch.setattr(results, "_receive", interrupted)
    code, out, err = cli("results", "pull", rid, "--dest", "out")
    assert code == 130 and out == ""
    assert err == ("error: interrupted; 2 file(s) that arrived whole and verified are kept, no partial file: pull "
                   "again to resume (they are skipped)\n")
    assert [c.argv[:2] for c in fake_kubectl.calls if c.argv[0] == "delete"] == [["delete", "--raw"]]
