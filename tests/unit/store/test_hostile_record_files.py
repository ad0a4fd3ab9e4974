"""Whatever lies under jobs/ never breaks, hangs or fools `list`, `status` and `record list/show` (issue 26,
item 5): a file that is not a regular file, is too large, too deep or not a record is skipped by the listings
with one warning line naming it (never its content), and refused by status/record show with one error line and
exit 1; reads never follow a link and never block; a record holding another id than its file name is refused;
a backend_ref that is not NAMESPACE/NAME never reaches kubectl.

The FIFO and /dev/zero cases run the real entrypoint as a process, with a timeout and a memory limit: before
this was fixed the FIFO hung every one of these commands, and the link to /dev/zero read until MemoryError."""

from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import ROOT
from support.fake_kubectl import KUBECONFIG, FakeKubectl

from kubectl_tao.store import safefile
from kubectl_tao.store.records import RecordStore

BAD = "dino-train-bad000"
CANARY = "hf_" + "Q" * 34  # a token-looking string that must never be printed
PROCESS_MEMORY = 1 << 30


def _store() -> RecordStore:
    return RecordStore(os.environ["TAO_STATE_DIR"])


def _good(store: RecordStore | None = None) -> str:
    store = store or _store()
    return store.open(platform="kubernetes", image="busybox", network_arch="dino", action="train",
                      storage_tier="A", results_root="/workspace/results").id


def _record_text(record_id: str) -> str:
    """A valid record's JSON under RECORD_ID (another record's file, re-labelled)."""
    store = _store()
    data = json.loads(store.path(_good(store)).read_text(encoding="utf-8"))
    return json.dumps({**data, "id": record_id})


def _bad_path() -> Path:
    path = _store().jobs_dir / f"{BAD}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _one_warning(err: str, what: str) -> None:
    path = _bad_path()
    assert err.count("\n") == 1, err
    assert err.startswith(f"warning: job record {path} {what}"), err
    assert "skipped" in err and CANARY not in err


def _one_error(err: str, what: str) -> None:
    path = _bad_path()
    assert err.count("\n") == 1, err
    assert err == f"error: job record {path} {what}; restore it or move it aside\n", err


# ------------------------------------------------------------------------------ in-process, each kind of file

def _plant(kind: str, outside: Path) -> str:
    """Plant a bad file of KIND at jobs/BAD.json; what the warning says of it."""
    path = _bad_path()
    if kind == "link-out":
        outside.write_text(_record_text(BAD), encoding="utf-8")
        path.symlink_to(outside)
        return "is a symbolic link; kubectl-tao reads only regular files"
    if kind == "link-in":
        path.symlink_to(_store().path(_good()))
        return "is a symbolic link; kubectl-tao reads only regular files"
    if kind == "directory":
        path.mkdir()
        return "is a directory, not a regular file"
    if kind == "too-large":
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(_record_text(BAD))
            handle.write(" " * safefile.MAX_BYTES)
        return "is larger than 16 MiB"
    if kind == "too-deep-for-json":
        path.write_text("[" * 100_000 + CANARY, encoding="utf-8")
        return "is nested deeper than 64 levels"
    if kind == "too-deep-for-us":
        record = json.loads(_record_text(BAD))
        record["upload_excludes"] = json.loads("[" * 70 + "]" * 70)
        path.write_text(json.dumps(record), encoding="utf-8")
        return "is nested deeper than 64 levels"
    if kind == "not-utf8":
        path.write_bytes(b"\xff\xfe" + CANARY.encode())
        return "is not UTF-8 text"
    if kind == "not-json":
        path.write_text("\x1b]0;owned\x07" + CANARY, encoding="utf-8")
        return "is not valid JSON (at line 1 column 1)"
    if kind == "not-an-object":
        path.write_text(json.dumps([CANARY]), encoding="utf-8")
        return "is not a JSON object"
    if kind == "another-id":
        path.write_text(_record_text("dino-train-other0"), encoding="utf-8")
        return "holds the id of another record, not the one its file name gives"
    raise AssertionError(kind)


KINDS = ["link-out", "link-in", "directory", "too-large", "too-deep-for-json", "too-deep-for-us", "not-utf8",
         "not-json", "not-an-object", "another-id"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_listings_skip_it_with_one_warning_naming_it(cli: Any, tmp_path: Path, kind: str) -> None:
    good = _good()
    what = _plant(kind, tmp_path / "elsewhere.json")
    for argv in (["list", "--no-live"], ["record", "list"]):
        code, out, err = cli(*argv)
        assert code == 0, err
        assert good in out and BAD not in out
        _one_warning(err, what)


@pytest.mark.parametrize("kind", KINDS)
def test_status_and_record_show_refuse_it_in_one_line(cli: Any, fake_kubectl: FakeKubectl, tmp_path: Path,
                                                       kind: str) -> None:
    what = _plant(kind, tmp_path / "elsewhere.json")
    for argv in (["status", BAD], ["record", "show", BAD], ["record", "mark", BAD, "--state", "RUNNING"]):
        code, out, err = cli(*argv)
        assert (code, out) == (1, ""), err
        _one_error(err, what)
    assert fake_kubectl.calls == []


def test_a_record_is_never_written_through_a_link(cli: Any, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.json"
    _plant("link-out", outside)
    before = outside.read_text(encoding="utf-8")
    code, _, _ = cli("record", "mark", BAD, "--state", "RUNNING", "--message", "x")
    assert code == 1 and outside.read_text(encoding="utf-8") == before


def test_a_bad_additions_file_is_refused_not_followed(cli: Any, tmp_path: Path) -> None:
    good = _good()
    store = _store()
    store.extras_dir.mkdir(parents=True, exist_ok=True)
    outside = tmp_path / "extra.json"
    outside.write_text(json.dumps({"schema_version": 1, "id": good, "namespace": "tao-jobs", "job_name": "x"}))
    store.extra_path(good).symlink_to(outside)
    code, out, err = cli("list", "--no-live")
    assert code == 0 and good not in out
    assert f"kubectl-tao data {store.extra_path(good)} is a symbolic link" in err and err.count("\n") == 1


# ------------------------------------------------------------------------------ as a process: FIFO, /dev/zero

def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (PROCESS_MEMORY, PROCESS_MEMORY))


def _run(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG, encoding="utf-8")
    env = {**os.environ, "HOME": str(tmp_path / "home"), "KUBECONFIG": str(kubeconfig),
           "TAO_STATE_DIR": os.environ["TAO_STATE_DIR"], "KUBECTL_TAO_KUBECTL": "/bin/false"}
    return subprocess.run([str(ROOT / "kubectl-tao"), *argv], capture_output=True, text=True, env=env, timeout=60,
                          preexec_fn=_limit_memory, check=False)


@pytest.mark.parametrize(("kind", "what"), [("fifo", "is a FIFO, not a regular file"),
                                            ("dev-zero", "is a symbolic link; kubectl-tao reads only regular files")])
def test_a_fifo_or_a_link_to_dev_zero_neither_hangs_nor_exhausts_memory(tao_env: Path, kind: str, what: str) -> None:
    good = _good()
    path = _bad_path()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    for argv in (["list", "--no-live"], ["record", "list"]):
        done = _run(tao_env, *argv)
        assert done.returncode == 0, done.stderr
        assert good in done.stdout and BAD not in done.stdout
        _one_warning(done.stderr, what)
    for argv in (["status", BAD], ["record", "show", BAD]):
        done = _run(tao_env, *argv)
        assert (done.returncode, done.stdout) == (1, ""), done.stderr
        _one_error(done.stderr, what)


def test_a_fifo_as_kubectl_tao_data_does_not_hang_status(tao_env: Path) -> None:
    """status prestarts its kubectl read from the raw files (jobs/early_read.py): that read must not block."""
    good = _good()
    store = _store()
    store.extras_dir.mkdir(parents=True, exist_ok=True)
    os.mkfifo(store.extra_path(good))
    done = _run(tao_env, "status", good)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (f"error: kubectl-tao data {store.extra_path(good)} is a FIFO, not a regular file; "
                           "restore it or move it aside\n")


# ------------------------------------------------------------------------------ backend_ref

def _foreign(backend_ref: str, **extra: str) -> str:
    """A Kubernetes record another tool marked RUNNING with BACKEND_REF (written to the file directly, as a
    tool that does not check it would)."""
    store = _store()
    rid = _good(store)
    path = store.path(rid)
    record = json.loads(path.read_text(encoding="utf-8"))
    record["backend_ref"] = backend_ref
    record["transitions"].append({"ts": "2026-01-01T00:00:00.000Z", "state": "RUNNING", "message": "launched",
                                  "source": "agent"})
    path.write_text(json.dumps(record), encoding="utf-8")
    if extra:  # a hand-edited file: the store itself would refuse to write these
        store.extras_dir.mkdir(parents=True, exist_ok=True)
        store.extra_path(rid).write_text(json.dumps({"schema_version": 1, "id": rid, **extra}), encoding="utf-8")
    return rid


@pytest.mark.parametrize(("ref", "extra", "what"), [
    ("tao/?", {}, "its backend_ref is not NAMESPACE/NAME"),
    ("tao/a/b", {}, "its backend_ref is not NAMESPACE/NAME"),
    ("TAO/job", {}, "its backend_ref is not NAMESPACE/NAME"),
    ("tao/" + "a" * 254, {}, "its backend_ref is not NAMESPACE/NAME"),
    ("tao/job", {"namespace": "tao;x", "job_name": "job"}, "its kubectl-tao data names a namespace"),
    ("tao/job", {"namespace": "tao", "job_name": "job --all"}, "its kubectl-tao data names a Job"),
])
def test_a_backend_ref_that_is_not_a_kubernetes_name_never_reaches_kubectl(
    cli: Any, fake_kubectl: FakeKubectl, ref: str, extra: dict[str, str], what: str
) -> None:
    rid = _foreign(ref, **extra)
    for argv in (["status", rid], ["cancel", rid], ["explain", rid]):
        code, out, err = cli(*argv)
        assert (code, out) == (1, ""), err
        assert err.startswith(f"error: job record {rid}: {what}") and err.count("\n") == 1
        assert ref not in err
    fake_kubectl.on("get", "--raw", data={"kind": "List", "items": []})
    code, out, err = cli("list", "-o", "json")
    assert code == 0, err
    [row] = json.loads(out)["items"]
    assert row["id"] == rid and row["live"] is None and row["notes"][0].startswith(what)
    assert all(ref.split("/", 1)[1] not in " ".join(call.argv) for call in fake_kubectl.calls)
    assert all("tao;x" not in " ".join(call.argv) for call in fake_kubectl.calls)


def test_a_valid_backend_ref_of_another_tool_is_still_looked_up(cli: Any, fake_kubectl: FakeKubectl) -> None:
    rid = _foreign("tao/trainer.v2")
    fake_kubectl.on("get", "job", "trainer.v2", data={})
    fake_kubectl.on("get", "pods", data={"kind": "List", "items": []})
    cli("status", rid)
    assert ["get", "job", "trainer.v2", "-n", "tao", "--ignore-not-found", "-o", "json"] in fake_kubectl.argvs()


# ------------------------------------------------------------------------------ a record gives back what it holds

def test_a_message_with_a_carriage_return_is_given_back_as_it_is_held(cli: Any) -> None:
    rid = _good()
    _store().mark(rid, "RUNNING", message="step 1\rkubectl-tao: job COMPLETE", backend_ref="tao/x")
    for fmt, load in (("json", json.loads), ("yaml", None)):
        code, out, err = cli("record", "show", rid, "-o", fmt)
        assert code == 0, err
        if load is not None:
            assert load(out)["transitions"][-1]["message"] == "step 1\rkubectl-tao: job COMPLETE"
        else:
            assert '"step 1\\rkubectl-tao: job COMPLETE"' in out  # escaped: YAML's double-quoted style
