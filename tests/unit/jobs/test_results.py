from __future__ import annotations

from typing import Any

import pytest

from kubectl_tao.core.errors import UsageError
from kubectl_tao.store.jobrecord import JobRecord, K8sRecord
from kubectl_tao.volumes import results, resultsview, volumecopy
from kubectl_tao.volumes.resultsview import Entry

LISTING = """\
F 10 1796583000 ./train/dino_model_epoch_10.pth
F 11 1796583001 ./train/dino_model_epoch_2.pth
F 12 1796583002 ./train/dino_model_epoch_1.pth
F 5 1796583003 ./train/experiment.yaml
F 7 1796583004 ./a name with spaces.txt
L 1796583005 ./train/dino_model_latest.pth
T dino_model_epoch_10.pth
L 1796583006 ./train/escape
T /etc/passwd
L 1796583007 ./train/up
T ../../other/x
@@status ./train/status.json
{"date": "12/6/2026", "time": "18:0:1", "status": "RUNNING", "verbosity": "INFO", "epoch": 3}
@@end
"""


def test_the_listing_reads_files_links_and_status_tails() -> None:
    entries, statuses = resultsview.parse_results_listing(LISTING)
    by_path = {e.path: e for e in entries}
    assert by_path["a name with spaces.txt"] == Entry("a name with spaces.txt", 7, 1796583004)
    assert by_path["train/dino_model_latest.pth"].link == "train/dino_model_epoch_10.pth"
    assert by_path["train/escape"].link_out and by_path["train/escape"].link == "/etc/passwd"
    assert by_path["train/up"].link_out
    assert statuses == {"train/status.json": '{"date": "12/6/2026", "time": "18:0:1", "status": "RUNNING", '
                                             '"verbosity": "INFO", "epoch": 3}'}


def test_checkpoints_sort_by_epoch_and_the_latest_target_is_marked() -> None:
    arranged = resultsview.arrange(resultsview.parse_results_listing(LISTING)[0])
    assert [e.path for e in arranged] == [
        "a name with spaces.txt",
        "train/dino_model_latest.pth", "train/escape", "train/experiment.yaml", "train/up",
        "train/dino_model_epoch_1.pth", "train/dino_model_epoch_2.pth", "train/dino_model_epoch_10.pth",
    ]
    assert [e.path for e in arranged if e.latest] == ["train/dino_model_epoch_10.pth"]
    assert resultsview.note(arranged[-1]) == "epoch 10, latest"
    assert resultsview.note(arranged[2]) == "-> /etc/passwd (outside the results directory: not followed)"
    assert resultsview.latest_files(arranged) == ["train/dino_model_epoch_10.pth"]


@pytest.mark.parametrize(
    ("name", "epoch"),
    [("model_epoch_012.pth", 12), ("dino_ep5.ckpt", 5), ("model_079.pth", 79), ("model.pth", None),
     ("notes_3.txt", None), ("dino_model_latest.pth", None), ("epoch=4-step=100.ckpt", 4)],
)
def test_the_epoch_of_a_checkpoint_name(name: str, epoch: int | None) -> None:
    assert resultsview.checkpoint_epoch(name) == epoch


def test_a_latest_checkpoint_that_is_a_file_of_its_own_is_marked_itself() -> None:
    entries = [Entry("m_latest.pth", 3, 1), Entry("m_epoch_1.pth", 3, 1)]
    assert resultsview.latest_files(entries) == ["m_latest.pth"]


def test_a_pull_takes_all_files_the_paths_named_or_the_latest() -> None:
    arranged = resultsview.arrange(resultsview.parse_results_listing(LISTING)[0])
    every = [e.path for e in results.wanted_files(arranged, [], latest=False)]
    assert "train/escape" not in every and "train/dino_model_latest.pth" not in every and len(every) == 5
    assert [e.path for e in results.wanted_files(arranged, ["train/experiment.yaml"], latest=False)] == [
        "train/experiment.yaml"]
    assert len(results.wanted_files(arranged, ["train"], latest=False)) == 4
    assert [e.path for e in results.wanted_files(arranged, [], latest=True)] == ["train/dino_model_epoch_10.pth"]
    with pytest.raises(UsageError, match="PATH nope: nothing of that name in the results directory"):
        results.wanted_files(arranged, ["nope"], latest=False)
    with pytest.raises(UsageError, match=r"'\.\.' would escape"):
        results.wanted_files(arranged, ["../x"], latest=False)
    with pytest.raises(UsageError, match="--latest: the results directory has no"):
        results.wanted_files([Entry("a.txt", 1, 1)], [], latest=True)


class _Tracked:
    def __init__(self, results_dir: str, flags: dict[str, Any] | None, namespace: str | None = "ns") -> None:
        self.id = "dino-train-1"
        self.job = JobRecord.from_stored({"results_dir": results_dir})
        self.k8s = K8sRecord.from_stored({"request": {"flags": flags}} if flags is not None else {})
        self.namespace = namespace


def test_the_source_is_the_records_claim_mount_and_placement() -> None:
    flags = {"pvc": "tao-data", "mount_path": "/workspace", "node_selector": ["pool=gpu"],
             "toleration": ["pool=gpu:NoSchedule"], "gpus": 8, "gpu_product": None}
    source = results.source_of(_Tracked("/workspace/results/dino-train-1", flags))
    assert (source.pvc, source.namespace, source.results_dir) == ("tao-data", "ns", "/workspace/results/dino-train-1")
    assert source.node_selector == {"pool": "gpu"}
    assert [t["key"] for t in source.tolerations] == ["pool", "nvidia.com/gpu"]
    given = results.source_of(_Tracked("/workspace/r", flags), node_selector=["a=b"])
    assert (given.node_selector, given.tolerations) == ({"a": "b"}, [])


@pytest.mark.parametrize(
    ("tracked", "said"),
    [
        (_Tracked("s3://bucket/out", None), "its record does not say where and how its S3 results (s3://bucket/out)"),
        (_Tracked("/workspace/r", None), "its record names no volume"),
        (_Tracked("/data/r", {"pvc": "tao-data", "mount_path": "/workspace"}), "is not on its volume (/workspace)"),
    ],
)
def test_a_record_without_a_readable_volume_is_refused_with_exit_2(tracked: _Tracked, said: str) -> None:
    with pytest.raises(UsageError, match=said.replace("(", r"\(").replace(")", r"\)")) as raised:
        results.source_of(tracked)
    assert raised.value.exit_code == 2


def test_a_helper_whose_command_cannot_run_says_why_from_its_container() -> None:
    from kubectl_tao.volumes import volume_helper

    pod = {"status": {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {
        "reason": "StartError", "message": 'exec: "tensorboard": executable file not found in $PATH'}}}]}}
    assert volume_helper.start_problem(pod, []) == (
        'it ended (Failed) before it was used: StartError exec: "tensorboard": executable file not found in $PATH'
    )


def test_the_tensorboard_pod_reads_the_results_read_only_on_its_loopback() -> None:
    source = results.ResultsSource("dino-train-1", "ns", "tao-data", "/workspace", "/workspace/results/x",
                                   {"pool": "gpu"}, [])
    pod = results.tensorboard_manifest(source, "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt")
    spec = pod["spec"]
    (container,) = spec["containers"]
    assert container["command"] == ["tensorboard", "--logdir", "/workspace/results/x", "--host", "127.0.0.1",
                                    "--port", "6006"]
    assert container["image"] == "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt"
    assert {"name": "volume", "mountPath": "/workspace", "readOnly": True} in container["volumeMounts"]
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert spec["automountServiceAccountToken"] is False and spec["nodeSelector"] == {"pool": "gpu"}


def test_tensorboard_forwards_on_127_0_0_1_and_removes_its_pod_on_ctrl_c(
    fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubectl_tao.k8s.kubectl import ClusterOptions, Completed, Kubectl

    fake_kubectl.on("get", "persistentvolumeclaim", data={"status": {"phase": "Bound"}})
    fake_kubectl.on("create", stdout="Pod tao-volume-x 0b8f7c1e-1111-4222-8333-444455556666\n")
    fake_kubectl.on("get", "pod", data={"status": {"phase": "Running", "containerStatuses": [{"state": {
        "running": {}}}]}})
    fake_kubectl.on("delete", "--raw")
    forwarded: list[list[str]] = []

    def pipe(self: Kubectl, args: list[str], *, sink: Any = None, **_: Any) -> Completed:
        if args[0] == "exec":
            return Completed("", "", 0)  # TensorBoard listens
        forwarded.append(args)
        assert urls == []  # not before kubectl listens on the local port
        sink(b"Forwarding from 127.0.0.1:160")  # client-go's line, in two pieces
        sink(b"06 -> 6006\n")
        raise KeyboardInterrupt

    monkeypatch.setattr(Kubectl, "pipe", pipe)
    urls: list[str] = []
    source = results.ResultsSource("j", "ns", "tao-data", "/workspace", "/workspace/results/j", {}, [])
    with pytest.raises(KeyboardInterrupt):
        results.tensorboard(Kubectl(ClusterOptions()), source, image="img:1", port=16006, timeout=5,
                            on_ready=urls.append, on_output=lambda _data: None)
    assert urls == ["http://127.0.0.1:16006/"]
    ((args,),) = [(a,) for a in forwarded]
    assert args[:3] == ["port-forward", "--address", "127.0.0.1"] and args[-1] == "16006:6006"
    assert [c.argv[:2] for c in fake_kubectl.calls if c.argv[0] == "delete"] == [["delete", "--raw"]]


_RUNNING = {"status": {"phase": "Running", "containerStatuses": [{"state": {"running": {}}}]}}


def _tensorboard_pod(fake_kubectl: Any, pod: dict[str, Any] = _RUNNING) -> None:
    fake_kubectl.on("get", "persistentvolumeclaim", data={"status": {"phase": "Bound"}})
    fake_kubectl.on("create", stdout="Pod tao-volume-x 0b8f7c1e-1111-4222-8333-444455556666\n")
    fake_kubectl.on("get", "pod", data=pod)
    fake_kubectl.on("get", "events", data={"items": []})
    fake_kubectl.on("delete", "--raw")


def test_tensorboard_prints_the_url_only_once_the_port_answers_inside_the_pod(
    fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubectl_tao.k8s.kubectl import ClusterOptions, Completed, Kubectl

    _tensorboard_pod(fake_kubectl)
    monkeypatch.setattr("time.sleep", lambda _s: None)
    seen: list[str] = []
    probes = iter([1, 1, 0])  # refused twice (TensorBoard still loading), then it listens

    def pipe(self: Kubectl, args: list[str], *, sink: Any = None, **_: Any) -> Completed:
        if args[0] == "exec":
            seen.append("probe")
            assert args[-2:] == [results._LISTENING_PY, "6006"]
            return Completed("", "command terminated with exit code 1\n", next(probes))
        seen.append("port-forward")
        sink(b"Forwarding from 127.0.0.1:16006 -> 6006\n")
        raise KeyboardInterrupt

    monkeypatch.setattr(Kubectl, "pipe", pipe)
    source = results.ResultsSource("j", "ns", "tao-data", "/workspace", "/workspace/results/j", {}, [])
    with pytest.raises(KeyboardInterrupt):
        results.tensorboard(Kubectl(ClusterOptions()), source, image="img:1", port=16006, timeout=30,
                            on_ready=lambda url: seen.append(url), on_output=lambda _data: None)
    assert seen == ["probe", "probe", "probe", "port-forward", "http://127.0.0.1:16006/"]


def test_no_url_is_printed_when_the_port_forward_never_listens(
    fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubectl_tao.core.errors import TaoError
    from kubectl_tao.k8s.kubectl import ClusterOptions, Completed, Kubectl

    _tensorboard_pod(fake_kubectl)
    said = "Unable to listen on port 16006: Listeners failed to create with the following errors: [unable to create " \
           "listener: Error listen tcp4 127.0.0.1:16006: bind: address already in use]\nerror: unable to listen on " \
           "any of the requested ports: [{16006 6006}]\n"
    monkeypatch.setattr(Kubectl, "pipe", lambda self, args, **_: Completed("", "", 0) if args[0] == "exec"
                        else Completed("", said, 1))
    urls: list[str] = []
    source = results.ResultsSource("j", "ns", "tao-data", "/workspace", "/workspace/results/j", {}, [])
    with pytest.raises(TaoError, match=r"the port-forward to tao-volume-\w+ ended: error: unable to listen on any"):
        results.tensorboard(Kubectl(ClusterOptions()), source, image="img:1", port=16006, timeout=30,
                            on_ready=urls.append, on_output=lambda _data: None)
    assert urls == []


def test_tensorboard_that_stops_before_it_listens_fails_in_one_line_naming_image(
    fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubectl_tao.core.errors import TaoError
    from kubectl_tao.k8s.kubectl import ClusterOptions, Completed, Kubectl

    _tensorboard_pod(fake_kubectl)
    ended = {"status": {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {
        "reason": "Error", "message": "ModuleNotFoundError: No module named 'tensorboard'"}}}]}}
    answers = iter([_RUNNING, ended])
    monkeypatch.setattr(Kubectl, "json", lambda self, args, **_: next(answers) if args[:2] == ["get", "pod"]
                        else {"status": {"phase": "Bound"}})
    urls: list[str] = []
    monkeypatch.setattr(Kubectl, "pipe", lambda self, args, **_: Completed(
        "", "error: unable to upgrade connection: container not found (\"helper\")\n", 1))
    source = results.ResultsSource("j", "ns", "tao-data", "/workspace", "/workspace/results/j", {}, [])
    with pytest.raises(TaoError) as raised:
        results.tensorboard(Kubectl(ClusterOptions()), source, image="img:1", port=16006, timeout=30,
                            on_ready=urls.append, on_output=lambda _data: None)
    assert "stopped before it listened: it ended (Failed) before it was used: Error ModuleNotFoundError" in str(
        raised.value)
    assert "(--image)" in str(raised.value) and urls == []


def test_a_tensorboard_pod_that_cannot_start_names_the_image_flag_of_its_verb(fake_kubectl: Any) -> None:
    from kubectl_tao.core.errors import TaoError
    from kubectl_tao.k8s.kubectl import ClusterOptions, Kubectl

    _tensorboard_pod(fake_kubectl, {"status": {"phase": "Pending", "containerStatuses": [{"state": {"waiting": {
        "reason": "ErrImagePull", "message": "not found"}}}]}})
    source = results.ResultsSource("j", "ns", "tao-data", "/workspace", "/workspace/results/j", {}, [])
    with pytest.raises(TaoError, match=r"ErrImagePull: not found; fix it \(--image, --node-selector"):
        results.tensorboard(Kubectl(ClusterOptions()), source, image="img:1", port=16006, timeout=30,
                            on_ready=lambda _url: None, on_output=lambda _data: None)


def test_a_pull_sends_the_file_names_on_stdin_never_on_the_command_line(
    fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from support.shell_pod import ShellPod

    from kubectl_tao.k8s.kubectl import ClusterOptions, Kubectl

    _tensorboard_pod(fake_kubectl)
    pod = ShellPod()
    monkeypatch.setattr(Kubectl, "pipe", lambda _kc, args, **kwargs: pod.pipe(args, **kwargs))
    volume = tmp_path / "volume"
    run = volume / "results" / "j"
    (run / "train").mkdir(parents=True)
    count = results._TAR_FILES + 200  # more than one tar archive in the stream
    names = [f"train/model_epoch_{i}.pth" for i in range(count)] + ["a name with spaces.txt", "train/status.json"]
    for name in names:
        (run / name).write_text(f"content of {name}")
    dest = tmp_path / "out"
    (dest / "train").mkdir(parents=True)
    (dest / "train" / "status.json").write_text("content of train/status.json")  # already here: skipped
    source = results.ResultsSource("j", "ns", "tao-data", str(volume), str(run), {}, [])
    pulled = results.pull(Kubectl(ClusterOptions()), source, paths=[], dest=str(dest), latest=False,
                          image="busybox:1.37.0", timeout=5)
    assert (pulled.pulled, pulled.skipped, pulled.verified) == (count + 1, 1, count + 1)
    assert all((dest / name).read_text() == f"content of {name}" for name in names)
    (skipping,) = [(args, stdin) for script, args, stdin in pod.calls if script == results._HASH_SCRIPT]
    (hashing,) = [(args, stdin) for script, args, stdin in pod.calls if script == results._HASH_STREAM_SCRIPT]
    (tarring,) = [(args, stdin) for script, args, stdin in pod.calls if script == results._TAR_SCRIPT]
    assert skipping[0] == hashing[0] == tarring[0] == [str(run)]  # the directory alone
    # first the file this side has at the same size (the skip check), then, beside the stream, the files it sends
    assert skipping[1].decode().splitlines() == ["./train/status.json"]
    sent = sorted(f"./{n}" for n in names if n != "train/status.json")
    batches = hashing[1].decode().split("\n\n")  # small files: up to _HASH_BATCH_FILES names a sha256sum
    size = results._HASH_BATCH_FILES
    assert [len(b.splitlines()) for b in batches] == [size] * (len(sent) // size) + [len(sent) % size]
    hashed = [line for line in hashing[1].decode().splitlines() if line]
    assert sorted(hashed) == sorted(tarring[1].decode().splitlines()) == sent


def test_a_pulled_file_whose_hash_in_the_pod_differs_is_not_renamed_and_no_part_file_is_left(
    fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from support.shell_pod import ShellPod

    from kubectl_tao.core.errors import TaoError
    from kubectl_tao.k8s.kubectl import ClusterOptions, Completed, Kubectl

    _tensorboard_pod(fake_kubectl)
    pod = ShellPod()

    def pipe(_kc: Kubectl, args: list[str], **kwargs: Any) -> Completed:
        if results._HASH_STREAM_SCRIPT in args:  # the pod's hash of a file the job rewrote meanwhile
            kwargs["sink"](f"{'0' * 64}  ./train/model_epoch_1.pth\n".encode())
            return Completed("", "", 0)
        return pod.pipe(args, **kwargs)

    monkeypatch.setattr(Kubectl, "pipe", pipe)
    run = tmp_path / "volume" / "results" / "j"
    (run / "train").mkdir(parents=True)
    (run / "train" / "model_epoch_1.pth").write_text("weights")
    dest = tmp_path / "out"
    source = results.ResultsSource("j", "ns", "tao-data", str(tmp_path / "volume"), str(run), {}, [])
    with pytest.raises(TaoError, match=r"verification failed for 1 file\(s\): train/model_epoch_1.pth: its SHA-256 "
                                       r"changed while it was pulled"):
        results.pull(Kubectl(ClusterOptions()), source, paths=[], dest=str(dest), latest=False,
                     image="busybox:1.37.0", timeout=5)
    assert [p.name for p in dest.rglob("*") if p.is_file()] == []  # neither the file nor its part name


def _pull_a_and_b(tmp_path: Any) -> None:
    """`results pull` of a volume's results/j holding a.bin (1,000 bytes of a) and b.bin (5,000 of b) into
    TMP_PATH/out, through whatever Kubectl.pipe the test put in place."""
    from kubectl_tao.k8s.kubectl import ClusterOptions, Kubectl

    run = tmp_path / "volume" / "results" / "j"
    run.mkdir(parents=True)
    (run / "a.bin").write_bytes(b"a" * 1000)
    (run / "b.bin").write_bytes(b"b" * 5000)
    source = results.ResultsSource("j", "ns", "tao-data", str(tmp_path / "volume"), str(run), {}, [])
    results.pull(Kubectl(ClusterOptions()), source, paths=[], dest=str(tmp_path / "out"), latest=False,
                 image="busybox:1.37.0", timeout=5)


def test_a_pull_cut_mid_stream_keeps_the_files_that_arrived_whole_and_verified_and_no_part(
    fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    import io

    from support.shell_pod import ShellPod

    from kubectl_tao.core.errors import TaoError
    from kubectl_tao.k8s.kubectl import Completed, Kubectl

    _tensorboard_pod(fake_kubectl)
    pod = ShellPod()

    def pipe(_kc: Kubectl, args: list[str], **kwargs: Any) -> Completed:
        if results._TAR_SCRIPT not in args:
            return pod.pipe(args, **kwargs)
        whole = io.BytesIO()
        pod.pipe(args, **{**kwargs, "reader": lambda stream: whole.write(stream.read())})
        kwargs["reader"](io.BytesIO(whole.getvalue()[:3 * 1024]))  # the connection cut inside the second file
        return Completed("", "error: lost connection to pod\n", 1)

    monkeypatch.setattr(Kubectl, "pipe", pipe)
    with pytest.raises(TaoError, match=r"the copy from the volume stopped: error: lost connection to pod; 1 "
                                       r"file\(s\) that arrived whole and verified are kept, pull again to resume"):
        _pull_a_and_b(tmp_path)
    dest = tmp_path / "out"
    assert sorted(p.name for p in dest.iterdir()) == ["a.bin"] and (dest / "a.bin").read_bytes() == b"a" * 1000


def _interrupted_pull(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> tuple[Any, Any, Any]:
    """A pull of a.bin, b.bin, d.bin and c.bin, interrupted (Ctrl-C) once a, b and d arrived whole and c half,
    while the pod's hashing exec still runs and has sent the hash of a (the same), d (another: the job rewrote
    it) and c, not yet of b. Returns the pull to call, the destination and the event that ends the hashing."""
    import hashlib
    import io
    import tarfile
    import threading

    from support.shell_pod import ShellPod

    from kubectl_tao.k8s.kubectl import ClusterOptions, Completed, Kubectl

    contents = {"a.bin": b"a" * 1000, "b.bin": b"b" * 5000, "d.bin": b"d" * 2000, "c.bin": b"c" * 9000}
    run = tmp_path / "volume" / "results" / "j"
    run.mkdir(parents=True)
    for name, data in contents.items():
        (run / name).write_bytes(data)
    pod = ShellPod()
    hashes_sent, release = threading.Event(), threading.Event()

    def pipe(_kc: Kubectl, args: list[str], **kwargs: Any) -> Completed:
        if results._HASH_STREAM_SCRIPT in args:
            kwargs["feed"](io.BytesIO())
            lines = [f"{hashlib.sha256(contents['a.bin']).hexdigest()}  ./a.bin",
                     f"{'0' * 64}  ./d.bin", f"{hashlib.sha256(contents['c.bin']).hexdigest()}  ./c.bin"]
            kwargs["sink"](("\n".join(lines) + "\n").encode())
            hashes_sent.set()
            release.wait(30)  # the pod still hashes b.bin
            return Completed("", "", 0)
        if results._TAR_SCRIPT not in args:
            return pod.pipe(args, **kwargs)
        whole = io.BytesIO()
        with tarfile.open(fileobj=whole, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            for name in ("a.bin", "b.bin", "d.bin", "c.bin"):
                info = tarfile.TarInfo(f"./{name}")
                info.size = len(contents[name])
                tar.addfile(info, io.BytesIO(contents[name]))
        cut = whole.getvalue().index(b"c" * 512) + 4096  # inside c.bin
        hashes_sent.wait(30)
        kwargs["reader"](io.BytesIO(whole.getvalue()[:cut]))
        raise KeyboardInterrupt  # as kubectl.pipe raises it: kubectl stopped, the caller interrupted

    monkeypatch.setattr(Kubectl, "pipe", pipe)
    dest = tmp_path / "out"
    source = results.ResultsSource("j", "ns", "tao-data", str(tmp_path / "volume"), str(run), {}, [])

    def pull() -> Any:
        return results.pull(Kubectl(ClusterOptions()), source, paths=[], dest=str(dest), latest=False,
                            image="busybox:1.37.0", timeout=5)

    return pull, dest, release


def test_ctrl_c_mid_pull_keeps_exactly_the_files_both_hashes_verified_and_no_part(
    fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    _tensorboard_pod(fake_kubectl)
    pull, dest, release = _interrupted_pull(monkeypatch, tmp_path)
    try:
        with pytest.raises(results.PullInterrupted) as raised:
            pull()
    finally:
        release.set()
    assert raised.value.kept == 1
    # a: both hashes agree; b: whole, the pod's hash not there yet; d: the pod's hash differs; c: half arrived
    assert sorted(p.name for p in dest.rglob("*")) == ["a.bin"] and (dest / "a.bin").read_bytes() == b"a" * 1000
    assert [c.argv[:2] for c in fake_kubectl.calls if c.argv[0] == "delete"] == [["delete", "--raw"]]


def test_a_second_ctrl_c_while_the_verified_files_are_kept_keeps_none_and_leaves_no_part(
    fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    import os
    import signal
    import threading

    _tensorboard_pod(fake_kubectl)
    pull, dest, release = _interrupted_pull(monkeypatch, tmp_path)
    fsynced = results.fsync_file

    def second_ctrl_c(path: Any) -> None:
        if threading.current_thread() is threading.main_thread():  # the interrupt's own fsync, not the thread's
            os.kill(os.getpid(), signal.SIGINT)
        fsynced(path)

    monkeypatch.setattr(results, "fsync_file", second_ctrl_c)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(results.PullInterrupted) as raised:
            pull()
    finally:
        signal.signal(signal.SIGINT, previous)
        release.set()
    assert raised.value.kept == 0
    assert list(dest.rglob("*")) == []  # nothing renamed, no part left
    assert [c.argv[:2] for c in fake_kubectl.calls if c.argv[0] == "delete"] == [["delete", "--raw"]]


def test_the_pods_hashes_come_a_batch_at_a_time_a_big_file_alone_and_a_missing_one_fails_the_script(
    tmp_path: Any,
) -> None:
    import hashlib

    from support.shell_pod import ShellPod

    big = results._HASH_BATCH_BYTES
    entries = [Entry("a", 3, 0), Entry("huge.pth", big, 0), Entry("b", 3, 0), Entry("c d", 3, 0),
               Entry("gone", 3, 0)]
    names = results._hash_batches(entries).decode()
    assert names.split("\n\n") == ["./a", "./huge.pth", "./b\n./c d\n./gone\n"]
    for name in ("a", "huge.pth", "b", "c d"):
        (tmp_path / name).write_bytes(name.encode())
    pod = ShellPod()
    lines: list[bytes] = []
    done = pod.pipe(["exec", "-i", "p", "--", "sh", "-c", results._HASH_STREAM_SCRIPT, "sh", str(tmp_path)],
                    feed=lambda pipe: pipe.write(names.encode()), sink=lines.append)
    assert done.returncode != 0 and "gone" in done.stderr  # the others are still hashed
    listed = {n: f.sha256 for n, f in volumecopy.parse_listing(b"".join(lines).decode()).items()}
    assert listed == {n: hashlib.sha256(n.encode()).hexdigest() for n in ("a", "huge.pth", "b", "c d")}


def test_directories_are_listed_with_the_total_size_and_count_of_the_files_under_them() -> None:
    folders: list[str] = []
    listing = LISTING + "D 1796583100 ./train\nD 1796583200 ./empty\n"
    entries, _ = resultsview.parse_results_listing(listing, folders)
    assert folders == ["train 1796583100", "empty 1796583200"]
    found = {f.path: f for f in resultsview.folders_of(entries, folders)}
    # the regular files under train/ (links count nothing); an empty directory is listed too
    assert found["train"] == resultsview.Folder("train", 10 + 11 + 12 + 5, 1796583100, 4)
    assert found["empty"] == resultsview.Folder("empty", 0, 1796583200, 0)


def test_a_directory_nobody_listed_gets_the_newest_time_under_it() -> None:
    # an S3 prefix has no directories: they are made from the files' names
    entries = [Entry("a/b/x.txt", 3, 100), Entry("a/y.txt", 4, 300), Entry("z.txt", 1, 50)]
    assert resultsview.folders_of(entries) == [resultsview.Folder("a", 7, 300, 2),
                                               resultsview.Folder("a/b", 3, 100, 1)]


def test_the_tree_puts_each_directory_before_its_contents_after_its_parents_files() -> None:
    folders: list[str] = []
    entries, _ = resultsview.parse_results_listing(
        LISTING + "F 1 1 ./train/eval/kpi.json\nF 2 2 ./zz.txt\nD 5 ./train\nD 6 ./train/eval\n", folders)
    arranged = resultsview.arrange(entries)
    shown = [(e.path, isinstance(e, resultsview.Folder))
             for e in resultsview.tree(arranged, resultsview.folders_of(arranged, folders))]
    assert shown == [
        ("a name with spaces.txt", False), ("zz.txt", False), ("train", True),
        ("train/dino_model_latest.pth", False), ("train/escape", False), ("train/experiment.yaml", False),
        ("train/up", False), ("train/dino_model_epoch_1.pth", False), ("train/dino_model_epoch_2.pth", False),
        ("train/dino_model_epoch_10.pth", False), ("train/eval", True), ("train/eval/kpi.json", False),
    ]


def test_results_lists_the_tree_through_the_helpers_own_script(
    fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from support.shell_pod import ShellPod

    from kubectl_tao.k8s.kubectl import ClusterOptions, Kubectl

    _tensorboard_pod(fake_kubectl)
    pod = ShellPod()
    monkeypatch.setattr(Kubectl, "pipe", lambda _kc, args, **kwargs: pod.pipe(args, **kwargs))
    run = tmp_path / "results" / "j"
    (run / "train" / "eval").mkdir(parents=True)
    (run / "empty").mkdir()
    (run / "train" / "model_epoch_1.pth").write_bytes(b"x" * 1000)
    (run / "train" / "eval" / "kpi.json").write_bytes(b"y" * 24)
    source = results.ResultsSource("j", "ns", "tao-data", str(tmp_path), str(run), {}, [])
    listing = results.list_results(Kubectl(ClusterOptions()), source, image="busybox:1.37.0", timeout=5)
    folders = {f.path: (f.size, f.files) for f in listing.folders}
    assert folders == {"empty": (0, 0), "train": (1024, 2), "train/eval": (24, 1)}
    assert all(f.mtime is not None and f.mtime > 0 for f in listing.folders)


def test_the_listening_probe_is_silent_so_kubectl_never_reads_as_unreachable() -> None:
    # Run here as in the pod: exit 1 and nothing on stderr while the port is closed (python's "Connection refused"
    # there would make kubectl's answer read as an unreachable cluster), exit 0 once something listens.
    import socket
    import subprocess

    from kubectl_tao.k8s.kubectl import kubectl_error_kind

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
        closed = subprocess.run(["sh", "-c", results._LISTENING_SCRIPT, "sh", results._LISTENING_PY, port],
                                capture_output=True, text=True, check=False)
        sock.listen()
        listening = subprocess.run(["sh", "-c", results._LISTENING_SCRIPT, "sh", results._LISTENING_PY, port],
                                   capture_output=True, text=True, check=False)
    assert (closed.returncode, closed.stderr) == (1, "")
    assert kubectl_error_kind(closed.stderr + "command terminated with exit code 1\n") != "Unreachable"
    assert listening.returncode == 0


def test_a_pull_whose_hashing_in_the_pod_fails_keeps_the_files_already_verified_and_no_part(
    fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    import hashlib

    from support.shell_pod import ShellPod

    from kubectl_tao.core.errors import TaoError
    from kubectl_tao.k8s.kubectl import Completed, Kubectl

    _tensorboard_pod(fake_kubectl)
    pod = ShellPod()

    def pipe(_kc: Kubectl, args: list[str], **kwargs: Any) -> Completed:
        if results._HASH_STREAM_SCRIPT in args:  # a.bin hashed, then the connection of the hashing exec drops
            kwargs["sink"](f"{hashlib.sha256(b'a' * 1000).hexdigest()}  ./a.bin\n".encode())
            return Completed("", "error: lost connection to pod\n", 1)
        return pod.pipe(args, **kwargs)

    monkeypatch.setattr(Kubectl, "pipe", pipe)
    with pytest.raises(TaoError, match=r"hashing the results failed: error: lost connection to pod"):
        _pull_a_and_b(tmp_path)
    dest = tmp_path / "out"
    assert sorted(p.name for p in dest.iterdir()) == ["a.bin"] and (dest / "a.bin").read_bytes() == b"a" * 1000
