#!/usr/bin/env bats
# templates/k8s/gang-restart-entrypoint.sh: the rank entrypoint of --max-restarts. Two ranks run as two
# processes sharing one restart directory, as two pods share the job's volume; the barrier is off. Programs
# `exec` their last command: outside a container (not PID 1) the entrypoint stops its child only.

load common

ENTRY="$REPO/templates/k8s/gang-restart-entrypoint.sh"
FAILURES="$BATS_TEST_DIRNAME/../fixtures/failures"

setup_file() {
  export_exit_codes
  export_retry_signs
}

# table_code NAME: the number the table gives NAME
table_code() {
  printf '%s\n' "$TAO_EXIT_CODES" | sed -n "s/^\([0-9][0-9]*\) $1 .*/\1/p"
}

setup() {
  cd "$BATS_TEST_TMPDIR"
  export NNODES=2 TAO_GANG_DIR="$BATS_TEST_TMPDIR/gang" TAO_MAX_RESTARTS=2
  export RENDEZVOUS_TIMEOUT=0 RENDEZVOUS_POLL_SECONDS=0.1 TAO_PEER_STOP_SECONDS=1 TAO_SETTLE_SECONDS=3
}

# rank R COMMAND: run rank R of the tao launcher with COMMAND; its output in out-R, its exit code in rc-R.
rank() {
  ( rc=0
    NODE_RANK=$1 TAO_TERMINATION_LOG="$BATS_TEST_TMPDIR/term-$1" sh "$ENTRY" barrier tao "$2" >"out-$1" 2>&1 || rc=$?
    echo "$rc" >"rc-$1" ) &
}

both() {
  rank 0 "$1"
  rank 1 "$2"
  wait
}

# torchrun_rank_1 BODY: rank 1 launched by a torchrun that runs BODY (sh), beside a rank 0 that waits
torchrun_rank_1() {
  mkdir -p fakes
  printf '#!/bin/sh\n%s\n' "$1" >fakes/torchrun
  chmod +x fakes/torchrun
  export PATH="$BATS_TEST_TMPDIR/fakes:$PATH" NPROC_PER_NODE=1 MASTER_ADDR=job-0.job MASTER_PORT=29500
  ( rc=0; NODE_RANK=1 TAO_TERMINATION_LOG=/dev/null sh "$ENTRY" barrier torchrun train.py >out-1 2>&1 || rc=$?
    echo "$rc" >rc-1 ) &
  rank 0 'exec sleep 30'
  wait
}

# restarted [--partial] LINE: both ranks exited with the restart code, and the first attempt's end says LINE
restarted() {
  run cat rc-0 rc-1
  assert_output $'85\n85'
  run cat gang/end-1/line
  assert_output "$@"
}

@test "a rank killed by SIGKILL restarts the gang: both ranks exit 85 and the restart counts" {
  both 'echo "attempt $TAO_ATTEMPT"; exec sleep 30' 'kill -9 $$'
  restarted "kubectl-tao attempt=1 rank=1 exit=137 decision=restart counted=1 reason=SIGKILL"
  assert [ -f gang/end-1/counted ]
  run cat out-0
  assert_output --partial "attempt 1"
  assert_output --partial "another rank ended attempt 1; stopping the program"
  # the termination message of both ranks holds the history
  run cat term-0
  assert_output "kubectl-tao attempt=1 rank=1 exit=137 decision=restart counted=1 reason=SIGKILL"
}

@test "the next attempt sees TAO_ATTEMPT 2 and the restarts used, and completes" {
  both 'kill -9 $$' 'exec sleep 30'
  both 'echo "attempt=$TAO_ATTEMPT"' 'echo "attempt=$TAO_ATTEMPT"'
  run cat rc-0 rc-1
  assert_output $'0\n0'
  run cat out-1
  assert_output --partial "rank 1 attempt 2 (restarts used 1 of 2)"
  assert_output --partial "attempt=2"
  # the attempt's log starts with how the earlier attempts ended (status reads it there)
  assert_line --index 0 "kubectl-tao attempt=1 rank=0 exit=137 decision=restart counted=1 reason=SIGKILL"
  # each attempt's output is kept on the volume, the kubelet removes the restarted containers
  run cat gang/attempt-2/rank-1.log
  assert_output "attempt=2"
}

@test "a program error ends the job: the failing rank keeps its code, the other rank does not restart" {
  both 'exec sleep 30' 'echo import error >&2; exit 3'
  run cat rc-1
  assert_output 3
  run cat rc-0
  refute_output 85
  run cat gang/end-1/line
  assert_output "kubectl-tao attempt=1 rank=1 exit=3 decision=fail counted=0 reason=program error"
}

@test "a final-looking failure that echoes a peer's crash follows the peer's restart" {
  # rank 0 fails with 1 at once (its collective lost rank 1); rank 1 dies of SIGSEGV a moment later
  both 'sleep 0.5; exit 1' 'sleep 1; kill -11 $$'
  restarted --partial "rank=1 exit=139 decision=restart counted=1 reason=SIGSEGV"
}

@test "once the restarts are used the next retryable failure ends the job" {
  TAO_MAX_RESTARTS=1
  both 'exec sleep 30' 'kill -9 $$'
  both 'exec sleep 30' 'kill -9 $$'
  run cat rc-1
  assert_output 137
  run cat rc-0
  refute_output 85
  run cat gang/end-2/line
  assert_output "kubectl-tao attempt=2 rank=1 exit=137 decision=fail counted=0 reason=SIGKILL (no restarts left)"
  run cat term-1
  assert_line --index 0 --partial "attempt=1 rank=1 exit=137 decision=restart"
  assert_line --index 1 --partial "attempt=2 rank=1 exit=137 decision=fail"
}

@test "the barrier's exit 88 is retried once and ends the job when it repeats" {
  both 'exec sleep 30' 'exit 88'
  run cat rc-1
  assert_output 85
  both 'exec sleep 30' 'exit 88'
  run cat rc-1
  assert_output 88
  run cat gang/end-2/line
  assert_output --partial "decision=fail counted=0 reason=rendezvous timeout twice"
}

@test "a program that exits 85 itself never asks for a restart" {
  both 'exec sleep 30' 'exit 85'
  run cat rc-1
  assert_output 1
}

@test "SIGTERM (eviction, preemption) restarts the others without counting and exits 143" {
  rank 0 'exec sleep 30'
  ( NODE_RANK=1 TAO_TERMINATION_LOG=/dev/null exec sh "$ENTRY" barrier tao 'exec sleep 30' >out-1 2>&1 ) &
  victim=$!
  for _ in $(seq 50); do [ -f gang/attempt-1/rank-1 ] && [ -f gang/attempt-1/rank-0 ] && break; sleep 0.1; done
  sleep 0.5
  kill -TERM "$victim"
  wait "$victim" || echo $? >rc-1
  wait
  run cat rc-0 rc-1
  assert_output $'85\n143'
  run cat gang/end-1/line
  assert_output --partial "rank=1 exit=143 decision=disrupted counted=0"
  refute [ -f gang/end-1/counted ]
  both 'echo "attempt=$TAO_ATTEMPT"' 'true'
  run cat out-0
  assert_output --partial "rank 0 attempt 2 (restarts used 0 of 2)"
}

@test "a rank waits for every rank to enter the attempt and gives up with 88" {
  RENDEZVOUS_TIMEOUT=1 rank 0 'echo PROGRAM-RAN'
  wait
  run cat rc-0
  assert_output 85
  run cat out-0
  refute_output --partial "PROGRAM-RAN"
  assert_output --partial "only 1 of 2 ranks entered attempt 1"
}

@test "torchrun's exit 1 for a worker killed by a signal is read from its failure summary and retried" {
  torchrun_rank_1 'echo "  rank      : 1 (local_rank: 0)"; echo "  exitcode  : -9 (pid: 4242)" >&2; exit 1'
  run cat rc-1 rc-0
  assert_output $'85\n85'
  run cat gang/end-1/line
  # the summary line is also the table's RankKilled sign: the cause is the reason
  assert_output "kubectl-tao attempt=1 rank=1 exit=137 decision=restart counted=1 reason=RankKilled"
}

@test "torchrun's exit 1 for a worker's own error stays a program error" {
  torchrun_rank_1 'echo "  exitcode  : 1 (pid: 4242)" >&2; exit 1'
  run cat rc-1
  assert_output 1
  run cat gang/end-1/line
  assert_output --partial "exit=1 decision=fail"
}

@test "a rank that prints an NCCL system error and exits 1 restarts the gang, the cause is the reason" {
  both 'exec sleep 30' "cat '$FAILURES/nccl-system-error--ib-reg-mr.rank0.log'; exit 1"
  restarted "kubectl-tao attempt=1 rank=1 exit=1 decision=restart counted=1 reason=NcclSystemError"
  assert [ -f gang/end-1/counted ]
  run cat out-1
  assert_output --partial "rank 1: its output shows NcclSystemError (ERR_INFRA)"
}

@test "a device-side assert that aborts (exit 134) is final: the job fails, nothing restarts" {
  both 'exec sleep 30' "cat '$FAILURES/cuda-device-assert--torch-2.15.log'; kill -ABRT \$\$"
  run cat rc-1
  assert_output 134
  run cat rc-0
  refute_output 85
  run cat gang/end-1/line
  assert_output "kubectl-tao attempt=1 rank=1 exit=134 decision=fail counted=0 reason=DeviceAssert"
}

@test "a plain exit 1 that shows no sign stays a program error" {
  both 'exec sleep 30' 'echo "step 3 loss 0.25"; echo "bad value" >&2; exit 1'
  run cat rc-1
  assert_output 1
  run cat gang/end-1/line
  assert_output "kubectl-tao attempt=1 rank=1 exit=1 decision=fail counted=0 reason=program error"
}

@test "an exception the table does not name is a program error even after a signal, torchrun's banner is not" {
  both 'exec sleep 30' "cat '$FAILURES/python-exception--keyerror.log'; kill -SEGV \$\$"
  run cat gang/end-1/line
  assert_output "kubectl-tao attempt=1 rank=1 exit=139 decision=fail counted=0 reason=ProgramError"
  both 'exec sleep 30' 'echo "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"; kill -SEGV $$'
  run cat gang/end-2/line
  assert_output "kubectl-tao attempt=2 rank=1 exit=139 decision=restart counted=1 reason=SIGSEGV"
}

@test "an infrastructure sign with no restarts left ends the job and names the cause" {
  TAO_MAX_RESTARTS=0
  both 'exec sleep 30' "cat '$FAILURES/nccl-system-error--ib-reg-mr.rank0.log'; exit 1"
  run cat gang/end-1/line
  assert_output "kubectl-tao attempt=1 rank=1 exit=1 decision=fail counted=0 reason=NcclSystemError (no restarts left)"
}

@test "a rank that only lost its peer lets the peer's own final error decide" {
  # rank 1 prints the NCCL remote error at once; rank 0 fails with an import error a moment later
  TAO_SETTLE_SECONDS=2
  both 'sleep 1; echo "ModuleNotFoundError: No module named '"'"'timm'"'"'" >&2; exit 1' \
       "cat '$FAILURES/nccl-remote-error--connect-retries.rank0.log'; exit 1"
  run cat gang/end-1/line
  assert_output "kubectl-tao attempt=1 rank=0 exit=1 decision=fail counted=0 reason=MissingModule"
}

# torchrun_case SHELL LINE: rank 1 runs under SHELL (dash, bash) with a torchrun that prints LINE in its failure
# summary and exits 1; rank 0 runs a program that would sleep on.
torchrun_case() {
  mkdir -p fakes
  printf '#!/bin/sh\necho "  rank      : 1 (local_rank: 0)"\necho "%s" >&2\nexit 1\n' "$2" >fakes/torchrun
  chmod +x fakes/torchrun
  ( rc=0
    PATH="$BATS_TEST_TMPDIR/fakes:$PATH" NPROC_PER_NODE=1 MASTER_ADDR=job-0.job MASTER_PORT=29500 NODE_RANK=1 \
      TAO_TERMINATION_LOG=/dev/null "$1" "$ENTRY" barrier torchrun train.py >out-1 2>&1 || rc=$?
    echo "$rc" >rc-1 ) &
  rank 0 'exec sleep 30'
  wait
}

@test "a zero-padded signal in torchrun's summary is read as a number under dash and bash, and the attempt is claimed" {
  TAO_SETTLE_SECONDS=1
  for shell in dash bash; do
    rm -rf gang
    torchrun_case "$shell" '  exitcode  : -08 (pid: 7)'
    run cat out-1
    refute_output --partial "Illegal number"
    refute_output --partial "value too great"
    assert_output --partial "torchrun's worker died of signal 8"
    run cat gang/end-1/line
    assert_output "kubectl-tao attempt=1 rank=1 exit=136 decision=fail counted=0 reason=program error"
    run cat rc-1 rc-0   # the attempt was claimed: the other rank stopped instead of running on
    assert_output $'136\n143'
  done
}

@test "a huge or malformed number in torchrun's summary leaves torchrun's exit 1 under dash and bash" {
  TAO_SETTLE_SECONDS=1
  for line in '  exitcode  : -99999999999999999999999 (pid: 7)' '  exitcode  : -0x9 (pid: 7)' \
              '  exitcode  : -000000000000000000000000000000000000009 (pid: 7)'; do
    for shell in dash bash; do
      rm -rf gang
      torchrun_case "$shell" "$line"
      run cat out-1
      refute_output --partial "Illegal number"
      refute_output --partial "value too great"
      refute_output --partial "died of signal"
      run cat gang/end-1/line
      assert_output "kubectl-tao attempt=1 rank=1 exit=1 decision=fail counted=0 reason=program error"
      run cat rc-1
      assert_output 1
    done
  done
}

@test "a setting that is not a whole number stops the rank at once with exit 2, under dash and bash" {
  export NODE_RANK=0
  for shell in dash bash; do
    for setting in NNODES=2x NODE_RANK=-1 TAO_MAX_RESTARTS=08x TAO_SETTLE_SECONDS=1e3 RENDEZVOUS_TIMEOUT=9s; do
      run -2 env "$setting" "$shell" "$ENTRY" barrier tao 'echo PROGRAM-RAN'
      assert_output --partial "${setting%%=*} must be a whole number, got '${setting#*=}'"
      refute_output --partial PROGRAM-RAN
    done
  done
  refute [ -d gang ]
}

@test "the entrypoint's temporary files sit in directories mktemp made, gone when it ends" {
  mkdir tmp
  export TMPDIR="$BATS_TEST_TMPDIR/tmp"
  # the program sees the pipe its output goes through: in a directory of its own, not at a name made of a pid
  both 'exec sleep 30' "ls -A \"\$TMPDIR\" >seen; for e in \"\$TMPDIR\"/*; do [ ! -d \"\$e\" ] || echo directory >>seen; done
    cat '$FAILURES/nccl-system-error--ib-reg-mr.rank0.log'; exit 1"
  run cat seen   # both ranks share TMPDIR here: each has its own directory
  assert_line --index 0 --regexp '^kubectl-tao-output\.[A-Za-z0-9]{6}$'
  refute_line --regexp '^kubectl-tao-output\.[0-9]+$'  # no name made of a pid
  assert_line directory
  run cat gang/end-1/line
  assert_output --partial "reason=NcclSystemError"
  run ls -A tmp
  assert_output ""
}

@test "every row of the table of exit codes decides as it says when a rank ends with its code" {
  TAO_SETTLE_SECONDS=1
  restart=$(table_code restart)
  assert [ -n "$restart" ]
  rows=0
  while read -r number name decision reason; do
    rows=$((rows + 1))
    rm -rf gang rc-0 rc-1
    both 'exec sleep 30' "exit $number"
    run cat gang/end-1/line
    case "$decision" in
      final)
        assert_output "kubectl-tao attempt=1 rank=1 exit=$number decision=fail counted=0 reason=program error"
        run cat rc-1
        if [ "$number" = "$restart" ]; then assert_output 1; else assert_output "$number"; fi
        run cat rc-0
        refute_output "$restart"
        ;;
      once)
        assert_output "kubectl-tao attempt=1 rank=1 exit=$number decision=restart counted=1 reason=$reason"
        run cat rc-0 rc-1
        assert_output "$restart"$'\n'"$restart"
        both 'exec sleep 30' "exit $number"
        run cat gang/end-2/line
        assert_output "kubectl-tao attempt=2 rank=1 exit=$number decision=fail counted=0 reason=$reason twice"
        run cat rc-1
        assert_output "$number"
        ;;
      infra | retry)
        assert_output "kubectl-tao attempt=1 rank=1 exit=$number decision=restart counted=1 reason=$reason"
        run cat rc-0 rc-1
        assert_output "$restart"$'\n'"$restart"
        ;;
      *)
        fail "row $number $name: unknown decision '$decision'"
        ;;
    esac
  done <<<"$TAO_EXIT_CODES"
  # every row ran (the table is not empty, the loop read it whole)
  assert_equal "$rows" "$(printf '%s\n' "$TAO_EXIT_CODES" | wc -l | tr -d ' ')"
}

@test "a pod without the table of exit codes, or with a table that lacks a code it needs, stops at once with exit 2" {
  export NODE_RANK=0
  for shell in dash bash; do
    run -2 env -u TAO_EXIT_CODES "$shell" "$ENTRY" barrier tao 'echo PROGRAM-RAN'
    assert_output --partial "TAO_EXIT_CODES is not set"
    run -2 env TAO_EXIT_CODES="$(printf '%s\n' "$TAO_EXIT_CODES" | grep -v ' restart ')" \
      "$shell" "$ENTRY" barrier tao 'echo PROGRAM-RAN'
    assert_output --partial "TAO_EXIT_CODES has no exit code named restart"
    refute_output --partial PROGRAM-RAN
  done
  refute [ -d gang ]
}
