"""`results tensorboard` on the local cluster's real nodes, its success path: a job writes event files on its
claim, `results tensorboard JOB --image <stand-in>` prints the URL, an HTTP GET through the port-forward answers
with those files, and SIGINT (Ctrl-C) ends it with exit 0 and removes the pod.

No local image has TensorBoard, so `--image` is a test image built here: the cluster's s3-tools image (Python 3.11)
with tests/support/programs/tensorboard.py as `tensorboard` on PATH, a stand-in that takes TensorBoard's
`--logdir --host --port` and serves a plain listing of the logdir's event files (not TensorBoard itself).

Skipped when the cluster has no real nodes (KUBECTL_TAO_REAL_NODES=0).
"""

from __future__ import annotations

import hashlib
import signal
import socket
import subprocess
import threading
import urllib.request

import pytest
from support.cluster import REPO, TAO, Cluster, Tao, wait_for
from support.standin_image import build_on_real_nodes

from .test_real_pods import ON_REAL_NODES, images, real, real_images  # noqa: F401

pytestmark = pytest.mark.e2e

HELPER_SELECTOR = "app.kubernetes.io/component=volume-helper"
STAND_IN = REPO / "tests" / "support" / "programs" / "tensorboard.py"
EVENTS = "events.out.tfevents.1796583000.trainer.1.0"
WRITE_EVENTS = (
    'd="$TAO_RESULTS_ROOT/train"; mkdir -p "$d/eval"; head -c 4096 /dev/urandom > "$d/' + EVENTS + '"; '
    'head -c 100 /dev/urandom > "$d/eval/' + EVENTS + '"; echo not-an-event > "$d/notes.txt"; echo written'
)


@pytest.fixture(scope="module")
def tensorboard_image(cluster: Cluster, images: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> str:  # noqa: F811
    program = STAND_IN.read_text(encoding="utf-8").split("\n", 1)[1]  # its own first line names python3 on PATH
    body = ("#!/usr/bin/python3.11\n" + program).encode()
    name = f"kubectl-tao.local/tensorboard-standin:{hashlib.sha256(body).hexdigest()[:12]}"
    base: str = wait_for(lambda: real_images(cluster).get("S3_TOOLS_IMAGE"), 300, message="the s3-tools image")
    return build_on_real_nodes(cluster.data_dir, base, name, {"/usr/local/bin/tensorboard": (body, 0o755)},
                               tmp_path_factory.mktemp("image"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _helpers(t: Tao) -> list[str]:
    return t.kubectl("get", "pods", "-l", HELPER_SELECTOR, "-o", "name").stdout.split()


def test_tensorboard_prints_the_url_answers_through_the_port_forward_and_ctrl_c_removes_the_pod(
    real: Tao, cluster: Cluster, tensorboard_image: str  # noqa: F811
) -> None:
    busybox = real_images(cluster)["BUSYBOX_IMAGE"]
    result = real(
        "submit", "--image", busybox, "--network-arch", "dino", "--action", "train", "--gpus", "0", "--pvc",
        "tao-data", "--command", WRITE_EVENTS, "--wait", "--timeout", "180", *ON_REAL_NODES, timeout=240,
    )
    assert result.returncode == 0, result.stderr
    record_id = result.stdout.strip().splitlines()[-1]

    port = _free_port()
    proc = subprocess.Popen(
        [TAO, "results", "tensorboard", record_id, "--image", tensorboard_image, "--port", str(port), "--timeout",
         "180"], env=real.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        wait_for(lambda: lines or proc.poll() is not None, 240, message="the TensorBoard URL")
        assert proc.poll() is None, proc.communicate(timeout=30)
        url = f"http://127.0.0.1:{port}/"
        assert lines[0] == f"TensorBoard for job {record_id}: {url} (Ctrl-C to stop)\n"
        with urllib.request.urlopen(url, timeout=30) as answer:  # the port-forward on 127.0.0.1
            assert answer.status == 200
            listed = answer.read().decode()
        assert sorted(listed.splitlines()) == sorted([f"train/{EVENTS} 4096", f"train/eval/{EVENTS} 100"])
        assert len(_helpers(real)) == 1
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # a failed assertion above: Ctrl-C still removes the pod
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
    assert proc.returncode == 0, err
    wait_for(lambda: _helpers(real) == [], 60, message="the TensorBoard pod to go")
    assert not [p for p in real.kubectl("get", "pods", "-o", "name").stdout.split() if "tao-volume-" in p]
