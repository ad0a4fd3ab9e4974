"""`results` and `results pull` of a storage tier C job on the local cluster's real nodes: the job uploads its results
to the cluster's real S3 store (versitygw), then the helper pod's S3 container (the job's s3-tools image, the job's
credential Secret as its environment) lists and downloads the prefix and the plugin lists and pulls it as from a
claim. The credential appears in no output, no command line and no manifest; no helper pod is left. A job whose
Secret went with its Job is read with the credentials given again (`--env-file`): a Secret the helper pod owns,
removed with it. A plugin SIGKILLed right after it created that Secret leaves it owned by its (gated) helper pod,
which the next helper verb removes once past its lifetime, the Secret going with it.

Skipped when the cluster has no real nodes (KUBECTL_TAO_REAL_NODES=0).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from pathlib import Path

import pytest
from support.cluster import Cluster, Tao, killed_at, wait_for

from .test_real_pods import images, real, real_images  # noqa: F401
from .test_real_tier_c import BUCKET, Store, store, submit_tier_c, tools_image  # noqa: F401

pytestmark = pytest.mark.e2e

HELPER_SELECTOR = "app.kubernetes.io/component=volume-helper"
WRITE = (
    'mkdir -p "$TAO_RESULTS_ROOT/train/eval"; '
    'head -c 300000 /dev/urandom > "$TAO_RESULTS_ROOT/train/model_epoch_2.pth"; '
    'head -c 200000 /dev/urandom > "$TAO_RESULTS_ROOT/train/model_epoch_10.pth"; '
    'cp "$TAO_RESULTS_ROOT/train/model_epoch_10.pth" "$TAO_RESULTS_ROOT/train/model_latest.pth"; '
    'echo \'{"status": "SUCCESS", "epoch": 10, "max_epoch": 10, "kpi": {"loss": 0.125}}\' '
    '> "$TAO_RESULTS_ROOT/train/status.json"; echo ap=0.5 > "$TAO_RESULTS_ROOT/train/eval/kpi.txt"; echo written'
)


def _helpers(t: Tao) -> list[str]:
    return t.kubectl("get", "pods", "-l", HELPER_SELECTOR, "-o", "name").stdout.split()


def test_a_tier_c_jobs_results_are_listed_and_pulled_from_its_s3_prefix(
    real: Tao, store: Store, tools_image: str, cluster: Cluster, tmp_path: Path  # noqa: F811
) -> None:
    real.env["KUBECTL_TAO_HELPER_IMAGE"] = real_images(cluster)["BUSYBOX_IMAGE"]
    prefix = f"e2e/{real.namespace}/results-{secrets.token_hex(4)}"
    submitted = submit_tier_c(real, store, tools_image, WRITE, "--s3-output", f"s3://{BUCKET}/{prefix}")
    assert submitted.returncode == 0, submitted.stderr + submitted.stdout
    record_id = submitted.stdout.strip().splitlines()[-1]
    out = f"{prefix}/{record_id}"
    uploaded = {key[len(out) + 1:]: store.get(key) for key in store.keys(out + "/")}
    assert sorted(uploaded) == ["train/eval/kpi.txt", "train/model_epoch_10.pth", "train/model_epoch_2.pth",
                                "train/model_latest.pth", "train/status.json"]

    listed = real("results", record_id, "-o", "json", timeout=300)
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    assert data["results_dir"] == f"s3://{BUCKET}/{out}/" and data["pvc"] is None
    files = {f["path"]: f for f in data["files"]}
    assert {p: f["size"] for p, f in files.items()} == {p: len(body) for p, body in uploaded.items()}
    assert [f["path"] for f in data["files"] if f["epoch"] is not None] == ["train/model_epoch_2.pth",
                                                                          "train/model_epoch_10.pth"]
    assert files["train/model_latest.pth"]["latest"] is True  # uploaded as a file of its own
    assert {d["path"]: d["files"] for d in data["dirs"]} == {"train": 5, "train/eval": 1}
    assert data["status"]["train/status.json"]["kpi"] == {"loss": 0.125}
    table = real("results", record_id, timeout=300)
    assert table.returncode == 0, table.stderr
    assert f"s3://{BUCKET}/{out}/ (storage tier C)" in table.stdout and "train/" in table.stdout

    dest = tmp_path / "out"
    pulled = real("results", "pull", record_id, "--dest", str(dest), "-o", "json", timeout=300)
    assert pulled.returncode == 0, pulled.stderr
    assert (json.loads(pulled.stdout)["pulled"], json.loads(pulled.stdout)["verified"]) == (5, 5)
    here = {str(p.relative_to(dest)): p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    assert {k: hashlib.sha256(v).hexdigest() for k, v in here.items()} == {
        k: hashlib.sha256(v).hexdigest() for k, v in uploaded.items()}
    again = real("results", "pull", record_id, "--dest", str(dest), timeout=300)
    assert again.returncode == 0 and again.stdout.startswith("pulled 0 file(s)"), again.stdout + again.stderr
    latest = real("results", "pull", record_id, "--latest", "--dest", str(tmp_path / "latest"), timeout=300)
    assert latest.returncode == 0, latest.stderr
    assert [p.name for p in (tmp_path / "latest").rglob("*") if p.is_file()] == ["model_latest.pth"]

    # The credential: never in the plugin's output, a kubectl command line, or the helper's manifest.
    secret_value = store.creds["AWS_SECRET_ACCESS_KEY"]
    for said in (listed, table, pulled, again, latest):
        assert secret_value not in said.stdout + said.stderr
    assert all(secret_value not in " ".join(call) for call in real.kubectl_calls())
    wait_for(lambda: _helpers(real) == [], 60, message="the helper pods to go")


def test_a_tier_c_job_whose_secret_is_gone_is_refused_then_read_with_the_credentials_given_again(
    real: Tao, store: Store, tools_image: str, cluster: Cluster, tmp_path: Path  # noqa: F811
) -> None:
    real.env["KUBECTL_TAO_HELPER_IMAGE"] = real_images(cluster)["BUSYBOX_IMAGE"]
    prefix = f"e2e/{real.namespace}/gone-{secrets.token_hex(4)}"
    submitted = submit_tier_c(real, store, tools_image, 'echo x > "$TAO_RESULTS_ROOT/x.txt"', "--s3-output",
                              f"s3://{BUCKET}/{prefix}")
    assert submitted.returncode == 0, submitted.stderr + submitted.stdout
    record_id = submitted.stdout.strip().splitlines()[-1]
    (secret,) = real.extra(record_id)["secret_names"]
    real.kubectl("delete", "jobs", "--all", "--wait=true")  # its Secret goes with it (owner reference)
    wait_for(lambda: real.kubectl("get", "secret", secret, check=False).returncode != 0, 60,
             message="the job's Secret to go with its Job")
    refused = real("results", record_id, timeout=120)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "credential Secret" in refused.stderr and "is gone" in refused.stderr and "--env-file" in refused.stderr
    assert _helpers(real) == []

    # The credentials given again (stdin, then a file): a Secret of the helper pod's own, gone with it.
    listed = real("results", record_id, "--env-file", "-", "-o", "json", input=store.env_file.read_text(),
                  timeout=300)
    assert listed.returncode == 0, listed.stderr
    assert [f["path"] for f in json.loads(listed.stdout)["files"]] == ["x.txt"]
    dest = tmp_path / "out"
    pulled = real("results", "pull", record_id, "--env-file", str(store.env_file), "--dest", str(dest),
                  "--s3-tools-image", tools_image, timeout=300)
    assert pulled.returncode == 0, pulled.stderr
    assert (dest / "x.txt").read_text() == "x\n"
    wait_for(lambda: _helpers(real) == [], 60, message="the helper pods to go")
    assert real.kubectl("get", "secrets", "-l", HELPER_SELECTOR, "-o", "name").stdout.split() == []
    said = listed.stdout + listed.stderr + pulled.stdout + pulled.stderr
    kept = [p.read_text() for p in real.state_dir.rglob("*.json") if p.is_file()]
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        value = store.creds[key]
        assert value not in said
        assert all(value not in " ".join(call) for call in real.kubectl_calls())
        assert all(value not in text for text in kept)  # no record file holds it


GATE = "kubectl-tao.io/credentials"


def test_a_plugin_killed_after_creating_its_helpers_secret_leaves_it_owned_by_its_gated_pod(
    real: Tao, store: Store, tools_image: str, cluster: Cluster, tmp_path: Path  # noqa: F811
) -> None:
    real.env["KUBECTL_TAO_HELPER_IMAGE"] = real_images(cluster)["BUSYBOX_IMAGE"]
    prefix = f"e2e/{real.namespace}/killed-{secrets.token_hex(4)}"
    submitted = submit_tier_c(real, store, tools_image, 'echo x > "$TAO_RESULTS_ROOT/x.txt"', "--s3-output",
                              f"s3://{BUCKET}/{prefix}")
    assert submitted.returncode == 0, submitted.stderr + submitted.stdout
    record_id = submitted.stdout.strip().splitlines()[-1]
    env_file = str(store.env_file)

    # Killed right before it lifts its helper pod's scheduling gate, i.e. right after it created the pod's Secret.
    never_made = killed_at(real, " patch pod tao-volume-", tmp_path / "fired", "results", record_id, "--env-file",
                           env_file)
    (pod,) = json.loads(real.kubectl("get", "pods", "-l", HELPER_SELECTOR, "-o", "json").stdout)["items"]
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    assert f"patch pod {name} " in never_made
    assert pod["spec"]["schedulingGates"] == [{"name": GATE}] and pod["status"]["phase"] == "Pending"
    owners = real.kubectl("get", "secret", f"{name}-s3", "-o", "jsonpath={.metadata.ownerReferences}").stdout
    assert json.loads(owners) == [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid}]

    # The next helper verb keeps the killed plugin's pod while it is within its lifetime (it could be a live
    # plugin's between its creates), and works with a pod of its own.
    listed = real("results", record_id, "--env-file", env_file, "-o", "json", timeout=300)
    assert listed.returncode == 0, listed.stderr
    assert [f["path"] for f in json.loads(listed.stdout)["files"]] == ["x.txt"]
    assert "killed kubectl-tao left" not in listed.stderr
    wait_for(lambda: _helpers(real) == [f"pod/{name}"], 60, message="the verb's own helper pod to go")

    # Removed (as the next helper verb does once the pod has been gated for volume_helper.GATED_FOR_SECONDS, a
    # quarter of an hour no test waits: tests/unit/jobs/test_volume_helper.py holds that choice), the garbage
    # collector removes its Secret with it.
    real.kubectl("delete", "pod", name, "--wait=false")
    wait_for(lambda: _helpers(real) == [], 60, message="the helper pods to go")
    wait_for(lambda: real.kubectl("get", "secrets", "-l", HELPER_SELECTOR, "-o", "name").stdout.split() == [], 60,
             message="the killed plugin's Secret to go with its pod")
    secret_value = store.creds["AWS_SECRET_ACCESS_KEY"]
    assert secret_value not in never_made + listed.stdout + listed.stderr
