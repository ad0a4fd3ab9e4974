#!/usr/bin/env bats
# templates/k8s/stall-watch.sh (--stall-timeout): the stall watch, as the single-pod job runs it and prepended to
# the rank entrypoints, under dash (the strict POSIX shell most images have as sh) and bash.

load common

K8S="$REPO/templates/k8s"
WATCH="$K8S/stall-watch.sh"
SHELLS="dash bash"

setup_file() {
  export_exit_codes
}

setup() {
  cd "$BATS_TEST_TMPDIR"
  export TAO_STALL_TIMEOUT=2 TAO_STALL_GRACE_SECONDS=2 TAO_STALL_POLL_SECONDS=1
  unset TAO_RESULTS_ROOT
}

# gone PID: the process ended (a zombie no one has reaped yet counts: it runs no more).
gone() {
  local state
  state=$(ps -o stat= -p "$1" || true)
  [[ -z "$state" || "$state" == Z* ]] || fail "process $1 still runs ($state)"
}

# watch SHELL PROGRAM...: the watch as the single-pod job runs it; stdout in out, stderr in err, exit code in rc.
watch() {
  local shell=$1 rc=0
  shift
  "$shell" -c "$(cat "$WATCH")" stall-watch "$@" >out 2>err || rc=$?
  echo "$rc" >rc
}

@test "a program that prints, then hangs ignoring TERM, is named, sent TERM, then KILL, and exits 86" {
  for shell in $SHELLS; do
    rm -f got-term pid
    watch "$shell" sh -c 'echo "$$" >pid; trap "echo TERM >got-term" TERM; echo "epoch 1 done";
      printf "Epoch 2:  40%%|####      | 4/10\r"; while :; do sleep 1; done'
    run cat rc
    assert_output 86
    run cat out
    assert_output $'epoch 1 done\nEpoch 2:  40%|####      | 4/10\r'
    run cat err
    assert_line --regexp '^kubectl-tao: stalled: no output and no status\.json growth for [0-9]+s \(--stall-timeout 2s\); last progress: none; last output: Epoch 2:  40%\|####      \| 4/10; stopping the program \(TERM, then KILL after 2s\)$'
    run grep -c '^kubectl-tao: stalled' err
    assert_output 1
    run cat got-term
    assert_output TERM
    gone "$(cat pid)"
  done
}

@test "TERM reaches the program's whole process group, children included" {
  for shell in $SHELLS; do
    rm -f child
    watch "$shell" sh -c 'sleep 300 & echo $! >child; echo started; wait'
    run cat rc
    assert_output 86
    gone "$(cat child)"
  done
}

@test "a program that keeps printing slowly is no stall: its output and exit code are its own" {
  export TAO_STALL_TIMEOUT=4  # twice the longest quiet time of the program, on a loaded machine too
  for shell in $SHELLS; do
    watch "$shell" sh -c 'for i in 1 2 3 4 5 6; do echo "eval batch $i"; sleep 2; done; echo warn >&2; exit 3'
    run cat rc
    assert_output 3
    run cat out
    assert_output "$(printf 'eval batch %s\n' 1 2 3 4 5 6)"
    run cat err
    assert_output warn
  done
}

@test "a program that only grows a status.json under the results is no stall" {
  export TAO_STALL_TIMEOUT=4 TAO_RESULTS_ROOT="$BATS_TEST_TMPDIR/results"
  mkdir -p results/train
  for shell in $SHELLS; do
    watch "$shell" sh -c 'for i in 1 2 3 4 5 6; do echo "{\"epoch\": $i}" >>"$TAO_RESULTS_ROOT/train/status.json"; sleep 2; done'
    run cat rc
    assert_output 0
    run cat err
    assert_output ""
  done
}

@test "the stall line names the epoch the newest status.json recorded last" {
  export TAO_RESULTS_ROOT="$BATS_TEST_TMPDIR/results"
  mkdir -p results/train
  printf '%s\n' '{"date": "12/6/2026", "time": "9:1:5", "status": "RUNNING", "epoch": 1, "max_epoch": 4, "step": 20, "max_step": 50}' \
    '{"date": "12/6/2026", "time": "9:1:5", "status": "RUNNING", "message": "Train metrics generated.", "kpi": {"train_loss": 0.4}}' \
    >results/train/status.json
  for shell in $SHELLS; do
    watch "$shell" sh -c 'echo training; exec sleep 60'
    run cat rc
    assert_output 86
    run cat err
    assert_output --partial "; last progress: epoch=1 max_epoch=4 step=20 max_step=50 (train/status.json); last output: training;"
  done
}

@test "without TAO_STALL_TIMEOUT (or with 0) the program runs as it is" {
  for shell in $SHELLS; do
    for timeout in "" 0; do
      TAO_STALL_TIMEOUT=$timeout watch "$shell" sh -c 'echo out; echo err >&2; sleep 3; exit 7'
      run cat rc
      assert_output 7
      run cat out
      assert_output out
      run cat err
      assert_output err
    done
  done
}

@test "a timeout that is not a whole number of seconds is refused with exit 2 before anything runs" {
  for shell in $SHELLS; do
    for timeout in 20s -1 010 1.5; do
      TAO_STALL_TIMEOUT=$timeout watch "$shell" sh -c 'echo ran'
      run cat rc
      assert_output 2
      run cat out
      assert_output ""
      run cat err
      assert_output "kubectl-tao: TAO_STALL_TIMEOUT and TAO_STALL_GRACE_SECONDS must be whole numbers of seconds"
    done
  done
}

@test "the multi-node entrypoint with the watch prepended exits 86 for a stalled rank" {
  export NODE_RANK=0 NNODES=1 MASTER_ADDR=localhost MASTER_PORT=29500 RENDEZVOUS_TIMEOUT=0
  for shell in $SHELLS; do
    rc=0
    "$shell" -c "$(cat "$WATCH" "$K8S/indexed-rank-entrypoint.sh")" kubectl-tao barrier tao 'echo hello; exec sleep 60' \
      >out 2>err || rc=$?
    assert_equal "$rc" 86
    run cat out
    assert_line "hello"
    run cat err
    assert_output --partial "kubectl-tao: stalled: no output and no status.json growth for"
  done
}

# gang_env: one rank of a one-node gang with one restart, its signs as restarts/signs.py renders them.
gang_env() {
  export_retry_signs
  export NNODES=1 NODE_RANK=0 TAO_MAX_RESTARTS=1 RENDEZVOUS_TIMEOUT=0
  export RENDEZVOUS_POLL_SECONDS=0.1 TAO_PEER_STOP_SECONDS=1 TAO_SETTLE_SECONDS=1
}

# gang_attempt SHELL COMMAND: the watch prepended to the gang entrypoint, as render writes it; output in out, code
# in rc.
gang_attempt() {
  rc=0
  "$1" -c "$(cat "$WATCH" "$K8S/gang-restart-entrypoint.sh")" kubectl-tao barrier tao "$2" >out 2>&1 || rc=$?
}

@test "the gang entrypoint with the watch prepended restarts the gang for a stall: cause Stalled" {
  gang_env
  for shell in $SHELLS; do
    rm -rf gang
    export TAO_GANG_DIR="$BATS_TEST_TMPDIR/gang" TAO_TERMINATION_LOG="$BATS_TEST_TMPDIR/term"
    command='echo "attempt $TAO_ATTEMPT"; if [ "$TAO_ATTEMPT" = 1 ]; then exec sleep 60; fi'
    gang_attempt "$shell" "$command"
    assert_equal "$rc" 85
    run cat gang/end-1/line
    assert_output "kubectl-tao attempt=1 rank=0 exit=86 decision=restart counted=1 reason=Stalled"
    gang_attempt "$shell" "$command"
    assert_equal "$rc" 0
    run cat out
    assert_line "attempt 2"
  done
}

@test "a stall restarts the gang even when the output shows a program error before it" {
  gang_env
  for shell in $SHELLS; do
    rm -rf gang
    export TAO_GANG_DIR="$BATS_TEST_TMPDIR/gang" TAO_TERMINATION_LOG="$BATS_TEST_TMPDIR/term"
    # a caught error the program logged and went on from, then a hang
    command='echo "FileNotFoundError: [Errno 2] No such file or directory: '"'"'/data/optional.json'"'"'"; exec sleep 60'
    gang_attempt "$shell" "$command"
    assert_equal "$rc" 85
    run cat gang/end-1/line
    assert_output "kubectl-tao attempt=1 rank=0 exit=86 decision=restart counted=1 reason=Stalled"
  done
}

@test "the watch leaves no sleep of its own behind, stalled or signalled" {
  export TAO_STALL_POLL_SECONDS=7 TAO_STALL_GRACE_SECONDS=37
  for shell in $SHELLS; do
    # signalled: the container's TERM reaches the program, which ends; the watch's naps end with it
    "$shell" -c "$(cat "$WATCH")" stall-watch /bin/sh -c 'echo started; exec sleep 60' >out 2>&1 &
    pid=$!
    for _ in $(seq 50); do [[ "$(cat out 2>/dev/null)" == *started* ]] && break; sleep 0.1; done
    kill -TERM "$pid"
    wait "$pid" || true
    sleep 0.5
    run pgrep -f -x 'sleep (7|37)'
    assert_failure
  done
}

@test "a watched program needs the stalled code of the table of exit codes: without it the watch stops with exit 2" {
  for shell in $SHELLS; do
    env -u TAO_EXIT_CODES "$shell" -c "$(cat "$WATCH")" stall-watch echo PROGRAM-RAN >out 2>err && rc=0 || rc=$?
    assert_equal "$rc" 2
    run cat err
    assert_output "kubectl-tao: TAO_EXIT_CODES has no exit code named stalled (one row a line: NUMBER NAME DECISION REASON)"
    run cat out
    refute_output --partial PROGRAM-RAN
    # unwatched (TAO_STALL_TIMEOUT 0) the program runs as it is, table or not
    run env -u TAO_EXIT_CODES TAO_STALL_TIMEOUT=0 "$shell" -c "$(cat "$WATCH")" stall-watch echo PROGRAM-RAN
    assert_success
    assert_output PROGRAM-RAN
  done
}
