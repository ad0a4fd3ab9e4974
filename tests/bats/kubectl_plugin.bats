#!/usr/bin/env bats
# The plugin driven through the real kubectl: discovery on PATH, `kubectl tao ...`, exit codes, completion.
# KUBECTL_TAO (the plugin under test) and KUBECTL (the kubectl binary) may be overridden to test other builds.

load common

KUBECTL_TAO="${KUBECTL_TAO:-$REPO/kubectl-tao}"
COMPLETE_TAO="${COMPLETE_TAO:-$REPO/scripts/kubectl_complete-tao}"
# shellcheck source=../../cluster/versions.env
. "$REPO/cluster/versions.env"
CACHED_KUBECTL="${KUBECTL_TAO_CACHE:-$HOME/.cache/kubectl-tao}/k8s-${KUBECTL_TAO_K8S_VERSION:-$K8S_VERSION}/bin/kubectl"
if [ -z "${KUBECTL:-}" ]; then
  if [ -x "$CACHED_KUBECTL" ]; then KUBECTL="$CACHED_KUBECTL"; else KUBECTL="$(command -v kubectl)"; fi
fi

setup() {
  export HOME="$BATS_TEST_TMPDIR/home"
  export TAO_STATE_DIR="$BATS_TEST_TMPDIR/state"
  export KUBECONFIG="$BATS_TEST_TMPDIR/kubeconfig"
  unset TAO_K8S_NAMESPACE TAO_K8S_CONTEXT KUBECTL_TAO_KUBECTL KUBECTL_TAO_TRACE
  mkdir -p "$HOME" "$BATS_TEST_TMPDIR/bin"
  ln -s "$KUBECTL_TAO" "$BATS_TEST_TMPDIR/bin/kubectl-tao"
  ln -s "$COMPLETE_TAO" "$BATS_TEST_TMPDIR/bin/kubectl_complete-tao"
  # Only this test's plugin may be on PATH: another kubectl-tao (a venv console script) would shadow it.
  local dir clean=""
  local IFS=:
  for dir in $PATH; do
    [ -n "$dir" ] && [ ! -e "$dir/kubectl-tao" ] && clean="${clean:+$clean:}$dir"
  done
  export PATH="$BATS_TEST_TMPDIR/bin:$clean"
  # A cluster nobody listens on: port 1 on loopback refuses at once.
  cat >"$KUBECONFIG" <<'EOF'
apiVersion: v1
kind: Config
current-context: nowhere
clusters:
- name: nowhere
  cluster: {server: "https://127.0.0.1:1"}
contexts:
- name: nowhere
  context: {cluster: nowhere, user: nobody, namespace: team-a}
users:
- name: nobody
  user: {token: placeholder}
EOF
  cd "$BATS_TEST_TMPDIR" || return 1
}

@test "kubectl plugin list finds kubectl-tao on PATH" {
  run -0 "$KUBECTL" plugin list
  assert_output --partial "$BATS_TEST_TMPDIR/bin/kubectl-tao"
  refute_output --partial "kubectl_complete-tao"
}

@test "kubectl tao --help reads like kubectl's own help" {
  run -0 "$KUBECTL" tao --help
  assert_line --index 0 "Usage: kubectl tao [OPTIONS] COMMAND [ARGS]..."
  assert_output --partial "Precedence: flag > env > kubeconfig."
  assert_output --regexp $'\n  fit +'
  assert_output --regexp $'\n  explain +'
}

@test "kubectl tao with no arguments prints the help and exits 0" {
  run -0 "$KUBECTL" tao
  assert_line --index 0 "Usage: kubectl tao [OPTIONS] COMMAND [ARGS]..."
}

@test "kubectl tao version prints the plugin version on stdout" {
  version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$REPO/pyproject.toml")"
  run --separate-stderr -0 "$KUBECTL" tao version
  assert_output "kubectl-tao $version"
  [ -z "$stderr" ]
  run -0 "$KUBECTL" tao version -o json
  assert_output --partial "\"clientVersion\": \"$version\""
}

@test "kubectl tao render takes -n after the plugin name" {
  run --separate-stderr -0 "$KUBECTL" tao render --image busybox --command 'echo hi' --gpus 0 --pvc data -n lab -o yaml
  assert_line "kind: Job"
  assert_line "  namespace: lab"
  assert_line --partial "claimName: data"
}

@test "kubectl reads render -o yaml back as written: YAML 1.1 look-alikes stay strings" {
  run --separate-stderr -0 "$KUBECTL" tao render --image busybox --command 'echo hi' --gpus 0 --pvc data \
    --annotation a=yes --annotation b=y --annotation c=0123 --annotation d=on --label n=off -o yaml
  echo "$output" >job.yaml
  run --separate-stderr -0 "$KUBECTL" label --local -f job.yaml -o json checked=true
  run python3 -c 'import json,sys; m=json.loads(sys.argv[1])["spec"]["template"]["metadata"]; print(m["annotations"]["a"], m["annotations"]["b"], m["annotations"]["c"], m["annotations"]["d"], m["labels"]["n"])' "$output"
  assert_output "yes y 0123 on off"
}

@test "TAO_K8S_NAMESPACE reaches kubectl tao render" {
  TAO_K8S_NAMESPACE=from-env run -0 "$KUBECTL" tao render --image busybox --command 'echo hi' --gpus 0 --pvc data
  assert_line "  namespace: from-env"
}

@test "kubectl refuses global flags before the plugin name" {
  run ! "$KUBECTL" -n team-a tao version
  assert_output --partial "flags cannot be placed before plugin name"
}

@test "a usage error is one line on stderr with exit 2" {
  run --separate-stderr -2 "$KUBECTL" tao version --bogus
  assert_output ""
  [ "$stderr" = "error: No such option '--bogus'. (see 'kubectl tao version --help')" ]
}

@test "an unreachable cluster is exit 3 with kubectl's reason" {
  run --separate-stderr -3 "$KUBECTL" tao fit --gpus 1 --request-timeout 5s
  assert_output ""
  [[ "$stderr" == "error: cluster unreachable: "*"(check --kubeconfig/\$KUBECONFIG, --context, and that the API server is up)" ]]
}

@test "--kubeconfig and --context after the plugin name reach kubectl" {
  run --separate-stderr -2 "$KUBECTL" tao fit --gpus 1 --kubeconfig "$KUBECONFIG" --context missing
  [[ "$stderr" == "error: --context: "*"missing"* ]]
}

@test "an unknown --context is one line that says error once" {
  run --separate-stderr -2 "$KUBECTL" tao fit --gpus 1 --context missing
  assert_output ""
  [ "$stderr" = "error: --context: context 'missing' is not in the kubeconfig; see \`kubectl config get-contexts\`" ]
}

@test "a --request-timeout kubectl cannot read is bad input before any kubectl call" {
  run --separate-stderr -2 "$KUBECTL" tao fit --gpus 1 --request-timeout abc
  assert_output ""
  [ "$stderr" = "error: --request-timeout is not a timeout kubectl reads: give whole seconds (0 = no limit) or a duration such as 30s, 2m or 1h" ]
}

@test "list with a running record and no cluster exits 3 and points at --no-live" {
  run -0 "$KUBECTL" tao record open --image busybox:1.36 --network-arch dino --action train --storage-tier A \
    --results-root /workspace/results
  local id="$output"
  run -0 "$KUBECTL" tao record mark "$id" --state RUNNING --backend-ref tao-jobs/job-1
  run --separate-stderr -3 "$KUBECTL" tao list --request-timeout 5s
  assert_output ""
  [[ "$stderr" == "error: cluster unreachable: "*"; \`kubectl tao list --no-live\` shows the recorded states" ]]
  [[ "$stderr" != *"error:"*"error:"* ]]
  run --separate-stderr -0 "$KUBECTL" tao list --no-live
  assert_line --partial "$id"
}

@test "a mistyped verb gets the closest verb" {
  run --separate-stderr -2 "$KUBECTL" tao rendr
  assert_output ""
  [ "$stderr" = "error: No such command 'rendr'. Did you mean 'render'? (see 'kubectl tao --help')" ]
}

@test "kubectl __complete tao completes verbs through kubectl_complete-tao" {
  run --separate-stderr -0 "$KUBECTL" __complete tao su
  assert_line --index 0 "submit"
  assert_line --index 1 ":4"
}

@test "kubectl __complete tao status lists record ids from the record store" {
  mkdir -p "$TAO_STATE_DIR/jobs"
  echo '{}' >"$TAO_STATE_DIR/jobs/dino-train-3f9a1c.json"
  run --separate-stderr -0 "$KUBECTL" __complete tao status ''
  assert_line --index 0 "dino-train-3f9a1c"
  assert_line --index 1 ":4"
}

@test "kubectl __complete tao completes the flags of a verb" {
  run --separate-stderr -0 "$KUBECTL" __complete tao fit --gpu
  assert_line "--gpus"
  assert_line "--gpu-product"
  refute_line "--watch"
}

@test "kubectl tao --version prints what kubectl tao version prints" {
  run --separate-stderr -0 "$KUBECTL" tao version
  local expected="$output"
  run --separate-stderr -0 "$KUBECTL" tao --version
  assert_output "$expected"
  [ -z "$stderr" ]
}

@test "fish: kubectl's own completion completes kubectl tao through kubectl_complete-tao" {
  command -v fish >/dev/null || fail "fish is not installed: run scripts/install-test-deps"
  ln -s "$KUBECTL" "$BATS_TEST_TMPDIR/bin/kubectl"
  mkdir -p "$TAO_STATE_DIR/jobs"
  echo '{}' >"$TAO_STATE_DIR/jobs/dino-train-3f9a1c.json"
  run -0 fish --no-config -c 'kubectl completion fish | source; complete -C "kubectl tao su"; complete -C "kubectl tao status "'
  assert_line --index 0 --regexp $'^submit(\t.*)?$'
  assert_line --index 1 --regexp $'^dino-train-3f9a1c(\t.*)?$'
}

@test "fish: kubectl-tao completion fish completes kubectl-tao" {
  command -v fish >/dev/null || fail "fish is not installed: run scripts/install-test-deps"
  run -0 fish --no-config -c 'kubectl-tao completion fish | source; complete -C "kubectl-tao fit --output=j"'
  assert_output "--output=json"
}
