"""diagnosis/causes.py: the table of causes read over the whole failure corpus (tests/fixtures/failures/), one log
at a time and one multi-rank case at a time; facts, fixes, fallbacks, redaction and bounded work."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from kubectl_tao.diagnosis import causes
from kubectl_tao.diagnosis.causes import ERR_INFRA, ERR_PROGRAM, RankLog, cause_in_log, diagnose

CORPUS_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "failures"
CORPUS: list[dict[str, Any]] = json.loads((CORPUS_DIR / "corpus.json").read_text(encoding="utf-8"))

# The corpus names causes by what the text shows; the table by the REASON `status` prints.
REASON = {
    "cuda-oom": "CudaOOM",
    "nccl-invalid-usage": "NcclInvalidUsage",
    "nccl-system-error": "NcclSystemError",
    "nccl-remote-error": "NcclRemoteError",
    "nccl-internal-error": "NcclInternalError",
    "nccl-watchdog-timeout": "CollectiveTimeout",
    "gloo-timeout": "CollectiveTimeout",
    "store-timeout": "StoreTimeout",
    "rendezvous-timeout": "RendezvousTimeout",
    "remote-rank-died": "RemoteRankDied",
    "rank-killed": "RankKilled",
    "shm": "ShmExhausted",
    "cuda-device-assert": "DeviceAssert",
    "cuda-illegal-memory-access": "IllegalMemoryAccess",
    "nan": "NanLoss",
    "no-gpu": "NoGpuVisible",
    "gpu-hardware": "GpuHardware",
    "module-not-found": "MissingModule",
    "file-not-found": "MissingFile",
    "hf-auth": "AccessDenied",
    "s3-access-denied": "AccessDenied",
    "ngc-auth": "AccessDenied",
    "python-exception": "ProgramError",
    "stalled": "Stalled",
}
CREDENTIAL = re.compile(r"hf_[A-Za-z0-9]{34}\b|\bAKIA[0-9A-Z]{16}\b|nvapi-[A-Za-z0-9_-]{20,}")


def _text(name: str) -> str:
    return (CORPUS_DIR / name).read_text(encoding="utf-8")


def _pod_rank(entry: dict[str, Any]) -> int:
    """The rank of the pod that printed the log: N of a .rankN file (one rank a pod), else 0 (a single pod,
    whose ranks the text tells apart)."""
    return int(entry["facts"]["rank"]) if "case" in entry else 0


def _alone(entry: dict[str, Any]) -> bool:
    """A stalled rank whose own output shows no error: only its case tells (by the other ranks)."""
    return not (entry["facts"].get("role") == "stalled" and entry["cause"] == entry.get("case_cause"))


SINGLE = [entry for entry in CORPUS if _alone(entry)]
CASES: dict[str, list[dict[str, Any]]] = {}
for _entry in CORPUS:
    if "case" in _entry:
        CASES.setdefault(_entry["case"], []).append(_entry)


def test_every_corpus_cause_has_a_row_and_every_row_is_reached() -> None:
    shown = {entry["cause"] for entry in CORPUS} | {entry["case_cause"] for entry in CORPUS if "case_cause" in entry}
    assert set(REASON) == shown
    assert set(REASON.values()) == set(causes.BY_NAME), "every row of the table is shown by the corpus"


@pytest.mark.parametrize("entry", SINGLE, ids=[entry["file"] for entry in SINGLE])
def test_each_log_names_its_cause_class_and_evidence_line(entry: dict[str, Any]) -> None:
    found = cause_in_log(_text(entry["file"]), _pod_rank(entry))
    assert found is not None
    assert found.cause == REASON[entry["cause"]]
    assert found.err_class == entry["err_class"]
    assert entry["key_line"] in (found.evidence, *found.context)
    assert found.fix and found.summary
    if "rank" in entry["facts"]:
        assert found.rank == entry["facts"]["rank"]
    if "local_rank" in entry["facts"]:
        assert found.facts["local_rank"] == entry["facts"]["local_rank"]


@pytest.mark.parametrize("case", sorted(CASES), ids=sorted(CASES))
def test_each_case_names_the_job_cause_and_the_rank(case: str) -> None:
    entries = CASES[case]
    logs = [
        RankLog(entry["facts"]["rank"], _text(entry["file"]), pod=f"job-{entry['facts']['rank']}") for entry in entries
    ]
    found = diagnose(logs)
    assert found is not None
    cause = entries[0]["case_cause"]
    assert found.cause == REASON[cause]
    first = [e for e in entries if e["facts"].get("role") == "first-failure"]
    if first:
        assert found.rank == first[0]["facts"]["rank"]
        assert found.evidence == first[0]["key_line"]
        assert found.pod == f"job-{found.rank}"
    stalled = [e for e in entries if e["facts"].get("stalled_rank") is not None]
    if stalled:
        rank = stalled[0]["facts"]["stalled_rank"]
        assert found.facts["stalled_rank"] == rank
        key = next(e["key_line"] for e in entries if e["facts"]["rank"] == rank)
        assert found.facts["stalled_evidence"] == key
        assert f"rank {rank} stopped first" in found.detail
    followers = [e for e in entries if e["facts"].get("role") == "follower"]
    if followers and first:
        assert found.err_class == first[0]["err_class"], "the job's class is its first failure's"


def test_rank_order_does_not_change_the_answer() -> None:
    entries = CASES["python-exception--remote-rank-died"]
    logs = [RankLog(e["facts"]["rank"], _text(e["file"])) for e in entries]
    assert diagnose(logs) == diagnose(list(reversed(logs)))


def test_single_pod_of_four_ranks_names_the_raising_rank() -> None:
    for name in (
        "python-exception--single-pod-4-ranks.log",
        "python-exception--debian-torch-1.13-single-pod-4-ranks.log",
    ):
        found = cause_in_log(_text(name))
        assert found is not None
        assert (found.cause, found.rank, found.facts["local_rank"]) == ("ProgramError", 3, 3)
        assert found.facts["exception"] == "ValueError"
        assert "ValueError raised by rank 3" in found.detail


def test_root_cause_block_is_read() -> None:
    root = causes.root_cause(_text("rank-killed--sigkill.rank1.log").splitlines())
    assert root is not None
    assert (root.rank, root.local_rank, root.exitcode, root.signal) == (1, 0, -9, "SIGKILL")
    assert root.time == "2026-12-04_18:30:39"
    debian = causes.root_cause(_text("rank-killed--debian-torch-1.13-sigkill.rank1.log").splitlines())
    assert debian is not None and debian.signal == "SIGKILL", "torch 1.13 prints no signal name: -9 is SIGKILL"
    assert causes.root_cause(["no banner here"]) is None


def test_oom_reads_sizes_and_tells_when_fragmentation_is_worth_a_setting() -> None:
    docs = cause_in_log(_text("cuda-oom--pytorch-org-docs-url.log"))
    assert docs is not None
    assert docs.facts["tried"] == "2.00 GiB" and docs.facts["capacity"] == "79.25 GiB"
    assert docs.facts["free"] == "1.21 GiB" and docs.facts["reserved_unallocated"] == "2.87 GiB"
    assert docs.facts["fragmented"] is True
    assert "expandable_segments:True" in docs.detail
    pod = cause_in_log(_text("cuda-oom--torch-2.15-in-pod.log"))
    assert pod is not None
    assert (pod.rank, pod.facts["gpu"], pod.facts["tried"], pod.facts["capacity"]) == (3, 3, "20.00 GiB", "139.81 GiB")
    assert pod.facts["fragmented"] is False and "expandable_segments" not in pod.detail
    assert "asked for 20.00 GiB; GPU 3 has 139.81 GiB in total, 17.94 GiB free" in pod.detail
    old = cause_in_log(_text("cuda-oom--torch-2.1-max-split-size.log"))
    assert old is not None and old.facts["capacity"] == "79.15 GiB", "torch 2.1 spelled it 'capacty'"
    assert old.facts["reserved_unallocated"] == "522.05 MiB"


def test_store_timeout_counts_the_ranks_that_joined() -> None:
    found = cause_in_log(_text("store-timeout--tcpstore-clients.rank0.log"), 0)
    assert found is not None
    assert (found.facts["joined"], found.facts["expected"]) == (1, 2)
    assert "1/2 ranks joined; 1 never reached rank 0" in found.detail
    client = cause_in_log(_text("store-timeout--debian-torch-1.13-client-connect.rank1.log"), 1)
    assert client is not None
    assert client.facts["master"] == "llama-ft-0.llama-ft:29500" and client.facts["timeout_ms"] == 20000


def test_nccl_errors_keep_their_last_error_line_and_kind() -> None:
    system = cause_in_log(_text("nccl-system-error--ib-reg-mr.rank0.log"), 0)
    assert system is not None and system.cause == "NcclSystemError" and system.err_class == ERR_INFRA
    assert system.context == ["[rank0]: Call to ibv_reg_mr failed with error Cannot allocate memory"]
    assert system.facts["nccl_version"] == "2.30.7"
    dup = cause_in_log(_text("nccl-invalid-usage--duplicate-gpu.log"))
    assert dup is not None and dup.err_class == ERR_PROGRAM and "--nproc_per_node" in dup.fix
    peer = diagnose([RankLog(0, _text("rank-killed--nccl-peer.rank0.log"))])
    assert peer is not None and peer.cause == "NcclRemoteError"
    assert peer.facts["remote_rank"] == 1, "the peer's pod name says its rank"


def test_watchdog_timeout_names_op_and_seq() -> None:
    found = cause_in_log(_text("nccl-watchdog-timeout--allreduce.rank0.log"), 0)
    assert found is not None
    assert (found.facts["op"], found.facts["seq"], found.facts["timeout_ms"]) == ("ALLREDUCE", 1244, 600000)


def test_no_gpu_is_the_jobs_own_error_when_it_asked_for_none() -> None:
    logs = [RankLog(0, _text("no-gpu--no-cuda-gpus.log"))]
    asked = diagnose(logs, gpus_requested=1)
    assert asked is not None and asked.err_class == ERR_INFRA
    none = diagnose(logs, gpus_requested=0)
    assert none is not None and none.err_class == ERR_PROGRAM and "--gpus" in none.fix
    cpu = cause_in_log(_text("no-gpu--debian-torch-1.13-not-compiled.log"))
    assert cpu is not None and "CPU-only build" in cpu.fix


def test_access_denied_says_which_service_and_never_the_credential() -> None:
    for entry in CORPUS:
        text = _text(entry["file"])
        found = cause_in_log(text, _pod_rank(entry))
        assert found is not None
        shown = json.dumps(found.to_dict()) + json.dumps(causes.error_blocks(text))
        assert not CREDENTIAL.search(shown), entry["file"]
    echoed = cause_in_log(_text("hf-auth--invalid-token-echoed.log"))
    assert echoed is not None and echoed.facts["what"] == "Hugging Face: invalid token"
    s3 = cause_in_log(_text("s3-access-denied--get-object.log"))
    assert s3 is not None and s3.facts["operation"] == "GetObject" and "S3" in s3.fix


def test_a_credential_on_the_evidence_line_is_redacted() -> None:
    token = "hf_" + "FakeCanaryUnitx7Q2mR9vL4nB8kT3wZab"
    found = cause_in_log(f"Traceback (most recent call last):\nValueError: bad token HF_TOKEN={token}\n")
    assert found is not None and found.cause == "ProgramError"
    assert token not in found.evidence and "REDACTED" in found.evidence


def test_escape_sequences_are_removed_and_lines_capped() -> None:
    found = cause_in_log("\x1b[31mRuntimeError: No CUDA GPUs are available\x1b[0m\x1b]0;title\x07\n")
    assert found is not None and found.cause == "NoGpuVisible"
    assert found.evidence == "RuntimeError: No CUDA GPUs are available"
    long = cause_in_log("ValueError: " + "x" * 10_000)
    assert long is not None and len(long.evidence) < causes.EVIDENCE_CHARS + 40
    assert long.evidence.endswith("more characters]")


def test_unknown_output_falls_back_to_the_last_error_looking_lines() -> None:
    text = "epoch 1\nepoch 2\nsegfault in the data loader\nabort: worker failed to start\nbye\n"
    found = diagnose([RankLog(2, text, exit_code=1), RankLog(0, "all fine\n")], first_failed_rank=2)
    assert found is not None
    assert (found.cause, found.rank, found.err_class) == ("ProgramError", 2, ERR_PROGRAM)
    assert found.evidence == "abort: worker failed to start"
    assert found.facts["unrecognized"] is True
    quiet = diagnose([RankLog(0, "just a line\n")])
    assert quiet is not None and quiet.evidence == "just a line", "never nothing while something was printed"
    assert diagnose([RankLog(0, ""), RankLog(1, "\n\n")]) is None
    assert cause_in_log("") is None


def test_error_blocks_give_each_ranks_first_exception() -> None:
    blocks = dict(causes.error_blocks(_text("python-exception--single-pod-4-ranks.log")))
    assert None not in blocks, "torchrun's own lines are not a rank's error"
    assert blocks[3][0] == "[rank3]: Traceback (most recent call last):"
    assert blocks[3][-1] == "[rank3]: ValueError: corrupt record in shard 00003 at offset 1048576"
    assert "Connection closed by peer" in blocks[0][-1]
    single = causes.first_error_block(_text("module-not-found--timm.log"))
    assert single[0] == "Traceback (most recent call last):"
    assert single[-1] == "ModuleNotFoundError: No module named 'timm'"
    assert causes.first_error_block("all good\nstep 1\n") == []


def test_hostile_text_gets_a_bounded_answer() -> None:
    """Long runs, one huge line and many error lines: the quote and the blocks stay small. The work is bounded by
    construction (each line read on its first LINE_CHARS characters, no pattern that backtracks without bound:
    test_regex_shapes.py); bench/run.py --only redaction measures its time."""
    hostile = [
        "Error: " * 50_000,
        "[rank1]: " + "a" * 300_000,
        ("Timed out waiting " + "9" * 1000 + "ms ") * 200,
        "loss " + " " * 100_000 + "is nan",
        "\n".join("ValueError: x" for _ in range(50_000)),
    ]
    for text in hostile:
        found = cause_in_log(text)
        assert found is not None and len(found.evidence or "") <= causes.EVIDENCE_CHARS + 40
        for _, block in causes.error_blocks(text):
            assert 0 < len(block) <= 40 and all(len(line) <= 4 * causes.LINE_CHARS for line in block)


def test_sixty_four_ranks_name_the_one_that_raised() -> None:
    follower = _text("python-exception--remote-rank-died.rank0.log")
    logs = [RankLog(r, follower.replace("[rank0]", f"[rank{r}]")) for r in range(64)]
    logs[37] = RankLog(37, _text("python-exception--remote-rank-died.rank1.log").replace("[rank1]", "[rank37]"))
    found = diagnose(logs)
    assert found is not None and (found.cause, found.rank) == ("ProgramError", 37)


def test_err_class_is_one_of_the_two() -> None:
    for cause in causes.CAUSES:
        assert cause.err_class in (ERR_INFRA, ERR_PROGRAM)
        assert all(sign.err_class in (None, ERR_INFRA, ERR_PROGRAM) for sign in cause.signs)
        assert cause.tier in (causes.PRIMARY, causes.KILLED, causes.TIMEOUT, causes.GENERIC, causes.FOLLOWER)


def test_docs_table_is_the_modules_table() -> None:
    page = (Path(__file__).resolve().parents[3] / "docs" / "diagnosis.md").read_text(encoding="utf-8")
    start, end = "<!-- causes:start -->\n", "<!-- causes:end -->"
    shown = page[page.index(start) + len(start) : page.index(end)]
    assert shown == causes.markdown_table(), "regenerate docs/diagnosis.md's table (its section says how)"
    for cause in causes.CAUSES:
        assert f"| `{cause.name}` | {cause.err_class} |" in shown


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: CUDA error: out of memory",
        "cudaMalloc of 1024 MiB more after 79872 MiB failed: out of memory (cudaErrorMemoryAllocation)",
    ],
)
def test_an_out_of_memory_outside_pytorchs_allocator_is_cuda_oom(line: str) -> None:
    found = causes.cause_in_log(f"step 3\n{line}\n", 0)
    assert found is not None and found.cause == "CudaOOM" and found.err_class == ERR_PROGRAM


# CUDA's errors as its headers enumerate them: cudaError_t in driver_types.h (the runtime API) and CUresult in
# cuda.h (the driver API) give each error one value under two names; cudaGetErrorString and cuGetErrorString give
# its text. (code, runtime name, driver name, text) of the errors the causes name, as CUDA 12 defines them.
CUDA_ENUMERATIONS = [
    (2, "cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY", "out of memory", "CudaOOM"),
    (100, "cudaErrorNoDevice", "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected", "NoGpuVisible"),
    (214, "cudaErrorECCUncorrectable", "CUDA_ERROR_ECC_UNCORRECTABLE", "uncorrectable ECC error encountered",
     "GpuHardware"),
    (700, "cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered",
     "IllegalMemoryAccess"),
    (710, "cudaErrorAssert", "CUDA_ERROR_ASSERT", "device-side assert triggered", "DeviceAssert"),
    (719, "cudaErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure", "GpuHardware"),
]


def test_the_cuda_errors_are_cudas_own_enumerations() -> None:
    assert [(e.code, e.runtime, e.driver, e.text) for e in causes.CUDA_ERRORS] == [
        row[:4] for row in CUDA_ENUMERATIONS
    ]
    # every sign in torch's wording ("CUDA error: " + cudaGetErrorString) is one of them
    for cause in causes.CAUSES:
        for sign in cause.signs:
            if sign.pattern.pattern.startswith("CUDA error: "):
                text = sign.pattern.pattern.removeprefix("CUDA error: ")
                assert any(e.text == text for e in causes.CUDA_ERRORS), sign.pattern.pattern


def _as_programs_print(code: int, runtime: str, driver: str, text: str) -> dict[str, str]:
    """One CUDA error as each kind of program prints it, in the formats their sources write."""
    return {
        # torch's C10_CUDA_CHECK: "CUDA error: " + cudaGetErrorString
        "torch": f"torch.AcceleratorError: CUDA error: {text}",
        # CuPy: CUDARuntimeError and CUDADriverError are '%s: %s' % (the error's name, its string)
        "cupy runtime": f"cupy_backends.cuda.api.runtime.CUDARuntimeError: {runtime}: {text}",
        "cupy driver": f"cupy_backends.cuda.api.driver.CUDADriverError: {driver}: {text}",
        # XLA's ToStatusSlow: "CUDA error: " + detail + ": " + cuGetErrorName + ": " + cuGetErrorString
        "jax": f"jaxlib.xla_extension.XlaRuntimeError: INTERNAL: CUDA error: Failed to launch CUDA kernel: "
        f"{driver}: {text}.",
        # Numba's CudaAPIError: "[%s] %s" % (code, "Call to %s results in %s" % (function, name))
        "numba": f"numba.cuda.cudadrv.driver.CudaAPIError: [{code}] Call to cuMemcpyDtoH results in {driver}",
        # TensorRT's logger: "Error Code 1: Cuda Runtime (" + cudaGetErrorString + ")"
        "tensorrt": f"[12/06/2026-10:14:03] [TRT] [E] 1: [cudaResources.cpp::~ScopedCudaEvent::24] Error Code 1: "
        f"Cuda Runtime ({text})",
    }


@pytest.mark.parametrize("row", CUDA_ENUMERATIONS, ids=[row[1] for row in CUDA_ENUMERATIONS])
def test_each_cuda_cause_is_named_whichever_api_printed_the_error(row: tuple[Any, ...]) -> None:
    from kubectl_tao.restarts import signs

    code, runtime, driver, text, reason = row
    for program, line in _as_programs_print(code, runtime, driver, text).items():
        found = causes.cause_in_log(f"step 3 loss 0.41\nTraceback (most recent call last):\n{line}\n", 0)
        assert found is not None and found.cause == reason, (program, line)
        assert found.err_class == causes.BY_NAME[reason].err_class
        if runtime in line or driver in line:  # the name says the code: explain shows both
            assert found.facts["cuda_error"] == runtime and found.facts["cuda_code"] == code
            assert f"CUDA error {code} ({runtime})" in found.detail
        # the pod's entrypoint reads the same line the same way (its signs, as POSIX EREs)
        picked = signs.output_cause(line + "\n")
        assert picked is not None and picked.cause == reason, (program, line)


def test_an_illegal_memory_access_raised_from_a_cupy_kernel_is_named() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/workspace/kernel_step.py", line 57, in <module>\n'
        "    out = fused(x, idx)\n"
        '  File "cupy/_core/_kernel.pyx", line 1375, in cupy._core._kernel.ufunc.__call__\n'
        "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorIllegalAddress: an illegal memory access was "
        "encountered\n"
        "Exception ignored in: 'cupy.cuda.memory.PooledMemory.__dealloc__'\n"
        "cupy_backends.cuda.api.driver.CUDADriverError: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was "
        "encountered\n"
    )
    found = causes.cause_in_log(text, 1)
    assert found is not None and (found.cause, found.err_class, found.rank) == ("IllegalMemoryAccess", ERR_PROGRAM, 1)
    assert found.evidence.startswith("cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorIllegalAddress")
    assert found.detail == "CUDA error 700 (cudaErrorIllegalAddress)"


def test_the_stall_watchs_line_names_stalled_and_a_program_saying_stalled_does_not() -> None:
    found = cause_in_log(_text("stalled--tao-train-hang.log"))
    assert found is not None and (found.cause, found.err_class) == ("Stalled", ERR_INFRA)
    assert found.detail == "no output and no status.json growth for 10s"
    assert "--max-restarts" in found.fix and "--stall-timeout" in found.fix
    other = cause_in_log("kubectl-tao: stalled: the program printed this itself\n")
    assert other is not None and other.cause != "Stalled" and not causes.names_a_cause(other)


def test_a_rank_the_stall_watch_ended_is_stalled_whatever_it_printed_before() -> None:
    stall = _text("stalled--tao-train-hang.log")
    earlier = "FileNotFoundError: [Errno 2] No such file or directory: '/data/optional.json'\n"
    found = causes.diagnose([causes.RankLog(0, earlier + stall)])
    assert found is not None and (found.cause, found.err_class) == ("Stalled", ERR_INFRA)
    # another rank's own error is still read as that rank's
    other = causes.diagnose([causes.RankLog(0, stall), causes.RankLog(1, earlier)], first_failed_rank=1)
    assert other is not None and other.cause == "MissingFile" and other.rank == 1


def _witness_lines() -> list[str]:
    """Real lines for the signs: every corpus log's lines, every CUDA error as each program prints it, and the
    out-of-memory lines of programs outside PyTorch's allocator (above)."""
    lines = [line for path in sorted(CORPUS_DIR.glob("*.log")) for line in _text(path.name).splitlines()]
    for row in CUDA_ENUMERATIONS:
        lines.extend(_as_programs_print(*row[:4]).values())
    lines += ["RuntimeError: CUDA error: out of memory",
              "cudaMalloc of 1024 MiB more after 79872 MiB failed: out of memory (cudaErrorMemoryAllocation)"]
    return lines


def test_every_sign_has_a_real_line_and_the_prefilter_lets_each_such_line_through() -> None:
    """The prefilter skips a line before any sign is tried: a sign whose lines it does not let through would be
    dead without a word. Each sign needs a real line here (add one to the corpus with a new sign), and every real
    line a sign matches must pass the prefilter (else add the sign's literal to causes._PREFILTER)."""
    reached: set[tuple[str, int]] = set()
    dropped: list[str] = []
    for line in _witness_lines():
        body = causes.RANK_PREFIX.sub("", line, count=1)
        for cause in causes.CAUSES:
            for index, sign in enumerate(cause.signs):
                if sign.pattern.search(body):
                    reached.add((cause.name, index))
                    if not causes._PREFILTER.search(line):
                        dropped.append(f"{cause.name} sign {index}: {line[:120]!r}")
    unreached = [f"{c.name} sign {i} ({s.pattern.pattern[:60]})" for c in causes.CAUSES
                 for i, s in enumerate(c.signs) if (c.name, i) not in reached]
    assert unreached == [], "signs with no real line in the corpus or the CUDA prints"
    assert dropped == [], "lines a sign matches that the prefilter skips"

