"""cluster/apirelay/relay.py: the TCP relay that brings the local cluster's pods to the API server.

Run as the local cluster runs it (python3, its own process), between loopback sockets of the test's own."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "cluster" / "apirelay" / "relay.py"
NOT_ADDRESS = "is not IPV4:PORT (e.g. 10.88.0.1:0)"
HANG_GUARD = 30  # seconds a socket or process wait may block before the test fails instead of hanging


@contextlib.contextmanager
def relay(tmp_path: Path, upstream_port: int) -> Iterator[int]:
    port_file = tmp_path / "relay.port"
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--listen", "127.0.0.1:0", "--to", f"127.0.0.1:{upstream_port}",
         "--port-file", str(port_file)],
        stderr=subprocess.PIPE, text=True,
    )
    try:
        line = proc.stderr.readline() if proc.stderr else ""
        assert line.startswith("relay: listening on 127.0.0.1:"), line
        port = int(port_file.read_text())
        assert line.strip() == f"relay: listening on 127.0.0.1:{port}, forwarding to 127.0.0.1:{upstream_port}"
        yield port
    finally:
        proc.terminate()
        proc.wait(HANG_GUARD)


@pytest.fixture()
def upstream() -> Iterator[tuple[socket.socket, list[bytes]]]:
    """A server that reads a whole request (to its end of stream), answers it reversed, then closes."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    seen: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                data = b""
                while chunk := conn.recv(65536):
                    data += chunk
                seen.append(data)
                conn.sendall(data[::-1])

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server, seen
    server.close()


def exchange(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD) as conn:
        conn.sendall(payload)
        conn.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


def test_bytes_pass_both_ways_and_each_end_of_stream_is_passed_on(
    tmp_path: Path, upstream: tuple[socket.socket, list[bytes]]
) -> None:
    server, seen = upstream
    payload = bytes(range(256)) * 4096  # 1 MiB: many reads and writes each way
    with relay(tmp_path, server.getsockname()[1]) as port:
        assert exchange(port, payload) == payload[::-1]
        assert exchange(port, b"second connection") == b"noitcennoc dnoces"
    assert seen == [payload, b"second connection"]


def test_an_upstream_that_refuses_closes_the_clients_connection_and_says_why(tmp_path: Path) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    dead_port = closed.getsockname()[1]  # bound, never listening: connections are refused
    port_file = tmp_path / "relay.port"
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--listen", "127.0.0.1:0", "--to", f"127.0.0.1:{dead_port}",
         "--port-file", str(port_file)],
        stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline().startswith("relay: listening on")
        with socket.create_connection(("127.0.0.1", int(port_file.read_text())), timeout=HANG_GUARD) as conn:
            try:
                conn.sendall(b"anyone there?")
                answer = conn.recv(65536)  # b"": closed by the relay (or reset, if the bytes arrived after)
            except ConnectionError:
                answer = b""
        assert answer == b""
        assert proc.stderr.readline().strip() == f"relay: cannot connect to 127.0.0.1:{dead_port}: Connection refused"
    finally:
        proc.terminate()
        proc.wait(HANG_GUARD)
        closed.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--listen", "10.88.0.1", "--to", "127.0.0.1:1"], f"relay: argument --listen: '10.88.0.1' {NOT_ADDRESS}"),
        (["--listen", "127.0.0.1:0", "--to", "localhost:6443"],
         f"relay: argument --to: 'localhost:6443' {NOT_ADDRESS}"),
        (["--listen", "127.0.0.1:70000", "--to", "127.0.0.1:1"],
         f"relay: argument --listen: '127.0.0.1:70000' {NOT_ADDRESS}"),
        (["--to", "127.0.0.1:1"], "relay: the following arguments are required: --listen"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=HANG_GUARD,
                          check=False)
    assert (done.returncode, done.stderr, done.stdout) == (2, message + "\n", "")


def test_an_address_in_use_is_one_line_and_exit_2() -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        done = subprocess.run([sys.executable, str(SCRIPT), "--listen", f"127.0.0.1:{port}", "--to", "127.0.0.1:1"],
                              capture_output=True, text=True, timeout=HANG_GUARD, check=False)
    finally:
        taken.close()
    assert (done.returncode, done.stderr) == (2, f"relay: cannot listen on 127.0.0.1:{port}: Address already in use\n")
