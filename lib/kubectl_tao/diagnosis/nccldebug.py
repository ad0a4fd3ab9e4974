"""What NCCL says about its network when NCCL_DEBUG=INFO: the transport it chose and the RDMA devices it saw.

NCCL prints (src/init.cc, src/transport/net_ib, net_socket), each line after a `host:pid:tid [dev] NCCL INFO `
prefix:

    NET/IB : No device found.
    NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.1<0>
    NET/Socket : Using [0]eth0:10.244.1.7<0>
    Using network Socket                       (or IB, or an external plugin's name)
    Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0

`read` reduces a probe's logs to the network used, the transports of its channels and whether RDMA devices
were found; `warning` says when RDMA devices exist and NCCL still used TCP sockets. Pure; linear.
"""

from __future__ import annotations

import re

from kubectl_tao.core.valueclass import Factory, Value, record

_NETWORK = re.compile(r"NCCL INFO Using network (\S+)")
_IB_USING = re.compile(r"NCCL INFO NET/IB : Using (\[\d+\]\S+)")
_IB_NONE = "NET/IB : No device found"
_VIA = re.compile(r"NCCL INFO Channel \d+/\d+ : [^:]* via (NET/[A-Za-z]+|P2P|SHM|CollNet)")


@record
class NcclNet(Value):
    networks: list[str] = Factory(list)  # "Using network X", in the order first seen
    transports: list[str] = Factory(list)  # the `via` of the channel lines: NET/IB, NET/Socket, P2P, SHM
    ib_devices: list[str] = Factory(list)  # the first device of each `NET/IB : Using` line
    ib_missing: bool = False  # some rank printed `NET/IB : No device found`

    @property
    def said(self) -> bool:
        return bool(self.networks or self.transports or self.ib_devices or self.ib_missing)

    def summary(self) -> str:
        """`NET/IB` / `NET/Socket` (and intra-node P2P, SHM) as the ranks' channels used them."""
        over = self.transports or [f"NET/{name}" for name in self.networks]
        return ", ".join(over)


def read(text: str) -> NcclNet:
    net = NcclNet()
    for line in text.splitlines():
        if "NCCL INFO" not in line:
            continue
        line = line[:2000]
        for rx, found in ((_NETWORK, net.networks), (_VIA, net.transports), (_IB_USING, net.ib_devices)):
            m = rx.search(line)
            if m and m.group(1) not in found:
                found.append(m.group(1))
        if _IB_NONE in line:
            net.ib_missing = True
    return net


def warning(net: NcclNet) -> str:
    """Why the transport is worth a look, or ''."""
    sockets = "NET/Socket" in net.transports or "Socket" in net.networks
    ib_used = "NET/IB" in net.transports or "IB" in net.networks
    if not net.ib_devices or not sockets or ib_used:
        return ""
    if net.ib_missing:
        return (
            "some ranks found RDMA devices and others printed `NET/IB : No device found`: the nodes differ, and "
            "NCCL used TCP sockets"
        )
    return (
        f"RDMA devices exist ({', '.join(net.ib_devices)}) but NCCL used TCP sockets: check NCCL_IB_DISABLE, "
        "NCCL_NET and --nccl-ib-hca, and that the pods get the RDMA devices (the device plugin's resource, "
        "IPC_LOCK)"
    )
