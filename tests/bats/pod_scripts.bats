#!/usr/bin/env bats
# The fixed POSIX-sh scripts the manifests run in the pod: tier C fetch and run/upload, and the
# multi-node rank entrypoint. Fakes for aws / torchrun log their argv; user text must arrive as data.

load common

K8S="$REPO/templates/k8s"

setup_file() {
  export_exit_codes
}

setup() {
  cd "$BATS_TEST_TMPDIR"
  mkdir -p fakes ws
  export CALLS="$BATS_TEST_TMPDIR/calls"
  export TAO_WORKSPACE="$BATS_TEST_TMPDIR/ws"
  export TAO_RESULTS_ROOT="$TAO_WORKSPACE/results"
  export TAO_UPLOAD_URI="s3://bkt/results/run-1/"
  : >"$CALLS"
}

teardown() {
  if [ -n "${WRAPPER:-}" ]; then kill "$WRAPPER" 2>/dev/null || true; fi
}

# fake NAME BODY: fakes/NAME logs one line per argument (so spaces stay visible), then runs BODY.
fake() {
  printf '#!/bin/sh\necho "%s:" >>"$CALLS"\nfor a in "$@"; do echo "  [$a]" >>"$CALLS"; done\n%s\n' "$1" "$2" >"fakes/$1"
  chmod +x "fakes/$1"
}

# call NAME ARG...: the lines fakes/NAME logs for one call with ARGs
call() {
  printf '%s:\n' "$1"
  shift
  printf '  [%s]\n' "$@"
}

run_wrapper() { PATH="$BATS_TEST_TMPDIR/fakes:$PATH" sh -c "$(cat "$K8S/tier-c-run.sh")" kubectl-tao "$@"; }
fetch() { PATH="$BATS_TEST_TMPDIR/fakes:$PATH" sh -c "$(cat "$K8S/tier-c-fetch.sh")" fetch-inputs "$@"; }
rank() { PATH="$BATS_TEST_TMPDIR/fakes:$PATH" sh -c "$(cat "$K8S/indexed-rank-entrypoint.sh")" kubectl-tao "$@"; }

# ---------------------------------------------------------------- tier C run + upload

@test "tier C: the command's exit code is kept and results are uploaded without .tao/*" {
  fake aws 'exit 0'
  run -3 run_wrapper 'echo out > "$TAO_RESULTS_ROOT/m.txt"; exit 3'
  [ -f ws/results/m.txt ]
  run cat "$CALLS"
  assert_output "$(call aws s3 cp --recursive --only-show-errors --exclude '.tao/*' "$TAO_WORKSPACE/results/" \
    s3://bkt/results/run-1/)"
}

@test "tier C: extra excludes are passed as data, never evaluated" {
  fake aws 'exit 0'
  run -0 run_wrapper 'true' '*.tmp' '$(touch pwned)' 'a b'
  [ ! -e pwned ]
  run grep -A1 -- '--exclude' "$CALLS"
  assert_output "  [--exclude]
  [.tao/*]
  [--exclude]
  [*.tmp]
  [--exclude]
  [\$(touch pwned)]
  [--exclude]
  [a b]"
}

@test "tier C: a failed upload after a successful command exits 89" {
  fake aws 'exit 2'
  run --separate-stderr -89 run_wrapper 'true'
  assert_equal "$stderr" "kubectl-tao: upload of $TAO_RESULTS_ROOT/ to s3://bkt/results/run-1/ failed (exit 2)"
}

@test "tier C: without the table's upload-failed code the wrapper stops with exit 2 before the command runs" {
  fake aws 'exit 0'
  TAO_EXIT_CODES="1 other final x" run --separate-stderr -2 run_wrapper 'echo COMMAND-RAN'
  assert_equal "$stderr" "kubectl-tao: TAO_EXIT_CODES has no exit code named upload-failed (one row a line: NUMBER NAME DECISION REASON)"
  assert_output ""
  run cat "$CALLS"
  assert_output ""
}

@test "tier C: a failed upload after a failed command keeps the command's code" {
  fake aws 'exit 2'
  run -5 run_wrapper 'exit 5'
}

@test "tier C: without any aws CLI the upload fails loudly" {
  run --separate-stderr -89 env PATH="/usr/bin:/bin" sh -c "$(cat "$K8S/tier-c-run.sh")" kubectl-tao true
  [[ "$stderr" == *"no aws CLI in this image and none left by fetch-inputs"* ]]
}

@test "tier C: Python's awscli module is used when the image has no aws on PATH" {
  fake python3 'case "$1" in -c) exit 0 ;; esac'
  run -0 env PATH="$BATS_TEST_TMPDIR/fakes:/usr/bin:/bin" sh -c "$(cat "$K8S/tier-c-run.sh")" kubectl-tao true '*.tmp'
  run cat "$CALLS"
  assert_output --partial "python3:
  [-m]
  [awscli]
  [s3]
  [cp]
  [--recursive]
  [--only-show-errors]
  [--exclude]
  [.tao/*]
  [--exclude]
  [*.tmp]
  [$TAO_WORKSPACE/results/]
  [s3://bkt/results/run-1/]"
}

@test "tier C: the aws bundle left by fetch-inputs is used when the image has none" {
  mkdir -p ws/.kubectl-tao/aws-cli/dist
  printf '#!/bin/sh\necho "bundle $*" >>"$CALLS"\n' >ws/.kubectl-tao/aws-cli/dist/aws
  chmod +x ws/.kubectl-tao/aws-cli/dist/aws
  run -0 env PATH="/usr/bin:/bin" sh -c "$(cat "$K8S/tier-c-run.sh")" kubectl-tao true
  run cat "$CALLS"
  assert_output --partial "bundle s3 cp --recursive"
}

@test "tier C: legacy S3 variable names are mapped for the aws CLI" {
  fake aws 'echo "endpoint=$AWS_ENDPOINT_URL region=$AWS_DEFAULT_REGION" >>"$CALLS"'
  S3_ENDPOINT_URL=http://minio:9000 CLOUD_REGION=us-west-2 run -0 run_wrapper true
  run grep '^endpoint=' "$CALLS"
  assert_output "endpoint=http://minio:9000 region=us-west-2"
}

@test "tier C: TERM reaches the command and the upload still runs" {
  fake aws 'exit 0'
  PATH="$BATS_TEST_TMPDIR/fakes:$PATH" sh -c "$(cat "$K8S/tier-c-run.sh")" kubectl-tao \
    'trap "echo got-term >>\"$CALLS\"; exit 143" TERM; echo started >>"$CALLS"; while :; do sleep 0.1; done' &
  WRAPPER=$!
  for _ in $(seq 50); do grep -q started "$CALLS" && break; sleep 0.1; done
  kill -TERM "$WRAPPER"
  code=0
  wait "$WRAPPER" || code=$?
  assert_equal "$code" 143
  run cat "$CALLS"
  assert_line "got-term"
  assert_line "aws:"
}

# ---------------------------------------------------------------- tier C fetch

@test "tier C fetch: prefixes are copied recursively and objects one by one, into inputs/<name>" {
  fake aws 'exit 0'
  run -0 fetch 's3://bkt/datasets/coco/' 's3://bkt/specs/train spec.yaml' 's3://bkt/$(id)'
  [ -d ws/inputs ] && [ -d ws/results ] && [ -d ws/.kubectl-tao ]
  run cat "$CALLS"
  assert_output "$(
    call aws s3 cp --recursive --only-show-errors s3://bkt/datasets/coco/ "$TAO_WORKSPACE/inputs/coco/"
    call aws s3 cp --only-show-errors 's3://bkt/specs/train spec.yaml' "$TAO_WORKSPACE/inputs/train spec.yaml"
    call aws s3 cp --only-show-errors 's3://bkt/$(id)' "$TAO_WORKSPACE/inputs/\$(id)"
  )"
}

@test "tier C fetch: a failed download fails the init container" {
  fake aws 'exit 1'
  run ! fetch 's3://bkt/missing.zip'
}

@test "tier C fetch: no inputs still prepares the workspace" {
  run -0 fetch
  assert_output --partial "fetched 0 input(s)"
  [ -d ws/inputs ] && [ -d ws/results ]
}

# ---------------------------------------------------------------- multi-node rank entrypoint

rank_env() {
  export NODE_RANK=1 NNODES=2 NPROC_PER_NODE=4 MASTER_ADDR=job-0.job MASTER_PORT=29500 NODE_NAME=gpu-node-7
  export HOSTNAME=job-1-x7k2q
}

@test "rank: logs rank and node, then runs the user's command with sh -c" {
  rank_env
  RENDEZVOUS_TIMEOUT=0 run -0 rank 'exit 1' tao 'echo "rank=$NODE_RANK world=$NNODES"'
  assert_line --index 0 "kubectl-tao: rank 1 of 2 on node gpu-node-7 (pod job-1-x7k2q); master job-0.job:29500"
  assert_line --index 1 "rank=1 world=2"
}

@test "rank: the barrier runs first and its exit code 88 stops the rank" {
  rank_env
  RENDEZVOUS_TIMEOUT=5 run -88 rank 'echo barrier-ran; exit 88' tao 'echo user-ran'
  assert_line "barrier-ran"
  refute_line "user-ran"
}

@test "rank: torchrun gets the rendezvous flags and the user's argv unchanged" {
  rank_env
  fake torchrun 'exit 0'
  RENDEZVOUS_TIMEOUT=0 run -0 rank 'exit 1' torchrun train.py --name 'two words' '$(id)'
  run cat "$CALLS"
  assert_output "torchrun:
  [--nnodes=2]
  [--nproc_per_node=4]
  [--node_rank=1]
  [--master_addr=job-0.job]
  [--master_port=29500]
  [train.py]
  [--name]
  [two words]
  [\$(id)]"
}

@test "rank: torchrun's flight recorder dump directory is made before torchrun starts" {
  rank_env
  fake torchrun 'exit 0'
  export TORCH_FR_DUMP_TEMP_FILE="$BATS_TEST_TMPDIR/results/r1/flight-recorder/nccl_trace_rank_"
  RENDEZVOUS_TIMEOUT=0 run -0 rank 'exit 1' torchrun train.py
  [ -d "$BATS_TEST_TMPDIR/results/r1/flight-recorder" ]
  unset TORCH_FR_DUMP_TEMP_FILE
  RENDEZVOUS_TIMEOUT=0 run -0 rank 'exit 1' torchrun train.py
}

@test "rank: an unknown launcher is refused" {
  rank_env
  RENDEZVOUS_TIMEOUT=0 run --separate-stderr -2 rank 'true' mpirun x
  assert_equal "$stderr" "kubectl-tao: unknown launcher 'mpirun' (expected tao or torchrun)"
}

@test "rank: the real barrier script passes when every name resolves" {
  rank_env
  export NODE_RANK=0 TAO_K8S_JOB_NAME=job RENDEZVOUS_TIMEOUT=3 RENDEZVOUS_POLL_SECONDS=0.1
  fake getent 'exit 0'
  run -0 rank "$(cat "$K8S/rendezvous-barrier.sh")" tao 'echo trained'
  assert_line "kubectl-tao: rank 0 waiting for 2 ranks of job (timeout 3s)"
  assert_line "trained"
}

@test "the pod scripts are POSIX sh that shellcheck accepts" {
  command -v shellcheck >/dev/null || skip "shellcheck is not installed"
  run -0 shellcheck -s sh "$K8S"/*.sh
}

@test "the pod scripts run under dash, a strict POSIX shell" {
  command -v dash >/dev/null || skip "dash is not installed"
  for script in "$K8S"/*.sh; do
    run -0 dash -n "$script"
  done
}
