"""Storage tier C on the local cluster's real nodes, against the cluster's real S3 store (versitygw on the
bridge gateway): the fetch-inputs init container and the upload after the command run in the locally built
s3-tools image (AWS CLI v1 from PyPI), credentials reach the pod only through the job's Secret, and the
test reads the bucket back over the S3 API itself (SigV4-signed curl from this host).

Skipped when the cluster has no real nodes (KUBECTL_TAO_REAL_NODES=0).
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.cluster import Cluster, Tao, wait_for

from .test_real_pods import ON_REAL_NODES, images, real, real_images, record_pods, status_json  # noqa: F401

pytestmark = pytest.mark.e2e

BUCKET = "kubectl-tao"  # made empty by `local-cluster up`


class Store:
    """The cluster's S3 store, driven from this host with its root credentials (never printed)."""

    def __init__(self, cluster: Cluster) -> None:
        self.env_file = cluster.data_dir / "s3" / "credentials.env"
        self.creds = dict(
            line.split("=", 1) for line in self.env_file.read_text().splitlines() if "=" in line
        )
        self.endpoint = self.creds["AWS_ENDPOINT_URL"]

    def _curl(self, *args: str, path: str, data: bytes | None = None) -> bytes:
        user = f'user = "{self.creds["AWS_ACCESS_KEY_ID"]}:{self.creds["AWS_SECRET_ACCESS_KEY"]}"\n'
        config = Path(self.env_file.parent / f".curl-{secrets.token_hex(4)}")
        config.write_text(user)
        config.chmod(0o600)
        try:
            out = subprocess.run(
                ["curl", "-fsS", "--max-time", "20", "--config", str(config), "--aws-sigv4",
                 f"aws:amz:{self.creds['AWS_DEFAULT_REGION']}:s3", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                 *args, self.endpoint + path],
                input=data, capture_output=True, check=False, timeout=60,
            )
        finally:
            config.unlink()
        assert out.returncode == 0, out.stderr.decode()
        return out.stdout

    def put(self, key: str, body: bytes) -> None:
        self._curl("-X", "PUT", "--data-binary", "@-", path=f"/{BUCKET}/{key}", data=body)

    def get(self, key: str) -> bytes:
        return self._curl(path=f"/{BUCKET}/{key}")

    def keys(self, prefix: str) -> list[str]:
        # The whole bucket, ListObjects without a query string (curl 7.88 signed a listing query the store refused),
        # filtered here; it holds only the tests' few objects.
        xml = self._curl(path=f"/{BUCKET}")
        return sorted(key for key in re.findall(r"<Key>([^<]*)</Key>", xml.decode()) if key.startswith(prefix))


@pytest.fixture(scope="module")
def store(cluster: Cluster, images: dict[str, str]) -> Store:  # noqa: F811
    return Store(cluster)


@pytest.fixture(scope="module")
def tools_image(cluster: Cluster, images: dict[str, str]) -> str:  # noqa: F811
    # Imported into the nodes in the background after `up`.
    image: str = wait_for(lambda: real_images(cluster).get("S3_TOOLS_IMAGE"), 300, message="the s3-tools image")
    return image


def submit_tier_c(t: Tao, store: Store, image: str, command: str, *extra: str) -> Any:
    return t(
        "submit", "--image", image, "--s3-tools-image", image, "--network-arch", "tierc", "--action", "run",
        "--gpus", "0", "--storage-tier", "C", "--command", command, "--env-file", "-", *ON_REAL_NODES, *extra,
        "--wait", "--timeout", "240",
        input=store.env_file.read_text(), timeout=300,
    )


WRITE_RESULTS = (
    'cat "$TAO_INPUTS_DIR/input.txt" > "$TAO_RESULTS_ROOT/copy.txt"; mkdir -p "$TAO_RESULTS_ROOT/sub" '
    '"$TAO_RESULTS_ROOT/.tao"; echo nested > "$TAO_RESULTS_ROOT/sub/n.txt"; echo s > "$TAO_RESULTS_ROOT/.tao/state"; '
    'echo x > "$TAO_RESULTS_ROOT/scratch.tmp"; echo wrote results'
)


def test_tier_c_fetches_the_input_runs_and_uploads_the_results(
    real: Tao, store: Store, tools_image: str  # noqa: F811
) -> None:
    prefix = f"e2e/{real.namespace}"
    token = "input-" + secrets.token_hex(8)
    store.put(f"{prefix}/in/input.txt", token.encode())
    result = submit_tier_c(
        real, store, tools_image, WRITE_RESULTS,
        "--s3-input", f"s3://{BUCKET}/{prefix}/in/input.txt", "--s3-output", f"s3://{BUCKET}/{prefix}/out",
        "--upload-exclude", "*.tmp",
    )
    assert result.returncode == 0, result.stderr + result.stdout
    record_id = result.stdout.strip().splitlines()[-1]
    record = real.record(record_id)
    assert record["terminal_state"] == "COMPLETE"
    assert record["results_dir"].rstrip("/") == f"s3://{BUCKET}/{prefix}/out/{record_id}"
    # .tao/* and the --upload-exclude pattern are left out; everything else is under <s3-output>/<id>/
    out = f"{prefix}/out/{record_id}"
    assert store.keys(f"{prefix}/out/") == [f"{out}/copy.txt", f"{out}/sub/n.txt"]
    assert store.get(f"{out}/copy.txt").decode().strip() == token
    (pod,) = record_pods(real, record_id)
    assert pod["spec"]["nodeName"].startswith("real-node-")
    logs = real("logs", record_id).stdout
    assert "wrote results" in logs and f"uploading /workspace/results/ to s3://{BUCKET}/{out}/" in logs
    # The store's credentials went to the pod only through the job's Secret.
    secret_value = store.creds["AWS_SECRET_ACCESS_KEY"]
    for container in (*pod["spec"]["initContainers"], *pod["spec"]["containers"]):
        assert container["envFrom"] == [{"secretRef": {"name": container["envFrom"][0]["secretRef"]["name"],
                                                       "optional": False}}]
    assert secret_value not in real.kubectl("get", "jobs,pods", "-o", "yaml").stdout
    assert secret_value not in json.dumps(real.record(record_id)) + json.dumps(real.extra(record_id))
    assert all(secret_value not in " ".join(call) for call in real.kubectl_calls())
    assert secret_value not in logs


def test_a_failed_upload_exits_89_and_status_and_explain_say_so(
    real: Tao, store: Store, tools_image: str  # noqa: F811
) -> None:
    missing = f"no-such-bucket-{secrets.token_hex(4)}"
    result = submit_tier_c(
        real, store, tools_image, "echo done > \"$TAO_RESULTS_ROOT/r.txt\"", "--s3-output", f"s3://{missing}/out"
    )
    assert result.returncode == 1, result.stderr + result.stdout
    record_id = result.stdout.strip().splitlines()[-1]
    record = real.record(record_id)
    assert record["terminal_state"] == "ERROR" and record["err_class"] == "ERR_INFRA"
    (pod,) = record_pods(real, record_id)
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 89
    status = status_json(real, record_id)
    assert status["reason"] == "UploadFailed", status
    assert f"uploading its results to s3://{missing}/out/{record_id}/ failed (exit 89)" in status["message"]
    explain = real("explain", record_id)
    assert "its results did not reach S3" in explain.stdout, explain.stdout
    assert "NoSuchBucket" in real("logs", record_id).stdout
