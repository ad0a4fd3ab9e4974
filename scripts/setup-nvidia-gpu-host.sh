#!/usr/bin/env bash
# Check (or install) the NVIDIA host runtime a GPU worker node needs: driver, CUDA toolkit, container toolkit.
set -euo pipefail

usage() {
  cat >&2 <<'EOF'
usage: setup-nvidia-gpu-host.sh [--backend kubernetes|docker] (--check-only | --install [--yes])
                                [--min-driver N] [--min-cuda X.Y] [--min-toolkit X.Y.Z]

Checks the GPU host runtime against the minimums (driver 580, CUDA 13.0, NVIDIA Container Toolkit 1.19.0;
override with flags or TAO_MIN_DRIVER / TAO_MIN_CUDA / TAO_MIN_TOOLKIT).
Exit codes: 0 all present, 1 something missing (each printed as MISSING: with its fix), 2 usage.
--install runs the Debian/Ubuntu package installs (needs root and --yes).
EOF
}

backend=kubernetes
mode=""
yes=0
min_driver=${TAO_MIN_DRIVER:-580}
min_cuda=${TAO_MIN_CUDA:-13.0}
min_toolkit=${TAO_MIN_TOOLKIT:-1.19.0}

while [ "$#" -gt 0 ]; do
  case "$1" in
    --backend) [ "$#" -ge 2 ] || { usage; exit 2; }; backend=$2; shift 2 ;;
    --check-only) mode=check; shift ;;
    --install) mode=install; shift ;;
    --yes) yes=1; shift ;;
    --min-driver) [ "$#" -ge 2 ] || { usage; exit 2; }; min_driver=$2; shift 2 ;;
    --min-cuda) [ "$#" -ge 2 ] || { usage; exit 2; }; min_cuda=$2; shift 2 ;;
    --min-toolkit) [ "$#" -ge 2 ] || { usage; exit 2; }; min_toolkit=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "setup-nvidia-gpu-host: unknown argument: $1" >&2; usage; exit 2 ;;
  esac
done

case "$backend" in kubernetes|docker) ;; *) echo "setup-nvidia-gpu-host: --backend must be kubernetes or docker" >&2; exit 2 ;; esac
[ -n "$mode" ] || { echo "setup-nvidia-gpu-host: choose --check-only or --install" >&2; usage; exit 2; }

# version_ge A B: true when dotted version A >= B
version_ge() {
  [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | sed -n 1p)" = "$2" ]
}

missing=0
report_missing() { echo "MISSING: $1"; echo "  fix: $2"; missing=1; }

driver_version() {
  command -v nvidia-smi >/dev/null 2>&1 || return 1
  nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | sed -n 1p
}

cuda_version() {
  if command -v nvcc >/dev/null 2>&1; then
    nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9.]*\).*/\1/p' | sed -n 1p
    return 0
  fi
  return 1
}

toolkit_version() {
  if command -v dpkg-query >/dev/null 2>&1 && dpkg-query -W -f='${Version}' nvidia-container-toolkit >/dev/null 2>&1; then
    dpkg-query -W -f='${Version}' nvidia-container-toolkit | sed 's/-.*//'
  elif command -v rpm >/dev/null 2>&1 && rpm -q --qf '%{VERSION}' nvidia-container-toolkit >/dev/null 2>&1; then
    rpm -q --qf '%{VERSION}' nvidia-container-toolkit
  elif command -v nvidia-ctk >/dev/null 2>&1; then
    nvidia-ctk --version 2>/dev/null | sed -n 's/.*version \([0-9][0-9.]*\).*/\1/p' | sed -n 1p
  else
    return 1
  fi
}

check() {
  local v
  if v=$(driver_version) && [ -n "$v" ]; then
    if version_ge "${v%%.*}" "$min_driver"; then echo "OK: NVIDIA driver $v"; else
      report_missing "NVIDIA driver $v is older than branch $min_driver" "install driver branch $min_driver (--install)"; fi
  else
    report_missing "NVIDIA driver not found (nvidia-smi missing)" "install driver branch $min_driver (--install)"
  fi
  if v=$(cuda_version) && [ -n "$v" ]; then
    if version_ge "$v" "$min_cuda"; then echo "OK: CUDA toolkit $v"; else
      report_missing "CUDA toolkit $v is older than $min_cuda" "install CUDA toolkit $min_cuda (--install)"; fi
  else
    report_missing "CUDA toolkit not found (nvcc missing)" "install CUDA toolkit $min_cuda (--install)"
  fi
  if v=$(toolkit_version) && [ -n "$v" ]; then
    if version_ge "$v" "$min_toolkit"; then echo "OK: NVIDIA Container Toolkit $v"; else
      report_missing "NVIDIA Container Toolkit $v is older than $min_toolkit" "install nvidia-container-toolkit $min_toolkit (--install)"; fi
  else
    report_missing "NVIDIA Container Toolkit not found" "install nvidia-container-toolkit $min_toolkit (--install)"
  fi
  if [ "$backend" = kubernetes ] && command -v kubectl >/dev/null 2>&1; then
    gpus=$(kubectl get nodes -o jsonpath='{range .items[*]}{.status.allocatable.nvidia\.com/gpu}{"\n"}{end}' 2>/dev/null |
      awk '{s+=$1} END {print s+0}') || gpus=0
    if [ "${gpus:-0}" -gt 0 ]; then echo "OK: $gpus nvidia.com/gpu allocatable in the cluster"; else
      echo "WARN: no nvidia.com/gpu allocatable in the cluster (install the GPU Operator or device plugin)"; fi
  fi
  return "$missing"
}

install() {
  if [ "$yes" -ne 1 ]; then
    echo "setup-nvidia-gpu-host: --install changes the host; rerun with --yes after approval" >&2
    exit 2
  fi
  if [ "$(id -u)" -ne 0 ]; then echo "setup-nvidia-gpu-host: --install needs root" >&2; exit 1; fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup-nvidia-gpu-host: --install supports Debian/Ubuntu (apt-get); install driver $min_driver, CUDA $min_cuda and nvidia-container-toolkit $min_toolkit with your distribution's packages" >&2
    exit 1
  fi
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y "nvidia-driver-${min_driver}" "cuda-toolkit-${min_cuda/./-}" nvidia-container-toolkit
  if command -v nvidia-ctk >/dev/null 2>&1; then
    if [ "$backend" = kubernetes ] && command -v containerd >/dev/null 2>&1; then
      nvidia-ctk runtime configure --runtime=containerd
    elif [ "$backend" = docker ]; then
      nvidia-ctk runtime configure --runtime=docker
    fi
  fi
  check
}

if [ "$mode" = check ]; then
  check
else
  install
fi
