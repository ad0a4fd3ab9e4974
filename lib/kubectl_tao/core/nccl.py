"""The NCCL settings of a job: its flags (--nccl-socket-ifname, --nccl-ib-hca, --nccl-env), plus, for a
multi-node job, the settings this cluster's last NCCL probe passed with where no flag sets the same variable."""

from __future__ import annotations

from collections.abc import Sequence

from kubectl_tao.core.flagvalues import parse_key_values
from kubectl_tao.core.valueclass import Value, record

_OWN_FLAGS = ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA")


@record
class Nccl(Value):
    socket_ifname: str | None
    ib_hca: str | None
    env: dict[str, str]
    notes: list[str]  # what was applied from the probe, for the user


def settings(
    socket_ifname: str | None,
    ib_hca: str | None,
    nccl_env: Sequence[str],
    nodes: int,
    probed: tuple[dict[str, str], str],
) -> Nccl:
    """The flags' settings, with (multi-node) PROBED's applied: the probe's settings and when they were checked."""
    result = Nccl(socket_ifname, ib_hca, parse_key_values(list(nccl_env), "--nccl-env"), [])
    cached, checked_at = probed
    if nodes <= 1 or not cached:
        return result
    applied = []
    for key, value in cached.items():
        if key == "NCCL_SOCKET_IFNAME" and result.socket_ifname is None:
            result.socket_ifname = value
        elif key == "NCCL_IB_HCA" and result.ib_hca is None:
            result.ib_hca = value
        elif key not in _OWN_FLAGS and key not in result.env:
            result.env[key] = value
        else:
            continue
        applied.append(f"{key}={value}")
    if applied:
        result.notes.append(
            f"applying the NCCL settings this cluster's probe passed with ({checked_at}): {' '.join(applied)}; "
            "override with --nccl-socket-ifname, --nccl-ib-hca or --nccl-env NAME=VALUE"
        )
    return result
