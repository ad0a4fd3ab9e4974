"""`data push` on the real nodes (docs/data.md): a tree goes onto a Bound claim through the volume helper pod and
lands byte for byte; a second push skips every file; a job reads what was pushed; a SIGINT mid-copy leaves no
helper pod and no file under a final name that was not verified (a pull keeps the verified ones); bad input is
refused with exit 2 and creates nothing. Skipped when the cluster has no real nodes."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cluster import TAO, Cluster, Tao, claim_on_real_nodes, killed_at, kubectl, wait_for

from .test_real_pods import ON_REAL_NODES, REAL_NODE_LABEL, real_images

pytestmark = pytest.mark.e2e

HELPER_SELECTOR = "app.kubernetes.io/component=volume-helper"


@pytest.fixture(scope="module")
def claim(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Tao, Path, str]]:
    if not kubectl("get", "nodes", "-l", REAL_NODE_LABEL, "-o", "name").stdout.split():
        pytest.skip("the local cluster has no real nodes (KUBECTL_TAO_REAL_NODES=0)")
    with claim_on_real_nodes(cluster, "e2e-data", tmp_path_factory.mktemp("data") / "state") as (t, volume):
        # A hostPath volume ignores fsGroup: make it writable by the helper's non-root user, as a real driver does.
        volume.chmod(0o777)
        busybox = real_images(cluster)["BUSYBOX_IMAGE"]
        t.env["KUBECTL_TAO_HELPER_IMAGE"] = busybox  # the config default (`results` takes it from here)
        yield t, volume, busybox


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*")) if p.is_file()
    }


def _helpers(t: Tao) -> list[str]:
    return t.kubectl("get", "pods", "-l", HELPER_SELECTOR, "-o", "name").stdout.split()


def _push(t: Tao, busybox: str, *args: str) -> subprocess.CompletedProcess[str]:
    return t("data", "push", *args, "--pvc", "tao-data", "--helper-image", busybox, *ON_REAL_NODES, timeout=240)


def test_a_tree_is_pushed_verified_skipped_the_second_time_and_read_by_a_job(
    claim: tuple[Tao, Path, str], tmp_path: Path
) -> None:
    t, volume, busybox = claim
    specs = tmp_path / "specs"
    (specs / "nested" / "deeper").mkdir(parents=True)
    (specs / "train.yaml").write_text("train:\n  num_epochs: 2\n")
    (specs / "nested" / "deeper" / "data.bin").write_bytes(os.urandom(3 * 1024 * 1024 + 7))
    (specs / "nested" / "empty.txt").write_bytes(b"")
    (specs / ("long-" + "n" * 120 + ".txt")).write_text("a name longer than a tar header's 100 bytes\n")

    first = _push(t, busybox, str(specs), "--to", "inputs", "-o", "json")
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert (summary["sent"], summary["skipped"], summary["verified"]) == (4, 0, 4)
    assert summary["target"] == "/workspace/inputs"
    assert _tree(volume / "inputs" / "specs") == _tree(specs)
    assert not any((volume / ".kubectl-tao-staging").iterdir())  # the staging directory is emptied
    assert _helpers(t) == []

    (specs / "train.yaml").write_text("train:\n  num_epochs: 3\n")  # one file changed: only it travels
    again = _push(t, busybox, str(specs), "--to", "inputs")
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("pushed 1 file(s)") and "3 unchanged skipped" in again.stdout
    assert _tree(volume / "inputs" / "specs") == _tree(specs)
    third = _push(t, busybox, str(specs), "--to", "inputs", "-o", "json")
    assert (json.loads(third.stdout)["sent"], json.loads(third.stdout)["skipped"]) == (0, 4)
    assert len(list((volume / ".kubectl-tao-sha256").iterdir())) == 1  # the record of the target's hashes

    # bytes changed on the volume behind the record's back, size and modification time kept: sent again
    there = volume / "inputs" / "specs" / "nested" / "deeper" / "data.bin"
    kept = there.stat()
    there.write_bytes(os.urandom(kept.st_size))
    os.utime(there, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    fourth = _push(t, busybox, str(specs), "--to", "inputs", "-o", "json")
    assert (json.loads(fourth.stdout)["sent"], json.loads(fourth.stdout)["skipped"]) == (1, 3), fourth.stderr
    assert _tree(volume / "inputs" / "specs") == _tree(specs)

    result = t(
        "submit", "--image", busybox, "--network-arch", "data", "--action", "read", "--gpus", "0", "--pvc",
        "tao-data", "--command", "cat /workspace/inputs/specs/train.yaml", "--wait", "--timeout", "180",
        *ON_REAL_NODES, timeout=240,
    )
    assert result.returncode == 0, result.stderr
    record_id = result.stdout.strip().splitlines()[-1]
    logs = t("logs", record_id)
    assert "num_epochs: 3" in logs.stdout, logs.stderr
    assert _helpers(t) == []


def test_sigint_mid_copy_removes_the_helper_pod_and_leaves_no_unverified_file(
    claim: tuple[Tao, Path, str], tmp_path: Path
) -> None:
    t, volume, busybox = claim
    big = tmp_path / "big"
    big.mkdir()
    for i in range(8):
        (big / f"part-{i}.bin").write_bytes(os.urandom(32 * 1024 * 1024))
    proc = subprocess.Popen(
        [TAO, "data", "push", str(big), "--to", "interrupted", "--pvc", "tao-data", "--helper-image", busybox,
         *ON_REAL_NODES],
        env=t.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        # mid-copy: the helper pod exists and its tar has begun writing into the staging directory
        wait_for(lambda: any((volume / ".kubectl-tao-staging").glob("*/big/part-*.bin")), 120, interval=0.05,
                 message="the copy to begin")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert err.startswith("error: interrupted; nothing unverified got a final name and the staging directory was "
                          "removed") and err.count("\n") == 1, (out, err)
    wait_for(lambda: _helpers(t) == [], 60, message="the helper pod to go")
    assert not (volume / "interrupted").exists()  # nothing under a final name (one batch: nothing moved yet)
    assert not any((volume / ".kubectl-tao-staging").iterdir())  # no staged file left on the volume

    resumed = _push(t, busybox, str(big), "--to", "interrupted")
    assert resumed.returncode == 0, resumed.stderr
    assert _tree(volume / "interrupted" / "big") == _tree(big)
    assert _helpers(t) == []


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["/nonexistent/specs"], "LOCAL /nonexistent/specs: no such file or folder"),
        (["SPECS", "--to", "../outside"], "--to '../outside': the directory must stay under"),
        (["SPECS", "--to", "/etc"], "--to '/etc': not under the volume's mount path /workspace"),
        (["SPECS", "--pvc", "no-such-claim"], "--pvc no-such-claim: no PersistentVolumeClaim of that name"),
        (["SPECS", "--mount-path", "/workspace/"], "--mount-path must be a normalized path"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_creates_nothing(
    claim: tuple[Tao, Path, str], tmp_path: Path, args: list[str], said: str
) -> None:
    t, _, busybox = claim
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "a.txt").write_text("a\n")
    args = [str(tmp_path / "specs") if a == "SPECS" else a for a in args]
    claim_flag = [] if "--pvc" in args else ["--pvc", "tao-data"]
    result = t("data", "push", *args, *claim_flag, "--helper-image", busybox, *ON_REAL_NODES)
    assert result.returncode == 2, result.stderr
    assert said in result.stderr and result.stderr.count("\n") == 1
    assert _helpers(t) == []


def test_a_claim_that_is_not_bound_is_refused(claim: tuple[Tao, Path, str], tmp_path: Path) -> None:
    t, _, busybox = claim
    t.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "unbound"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "none-such",
                 "resources": {"requests": {"storage": "1Mi"}}},
    }))
    (tmp_path / "a.txt").write_text("a\n")
    result = t("data", "push", str(tmp_path / "a.txt"), "--pvc", "unbound", "--helper-image", busybox)
    assert result.returncode == 2, result.stderr
    assert "--pvc unbound: the claim is Pending, not Bound" in result.stderr
    assert _helpers(t) == []


def test_a_helper_image_that_cannot_be_pulled_is_named_from_the_pod(
    claim: tuple[Tao, Path, str], tmp_path: Path
) -> None:
    t, _, _ = claim
    (tmp_path / "a.txt").write_text("a\n")
    result = t("data", "push", str(tmp_path / "a.txt"), "--pvc", "tao-data", "--helper-image",
               "kubectl-tao.local/no-such-image:1", *ON_REAL_NODES, timeout=240)
    assert result.returncode == 1, result.stderr
    assert "the volume helper pod" in result.stderr and "could not start: " in result.stderr
    assert ("ErrImagePull" in result.stderr or "ImagePullBackOff" in result.stderr), result.stderr
    assert result.stderr.count("\n") == 1
    wait_for(lambda: _helpers(t) == [], 60, message="the helper pod to go")


RESULTS_COMMAND = (
    'd="$TAO_RESULTS_ROOT/train"; mkdir -p "$d"; '
    'for e in 1 2 10; do head -c 200000 /dev/urandom > "$d/dino_model_epoch_$e.pth"; done; '
    'ln -s dino_model_epoch_10.pth "$d/dino_model_latest.pth"; ln -s /etc/passwd "$d/escape"; '
    'echo \'{"date": "12/6/2026", "time": "18:0:1", "status": "RUNNING", "verbosity": "INFO", "epoch": 10, '
    '"max_epoch": 10, "kpi": {"loss": 0.25}}\' > "$d/status.json"; echo written'
)


def test_results_are_listed_and_pulled_from_the_record_after_the_job_is_gone(
    claim: tuple[Tao, Path, str], tmp_path: Path
) -> None:
    t, volume, busybox = claim
    result = t(
        "submit", "--image", busybox, "--network-arch", "dino", "--action", "train", "--gpus", "0", "--pvc",
        "tao-data", "--command", RESULTS_COMMAND, "--wait", "--timeout", "180", *ON_REAL_NODES, timeout=240,
    )
    assert result.returncode == 0, result.stderr
    record_id = result.stdout.strip().splitlines()[-1]
    t.kubectl("delete", "jobs", "--all", "--wait=true")  # what follows reads the record, not the Job
    results_dir = volume / "results" / record_id / "train"

    listed = t("results", record_id, "-o", "json", timeout=240)
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    files = {f["path"]: f for f in data["files"]}
    checkpoints = [f["path"] for f in data["files"] if f["epoch"] is not None]
    assert checkpoints == ["train/dino_model_epoch_1.pth", "train/dino_model_epoch_2.pth",
                           "train/dino_model_epoch_10.pth"]  # by epoch, not by name
    assert [p for p, f in files.items() if f["latest"]] == ["train/dino_model_epoch_10.pth"]
    assert files["train/dino_model_epoch_1.pth"]["size"] == 200000
    assert files["train/escape"]["link_out"] is True
    assert data["status"]["train/status.json"]["kpi"] == {"loss": 0.25}
    (train,) = data["dirs"]  # its total: the regular files under it, links counting nothing
    assert (train["path"], train["files"]) == ("train", 4)
    assert train["size"] == sum(f["size"] for f in data["files"] if f["link"] is None)
    table = t("results", record_id, timeout=240)
    assert table.returncode == 0, table.stderr
    assert any(line.split()[:1] == ["train/"] and "4 file(s)" in line for line in table.stdout.splitlines())
    assert "epoch 10, latest" in table.stdout and "outside the results directory: not followed" in table.stdout

    dest = tmp_path / "out"
    pulled = t("results", "pull", record_id, "--dest", str(dest), "-o", "json", timeout=240)
    assert pulled.returncode == 0, pulled.stderr
    assert (json.loads(pulled.stdout)["pulled"], json.loads(pulled.stdout)["verified"]) == (4, 4)
    assert _tree(dest) == {k: v for k, v in _tree(results_dir.parent).items() if not k.endswith(("escape",
                                                                                                  "latest.pth"))}
    assert not (dest / "train" / "escape").exists()  # a link out is never followed
    again = t("results", "pull", record_id, "--dest", str(dest), timeout=240)
    assert again.returncode == 0 and again.stdout.startswith("pulled 0 file(s)"), again.stdout + again.stderr

    latest = t("results", "pull", record_id, "--latest", "--dest", str(tmp_path / "latest"), timeout=240)
    assert latest.returncode == 0, latest.stderr
    assert sorted(_tree(tmp_path / "latest")) == ["train/dino_model_epoch_10.pth"]
    escaping = t("results", "pull", record_id, "../../etc", "--dest", str(tmp_path / "x"))
    assert escaping.returncode == 2 and "'..' would escape" in escaping.stderr
    assert _helpers(t) == []

    # The job's image (busybox here) has no tensorboard: the pod says so in one line and is removed.
    board = t("results", "tensorboard", record_id, "--port", "16006", "--timeout", "120", timeout=240)
    assert board.returncode == 1, board.stdout + board.stderr
    assert "could not start" in board.stderr and "tensorboard" in board.stderr, board.stderr
    wait_for(lambda: _helpers(t) == [], 60, message="the TensorBoard pod to go")


def test_sigint_mid_pull_removes_the_helper_pod_keeps_the_verified_files_and_no_partial_file(
    claim: tuple[Tao, Path, str], tmp_path: Path
) -> None:
    t, volume, busybox = claim
    result = t(
        "submit", "--image", busybox, "--network-arch", "data", "--action", "run", "--gpus", "0", "--pvc",
        "tao-data", "--command", "echo nothing written", "--wait", "--timeout", "180", *ON_REAL_NODES, timeout=240,
    )
    assert result.returncode == 0, result.stderr
    record_id = result.stdout.strip().splitlines()[-1]
    big = tmp_path / "big"
    big.mkdir()
    for i in range(6):
        (big / f"part-{i}.bin").write_bytes(os.urandom(32 * 1024 * 1024))
    # The job's results, as if it wrote them: its root-owned results/ made writable for the helper's UID, as a
    # volume that applies fsGroup would be (hostPath does not).
    (volume / "results").mkdir(exist_ok=True)
    (volume / "results").chmod(0o777)
    pushed = _push(t, busybox, str(big), "--to", f"results/{record_id}")
    assert pushed.returncode == 0, pushed.stderr

    dest = tmp_path / "out"
    proc = subprocess.Popen([TAO, "results", "pull", record_id, "--dest", str(dest)], env=t.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # two files arrived whole and a third is arriving (a part stays until the end): the pod hashes beside
        wait_for(lambda: len(list(dest.rglob("*.kubectl-tao-part"))) >= 3, 120, interval=0.02,
                 message="two files to arrive")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (out, err)
    said = re.match(r"error: interrupted; (\d+) file\(s\) that arrived whole and verified are kept, no partial "
                    r"file: pull again to resume", err)
    assert said is not None, err
    kept = _tree(dest / "big")
    assert not any(dest.rglob("*.kubectl-tao-part"))
    assert len(kept) == int(said.group(1)) >= 1, err  # the files whose hashes agreed by then, whole
    assert all(_tree(big)[name] == digest for name, digest in kept.items())
    wait_for(lambda: _helpers(t) == [], 60, message="the helper pod to go")

    resumed = t("results", "pull", record_id, "--dest", str(dest), "-o", "json", timeout=240)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert (summary["skipped"], summary["pulled"]) == (len(kept), 6 - len(kept))  # the kept files do not travel
    assert _tree(dest / "big") == _tree(big)
    assert _helpers(t) == []


def test_a_push_sigkilled_mid_run_leaves_a_helper_pod_the_next_push_removes_once_past_its_lifetime(
    claim: tuple[Tao, Path, str], tmp_path: Path
) -> None:
    t, _volume, busybox = claim
    (tmp_path / "a.txt").write_text("a\n")
    args = ("data", "push", str(tmp_path / "a.txt"), "--to", "killed", "--pvc", "tao-data", "--helper-image",
            busybox, *ON_REAL_NODES)
    never_made = killed_at(t, " exec -i tao-volume-", tmp_path / "fired", *args, timeout=240)  # its first exec
    (name,) = [n.removeprefix("pod/") for n in _helpers(t)]
    assert f"exec -i {name} " in never_made
    pod = json.loads(t.kubectl("get", "pod", name, "-o", "json").stdout)
    assert pod["status"]["phase"] == "Running" and "schedulingGates" not in pod["spec"]  # no credentials: no gate

    kept = _push(t, busybox, str(tmp_path / "a.txt"), "--to", "kept")  # within its lifetime: maybe a live push's
    assert kept.returncode == 0 and "killed kubectl-tao left" not in kept.stderr, kept.stderr
    wait_for(lambda: _helpers(t) == [f"pod/{name}"], 60, message="the second push's own helper pod to go")

    # Its lifetime over (activeDeadlineSeconds lowered, as six hours passing would), its kubelet ends it, and the
    # next push removes it.
    t.kubectl("patch", "pod", name, "--type=json",
              "-p", '[{"op": "replace", "path": "/spec/activeDeadlineSeconds", "value": 1}]')
    wait_for(lambda: t.kubectl("get", "pod", name, "-o", "jsonpath={.status.phase}").stdout == "Failed", 60,
             message="the kubelet to end the pod at its deadline")
    swept = _push(t, busybox, str(tmp_path / "a.txt"), "--to", "swept")
    assert swept.returncode == 0, swept.stderr
    assert swept.stderr.count("a killed kubectl-tao left") == 1
    assert f"removed the volume helper pod {t.namespace}/{name} a killed kubectl-tao left\n" in swept.stderr
    wait_for(lambda: _helpers(t) == [], 60, message="the helper pods to go")
