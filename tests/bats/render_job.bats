#!/usr/bin/env bats
# scripts/render_job: single-pod and multi-node manifests from flags, driven through the real script.

load common

RENDER_JOB="${RENDER_JOB:-$REPO/scripts/render_job}"
IMAGE=nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt

setup() {
  in_test_home
  unset TAO_K8S_NAMESPACE
}

@test "one node renders one Job on the PVC" {
  "$RENDER_JOB" --record-id dino-train-1a2b3c --image "$IMAGE" --command 'dino train -e /workspace/s.yaml' \
    --gpus 8 --pvc tao-data >job.yaml
  run query job.yaml '[d["kind"] for d in docs], docs[0]["metadata"]["name"], docs[0]["spec"]["template"]["spec"]["containers"][0]["resources"]'
  assert_output "(['Job'], 'dino-train-1a2b3c', {'limits': {'nvidia.com/gpu': '8'}})"
}

@test "several nodes render the headless Service, then the Indexed Job" {
  "$RENDER_JOB" --name ddp --image "$IMAGE" --command 'train.py --epochs 3' --gpus 4 --nodes 2 \
    --launcher torchrun --pvc shared --nccl-socket-ifname eth0 >job.yaml 2>warn.txt
  run query job.yaml '[d["kind"] for d in docs], docs[1]["spec"]["completionMode"], docs[1]["spec"]["completions"]'
  assert_output "(['Service', 'Job'], 'Indexed', 2)"
  run query job.yaml 'docs[1]["spec"]["template"]["spec"]["containers"][0]["args"][3:]'
  assert_output "['torchrun', 'train.py', '--epochs', '3']"
  run cat warn.txt
  assert_output --partial "WARN: multi-node: every pod mounts PVC 'shared'; it must be ReadWriteMany"
}

@test "-o json prints a List for several objects" {
  run --separate-stderr -0 "$RENDER_JOB" --name ddp --image "$IMAGE" --command x --nodes 2 --pvc shared -o json
  run python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["kind"], [i["kind"] for i in d["items"]])' "$output"
  assert_output "List ['Service', 'Job']"
}

@test "warnings go to stderr, the manifest to stdout" {
  run --separate-stderr -0 "$RENDER_JOB" --name smoke --image busybox:1.36 --command 'echo hi' --gpus 0 --pvc d
  assert_equal "$stderr" "WARN: gpus=0: a lifecycle-only run; GPU scheduling is not exercised"
  assert_line --index 0 -- "apiVersion: batch/v1"
}

@test "tier C renders the fetch init container and warns about the held GPU" {
  run --separate-stderr -0 "$RENDER_JOB" --name small --image busybox:1.36 --command 'echo hi' --storage-tier C \
    --s3-input s3://bkt/data/ --s3-output s3://bkt/results --env-secret tao-creds-small
  echo "$output" >job.yaml
  [[ "$stderr" == *"WARN: storage tier C: the pod holds its nvidia.com/gpu while fetch-inputs downloads"* ]]
  run query job.yaml 'docs[0]["spec"]["template"]["spec"]["initContainers"][0]["args"][1:]'
  assert_output "['fetch-inputs', 's3://bkt/data/']"
}

@test "the namespace comes from TAO_K8S_NAMESPACE unless -n is given" {
  TAO_K8S_NAMESPACE=tao-jobs "$RENDER_JOB" --name a --image busybox --command x --pvc d >job.yaml
  run query job.yaml 'docs[0]["metadata"]["namespace"]'
  assert_output "tao-jobs"
  TAO_K8S_NAMESPACE=tao-jobs "$RENDER_JOB" --name a --image busybox --command x --pvc d -n other >job.yaml
  run query job.yaml 'docs[0]["metadata"]["namespace"]'
  assert_output "other"
}

@test "annotations, labels, selectors, tolerations and the queue reach the manifest" {
  "$RENDER_JOB" --name a --image busybox --command x --pvc d --annotation kwok.x-k8s.io/outcome=oomkilled \
    --label team=vision --node-selector nvidia.com/gpu.product=H100 --toleration nvidia.com/gpu:NoSchedule \
    --queue team-a --no-ttl >job.yaml
  run query job.yaml 'docs[0]["spec"]["template"]["metadata"]["annotations"]["kwok.x-k8s.io/outcome"], docs[0]["metadata"]["labels"]["team"], docs[0]["spec"]["suspend"], "ttlSecondsAfterFinished" in docs[0]["spec"]'
  assert_output "('oomkilled', 'vision', True, False)"
}

@test "a command full of YAML and shell syntax stays one argument of one document" {
  command=$'yes: no\n---\nkind: Secret\n$(rm -rf /) `id` "q" \'s\''
  # The kubelet would expand $(...): the manifest carries it as $$(...), which the container gets back as $(...).
  escaped=$'yes: no\n---\nkind: Secret\n$$(rm -rf /) `id` "q" \'s\''
  "$RENDER_JOB" --name a --image busybox --command "$command" --pvc d >job.yaml
  run python3 -c 'import sys, yaml; docs=[d for d in yaml.safe_load_all(open("job.yaml")) if d is not None]; print(len(docs), docs[0]["spec"]["template"]["spec"]["containers"][0]["args"] == [sys.argv[1]])' "$escaped"
  assert_output "1 True"
}

@test "missing required flags exit 2" {
  run --separate-stderr -2 "$RENDER_JOB" --name a
  assert_equal "$stderr" "ERROR: the following arguments are required: --image, --command"
}

@test "neither name nor record id exits 2" {
  run --separate-stderr -2 "$RENDER_JOB" --image busybox --command x --pvc d
  assert_equal "$stderr" "ERROR: give --name (the Kubernetes Job name) or --record-id (the job-record id)"
  assert_output ""
}

@test "tier A without --pvc exits 2 with the fix" {
  run --separate-stderr -2 "$RENDER_JOB" --name a --image busybox --command x
  assert_equal "$stderr" "ERROR: storage tier A needs --pvc: the name of a bound PersistentVolumeClaim holding the data"
}

@test "a results dir off the mounted volume exits 2" {
  run --separate-stderr -2 "$RENDER_JOB" --name a --image busybox --command x --pvc d --results-dir /tmp/out
  assert_equal "$stderr" "ERROR: --results-dir /tmp/out: must be on the mounted volume (under --mount-path /workspace) or an s3:// prefix, so results survive the pod"
}

@test "tier C without an output exits 2" {
  run --separate-stderr -2 "$RENDER_JOB" --name a --image busybox --command x --storage-tier C
  assert_equal "$stderr" "ERROR: --storage-tier C needs --s3-output s3://BUCKET/PREFIX (or --results-dir s3://...)"
}

@test "a multi-node name that starts with a digit exits 2" {
  run --separate-stderr -2 "$RENDER_JOB" --name 1job --image busybox --command x --pvc d --nodes 2
  assert_equal "$stderr" "ERROR: job name must start with a letter: the headless Service of a multi-node job is named after the job, and Service names are RFC 1035 labels"
}

@test "a bad annotation exits 2" {
  run --separate-stderr -2 "$RENDER_JOB" --name a --image busybox --command x --pvc d --annotation novalue
  assert_equal "$stderr" "ERROR: annotation #1 must look like KEY=VALUE (it has no '=' or no KEY)"
}

@test "an unknown launcher is refused by the flag parser" {
  run --separate-stderr -2 "$RENDER_JOB" --name a --image busybox --command x --pvc d --launcher mpirun
  assert_equal "$stderr" "ERROR: argument --launcher: invalid choice: 'mpirun' (choose from 'tao', 'torchrun')"
}
