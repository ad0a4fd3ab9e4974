"""The signs the rank entrypoint matches to decide a restart (restarts/signs.sign_rows, rendered as
TAO_RETRY_SIGNS): derived from diagnosis/causes.py's table, each a POSIX ERE that real `grep -E` reads as causes.py
reads its Python pattern, over every line of the failure corpus; the entrypoint (real processes) decides on the
same outputs as the sign the Python reading picks and the exit code's row of restarts/table.py say."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from kubectl_tao.core import ere
from kubectl_tao.diagnosis import causes
from kubectl_tao.manifests import kubelet_text
from kubectl_tao.restarts import signs, table

ROOT = Path(__file__).resolve().parents[3]
CORPUS_DIR = ROOT / "tests" / "fixtures" / "failures"
CORPUS: list[dict[str, Any]] = json.loads((CORPUS_DIR / "corpus.json").read_text(encoding="utf-8"))
ENTRY = ROOT / "templates" / "k8s" / "gang-restart-entrypoint.sh"
ROWS = signs.sign_rows()


def _corpus_lines() -> list[str]:
    lines: list[str] = []
    for entry in CORPUS:
        text = (CORPUS_DIR / entry["file"]).read_text(encoding="utf-8").replace("\0", "")  # as the entrypoint
        lines += [line[: causes.LINE_CHARS] for line in text.split("\n")]
    return lines


LINES = _corpus_lines()


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "lines.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    assert sum(1 for _ in path.open(encoding="utf-8")) == len(LINES)
    return path


# GNU grep (the torch images), and BusyBox's (the busybox image) where this machine has it
GREPS = [["grep"]] + ([["busybox", "grep"]] if shutil.which("busybox") else [])


def grep_lines(expression: str, path: Path, grep: tuple[str, ...] = ("grep",)) -> set[int]:
    """The (0-based) lines of PATH that real `grep -E` finds with EXPRESSION (a refused ERE fails the test)."""
    done = subprocess.run(
        [*grep, "-a", "-n", "-E", "-e", expression, str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "LC_ALL": "C"},
        check=False,
    )
    assert done.returncode in (0, 1), f"grep -E refused {expression!r}: {done.stderr}"
    return {int(line.split(":", 1)[0]) - 1 for line in done.stdout.splitlines()}


def python_lines(patterns: tuple[re.Pattern[str], ...]) -> set[int]:
    """The lines causes.py's patterns find, as causes.py matches them: `[rankN]: ` dropped first."""
    return {
        i
        for i, line in enumerate(LINES)
        if any(p.search(causes.RANK_PREFIX.sub("", line, count=1)) for p in patterns)
    }


# ------------------------------------------------------------------------------ the translation


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"CUDA out of memory\. Tried", r"CUDA out of memory\. Tried"),
        (r"waiting \d+ms for \w+ op", r"waiting [0-9]+ms for [A-Za-z0-9_]+ op"),
        (r"(?:A|B): x\s*\S", r"(A|B): x[[:space:]]*[^[:space:]]"),
        (r"Read error \[[^\]]+\]:\d+", r"Read error \[[^]]+\]:[0-9]+"),
        (r"[\d,]+ [A-Za-z0-9_.:-]", r"[0-9,]+ [A-Za-z0-9_.:-]"),
        (r"^\s*exitcode\s*: -9$", r"^[[:space:]]*exitcode[[:space:]]*: -9$"),
        (r"x{0,6}(?::|$)", r"x{0,6}(:|$)"),
        (r"Assertion `.*` failed\.$", r"Assertion `.*` failed\.$"),
        (r"\bcudaErrorMemoryAllocation\b", r"(^|[^A-Za-z0-9_])cudaErrorMemoryAllocation([^A-Za-z0-9_]|$)"),
    ],
)
def test_a_python_pattern_is_written_as_the_ere_that_means_the_same(pattern: str, expected: str) -> None:
    assert ere.to_ere(pattern) == expected


@pytest.mark.parametrize(
    ("pattern", "flags"),
    [
        (r"a\bloss", 0),  # a word boundary inside: not POSIX
        (r"\b(loss)", 0),
        (r"\ba*b", 0),
        (r"\d\b", 0),
        (r"loss", re.IGNORECASE),
        (r"a.{0,40}?b", 0),  # lazy
        (r"(?P<x>a)", 0),
        (r"(?=a)b", 0),
        (r"(a)\1", 0),
        (r"a^b", 0),
        (r"a$b", 0),
        (r"[[:alpha:]]", 0),
        (r"a{,3}", 0),
        (r"\n", 0),
        (r"(|a)", 0),
    ],
)
def test_what_ere_cannot_say_exactly_is_not_translated(pattern: str, flags: int) -> None:
    assert ere.to_ere(pattern, flags) is None


# ------------------------------------------------------------------------------ the rows, from the table


def test_the_rows_come_from_the_table_in_the_order_one_ranks_causes_are_weighed() -> None:
    order = [causes.RANK_ORDER[row.tier] for row in ROWS]
    assert order == sorted(order)
    table = [c.name for c in causes.CAUSES]
    named = [row.cause for row in ROWS]
    assert set(named) == set(table)  # every cause has a row: every one has a sign ERE can say
    for row in ROWS:
        cause = causes.BY_NAME[row.cause]
        assert row.tier == cause.tier
        classes = {s.err_class or cause.err_class for s in cause.signs if s.pattern in row.patterns}
        assert classes == {row.err_class}
    # a cause with signs of two classes (NoGpuVisible: a CPU-only torch is the job's own) has a row for each
    assert [(r.err_class) for r in ROWS if r.cause == "NoGpuVisible"] == [causes.ERR_INFRA, causes.ERR_PROGRAM]


def test_every_sign_is_exported_but_those_ere_cannot_say() -> None:
    exported = {p.pattern for row in ROWS for p in row.patterns}
    every = {s.pattern.pattern for c in causes.CAUSES for s in c.signs}
    left = signs.untranslated_signs()
    assert exported | {pattern for _, pattern in left} == every
    assert not exported & {pattern for _, pattern in left}
    # few, and never a cause's every sign (each cause has a row: see above); NanLoss's `\bloss\b ... (?i)` is one
    assert len(left) <= 3 and ("NanLoss", causes.BY_NAME["NanLoss"].signs[2].pattern.pattern) in left


@pytest.mark.parametrize("grep", GREPS, ids=[" ".join(g) for g in GREPS])
def test_every_exported_sign_finds_the_same_corpus_lines_with_grep_as_with_python(
    corpus_file: Path, grep: list[str]
) -> None:
    checked = 0
    for row in ROWS:
        for pattern in row.patterns:
            expression = signs._sign_ere(pattern)
            assert expression is not None
            found = grep_lines(expression, corpus_file, tuple(grep))
            assert found == python_lines((pattern,)), (row.cause, pattern.pattern)
            checked += 1
    assert checked == sum(len(row.patterns) for row in ROWS) > 40


@pytest.mark.parametrize("grep", GREPS, ids=[" ".join(g) for g in GREPS])
def test_every_row_finds_a_corpus_line_with_both_grep_and_python(corpus_file: Path, grep: list[str]) -> None:
    for row in ROWS:
        by_grep, by_python = grep_lines(row.ere, corpus_file, tuple(grep)), python_lines(row.patterns)
        assert by_grep == by_python, row.cause
        assert by_grep, f"no corpus line shows {row.cause} ({row.err_class})"


@pytest.mark.parametrize("grep", GREPS, ids=[" ".join(g) for g in GREPS])
def test_a_word_boundary_at_an_end_finds_what_python_finds(tmp_path: Path, grep: list[str]) -> None:
    pattern = re.compile(r"\bcudaErrorMemoryAllocation\b")
    lines = ["cudaErrorMemoryAllocation", "x cudaErrorMemoryAllocation: y", "[rank0]:cudaErrorMemoryAllocation",
             "xcudaErrorMemoryAllocation", "cudaErrorMemoryAllocation2", "a_cudaErrorMemoryAllocation", "cuda"]
    path = tmp_path / "lines.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    expression = ere.to_ere(pattern.pattern, pattern.flags)
    assert expression is not None
    assert grep_lines(expression, path, tuple(grep)) == {i for i, line in enumerate(lines) if pattern.search(line)}
    assert grep_lines(expression, path, tuple(grep)) == {0, 1, 2}


def test_the_rows_are_small_and_reach_the_container_unchanged() -> None:
    text = signs.signs_text()
    assert text.splitlines() == [row.line() for row in ROWS]
    assert len(text.encode()) < 4096
    assert kubelet_text.expand(kubelet_text.escape(text), {"X": "y"}) == text
    for line in text.splitlines():
        klass, tier, name, expression = line.split(" ", 3)
        assert klass in (causes.ERR_INFRA, causes.ERR_PROGRAM) and tier in causes.RANK_ORDER and name
        assert expression == expression.strip() or expression.endswith(" ")  # a sign may end in a space


# ------------------------------------------------------------------------------ the decision


def _decided_by_untranslated(text: str) -> bool:
    left = {pattern for _, pattern in signs.untranslated_signs()}
    patterns = [s.pattern for c in causes.CAUSES for s in c.signs if s.pattern.pattern in left]
    return any(sign.search(line) for sign in patterns for line in text.splitlines())


@pytest.mark.parametrize("entry", CORPUS, ids=[e["file"] for e in CORPUS])
def test_the_pods_reading_of_one_ranks_output_is_explains(entry: dict[str, Any]) -> None:
    text = (CORPUS_DIR / entry["file"]).read_text(encoding="utf-8")
    row, diagnosis = signs.output_cause(text), causes.cause_in_log(text)
    assert diagnosis is not None
    if row is None:
        # no sign in it (explain quotes the last error-looking lines) or only one ERE cannot say: the exit
        # code decides, and a program's own exit 1 is final either way
        assert diagnosis.facts.get("unrecognized") or _decided_by_untranslated(text), diagnosis.cause
        assert diagnosis.err_class == causes.ERR_PROGRAM or entry["file"].startswith("nccl-watchdog-timeout")
    else:
        assert (row.err_class, row.cause) == (diagnosis.err_class, diagnosis.cause)


# The entrypoint, one rank, on a corpus text and an exit code: it records what the sign and the exit code's row of
# the table say (the class of a sign decides over the code; a code the table lacks is a program error).
CASES = [
    ("nccl-system-error--ib-reg-mr.rank0.log", 1),
    ("nccl-remote-error--connect-retries.rank0.log", 1),
    ("nccl-internal-error--message-truncated.rank0.log", 1),
    ("nccl-watchdog-timeout--allreduce.rank0.log", 134),
    ("gpu-hardware--uncorrectable-ecc.log", 1),
    ("store-timeout--tcpstore-clients.rank0.log", 1),
    ("cuda-device-assert--torch-2.15.log", 134),
    ("cuda-oom--torch-2.15-in-pod.log", 1),
    ("module-not-found--timm.log", 1),
    ("no-gpu--debian-torch-1.13-not-compiled.log", 1),
    ("no-gpu--no-cuda-gpus.log", 1),
    ("python-exception--single-pod-4-ranks.log", 1),
    ("python-exception--keyerror.log", 139),
    ("rank-killed--sigkill.rank1.log", 1),
    ("nan--loss-check.log", 1),
    ("nccl-watchdog-timeout--allreduce.rank1.log", 137),
    ("", 1),
    ("", 137),
]
_END = re.compile(r"kubectl-tao attempt=1 rank=0 exit=(\d+) decision=(\w+) counted=[01] reason=(.*)$", re.M)


def _one_rank_env(tmp: Path, **more: str) -> dict[str, str]:
    """The environment of the entrypoint as rank 0 of a one-node gang with one restart, the table of exit codes
    and the signs as submit renders them, its termination message in TMP/term; MORE added."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "NODE_RANK": "0",
        "NNODES": "1",
        "TAO_GANG_DIR": str(tmp / "gang"),
        "TAO_MAX_RESTARTS": "1",
        "TAO_EXIT_CODES": table.pod_text(),
        "TAO_RETRY_SIGNS": signs.signs_text(),
        "RENDEZVOUS_TIMEOUT": "0",
        "TAO_SETTLE_SECONDS": "0",
        "TAO_TERMINATION_LOG": str(tmp / "term"),
        "TMPDIR": str(tmp),
        **more,
    }


def _run_entrypoint(tmp: Path, log: str, code: int) -> tuple[int, str, str]:
    env = _one_rank_env(tmp, RENDEZVOUS_POLL_SECONDS="0.1")
    printed = f"cat '{CORPUS_DIR / log}'; " if log else "echo 'step 3 loss 0.5'; "
    program = printed + (f"kill -{code - 128} $$" if code > 128 else f"exit {code}")
    done = subprocess.run(
        ["sh", str(ENTRY), "barrier", "tao", program], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    m = _END.search((tmp / "term").read_text(encoding="utf-8"))
    assert m is not None, done.stdout + done.stderr
    assert int(m.group(1)) == code
    return done.returncode, m.group(2), m.group(3)


def _expected(code: int, row: signs.SignRow | None) -> str:
    """restart or fail: what the sign ROW found in a rank's output and the table's row of its exit CODE say."""
    if row is not None and row.err_class in (causes.ERR_INFRA, causes.ERR_PROGRAM):
        return "restart" if row.err_class == causes.ERR_INFRA else "fail"
    code_row = table.BY_NUMBER.get(code)
    return "restart" if code_row is not None and code_row.decision == table.RETRY else "fail"


def test_the_entrypoint_decides_as_the_sign_and_the_exit_codes_row_say(tmp_path: Path) -> None:
    def one(i: int) -> tuple[int, str, str]:
        tmp = tmp_path / str(i)
        tmp.mkdir()
        return _run_entrypoint(tmp, *CASES[i])

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one, range(len(CASES))))
    seen = set()
    for (log, code), (rc, decision, reason) in zip(CASES, results, strict=True):
        row = signs.output_cause((CORPUS_DIR / log).read_text(encoding="utf-8")) if log else None
        want = _expected(code, row)
        assert decision == want, (log, code, reason)
        assert rc == (table.EXIT_RESTART if want == "restart" else code), (log, code)
        if row is not None:
            assert reason == row.cause, (log, code)
        seen.add((want, row.err_class if row else None))
    # both classes override the exit code both ways, and the exit code decides when no sign shows
    assert {("restart", causes.ERR_INFRA), ("fail", causes.ERR_PROGRAM), ("fail", None), ("restart", None)} <= seen


# ------------------------------------------------------------------------------ the pod reads as Python reads
# Lines shaped where a POSIX grep and Python's re part ways: digits, letters and spaces of other scripts
# (`\d \w \s` are ASCII in both: re.ASCII, the C locale), multibyte text before the 4096-byte cut (`cut -b`
# against a cut of characters), invalid UTF-8 inside a sign's span (kubectl-tao decodes it to U+FFFD; grep in
# the C locale takes the byte), carriage returns and colours.
_SIGNS = [
    "RuntimeError: CUDA error: out of memory",
    "RuntimeError: Timed out waiting 300000ms for allreduce operation to complete",
    "  exitcode  : -9 (pid: 4242)",
    "ModuleNotFoundError: No module named 'timm'",
    "RuntimeError: Socket Timeout",
    "RuntimeError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:93, unhandled system error",
    "../aten/src/ATen/native/cuda/Loss.cu:250: k2d: block: [0,0,0], thread: [3,0,0] Assertion `t >= 0` failed.",
    "huggingface_hub.errors.HfHubHTTPError: Client error '401 Unauthorized' for url 'https://x'",
    "RuntimeError: Read error [10.0.0.2]:5550: Connection reset by peer",
    "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorIllegalAddress: an illegal memory access was",
    "KeyError: 'label'",
]
CRAFTED: list[bytes] = [s.encode() for s in _SIGNS] + [
    # digits, letters and spaces of other scripts where a sign has \d, \w, \s or [A-Z]
    "RuntimeError: Timed out waiting ٣٠٠ms for allreduce operation to complete".encode(),
    "  exitcode  : -9 (pid: ٤٢)".encode(),
    "\u2003exitcode\u2003: -9 (pid: 42)".encode(),
    "\u00a0 exitcode  : -9 (pid: 42)".encode(),
    "RuntimeError: Timed out waiting 300000ms for allréduce operation to complete".encode(),
    "ÉtatError: x".encode(),
    "módulo.KeyError: 'label'".encode(),
    "ＫeyError: 'label'".encode(),
    "[rank١]: RuntimeError: Socket Timeout".encode(),
    "[rank1]:\u2003RuntimeError: Socket Timeout".encode(),
    "RuntimeError:\u00a0Socket Timeout".encode(),
    "Function 'lé' returned nan values in its 0th output.".encode(),
    "RuntimeError: Read error [10.0.0.２]:5550: Connection reset by peer".encode(),
    # multibyte text: the sign inside the first 4096 characters, past the first 4096 bytes (and inside both)
    ("é" * 2040 + "RuntimeError: CUDA error: out of memory").encode(),
    ("é" * 1000 + "RuntimeError: CUDA error: out of memory").encode(),
    ("😀" * 1019 + "RuntimeError: CUDA error: out of memory").encode(),
    ("中" * 1360 + " KeyError: 'x'").encode(),
    ("x" * 4070 + "KeyError: 'label'").encode(),
    # invalid UTF-8 inside and around the signs' spans
    b"RuntimeError: NCCL error in: /x/\xff\xfe.cpp:93, unhandled system error",
    b"k2d: block: [0,0,0], thread: [3,0,0] Assertion `t \xff 0` failed.",
    b"\xff\xfeRuntimeError: CUDA error: out of memory",
    b"RuntimeError: Read error [10.0.0.\xff]:5550: Connection reset by peer",
    b"huggingface_hub.errors.HfHubHTTPError: \xff401 Unauthorized",
    b"huggingface_hub.errors.HfHubHTTPError: Client error '\xe2\x82401'",
    b"ModuleNotFoundError: No module named '\xc3'",
    b"\xffKeyError: 'label'",
    b"Key\xffError: 'label'",
    b"KeyError\xff: 'label'",
    b"  exitcode  : -9\xa0(pid: 42)",
    b"/dev/shm/x\xff: No space left on device",
    b"Error while creating shared memory segment /dev/shm/n\xff (size 9), error: No space left on device",
    # carriage returns and colours
    b"RuntimeError: Socket Timeout\r",
    b"KeyError\r: 'label'",
    b"RuntimeError: CUDA\rerror: out of memory",
    b"\x1b[31mRuntimeError: CUDA error: out of memory\x1b[0m",
    b"torch.\x1b[1mOutOfMemoryError\x1b[0m: CUDA out of memory. Tried to allocate 2.00 GiB",
    b"../Loss.cu:1: k: block: [0,0,0], thread: [0,0,0] Assertion `t` failed.\x1b[0m",
]


def _pods_reason(tmp: Path, line: bytes) -> str:
    """The reason the real entrypoint records when a program prints LINE and exits 1."""
    (tmp / "line").write_bytes(line + b"\n")
    env = _one_rank_env(tmp, LANG="C.UTF-8")  # the pod's own locale does not change how it reads
    subprocess.run(["sh", str(ENTRY), "barrier", "tao", f"cat '{tmp / 'line'}'; exit 1"], capture_output=True,
                   env=env, timeout=60, check=False)
    m = _END.search((tmp / "term").read_text(encoding="utf-8"))
    assert m is not None, line
    return m.group(3)


def test_the_pod_and_python_name_the_same_cause_on_unicode_and_invalid_bytes(tmp_path: Path) -> None:
    def one(i: int) -> str:
        tmp = tmp_path / str(i)
        tmp.mkdir()
        return _pods_reason(tmp, CRAFTED[i])

    with ThreadPoolExecutor(4) as pool:
        pods = list(pool.map(one, range(len(CRAFTED))))
    differ = []
    for line, pod in zip(CRAFTED, pods, strict=True):
        text = line.decode("utf-8", errors="replace")  # as kubectl-tao decodes what kubectl prints
        row = signs.output_cause(text + "\n")
        python = row.cause if row is not None else "program error"
        if pod != python:
            differ.append((line[:120], pod, python))
    assert differ == []
    # the crafted lines reach both answers: a sign found, and no sign (a character of another script, the cut)
    assert sum(1 for pod in pods if pod != "program error") > 20 and "program error" in pods


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("RuntimeError: Timed out waiting ٣٠٠ms for allreduce operation to complete", False),  # \d: ASCII digits
        ("\u2003exitcode\u2003: -9 (pid: 42)", False),  # \s: ASCII spaces
        (("é" * 2040 + "RuntimeError: CUDA error: out of memory"), False),  # past 4096 bytes
        (("é" * 1000 + "RuntimeError: CUDA error: out of memory"), True),
    ],
)
def test_explain_reads_a_line_as_the_pod_does(line: str, named: bool) -> None:
    found = causes.cause_in_log(line + "\n")
    assert (found is not None and found.cause in ("CollectiveTimeout", "RankKilled", "CudaOOM")) is named


def test_the_stall_line_is_the_sign_the_entrypoint_restarts_on() -> None:
    line = (
        "kubectl-tao: stalled: no output and no status.json growth for 21s (--stall-timeout 20s); last progress: "
        "epoch=1 max_epoch=4 (train/status.json); last output: Epoch 1: 100%|##########| 10/10; stopping the "
        "program (TERM, then KILL after 30s)"
    )
    row = signs.output_cause(f"Epoch 1: 100%|##########| 10/10\n{line}\n")
    assert row is not None and (row.err_class, row.cause) == ("ERR_INFRA", "Stalled")
    assert signs.output_cause("kubectl-tao: stalled: said by the program itself\n") is None
