"""gpu-smoke of a built GPU bundle (`make gpu-bundle`) on this machine, which has no GPU: two stand-in GPUs
(tests/support/gpu_standins.py) and a stand-in nvcc whose "gpu-check" is a shell script printing what the
CUDA program prints. It proves the bundle's own machinery end to end: the unpack, the cluster from the
bundle's binaries alone (k8s-multi, containerd, runc, the CNI plugins, busybox's `ip`; KUBECTL_TAO_PREBUILT:
no kwok, cluster DNS or S3 store), the image built and imported, kubectl-tao from the release archive
(preflight, gpus, submit --wait, logs, explain), one summary line per step, and `down` leaving nothing.
No GPU computes here: docs/real-gpus.md gives the one command for a GPU host.

Uses GPU_BUNDLE_DIR when set, else builds a bundle (about 5 minutes on 2 cores). No other local cluster
may be up (the bundle's cluster uses the same bridge).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from support.cluster import REPO
from support.gpu_standins import make_stand_ins

OWN_CLUSTER = True  # tests/e2e/conftest.py runs such modules before the session's cluster starts

pytestmark = pytest.mark.e2e

# What the stand-in nvcc writes as gpu-check: the lines gpu-check.cu prints, from a shell script.
STAND_IN_NVCC = r"""#!/bin/sh
# A stand-in nvcc: `--version`, or `-O2 -o OUT SRC` writing OUT as a shell script (no CUDA here).
if [ "$1" = --version ]; then echo "Cuda compilation tools, release 0.0 (stand-in)"; exit 0; fi
while [ "$#" -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
cat >"$out" <<'EOF'
#!/bin/sh
echo "gpu-check: GPU 0: Stand-in GPU 80GB, 81559 MiB, compute capability 9.0"
if [ "$1" = --oom ]; then
  echo "gpu-check: cudaMalloc of 1024 MiB more after 79872 MiB failed: out of memory (cudaErrorMemoryAllocation)"
  exit 3
fi
echo "gpu-check: saxpy of 16777216 floats on Stand-in GPU 80GB: all correct"
EOF
chmod 755 "$out"
"""


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.environ.get("KUBECTL_TAO_SKIP_E2E") == "1":
        pytest.skip("KUBECTL_TAO_SKIP_E2E=1")
    if os.geteuid() != 0:
        pytest.skip("gpu-smoke runs as root")
    if subprocess.run(["ip", "link", "show", "ktbr0"], capture_output=True).returncode == 0:
        pytest.skip("another local cluster with real nodes is up (bridge ktbr0 exists): gpu-smoke starts its own")
    given = os.environ.get("GPU_BUNDLE_DIR")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("bundle") / "gpu-bundle"
    built = subprocess.run(
        [str(REPO / "scripts" / "build-gpu-bundle"), str(out)], capture_output=True, text=True, timeout=1800
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return out


def test_gpu_smoke_runs_every_step_on_stand_in_gpus_and_leaves_nothing(
    bundle: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    env = {**os.environ, **make_stand_ins(tmp_path / "gpus")}
    nvcc_dir = tmp_path / "nvcc"
    nvcc_dir.mkdir()
    (nvcc_dir / "nvcc").write_text(STAND_IN_NVCC)
    (nvcc_dir / "nvcc").chmod(0o755)
    # Short: the cluster's unix sockets live under it (at most 107 bytes; gpu-smoke refuses a longer one).
    smoke_tmp = Path(tempfile.mkdtemp(prefix="gs.", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(smoke_tmp, ignore_errors=True))
    env.update(PATH=f"{nvcc_dir}:{env['PATH']}", GPU_SMOKE_TMPDIR=str(smoke_tmp))
    for name in ("KUBECONFIG", "KUBECTL_TAO_CLUSTER_DIR", "KUBECTL_TAO_CACHE", "TAO_STATE_DIR"):
        env.pop(name, None)

    run = subprocess.run([str(bundle / "gpu-smoke")], env=env, capture_output=True, text=True, timeout=900)
    out = run.stdout
    assert run.returncode == 0, out + run.stderr

    def line(step: str) -> str:
        found = [x for x in out.splitlines() if re.match(rf"gpu-smoke: {re.escape(step)} +", x)]
        assert len(found) == 1, out
        return found[0]

    assert " ok (" in line("unpack")
    assert "real-node-0: 2 real GPU(s): Stand-in GPU 80GB" in line("up") and " ok (" in line("up")
    assert " ok (" in line("image") and "kubectl-tao.local/gpu-check:smoke" in line("image")
    assert " skipped (" in line("torch-image")
    for step in ("storage", "preflight", "gpus", "down"):
        assert " ok (" in line(step), out
    assert "Stand-in GPU 80GB, 81559 MiB" in line("submit") and "all correct" in line("submit")
    assert " skipped (" in line("probe-nccl")
    assert "cudaErrorMemoryAllocation" in line("oom") and "explain:" in line("oom")
    assert "nothing of the cluster left" in line("down")
    assert re.search(r"gpu-smoke: 8 of 10 steps passed, 2 skipped, in [0-9.]+s$", out.strip()), out
    assert list(smoke_tmp.iterdir()) == []
    assert subprocess.run(["ip", "link", "show", "ktbr0"], capture_output=True).returncode != 0


def test_the_built_bundle_fits_60_mib_and_stops_after_unpacking_without_a_gpu(
    bundle: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    files = [p for p in bundle.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) <= 60 * 1024 * 1024, [(p.name, p.stat().st_size) for p in files]
    checked = subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=bundle, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # the marker build-gpu-bundle recognises its own folder by, listed with its checksum
    assert (bundle / ".gpu-bundle").read_text().startswith("kubectl-tao GPU bundle 1: ")
    assert re.search(r"^[0-9a-f]{64}  \.gpu-bundle$", (bundle / "SHA256SUMS").read_text(), re.M)
    dev = tmp_path / "dev"  # no nvidiactl, no nvidia0: no GPU, whatever this machine has
    dev.mkdir()
    smoke_tmp = Path(tempfile.mkdtemp(prefix="gs.", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(smoke_tmp, ignore_errors=True))
    env = {**os.environ, "GPU_SMOKE_TMPDIR": str(smoke_tmp), "KUBECTL_TAO_GPU_DEV_ROOT": str(dev)}
    run = subprocess.run([str(bundle / "gpu-smoke")], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 3, run.stdout + run.stderr
    assert run.stdout.splitlines()[0].startswith("gpu-smoke: unpack      ok ("), run.stdout
    assert run.stderr.startswith(f"gpu-smoke: no NVIDIA GPU on this machine (no {dev}/nvidiactl"), run.stderr
    assert list(smoke_tmp.iterdir()) == []
