#!/usr/bin/env bats
# scripts/local-cluster with KUBECTL_TAO_GPUS=host on a machine without NVIDIA GPUs (or with stand-in
# device nodes that have no driver behind them): `up` stops with one line naming what is missing, exit 1,
# and leaves nothing behind. The GPU path itself is tested in tests/e2e/test_real_gpus.py with stand-ins.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

LOCAL_CLUSTER="${LOCAL_CLUSTER:-$BATS_TEST_DIRNAME/../../scripts/local-cluster}"

setup() {
  export KUBECTL_TAO_CLUSTER_DIR="$BATS_TEST_TMPDIR/cluster"
  export KUBECTL_TAO_GPUS=host KUBECTL_TAO_KUEUE=0
  export KUBECTL_TAO_GPU_DEV_ROOT="$BATS_TEST_TMPDIR/dev"
  mkdir -p "$KUBECTL_TAO_GPU_DEV_ROOT"
  KTBR0_BEFORE=
  if ip link show ktbr0 >/dev/null 2>&1; then KTBR0_BEFORE=1; fi
}

teardown() {
  "$LOCAL_CLUSTER" down >/dev/null 2>&1 || true
}

# Nothing of a cluster: no data directory, no process started from it, no bridge.
nothing_left() {
  [ ! -e "$KUBECTL_TAO_CLUSTER_DIR" ]
  [ -n "$KTBR0_BEFORE" ] || ! ip link show ktbr0 >/dev/null 2>&1
  local p
  for p in /proc/[0-9]*; do
    ! { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF -- "$KUBECTL_TAO_CLUSTER_DIR/"
  done
}

@test "KUBECTL_TAO_GPUS must be fake or host; host needs a real node and the local provider" {
  KUBECTL_TAO_GPUS=all run --separate-stderr "$LOCAL_CLUSTER" up
  assert_failure 2
  assert_equal "${stderr_lines[0]}" "local-cluster: KUBECTL_TAO_GPUS must be fake or host, got 'all'"
  KUBECTL_TAO_REAL_NODES=0 run --separate-stderr "$LOCAL_CLUSTER" up
  assert_failure 2
  assert_equal "${stderr_lines[0]}" "local-cluster: KUBECTL_TAO_GPUS=host needs a real node, got KUBECTL_TAO_REAL_NODES=0"
  run --separate-stderr "$LOCAL_CLUSTER" --provider kind up
  assert_failure 2
  assert_equal "${stderr_lines[0]}" "local-cluster: KUBECTL_TAO_GPUS=host works with the local provider only"
  nothing_left
}

@test "KUBECTL_TAO_PREBUILT must be 0 or 1, and 1 is only the GPU bundle's host-GPU cluster" {
  KUBECTL_TAO_PREBUILT=yes run --separate-stderr "$LOCAL_CLUSTER" up
  assert_failure 2
  assert_equal "${stderr_lines[0]}" "local-cluster: KUBECTL_TAO_PREBUILT must be 0 or 1, got 'yes'"
  KUBECTL_TAO_GPUS=fake KUBECTL_TAO_PREBUILT=1 run --separate-stderr "$LOCAL_CLUSTER" up
  assert_failure 2
  assert_equal "${stderr_lines[0]}" "local-cluster: KUBECTL_TAO_PREBUILT=1 is the GPU bundle's single-node cluster: it needs KUBECTL_TAO_GPUS=host"
  nothing_left
}

@test "no NVIDIA driver (no nvidiactl): up fails with one line naming it and leaves nothing behind" {
  run --separate-stderr "$LOCAL_CLUSTER" up
  assert_failure 1
  assert_equal "$stderr" "local-cluster: KUBECTL_TAO_GPUS=host needs an NVIDIA GPU: no $KUBECTL_TAO_GPU_DEV_ROOT/nvidiactl (no NVIDIA driver loaded on this machine); unset KUBECTL_TAO_GPUS for fake GPUs"
  assert_output ""
  nothing_left
}

@test "this machine's own /dev: the same one line when it has no NVIDIA GPU" {
  [ ! -e /dev/nvidiactl ] || skip "this machine has an NVIDIA driver (/dev/nvidiactl)"
  unset KUBECTL_TAO_GPU_DEV_ROOT
  run --separate-stderr "$LOCAL_CLUSTER" up
  assert_failure 1
  assert_equal "$stderr" "local-cluster: KUBECTL_TAO_GPUS=host needs an NVIDIA GPU: no /dev/nvidiactl (no NVIDIA driver loaded on this machine); unset KUBECTL_TAO_GPUS for fake GPUs"
  nothing_left
}

@test "a plain file is not a device node; nvidiactl without nvidia<N> is no GPU" {
  [ "$(id -u)" = 0 ] || skip "mknod needs root"
  : >"$KUBECTL_TAO_GPU_DEV_ROOT/nvidiactl"
  run --separate-stderr "$LOCAL_CLUSTER" up
  assert_failure 1
  assert_equal "$stderr" "local-cluster: KUBECTL_TAO_GPUS=host needs an NVIDIA GPU: no $KUBECTL_TAO_GPU_DEV_ROOT/nvidiactl (no NVIDIA driver loaded on this machine); unset KUBECTL_TAO_GPUS for fake GPUs"
  rm "$KUBECTL_TAO_GPU_DEV_ROOT/nvidiactl"
  mknod "$KUBECTL_TAO_GPU_DEV_ROOT/nvidiactl" c 1 3
  : >"$KUBECTL_TAO_GPU_DEV_ROOT/nvidia0" # not a character device either
  run --separate-stderr "$LOCAL_CLUSTER" up
  assert_failure 1
  assert_equal "$stderr" "local-cluster: KUBECTL_TAO_GPUS=host needs an NVIDIA GPU: $KUBECTL_TAO_GPU_DEV_ROOT/nvidiactl exists but no $KUBECTL_TAO_GPU_DEV_ROOT/nvidia<N> device node does"
  nothing_left
}

@test "device nodes but no driver libraries: the plugin names libcuda.so.1, and nothing is left" {
  [ "$(id -u)" = 0 ] || skip "mknod needs root"
  "$BATS_TEST_DIRNAME/../../scripts/build-local-cluster" --check --real-nodes ||
    skip "the real-node binaries are not built (scripts/build-local-cluster --real-nodes)"
  "$BATS_TEST_DIRNAME/../../scripts/install-cluster-deps" --check || skip "run scripts/install-cluster-deps first"
  [ -z "$KTBR0_BEFORE" ] || skip "another local cluster with real nodes is up (bridge ktbr0 exists)"
  mknod "$KUBECTL_TAO_GPU_DEV_ROOT/nvidiactl" c 1 3
  mknod "$KUBECTL_TAO_GPU_DEV_ROOT/nvidia0" c 1 3
  mkdir -p "$BATS_TEST_TMPDIR/proc/0000:1b:00.0" "$BATS_TEST_TMPDIR/lib"
  printf 'Model: \t\t Stand-in GPU\nGPU UUID: \t GPU-00000000-0000-0000-0000-000000000001\nDevice Minor: \t 0\n' \
    >"$BATS_TEST_TMPDIR/proc/0000:1b:00.0/information"
  KUBECTL_TAO_GPU_PROC_DIR="$BATS_TEST_TMPDIR/proc" KUBECTL_TAO_GPU_LIB_DIRS="$BATS_TEST_TMPDIR/lib" \
    KUBECTL_TAO_GPU_NVIDIA_SMI=/nonexistent KUBECTL_TAO_GPU_DRIVER_DIR="" \
    run --separate-stderr "$LOCAL_CLUSTER" up
  assert_failure 1
  assert_equal "$stderr" "local-cluster: KUBECTL_TAO_GPUS=host: no NVIDIA driver libraries: libcuda.so.1 not found in $BATS_TEST_TMPDIR/lib"
  nothing_left
}

@test "a cluster directory too long for the real nodes' unix sockets is a usage error naming the socket" {
  local long=$BATS_TEST_TMPDIR/a-cluster-directory-whose-name-is-long-enough-to-break-unix-sockets
  KUBECTL_TAO_GPUS=fake KUBECTL_TAO_REAL_NODES=1 KUBECTL_TAO_CLUSTER_DIR=$long run --separate-stderr "$LOCAL_CLUSTER" up
  assert_failure 2
  local sock=$long/real/real-node-0/varlib/kubelet/device-plugins/kubelet.sock
  assert_equal "${stderr_lines[0]}" "local-cluster: KUBECTL_TAO_CLUSTER_DIR is too long for the real nodes' unix sockets: $sock is ${#sock} bytes, at most 107 fit; use a shorter directory"
  [ ! -e "$long" ]
}
