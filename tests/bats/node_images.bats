#!/usr/bin/env bats
# scripts/fetch-image-busybox: the busybox the node images are built from (Debian trixie's, fetched once through
# apt and cached), and how scripts/build-node-images asks for it.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

FETCH="$BATS_TEST_DIRNAME/../../scripts/fetch-image-busybox"
BUILD="$BATS_TEST_DIRNAME/../../scripts/build-node-images"

setup() {
  export KUBECTL_TAO_CACHE="$BATS_TEST_TMPDIR/cache"
}

@test "an unknown argument is refused with exit 2" {
  run --separate-stderr "$FETCH" --bogus
  assert_failure 2
  assert_equal "${stderr_lines[0]}" "fetch-image-busybox: unknown argument: --bogus"
}

@test "two options are refused with exit 2 and one line" {
  run --separate-stderr "$FETCH" --cached --refresh
  assert_failure 2
  assert_equal "$stderr" "fetch-image-busybox: one option at most (--cached or --refresh), got: --cached --refresh"
}

@test "--cached with nothing cached exits 1 with one line naming the fix" {
  run --separate-stderr "$FETCH" --cached
  assert_failure 1
  assert_output ""
  assert_equal "$stderr" "fetch-image-busybox: no busybox is cached under $KUBECTL_TAO_CACHE/image-busybox; run scripts/fetch-image-busybox"
}

@test "build-node-images --check is a quiet 1 when the busybox is not fetched yet" {
  run --separate-stderr "$BUILD" --check
  assert_failure 1
  assert_equal "$stderr" ""
}

@test "a cached busybox is printed without fetching" {
  mkdir -p "$KUBECTL_TAO_CACHE/image-busybox/1-1.37.0-6"
  printf '#!/bin/sh\necho BusyBox v1.37.0\n' >"$KUBECTL_TAO_CACHE/image-busybox/1-1.37.0-6/busybox"
  chmod +x "$KUBECTL_TAO_CACHE/image-busybox/1-1.37.0-6/busybox"
  echo 1-1.37.0-6 >"$KUBECTL_TAO_CACHE/image-busybox/current"
  run --separate-stderr "$FETCH" --cached
  assert_success
  assert_output "$KUBECTL_TAO_CACHE/image-busybox/1-1.37.0-6/busybox"
}

@test "the fetched busybox is 1.37 or later, static, and hashes with sha256sum" {
  run --separate-stderr "$FETCH"
  assert_success
  bin=$output
  [ -x "$bin" ]
  run --separate-stderr "$bin"
  [[ "${lines[0]}" =~ ^BusyBox\ v1\.(3[7-9]|[4-9][0-9]) ]]
  # Static: the busybox image holds no C library for it to load.
  run --separate-stderr ldd "$bin"
  assert_failure
  printf 'abc' >"$BATS_TEST_TMPDIR/abc"
  run --separate-stderr "$bin" sha256sum "$BATS_TEST_TMPDIR/abc"
  assert_output "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  $BATS_TEST_TMPDIR/abc"
  # A second run uses the cache.
  run --separate-stderr "$FETCH" --cached
  assert_success
  assert_output "$bin"
  # --refresh fetches again, and removes what a killed fetch left.
  mkdir "$KUBECTL_TAO_CACHE/image-busybox/.fetch.killed"
  run --separate-stderr "$FETCH" --refresh
  assert_success
  assert_output "$bin"
  [ ! -e "$KUBECTL_TAO_CACHE/image-busybox/.fetch.killed" ]
}
