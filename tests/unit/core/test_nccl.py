"""A job's NCCL settings (core/nccl.py): the flags, and on several nodes what the cluster's last probe passed with
wherever no flag sets the same variable, told in a note."""

from __future__ import annotations

import pytest

from kubectl_tao.core.errors import UsageError
from kubectl_tao.core.nccl import settings

PROBED = ({"NCCL_SOCKET_IFNAME": "eth1", "NCCL_IB_HCA": "mlx5", "NCCL_IB_DISABLE": "1"}, "2026-01-02T03:04:05Z")


def test_the_flags_alone_on_one_node() -> None:
    found = settings("eth0", None, ("NCCL_DEBUG=INFO",), 1, PROBED)
    assert (found.socket_ifname, found.ib_hca, found.env, found.notes) == ("eth0", None, {"NCCL_DEBUG": "INFO"}, [])


def test_a_probe_fills_what_no_flag_sets_and_says_so() -> None:
    found = settings("eth0", None, ("NCCL_IB_DISABLE=0",), 2, PROBED)
    assert (found.socket_ifname, found.ib_hca, found.env) == ("eth0", "mlx5", {"NCCL_IB_DISABLE": "0"})
    assert found.notes == [
        "applying the NCCL settings this cluster's probe passed with (2026-01-02T03:04:05Z): NCCL_IB_HCA=mlx5; "
        "override with --nccl-socket-ifname, --nccl-ib-hca or --nccl-env NAME=VALUE"
    ]


def test_no_probe_no_note() -> None:
    found = settings(None, None, (), 4, ({}, ""))
    assert (found.socket_ifname, found.ib_hca, found.env, found.notes) == (None, None, {}, [])


def test_a_bad_nccl_env_is_refused_as_its_flag() -> None:
    with pytest.raises(UsageError, match=r"^--nccl-env #1 must look like KEY=VALUE"):
        settings(None, None, ("NCCL_DEBUG",), 2, PROBED)
