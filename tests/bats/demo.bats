#!/usr/bin/env bats
# scripts/demo's own checks, with a local-cluster and a kubectl that stand in for a cluster started without
# real nodes: the demo refuses before its first step, naming the steps that could not run. The demo itself,
# every step on the real cluster, is tests/e2e/test_demo.py.

load common

DEMO="${DEMO:-$REPO/scripts/demo}"

setup() {
  repo="$BATS_TEST_TMPDIR/repo"
  mkdir -p "$repo/scripts" "$BATS_TEST_TMPDIR/stubs" "$BATS_TEST_TMPDIR/cluster"
  cp "$DEMO" "$repo/scripts/demo"
  # local-cluster: `up` finds the cluster already up; `env` points kubectl at it
  cat >"$repo/scripts/local-cluster" <<STUB
#!/usr/bin/env bash
echo "local-cluster \$*" >>"$BATS_TEST_TMPDIR/calls"
[ "\$1" != env ] || echo "export KUBECONFIG=$BATS_TEST_TMPDIR/cluster/kubeconfig"
STUB
  # kubectl: the nodes labelled kubectl-tao.io/real-node=true are the names in real-nodes (one a line)
  : >"$BATS_TEST_TMPDIR/real-nodes"
  cat >"$BATS_TEST_TMPDIR/stubs/kubectl" <<STUB
#!/usr/bin/env bash
echo "kubectl \$*" >>"$BATS_TEST_TMPDIR/calls"
[ "\$*" = "get nodes -l kubectl-tao.io/real-node=true -o name" ] || exit 1
cat "$BATS_TEST_TMPDIR/real-nodes"
STUB
  chmod +x "$repo/scripts/local-cluster" "$BATS_TEST_TMPDIR/stubs/kubectl"
  export PATH="$BATS_TEST_TMPDIR/stubs:$PATH"
  unset KUBECTL_TAO_REAL_NODES TAO_STATE_DIR
}

@test "a cluster without real nodes fails the demo before its first step, naming steps 5 and 6 and the fix" {
  run --separate-stderr "$repo/scripts/demo"
  assert_failure 1
  [[ "$stderr" == "demo: steps 5 and 6 (real containers on the real nodes) need 2 real nodes; the cluster in $BATS_TEST_TMPDIR/cluster has 0 "* ]]
  [[ "$stderr" == *"fix: make cluster-down, then make demo as root"* ]]
  [[ "$output" != *"== 1."* ]]
  run ! grep -F "kubectl tao" "$BATS_TEST_TMPDIR/calls"
}

@test "one real node of the two the demo needs is named as such" {
  echo node/real-node-0 >"$BATS_TEST_TMPDIR/real-nodes"
  run --separate-stderr "$repo/scripts/demo"
  assert_failure 1
  [[ "$stderr" == *"need 2 real nodes; the cluster in $BATS_TEST_TMPDIR/cluster has 1 "* ]]
}

@test "arguments are a usage error" {
  run --separate-stderr "$repo/scripts/demo" --now
  assert_failure 2
  [[ "$stderr" == *"usage: scripts/demo"* ]]
  run ! test -e "$BATS_TEST_TMPDIR/calls"
}
