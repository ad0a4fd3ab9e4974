#!/usr/bin/env bats
# scripts/local-cluster and scripts/build-local-cluster: usage, the kind provider's preflight, and the
# commands that must work (or fail clearly) when no cluster is up. Nothing here starts a cluster.

load common

LOCAL_CLUSTER="${LOCAL_CLUSTER:-$REPO/scripts/local-cluster}"
BUILD_LOCAL_CLUSTER="${BUILD_LOCAL_CLUSTER:-$REPO/scripts/build-local-cluster}"

setup() {
  export HOME="$BATS_TEST_TMPDIR/home"
  export KUBECTL_TAO_CLUSTER_DIR="$BATS_TEST_TMPDIR/cluster"
  export KUBECTL_TAO_CACHE="$BATS_TEST_TMPDIR/cache"
  mkdir -p "$HOME" "$BATS_TEST_TMPDIR/stubs"
  unset PROVIDER KIND DOCKER NUM_GPUS
  # A docker that is installed but cannot reach a daemon, and a kind that would work.
  printf '#!/bin/sh\necho "Cannot connect to the Docker daemon" >&2\nexit 1\n' >"$BATS_TEST_TMPDIR/stubs/docker"
  printf '#!/bin/sh\necho "kind stub called: $*" >>"%s/kind.calls"\n' "$BATS_TEST_TMPDIR" >"$BATS_TEST_TMPDIR/stubs/kind"
  chmod +x "$BATS_TEST_TMPDIR/stubs/docker" "$BATS_TEST_TMPDIR/stubs/kind"
  export PATH="$BATS_TEST_TMPDIR/stubs:$PATH"
}

@test "no command is a usage error (exit 2, usage on stderr)" {
  run --separate-stderr "$LOCAL_CLUSTER"
  assert_failure 2
  assert_equal "${lines[*]:-}" ""
  [[ "$stderr" == *"local-cluster: a command is required"* ]]
  [[ "$stderr" == *"usage: local-cluster"* ]]
}

@test "unknown command and unknown provider are usage errors" {
  run "$LOCAL_CLUSTER" start
  assert_failure 2
  assert_output --partial "local-cluster: unknown argument: start"
  run "$LOCAL_CLUSTER" --provider minikube up
  assert_failure 2
  assert_output --partial "local-cluster: unknown provider: minikube (local or kind)"
}

@test "bad node counts are usage errors" {
  KUBECTL_TAO_GPU_NODES=two run "$LOCAL_CLUSTER" up
  assert_failure 2
  assert_output --partial "local-cluster: KUBECTL_TAO_GPU_NODES must be a non-negative integer, got 'two'"
  KUBECTL_TAO_KWOK_RUN_SECONDS=soon run "$LOCAL_CLUSTER" up
  assert_failure 2
  assert_output --partial "KUBECTL_TAO_KWOK_RUN_SECONDS must be a number of seconds"
}

@test "KUBECTL_TAO_KUEUE must be 0 or 1, for up and for the build" {
  KUBECTL_TAO_KUEUE=yes run --separate-stderr "$LOCAL_CLUSTER" up
  assert_failure 2
  [[ "$stderr" == "local-cluster: KUBECTL_TAO_KUEUE must be 0 or 1, got 'yes'"* ]]
  [ ! -e "$KUBECTL_TAO_CLUSTER_DIR" ]
  KUBECTL_TAO_KUEUE=2 run --separate-stderr "$BUILD_LOCAL_CLUSTER" --check
  assert_failure 2
  assert_equal "$stderr" "build-local-cluster: KUBECTL_TAO_KUEUE must be 0 or 1, got '2'"
  run "$LOCAL_CLUSTER" --help
  assert_output --partial "KUBECTL_TAO_KUEUE           1 (default): run the Kueue controller"
}

@test "KUBECTL_TAO_FEATURE_GATES must be NAME=true|false items: one line, exit 2, nothing started" {
  for bad in "WorkloadWithJob" "WorkloadWithJob=off" "workloadWithJob=false" "A=true,,B=false" "A=true," "--x=true"; do
    KUBECTL_TAO_FEATURE_GATES="$bad" run --separate-stderr "$LOCAL_CLUSTER" up
    assert_failure 2
    assert_equal "${lines[*]:-}" ""
    [[ "$stderr" == "local-cluster: KUBECTL_TAO_FEATURE_GATES: '"*"' is not NAME=true|false; use e.g. KUBECTL_TAO_FEATURE_GATES=WorkloadWithJob=false (comma-separated)" ]]
    [ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ]
    [ ! -e "$KUBECTL_TAO_CLUSTER_DIR" ]
  done
  run "$LOCAL_CLUSTER" --help
  assert_output --partial "KUBECTL_TAO_FEATURE_GATES   NAME=true|false[,...]: feature gates of kube-apiserver"
}

@test "--help prints usage and the pod annotations" {
  run "$LOCAL_CLUSTER" --help
  assert_success
  assert_output --partial "usage: local-cluster [--provider local|kind] up|down|status|kubeconfig|env"
  assert_output --partial "kwok.kubectl-tao.io/oom"
}

@test "kind provider without a working docker fails with a clear one-line message" {
  run --separate-stderr "$LOCAL_CLUSTER" up --provider kind
  assert_failure 1
  assert_equal "$stderr" "local-cluster: the kind provider needs a working Docker ('docker info' failed: docker not available); without Docker use the default provider: scripts/local-cluster up"
  # Nothing was created and kind was never asked to create a cluster.
  [ ! -e "$KUBECTL_TAO_CLUSTER_DIR" ]
  [ ! -e "$BATS_TEST_TMPDIR/kind.calls" ]
}

@test "PROVIDER=kind selects the kind provider too" {
  PROVIDER=kind run "$LOCAL_CLUSTER" up
  assert_failure 1
  assert_output --partial "needs a working Docker"
}

@test "kind provider without kind says where to get it" {
  KIND="$BATS_TEST_TMPDIR/no-such-kind" run "$LOCAL_CLUSTER" --provider=kind up
  assert_failure 1
  assert_output --partial "local-cluster: the kind provider needs 'kind' on PATH (https://kind.sigs.k8s.io)"
}

@test "status, kubeconfig and env fail when no cluster is up; down is a no-op" {
  run "$LOCAL_CLUSTER" status
  assert_failure 1
  assert_output --partial "not running"
  run "$LOCAL_CLUSTER" kubeconfig
  assert_failure 1
  assert_output --partial "local-cluster: no cluster is up"
  run "$LOCAL_CLUSTER" env
  assert_failure 1
  run "$LOCAL_CLUSTER" down
  assert_success
  assert_output --partial "not running"
}

@test "stop-component and start-component name one known component" {
  run --separate-stderr "$LOCAL_CLUSTER" stop-component
  assert_failure 2
  [[ "$stderr" == *"local-cluster: stop-component needs a component name"* ]]
  run --separate-stderr "$LOCAL_CLUSTER" start-component kube-apiserverx
  assert_failure 2
  [[ "$stderr" == *"local-cluster: unknown component: kube-apiserverx (one of etcd kube-apiserver kube-controller-manager kube-scheduler kwok kueue)"* ]]
  KUBECTL_TAO_KUEUE=0 run --separate-stderr "$LOCAL_CLUSTER" start-component kueue
  assert_failure 2
  [[ "$stderr" == *"local-cluster: unknown component: kueue (one of etcd kube-apiserver kube-controller-manager kube-scheduler kwok)"* ]]
  run "$LOCAL_CLUSTER" --help
  assert_output --partial "local-cluster stop-component|start-component COMPONENT"
}

@test "stop-component and start-component need an up local cluster" {
  run "$LOCAL_CLUSTER" stop-component kube-apiserver
  assert_failure 1
  assert_output --partial "local-cluster: no local cluster in $KUBECTL_TAO_CLUSTER_DIR; run: scripts/local-cluster up"
  run "$LOCAL_CLUSTER" start-component etcd
  assert_failure 1
  run "$LOCAL_CLUSTER" --provider kind stop-component etcd
  assert_failure 1
  assert_output --partial "works with the local provider only"
}

@test "down refuses to remove a directory that is not a cluster data directory" {
  mkdir -p "$KUBECTL_TAO_CLUSTER_DIR"
  echo keep >"$KUBECTL_TAO_CLUSTER_DIR/precious.txt"
  run "$LOCAL_CLUSTER" down
  assert_failure 1
  assert_output --partial "does not look like a local-cluster data directory"
  [ -f "$KUBECTL_TAO_CLUSTER_DIR/precious.txt" ]
}

@test "up refuses to reuse a directory that is not a cluster data directory: nothing removed, nothing started" {
  mkdir -p "$KUBECTL_TAO_CLUSTER_DIR/notes"
  echo keep >"$KUBECTL_TAO_CLUSTER_DIR/precious.txt"
  echo keep >"$KUBECTL_TAO_CLUSTER_DIR/notes/more.txt"
  run --separate-stderr "$LOCAL_CLUSTER" up
  assert_failure 1
  assert_equal "$stderr" "local-cluster: $KUBECTL_TAO_CLUSTER_DIR does not look like a local-cluster data directory; not removing it"
  assert_output ""
  [ -f "$KUBECTL_TAO_CLUSTER_DIR/precious.txt" ] && [ -f "$KUBECTL_TAO_CLUSTER_DIR/notes/more.txt" ]
  [ ! -e "$KUBECTL_TAO_CACHE/k8s-$(. "$REPO/cluster/versions.env"; echo "$K8S_VERSION")" ]
}

@test "up refuses a copy of the repository's scripts/ folder as its data directory" {
  # a copy: were the guard ever lost, up would remove the folder at once
  local scripts=$BATS_TEST_TMPDIR/scripts before
  cp -r "$REPO/scripts" "$scripts"
  before=$(ls -A "$scripts")
  KUBECTL_TAO_CLUSTER_DIR=$scripts run --separate-stderr "$LOCAL_CLUSTER" up
  assert_failure 1
  assert_equal "$stderr" "local-cluster: $scripts does not look like a local-cluster data directory; not removing it"
  assert_equal "$(ls -A "$scripts")" "$before"
}

@test "up never writes through a link, nor into another user's directory" {
  mkdir -p "$BATS_TEST_TMPDIR/elsewhere"
  ln -s "$BATS_TEST_TMPDIR/elsewhere" "$KUBECTL_TAO_CLUSTER_DIR"
  run --separate-stderr "$LOCAL_CLUSTER" up
  assert_failure 1
  assert_equal "$stderr" "local-cluster: $KUBECTL_TAO_CLUSTER_DIR is a link, not a directory, or another user's: not using it; set KUBECTL_TAO_CLUSTER_DIR to a directory of your own"
  assert_equal "$(ls -A "$BATS_TEST_TMPDIR/elsewhere")" ""
  rm "$KUBECTL_TAO_CLUSTER_DIR"
  [ "$(id -u)" = 0 ] || skip "making another user's directory needs root"
  mkdir "$KUBECTL_TAO_CLUSTER_DIR"
  chown 65534:65534 "$KUBECTL_TAO_CLUSTER_DIR"
  run --separate-stderr "$LOCAL_CLUSTER" up
  assert_failure 1
  assert_equal "$stderr" "local-cluster: $KUBECTL_TAO_CLUSTER_DIR is a link, not a directory, or another user's: not using it; set KUBECTL_TAO_CLUSTER_DIR to a directory of your own"
  # one that looks like a data directory is not removed either, by up or by down
  echo local >"$KUBECTL_TAO_CLUSTER_DIR/provider"
  chown 65534:65534 "$KUBECTL_TAO_CLUSTER_DIR/provider"
  for cmd in up down; do
    run --separate-stderr "$LOCAL_CLUSTER" "$cmd"
    assert_failure 1
    assert_equal "$stderr" "local-cluster: $KUBECTL_TAO_CLUSTER_DIR is another user's directory; not removing it"
    [ -f "$KUBECTL_TAO_CLUSTER_DIR/provider" ]
  done
}

@test "down with the kind provider keeps the same guard: nothing deleted, kind not called" {
  mkdir -p "$KUBECTL_TAO_CLUSTER_DIR"
  echo keep >"$KUBECTL_TAO_CLUSTER_DIR/precious.txt"
  run "$LOCAL_CLUSTER" --provider kind down
  assert_failure 1
  assert_output --partial "does not look like a local-cluster data directory; not removing it"
  [ -f "$KUBECTL_TAO_CLUSTER_DIR/precious.txt" ]
  [ ! -e "$BATS_TEST_TMPDIR/kind.calls" ]
}

@test "down with the kind provider removes a directory that up made" {
  mkdir -p "$KUBECTL_TAO_CLUSTER_DIR"
  echo kind >"$KUBECTL_TAO_CLUSTER_DIR/provider"
  run "$LOCAL_CLUSTER" down
  assert_success
  assert_output --partial "down; removed kind cluster kubectl-tao"
  [ ! -e "$KUBECTL_TAO_CLUSTER_DIR" ]
  grep -q "delete cluster --name kubectl-tao" "$BATS_TEST_TMPDIR/kind.calls"
}

@test "kubeconfig and env print the paths of an up cluster" {
  mkdir -p "$KUBECTL_TAO_CLUSTER_DIR"
  echo local >"$KUBECTL_TAO_CLUSTER_DIR/provider"
  touch "$KUBECTL_TAO_CLUSTER_DIR/kubeconfig"
  run "$LOCAL_CLUSTER" kubeconfig
  assert_success
  assert_output "$KUBECTL_TAO_CLUSTER_DIR/kubeconfig"
  run "$LOCAL_CLUSTER" env
  assert_success
  assert_output --partial "export KUBECONFIG=$KUBECTL_TAO_CLUSTER_DIR/kubeconfig; export PATH=$KUBECTL_TAO_CACHE/k8s-v"
  # The line is meant for eval.
  eval "$output"
  assert_equal "$KUBECONFIG" "$KUBECTL_TAO_CLUSTER_DIR/kubeconfig"
  [[ "$PATH" == "$KUBECTL_TAO_CACHE"/k8s-v*/bin:* ]]
}

@test "build-local-cluster: usage error on an unknown flag, --check fails on an empty cache" {
  run "$BUILD_LOCAL_CLUSTER" --bogus
  assert_failure 2
  assert_output --partial "build-local-cluster: unknown argument: --bogus"
  run "$BUILD_LOCAL_CLUSTER" --check
  assert_failure 1
  assert_output ""
}

@test "build-local-cluster: stamps from another recipe do not count as cached" {
  . "$REPO/cluster/versions.env"
  # Stamps with a different recipe do not count as cached.
  for d in "k8s-$K8S_VERSION" "etcd-$ETCD_VERSION" "kwok-$KWOK_VERSION"; do
    mkdir -p "$KUBECTL_TAO_CACHE/$d"
    echo "something else" >"$KUBECTL_TAO_CACHE/$d/.complete"
  done
  run "$BUILD_LOCAL_CLUSTER" --check
  assert_failure 1
}

@test "KUBECTL_TAO_K8S_VERSION must be one of the versions in cluster/versions.env" {
  . "$REPO/cluster/versions.env"
  KUBECTL_TAO_K8S_VERSION=v1.30.0 run "$LOCAL_CLUSTER" up
  assert_failure 2
  assert_output "local-cluster: KUBECTL_TAO_K8S_VERSION must be one of ${K8S_VERSIONS//,/, }, got 'v1.30.0'"
  KUBECTL_TAO_K8S_VERSION=latest run "$BUILD_LOCAL_CLUSTER" --check
  assert_failure 2
  assert_output --partial "build-local-cluster: KUBECTL_TAO_K8S_VERSION must be one of"
  # Every listed version has its own module file for the build.
  for v in ${K8S_VERSIONS//,/ }; do
    grep -qE "^[[:space:]]*k8s.io/kubernetes $v\$" "$REPO/cluster/k8s-$v.mod"
  done
}

@test "commands after up use the version up recorded; another explicit version is refused" {
  . "$REPO/cluster/versions.env"
  other=${K8S_VERSIONS##*,}
  [ "$other" != "$K8S_VERSION" ]
  mkdir -p "$KUBECTL_TAO_CLUSTER_DIR"
  echo local >"$KUBECTL_TAO_CLUSTER_DIR/provider"
  echo "$other" >"$KUBECTL_TAO_CLUSTER_DIR/k8s-version"
  touch "$KUBECTL_TAO_CLUSTER_DIR/kubeconfig"
  run "$LOCAL_CLUSTER" env
  assert_success
  assert_output --partial "export PATH=$KUBECTL_TAO_CACHE/k8s-$other/bin:"
  KUBECTL_TAO_K8S_VERSION=$K8S_VERSION run "$LOCAL_CLUSTER" env
  assert_failure 2
  assert_output --partial "local-cluster: the cluster in $KUBECTL_TAO_CLUSTER_DIR runs Kubernetes $other, not KUBECTL_TAO_K8S_VERSION=$K8S_VERSION"
  KUBECTL_TAO_K8S_VERSION=$K8S_VERSION run "$LOCAL_CLUSTER" down
  assert_success
  [ ! -e "$KUBECTL_TAO_CLUSTER_DIR" ]
}

@test "start returns only once the component runs its own program, so alive never calls a starting one gone" {
  # The window between fork and exec, made wide: a setsid that waits before it runs the component. Until the
  # exec, the child's /proc cmdline is the caller's, which names no data directory.
  run -0 bash -c '
    set -euo pipefail
    dir=$1
    mkdir -p "$dir/pids" "$dir/logs"
    source "$2"
    now_ns() { date +%s%N; }
    setsid() { sleep 0.3; exec "$(command -v setsid)" "$@"; }
    start sleeper sh -c "sleep 5" "$dir/marker"
    alive sleeper && echo "alive at once"
    terminate 1 sleeper
    alive sleeper || echo "gone after terminate"
  ' _ "$BATS_TEST_TMPDIR/data" "$REPO/scripts/local-cluster-processes.sh"
  assert_output "alive at once
gone after terminate"
}
