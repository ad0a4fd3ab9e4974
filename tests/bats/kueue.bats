#!/usr/bin/env bats
# scripts/local-cluster with Kueue (KUBECTL_TAO_KUEUE=1, the default): `up` of a small KWOK-only cluster
# starts the kueue component, `status` shows it, stop-component/start-component restart it with its
# webhooks, `KUBECTL_TAO_KUEUE=0` leaves it out, and `down` leaves no process and no file of it.
# Needs the cached builds (scripts/build-local-cluster); runs its own clusters (no real nodes: no lock).

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

LOCAL_CLUSTER="${LOCAL_CLUSTER:-$BATS_TEST_DIRNAME/../../scripts/local-cluster}"
BUILD_LOCAL_CLUSTER="${BUILD_LOCAL_CLUSTER:-$BATS_TEST_DIRNAME/../../scripts/build-local-cluster}"

setup() {
  export KUBECTL_TAO_CLUSTER_DIR="$BATS_TEST_TMPDIR/cluster"
  export KUBECTL_TAO_REAL_NODES=0 KUBECTL_TAO_GPU_NODES=0 KUBECTL_TAO_CPU_NODES=0
  unset KUBECTL_TAO_KUEUE PROVIDER
  KUBECTL_TAO_KUEUE=1 "$BUILD_LOCAL_CLUSTER" --check ||
    fail "the local cluster with Kueue is not built: run scripts/build-local-cluster"
}

teardown() {
  "$LOCAL_CLUSTER" down >/dev/null 2>&1 || true
}

leftovers() { # processes of this cluster, and what Kueue would write outside the data directory by default
  local p
  for p in /proc/[0-9]*; do
    { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -F -- "$KUBECTL_TAO_CLUSTER_DIR/" || true
  done
  ls -d "$KUBECTL_TAO_CLUSTER_DIR" /tmp/k8s-webhook-server/serving-certs /etc/kueue 2>/dev/null || true
}

@test "up runs Kueue; status shows it; it restarts as a component; down leaves nothing" {
  run "$LOCAL_CLUSTER" up
  assert_success
  assert_output --partial "Kueue v0.17.0 (batch/job integration; webhooks on https://127.0.0.1:"
  run "$LOCAL_CLUSTER" status
  assert_success
  assert_output --regexp "kueue +running \(pid [0-9]+\)"
  eval "$("$LOCAL_CLUSTER" env)"
  # Kueue's own objects: its CRDs served in both versions, its webhooks by URL on loopback.
  kubectl get crd workloads.kueue.x-k8s.io -o jsonpath='{.spec.conversion.webhook.clientConfig.url}' |
    grep -qE '^https://127\.0\.0\.1:[0-9]+/convert$'
  run kubectl get localqueues.v1beta1.kueue.x-k8s.io,localqueues.v1beta2.kueue.x-k8s.io -A
  assert_success
  run "$LOCAL_CLUSTER" stop-component kueue
  assert_success
  run "$LOCAL_CLUSTER" status
  assert_failure 1
  assert_output --regexp "kueue +stopped"
  # Its webhooks fail closed, as with any Kueue that is down.
  run kubectl create job probe --image busybox --dry-run=server
  assert_failure
  assert_output --partial 'failed calling webhook "mjob.kb.io"'
  run "$LOCAL_CLUSTER" start-component kueue
  assert_success
  kubectl create job probe --image busybox --dry-run=server -o name
  run "$LOCAL_CLUSTER" down
  assert_success
  run leftovers
  assert_output ""
}

@test "KUBECTL_TAO_KUEUE=0: no kueue component, no Kueue API" {
  KUBECTL_TAO_KUEUE=0 run "$LOCAL_CLUSTER" up
  assert_success
  refute_output --partial "Kueue v"
  run "$LOCAL_CLUSTER" status
  assert_success
  refute_output --regexp "  kueue +"
  eval "$("$LOCAL_CLUSTER" env)"
  run kubectl get crd clusterqueues.kueue.x-k8s.io
  assert_failure
  # A running cluster keeps what it was started with: a default `up` finds it up.
  run "$LOCAL_CLUSTER" up
  assert_success
  assert_output --partial "already up"
  run "$LOCAL_CLUSTER" down
  assert_success
  run leftovers
  assert_output ""
}
