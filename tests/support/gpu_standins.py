"""Stand-in NVIDIA GPUs for tests on machines without one: character devices with /dev/null's numbers in a
temporary device root, a stand-in libcuda and nvidia-smi, and the environment that points
scripts/local-cluster (and the device plugin it starts) at them. Nothing here computes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

UUIDS = ["GPU-5d2b7f0e-1c1a-4b7e-9a51-0c7a1f1e0001", "GPU-5d2b7f0e-1c1a-4b7e-9a51-0c7a1f1e0002"]
STAND_IN_LIBCUDA = "stand-in libcuda, not a driver"
NVIDIA_SMI = f"""#!/bin/sh
# A stand-in nvidia-smi: what the plugin asks (--query-gpu) and what a job runs (-L).
case "$1" in
  --query-gpu=*) printf '0, {UUIDS[0]}, Stand-in GPU 80GB, 81559\\n1, {UUIDS[1]}, Stand-in GPU 80GB, 81559\\n' ;;
  -L) i=0
      for u in $(echo "$NVIDIA_VISIBLE_DEVICES" | tr , ' '); do
        echo "GPU $i: Stand-in GPU 80GB (UUID: $u)"; i=$((i+1))
      done ;;
  *) exit 9 ;;
esac
"""


def make_stand_ins(root: Path) -> dict[str, str]:
    """The device root, driver library directory and nvidia-smi of two stand-in GPUs; the environment
    that points scripts/local-cluster (and the plugin it starts) at them."""
    dev, lib, bin_ = root / "dev", root / "lib", root / "bin"
    for d in (dev, lib, bin_):
        d.mkdir(parents=True)
    null = os.stat("/dev/null").st_rdev
    for name in ("nvidiactl", "nvidia0", "nvidia1", "nvidia-uvm", "nvidia-uvm-tools"):
        os.mknod(dev / name, 0o666 | stat.S_IFCHR, null)
    (lib / "libcuda.so.580.159.04").write_text(STAND_IN_LIBCUDA + "\n")
    (lib / "libcuda.so.1").symlink_to("libcuda.so.580.159.04")
    (lib / "libnvidia-ml.so.1").write_text("stand-in nvml\n")
    smi = bin_ / "nvidia-smi"
    smi.write_text(NVIDIA_SMI)
    smi.chmod(0o755)
    return {
        "KUBECTL_TAO_GPUS": "host",
        "KUBECTL_TAO_GPU_DEV_ROOT": str(dev),
        "KUBECTL_TAO_GPU_LIB_DIRS": str(lib),
        "KUBECTL_TAO_GPU_NVIDIA_SMI": str(smi),
        "KUBECTL_TAO_GPU_PROC_DIR": str(root / "no-proc"),
        "KUBECTL_TAO_KUEUE": "0",
    }
