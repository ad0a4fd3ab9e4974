#!/usr/bin/env bats
# templates/k8s/rendezvous-barrier.sh: the multi-node rendezvous barrier, with fake getent / nc.

load common

BARRIER="${BARRIER:-$REPO/templates/k8s/rendezvous-barrier.sh}"

setup_file() {
  export_exit_codes
}

setup() {
  cd "$BATS_TEST_TMPDIR"
  mkdir -p fakes minimal
  export CALLS="$BATS_TEST_TMPDIR/calls"
  export NODE_RANK=0 NNODES=3 TAO_K8S_JOB_NAME=job MASTER_ADDR=job-0.job MASTER_PORT=29500
  export RENDEZVOUS_TIMEOUT=5 RENDEZVOUS_POLL_SECONDS=0.1
  # A PATH with only what the barrier needs besides its probes, for the fallback tests.
  for tool in date sleep grep; do ln -s "$(command -v "$tool")" "minimal/$tool"; done
}

teardown() {
  if [ -n "${LISTENER:-}" ]; then kill "$LISTENER" 2>/dev/null || true; fi
}

# fake NAME BODY: an executable fakes/NAME that logs its arguments to $CALLS, then runs BODY.
fake() {
  printf '#!/bin/sh\necho "%s $*" >>"$CALLS"\n%s\n' "$1" "$2" >"fakes/$1"
  chmod +x "fakes/$1"
}

# nc that advertises -z in its help, succeeding or failing on connect.
fake_nc() {
  fake nc "case \"\$1\" in -h) echo 'usage: nc [-z] [-w secs] host port' >&2; exit 1;; esac; $1"
}

barrier() { PATH="$BATS_TEST_TMPDIR/fakes:$PATH" sh "$BARRIER"; }
barrier_minimal() { PATH="$BATS_TEST_TMPDIR/fakes:$BATS_TEST_TMPDIR/minimal" /bin/sh "$BARRIER"; }

@test "a zero timeout skips the barrier without a word" {
  RENDEZVOUS_TIMEOUT=0 run -0 barrier
  assert_output ""
}

@test "rank 0 waits for the DNS name of every rank and never probes its own port" {
  fake getent 'exit 0'
  fake_nc 'exit 0'
  run -0 barrier
  assert_output --partial "kubectl-tao: rank 0 passed the rendezvous barrier"
  run cat "$CALLS"
  assert_output "getent hosts job-0.job
getent hosts job-1.job
getent hosts job-2.job"
}

@test "another rank also waits until rank 0 accepts on MASTER_ADDR:MASTER_PORT" {
  fake getent 'exit 0'
  fake_nc 'exit 0'
  NODE_RANK=2 MASTER_PORT=23456 run -0 barrier
  run grep '^nc -z' "$CALLS"
  assert_output "nc -z -w 2 job-0.job 23456"
}

@test "a rank that cannot reach rank 0 in time exits 88 naming rank, address and timeout" {
  fake getent 'exit 0'
  fake_nc 'exit 1'
  NODE_RANK=1 RENDEZVOUS_TIMEOUT=1 run --separate-stderr -88 barrier
  assert_equal "$stderr" "kubectl-tao: rendezvous timeout: rank 1 could not reach rank 0 at job-0.job:29500 after 1s"
}

@test "without the table's rendezvous-timeout code the barrier stops with exit 2 before it waits" {
  fake getent 'exit 0'
  : >"$CALLS"
  run --separate-stderr -2 env -u TAO_EXIT_CODES PATH="$BATS_TEST_TMPDIR/fakes:$PATH" sh "$BARRIER"
  assert_equal "$stderr" "kubectl-tao: rendezvous: TAO_EXIT_CODES has no exit code named rendezvous-timeout (one row a line: NUMBER NAME DECISION REASON)"
  run cat "$CALLS"
  assert_output ""
}

@test "a name that never resolves exits 88 naming the host" {
  fake getent '[ "$2" != job-2.job ]'
  RENDEZVOUS_TIMEOUT=1 run --separate-stderr -88 barrier
  assert_equal "$stderr" "kubectl-tao: rendezvous timeout: rank 0 could not resolve job-2.job after 1s"
}

@test "names that appear later are waited for" {
  # job-1 resolves from the fourth lookup on.
  fake getent 'n=$(grep -c "job-1.job" "$CALLS"); [ "$2" != job-1.job ] || [ "$n" -ge 4 ]'
  run -0 barrier
  run grep -c 'job-1.job' "$CALLS"
  assert_output 4
}

@test "the subdomain can differ from the job name" {
  fake getent 'exit 0'
  NNODES=2 TAO_K8S_SUBDOMAIN=svc run -0 barrier
  run cat "$CALLS"
  assert_output "getent hosts job-0.svc
getent hosts job-1.svc"
}

@test "nslookup that ignores the search list still resolves through the search domains" {
  # Like busybox's nslookup: only the fully qualified name resolves.
  fake nslookup 'case "$1" in *.ns1.svc.cluster.local) exit 0;; *) exit 1;; esac'
  printf 'search ns1.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n' >resolv.conf
  NNODES=2 RENDEZVOUS_RESOLV_CONF="$BATS_TEST_TMPDIR/resolv.conf" run -0 barrier_minimal
  assert_output --partial "rank 0 passed the rendezvous barrier"
  run grep -c 'nslookup job-[01].job.ns1.svc.cluster.local' "$CALLS"
  assert_output 2
}

@test "nslookup is used when getent is missing" {
  fake nslookup 'exit 0'
  NNODES=2 run -0 barrier_minimal
  run cat "$CALLS"
  assert_output "nslookup job-0.job
nslookup job-1.job"
}

@test "without any resolver or prober the barrier says so and lets the rank start" {
  NODE_RANK=1 run --separate-stderr -0 barrier_minimal
  assert_output --partial "rank 1 passed the rendezvous barrier"
  [[ "$stderr" == *"no getent, nslookup or python3 in this image; not waiting for DNS"* ]]
  [[ "$stderr" == *"no nc -z, python3 or bash in this image; not waiting for rank 0's port"* ]]
}

@test "an nc without -z is not trusted as a port probe" {
  fake getent 'exit 0'
  fake nc 'echo "usage: nc host port" >&2; exit 1'
  NODE_RANK=1 run --separate-stderr -0 barrier_minimal
  [[ "$stderr" == *"not waiting for rank 0's port"* ]]
  run grep -c '^nc -z' "$CALLS"
  assert_output 0
}

@test "busybox's nc (no -z, but -e PROG) probes the port by running true on connect" {
  fake getent 'exit 0'
  fake nc 'case "$1" in -h) echo "Usage: nc [-iN] [-wN] [-l] [-p PORT] [-f FILE|IPADDR PORT] [-e PROG]" >&2; exit 1;; esac; exit 0'
  NODE_RANK=1 run --separate-stderr -0 barrier_minimal
  assert_output --partial "rank 1 passed the rendezvous barrier"
  run grep -c '^nc -w 2 job-0.job 29500 -e true$' "$CALLS"
  assert_output 1
}

@test "busybox's nc that cannot connect keeps the rank waiting until it exits 88" {
  fake getent 'exit 0'
  fake nc 'case "$1" in -h) echo "Usage: nc [-wN] [-l] [-p PORT] [-e PROG]" >&2; exit 1;; esac; exit 1'
  NODE_RANK=1 RENDEZVOUS_TIMEOUT=1 run --separate-stderr barrier_minimal
  assert_failure 88
  [[ "$stderr" == *"rank 1 could not reach rank 0 at job-0.job:29500 after 1s"* ]]
}

@test "python3 probes a real listening socket when nc is missing" {
  command -v python3 >/dev/null || skip "no python3"
  fake getent 'exit 0'
  ln -s "$(python3 -c 'import sys; print(sys.executable)')" minimal/python3
  python3 - <<'PY' &
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0)); s.listen(8)
open("port.tmp", "w").write(str(s.getsockname()[1])); __import__("os").rename("port.tmp", "port")
time.sleep(20)
PY
  LISTENER=$!
  for _ in $(seq 50); do [ -f port ] && break; sleep 0.1; done
  NODE_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT="$(cat port)" run -0 barrier_minimal
  assert_output --partial "rank 1 passed the rendezvous barrier"
}

@test "python3 reports a closed port as a timeout" {
  command -v python3 >/dev/null || skip "no python3"
  fake getent 'exit 0'
  ln -s "$(python3 -c 'import sys; print(sys.executable)')" minimal/python3
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  NODE_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" RENDEZVOUS_TIMEOUT=1 run --separate-stderr -88 barrier_minimal
  assert_equal "$stderr" "kubectl-tao: rendezvous timeout: rank 1 could not reach rank 0 at 127.0.0.1:$port after 1s"
}

@test "a rank that is not a number is a configuration error (exit 2)" {
  NODE_RANK=abc run --separate-stderr -2 barrier
  assert_equal "$stderr" "kubectl-tao: rendezvous: NODE_RANK must be a whole number, got 'abc'"
}

@test "a missing variable is named" {
  unset NNODES
  run ! barrier
  assert_output --partial "NNODES is not set"
}
