"""`results` and `results pull` of a storage tier C job: its S3 prefix read in the helper pod by a second container
(the job's S3 client image, the job's credential Secret as its environment), the files handed to the claim path's
hashing and tar through the pod's emptyDir. The pod is played by this machine's shell (support/shell_pod.py) and
the S3 client by a stand-in `aws` over a local folder (one folder per bucket), which speaks the two calls the
helper makes: `s3api list-objects-v2 --output json` and `s3 cp [--recursive]`."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from support.shell_pod import ShellPod

from kubectl_tao.core.errors import TaoError, UsageError
from kubectl_tao.k8s.kubectl import ClusterOptions, Kubectl
from kubectl_tao.store.jobrecord import JobRecord, K8sRecord
from kubectl_tao.volumes import results

STAND_IN_AWS = r'''#!/usr/bin/env python3
"""A stand-in for the two AWS CLI calls of the tier C helper, over $FAKE_S3/<bucket>/<key>."""
import datetime, json, os, shutil, sys

root = os.environ["FAKE_S3"]
if not os.environ.get("AWS_SECRET_ACCESS_KEY"):
    sys.exit("Unable to locate credentials. You can configure credentials by running \"aws configure\".")
args = sys.argv[1:]
with open(os.path.join(root, ".calls"), "a") as log:
    log.write(json.dumps(args) + "\n")
if args[:2] == ["s3api", "list-objects-v2"]:
    bucket, prefix = args[args.index("--bucket") + 1], args[args.index("--prefix") + 1]
    items = []
    for folder, _, files in os.walk(os.path.join(root, bucket)):
        for name in files:
            path = os.path.join(folder, name)
            key = os.path.relpath(path, os.path.join(root, bucket))
            if key.startswith(prefix):
                when = datetime.datetime.fromtimestamp(os.stat(path).st_mtime, datetime.timezone.utc)
                items.append({"Key": key, "LastModified": when.isoformat(), "Size": os.path.getsize(path)})
    print(json.dumps({"Contents": sorted(items, key=lambda i: i["Key"])} if items else {}))
elif args[:2] == ["s3", "cp"]:
    source, dest = [a for a in args[2:] if not a.startswith("--")]
    bucket, _, key = source[len("s3://"):].partition("/")
    if "--recursive" in args:
        shutil.copytree(os.path.join(root, bucket, key), dest, dirs_exist_ok=True)
    else:
        if not os.path.exists(os.path.join(root, bucket, key)):
            sys.exit(f"fatal error: An error occurred (404) when calling the HeadObject operation: "
                     f"Key \"{key}\" does not exist")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy(os.path.join(root, bucket, key), dest)
else:
    sys.exit(f"unexpected: {args}")
'''
SECRET_VALUE = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
UID = "0b8f7c1e-1111-4222-8333-444455556666"
BOTH_RUNNING = {"status": {"phase": "Running", "containerStatuses": [
    {"name": "helper", "state": {"running": {}}}, {"name": "s3", "state": {"running": {}}}]}}


@pytest.fixture
def s3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The store (a folder per bucket), the stand-in `aws` first on PATH, the pod's emptyDir under tmp_path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    aws = bin_dir / "aws"
    aws.write_text(STAND_IN_AWS)
    aws.chmod(aws.stat().st_mode | stat.S_IXUSR)
    store = tmp_path / "store"
    (store / "bucket" / "out" / "job-1" / "train").mkdir(parents=True)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_S3", str(store))
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_VALUE)  # what the job's Secret gives the S3 container
    pod_dir = tmp_path / "pod"
    monkeypatch.setattr(results, "S3_PULL_DIR", str(pod_dir / "pull"))
    monkeypatch.setattr(results, "S3_STATUS_DIR", str(pod_dir / "status"))
    return store / "bucket" / "out" / "job-1"


def _source(**changed: Any) -> results.ResultsSource:
    source = results.ResultsSource("job-1", "ns", "", results.S3_DIR, results.S3_PULL_DIR, {}, [],
                                   s3="s3://bucket/out/job-1/", secret="tao-creds-job-1", tools_image="aws-cli:2")
    return source.replaced(**changed)


def _pod(fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch) -> ShellPod:
    fake_kubectl.on("get", "secret", stdout="secret/tao-creds-job-1\n")
    fake_kubectl.on("create", stdout=f"Pod tao-volume-x {UID}\n")
    fake_kubectl.on("get", "pod", data=BOTH_RUNNING)
    fake_kubectl.on("get", "events", data={"items": []})
    fake_kubectl.on("delete", "--raw")
    pod = ShellPod()
    monkeypatch.setattr(Kubectl, "pipe", lambda _kc, args, **kwargs: pod.pipe(args, **kwargs))
    return pod


class _Tracked:
    def __init__(self) -> None:
        self.id, self.namespace = "job-1", "ns"
        self.job = JobRecord.from_stored({"results_dir": "s3://bucket/out/job-1"})
        self.k8s = K8sRecord.from_stored({"secret_names": ["tao-creds-job-1"], "request": {"flags": {
            "storage_tier": "C", "s3_tools_image": "mirror.example/aws-cli:2", "gpus": 1,
            "node_selector": ["pool=a"]}}})


def test_a_tier_c_record_reads_its_prefix_with_its_secret_and_its_s3_client_image() -> None:
    source = results.source_of(_Tracked())
    assert (source.s3, source.secret, source.tools_image) == (
        "s3://bucket/out/job-1/", "tao-creds-job-1", "mirror.example/aws-cli:2")
    assert source.node_selector == {"pool": "a"} and source.where == "s3://bucket/out/job-1/ (storage tier C)"
    pod = results.s3_manifest(source, "busybox:1.37.0")
    helper, s3 = pod["spec"]["containers"]
    assert s3["envFrom"] == [{"secretRef": {"name": "tao-creds-job-1", "optional": False}}]
    assert "envFrom" not in helper and s3["image"] == "mirror.example/aws-cli:2"
    assert {"name": "volume", "mountPath": results.S3_DIR, "readOnly": True} in helper["volumeMounts"]
    assert {"name": "volume", "emptyDir": {}} in pod["spec"]["volumes"]
    assert not any("persistentVolumeClaim" in v for v in pod["spec"]["volumes"])
    for container in (helper, s3):  # the volume helper's least privilege, both containers
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["spec"]["automountServiceAccountToken"] is False and pod["spec"]["securityContext"]["runAsNonRoot"]
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "volume-helper"
    assert "tao-creds" not in json.dumps(helper) and SECRET_VALUE not in json.dumps(pod)


def test_results_lists_the_prefix_as_a_tree_with_the_status_summary(
    s3: Path, fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pod = _pod(fake_kubectl, monkeypatch)
    (s3 / "train" / "model_epoch_2.pth").write_bytes(b"a" * 300)
    (s3 / "train" / "model_epoch_10.pth").write_bytes(b"b" * 200)
    (s3 / "train" / "status.json").write_text('{"status": "SUCCESS", "epoch": 10, "kpi": {"loss": 0.1}}\n')
    (s3.parent / "job-10").mkdir()
    (s3.parent / "job-10" / "other.txt").write_text("another job's")  # a neighbour sharing the key prefix "job-1"
    listing = results.list_results(Kubectl(ClusterOptions()), _source(), image="busybox:1.37.0", timeout=5)
    assert [e.path for e in listing.entries] == ["train/status.json", "train/model_epoch_2.pth",
                                                 "train/model_epoch_10.pth"]
    assert [(f.path, f.size, f.files) for f in listing.folders] == [("train", 300 + 200 + 57, 3)]
    assert '"epoch": 10' in listing.statuses["train/status.json"]
    # the credentials never reach a command line: only the bucket, the prefix and a directory do
    assert all(SECRET_VALUE not in " ".join(args) for _, args, _ in pod.calls)
    assert all(" ".join(c.argv).count(SECRET_VALUE) == 0 for c in fake_kubectl.calls)


def test_pull_downloads_in_the_pod_then_skips_and_verifies_as_the_claim_path(
    s3: Path, fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _pod(fake_kubectl, monkeypatch)
    (s3 / "train" / "model_epoch_1.pth").write_bytes(os.urandom(5000))
    (s3 / "train" / "model_latest.pth").write_bytes(b"latest")  # uploaded as a file: S3 has no links
    (s3 / "log.txt").write_text("log")
    dest = tmp_path / "out"
    kc = Kubectl(ClusterOptions())
    pulled = results.pull(kc, _source(), paths=[], dest=str(dest), latest=False, image="busybox:1.37.0", timeout=5)
    assert (pulled.pulled, pulled.skipped, pulled.verified) == (3, 0, 3)
    assert (dest / "train" / "model_epoch_1.pth").read_bytes() == (s3 / "train" / "model_epoch_1.pth").read_bytes()
    again = results.pull(kc, _source(), paths=[], dest=str(dest), latest=False, image="busybox:1.37.0", timeout=5)
    assert (again.pulled, again.skipped) == (0, 3)  # resumed: every file here already, by size and SHA-256
    one = results.pull(kc, _source(), paths=["log.txt"], dest=str(tmp_path / "one"), latest=False,
                       image="busybox:1.37.0", timeout=5)
    assert one.pulled == 1 and sorted(p.name for p in (tmp_path / "one").rglob("*")) == ["log.txt"]
    calls = [json.loads(line) for line in (s3.parents[2] / ".calls").read_text().splitlines()]
    cps = [c for c in calls if c[:2] == ["s3", "cp"]]
    assert "--recursive" in cps[0] and cps[-1][-2:] == ["s3://bucket/out/job-1/log.txt",
                                                        f"{results.S3_PULL_DIR}/log.txt"]


def test_a_prefix_with_nothing_under_it_fails_in_one_line(
    s3: Path, fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pod(fake_kubectl, monkeypatch)
    with pytest.raises(TaoError, match=r"nothing under its S3 results prefix s3://bucket/out/job-1/ \(yet\)") as got:
        results.list_results(Kubectl(ClusterOptions()), _source(), image="busybox:1.37.0", timeout=5)
    assert got.value.exit_code == 1
    assert [c.argv[:2] for c in fake_kubectl.calls if c.argv[0] == "delete"] == [["delete", "--raw"]]


def test_refused_credentials_fail_with_the_s3_clients_line_and_no_secret(
    s3: Path, fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pod(fake_kubectl, monkeypatch)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(TaoError, match=r"listing s3://bucket/out/job-1/ failed: Unable to locate credentials"):
        results.list_results(Kubectl(ClusterOptions()), _source(), image="busybox:1.37.0", timeout=5)


def test_a_secret_gone_with_its_job_is_refused_with_exit_2_before_any_pod(fake_kubectl: Any) -> None:
    fake_kubectl.on("get", "secret", stderr='Error from server (NotFound): secrets "tao-creds-job-1" not found',
                    rc=1)
    with pytest.raises(UsageError, match=r"its credential Secret ns/tao-creds-job-1 is gone") as got:
        results.list_results(Kubectl(ClusterOptions()), _source(), image="busybox:1.37.0", timeout=5)
    assert got.value.exit_code == 2
    assert "again with --env-file FILE ('-' = stdin), or name an existing Secret with --env-secret NAME" in str(
        got.value)
    assert not [c for c in fake_kubectl.calls if c.argv[0] == "create"]
    (read,) = [c.argv for c in fake_kubectl.calls if c.argv[:2] == ["get", "secret"] or "secret" in c.argv]
    assert read[-2:] == ["-o", "name"]  # its name only: the Secret's data is never read


def test_an_s3_client_image_that_cannot_start_is_named(fake_kubectl: Any) -> None:
    fake_kubectl.on("get", "secret", stdout="secret/tao-creds-job-1\n")
    fake_kubectl.on("create", stdout=f"Pod tao-volume-x {UID}\n")
    fake_kubectl.on("get", "pod", data={"status": {"phase": "Pending", "containerStatuses": [
        {"name": "helper", "state": {"running": {}}},
        {"name": "s3", "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}}}]}})
    fake_kubectl.on("get", "events", data={"items": []})
    fake_kubectl.on("delete", "--raw")
    with pytest.raises(TaoError, match=r"could not start: ImagePullBackOff: Back-off pulling image; fix it "
                                       r"\(--helper-image, or the job's --s3-tools-image aws-cli:2, --node-selector"):
        results.list_results(Kubectl(ClusterOptions()), _source(), image="busybox:1.37.0", timeout=5)
    assert [c.argv[:2] for c in fake_kubectl.calls if c.argv[0] == "delete"] == [["delete", "--raw"]]


def test_tensorboard_of_a_tier_c_job_is_refused_with_exit_2(fake_kubectl: Any) -> None:
    with pytest.raises(UsageError, match=r"results are in S3 .*`kubectl tao results pull job-1`") as got:
        results.tensorboard(Kubectl(ClusterOptions()), _source(), image="img:1", port=6006, timeout=5,
                            on_ready=lambda _u: None, on_output=lambda _d: None)
    assert got.value.exit_code == 2


def test_an_s3_container_that_ends_while_the_helper_runs_is_named(fake_kubectl: Any) -> None:
    fake_kubectl.on("get", "secret", stdout="secret/tao-creds-job-1\n")
    fake_kubectl.on("create", stdout=f"Pod tao-volume-x {UID}\n")
    fake_kubectl.on("get", "pod", data={"status": {"phase": "Running", "containerStatuses": [
        {"name": "helper", "state": {"running": {}}},
        {"name": "s3", "state": {"terminated": {"reason": "StartError", "message":
                                                'exec: "sleep": executable file not found in $PATH'}}}]}})
    fake_kubectl.on("get", "events", data={"items": []})
    fake_kubectl.on("delete", "--raw")
    with pytest.raises(TaoError, match=r"could not start: its s3 container ended: StartError exec: \"sleep\""):
        results.list_results(Kubectl(ClusterOptions()), _source(), image="busybox:1.37.0", timeout=5)
    assert [c.argv[:2] for c in fake_kubectl.calls if c.argv[0] == "delete"] == [["delete", "--raw"]]


SECRET_UID = "7d0c2a9e-5555-4666-8777-888899990000"
GIVEN = {"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE", "AWS_SECRET_ACCESS_KEY": SECRET_VALUE}


def _run_secret_pod(fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch) -> ShellPod:
    """A tier C helper pod created with a Secret of its own (the job's is gone: `get secret` would say NotFound)."""
    from kubectl_tao.volumes import volume_helper

    monkeypatch.setattr(volume_helper, "helper_name", lambda: "tao-volume-x")
    fake_kubectl.on("get", "secret", stderr='Error from server (NotFound): secrets "tao-creds-job-1" not found',
                    rc=1)
    # Both creates (the gated pod, then its Secret) get this answer: each reads the line of its own kind.
    fake_kubectl.on("create", stdout=f"Secret tao-volume-x-s3 {SECRET_UID}\nPod tao-volume-x {UID}\n")
    fake_kubectl.on("patch", "pod", stdout="pod/tao-volume-x\n")
    fake_kubectl.on("get", "pod", data=BOTH_RUNNING)
    fake_kubectl.on("get", "events", data={"items": []})
    fake_kubectl.on("delete", "--raw")
    pod = ShellPod()
    monkeypatch.setattr(Kubectl, "pipe", lambda _kc, args, **kwargs: pod.pipe(args, **kwargs))
    return pod


def _deletes(fake_kubectl: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(c.argv[2], json.loads(c.stdin or "{}")) for c in fake_kubectl.calls if c.argv[:2] == ["delete", "--raw"]]


def test_given_credentials_read_a_job_whose_secret_is_gone_through_a_secret_the_pod_owns(
    s3: Path, fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _run_secret_pod(fake_kubectl, monkeypatch)
    (s3 / "train" / "model_epoch_1.pth").write_bytes(os.urandom(3000))
    pulled = results.pull(Kubectl(ClusterOptions()), _source(), paths=[], dest=str(tmp_path / "out"), latest=False,
                          image="busybox:1.37.0", timeout=5, credentials=GIVEN)
    assert (pulled.pulled, pulled.verified) == (1, 1)
    assert not [c for c in fake_kubectl.calls if c.argv[:2] == ["get", "secret"]]  # the job's Secret is not asked
    made, gave, lifted = _start_calls(fake_kubectl)
    (pod,) = json.loads(made.stdin or "")["items"]  # first the pod alone, held by the gate
    assert pod["kind"] == "Pod" and pod["spec"]["schedulingGates"] == [{"name": "kubectl-tao.io/credentials"}]
    assert [c["envFrom"] for c in pod["spec"]["containers"] if c["name"] == "s3"] == [
        [{"secretRef": {"name": "tao-volume-x-s3", "optional": False}}]]
    assert "tao-creds-job-1" not in json.dumps(pod) and "stringData" not in json.dumps(pod)
    (secret,) = json.loads(gave.stdin or "")["items"]  # then the Secret, a child of that pod from its creation
    assert (secret["kind"], secret["metadata"]["name"], secret["stringData"]) == ("Secret", "tao-volume-x-s3", GIVEN)
    assert secret["metadata"]["labels"]["app.kubernetes.io/component"] == "volume-helper"
    assert secret["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "tao-volume-x", "uid": UID}]
    assert lifted.argv[:6] == ["patch", "pod", "tao-volume-x", "-n", "ns", "--type=json"]  # then the gate lifted
    assert json.loads(lifted.argv[lifted.argv.index("-p") + 1]) == [  # on that pod only (its UID tested)
        {"op": "test", "path": "/metadata/uid", "value": UID},
        {"op": "test", "path": "/spec/schedulingGates/0/name", "value": "kubectl-tao.io/credentials"},
        {"op": "remove", "path": "/spec/schedulingGates/0"}]  # its own gate only: one a webhook added stays
    assert not [c for c in fake_kubectl.calls if c.argv[:2] == ["patch", "-f"]]  # no owner patch of the Secret
    assert _deletes(fake_kubectl) == [  # then removed, each pinned to its own UID: the pod first
        ("/api/v1/namespaces/ns/pods/tao-volume-x",
         {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0, "preconditions": {"uid": UID}}),
        ("/api/v1/namespaces/ns/secrets/tao-volume-x-s3",
         {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0, "preconditions": {"uid": SECRET_UID}}),
    ]
    for value in GIVEN.values():  # the values only ever travel on the Secret's create's stdin
        assert all(value not in " ".join(c.argv) for c in fake_kubectl.calls)
        assert [c for c in fake_kubectl.calls if value in (c.stdin or "")] == [gave]


def _start_calls(fake_kubectl: Any) -> tuple[Any, Any, Any]:
    """The pod's create, the Secret's create and the gate's patch, checked to come in that order, each once,
    before the pod is first looked at."""
    calls = fake_kubectl.calls
    creates = [i for i, c in enumerate(calls) if c.argv[0] == "create"]
    patches = [i for i, c in enumerate(calls) if c.argv[:2] == ["patch", "pod"]]
    first_look = next(i for i, c in enumerate(calls) if c.argv[:2] == ["get", "pod"])
    assert len(creates) == 2 and len(patches) == 1
    assert creates[0] < creates[1] < patches[0] < first_look
    return calls[creates[0]], calls[creates[1]], calls[patches[0]]


def test_a_helper_without_given_credentials_has_no_gate_and_one_create(
    s3: Path, fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pod(fake_kubectl, monkeypatch)
    (s3 / "train" / "model_epoch_1.pth").write_bytes(b"x")
    results.list_results(Kubectl(ClusterOptions()), _source(), image="busybox:1.37.0", timeout=5)
    (create,) = [c for c in fake_kubectl.calls if c.argv[0] == "create"]
    (pod,) = json.loads(create.stdin or "")["items"]
    assert pod["kind"] == "Pod" and "schedulingGates" not in pod["spec"]
    assert not [c for c in fake_kubectl.calls if c.argv[0] == "patch"]


@pytest.mark.parametrize("where", ["secret", "gate"])
def test_ctrl_c_while_the_secret_is_given_removes_the_pod_and_the_secret_it_may_have(
    fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    from kubectl_tao.k8s import objects

    _run_secret_pod(fake_kubectl, monkeypatch)
    creates = []
    real_create = objects.create

    def create(kc: Any, made: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
        creates.append(made[0]["kind"])
        if where == "secret" and made[0]["kind"] == "Secret":
            raise KeyboardInterrupt  # while the Secret's create runs: it may or may not exist
        return real_create(kc, made, namespace)

    def lift(*_args: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(objects, "create", create)
    monkeypatch.setattr(objects, "lift_scheduling_gate", lift)
    with pytest.raises(KeyboardInterrupt):
        results.list_results(Kubectl(ClusterOptions()), _source(), image="busybox:1.37.0", timeout=5,
                             credentials=GIVEN)
    assert creates == ["Pod", "Secret"]
    secret_uid = None if where == "secret" else SECRET_UID  # unknown: by its name, a random one this run chose
    assert [(path, body.get("preconditions")) for path, body in _deletes(fake_kubectl)] == [
        ("/api/v1/namespaces/ns/pods/tao-volume-x", {"uid": UID}),
        ("/api/v1/namespaces/ns/secrets/tao-volume-x-s3", {"uid": secret_uid} if secret_uid else None)]


def test_ctrl_c_before_the_secret_is_created_removes_the_pod_and_asks_for_no_secret(
    fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubectl_tao.k8s import objects

    _run_secret_pod(fake_kubectl, monkeypatch)
    real_create = objects.create

    def create(kc: Any, made: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
        real_create(kc, made, namespace)
        raise KeyboardInterrupt  # the pod's create answered (its UID not read yet), nothing else started

    monkeypatch.setattr(objects, "create", create)
    with pytest.raises(KeyboardInterrupt):
        results.list_results(Kubectl(ClusterOptions()), _source(), image="busybox:1.37.0", timeout=5,
                             credentials=GIVEN)
    assert [path for path, _ in _deletes(fake_kubectl)] == ["/api/v1/namespaces/ns/pods/tao-volume-x"]
    assert not [c for c in fake_kubectl.calls if GIVEN["AWS_SECRET_ACCESS_KEY"] in (c.stdin or "")]


def _lift_refused(fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch, stderr: str) -> TaoError:
    """`results --env-file` whose gate lift kubectl refuses with STDERR: the one-line error it raised, once the pod
    and its Secret were both removed."""
    fake_kubectl.on("patch", "pod", stderr=stderr, rc=1)
    _run_secret_pod(fake_kubectl, monkeypatch)
    with pytest.raises(TaoError) as raised:
        results.list_results(Kubectl(ClusterOptions()), _source(), image="busybox:1.37.0", timeout=5,
                             credentials=GIVEN)
    said = raised.value.message
    assert said.startswith("could not lift the scheduling gate of the volume helper pod ns/tao-volume-x: ")
    assert "\n" not in said
    assert [path for path, _ in _deletes(fake_kubectl)] == [
        "/api/v1/namespaces/ns/pods/tao-volume-x", "/api/v1/namespaces/ns/secrets/tao-volume-x-s3"]
    return raised.value


def test_a_gate_the_cluster_will_not_lift_fails_in_one_line_naming_the_permission_and_removes_both(
    fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    raised = _lift_refused(fake_kubectl, monkeypatch, 'Error from server (Forbidden): pods "tao-volume-x" is '
                           'forbidden: User "alice" cannot patch resource "pods" in API group "" in the namespace "ns"')
    assert raised.message.endswith("; --env-file needs `patch` on pods")
    assert raised.exit_code == 1
    assert not [c for c in fake_kubectl.calls if c.argv[:2] == ["get", "pod"]]  # never waited for


def test_a_gate_that_is_not_there_to_lift_says_why_without_blaming_permissions(
    fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pod replaced meanwhile, or a cluster before 1.27 that dropped the gate on create: the patch's test step
    fails (Invalid), which no permission would change."""
    raised = _lift_refused(fake_kubectl, monkeypatch, "The request is invalid: the server rejected our request due "
                           "to an error in our request")
    assert raised.message.endswith("; the pod was deleted or replaced meanwhile, or this cluster dropped its "
                                   "scheduling gate (Kubernetes before 1.27); run again")


def test_ctrl_c_while_listing_with_given_credentials_still_removes_the_pod_and_its_secret(
    fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _run_secret_pod(fake_kubectl, monkeypatch)

    def interrupted(*_args: Any, **_kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(Kubectl, "pipe", interrupted)
    with pytest.raises(KeyboardInterrupt):
        results.list_results(Kubectl(ClusterOptions()), _source(), image="busybox:1.37.0", timeout=5,
                             credentials=GIVEN)
    assert [path for path, _ in _deletes(fake_kubectl)] == [
        "/api/v1/namespaces/ns/pods/tao-volume-x", "/api/v1/namespaces/ns/secrets/tao-volume-x-s3"]


def test_a_secret_that_cannot_be_removed_is_named_with_the_command_that_removes_it(
    fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubectl_tao.volumes import volume_helper

    fake_kubectl.on("delete", "--raw", "/api/v1/namespaces/ns/secrets/tao-volume-x-s3",
                    stderr='Error from server (Forbidden): secrets "tao-volume-x-s3" is forbidden', rc=1)
    _run_secret_pod(fake_kubectl, monkeypatch)
    pod, secret = results.run_secret(results.s3_manifest(_source(), "busybox:1.37.0"), GIVEN)
    helper = volume_helper.HelperPod(Kubectl(ClusterOptions()), pod, secrets=[secret])
    helper.start(5)
    said = helper.remove()
    assert said is not None and "could not remove the volume helper's secret/tao-volume-x-s3 in namespace ns" in said
    assert said.endswith("`kubectl delete -n ns secret/tao-volume-x-s3`") and SECRET_VALUE not in said


def test_flags_replace_the_jobs_s3_client_image_and_secret_and_are_refused_for_a_claim() -> None:
    source = results.source_of(_Tracked(), s3_tools_image="air.example/aws-cli:2", env_secret="my-s3")
    assert (source.tools_image, source.secret) == ("air.example/aws-cli:2", "my-s3")
    assert results.s3_manifest(source, "busybox:1.37.0")["spec"]["containers"][1]["image"] == "air.example/aws-cli:2"
    claim = _Tracked()
    claim.job = JobRecord.from_stored({"results_dir": "/workspace/results/job-1"})
    claim.k8s = K8sRecord.from_stored({"request": {"flags": {"pvc": "data", "mount_path": "/workspace"}}})
    for flag, given in (("--s3-tools-image", {"s3_tools_image": "img:1"}), ("--env-secret", {"env_secret": "s"}),
                        ("--env-file", {"env_file": "s3.env"})):
        with pytest.raises(UsageError, match=rf"^{flag}: job job-1 keeps its results on a volume") as got:
            results.source_of(claim, **given)
        assert got.value.exit_code == 2
    with pytest.raises(UsageError, match=r"--env-secret"):
        results.source_of(_Tracked(), env_secret="Not_A_Name")


def test_an_env_secret_that_does_not_exist_is_refused_with_exit_2(fake_kubectl: Any) -> None:
    fake_kubectl.on("get", "secret", stderr='Error from server (NotFound): secrets "my-s3" not found', rc=1)
    with pytest.raises(UsageError, match=r"^--env-secret my-s3: no Secret of that name in namespace ns") as got:
        results.list_results(Kubectl(ClusterOptions()), _source(secret="my-s3"), image="busybox:1.37.0", timeout=5,
                             env_secret=True)
    assert got.value.exit_code == 2 and not [c for c in fake_kubectl.calls if c.argv[0] == "create"]


def test_a_job_submitted_with_its_users_secret_is_read_with_that_secret_and_told_when_it_is_gone(
    fake_kubectl: Any
) -> None:
    tracked = _Tracked()
    tracked.k8s = K8sRecord.from_stored(
        {"secret_names": [], "request": {"flags": {"storage_tier": "C", "env_secret_name": "team-s3"}}})
    source = results.source_of(tracked)
    assert (source.secret, source.secret_of_job) == ("team-s3", False)
    assert results.s3_manifest(source, "busybox:1.37.0")["spec"]["containers"][1]["envFrom"] == [
        {"secretRef": {"name": "team-s3", "optional": False}}]
    fake_kubectl.on("get", "secret", stderr='Error from server (NotFound): secrets "team-s3" not found', rc=1)
    with pytest.raises(UsageError, match=r"its credential Secret ns/team-s3 is gone \(the job's --env-secret\); "
                                         r"give the S3 credentials .* again with --env-file FILE") as got:
        results.list_results(Kubectl(ClusterOptions()), source, image="busybox:1.37.0", timeout=5)
    assert got.value.exit_code == 2


def test_a_tier_c_helper_pod_keeps_the_jobs_node_selector_but_not_its_gpu_placement() -> None:
    from kubectl_tao.core import contract

    tracked = _Tracked()
    tracked.k8s = K8sRecord.from_stored({"secret_names": ["tao-creds-job-1"], "request": {"flags": {
        "storage_tier": "C", "gpus": 8, "gpu_product": "NVIDIA-H100-80GB-HBM3", "node_selector": ["pool=a"],
        "toleration": ["pool=a:NoSchedule"]}}})
    source = results.source_of(tracked)
    assert source.node_selector == {"pool": "a"}  # no GPU product selector: the copy needs no GPU node
    assert contract.GPU_TOLERATION not in source.tolerations
    assert [t["key"] for t in source.tolerations] == ["pool"]
    given = results.source_of(tracked, node_selector=["zone=b"])
    assert (given.node_selector, given.tolerations) == ({"zone": "b"}, [])
