"""Canary credentials, one through an env-file and one through the environment (`--env NAME`), never show
up where they must not: in `ps` while the submits run, in the kubectl argv, the rendered manifests, the
records, any output or error message, `kubectl get job -o yaml`; only in the Secret. And the linter catches
the canary when someone inlines it by hand, without printing it."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from support.cluster import RUN_SECONDS, STAY_RUNNING, Cluster, Tao, kubectl

from .helpers import REPO, TAO, check_record, record_ids, wait_gone
from .stats import STATS

REDACT_SECRETS = str(REPO / "scripts" / "redact_secrets")
ENV_NAME = "NGC_API_KEY"


def _canaries() -> tuple[str, str]:
    tag = uuid.uuid4().hex
    return f"hf_RelFile{tag}", f"nvapi-RelEnv{tag}"


def _forms(canary: str) -> list[str]:
    """The canary and the encodings it could hide in."""
    return [canary, base64.b64encode(canary.encode()).decode(), base64.b64encode(canary.encode()).decode()[:24]]


class Watch:
    """Counts every place looked at and every canary found (STATS, the summary block)."""

    def __init__(self, *canaries: str) -> None:
        self.forms = [form for canary in canaries for form in _forms(canary)]
        self.hits: list[str] = []

    def look(self, where: str, text: str) -> None:
        STATS.canary_checks += 1
        found = [form for form in self.forms if form in text]
        if found:
            STATS.canary_hits += 1
            self.hits.append(where)


class PsSampler(threading.Thread):
    """`ps -eo args` over and over while the submits run."""

    def __init__(self, watch: Watch) -> None:
        super().__init__(daemon=True)
        self.watch = watch
        self.stop = threading.Event()
        self.samples = 0

    def run(self) -> None:
        while not self.stop.is_set():
            self.samples += 1
            self.watch.look(f"ps sample {self.samples}", self.sample())

    @staticmethod
    def sample() -> str:
        if shutil.which("ps"):
            return subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, timeout=10, check=False).stdout
        lines = []  # what `ps -eo args` prints, read where ps reads it (images without procps)
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                lines.append(cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                continue
        return "\n".join(lines)


@pytest.mark.timeout(240)
def test_canary_credentials_stay_in_the_secret(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    file_canary, env_canary = _canaries()
    watch = Watch(file_canary, env_canary)
    tao = Tao(cluster, namespace, tmp_path / "state")
    tao.env[ENV_NAME] = env_canary
    env_file = tmp_path / "creds.env"
    env_file.write_text(f"HF_TOKEN={file_canary}\nS3_ENDPOINT_URL=https://s3.example.com\n", encoding="utf-8")
    common = ["--image", "busybox:1.36", "--gpus", "0", "--storage-tier", "C", "--s3-output", "s3://tao-results/canary"]
    runs = [
        ["--command", "sleep 1", "--env-file", str(env_file), "--annotation", f"{RUN_SECONDS}=1"],
        ["--command", "sleep 1", "--env", ENV_NAME, "--annotation", f"{STAY_RUNNING}=true"],
        ["--command", "sleep 1", "--env-file", "-", "--env", ENV_NAME, "--annotation", f"{STAY_RUNNING}=true"],
    ]
    sampler = PsSampler(watch)
    sampler.start()
    procs = []
    for extra in runs:
        stdin = env_file.read_text() if "-" in extra else None
        proc = subprocess.Popen(
            [TAO, "submit", *common, *extra],
            env=tao.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        procs.append((proc, stdin))
    outputs = [proc.communicate(input=stdin, timeout=120) for proc, stdin in procs]
    sampler.stop.set()
    sampler.join(timeout=30)
    assert sampler.samples > 0
    for (proc, _stdin), (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        watch.look("submit output", out + err)
    ids = record_ids(tao.state_dir)
    assert len(ids) == len(runs)

    # Everything kubectl-tao wrote or printed afterwards, and what the cluster shows.
    watch.look("kubectl argv (KUBECTL_TAO_TRACE)", tao.trace.read_text())
    rendered = tao("render", *common, "--command", "true", "--env-file", str(env_file), "--env", ENV_NAME, "-o", "json")
    assert rendered.returncode == 0, rendered.stderr
    watch.look("render", rendered.stdout + rendered.stderr)
    dry = tao("submit", *common, "--command", "true", "--env-file", str(env_file), "--dry-run=server", "-o", "yaml")
    assert dry.returncode == 0, dry.stderr
    watch.look("submit --dry-run=server", dry.stdout + dry.stderr)
    for record_id in ids:
        for verb in (["status", record_id, "-o", "json"], ["logs", record_id], ["explain", record_id]):
            result = tao(*verb)
            watch.look(" ".join(verb[:1]), result.stdout + result.stderr)
        _record, extra = check_record(tao.state_dir, record_id)
        job_yaml = kubectl("get", "job", extra["job_name"], "-o", "yaml", ns=namespace).stdout
        assert extra["secret_names"] and extra["secret_names"][0] in job_yaml  # referenced by name only
        watch.look(f"kubectl get job {extra['job_name']} -o yaml", job_yaml)
    listing = tao("list", "-o", "json")
    watch.look("list", listing.stdout + listing.stderr)
    watch.look("pods -o yaml", kubectl("get", "pods", "-o", "yaml", ns=namespace).stdout)
    watch.look("events", kubectl("get", "events", "-o", "yaml", ns=namespace).stdout)
    for path in sorted(tao.state_dir.rglob("*")):
        if path.is_file():
            watch.look(str(path.relative_to(tao.state_dir)), path.read_text(encoding="utf-8", errors="replace"))

    # Error messages: a gate refusal after the credentials were read, and env-files broken around the canary.
    refused = tao("submit", *common, "--command", "true", "--env-file", str(env_file), "--image-pull-secret", "absent")
    assert refused.returncode == 1 and "absent" in refused.stderr
    watch.look("gate refusal", refused.stdout + refused.stderr)
    for bad in (f"{file_canary}\n", f"-{file_canary}=x\n", f"HF_TOKEN={file_canary}\nHF_TOKEN={file_canary}\n"):
        result = tao("submit", *common, "--command", "true", "--env-file", "-", input=bad)
        assert result.returncode == 2, result.stderr
        watch.look("env-file error", result.stdout + result.stderr)

    # The canary did travel: it is in the Secret (the one place it belongs).
    secrets = json.loads(kubectl("get", "secrets", "-l", "app.kubernetes.io/managed-by=kubectl-tao",
                                 "-o", "json", ns=namespace).stdout)["items"]  # fmt: skip
    values = [base64.b64decode(v).decode() for s in secrets for v in (s.get("data") or {}).values()]
    assert file_canary in values and env_canary in values

    assert watch.hits == [], f"canary found in: {watch.hits}"
    for record_id in ids:  # the finished one goes with its TTL (its Secret is owned by its Job), the rest now
        if json.loads(tao("status", record_id, "-o", "json").stdout)["state"] not in ("COMPLETE", "ERROR"):
            assert tao("cancel", record_id, "--no-wait").returncode == 0
            wait_gone(namespace, tao.extra(record_id)["job_name"], kinds="jobs,secrets", timeout=60)


def _manifest(container: dict[str, Any], annotations: dict[str, str] | None = None) -> str:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "hand-written", "annotations": annotations or {}},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
    }
    return json.dumps(job, indent=2)


@pytest.mark.timeout(60)
def test_the_linter_catches_a_hand_inlined_canary_without_printing_it(tmp_path: Path) -> None:
    canary, _ = _canaries()
    watch = Watch(canary)
    encoded = base64.b64encode(canary.encode()).decode()
    cases = {
        "env-value.json": _manifest({"name": "c", "image": "busybox", "env": [{"name": "HF_TOKEN", "value": canary}]}),
        "command.json": _manifest(
            {"name": "c", "image": "busybox", "command": ["sh", "-c", f"export HF_TOKEN={canary}; python train.py"]}
        ),
        "args-bearer.json": _manifest(
            {"name": "c", "image": "busybox", "args": [f"curl -H 'Authorization: Bearer {canary}' https://x"]}
        ),
        "annotation-base64.json": _manifest({"name": "c", "image": "busybox"}, {"example.com/blob": encoded}),
    }
    env = {**os.environ, "PATH": f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    paths = []
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
        for tool in ([REDACT_SECRETS, "lint"], [TAO, "lint"]):
            result = subprocess.run(
                [*tool, str(path)], env=env, capture_output=True, text=True, timeout=30, check=False
            )
            assert result.returncode == 1, f"{tool[0]} missed the canary in {name}: {result.stdout}{result.stderr}"
            findings = [line for line in (result.stdout + result.stderr).splitlines() if name in line]
            assert findings, f"no finding names {name}"
            watch.look(f"{tool[0]} lint {name}", result.stdout + result.stderr)
    together = subprocess.run(
        [REDACT_SECRETS, "lint", *map(str, paths)], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert together.returncode == 1 and len(together.stderr.strip().splitlines()) >= len(cases)
    watch.look("redact_secrets lint (all)", together.stdout + together.stderr)
    assert watch.hits == [], f"the linter printed the canary: {watch.hits}"
