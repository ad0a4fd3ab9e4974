#!/usr/bin/env bats
# scripts/render_action_job: name, materialize-config and render, driven through the real script.

load common

RENDER_ACTION_JOB="${RENDER_ACTION_JOB:-$REPO/scripts/render_action_job}"
FIXTURES="$BATS_TEST_DIRNAME/../fixtures/action"

setup() {
  in_test_home
  unset TAO_K8S_NAMESPACE
}

render_args() {
  "$RENDER_ACTION_JOB" render --request "$FIXTURES/request-args.json" --staging-map "$FIXTURES/staging-args.json" \
    --job-id dino-train-1a2b3c --pvc-claim tao-pvc --credential-secret tao-creds-dino "$@"
}

# stage_config REQUEST: materialize its config and write staging.json covering mounts and config.
stage_config() {
  config=$("$RENDER_ACTION_JOB" materialize-config --request "$1" --output-dir "$BATS_TEST_TMPDIR/configs")
  python3 - "$1" "$config" <<'PY'
import json, sys
request = json.load(open(sys.argv[1]))
sources = [{"source": m["source"], "sub_path": f"s{i}"} for i, m in enumerate(request["mounts"])]
sources.append({"source": sys.argv[2], "sub_path": "config"})
json.dump({"schema_version": "1", "sources": sources}, open("staging.json", "w"))
PY
}

@test "name keeps a safe id" {
  run -0 "$RENDER_ACTION_JOB" name --job-id dino-train-1a2b3c
  assert_output "dino-train-1a2b3c"
}

@test "name hashes an id that is not a DNS label" {
  run -0 "$RENDER_ACTION_JOB" name --job-id Dino_Train-1A2B3C
  assert_output --regexp '^dino-train-1a2b3c-[0-9a-f]{10}$'
}

@test "without a verb it exits 2 with usage on stderr" {
  run --separate-stderr -2 "$RENDER_ACTION_JOB"
  assert_equal "$stderr" "ERROR: the following arguments are required: {name,materialize-config,render}"
  assert_output ""
}

@test "a missing required flag exits 2" {
  run --separate-stderr -2 "$RENDER_ACTION_JOB" name
  assert_equal "$stderr" "ERROR: the following arguments are required: --job-id"
}

@test "render prints one Job with native argv, subPath mounts and secretKeyRefs" {
  render_args >job.yaml
  run query job.yaml 'len(docs), docs[0]["kind"], docs[0]["metadata"]["name"], docs[0]["metadata"]["namespace"]'
  assert_output "(1, 'Job', 'dino-train-1a2b3c', 'default')"
  run query job.yaml 'docs[0]["spec"]["template"]["spec"]["containers"][0]["command"]'
  assert_output "['dino', 'train']"
  run query job.yaml '[m.get("subPath") for m in docs[0]["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]]'
  assert_output "[None, 'jobs/run-1/coco', 'jobs/run-1/coco', 'jobs/run-1/specs', 'jobs/run-1/results']"
  run query job.yaml '[e["valueFrom"]["secretKeyRef"]["key"] for e in docs[0]["spec"]["template"]["spec"]["containers"][0]["env"] if "valueFrom" in e]'
  assert_output "['HF_TOKEN', 'AWS_ACCESS_KEY_ID']"
}

@test "render takes the namespace from TAO_K8S_NAMESPACE, and --namespace wins" {
  TAO_K8S_NAMESPACE=tao-jobs render_args >job.yaml
  run query job.yaml 'docs[0]["metadata"]["namespace"]'
  assert_output "tao-jobs"
  TAO_K8S_NAMESPACE=tao-jobs render_args --namespace other >job.yaml
  run query job.yaml 'docs[0]["metadata"]["namespace"]'
  assert_output "other"
}

@test "render passes ttl, shm size and image pull secret through" {
  render_args --ttl-seconds 0 --shm-size 8Gi --image-pull-secret ngc-pull >job.yaml
  run query job.yaml 'docs[0]["spec"]["ttlSecondsAfterFinished"], docs[0]["spec"]["template"]["spec"]["imagePullSecrets"], docs[0]["spec"]["template"]["spec"]["volumes"][0]["emptyDir"]["sizeLimit"]'
  assert_output "(0, [{'name': 'ngc-pull'}], '8Gi')"
}

@test "a bad namespace exits 2 naming the field, and prints no manifest" {
  run --separate-stderr -2 render_args --namespace Tao
  assert_equal "$stderr" "ERROR: namespace is not a valid DNS label: character 1 (an upper-case letter): use at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit"
  assert_output ""
}

@test "a ttl that is not a number exits 2" {
  run --separate-stderr -2 render_args --ttl-seconds soon
  assert_equal "$stderr" "ERROR: argument --ttl-seconds: not a whole number: 'soon'"
}

@test "a ttl out of range exits 2" {
  run --separate-stderr -2 render_args --ttl-seconds 604801
  assert_equal "$stderr" "ERROR: ttl seconds must be a whole number from 0 to 604800, got 604801"
}

@test "forwarded credentials without --credential-secret exit 2" {
  run --separate-stderr -2 "$RENDER_ACTION_JOB" render --request "$FIXTURES/request-args.json" \
    --staging-map "$FIXTURES/staging-args.json" --job-id j --pvc-claim p
  assert_equal "$stderr" "ERROR: forward_env names credentials but no --credential-secret was given to hold them"
}

@test "a schema error names the JSON path" {
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r["platform"]="slurm"; json.dump(r, open("r.json","w"))' "$FIXTURES/request-args.json"
  run --separate-stderr -2 "$RENDER_ACTION_JOB" render --request r.json --staging-map "$FIXTURES/staging-args.json" \
    --job-id j --pvc-claim p --credential-secret s
  assert_equal "$stderr" "ERROR: action request \$.platform: 'kubernetes' was expected"
}

@test "an unreadable or malformed request exits 2" {
  run --separate-stderr -2 "$RENDER_ACTION_JOB" materialize-config --request missing.json --output-dir out
  assert_equal "$stderr" "ERROR: cannot read action request missing.json: No such file or directory"
  echo '[1]' >list.json
  run --separate-stderr -2 "$RENDER_ACTION_JOB" materialize-config --request list.json --output-dir out
  assert_equal "$stderr" "ERROR: action request list.json must hold a JSON object at the top level"
}

@test "materialize-config prints a content-addressed path, and is idempotent" {
  run -0 "$RENDER_ACTION_JOB" materialize-config --request "$FIXTURES/request-config.json" --output-dir out
  assert_output --regexp "^$BATS_TEST_TMPDIR/out/tao-action-config-[0-9a-f]{64}\.yaml$"
  first="$output"
  run -0 "$RENDER_ACTION_JOB" materialize-config --request "$FIXTURES/request-config.json" --output-dir out
  assert_output "$first"
}

@test "materialize-config refuses mode=args" {
  run --separate-stderr -2 "$RENDER_ACTION_JOB" materialize-config --request "$FIXTURES/request-args.json" --output-dir out
  assert_equal "$stderr" "ERROR: materialize-config needs spec_bundle.mode=config; mode=args has no config file"
}

@test "config mode renders a read-only config mount named in argv" {
  stage_config "$FIXTURES/request-config.json"
  run -0 "$RENDER_ACTION_JOB" render --request "$FIXTURES/request-config.json" --staging-map staging.json \
    --job-id cfg-1 --pvc-claim p --config-source "$config"
  echo "$output" >job.yaml
  run query job.yaml 'docs[0]["spec"]["template"]["spec"]["containers"][0]["command"][-1] == docs[0]["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][-1]["mountPath"], docs[0]["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][-1]["readOnly"]'
  assert_output "(True, True)"
}

@test "config mode shell script runs verbatim under /bin/sh -c" {
  stage_config "$FIXTURES/request-config-shell.json"
  "$RENDER_ACTION_JOB" render --request "$FIXTURES/request-config-shell.json" --staging-map staging.json \
    --job-id cfg-2 --pvc-claim p --config-source "$config" >job.yaml
  run query job.yaml 'docs[0]["spec"]["template"]["spec"]["containers"][0]["command"], docs[0]["spec"]["template"]["spec"]["containers"][0]["args"][1]'
  assert_output "(['/bin/sh', '-c'], 'tao-action')"
}

@test "config mode without --config-source exits 2 saying what to do" {
  stage_config "$FIXTURES/request-config.json"
  run --separate-stderr -2 "$RENDER_ACTION_JOB" render --request "$FIXTURES/request-config.json" --staging-map staging.json \
    --job-id cfg-1 --pvc-claim p
  assert_equal "$stderr" "ERROR: spec_bundle.mode=config needs --config-source: run materialize-config, stage the file it prints, then render with --config-source <that file>"
}

@test "a tampered config file is refused" {
  stage_config "$FIXTURES/request-config.json"
  chmod u+w "$config"
  echo '{}' >"$config"
  run --separate-stderr -2 "$RENDER_ACTION_JOB" render --request "$FIXTURES/request-config.json" --staging-map staging.json \
    --job-id cfg-1 --pvc-claim p --config-source "$config"
  assert_equal "$stderr" "ERROR: config source $config does not match spec_bundle.spec; rerun materialize-config and stage the file it prints"
}

@test "the script works through a symlink on PATH" {
  mkdir bin
  ln -s "$(realpath "$RENDER_ACTION_JOB")" bin/render_action_job
  PATH="$BATS_TEST_TMPDIR/bin:$PATH" run -0 render_action_job name --job-id abc
  assert_output "abc"
}
