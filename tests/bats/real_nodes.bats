#!/usr/bin/env bats
# scripts/local-cluster with real nodes: bad settings and a busy port stop `up` with one line and
# nothing running; a real `up` shows each node's kubelet and containerd and the API server relay (on the bridge
# gateway, with its iptables nat chain), and `down` leaves no mount, iptables rule or chain, bridge, veth, network
# namespace, cgroup or process of its own.
# The up/down test needs root, the Debian packages of scripts/install-cluster-deps and the cached
# builds; it runs its own one-node cluster, so no other cluster with real nodes may be up.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

LOCAL_CLUSTER="${LOCAL_CLUSTER:-$BATS_TEST_DIRNAME/../../scripts/local-cluster}"

setup() {
  export KUBECTL_TAO_CLUSTER_DIR="$BATS_TEST_TMPDIR/cluster"
  export KUBECTL_TAO_REAL_NODES=1 KUBECTL_TAO_GPU_NODES=0 KUBECTL_TAO_CPU_NODES=0
  export KUBECTL_TAO_KUEUE=0 # Kueue has its own tests (tests/e2e/test_kueue.py)
}

teardown() {
  if [ -n "${LISTENER:-}" ]; then kill "$LISTENER" 2>/dev/null || true; fi
  "$LOCAL_CLUSTER" down >/dev/null 2>&1 || true
  # The empty chain a test made (-X refuses a chain that has rules or is jumped to).
  if [ -n "${MADE_CHAIN:-}" ]; then iptables -t nat -X KUBECTL-TAO-API 2>/dev/null || true; fi
}

needs_real_nodes() {
  [ "$(id -u)" = 0 ] || skip "real nodes need root"
  "$BATS_TEST_DIRNAME/../../scripts/install-cluster-deps" --check || skip "run scripts/install-cluster-deps first"
  ! ip link show ktbr0 >/dev/null 2>&1 || skip "another local cluster with real nodes is up (bridge ktbr0 exists)"
}

# Everything a cluster with real nodes could leave on the host; prints what it finds.
host_leftovers() {
  grep -E "$KUBECTL_TAO_CLUSTER_DIR|real-node" /proc/mounts || true
  iptables-save 2>/dev/null | grep -E '^(-A|:)KUBE-|KUBECTL-TAO' || true
  ip -o link show | grep -E 'ktbr|veth|cni' || true
  ip netns list 2>/dev/null || true
  ls -d /sys/fs/cgroup/*/kubectl-tao-real-node-* /sys/fs/cgroup/kubectl-tao-real-node-* 2>/dev/null || true
  local p
  for p in /proc/[0-9]*; do
    { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -F -- "$KUBECTL_TAO_CLUSTER_DIR/" || true
  done
}

@test "real node settings that are not whole numbers are usage errors" {
  KUBECTL_TAO_REAL_NODES=two run "$LOCAL_CLUSTER" up
  assert_failure 2
  assert_output --partial "local-cluster: KUBECTL_TAO_REAL_NODES must be a non-negative integer, got 'two'"
  KUBECTL_TAO_REAL_NODE_GPUS=0 run "$LOCAL_CLUSTER" up
  assert_failure 2
  assert_output --partial "KUBECTL_TAO_REAL_NODE_GPUS must be at least 1"
  KUBECTL_TAO_S3_PORT=70000 run "$LOCAL_CLUSTER" up
  assert_failure 2
  assert_output --partial "local-cluster: KUBECTL_TAO_S3_PORT must be a TCP port number (1-65535), got '70000'"
  [ ! -e "$KUBECTL_TAO_CLUSTER_DIR" ]
}

@test "a missing tool stops up with one line naming it and the install step" {
  [ "$(id -u)" = 0 ] || skip "real nodes need root"
  mkdir -p "$BATS_TEST_TMPDIR/bin"
  for tool in /usr/local/bin/* /usr/bin/* /usr/sbin/* /bin/* /sbin/*; do
    case "${tool##*/}" in containerd) continue ;; esac
    [ -e "$BATS_TEST_TMPDIR/bin/${tool##*/}" ] || ln -s "$tool" "$BATS_TEST_TMPDIR/bin/${tool##*/}"
  done
  PATH="$BATS_TEST_TMPDIR/bin" run --separate-stderr "$LOCAL_CLUSTER" up
  assert_failure 1
  assert_equal "$stderr" "local-cluster: real nodes need 'containerd'; install it with: scripts/install-cluster-deps (or set KUBECTL_TAO_REAL_NODES=0)"
  [ ! -e "$KUBECTL_TAO_CLUSTER_DIR" ]
}

@test "UDP port 53 in use stops up with one line and nothing running" {
  needs_real_nodes
  python3 -c 'import socket, time; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", 53)); time.sleep(60)' &
  LISTENER=$!
  sleep 0.5
  run --separate-stderr "$LOCAL_CLUSTER" up
  assert_failure 1
  [[ "$stderr" == "local-cluster: UDP port 53 is in use on this machine"* ]]
  [ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ]
  [ ! -e "$KUBECTL_TAO_CLUSTER_DIR" ]
  run host_leftovers
  assert_output ""
}

@test "the S3 store's TCP port in use stops up with one line and nothing running" {
  needs_real_nodes
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  python3 -c 'import socket, sys, time; s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(60)' "$port" &
  LISTENER=$!
  until ss -ltn "sport = :$port" | grep -q LISTEN; do sleep 0.1; done
  KUBECTL_TAO_S3_PORT=$port run --separate-stderr "$LOCAL_CLUSTER" up
  assert_failure 1
  assert_equal "$stderr" "local-cluster: TCP port $port is in use on this machine (needed by the S3 store on 10.88.0.1:$port); stop what listens there or set KUBECTL_TAO_S3_PORT to a free port"
  [ ! -e "$KUBECTL_TAO_CLUSTER_DIR" ]
  run host_leftovers
  assert_output ""
}

@test "no iptables, or a nat chain of another cluster, stops up with one line and nothing running" {
  needs_real_nodes
  mkdir -p "$BATS_TEST_TMPDIR/bin"
  for tool in /usr/local/bin/* /usr/bin/* /usr/sbin/* /bin/* /sbin/*; do
    case "${tool##*/}" in iptables) continue ;; esac
    [ -e "$BATS_TEST_TMPDIR/bin/${tool##*/}" ] || ln -s "$tool" "$BATS_TEST_TMPDIR/bin/${tool##*/}"
  done
  PATH="$BATS_TEST_TMPDIR/bin" run --separate-stderr "$LOCAL_CLUSTER" up
  assert_failure 1
  assert_equal "$stderr" "local-cluster: real nodes need 'iptables' (the nat rule that sends pods' API server traffic to the relay); install it with: scripts/install-cluster-deps (or set KUBECTL_TAO_REAL_NODES=0)"
  [ ! -e "$KUBECTL_TAO_CLUSTER_DIR" ]
  iptables -t nat -N KUBECTL-TAO-API
  MADE_CHAIN=1
  run --separate-stderr "$LOCAL_CLUSTER" up
  iptables -t nat -X KUBECTL-TAO-API
  assert_failure 1
  [[ "$stderr" == "local-cluster: the iptables nat chain KUBECTL-TAO-API already exists: another local cluster with real nodes runs"* ]]
  [ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ]
  [ ! -e "$KUBECTL_TAO_CLUSTER_DIR" ]
  run host_leftovers
  assert_output ""
}

@test "up starts a real node with its kubelet and containerd; down leaves nothing on the host" {
  needs_real_nodes
  # A closed connection of an earlier store, in TIME_WAIT on the store's port, must not stop up.
  python3 -c '
import socket
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 9000)); srv.listen()
cli = socket.create_connection(("127.0.0.1", 9000)); conn, _ = srv.accept()
conn.close(); cli.close(); srv.close()'
  ss -tan state time-wait "sport = :9000" | grep -q 9000
  run "$LOCAL_CLUSTER" up
  assert_success
  assert_output --partial "1 real node(s)"
  assert_output --partial "no GPU exists"
  run "$LOCAL_CLUSTER" status
  assert_success
  assert_output --regexp "real-node-0 kubelet +running"
  assert_output --regexp "real-node-0 containerd +running"
  assert_output --regexp "coredns +running"
  assert_output --regexp "s3 \(versitygw\) +running \(pid [0-9]+\) on http://10.88.0.1:9000"
  assert_output --regexp "api relay +running \(pid [0-9]+\) on 10.88.0.1:[0-9]+ -> 127.0.0.1:[0-9]+"
  assert_output --partial "pods reach the API server at 10.96.0.1:443 (iptables nat chain KUBECTL-TAO-API"
  # The relay listens on the bridge gateway only; the chain sends the ClusterIP's port 443 to it and anything
  # else for the ClusterIP to the gateway itself.
  relay_port=$(cat "$KUBECTL_TAO_CLUSTER_DIR/real/api-relay.port")
  run ss -Hltn "sport = :$relay_port"
  assert_output --regexp "10\.88\.0\.1:$relay_port"
  refute_output --regexp "(0\.0\.0\.0|\*|\[::\]):$relay_port"
  run iptables -t nat -S KUBECTL-TAO-API
  assert_success
  assert_output --partial "-A KUBECTL-TAO-API -p tcp -m tcp --dport 443 -j DNAT --to-destination 10.88.0.1:$relay_port"
  assert_output --partial "-A KUBECTL-TAO-API -j DNAT --to-destination 10.88.0.1"
  run iptables -t nat -S PREROUTING
  assert_output --partial "-A PREROUTING -d 10.96.0.1/32 -i ktbr0 -j KUBECTL-TAO-API"
  # The S3 store answers on the bridge gateway only (an unsigned request: S3's AccessDenied), with
  # credentials of its own in the cluster directory.
  run curl -s -o /dev/null -w '%{http_code}' http://10.88.0.1:9000/
  assert_output 403
  run curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:9000/
  assert_output 000
  [ "$(stat -c %a "$KUBECTL_TAO_CLUSTER_DIR/s3/credentials.env")" = 600 ]
  grep -q '^AWS_SECRET_ACCESS_KEY=.' "$KUBECTL_TAO_CLUSTER_DIR/s3/credentials.env"
  ! grep -F "$(sed -n 's/^AWS_SECRET_ACCESS_KEY=//p' "$KUBECTL_TAO_CLUSTER_DIR/s3/credentials.env")" \
    "/proc/$(cat "$KUBECTL_TAO_CLUSTER_DIR/pids/s3.pid")/cmdline"
  ip link show ktbr0 >/dev/null
  ls -d /sys/fs/cgroup/memory/kubectl-tao-real-node-0 >/dev/null
  # A running pod, so that down has a container, a veth and a network namespace to clean up.
  eval "$("$LOCAL_CLUSTER" env)"
  image=$(sed -n 's/^BUSYBOX_IMAGE=//p' "$KUBECTL_TAO_CLUSTER_DIR/real/images.env")
  kubectl run sleeper --image "$image" --restart Never \
    --overrides '{"spec": {"tolerations": [{"key": "kubectl-tao.io/real-node", "operator": "Exists"}]}}' -- sleep 600
  kubectl wait --for=condition=Ready pod/sleeper --timeout 60s
  [ -n "$(ip -o link show master ktbr0)" ]
  run "$LOCAL_CLUSTER" down
  assert_success
  run host_leftovers
  assert_output ""
}
