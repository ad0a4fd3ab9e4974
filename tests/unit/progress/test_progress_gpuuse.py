"""GPU use from nvidia-smi's CSV query and the DCGM exporter's metrics page: real texts, the values the tools
print when they cannot say, hostile and torn texts, the idle and low-memory flags and the table."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubectl_tao.progress.gpuuse import (
    HEADERS,
    GpuUse,
    RankUse,
    parse_dcgm,
    parse_nvidia_smi,
    summary,
    table_rows,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "progress"
DCGM_PAGE = (FIXTURES / "dcgm-exporter-metrics.txt").read_text(encoding="utf-8")
UUID0 = "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"
UUID1 = "GPU-b3e0a1c2-77f1-4c3d-9e0b-5a6f2d1c8e94"
# `nvidia-smi --query-gpu=index,uuid,utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits`
# on a node with two GPUs: ", "-joined fields, no units, one line per GPU.
SMI = f"0, {UUID0}, 87, 40213, 143771\n1, {UUID1}, 0, 0, 143771\n"


def test_nvidia_smi_csv_reads_one_gpu_a_line() -> None:
    gpus, reason = parse_nvidia_smi(SMI)
    assert reason is None
    assert gpus == [GpuUse(0, UUID0, 87.0, 40213, 143771), GpuUse(1, UUID1, 0.0, 0, 143771)]
    assert [gpu.idle for gpu in gpus] == [False, True]


def test_values_nvidia_smi_cannot_give_read_as_unknown_not_zero() -> None:
    gpus, _ = parse_nvidia_smi(f"0, {UUID0}, [N/A], [N/A], 81559\n1, {UUID1}, [Not Supported], 10, [Not Supported]\n")
    assert gpus == [GpuUse(0, UUID0, None, None, 81559), GpuUse(1, UUID1, None, 10, None)]
    assert gpus[0].idle is None and gpus[0].to_dict()["idle"] is None
    rank = RankUse(0, "p", "n", tuple(gpus), "nvidia-smi")
    assert not rank.idle and not rank.low_memory


@pytest.mark.parametrize("said", [
    "Failed to initialize NVML: Unknown Error",
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
    "NVIDIA driver is installed and running.",
    "No devices were found",
])
def test_what_nvidia_smi_prints_instead_of_its_csv_is_the_reason(said: str) -> None:
    assert parse_nvidia_smi(said + "\n") == ([], f"nvidia-smi: {said}")


def test_an_empty_answer_says_no_gpu_was_printed() -> None:
    assert parse_nvidia_smi("") == ([], "nvidia-smi printed no GPU")


def test_a_torn_last_line_is_not_read_as_a_gpu() -> None:
    gpus, _ = parse_nvidia_smi(f"0, {UUID0}, 87, 40213, 143771\n1, {UUID1}, 5")
    assert [gpu.index for gpu in gpus] == [0]


def test_hostile_text_in_nvidia_smi_output_is_redacted_sanitized_and_bounded() -> None:
    hostile = (
        "\x1b]0;owned\x07\x1b[2J" + "token=ghp_" + "a" * 36 + "\n"
        + "9" * 5_000_000 + "\n"
        + f"0, {UUID0}\x1b[31m, 87, 40213, 143771\n"
    )
    gpus, reason = parse_nvidia_smi(hostile.encode() + b"\xff\xfe\n")
    assert reason is None and gpus == [GpuUse(0, UUID0, 87.0, 40213, 143771)]
    (alone, why) = parse_nvidia_smi("\x1b]0;owned\x07token=ghp_" + "a" * 36 + "\u202e\n")
    assert alone == [] and why is not None
    assert "ghp_" not in why and "\x1b" not in why and "\u202e" not in why and "owned" not in why


def test_a_value_that_is_not_a_number_or_a_percent_reads_unknown() -> None:
    gpus, _ = parse_nvidia_smi("0, not-a-uuid, 250, -3, 1e9\n")
    assert gpus == [GpuUse(0, None, None, None, None)]


def test_the_dcgm_page_gives_each_pod_its_gpus_and_leaves_out_unallocated_ones() -> None:
    found = parse_dcgm(DCGM_PAGE)
    assert found == {("team-a", "dino-train-3f9a1c-0-x7b2k"): [GpuUse(0, UUID0, 93.0, 71129, 80996)]}


def test_the_exporters_old_label_names_are_read_too() -> None:
    page = DCGM_PAGE.replace('UUID="', 'uuid="').replace('container="', 'container_name="').replace(
        'namespace="', 'pod_namespace="').replace('pod="', 'pod_name="')
    assert parse_dcgm(page) == parse_dcgm(DCGM_PAGE)


def test_a_field_missing_from_the_page_reads_unknown() -> None:
    page = "".join(line + "\n" for line in DCGM_PAGE.splitlines() if "FB_FREE" not in line)
    (gpus,) = parse_dcgm(page).values()
    assert gpus == [GpuUse(0, UUID0, 93.0, 71129, None)]


def test_a_label_value_with_a_quote_or_comma_is_not_trusted() -> None:
    bad = ('DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="' + UUID0 + '",modelName="x",pod="a",namespace="b",'
           'container="c\\",pod=\\"victim"} 0\n')
    assert parse_dcgm(bad) == {}
    spoof = 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="' + UUID0 + '",pod="a,b",namespace="n"} 0\n'
    assert parse_dcgm(spoof) == {}


def test_hostile_dcgm_text_is_bounded_and_a_torn_last_line_is_skipped() -> None:
    torn = DCGM_PAGE.rstrip("\n")
    cut = torn[: torn.rindex("DCGM_FI_DEV_FB_USED{gpu=\"0\"")] + 'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-6'
    (gpus,) = parse_dcgm(cut).values()
    assert gpus[0].memory_used_mib is None
    noisy = ("\x1b[2J" + "x" * 5_000_000 + "\n").encode() + b"\xff\xc3(\n" + DCGM_PAGE.encode()
    assert parse_dcgm(noisy) == parse_dcgm(DCGM_PAGE)


def test_a_rank_is_idle_when_every_gpu_is_below_five_percent_and_low_memory_below_five_percent_used() -> None:
    busy = GpuUse(0, UUID0, 5.0, 4000, 80000)
    idle = GpuUse(1, UUID1, 4.9, 3999, 80000)
    assert not RankUse(0, "p0", "n", (busy,), "dcgm").idle
    assert not RankUse(0, "p0", "n", (busy,), "dcgm").low_memory
    assert RankUse(1, "p1", "n", (idle,), "dcgm").flags() == ["idle", "low-memory"]
    assert RankUse(2, "p2", "n", (busy, idle), "dcgm").flags() == []
    assert RankUse(3, "p3", "n", reason="x").flags() == []


def test_json_of_a_rank_carries_the_documented_keys_and_a_reason_only_when_unread() -> None:
    read = RankUse(0, "p0", "node-a", (GpuUse(0, UUID0, 87.0, 40213, 143771),), "nvidia-smi").to_dict()
    assert read == {
        "rank": 0, "pod": "p0", "node": "node-a",
        "gpus": [{"index": 0, "uuid": UUID0, "utilization": 87.0, "memory_used_mib": 40213,
                  "memory_total_mib": 143771, "idle": False}],
        "source": "nvidia-smi", "idle": False, "low_memory": False,
    }
    unread = RankUse(1, "p1", None, (), "nvidia-smi", "nvidia-smi did not answer within 10s").to_dict()
    assert unread["reason"] == "nvidia-smi did not answer within 10s" and unread["gpus"] == []


def test_table_rows_give_a_row_per_gpu_and_a_reason_row_per_unread_rank() -> None:
    ranks = [
        RankUse(0, "p0", "node-a", (GpuUse(0, UUID0, 87.0, 40213, 143771), GpuUse(1, UUID1, 0.0, 0, 143771)),
                "dcgm"),
        RankUse(1, "p1", None, (), "nvidia-smi", "nvidia-smi: No devices were found"),
    ]
    rows = table_rows(ranks)
    assert len(HEADERS) == len(rows[0])
    assert rows == [
        ["0", "p0", "node-a", "0", UUID0, "87%", "40213/143771 MiB", "-", "dcgm"],
        ["0", "p0", "node-a", "1", UUID1, "0%", "0/143771 MiB", "idle", "dcgm"],
        ["1", "p1", "<none>", "-", "-", "-", "-", "nvidia-smi: No devices were found", "-"],
    ]
    assert summary(ranks) is None
    idle = RankUse(2, "p2", "n", (GpuUse(0, UUID0, 1.0, 10, 80000),), "dcgm")
    assert summary([*ranks, idle]) == (
        "idle GPUs (below 5% busy) on rank 2; little GPU memory used (below 5%) on rank 2")
