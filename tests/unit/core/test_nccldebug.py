"""diagnosis/nccldebug.py: the network NCCL chose, read from NCCL_DEBUG=INFO lines, and the warning when RDMA devices
exist but TCP sockets were used. The lines are NCCL's (src/init.cc `Using network %s`, net_ib's `NET/IB : No
device found.` / `NET/IB : Using ...`, net_socket's `NET/Socket : Using ...`, transport.cc's channel lines) with
the `host:pid:tid [dev] NCCL INFO ` prefix NCCL gives them."""

from __future__ import annotations

from kubectl_tao.diagnosis import nccldebug

SOCKETS_NO_IB = """\
[rank 0] llama-ft-0:245:260 [0] NCCL INFO NET/IB : No device found.
[rank 0] llama-ft-0:245:260 [0] NCCL INFO NET/Socket : Using [0]eth0:10.244.1.7<0>
[rank 0] llama-ft-0:245:260 [0] NCCL INFO Using network Socket
[rank 0] llama-ft-0:245:262 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0
[rank 0] llama-ft-0:245:262 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
"""
IB = """\
llama-ft-1:231:250 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.244.2.9<0>
llama-ft-1:231:250 [0] NCCL INFO Using network IB
llama-ft-1:231:252 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA
"""
RDMA_BUT_SOCKETS = """\
llama-ft-1:231:250 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.244.2.9<0>
llama-ft-1:231:250 [0] NCCL INFO NET/Socket : Using [0]eth0:10.244.2.9<0>
llama-ft-1:231:250 [0] NCCL INFO Using network Socket
llama-ft-1:231:252 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
"""


def test_sockets_without_rdma_devices_is_said_without_a_warning() -> None:
    net = nccldebug.read(SOCKETS_NO_IB)
    assert net.networks == ["Socket"] and net.transports == ["NET/Socket"] and net.ib_missing
    assert net.summary() == "NET/Socket"
    assert nccldebug.warning(net) == ""


def test_ib_is_read_from_the_channels() -> None:
    net = nccldebug.read(IB)
    assert (net.summary(), net.ib_devices, net.networks) == ("NET/IB", ["[0]mlx5_0:1/IB"], ["IB"])
    assert nccldebug.warning(net) == ""


def test_rdma_devices_with_sockets_used_is_a_warning() -> None:
    net = nccldebug.read(RDMA_BUT_SOCKETS)
    said = nccldebug.warning(net)
    assert said.startswith("RDMA devices exist ([0]mlx5_0:1/IB) but NCCL used TCP sockets")
    mixed = nccldebug.read(SOCKETS_NO_IB + IB.replace("Using network IB", "x").replace("via NET/IB/0/GDRDMA", "x"))
    assert "nodes differ" in nccldebug.warning(mixed)


def test_nothing_said_without_nccl_debug_and_bounded_work() -> None:
    assert not nccldebug.read("nccl-probe: rank 0 result ok backend=nccl\n").said
    # bounded work: each line is read on its first 2,000 characters (the time: bench/run.py --only redaction)
    long_lines = ("x NCCL INFO Channel 00/0 : " + "a" * 100_000 + " via NET/IB/0\n") * 20
    assert nccldebug.read(long_lines).transports == []
    assert nccldebug.read(long_lines + "x NCCL INFO Channel 01/0 : 0[0] -> 1[0] via P2P\n").transports == ["P2P"]
