"""The volume helper pod (`data push`): its manifest, why it cannot start, its removal on every way out, and what
`data push` refuses before anything is created."""

from __future__ import annotations

import json
import os
import types
from pathlib import Path
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl
from support.shell_pod import ShellPod

from kubectl_tao.core import contract
from kubectl_tao.core.errors import EXIT_USAGE, TaoError, UsageError
from kubectl_tao.k8s.kubectl import ClusterOptions, Completed, Kubectl
from kubectl_tao.volumes import datacopy, volume_helper

UID = "0b8f7c1e-1111-4222-8333-444455556666"


def _manifest(**kwargs: Any) -> dict[str, Any]:
    return volume_helper.helper_pod_manifest(
        "tao-volume-1", "ns", "tao-data", image="busybox:1.37.0", mount_path="/workspace", **kwargs
    )


def test_the_helper_pod_is_labelled_non_root_tokenless_and_drops_every_capability() -> None:
    pod = _manifest(read_only=False)
    assert pod["metadata"]["labels"] == contract.volume_helper_labels()
    spec = pod["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert spec["restartPolicy"] == "Never" and spec["activeDeadlineSeconds"] == volume_helper.HELPER_LIFETIME
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] == spec["securityContext"]["fsGroup"] == volume_helper.HELPER_UID
    (container,) = spec["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}
    }
    assert container["command"] == ["sleep", str(volume_helper.HELPER_LIFETIME)]
    assert container["volumeMounts"] == [{"name": "volume", "mountPath": "/workspace", "readOnly": False}]
    claim = {"claimName": "tao-data", "readOnly": False}
    assert spec["volumes"] == [{"name": "volume", "persistentVolumeClaim": claim}]
    assert "nodeSelector" not in spec and "tolerations" not in spec


@pytest.mark.parametrize("read_only", [False, True])
def test_the_helper_asks_the_kubelet_to_change_group_ownership_only_when_the_volume_root_lacks_it(
    read_only: bool,
) -> None:
    context = _manifest(read_only=read_only)["spec"]["securityContext"]
    assert context["fsGroup"] == volume_helper.HELPER_UID
    assert context["fsGroupChangePolicy"] == "OnRootMismatch"  # never the default "Always": a walk of every file


def test_a_read_only_helper_mounts_read_only_and_takes_the_placement_given() -> None:
    toleration = {"key": "pool", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
    spec = _manifest(read_only=True, node_selector={"pool": "gpu"}, tolerations=[toleration])["spec"]
    assert spec["containers"][0]["volumeMounts"][0]["readOnly"] is True
    assert spec["volumes"][0]["persistentVolumeClaim"]["readOnly"] is True
    assert (spec["nodeSelector"], spec["tolerations"]) == ({"pool": "gpu"}, [toleration])


def test_the_helper_image_is_the_flag_else_the_environment_else_busybox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(volume_helper.HELPER_IMAGE_ENV, raising=False)
    assert volume_helper.helper_image(None) == volume_helper.DEFAULT_HELPER_IMAGE
    monkeypatch.setenv(volume_helper.HELPER_IMAGE_ENV, "registry.local:5000/busybox:1.37.0")
    assert volume_helper.helper_image(None) == "registry.local:5000/busybox:1.37.0"
    assert volume_helper.helper_image("mirror/busybox:1") == "mirror/busybox:1"
    with pytest.raises(UsageError, match="--helper-image"):
        volume_helper.helper_image("Not An Image")


def _pod(phase: str = "Pending", **status: Any) -> dict[str, Any]:
    return {"status": {"phase": phase, **status}}


@pytest.mark.parametrize(
    ("pod", "events", "said"),
    [
        (_pod(containerStatuses=[{"state": {"waiting": {
            "reason": "ErrImagePull",
            "message": 'failed to pull and unpack image "docker.io/library/busybox:9": not found'}}}]), [],
         'ErrImagePull: failed to pull and unpack image "docker.io/library/busybox:9": not found'),
        (_pod(conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                           "message": "0/2 nodes are available: 2 node(s) had untolerated taint {pool: gpu}."}]), [],
         "it cannot be scheduled: 0/2 nodes are available: 2 node(s) had untolerated taint {pool: gpu}."),
        (_pod(), [{"type": "Warning", "reason": "FailedAttachVolume",
                   "message": 'Multi-Attach error for volume "pv-1" Volume is already used by pod(s) train-0'}],
         'FailedAttachVolume: Multi-Attach error for volume "pv-1" Volume is already used by pod(s) train-0'),
        (_pod("Failed", reason="DeadlineExceeded"), [], "it ended (Failed) before it was used: DeadlineExceeded"),
    ],
)
def test_a_helper_that_will_not_start_is_named_in_one_line(
    pod: dict[str, Any], events: list[dict[str, Any]], said: str
) -> None:
    assert volume_helper.start_problem(pod, events) == said


def test_a_pending_helper_may_still_start() -> None:
    creating = _pod(containerStatuses=[{"state": {"waiting": {"reason": "ContainerCreating"}}}])
    normal = [{"type": "Normal", "reason": "Scheduled", "message": "assigned"}]
    assert volume_helper.start_problem(creating, normal) is None
    # seen on the real nodes: the kubelet asked for the claim before the node authorizer knew of the pod; it retries
    transient = [{"type": "Warning", "reason": "FailedMount", "message": 'Unable to attach or mount volumes: '
                  'persistentvolumeclaims "tao-data" is forbidden: User "system:node:real-node-0" cannot get resource '
                  '"persistentvolumeclaims": node: no relations'}]
    assert volume_helper.start_problem(creating, transient) is None
    assert not volume_helper.is_running(creating)
    assert volume_helper.is_running(_pod("Running", containerStatuses=[{"state": {"running": {}}}]))


def _claim(fake: FakeKubectl, phase: str = "Bound") -> None:
    fake.on("get", "persistentvolumeclaim", "tao-data", data={"status": {"phase": phase}})


def _answer_start(fake: FakeKubectl, pod: dict[str, Any]) -> None:
    fake.on("create", stdout=f"Pod tao-volume-x {UID}\n")
    fake.on("get", "pod", data=pod)
    fake.on("get", "events", data={"items": []})
    fake.on("delete", "--raw")


def _deletes(fake: FakeKubectl) -> list[tuple[list[str], dict[str, Any]]]:
    return [(c.argv, json.loads(c.stdin or "{}")) for c in fake.calls if c.argv[:1] == ["delete"]]


def test_the_helper_is_removed_by_name_and_uid_when_the_body_is_interrupted(fake_kubectl: FakeKubectl) -> None:
    _answer_start(fake_kubectl, _pod("Running", containerStatuses=[{"state": {"running": {}}}]))
    kc = Kubectl(ClusterOptions())
    manifest = _manifest(read_only=False)
    with pytest.raises(KeyboardInterrupt), volume_helper.helper_pod(kc, manifest, timeout=5):
        raise KeyboardInterrupt
    ((argv, body),) = _deletes(fake_kubectl)
    assert argv == ["delete", "--raw", "/api/v1/namespaces/ns/pods/tao-volume-1", "-f", "-"]
    assert body["preconditions"] == {"uid": UID} and body["gracePeriodSeconds"] == 0


@pytest.mark.parametrize("stderr", [
    'Error from server (NotFound): pods "tao-volume-1" not found',
    'Error from server (Conflict): Operation cannot be fulfilled on Pod "tao-volume-1": Precondition failed: UID in '
    f"precondition: {UID}, UID in object meta: 7d2c1e0a-9999-4aaa-8bbb-ccccdddd0000",
])
def test_a_helper_already_gone_or_replaced_is_no_failure_and_says_nothing(
    fake_kubectl: FakeKubectl, stderr: str
) -> None:
    import io

    fake_kubectl.on("delete", "--raw", stderr=stderr + "\n", rc=1)
    _answer_start(fake_kubectl, _pod("Running", containerStatuses=[{"state": {"running": {}}}]))
    said = io.StringIO()
    with volume_helper.helper_pod(Kubectl(ClusterOptions()), _manifest(read_only=False), timeout=5, out=said) as pod:
        pass
    assert said.getvalue() == "" and pod.not_removed is None


def test_a_helper_whose_delete_fails_is_named_in_one_line_with_the_command_that_removes_it(
    fake_kubectl: FakeKubectl,
) -> None:
    import io

    refused = ('Error from server (Forbidden): pods "tao-volume-1" is forbidden: User "alice" cannot delete resource '
               '"pods" in API group "" in the namespace "ns"')
    fake_kubectl.on("delete", "--raw", stderr=refused + "\n", rc=1)
    _answer_start(fake_kubectl, _pod("Running", containerStatuses=[{"state": {"running": {}}}]))
    said = io.StringIO()
    with pytest.raises(KeyboardInterrupt), volume_helper.helper_pod(
        Kubectl(ClusterOptions()), _manifest(read_only=False), timeout=5, out=said
    ):
        raise KeyboardInterrupt
    assert said.getvalue() == (
        f"warning: could not remove the volume helper pod ns/tao-volume-1 ({refused}); delete it with "
        "`kubectl delete pod -n ns tao-volume-1`\n"
    )


def test_a_helper_that_cannot_pull_its_image_fails_in_one_line_and_is_removed(fake_kubectl: FakeKubectl) -> None:
    waiting = {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "busybox:9"'}
    _answer_start(fake_kubectl, _pod(containerStatuses=[{"state": {"waiting": waiting}}]))
    with pytest.raises(TaoError) as raised, volume_helper.helper_pod(
        Kubectl(ClusterOptions()), _manifest(read_only=False), timeout=5
    ):
        pytest.fail("the body must not run")
    assert raised.value.message == (
        "the volume helper pod ns/tao-volume-1 could not start: ImagePullBackOff: Back-off pulling image "
        '"busybox:9"; fix it (--helper-image, --node-selector, --toleration) and run again'
    )
    assert len(_deletes(fake_kubectl)) == 1


NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
LIFETIME = volume_helper.HELPER_LIFETIME


def _stamp(seconds_before_now: float) -> str:
    import datetime

    when = datetime.datetime.fromtimestamp(NOW - seconds_before_now, datetime.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _left(name: str, *, age: float, phase: str = "Running", started: float | None = None,
          labels: dict[str, str] | None = None, gated: bool = False, **meta: Any) -> dict[str, Any]:
    """A pod as `kubectl get pods -o json` lists it: created AGE seconds ago, started STARTED seconds ago (None: the
    same moment; a gated pod never starts)."""
    pod = _manifest(read_only=False)
    pod["metadata"].update(name=name, uid=f"{name}-uid", creationTimestamp=_stamp(age), **meta)
    if labels is not None:
        pod["metadata"]["labels"] = labels
    pod["status"] = {"phase": "Pending" if gated else phase}
    if gated:
        pod["spec"]["schedulingGates"] = [{"name": contract.HELPER_CREDENTIALS_GATE}]
    else:
        pod["status"]["startTime"] = _stamp(age if started is None else started)
    return pod


MARGIN = volume_helper.CLOCK_MARGIN_SECONDS
GATED = volume_helper.GATED_FOR_SECONDS

LEFT_PODS = [
    _left("succeeded", age=60, phase="Succeeded"),
    _left("failed", age=LIFETIME + 5, phase="Failed"),  # the kubelet ended it at its deadline
    _left("lost", age=LIFETIME + MARGIN + 5),  # still Running long past it: a node that is gone
    _left("gated-left", age=GATED + 5, gated=True),  # its plugin was killed before it lifted the gate
    _left("young", age=60),  # a live kubectl-tao's
    _left("young-gated", age=5, gated=True),  # a live kubectl-tao between its creates and the gate
    _left("started-late", age=LIFETIME + MARGIN + 5, started=LIFETIME - 60),  # its lifetime counts from its start
    # Running just past its lifetime by this machine's clock: the kubelet ends it; a clock hours ahead of the API
    # server's must not make another kubectl-tao remove a live one.
    _left("past-deadline-by-this-clock", age=LIFETIME + 5),
    _left("another-label", age=LIFETIME + 5, phase="Failed",
          labels={contract.MANAGED_BY_LABEL: contract.MANAGED_BY, contract.JOB_LABEL: "job-1"}),
    _left("going", age=LIFETIME + 5, phase="Failed", deletionTimestamp=_stamp(1)),
]


def test_the_sweep_takes_ended_and_past_deadline_helpers_and_keeps_live_ones_and_other_pods() -> None:
    taken = volume_helper.left_behind(LEFT_PODS, NOW)
    assert taken == [(n, f"{n}-uid") for n in ("succeeded", "failed", "lost", "gated-left")]
    assert volume_helper.left_behind([_left("just-in-time", age=LIFETIME + MARGIN - 1)], NOW) == []
    assert volume_helper.left_behind([_left("gated-a-while", age=GATED - 1, gated=True)], NOW) == []
    untimed = _left("untimed", age=LIFETIME + MARGIN + 5)
    del untimed["metadata"]["creationTimestamp"], untimed["status"]["startTime"]
    assert volume_helper.left_behind([untimed], NOW) == []  # no time to judge by: kept


def _sweep_answers(fake: FakeKubectl, monkeypatch: pytest.MonkeyPatch, *, listing: dict[str, Any] | None = None,
                   stderr: str = "") -> None:
    monkeypatch.setattr(volume_helper.time, "time", lambda: NOW)
    selector = contract.volume_helper_selector()
    if listing is None:
        fake.on("get", "pods", "-n", "ns", "-l", selector, stderr=stderr, rc=1)
    else:
        fake.on("get", "pods", "-n", "ns", "-l", selector, data=listing)


def test_a_helper_verb_first_removes_the_helpers_a_killed_plugin_left_each_pinned_to_its_uid(
    fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    _sweep_answers(fake_kubectl, monkeypatch, listing={"kind": "List", "items": LEFT_PODS})
    _answer_start(fake_kubectl, _pod("Running", containerStatuses=[{"state": {"running": {}}}]))
    said = io.StringIO()
    with volume_helper.helper_pod(Kubectl(ClusterOptions()), _manifest(read_only=False), timeout=5, out=said):
        pass
    (listed,) = [c.argv for c in fake_kubectl.calls if c.argv[:2] == ["get", "pods"]]
    assert listed == ["get", "pods", "-n", "ns", "-l", contract.volume_helper_selector(), "-o", "json"]
    swept = ["succeeded", "failed", "lost", "gated-left"]
    pinned = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
    assert _deletes(fake_kubectl)[:-1] == [
        (["delete", "--raw", f"/api/v1/namespaces/ns/pods/{name}", "-f", "-"], {**pinned, "preconditions": {
            "uid": f"{name}-uid"}})
        for name in swept
    ]
    assert _deletes(fake_kubectl)[-1][0][2] == "/api/v1/namespaces/ns/pods/tao-volume-1"  # its own, at its end
    first_create = next(i for i, c in enumerate(fake_kubectl.calls) if c.argv[0] == "create")
    assert all(i < first_create for i, c in enumerate(fake_kubectl.calls) if c.argv[:2] == ["get", "pods"]
               or (c.argv[0] == "delete" and "tao-volume-1" not in c.argv[2]))  # swept before its own pod
    assert said.getvalue() == "".join(
        f"removed the volume helper pod ns/{name} a killed kubectl-tao left\n" for name in swept)


def test_a_namespace_full_of_leftovers_is_swept_a_few_deletes_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    from kubectl_tao.k8s import objects

    flight = {"now": 0, "most": 0}

    class Started:
        def wait(self, **_kwargs: Any) -> Any:
            flight["now"] -= 1
            return types.SimpleNamespace(returncode=0)

    def start(_kc: Any, _path: str, _uid: str | None) -> Started:
        flight["now"] += 1
        flight["most"] = max(flight["most"], flight["now"])
        return Started()

    monkeypatch.setattr(objects, "_start_remove", start)
    pods = [(f"old-{i:02d}", f"uid-{i}") for i in range(19)]
    removed = objects.remove_left_helper_pods(Kubectl(ClusterOptions()), "ns", pods)
    assert removed == [name for name, _ in pods]
    assert flight == {"now": 0, "most": objects._REMOVALS_AT_ONCE}  # never more kubectls at once than that


def test_a_sweep_whose_kubectl_cannot_start_says_nothing_and_the_verb_goes_on(
    fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from kubectl_tao.k8s import objects

    _sweep_answers(fake_kubectl, monkeypatch, listing={"kind": "List", "items": LEFT_PODS[:1]})

    def no_processes(*_args: Any) -> list[str]:
        raise TaoError("could not run kubectl: OSError")

    monkeypatch.setattr(objects, "remove_left_helper_pods", no_processes)
    said = io.StringIO()
    assert volume_helper.sweep(Kubectl(ClusterOptions()), "ns", said) == []
    assert said.getvalue() == ""


@pytest.mark.parametrize("refused", ["list", "delete"])
def test_a_sweep_the_cluster_refuses_says_nothing_and_the_verb_goes_on(
    fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch, refused: str
) -> None:
    import io

    forbidden = ('Error from server (Forbidden): pods is forbidden: User "alice" cannot {} resource "pods" in API '
                 'group "" in the namespace "ns"')
    if refused == "list":
        _sweep_answers(fake_kubectl, monkeypatch, stderr=forbidden.format("list"))
    else:
        _sweep_answers(fake_kubectl, monkeypatch, listing={"kind": "List", "items": LEFT_PODS[:1]})
        fake_kubectl.on("delete", "--raw", "/api/v1/namespaces/ns/pods/succeeded", stderr=forbidden.format("delete"),
                        rc=1)
    _answer_start(fake_kubectl, _pod("Running", containerStatuses=[{"state": {"running": {}}}]))
    said = io.StringIO()
    with volume_helper.helper_pod(Kubectl(ClusterOptions()), _manifest(read_only=False), timeout=5, out=said) as pod:
        assert pod.uid == UID  # its own pod started all the same
    assert said.getvalue() == ""
    assert len([c for c in fake_kubectl.calls if c.argv[0] == "create"]) == 1


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ({"stderr": 'Error from server (NotFound): persistentvolumeclaims "tao-data" not found', "rc": 1},
         "--pvc tao-data: no PersistentVolumeClaim of that name in namespace ns; list them with "
         "`kubectl get pvc -n ns`"),
        ({"data": {"status": {"phase": "Pending"}}},
         "--pvc tao-data: the claim is Pending, not Bound; see `kubectl describe pvc tao-data -n ns`"),
    ],
)
def test_a_claim_missing_or_not_bound_is_bad_input_and_nothing_is_created(
    fake_kubectl: FakeKubectl, tmp_path: Path, answer: dict[str, Any], said: str
) -> None:
    fake_kubectl.on("get", "persistentvolumeclaim", "tao-data", **answer)
    (tmp_path / "a.txt").write_text("a")
    request = datacopy.PushRequest(sources=[str(tmp_path / "a.txt")], pvc="tao-data")
    with pytest.raises(UsageError) as raised:
        datacopy.push(Kubectl(ClusterOptions()), "ns", request)
    assert (raised.value.message, raised.value.exit_code) == (said, EXIT_USAGE)
    assert [argv[0] for argv in fake_kubectl.argvs()] == ["get"]


def test_collect_names_each_file_under_its_folder_and_refuses_links_out(tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    (specs / "nested").mkdir(parents=True)
    (specs / "train.yaml").write_text("x: 1\n")
    (specs / "nested" / "data.bin").write_bytes(b"\0" * 10)
    (specs / "nested" / "again.yaml").symlink_to("../train.yaml")  # a link inside: its content goes
    lone = tmp_path / "lone.txt"
    lone.write_text("l")
    found = {f.name: f.size for f in datacopy.collect([str(specs), str(lone)])}
    assert found == {"specs/train.yaml": 5, "specs/nested/data.bin": 10, "specs/nested/again.yaml": 5,
                     "lone.txt": 1}

    secret = tmp_path / "secret.txt"
    secret.write_text("s")
    (specs / "out").symlink_to(secret)
    with pytest.raises(UsageError, match=r"LOCAL .*/specs/out: a link out of .*specs \(to .*secret.txt\)"):
        datacopy.collect([str(specs)])


def test_collect_refuses_a_missing_path_a_fifo_and_two_sources_of_one_name(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"LOCAL .*/nope: no such file or folder; check the path") as raised:
        datacopy.collect([str(tmp_path / "nope")])
    assert raised.value.exit_code == EXIT_USAGE
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="not a regular file or folder"):
        datacopy.collect([str(fifo)])
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "x").write_text("1")
    (tmp_path / "b" / "x").write_text("2")
    with pytest.raises(UsageError, match=r"x is also pushed from"):
        datacopy.collect([str(tmp_path / "a" / "x"), str(tmp_path / "b" / "x")])
    with pytest.raises(UsageError, match="name at least one file or folder"):
        datacopy.collect([])


@pytest.fixture
def shell_pod(fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch) -> ShellPod:
    _claim(fake_kubectl)
    _answer_start(fake_kubectl, _pod("Running", containerStatuses=[{"state": {"running": {}}}]))
    pod = ShellPod()
    monkeypatch.setattr(Kubectl, "pipe", lambda _kc, args, **kwargs: pod.pipe(args, **kwargs))
    return pod


def _push(volume: Path, *sources: Path, to: str | None = None) -> datacopy.PushResult:
    request = datacopy.PushRequest(sources=[str(s) for s in sources], pvc="tao-data", to=to, mount_path=str(volume))
    return datacopy.push(Kubectl(ClusterOptions()), "ns", request)


def test_push_skips_what_is_there_and_sends_the_rest_as_one_tar_verified_before_it_is_moved(
    fake_kubectl: FakeKubectl, shell_pod: ShellPod, tmp_path: Path
) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "same.txt").write_text("same")
    (specs / "new.txt").write_text("brand new")
    volume = tmp_path / "volume"
    (volume / "inputs" / "specs").mkdir(parents=True)
    (volume / "inputs" / "specs" / "same.txt").write_text("same")
    result = _push(volume, specs, to="inputs")
    assert (result.sent, result.skipped, result.verified, result.target) == (1, 1, 1, f"{volume}/inputs")
    assert (volume / "inputs" / "specs" / "new.txt").read_text() == "brand new"
    assert list((volume / datacopy.volumecopy.STAGING_DIR).iterdir()) == []  # the staging directory is removed
    scripts = shell_pod.scripts()
    assert scripts[0] == datacopy.volumecopy.names_listing_script()
    assert scripts[1] == datacopy.volumecopy.hash_script()
    assert scripts[2:] == [datacopy._EXTRACT_SCRIPT, datacopy._MOVE_SCRIPT, datacopy.volumecopy.record_write_script()]
    assert len(_deletes(fake_kubectl)) == 1
    assert result.summary() == (
        f"pushed 1 file(s) (9 B) to pvc/tao-data:{volume}/inputs, 1 unchanged skipped (4 B), 1 verified"
    )


def test_push_lists_only_the_names_it_sends_and_hashes_only_files_of_a_matching_size(
    shell_pod: ShellPod, tmp_path: Path
) -> None:
    local = tmp_path / "local"
    (local / "specs").mkdir(parents=True)
    (local / "specs" / "a.yaml").write_text("a: 1\n")
    (local / "specs" / "b.yaml").write_text("b: 22\n")
    (local / "train.yaml").write_text("x")
    volume = tmp_path / "volume"
    (volume / "specs").mkdir(parents=True)
    (volume / "specs" / "a.yaml").write_text("a: 1\n")  # same size and hash: skipped
    (volume / "specs" / "b.yaml").write_text("b: 3\n")  # another size: sent, never hashed there
    (volume / "datasets" / "coco").mkdir(parents=True)  # a big tree beside what is pushed: never walked
    (volume / "datasets" / "coco" / "img.jpg").write_bytes(b"\xff" * 64)
    (volume / datacopy.volumecopy.STAGING_DIR / "old").mkdir(parents=True)
    result = _push(volume, local / "specs", local / "train.yaml")
    assert (result.sent, result.skipped) == (2, 1)
    (listing, hashing, *_rest) = shell_pod.calls
    record = datacopy.volumecopy.record_path(str(volume), str(volume))
    assert listing[1] == [str(volume), record, "./specs", "./train.yaml"]
    assert hashing[1] == [str(volume)] and hashing[2] == b"./specs/a.yaml\n"
    assert (volume / "specs" / "b.yaml").read_text() == "b: 22\n"


def test_a_file_the_volume_cannot_hash_is_sent_again_not_a_failure(tmp_path: Path) -> None:
    import subprocess

    volume = tmp_path / "volume"
    volume.mkdir()
    (volume / "a").write_text("a")
    done = subprocess.run(["sh", "-c", datacopy.volumecopy.hash_script(), "sh", str(volume)],
                          input=b"./gone\n./a\n", capture_output=True, check=False)
    assert done.returncode == 0 and b"./gone" in done.stderr  # sha256sum's own complaint, and it goes on
    assert datacopy.volumecopy.parse_listing(done.stdout.decode()) == {
        "a": datacopy.volumecopy.RemoteFile(None, "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb")
    }


def test_a_file_pushed_where_the_target_has_a_directory_is_refused_naming_it(
    shell_pod: ShellPod, tmp_path: Path
) -> None:
    local = tmp_path / "local"
    local.mkdir()
    (local / "train.yaml").write_text("x")
    volume = tmp_path / "volume"
    (volume / "train.yaml").mkdir(parents=True)
    with pytest.raises(UsageError, match=r"train\.yaml: the target already has a directory train\.yaml") as raised:
        _push(volume, local / "train.yaml")
    assert raised.value.exit_code == EXIT_USAGE
    assert os.listdir(volume / "train.yaml") == []  # nothing nested into it
    assert datacopy._EXTRACT_SCRIPT not in shell_pod.scripts()  # refused before anything travelled


def test_a_folder_pushed_where_the_target_has_a_file_of_its_name_is_refused(
    shell_pod: ShellPod, tmp_path: Path
) -> None:
    (tmp_path / "local" / "specs").mkdir(parents=True)
    (tmp_path / "local" / "specs" / "a.yaml").write_text("x")
    volume = tmp_path / "volume"
    volume.mkdir()
    (volume / "specs").write_text("a file")
    with pytest.raises(UsageError, match=r"the target has a file specs where specs/a\.yaml needs a directory"):
        _push(volume, tmp_path / "local" / "specs")
    assert (volume / "specs").read_text() == "a file"


@pytest.mark.parametrize("where", ["stream", "move"])
def test_ctrl_c_during_a_push_removes_the_staging_directory_before_the_helper_pod(
    fake_kubectl: FakeKubectl, shell_pod: ShellPod, tmp_path: Path, where: str
) -> None:
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "a.txt").write_text("a")
    volume = tmp_path / "volume"
    volume.mkdir()
    script = {"stream": datacopy._EXTRACT_SCRIPT, "move": datacopy._MOVE_SCRIPT}[where]
    shell_pod.interrupt_at = (script, 1)
    with pytest.raises(KeyboardInterrupt):
        _push(volume, tmp_path / "local" / "a.txt")
    assert shell_pod.scripts()[-1] == datacopy._REMOVE_SCRIPT
    assert shell_pod.sigterm_ignored[-1] and not any(shell_pod.sigterm_ignored[:-1])  # held only while cleaning
    assert list((volume / datacopy.volumecopy.STAGING_DIR).iterdir()) == []
    assert len(_deletes(fake_kubectl)) == 1


def test_an_interrupted_push_keeps_the_batches_already_moved_and_the_next_push_skips_them(
    shell_pod: ShellPod, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(datacopy, "_BATCH_FILES", 2)
    local = tmp_path / "specs"
    local.mkdir()
    for i in range(5):
        (local / f"f{i}.txt").write_text(f"file {i}")
    volume = tmp_path / "volume"
    volume.mkdir()
    shell_pod.interrupt_at = (datacopy._EXTRACT_SCRIPT, 2)  # Ctrl-C during the second batch's stream
    with pytest.raises(KeyboardInterrupt):
        _push(volume, local)
    assert sorted(os.listdir(volume / "specs")) == ["f0.txt", "f1.txt"]  # the first batch, verified and moved
    assert list((volume / datacopy.volumecopy.STAGING_DIR).iterdir()) == []
    shell_pod.interrupt_at = None
    again = _push(volume, local)
    assert (again.sent, again.skipped, again.verified) == (3, 2, 3)
    assert sorted(os.listdir(volume / "specs")) == [f"f{i}.txt" for i in range(5)]


def test_batches_cut_by_count_and_bytes_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    from kubectl_tao.volumes.volumecopy import LocalFile

    monkeypatch.setattr(datacopy, "_BATCH_FILES", 3)
    monkeypatch.setattr(datacopy, "_BATCH_BYTES", 100)
    items = [LocalFile(f"f{i}", f"/l/f{i}", size) for i, size in enumerate([10, 10, 10, 10, 95, 500, 1])]
    assert [[i.name for i in b] for b in datacopy.batches(items)] == [
        ["f0", "f1", "f2"], ["f3"], ["f4"], ["f5"], ["f6"]
    ]


def test_a_failed_verification_moves_nothing_and_removes_the_staged_files(
    fake_kubectl: FakeKubectl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.txt").write_text("a")
    _claim(fake_kubectl)
    _answer_start(fake_kubectl, _pod("Running", containerStatuses=[{"state": {"running": {}}}]))
    scripts: list[str] = []

    def pipe(self: Kubectl, args: list[str], *, feed: Any = None, sink: Any = None, **_: Any) -> Completed:
        command = args[args.index("--") + 1:]
        scripts.append(command[2])
        if feed is not None:  # the extraction hashes what arrived: not what was sent
            with open(os.devnull, "wb") as sink_file:
                feed(sink_file)
            sink(f"{'0' * 64}  ./a.txt\n".encode())
        return Completed("", "", 0)

    monkeypatch.setattr(Kubectl, "pipe", pipe)
    with pytest.raises(TaoError, match=r"verification failed for 1 file\(s\): a.txt: SHA-256 000000000000\.\.\. "
                                       r"differs .*; nothing was moved under its final name; push again"):
        datacopy.push(Kubectl(ClusterOptions()), "ns", datacopy.PushRequest(sources=[str(tmp_path / "a.txt")],
                                                                           pvc="tao-data"))
    assert not any("mv -f" in s for s in scripts)
    assert scripts[-1] == 'rm -rf -- "$1"'
    assert len(_deletes(fake_kubectl)) == 1


def test_a_full_volume_stops_the_copy_in_one_line_naming_the_file_and_removes_the_staged_files(
    fake_kubectl: FakeKubectl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "big.bin").write_bytes(b"\0" * 4096)
    _claim(fake_kubectl)
    _answer_start(fake_kubectl, _pod("Running", containerStatuses=[{"state": {"running": {}}}]))
    scripts: list[str] = []

    def pipe(self: Kubectl, args: list[str], *, feed: Any = None, sink: Any = None, **_: Any) -> Completed:
        command = args[args.index("--") + 1:]
        scripts.append(command[2])
        if feed is not None:  # busybox tar on a full volume: its own line, then kubectl's
            with open(os.devnull, "wb") as sink_file:
                feed(sink_file)
            return Completed("", "tar: write error: No space left on device\ncommand terminated with exit code 1\n", 1)
        return Completed("", "", 0)

    monkeypatch.setattr(Kubectl, "pipe", pipe)
    with pytest.raises(TaoError) as raised:
        datacopy.push(Kubectl(ClusterOptions()), "ns",
                      datacopy.PushRequest(sources=[str(tmp_path / "big.bin")], pvc="tao-data"))
    assert raised.value.message == (
        "the copy to the volume stopped while sending big.bin: tar: write error: No space left on device; nothing "
        "was written under its final name; free space or fix the cause and push again (what arrived is skipped)"
    )
    assert scripts[-1] == 'rm -rf -- "$1"' and not any("mv -f" in s for s in scripts)
    assert len(_deletes(fake_kubectl)) == 1


def test_local_hashes_taken_during_the_listing_equal_those_taken_on_demand(tmp_path: Path) -> None:
    import hashlib

    from kubectl_tao.volumes.volumecopy import LocalFile

    items = []
    for i in range(5):
        path = tmp_path / f"f{i}"
        path.write_bytes(os.urandom(3 * 1024 * 1024 + i))
        items.append(LocalFile(f"f{i}", str(path), path.stat().st_size))
    early = datacopy._LocalHashes(items, None)
    early.stop()  # wherever it got to: the rest is hashed on demand, the same way
    assert [early.sha256(item) for item in items] == [
        hashlib.sha256(Path(item.path).read_bytes()).hexdigest() for item in items
    ]


def _aged(*paths: Path) -> None:
    """Modification times well before the push: a moved file is recorded only when its time cannot be today's."""
    for path in paths:
        os.utime(path, (1_700_000_000, 1_700_000_000))


def test_a_second_push_takes_the_hashes_the_volume_recorded_and_hashes_nothing_there(
    shell_pod: ShellPod, tmp_path: Path
) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    for i in range(3):
        (specs / f"f{i}.txt").write_text(f"file {i}")
        _aged(specs / f"f{i}.txt")
    volume = tmp_path / "volume"
    volume.mkdir()
    assert _push(volume, specs).verified == 3
    record = Path(datacopy.volumecopy.record_path(str(volume), str(volume)))
    assert len(record.read_text().splitlines()) == 3
    first = len(shell_pod.calls)
    again = _push(volume, specs)
    assert (again.sent, again.skipped) == (0, 3)
    assert shell_pod.scripts()[first:] == [datacopy.volumecopy.names_listing_script()]  # no hashing, no rewrite


def test_a_file_rewritten_on_the_volume_after_it_was_recorded_is_hashed_again_and_sent(
    shell_pod: ShellPod, tmp_path: Path
) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "a.txt").write_text("aaaa")
    _aged(specs / "a.txt")
    volume = tmp_path / "volume"
    volume.mkdir()
    _push(volume, specs)
    (volume / "specs" / "a.txt").write_text("bbbb")  # same size, other bytes: its change time moves on
    _aged(volume / "specs" / "a.txt")  # even with its modification time set back
    first = len(shell_pod.calls)
    again = _push(volume, specs)
    assert (again.sent, again.skipped) == (1, 0)
    assert datacopy.volumecopy.hash_script() in shell_pod.scripts()[first:]
    assert (volume / "specs" / "a.txt").read_text() == "aaaa"


def test_a_file_modified_moments_before_the_push_is_not_recorded(shell_pod: ShellPod, tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "fresh.txt").write_text("fresh")  # its time is now: a write after the move could keep it unseen
    (specs / "old.txt").write_text("old")
    _aged(specs / "old.txt")
    volume = tmp_path / "volume"
    volume.mkdir()
    _push(volume, specs)
    record = Path(datacopy.volumecopy.record_path(str(volume), str(volume))).read_text()
    assert "./specs/old.txt" in record and "fresh.txt" not in record


def test_the_stream_carries_long_names_empty_and_odd_sized_files_as_tar_reads_them(
    shell_pod: ShellPod, tmp_path: Path
) -> None:
    deep = tmp_path / "specs" / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    files = {deep / ("f" * 90 + ".yaml"): b"x" * 513, tmp_path / "specs" / "empty": b"",
             tmp_path / "specs" / "big.bin": os.urandom((1 << 20) + 7)}
    for path, data in files.items():
        path.write_bytes(data)
    volume = tmp_path / "volume"
    volume.mkdir()
    assert _push(volume, tmp_path / "specs").verified == 3
    for path, data in files.items():
        assert (volume / path.relative_to(tmp_path)).read_bytes() == data


def test_this_machine_remembers_the_hashes_so_a_second_push_reads_no_unchanged_local_file(
    shell_pod: ShellPod, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(datacopy, "_RACY_NS", 0)  # the files were written a moment ago: no margin here
    specs = tmp_path / "specs"
    specs.mkdir()
    for i in range(3):
        (specs / f"f{i}.txt").write_text(f"file {i}")
    volume = tmp_path / "volume"
    volume.mkdir()
    _push(volume, specs)
    record = datacopy.cache_path([str(specs)])
    assert record is not None and record.parent == tmp_path / "cache" / "kubectl-tao" / "sha256"
    assert len(record.read_text().splitlines()) == 3
    read: list[str] = []
    real_open = open

    def watched(path: Any, *args: Any, **kwargs: Any) -> Any:
        if str(path).startswith(str(specs)):
            read.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", watched)
    (specs / "f1.txt").write_text("FILE 1")  # same size, other bytes: its change time moves on
    again = _push(volume, specs)
    assert (again.sent, again.skipped) == (1, 2)
    assert read.count(str(specs / "f1.txt")) >= 1 and not {str(specs / "f0.txt"), str(specs / "f2.txt")} & set(read)
    assert (volume / "specs" / "f1.txt").read_text() == "FILE 1"


def test_a_file_changed_moments_before_it_is_hashed_is_not_remembered(tmp_path: Path) -> None:
    from kubectl_tao.volumes.volumecopy import LocalFile

    path = tmp_path / "fresh"
    path.write_text("fresh")
    record = tmp_path / "record"
    hashes = datacopy._LocalHashes([LocalFile("fresh", str(path), 5)], record)
    hashes.stop()
    assert len(hashes.sha256(LocalFile("fresh", str(path), 5))) == 64
    hashes.save()
    assert not record.exists() or record.read_text() == ""  # its change time is within the margin: not trusted


def test_a_record_the_volume_cannot_take_is_no_failure_of_the_push(
    shell_pod: ShellPod, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubectl_tao.core.errors import KubectlError

    def pipe(_kc: Kubectl, args: list[str], **kwargs: Any) -> Completed:
        if datacopy.volumecopy.record_write_script() in args:
            raise KubectlError("Unable to connect to the server: dial tcp 127.0.0.1:6443: connect: connection refused")
        return shell_pod.pipe(args, **kwargs)

    monkeypatch.setattr(Kubectl, "pipe", pipe)
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "a.txt").write_text("a")
    _aged(tmp_path / "specs" / "a.txt")
    volume = tmp_path / "volume"
    volume.mkdir()
    assert _push(volume, tmp_path / "specs").verified == 1
    assert (volume / "specs" / "a.txt").read_text() == "a"
