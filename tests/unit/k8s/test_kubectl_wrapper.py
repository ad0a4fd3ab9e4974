from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kubectl_tao.core.errors import ClusterUnreachableError, KubectlError, TaoError, UsageError
from kubectl_tao.k8s.kubectl import (
    ClusterOptions,
    Kubectl,
    discard_prestarted,
    first_error_line,
    kubectl_error_kind,
    prestart,
)


@pytest.mark.parametrize(
    ("stderr", "reason"),
    [
        (
            "The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?",
            "Unreachable",
        ),
        ("Unable to connect to the server: dial tcp: lookup nowhere: no such host", "Unreachable"),
        ('Error from server (NotFound): jobs.batch "x" not found', "NotFound"),
        ('Error from server (AlreadyExists): secrets "s" already exists', "AlreadyExists"),
        ('Error from server (Forbidden): jobs.batch is forbidden: User "u" cannot create resource', "Forbidden"),
        (
            "Error from server (Conflict): Operation cannot be fulfilled: Precondition failed: UID in precondition",
            "Conflict",
        ),
        ('error: context "nope" does not exist', "NoContext"),
        (  # a webhook down behind a reachable API server (Kueue's, here): not an unreachable cluster
            'Error from server (InternalError): error when creating "STDIN": Internal error occurred: failed calling '
            'webhook "mjob.kb.io": failed to call webhook: Post "https://127.0.0.1:39161/mutate-batch-v1-job?'
            'timeout=10s": dial tcp 127.0.0.1:39161: connect: connection refused',
            "",
        ),
        (  # a server-side timeout (504): the create may still happen
            'Error from server (Timeout): error when creating "STDIN": the server was unable to return a response in '
            "the time allotted, but may still be processing the request (post jobs.batch)",
            "Unreachable",
        ),
        (
            'error: error when creating "STDIN": Post "https://127.0.0.1:6443/apis/batch/v1/namespaces/x/jobs": '
            "net/http: timeout awaiting response headers",
            "Unreachable",
        ),
        (
            'error: error when creating "STDIN": Post "https://127.0.0.1:6443/api/v1/namespaces/x/services": '
            "http2: client connection lost",
            "Unreachable",
        ),
        (
            'error: error when creating "STDIN": Post "https://127.0.0.1:6443/api/v1/namespaces/x/services": '
            "net/http: request canceled while waiting for connection",
            "Unreachable",
        ),
        ("error: something else entirely", ""),
    ],
)
def test_stderr_is_classified(stderr: str, reason: str) -> None:
    assert kubectl_error_kind(stderr) == reason


def test_error_line_is_scrubbed() -> None:
    line = first_error_line("warning: x\nerror: bad value AKIAABCDEFGHIJKLMNOP in field\n")
    assert "AKIAABCDEFGHIJKLMNOP" not in line
    assert line.startswith("error: bad value")


def test_errors_map_to_exit_codes() -> None:
    kc = Kubectl(ClusterOptions())
    assert isinstance(kc.error_for("The connection to the server localhost:8080 was refused"), ClusterUnreachableError)
    assert isinstance(kc.error_for('error: context "x" does not exist'), UsageError)
    err = kc.error_for('Error from server (NotFound): jobs.batch "x" not found')
    assert isinstance(err, KubectlError) and err.reason == "NotFound"


def test_global_flags_are_passed_to_every_call() -> None:
    opts = ClusterOptions(context="c", namespace="n", kubeconfig="/k", request_timeout="5s")
    assert opts.flags() == ["--kubeconfig=/k", "--context=c", "--namespace=n", "--request-timeout=5s"]
    assert "--namespace=n" not in opts.flags(namespaced=False)


def test_missing_kubectl_binary_is_reported_as_unreachable() -> None:
    kc = Kubectl(ClusterOptions(), binary="/nonexistent/kubectl")
    with pytest.raises(ClusterUnreachableError, match="kubectl not found"):
        kc.run(["version"])


def _stand_in(tmp_path: Path, body: str) -> str:
    path = tmp_path / "kubectl"
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(0o755)
    return str(path)


def test_a_real_process_gets_argv_and_stdin_and_hands_back_output_and_exit_code(tmp_path: Path) -> None:
    binary = _stand_in(tmp_path, 'printf "%s|" "$@"; cat; echo "Error from server (NotFound): x" >&2; exit 1\n')
    kc = Kubectl(ClusterOptions(context="c", namespace="n"), binary=binary)
    result = kc.run(["get", "job", "x"], stdin="héllo", check=False)
    assert (result.stdout, result.returncode) == ("--context=c|--namespace=n|get|job|x|héllo", 1)
    assert result.stderr == "Error from server (NotFound): x\n" and kc.calls == 1
    with pytest.raises(KubectlError) as raised:
        kc.run(["get", "job", "x"])
    assert raised.value.reason == "NotFound"


def test_a_started_call_gets_its_input_before_anyone_waits_for_it(tmp_path: Path) -> None:
    """A dry run started early must send its request while the verb still reads other answers."""
    got = tmp_path / "got"
    script = f"cat > '{got}.part'; mv '{got}.part' '{got}'; echo ok\n"
    kc = Kubectl(ClusterOptions(), binary=_stand_in(tmp_path, script))
    running = kc.start(["create", "--dry-run=server", "-f", "-"], stdin='{"kind": "Job"}')
    deadline = time.monotonic() + 20
    while not got.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert got.read_text() == '{"kind": "Job"}'  # read and ended before wait() was called
    assert running.wait().stdout == "ok\n"
    big = "x" * 100_000  # more than a pipe takes at once: written when the answer is read, as before
    assert kc.run(["create", "-f", "-"], stdin=big).stdout == "ok\n" and got.read_text() == big


def _running(pid: int) -> bool:
    """True while the process exists and has not ended (a zombie has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_a_call_past_its_timeout_is_killed_and_reported_as_unreachable(tmp_path: Path) -> None:
    pid_file, finished = tmp_path / "pid", tmp_path / "finished"
    # 30 s in short sleeps: killing the shell leaves at most a 0.1 s sleep holding its output pipe
    body = f"echo $$ > '{pid_file}'; i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done; : > '{finished}'\n"
    kc = Kubectl(ClusterOptions(), binary=_stand_in(tmp_path, body))
    with pytest.raises(ClusterUnreachableError, match=r"kubectl get timed out after 0.5s"):
        kc.run(["get", "pods"], timeout=0.5)
    assert not _running(int(pid_file.read_text(encoding="utf-8")))  # killed at its timeout, not left running
    assert not finished.exists()  # and not waited for until it ended by itself


def test_a_kubectl_that_cannot_be_executed_is_one_line_error(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"\x7fELF not really")
    garbage.chmod(0o755)
    with pytest.raises(TaoError, match=r"^could not run kubectl: OSError$"):
        Kubectl(binary=str(garbage)).run(["version"])
    not_executable = tmp_path / "plain"
    not_executable.write_text("#!/bin/sh\n")
    with pytest.raises(ClusterUnreachableError, match="kubectl not found on PATH"):
        Kubectl(binary=str(not_executable)).run(["version"])


@pytest.mark.parametrize(
    ("given", "seen"),
    [
        ({}, "off 256MiB"),
        ({"GOGC": "100"}, "100 -"),  # the user's tuning wins, and no limit is added to it
        ({"GOMEMLIMIT": "64MiB"}, "- 64MiB"),
    ],
)
def test_a_short_call_runs_with_go_collection_tuned_unless_the_user_tuned_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: dict[str, str], seen: str
) -> None:
    for name in ("GOGC", "GOMEMLIMIT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in given.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("KUBECTL_TAO_SEEN", "kept")  # the rest of the environment goes along
    binary = _stand_in(tmp_path, 'echo "${GOGC:--} ${GOMEMLIMIT:--} $KUBECTL_TAO_SEEN"\n')
    assert Kubectl(binary=binary).run(["version"]).stdout == f"{seen} kept\n"


def _counting_stand_in(tmp_path: Path) -> tuple[str, Path]:
    """A kubectl that appends its pid and argv to a log, then answers with its argv after a short while."""
    log = tmp_path / "runs.log"
    return _stand_in(tmp_path, f'echo "$$ $*" >> "{log}"; sleep 0.2; printf "%s " "$@"\n'), log


def test_a_prestarted_read_is_taken_over_by_the_same_command_line(tmp_path: Path) -> None:
    binary, log = _counting_stand_in(tmp_path)
    options = ClusterOptions(context="c")
    prestart(options, ["get", "jobs,pods", "-n", "ns"], namespaced=False, binary=binary)
    kc = Kubectl(options, binary=binary)
    result = kc.run(["get", "jobs,pods", "-n", "ns"], namespaced=False)
    assert result.stdout == "--context=c get jobs,pods -n ns " and kc.calls == 1
    assert len(log.read_text().splitlines()) == 1  # one process, started by prestart
    discard_prestarted()
    assert len(log.read_text().splitlines()) == 1


def test_a_prestarted_read_nobody_asks_for_is_killed_and_reaped(tmp_path: Path) -> None:
    binary, log = _counting_stand_in(tmp_path)
    options = ClusterOptions()
    prestart(options, ["get", "jobs,pods", "-n", "guessed"], namespaced=False, binary=binary)
    kc = Kubectl(options, binary=binary)
    # Another namespace, the namespaced flags, or a call with stdin: none of them is the prestarted command line.
    assert kc.run(["get", "jobs,pods", "-n", "other"], namespaced=False).stdout == "get jobs,pods -n other "
    assert Kubectl(ClusterOptions(namespace="guessed"), binary=binary).run(["get", "jobs,pods"]).returncode == 0
    assert kc.run(["get", "jobs,pods", "-n", "guessed"], namespaced=False, stdin="x").returncode == 0
    time.sleep(0.05)
    pids = [int(line.split()[0]) for line in log.read_text().splitlines()]
    assert len(pids) == 4
    discard_prestarted()
    with pytest.raises(ProcessLookupError):  # killed and reaped: no zombie left under this pid
        os.kill(pids[0], 0)


def test_a_prestart_that_cannot_start_is_no_error(tmp_path: Path) -> None:
    prestart(ClusterOptions(), ["get", "pods"], binary=str(tmp_path / "missing"))
    discard_prestarted()
    with pytest.raises(ClusterUnreachableError, match="kubectl not found"):
        Kubectl(ClusterOptions(), binary=str(tmp_path / "missing")).run(["get", "pods"])


def test_a_read_pipe_is_widened_where_the_system_allows() -> None:
    import fcntl

    from kubectl_tao.k8s import kubectl as kubectl_module

    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb") as pipe:
        os.close(write_end)
        kubectl_module._widen(pipe)
        limit = int(Path("/proc/sys/fs/pipe-max-size").read_text())
        assert fcntl.fcntl(pipe.fileno(), fcntl.F_GETPIPE_SZ) == min(kubectl_module._CHUNK_BYTES, limit)
    kubectl_module._widen(pipe)  # a closed pipe (or one over the user's quota): left as it is, no error


def test_pipe_streams_stdin_and_stdout_in_chunks_without_holding_either(tmp_path: Path) -> None:
    """`exec -i`'s path: FEED writes on its own thread while SINK reads, so a stream larger than both pipes
    flows through (a call that wrote all of stdin before reading stdout would deadlock here)."""
    kc = Kubectl(ClusterOptions(namespace="n"), binary=_stand_in(tmp_path, 'printf "%s|" "$@" >&2; cat\n'))
    block = b"x" * 65536
    got: list[int] = []

    def feed(pipe: object) -> None:
        for _ in range(64):  # 4 MiB
            pipe.write(block)  # type: ignore[attr-defined]

    done = kc.pipe(["exec", "-i", "pod", "--", "tar", "-x"], feed=feed, sink=lambda data: got.append(len(data)))
    assert sum(got) == 64 * len(block) and len(got) > 1
    assert (done.stdout, done.returncode) == ("", 0)
    assert done.stderr == "--namespace=n|exec|-i|pod|--|tar|-x|"


_POD_ID = "c353599ce53b5bdd85fa23a93c1fd3f858be75a95dfe0d2956ce7ed1cee4c2b3"
# client-go's port-forward, when nothing listens on the pod's port yet (containerd's answer inside the message)
_FORWARD_REFUSED = (
    "E1206 20:01:02.123456   4242 portforward.go:409] an error occurred forwarding 16006 -> 6006: error forwarding "
    f"port 6006 to pod {_POD_ID}, uid : failed to execute portforward in network namespace "
    '"/var/run/netns/cni-742d1a4e-4966-9085-47a1-fae6be80bc99": failed to connect to localhost:6006 inside '
    f'namespace "{_POD_ID}", IPv4: dial '
    "tcp4 127.0.0.1:6006: connect: connection refused IPv6 dial tcp6 [::1]:6006: connect: connection refused\n"
    "error: lost connection to pod\n"
)


def test_a_port_forward_refused_inside_the_pod_is_no_unreachable_cluster(tmp_path: Path) -> None:
    stand_in = _stand_in(tmp_path, f"cat >&2 <<'EOF'\n{_FORWARD_REFUSED}EOF\nexit 1\n")
    ended = Kubectl(ClusterOptions(), binary=stand_in).pipe(["port-forward", "pod/x", "16006:6006"], check=False)
    assert (ended.returncode, ended.stderr) == (1, _FORWARD_REFUSED)
    unreachable = "Unable to connect to the server: dial tcp 10.0.0.1:6443: connect: connection refused\n"
    stand_in = _stand_in(tmp_path, f"echo '{unreachable.strip()}' >&2; exit 1\n")
    with pytest.raises(ClusterUnreachableError, match="cluster unreachable"):
        Kubectl(ClusterOptions(), binary=stand_in).pipe(["port-forward", "pod/x", "16006:6006"], check=False)


def test_pipe_reports_the_exit_code_and_a_failing_feed_stops_kubectl(tmp_path: Path) -> None:
    kc = Kubectl(ClusterOptions(), binary=_stand_in(tmp_path, 'cat >/dev/null; echo "tar: write error" >&2; exit 1\n'))
    failed = kc.pipe(["exec", "-i", "pod"], feed=lambda pipe: pipe.write(b"data"), check=False)
    assert (failed.returncode, failed.stderr) == (1, "tar: write error\n")
    with pytest.raises(KubectlError, match="tar: write error"):
        kc.pipe(["exec", "-i", "pod"], feed=lambda pipe: pipe.write(b"data"))

    pid_file = tmp_path / "pid"
    kc = Kubectl(ClusterOptions(), binary=_stand_in(tmp_path, f"echo $$ > '{pid_file}'; exec cat >/dev/null\n"))

    def broken(pipe: object) -> None:
        while not pid_file.exists():
            time.sleep(0.01)
        raise TaoError("LOCAL x: it changed while it was pushed; push again")

    with pytest.raises(TaoError, match="it changed while it was pushed"):
        kc.pipe(["exec", "-i", "pod"], feed=broken)
    assert not _running(int(pid_file.read_text(encoding="utf-8")))


def test_pipe_kills_kubectl_when_the_caller_is_interrupted(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    kc = Kubectl(ClusterOptions(), binary=_stand_in(tmp_path, f"echo $$ > '{pid_file}'; echo ready; exec sleep 30\n"))

    def sink(_data: bytes) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        kc.pipe(["exec", "pod"], sink=sink)
    assert not _running(int(pid_file.read_text(encoding="utf-8")))


def test_pipe_hands_a_reader_the_stream_and_drains_what_it_leaves(tmp_path: Path) -> None:
    kc = Kubectl(ClusterOptions(), binary=_stand_in(tmp_path, "head -c 3000000 /dev/zero; echo done >&2\n"))
    read: list[int] = []
    done = kc.pipe(["exec", "pod", "--", "tar", "-c"], reader=lambda stream: read.append(len(stream.read(1000))))
    assert read == [1000] and (done.returncode, done.stderr) == (0, "done\n")
