#!/usr/bin/env bats
# scripts/gpu-smoke (the entry of `make gpu-bundle`) on a machine without NVIDIA GPUs: it unpacks, stops
# with one line and exit 3, and leaves nothing behind; bad use is exit 2, a machine it cannot run on exit 5.
# The built bundle itself (its size, and the same stop after unpacking) is checked by tests/e2e/test_gpu_bundle.py,
# which builds one.

load common

GPU_SMOKE="$REPO/scripts/gpu-smoke"

setup() {
  # short: the cluster's unix sockets would live under it (gpu-smoke refuses more than 22 characters)
  GPU_SMOKE_TMPDIR=$(mktemp -d /tmp/gsb.XXXXXX)
  export GPU_SMOKE_TMPDIR
  # A bundle folder with a small stand-in payload: the unpack and the GPU check do not read its content.
  BUNDLE="$BATS_TEST_TMPDIR/bundle"
  mkdir -p "$BUNDLE" "$BATS_TEST_TMPDIR/payload/bin"
  echo stand-in >"$BATS_TEST_TMPDIR/payload/bin/k8s-multi"
  tar -C "$BATS_TEST_TMPDIR/payload" -cJf "$BUNDLE/payload.tar.xz" .
  cp "$GPU_SMOKE" "$BUNDLE/gpu-smoke"
  (cd "$BUNDLE" && sha256sum payload.tar.xz gpu-smoke >SHA256SUMS)
  export KUBECTL_TAO_GPU_DEV_ROOT="$BATS_TEST_TMPDIR/dev"
  mkdir -p "$KUBECTL_TAO_GPU_DEV_ROOT"
}

teardown() {
  rm -rf "$GPU_SMOKE_TMPDIR"
}

@test "GPU_SMOKE_TMPDIR too long for the cluster's unix sockets: exit 2, one line, nothing unpacked" {
  local long=$GPU_SMOKE_TMPDIR/a-directory-name-that-is-too-long
  mkdir -p "$long"
  GPU_SMOKE_TMPDIR=$long run --separate-stderr "$BUNDLE/gpu-smoke"
  assert_failure 2
  assert_equal "$stderr" "gpu-smoke: GPU_SMOKE_TMPDIR=$long is too long: the cluster's unix sockets under it would take $(( ${#long} + 85 )) bytes, at most 107 fit; use a directory of at most 22 characters"
  assert_equal "$(ls -A "$long")" ""
}

@test "no NVIDIA GPU: it unpacks, stops with one line and exit 3, and leaves nothing" {
  [ "$(id -u)" = 0 ] || skip "gpu-smoke runs as root"
  run --separate-stderr "$BUNDLE/gpu-smoke"
  assert_failure 3
  [[ "${lines[0]}" == "gpu-smoke: unpack      ok ("*"s): "*" MiB in $GPU_SMOKE_TMPDIR/gpu-smoke."* ]]
  assert_equal "$stderr" "gpu-smoke: no NVIDIA GPU on this machine (no $KUBECTL_TAO_GPU_DEV_ROOT/nvidiactl: no NVIDIA driver loaded): stopped after unpacking; nothing was started (exit 3)"
  assert_equal "$(ls -A "$GPU_SMOKE_TMPDIR")" ""
}

@test "nvidiactl without a GPU device node is no GPU either" {
  [ "$(id -u)" = 0 ] || skip "gpu-smoke runs as root"
  mknod "$KUBECTL_TAO_GPU_DEV_ROOT/nvidiactl" c 1 3
  run --separate-stderr "$BUNDLE/gpu-smoke" --keep
  assert_failure 3
  assert_equal "$stderr" "gpu-smoke: no NVIDIA GPU on this machine (no $KUBECTL_TAO_GPU_DEV_ROOT/nvidia<N>: no NVIDIA driver loaded): stopped after unpacking; nothing was started (exit 3)"
  # --keep keeps what it unpacked, and says where
  assert_output --partial "gpu-smoke: kept $GPU_SMOKE_TMPDIR/gpu-smoke."
  [ -f "$(echo "$GPU_SMOKE_TMPDIR"/gpu-smoke.*/bin/k8s-multi)" ]
}

@test "this machine's own /dev: the same stop when it has no NVIDIA GPU" {
  [ "$(id -u)" = 0 ] || skip "gpu-smoke runs as root"
  [ ! -e /dev/nvidiactl ] || skip "this machine has an NVIDIA driver"
  unset KUBECTL_TAO_GPU_DEV_ROOT
  run --separate-stderr "$BUNDLE/gpu-smoke"
  assert_failure 3
  assert_equal "$stderr" "gpu-smoke: no NVIDIA GPU on this machine (no /dev/nvidiactl: no NVIDIA driver loaded): stopped after unpacking; nothing was started (exit 3)"
  assert_equal "$(ls -A "$GPU_SMOKE_TMPDIR")" ""
}

@test "usage errors are exit 2; no payload or not root is exit 5 with one line" {
  run --separate-stderr "$BUNDLE/gpu-smoke" --bogus
  assert_failure 2
  assert_equal "$stderr" "gpu-smoke: unknown argument: --bogus (see gpu-smoke --help)"
  run "$BUNDLE/gpu-smoke" --help
  assert_success
  assert_output --partial "Exit codes: 0 every step passed; 1 a step failed"
  run --separate-stderr "$GPU_SMOKE"
  assert_failure 5
  assert_equal "$stderr" "gpu-smoke: no payload.tar.xz next to $GPU_SMOKE: run the gpu-smoke of a folder \`make gpu-bundle\` wrote"
  if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    # a copy where any user may read and run it (the test's own directory may be private)
    local open
    open=$(mktemp -d /tmp/gpu-smoke-bats.XXXXXX)
    cp "$BUNDLE/gpu-smoke" "$BUNDLE/payload.tar.xz" "$BUNDLE/SHA256SUMS" "$open/"
    chmod 755 "$open"
    run --separate-stderr setpriv --reuid=65534 --regid=65534 --clear-groups "$open/gpu-smoke"
    rm -rf "$open"
    assert_failure 5
    assert_equal "$stderr" "gpu-smoke: needs root (containers, cgroups, mounts, a bridge): run it as root, e.g. sudo $open/gpu-smoke"
  fi
  assert_equal "$(ls -A "$GPU_SMOKE_TMPDIR")" ""
}

# Each refusal of a bundle that is not as it was written: exit 5, one line on stderr, nothing unpacked.
refused_unpacked_nothing() { # EXPECTED-STDERR
  run --separate-stderr "$BUNDLE/gpu-smoke"
  assert_failure 5
  assert_equal "$stderr" "$1"
  assert_output ""
  assert_equal "$(ls -A "$GPU_SMOKE_TMPDIR")" ""
}

@test "a payload that does not match SHA256SUMS is never unpacked" {
  echo tail >>"$BUNDLE/payload.tar.xz"
  refused_unpacked_nothing "gpu-smoke: payload.tar.xz does not match its checksum in $BUNDLE/SHA256SUMS (the folder is damaged, incomplete or was changed): nothing was unpacked; build the bundle again (make gpu-bundle) and copy the whole folder"
}

@test "a changed gpu-smoke, or a listed file that is missing, is refused the same way" {
  cp "$BUNDLE/SHA256SUMS" "$BATS_TEST_TMPDIR/sums"
  echo '# changed' >>"$BUNDLE/gpu-smoke"
  refused_unpacked_nothing "gpu-smoke: gpu-smoke does not match its checksum in $BUNDLE/SHA256SUMS (the folder is damaged, incomplete or was changed): nothing was unpacked; build the bundle again (make gpu-bundle) and copy the whole folder"
  cp "$GPU_SMOKE" "$BUNDLE/gpu-smoke"
  (cd "$BUNDLE" && echo readme >README.txt && sha256sum payload.tar.xz gpu-smoke README.txt >SHA256SUMS && rm README.txt)
  refused_unpacked_nothing "gpu-smoke: README.txt does not match its checksum in $BUNDLE/SHA256SUMS (the folder is damaged, incomplete or was changed): nothing was unpacked; build the bundle again (make gpu-bundle) and copy the whole folder"
}

@test "no SHA256SUMS, one that leaves the payload out, or one of another shape is refused" {
  mv "$BUNDLE/SHA256SUMS" "$BATS_TEST_TMPDIR/sums"
  refused_unpacked_nothing "gpu-smoke: no SHA256SUMS next to $BUNDLE/gpu-smoke: copy the whole folder \`make gpu-bundle\` wrote"
  grep ' gpu-smoke$' "$BATS_TEST_TMPDIR/sums" >"$BUNDLE/SHA256SUMS"
  refused_unpacked_nothing "gpu-smoke: $BUNDLE/SHA256SUMS lists no checksum of payload.tar.xz: nothing was unpacked; copy the whole folder \`make gpu-bundle\` wrote"
  { cat "$BATS_TEST_TMPDIR/sums"; echo "$(printf '0%.0s' {1..64})  ../../etc/shadow"; } >"$BUNDLE/SHA256SUMS"
  refused_unpacked_nothing "gpu-smoke: $BUNDLE/SHA256SUMS line 3 is not 'SHA256  FILE' of a file of the bundle: nothing was unpacked; copy the whole folder \`make gpu-bundle\` wrote"
  head -c 5000 /dev/zero >"$BUNDLE/SHA256SUMS"
  refused_unpacked_nothing "gpu-smoke: $BUNDLE/SHA256SUMS is larger than a bundle's (4 KiB): nothing was unpacked; copy the whole folder \`make gpu-bundle\` wrote"
}
