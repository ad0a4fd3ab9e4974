#!/usr/bin/env bats
# scripts/tao_job_record: job records, driven through the real script with a fresh state dir per test.

load common

TAO_JOB_RECORD="${TAO_JOB_RECORD:-$REPO/scripts/tao_job_record}"

setup() {
  in_test_home
  export TAO_STATE_DIR="$BATS_TEST_TMPDIR/state"
}

open_record() {
  "$TAO_JOB_RECORD" open --platform kubernetes --image nvcr.io/nvidia/tao/tao-toolkit:5.5.0-pyt \
    --network-arch dino --action train --storage-tier A --results-root /results "$@"
}

json_field() { # json_field FILE EXPR: evaluate a Python expression over the record `r`
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

@test "open prints a new id and writes the record under TAO_STATE_DIR/jobs" {
  run -0 open_record
  assert_output --regexp '^dino-train-[0-9a-f]{6}$'
  id="$output"
  [ -f "$TAO_STATE_DIR/jobs/$id.json" ]
  run json_field "$TAO_STATE_DIR/jobs/$id.json" 'r["transitions"][0]["message"], r["results_dir"], r["backend_ref"]'
  assert_output "('record opened before launch', '/results/$id', None)"
}

@test "without TAO_STATE_DIR records go to ~/.tao/jobs" {
  unset TAO_STATE_DIR
  run -0 open_record
  [ -f "$HOME/.tao/jobs/$output.json" ]
}

@test "a relative TAO_STATE_DIR is refused with exit 2" {
  export TAO_STATE_DIR=relative/state
  run -2 open_record
  assert_output --partial "ERROR: TAO_STATE_DIR must be an absolute path (got 'relative/state')"
}

@test "a TAO_STATE_DIR other users can write is refused with exit 2 and the fix" {
  mkdir -p "$TAO_STATE_DIR"
  chmod 777 "$TAO_STATE_DIR"
  run -2 open_record
  assert_output "ERROR: $TAO_STATE_DIR is writable by other users (mode 777); run \`chmod go-w $TAO_STATE_DIR\` or point TAO_STATE_DIR at a private directory"
  [ ! -e "$TAO_STATE_DIR/jobs" ]
}

@test "a jobs directory linked elsewhere is refused and nothing is written there" {
  mkdir -p "$TAO_STATE_DIR" "$BATS_TEST_TMPDIR/elsewhere"
  chmod 700 "$TAO_STATE_DIR"
  ln -s "$BATS_TEST_TMPDIR/elsewhere" "$TAO_STATE_DIR/jobs"
  run -2 open_record
  assert_output --partial "jobs is a symbolic link"
  run -0 find "$BATS_TEST_TMPDIR/elsewhere" -mindepth 1
  assert_output ""
}

@test "an error never echoes a credential typed into a flag" {
  run -2 "$TAO_JOB_RECORD" open --platform "HF_TOKEN=BatsCanary123" --image i --network-arch a --action b \
    --storage-tier A --results-root /r
  refute_output --partial BatsCanary123
}

@test "list shows OPEN until the record is launched" {
  id="$(open_record)"
  run -0 "$TAO_JOB_RECORD" list
  assert_line --index 0 --regexp '^ID +PLATFORM +STATE +RESULTS_DIR$'
  assert_line --index 1 --regexp "^$id +kubernetes +OPEN +/results/$id$"
  run -0 "$TAO_JOB_RECORD" mark "$id" --state RUNNING --backend-ref "default/$id"
  run -0 "$TAO_JOB_RECORD" list
  assert_line --index 1 --regexp "^$id +kubernetes +RUNNING +/results/$id$"
}

@test "mark appends transitions and show prints the redacted record" {
  id="$(open_record)"
  "$TAO_JOB_RECORD" mark "$id" --state RUNNING --backend-ref "tao/$id" --message "applied with HF_TOKEN=abc123"
  "$TAO_JOB_RECORD" mark "$id" --state ERROR --source poller --err-class ERR_INFRA --message OOMKilled
  run -0 "$TAO_JOB_RECORD" show "$id"
  assert_output --partial '"terminal_state": "ERROR"'
  assert_output --partial '"err_class": "ERR_INFRA"'
  assert_output --partial '"message": "applied with HF_TOKEN=***REDACTED***"'
  refute_output --partial abc123
  run grep -c abc123 "$TAO_STATE_DIR/jobs/$id.json"
  assert_output 0
}

@test "a terminal record is final: another state exits 1" {
  id="$(open_record)"
  "$TAO_JOB_RECORD" mark "$id" --state COMPLETE
  run -1 "$TAO_JOB_RECORD" mark "$id" --state RUNNING
  assert_output "ERROR: illegal transition COMPLETE -> RUNNING: job record $id is final; open a new record with --retry-of $id to run it again"
}

@test "re-marking the same terminal state succeeds and may fill err_class" {
  id="$(open_record)"
  "$TAO_JOB_RECORD" mark "$id" --state ERROR --message "not launched"
  run -0 "$TAO_JOB_RECORD" mark "$id" --state ERROR --err-class ERR_PROGRAM
  run -0 json_field "$TAO_STATE_DIR/jobs/$id.json" 'r["err_class"], len(r["transitions"])'
  assert_output "('ERR_PROGRAM', 2)"
}

@test "mark --state OPEN is refused with exit 2" {
  id="$(open_record)"
  run -2 "$TAO_JOB_RECORD" mark "$id" --state OPEN
  assert_output "ERROR: --state OPEN is set only by \`open\` (a record that was never launched); use PENDING"
}

@test "marking a missing record exits 1 naming it" {
  run -1 "$TAO_JOB_RECORD" mark dino-train-000000 --state RUNNING
  assert_output --partial "ERROR: no job record dino-train-000000 at $TAO_STATE_DIR/jobs/dino-train-000000.json"
}

@test "open without a results location is exit 2" {
  run -2 "$TAO_JOB_RECORD" open --platform kubernetes --image i --network-arch a --action b --storage-tier A
  assert_output "ERROR: give exactly one of --results-dir DIR or --results-root ROOT"
}

@test "open with a bad storage tier is exit 2" {
  run -2 open_record --storage-tier Z
  assert_output "ERROR: --storage-tier must be one of A, B, C (got 'Z')"
}

@test "an unknown verb is exit 2" {
  run -2 "$TAO_JOB_RECORD" delete x
  assert_output "ERROR: unknown verb 'delete': use open, mark, show or list"
}

@test "list --json prints the records newest first" {
  first="$(open_record)"
  second="$(open_record --results-root s3://bucket/out)"
  run -0 bash -c "'$TAO_JOB_RECORD' list --json | python3 -c 'import json,sys; print(*[r[\"id\"] for r in json.load(sys.stdin)])'"
  assert_output "$second $first"
}

@test "twenty concurrent opens give twenty distinct records" {
  for _ in $(seq 20); do open_record >>ids.txt & done
  wait
  run -0 bash -c "sort -u ids.txt | wc -l"
  assert_output 20
  run -0 bash -c "ls '$TAO_STATE_DIR/jobs'/*.json | wc -l"
  assert_output 20
}

@test "the reference's script names run the same tools, so its command lines work unchanged" {
  scripts="$REPO/scripts"
  run -0 "$scripts/tao_job_record.py" open --platform kubernetes --image busybox --network-arch dino \
    --action train --storage-tier A --results-dir /workspace/results/x
  id="$output"
  run -0 "$scripts/tao_job_record.py" mark "$id" --state RUNNING --backend-ref "tao/$id"
  run -0 "$scripts/tao_job_record.py" mark "$id" --state CANCELED --source agent
  run json_field "$TAO_STATE_DIR/jobs/$id.json" 'r["terminal_state"], r["backend_ref"]'
  assert_output "('CANCELED', 'tao/$id')"
  printf 'HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123\n' >leaky.env
  run -1 "$scripts/redact_secrets.py" lint leaky.env
  run -0 "$scripts/render_action_job.py" name --job-id "$id"
  assert_output "$id"
}

@test "a FIFO or a link under jobs/ is skipped with one warning, and never read" {
  run -0 open_record
  id="$output"
  mkfifo "$TAO_STATE_DIR/jobs/dino-train-fifo00.json"
  ln -s /dev/zero "$TAO_STATE_DIR/jobs/dino-train-zero00.json"
  run --separate-stderr -0 timeout 60 "$TAO_JOB_RECORD" list
  assert_output --partial "$id"
  refute_output --partial "fifo00"
  [ "$(printf '%s\n' "$stderr" | grep -c '^WARNING: job record ')" -eq 2 ]
  [[ "$stderr" == *"dino-train-fifo00.json is a FIFO, not a regular file; skipped"* ]]
  [[ "$stderr" == *"dino-train-zero00.json is a symbolic link; kubectl-tao reads only regular files; skipped"* ]]
  run --separate-stderr -1 timeout 60 "$TAO_JOB_RECORD" show dino-train-fifo00
  assert_equal "$stderr" "ERROR: job record $TAO_STATE_DIR/jobs/dino-train-fifo00.json is a FIFO, not a regular file; restore it or move it aside"
}
