#!/usr/bin/env bats
# scripts/redact_secrets: the secret linter, driven through the real script.

load common

REDACT_SECRETS="${REDACT_SECRETS:-$REPO/scripts/redact_secrets}"

setup() {
  in_test_home
}

# write_dirty_manifest: job.yaml, a Job whose env holds one credential as a literal value
write_dirty_manifest() {
  cp "$BATS_TEST_DIRNAME/../fixtures/secrets/job-dirty.yaml" job.yaml
}

@test "lint of a clean manifest exits 0 and prints nothing" {
  cp "$BATS_TEST_DIRNAME/../fixtures/secrets/job-clean.yaml" clean.yaml
  run -0 "$REDACT_SECRETS" lint clean.yaml
  assert_output ""
}

@test "lint reports an env literal with file, line, document and field, never the value" {
  write_dirty_manifest
  run -1 "$REDACT_SECRETS" lint job.yaml
  assert_line --index 0 "job.yaml:13: credential: 0/spec.template.spec.containers[0].env[0].value (env-literal HF_TOKEN)"
  assert_line --index 1 --partial "redact_secrets: 1 inline credential(s) found"
  refute_output --partial "plainvalue99"
}

@test "lint findings go to stderr, stdout stays empty" {
  write_dirty_manifest
  run -1 --separate-stderr "$REDACT_SECRETS" lint job.yaml
  assert_equal "$output" ""
  [[ "$stderr" == *"env-literal HF_TOKEN"* ]]
}

@test "lint reads stdin with -" {
  run -1 bash -c "printf 'export NGC_KEY=abc123\n' | '$REDACT_SECRETS' lint -"
  assert_line --index 0 "<stdin>:1: credential: NGC_KEY (assignment)"
}

@test "lint checks shell scripts line by line" {
  printf '#!/bin/sh\necho hi\ncurl -H "Authorization: Bearer abcdef0123456789abcdef" https://x\n' >run.sh
  run -1 "$REDACT_SECRETS" lint run.sh
  assert_line --index 0 "run.sh:3: auth-header: Authorization (authorization-header)"
}

@test "lint refuses inline Secret data" {
  printf 'apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata:\n  token: dG9r\n' >secret.yaml
  run -1 "$REDACT_SECRETS" lint secret.yaml
  assert_line --index 0 "secret.yaml:5: secret-data: 0/data.token (inline-secret)"
}

@test "an unknown verb is a usage error (exit 2)" {
  run -2 "$REDACT_SECRETS" scan job.yaml
  assert_output "ERROR: unknown verb 'scan': use 'lint FILE...' or 'redact [FILE]'"
}

@test "an unreadable file is a usage error (exit 2)" {
  run -2 "$REDACT_SECRETS" lint missing.yaml
  assert_output "ERROR: cannot read missing.yaml: No such file or directory"
}

@test "no arguments prints usage and exits 2" {
  run -2 "$REDACT_SECRETS"
  assert_line --index 0 --partial "usage: redact_secrets lint FILE..."
}

@test "redact prints the file with values replaced" {
  write_dirty_manifest
  run -0 "$REDACT_SECRETS" redact job.yaml
  assert_line "          value: '***REDACTED***'"
  assert_line '          value: "false"'
  refute_output --partial "plainvalue99"
}

@test "redact reads stdin by default" {
  run -0 bash -c "printf 'git clone https://bob:pw77@host/r.git\n' | '$REDACT_SECRETS' redact"
  assert_output "git clone https://bob:***REDACTED***@host/r.git"
}

@test "the script works through a symlink on PATH" {
  mkdir bin
  ln -s "$(cd "$(dirname "$REDACT_SECRETS")" && pwd)/redact_secrets" bin/redact_secrets
  run -1 bash -c "printf 'HF_TOKEN=abc\n' | PATH='$PWD/bin':\$PATH redact_secrets lint -"
  assert_line --index 0 "<stdin>:1: credential: HF_TOKEN (assignment)"
}

@test "lint refuses a presigned URL hidden in an OSC 8 link of a manifest, and redact keeps the link" {
  printf '%s\n' 'apiVersion: batch/v1' 'kind: Job' 'metadata:' '  name: j' '  annotations:' \
    '    note: "\e]8;;https://b.s3.amazonaws.com/k?X-Amz-Signature=fakecanarysig0123456789\e\\model.bin\e]8;;\e\\"' >job.yaml
  run -1 "$REDACT_SECRETS" lint job.yaml
  assert_line --index 0 'job.yaml:6: presigned-url: 0/metadata.annotations.note (presigned-url X-Amz-Signature)'
  refute_output --partial "fakecanarysig"
  run -0 "$REDACT_SECRETS" redact job.yaml
  assert_output --partial 'X-Amz-Signature=***REDACTED***\e\\model.bin'
  refute_output --partial "fakecanarysig"
}

@test "lint refuses a password printf'd into --password-stdin and passes one read from a variable" {
  printf '%s\n' "printf '%s' 'FakeCanaryPw&1' | docker login -u bob --password-stdin registry.example.com" >login.sh
  run -1 "$REDACT_SECRETS" lint login.sh
  assert_line --index 0 'login.sh:1: credential: printf | --password-stdin (stdin-literal)'
  printf '%s\n' 'printf "%s" "$REGISTRY_PASSWORD" | docker login -u bob --password-stdin registry.example.com' >ok.sh
  run -0 "$REDACT_SECRETS" lint ok.sh
  assert_output ""
}
