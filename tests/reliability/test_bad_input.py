"""Bad input, generated (hypothesis): over 10,000 malformed flags, env-files, action requests and staging
maps through `kubectl_tao.cli.main` in this process, each one refused with a single `error:` line and exit 2
before any kubectl call or record write (inprocess.InProcess.reject); a sample through real processes; and
weird-but-valid strings (YAML syntax, shell metacharacters, YAML 1.1 booleans) that must come out of
`render` exactly where they were put, never as a new key, document or command.

Examples are derandomized: every run tries the same inputs (seeded from the test names)."""

from __future__ import annotations

import copy
import json
import os
import string
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubectl_tao.manifests.action import config_document

from .helpers import REPO, TAO
from .inprocess import InProcess, assert_rejected
from .stats import STATS

FIXTURES = REPO / "tests" / "fixtures" / "action"
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
SUBMIT = ["submit", "--image=busybox:1.36", "--command=true", "--gpus=0", "--pvc=tao-data"]
TIER_C = ["submit", "--image=busybox:1.36", "--command=true", "--gpus=0", "--storage-tier=C"]


def examples(n: int) -> Any:
    return settings(
        max_examples=n,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with InProcess(tmp_path_factory.mktemp("bad-input")).active() as harness:
        yield harness


# ------------------------------------------------------------------ building blocks

LOWER = string.ascii_lowercase + string.digits
SEG = st.text(alphabet=LOWER + "_-", min_size=1, max_size=8)
SEGS = st.lists(SEG, max_size=3)
CONTROL = st.sampled_from([chr(c) for c in range(1, 32)] + ["\x7f"])  # NUL has its own cases
CONTROL_OR_NUL = st.one_of(CONTROL, st.just("\x00"))
UNICODE_SPACE = st.sampled_from([" ", "\u00a0", "\u1680", "\u2007", "\u2028", "\u2029", "\u0085", "\u3000"])
LONE_SURROGATE = st.integers(0xD800, 0xDFFF).map(chr)  # what non-UTF-8 argv bytes decode to (surrogateescape)


def join(*parts: list[str]) -> str:
    return "/".join(p for part in parts for p in part)


@st.composite
def with_char(draw: Any, chars: Any, root: str = "/workspace") -> str:
    """An absolute path under root with one bad character inside a segment."""
    head, tail = draw(SEGS), draw(SEGS)
    return f"{root}/{join(head)}{'/' if head else ''}a{draw(chars)}b{'/' if tail else ''}{join(tail)}"


def dotdot(root: str = "/workspace") -> Any:
    return st.builds(lambda a, b: f"{root}/{join(a, ['..'], b)}", SEGS, SEGS)


NOT_WORKSPACE = SEG.filter(lambda s: s != "workspace")
BAD_BUCKET = st.one_of(
    st.text(alphabet=string.ascii_uppercase, min_size=3, max_size=8),
    st.text(alphabet=LOWER, min_size=1, max_size=2),
    st.builds(lambda a, b: f"{a}_{b}", SEG.filter(str.isalnum), SEG.filter(str.isalnum)),
    st.text(alphabet=LOWER, min_size=64, max_size=80),
)

RESULTS_DIR_BAD = st.one_of(
    dotdot(),
    with_char(CONTROL_OR_NUL),
    with_char(UNICODE_SPACE),
    with_char(LONE_SURROGATE),
    st.builds(lambda a: join(["workspace"], a), SEGS),  # relative
    st.builds(
        lambda s, a: f"{s}://{join(['bucket'], a)}", st.sampled_from(["http", "https", "gs", "file", "hdfs"]), SEGS
    ),
    st.just("/"),
    st.builds(lambda s, a: f"/{join([s], a)}", NOT_WORKSPACE, SEGS),  # not on the mounted volume
    st.builds(lambda b, a: f"s3://{b}/{join(a)}", BAD_BUCKET, SEGS),
    st.builds(lambda a, b: f"s3://bucket/{join(a, ['..'], b)}", SEGS, SEGS),
)

MOUNT_PATH_BAD = st.one_of(
    dotdot("/mnt"),
    st.builds(lambda a, b: f"/mnt/{join(a, ['.'], b)}", SEGS, SEGS),
    st.builds(lambda a, b: f"/{join(a)}//{join(b)}", SEGS, SEGS),
    st.builds(lambda a: f"/{join(['mnt'], a)}/", SEGS),  # trailing slash
    st.builds(lambda a: join(["mnt"], a), SEGS),  # relative
    with_char(st.one_of(CONTROL_OR_NUL, st.just("\\"), LONE_SURROGATE), root="/mnt"),
    st.just("/"),
    st.builds(lambda d, a: f"{d}/{join(a)}".rstrip("/"), st.sampled_from(["/dev", "/proc", "/sys"]), SEGS),
    st.sampled_from(["/bin", "/boot", "/etc", "/lib", "/lib32", "/lib64", "/run", "/sbin", "/usr", "/var"]),
)

KEY = st.from_regex(r"[A-Z_][A-Z0-9_]{0,12}", fullmatch=True)
VALUE = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r\x00"), max_size=24)


@st.composite
def env_file_bad(draw: Any) -> bytes:
    """A mostly valid env-file with one line that must be refused."""
    pairs = draw(st.lists(st.tuples(KEY, VALUE), max_size=5, unique_by=lambda kv: kv[0]))
    lines: list[bytes] = [f"{k}={v}".encode() for k, v in pairs]
    lines += draw(st.lists(st.sampled_from([b"", b"# a comment", b"   ", b"#=x"]), max_size=2))
    kind = draw(st.sampled_from(["no-equals", "bad-key", "duplicate", "nul", "non-utf8"]))
    if kind == "no-equals":
        bad = draw(st.from_regex(r"(export )?[A-Za-z0-9_]{1,20}", fullmatch=True)).encode()
    elif kind == "bad-key":
        key = draw(
            st.one_of(
                st.from_regex(r"[0-9][A-Za-z0-9_]{0,8}", fullmatch=True),
                st.builds(lambda a, c, b: a + c + b, KEY, st.sampled_from(list("-.:@ !/+é\t")), KEY),
                st.builds(lambda k: k + " ", KEY),
                st.just(""),
            )
        )
        bad = f"{key}={draw(VALUE)}".encode()
    elif kind == "duplicate":
        key = pairs[0][0] if pairs else "HF_TOKEN"
        if not pairs:
            lines.append(b"HF_TOKEN=first")
        bad = f"{key}={draw(VALUE)}".encode()
    elif kind == "nul":
        key, value = draw(KEY), draw(VALUE)
        cut = draw(st.integers(0, len(value)))
        bad = f"{key}={value[:cut]}\x00{value[cut:]}".encode()
    else:
        raw = draw(st.sampled_from([b"\xff", b"\xfe", b"\xc3\x28", b"\xa0\xa1", b"\xed\xa0\x80", b"\xf8\x88\x80\x80"]))
        bad = f"{draw(KEY)}={draw(st.text(alphabet=string.ascii_letters, max_size=4))}".encode() + raw
    position = draw(st.integers(0, len(lines)))
    lines.insert(position, bad)
    crlf = draw(st.booleans())
    return (b"\r\n" if crlf else b"\n").join(lines) + draw(st.sampled_from([b"", b"\n"]))


DNS_BAD = st.one_of(
    st.text(alphabet=LOWER, min_size=64, max_size=80),  # a label longer than 63
    st.builds(lambda a, b: a + b, st.text(alphabet=string.ascii_uppercase, min_size=1, max_size=3), SEG),
    st.builds(
        lambda a, c, b: a + c + b,
        SEG.filter(str.isalnum),
        st.sampled_from(list("_ !@#/:;\"'")),
        SEG.filter(str.isalnum),
    ),
    st.builds(lambda s, e: e + s, SEG.filter(str.isalnum), st.sampled_from(["-", "."])),
    st.builds(lambda s, e: s + e, SEG.filter(str.isalnum), st.sampled_from(["-", "."])),
)
SUBDOMAIN_BAD = st.one_of(
    st.text(alphabet=LOWER, min_size=254, max_size=300),
    st.builds(lambda a, b: f"{a}..{b}", SEG.filter(str.isalnum), SEG.filter(str.isalnum)),
    DNS_BAD.filter(lambda s: len(s) <= 63),
)
LABEL_VALUE_BAD = st.one_of(
    st.text(alphabet=LOWER, min_size=64, max_size=80),
    st.builds(
        lambda a, c, b: a + c + b,
        SEG.filter(str.isalnum),
        st.sampled_from(list(" !@#/:;,\"'=")),
        SEG.filter(str.isalnum),
    ),
    st.builds(lambda s, e: e + s, SEG.filter(str.isalnum), st.sampled_from(["-", ".", "_"])),
)
QUALIFIED_BAD = st.one_of(
    st.text(alphabet=LOWER, min_size=64, max_size=80),
    st.builds(lambda p, n: f"{p}/{n}", st.sampled_from(["UPPER.io", "a_b.io", "", "-x.io"]), SEG.filter(str.isalnum)),
    st.builds(
        lambda a, c, b: a + c + b, SEG.filter(str.isalnum), st.sampled_from(list(" !@#:;\"'")), SEG.filter(str.isalnum)
    ),
)


def out_of(low: int, high: int) -> Any:
    return st.one_of(st.integers(max_value=low - 1), st.integers(min_value=high + 1)).map(str)


NOT_AN_INT = st.one_of(
    st.text(alphabet=string.ascii_letters, min_size=1, max_size=6), st.just(""), st.just("1.5"), st.just("1e3")
)


# ------------------------------------------------------------------ flags


@examples(900)
@given(value=RESULTS_DIR_BAD)
def test_results_dir_traversal_and_junk_is_refused(cli: InProcess, value: str) -> None:
    cli.reject([*SUBMIT, f"--results-dir={value}"])


@examples(700)
@given(value=MOUNT_PATH_BAD)
def test_mount_path_traversal_and_junk_is_refused(cli: InProcess, value: str) -> None:
    cli.reject([*SUBMIT, f"--mount-path={value}"])


@examples(1300)
@given(content=env_file_bad(), via_stdin=st.booleans())
def test_malformed_env_files_are_refused_without_the_value(cli: InProcess, content: bytes, via_stdin: bool) -> None:
    path = cli.files / "bad.env"
    path.write_bytes(content)
    line = cli.reject([*SUBMIT, "--env-file=-" if via_stdin else f"--env-file={path}"], stdin=content)
    assert "=" not in line.split(":", 3)[-1] or "KEY=VALUE" in line or "'" in line  # no raw KEY=value echoed


@examples(450)
@given(
    kind=st.sampled_from(["missing", "traversal", "directory", "nul", "control", "loop"]),
    segs=SEGS,
    char=CONTROL,
)
def test_unreadable_env_file_paths_are_refused(cli: InProcess, kind: str, segs: list[str], char: str) -> None:
    base = cli.files
    loop = base / "loop.env"
    if not loop.is_symlink():
        loop.symlink_to(loop)
    path = {
        "missing": f"{base}/missing/{join(segs)}x.env",
        "traversal": f"{base}/{join(segs)}/../../no-such-dir/../x.env",
        "directory": str(base),
        "nul": f"{base}/a\x00{join(segs)}.env",
        "control": f"{base}/a{char}{join(segs)}.env",
        "loop": str(loop),
    }[kind]
    cli.reject([*SUBMIT, f"--env-file={path}"])


@examples(450)
@given(
    name=st.one_of(
        st.from_regex(r"[0-9][A-Za-z0-9_]{0,10}", fullmatch=True),
        st.builds(lambda a, c, b: a + c + b, KEY, st.sampled_from(list("-.: =$")), KEY),
        st.just(""),
        st.builds(lambda k: "TAO_RELIABILITY_UNSET_" + k, KEY),  # valid, but not in the environment
    )
)
def test_bad_or_unset_env_names_are_refused(cli: InProcess, name: str) -> None:
    cli.reject([*SUBMIT, f"--env={name}"])


@examples(1400)
@given(
    case=st.one_of(
        st.tuples(st.just("--pvc"), SUBDOMAIN_BAD),
        st.tuples(st.just("--image-pull-secret"), SUBDOMAIN_BAD),
        st.tuples(st.just("--queue"), DNS_BAD),
        st.tuples(st.just("--namespace"), DNS_BAD),
        st.tuples(st.just("--gpu-product"), LABEL_VALUE_BAD),
        st.tuples(st.just("--label"), st.builds(lambda v: f"team={v}", LABEL_VALUE_BAD)),
        st.tuples(st.just("--label"), st.builds(lambda k: f"{k}=x", QUALIFIED_BAD)),
        st.tuples(st.just("--node-selector"), st.builds(lambda k: f"{k}=x", QUALIFIED_BAD)),
        st.tuples(st.just("--annotation"), st.builds(lambda k: f"{k}=x", QUALIFIED_BAD)),
        st.tuples(st.just("--network-arch"), st.text(alphabet=LOWER, min_size=41, max_size=60)),
        st.tuples(st.just("--network-arch"), st.builds(lambda a, s, b: a + s + b, SEG, UNICODE_SPACE, SEG)),
        st.tuples(st.just("--action"), st.sampled_from(["", "---", "...", "_-_"])),
        st.tuples(st.just("--name"), st.text(alphabet=LOWER, min_size=53, max_size=70)),
        st.tuples(st.just("--name"), DNS_BAD),
    )
)
def test_bad_and_overlong_names_are_refused(cli: InProcess, case: tuple[str, str]) -> None:
    flag, value = case
    verb = ["render", *SUBMIT[1:]] if flag == "--name" else SUBMIT
    cli.reject([*verb, f"{flag}={value}"])


@examples(1100)
@given(
    case=st.one_of(
        st.tuples(st.just("--gpus"), st.one_of(out_of(0, 64), NOT_AN_INT)),
        st.tuples(st.just("--nodes"), st.one_of(out_of(1, 1024), NOT_AN_INT)),
        st.tuples(st.just("--ttl-seconds"), st.one_of(out_of(0, 604800), NOT_AN_INT)),
        st.tuples(st.just("--master-port"), st.one_of(out_of(1, 65535), NOT_AN_INT)),
        st.tuples(st.just("--rendezvous-timeout"), st.one_of(out_of(0, 86400), NOT_AN_INT)),
        st.tuples(st.just("--active-deadline-seconds"), st.one_of(out_of(1, 2**31 - 1), NOT_AN_INT)),
        st.tuples(st.just("--retries-per-index"), st.integers(0, 5).map(str)),  # one node: not allowed
        st.tuples(
            st.just("--shm-size"),
            st.one_of(
                st.text(alphabet=string.ascii_letters, max_size=4),
                st.builds(
                    lambda n, u: f"{n}{u}",
                    st.integers(-5, 64),
                    st.sampled_from(["GB", "g", "G", "k", "m", "iB", " Gi"]),
                ),
                st.builds(lambda n: f"-{n}Gi", st.integers(0, 99)),
                st.just("0Gi"),
            ),
        ),
    )
)
def test_out_of_range_and_non_integer_numbers_are_refused(cli: InProcess, case: tuple[str, str]) -> None:
    flag, value = case
    cli.reject([*SUBMIT, f"{flag}={value}"])


@examples(900)
@given(
    case=st.one_of(
        st.tuples(
            st.just("--storage-tier"), st.text(min_size=1, max_size=3).filter(lambda s: s.upper() not in ("A", "C"))
        ),
        st.tuples(st.just("--launcher"), st.text(max_size=10).filter(lambda s: s not in ("tao", "torchrun"))),
        st.tuples(st.just("--dry-run"), st.text(max_size=8).filter(lambda s: s not in ("none", "client", "server"))),
        st.tuples(
            st.just("--output"),
            st.text(min_size=1, max_size=8).filter(lambda s: s.lower() not in ("table", "json", "yaml", "name")),
        ),
        st.tuples(
            st.just("--toleration"),
            st.builds(
                lambda k, e: f"{k}:{e}",
                SEG.filter(str.isalnum),
                st.text(min_size=1, max_size=10).filter(
                    lambda e: e not in ("NoSchedule", "PreferNoSchedule", "NoExecute") and ":" not in e
                ),
            ),
        ),
        st.tuples(st.just("--toleration"), st.builds(lambda v: f"={v}", SEG)),
        st.tuples(
            st.just("--nccl-socket-ifname"),
            st.builds(lambda a, c: a + c, SEG, st.sampled_from(list(" /!@#$%&*()[]{}<>?|'\"\\;~`"))),
        ),
        st.tuples(
            st.just("--image"),
            st.one_of(
                st.builds(lambda a, c, b: a + c + b, SEG, st.one_of(UNICODE_SPACE, CONTROL_OR_NUL), SEG),
                st.builds(lambda p, a: p + a, st.sampled_from(["-", "/", ":", "@"]), SEG),
                st.just(""),
            ),
        ),
        st.tuples(st.just("--command"), st.text(alphabet=" \t\n\r\x0b\x0c", min_size=1, max_size=5)),
        st.tuples(st.just("--command"), st.builds(lambda a, b: f"{a}\x00{b}", SEG, SEG)),
    )
)
def test_bad_enumerations_images_and_commands_are_refused(cli: InProcess, case: tuple[str, str]) -> None:
    flag, value = case
    cli.reject([*SUBMIT, f"{flag}={value}"])


S3_BAD = st.one_of(
    st.builds(lambda b, a: f"s3://{b}/{join(a)}", BAD_BUCKET, SEGS),
    st.builds(lambda a, b: f"s3://bucket/{join(a, ['..'], b)}", SEGS, SEGS),
    st.builds(lambda a, b: f"s3://bucket/{join(a)}//{join(b)}", SEGS, SEGS),
    st.builds(lambda s, a: f"{s}://bucket/{join(a)}", st.sampled_from(["http", "gs", "S3", "s4"]), SEGS),
    st.builds(lambda c: f"s3://bucket/a{c}b", st.one_of(CONTROL_OR_NUL, UNICODE_SPACE, st.just("\\"))),
    st.just("s3://"),
)


@examples(600)
@given(where=st.sampled_from(["--s3-output", "--s3-input"]), uri=S3_BAD)
def test_tier_c_s3_uris_are_refused(cli: InProcess, where: str, uri: str) -> None:
    argv = (
        [*TIER_C, f"--s3-output={uri}"]
        if where == "--s3-output"
        else [*TIER_C, "--s3-output=s3://bucket/out", f"--s3-input={uri}"]
    )
    cli.reject(argv)


@examples(300)
@given(
    flag=st.sampled_from(["--command", "--image", "--annotation", "--results-dir", "--network-arch", "--label"]),
    char=LONE_SURROGATE,
    head=SEG,
    tail=SEG,
)
def test_non_utf8_arguments_are_refused(cli: InProcess, flag: str, char: str, head: str, tail: str) -> None:
    """Bytes that are not UTF-8 on the command line reach Python as lone surrogates (surrogateescape);
    sent on, they would turn into U+FFFD on the server, so the job would run something else."""
    value = f"{head}{char}{tail}"
    if flag in ("--annotation", "--label"):
        value = f"k={value}"
    elif flag == "--results-dir":
        value = f"/workspace/{value}"
    cli.reject([*SUBMIT, f"{flag}={value}"])


# ------------------------------------------------------------------ action requests and staging maps


def _load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def _base_request() -> dict[str, Any]:
    request = _load("request-args.json")
    request.pop("forward_env", None)  # credentials are covered elsewhere; here every key must be wrong
    return request


BAD_ABS = st.one_of(
    dotdot("/data"),
    st.builds(lambda a, b: f"/data/{join(a, ['.'], b)}", SEGS, SEGS),
    st.builds(lambda a, b: f"/data/{join(a)}//{join(b)}", SEGS, SEGS),
    st.builds(lambda a: f"/data/{join(a)}/", SEGS),
    st.builds(lambda a: join(["data"], a), SEGS),
    with_char(st.one_of(CONTROL_OR_NUL, st.just("\\")), root="/data"),
    st.just("/"),
    st.just(""),
)
BAD_SUB_PATH = st.one_of(
    st.builds(lambda a: "/" + join(["jobs"], a), SEGS),
    st.builds(lambda a, b: join(a, [".."], b), SEGS, SEGS),
    st.builds(lambda a: join(["..", "x"], a), SEGS),
    st.builds(lambda a, b: f"{join(['jobs'], a)}//{join(b)}", SEGS, SEGS),
    st.builds(lambda a: join(["jobs"], a) + "/", SEGS),
    st.builds(lambda a, b: join(a, ["."], b), SEGS, SEGS),
    st.builds(lambda c: f"jobs/a{c}b", st.one_of(CONTROL_OR_NUL, st.just("\\"))),
    st.just(""),
)


@st.composite
def bad_action_pair(draw: Any) -> tuple[bytes, bytes, str]:
    """(request file bytes, staging map bytes, what was broken)."""
    request, staging = _base_request(), _load("staging-args.json")
    kind = draw(
        st.sampled_from(
            [
                "mount-source",
                "mount-target",
                "sub-path",
                "staged-source",
                "unstaged",
                "extra-staged",
                "duplicate-target",
                "forward-env-name",
                "forward-env-unset",
                "environment-name",
                "schema-version",
                "platform",
                "mode",
                "gpus",
                "nodes",
                "args-missing",
                "spec-in-args",
                "image-mismatch",
                "fresh-output",
                "request-bytes",
                "staging-bytes",
            ]
        )
    )
    mounts, sources = request["mounts"], staging["sources"]
    if kind == "mount-source":
        draw_index = draw(st.integers(0, len(mounts) - 1))
        mounts[draw_index]["source"] = draw(BAD_ABS)
    elif kind == "mount-target":
        mounts[draw(st.integers(0, len(mounts) - 1))]["target"] = draw(BAD_ABS)
    elif kind == "sub-path":
        sources[draw(st.integers(0, len(sources) - 1))]["sub_path"] = draw(BAD_SUB_PATH)
    elif kind == "staged-source":
        sources[draw(st.integers(0, len(sources) - 1))]["source"] = draw(BAD_ABS)
    elif kind == "unstaged":
        del sources[draw(st.integers(0, len(sources) - 1))]
    elif kind == "extra-staged":
        sources.append({"source": f"/data/extra-{draw(SEG)}", "sub_path": f"jobs/extra/{draw(SEG)}"})
    elif kind == "duplicate-target":
        mounts.append({**mounts[0], "target": mounts[draw(st.integers(1, len(mounts) - 1))]["target"]})
    elif kind == "forward-env-name":
        request["forward_env"] = [draw(st.one_of(st.from_regex(r"[0-9-][A-Z0-9_]{0,6}", fullmatch=True), st.just("")))]
    elif kind == "forward-env-unset":
        request["forward_env"] = [draw(KEY)]  # valid name, but no --env-file/--env carries it
    elif kind == "environment-name":
        request["environment"] = {draw(st.from_regex(r"[0-9 -][A-Z0-9_ -]{0,6}", fullmatch=True)): "x"}
    elif kind == "schema-version":
        request["schema_version"] = draw(
            st.one_of(st.integers(), st.text(max_size=3).filter(lambda v: v != "1"), st.none())
        )
    elif kind == "platform":
        request["platform"] = draw(st.text(max_size=12).filter(lambda v: v != "kubernetes"))
    elif kind == "mode":
        request["spec_bundle"]["mode"] = draw(st.text(max_size=8).filter(lambda v: v not in ("args", "config")))
    elif kind == "gpus":
        request["spec_bundle"]["compute_shape"]["gpus"] = draw(
            st.one_of(st.integers(max_value=-1), st.text(max_size=3), st.floats(0.1, 8))
        )
    elif kind == "nodes":
        request["spec_bundle"]["compute_shape"]["nodes"] = draw(st.integers().filter(lambda n: n != 1))
    elif kind == "args-missing":
        del request["spec_bundle"]["args"]
    elif kind == "spec-in-args":
        request["spec_bundle"]["spec"] = {"a": 1}
    elif kind == "image-mismatch":
        request["workload_image"] = "nvcr.io/other/image:" + draw(SEG)
    elif kind == "fresh-output":
        request["fresh_outputs"] = [
            draw(st.one_of(st.builds(lambda a: f"/elsewhere/{join(a)}", SEGS), dotdot("/data/results")))
        ]
    request_bytes = json.dumps(request).encode()
    staging_bytes = json.dumps(staging).encode()
    if kind == "request-bytes":
        request_bytes = draw(
            st.one_of(
                st.builds(
                    lambda b, x: b[: len(b) // 2] + x + b[len(b) // 2 :],
                    st.just(request_bytes),
                    st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80"]),
                ),
                st.just(request_bytes[:-1]),
                st.sampled_from([b"[]", b'"request"', b"42", b"null", b"", b"{", b"{'a': 1}"]),
            )
        )
    elif kind == "staging-bytes":
        staging_bytes = draw(
            st.one_of(
                st.builds(
                    lambda x: staging_bytes[:20] + x + staging_bytes[20:], st.sampled_from([b"\xff", b"\xc3\x28"])
                ),
                st.sampled_from([b"[]", b"{}", b'{"schema_version": "1", "sources": []}', b"nul\x00l"]),
            )
        )
    return request_bytes, staging_bytes, kind


def test_the_action_request_baseline_is_valid(cli: InProcess) -> None:
    """The mutations below start from a request/staging pair that renders (so each one is what breaks it)."""
    request, staging = cli.files / "base-request.json", cli.files / "base-staging.json"
    request.write_text(json.dumps(_base_request()), encoding="utf-8")
    staging.write_text(json.dumps(_load("staging-args.json")), encoding="utf-8")
    code, out, err = cli.run(
        [
            "render",
            f"--action-request={request}",
            f"--staging-map={staging}",
            "--pvc=tao-data",
            "--results-dir=/workspace/results/run-1",
            "--name=action-base",
        ]
    )
    assert code == 0, err
    assert yaml.safe_load(out)["metadata"]["name"] == "action-base"


@examples(1800)
@given(pair=bad_action_pair())
def test_malformed_action_requests_and_staging_maps_are_refused(cli: InProcess, pair: tuple[bytes, bytes, str]) -> None:
    request_bytes, staging_bytes, _kind = pair
    request, staging = cli.files / "request.json", cli.files / "staging.json"
    request.write_bytes(request_bytes)
    staging.write_bytes(staging_bytes)
    cli.reject(
        [
            "submit",
            f"--action-request={request}",
            f"--staging-map={staging}",
            "--pvc=tao-data",
            "--results-dir=/workspace/results/run-1",
        ]
    )


@pytest.fixture(scope="module")
def config_request(cli: InProcess) -> tuple[Path, Path, Path]:
    """A mode=config request, its materialized config file (staged) and the staging map."""
    request = _load("request-config.json")
    content, extension, digest = config_document(request["spec_bundle"])
    config = cli.files / f"tao-action-config-{digest}.{extension}"
    config.write_text(content, encoding="utf-8")
    staging = {
        "schema_version": "1",
        "sources": [
            {"source": "/data/coco", "sub_path": "jobs/run-2/coco"},
            {"source": "/data/results", "sub_path": "jobs/run-2/results"},
            {"source": str(config), "sub_path": f"jobs/run-2/config.{extension}"},
        ],
    }
    paths = (cli.files / "config-request.json", cli.files / "config-staging.json")
    paths[0].write_text(json.dumps(request), encoding="utf-8")
    paths[1].write_text(json.dumps(staging), encoding="utf-8")
    argv = [
        "render",
        f"--action-request={paths[0]}",
        f"--staging-map={paths[1]}",
        "--pvc=tao-data",
        "--results-dir=/workspace/results/run-2",
        f"--config-source={config}",
        "--name=config-base",
    ]
    code, _out, err = cli.run(argv)
    assert code == 0, f"the config-source baseline must render: {err}"
    return paths[0], paths[1], config


@examples(350)
@given(
    kind=st.sampled_from(
        ["relative", "dotdot", "nul", "control", "symlink", "missing", "directory", "unstaged", "stale"]
    ),
    segs=SEGS,
    char=CONTROL,
)
def test_config_source_traversal_is_refused(
    cli: InProcess, config_request: tuple[Path, Path, Path], kind: str, segs: list[str], char: str
) -> None:
    request, staging, config = config_request
    files = cli.files
    link = files / "config-link.toml"
    if not link.is_symlink():
        link.symlink_to(config)
    stale = files / "stale" / config.name
    if not stale.exists():
        stale.parent.mkdir(exist_ok=True)
        stale.write_text("[train]\nnum_epochs = 99\n", encoding="utf-8")
    copy_path = files / "unstaged" / config.name
    if not copy_path.exists():
        copy_path.parent.mkdir(exist_ok=True)
        copy_path.write_bytes(config.read_bytes())
    source = {
        "relative": os.path.relpath(config, Path.cwd()),
        "dotdot": f"{files}/{join(segs)}/../{config.name}" if segs else f"{files}/stale/../{config.name}",
        "nul": f"{config}\x00{join(segs)}",
        "control": f"{files}/a{char}/{config.name}",
        "symlink": str(link),
        "missing": f"{files}/missing/{join(segs)}/{config.name}",
        "directory": str(files),
        "unstaged": str(copy_path),  # the right content, but not in the staging map
        "stale": str(stale),  # staged? no, and its content is not the request's spec either
    }[kind]
    cli.reject(
        [
            "submit",
            f"--action-request={request}",
            f"--staging-map={staging}",
            "--pvc=tao-data",
            "--results-dir=/workspace/results/run-2",
            f"--config-source={source}",
        ]
    )


# ------------------------------------------------------------------ valid but weird: the exact round trip

YAML_SPECIALS = [
    *":#{}[],&*!|>'\"%@`-?~=$;()<\\",
    "---",
    "...",
    ": ",
    " #",
    "\n",
    "\t",
    "${HOME}",
    "$(id)",
    "`id`",
]
YAML11_SCALARS = [
    "yes",
    "no",
    "on",
    "off",
    "true",
    "False",
    "null",
    "~",
    "0123",
    "1e3",
    "0x1F",
    "1_000",
    ".inf",
    "2026-01-01",
]
WEIRD_TEXT = st.one_of(
    st.lists(
        st.one_of(st.sampled_from(YAML_SPECIALS), SEG, st.sampled_from(YAML11_SCALARS)), min_size=1, max_size=8
    ).map("".join),
    st.sampled_from(YAML11_SCALARS),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=30),
)
WEIRD_WORD = st.lists(
    st.one_of(st.sampled_from([c for c in YAML_SPECIALS if not any(ch.isspace() for ch in c)]), SEG),
    min_size=1,
    max_size=6,
).map("".join)
# An image is not free text: the container runtime's grammar (core/imageref.py). Valid but unusual ones: a
# registry with a port or an IPv6 address (its host in any case), `__` and dash runs between path letters, a tag
# of mixed case, dots and dashes, a digest, or no tag at all (accepted with a warning).
_IMAGE_RUN = st.text(alphabet=LOWER, min_size=1, max_size=4)
_IMAGE_PART = st.builds(
    lambda first, rest: first + "".join(sep + run for sep, run in rest),
    _IMAGE_RUN,
    st.lists(st.tuples(st.sampled_from([".", "_", "__", "-", "---"]), _IMAGE_RUN), max_size=2),
)
WEIRD_IMAGE = st.builds(
    lambda registry, parts, tag, digest: registry + "/".join(parts) + tag + digest,
    st.sampled_from(["", "localhost:5000/", "Registry.Example.com/", "[::1]:5000/", "nvcr.io/"]),
    st.lists(_IMAGE_PART, min_size=1, max_size=3),
    st.one_of(
        st.just(""),
        st.builds(
            lambda head, tail: f":{head}{tail}",
            st.sampled_from(list(string.ascii_letters + string.digits + "_")),
            st.text(alphabet=string.ascii_letters + string.digits + "_.-", max_size=20),
        ),
    ),
    st.one_of(st.just(""), st.just("@sha256:" + "0123456789abcdef" * 4)),
)
PLACEHOLDERS = {
    "command": "PLACEHOLDER-COMMAND",
    "note": "PLACEHOLDER-NOTE",
    "image": "placeholder/image:1",
    "results": "/workspace/PLACEHOLDER-RESULTS",
    "label": "placeholder-label",
}


def _render_docs(cli: InProcess, values: dict[str, str], nodes: int, fmt: str) -> list[Any]:
    argv = [
        "render",
        f"--image={values['image']}",
        f"--command={values['command']}",
        "--gpus=0",
        "--pvc=tao-data",
        f"--nodes={nodes}",
        f"--results-dir={values['results']}",
        f"--annotation=example.com/note={values['note']}",
        f"--label=example.com/tier={values['label']}",
        "--name=weird-values",
        f"--output={fmt}",
    ]
    code, out, err = cli.run(argv)
    assert code == 0, f"a valid value was refused: {err}"
    # PyYAML reads YAML 1.1 like kubectl's sigs.k8s.io/yaml: `yes` or `0123` left bare would change type.
    return list(yaml.load_all(out, Loader=YAML_LOADER)) if fmt == "yaml" else [json.loads(out)]


def _delivered(docs: list[Any], fmt: str) -> list[Any]:
    """The documents as the containers receive them (the kubelet expands `$(VAR)` / `$$` in command, args
    and env values; render escapes them so that the expansion gives back the exact text)."""
    from kubectl_tao.manifests.kubelet_text import as_delivered

    if fmt == "json" and docs[0].get("kind") == "List":
        return [{**docs[0], "items": as_delivered(docs[0]["items"])}]
    return as_delivered(docs)


_BASELINES: dict[tuple[int, str], list[Any]] = {}


def _baseline(cli: InProcess, nodes: int, fmt: str) -> list[Any]:
    if (nodes, fmt) not in _BASELINES:
        _BASELINES[(nodes, fmt)] = _render_docs(cli, PLACEHOLDERS, nodes, fmt)
    return copy.deepcopy(_BASELINES[(nodes, fmt)])


def _swap(node: Any, table: dict[str, str]) -> Any:
    if isinstance(node, dict):
        return {_swap(k, table): _swap(v, table) for k, v in node.items()}
    if isinstance(node, list):
        return [_swap(v, table) for v in node]
    if isinstance(node, str):
        for old, new in table.items():
            node = node.replace(old, new)
    return node


@examples(400)
@given(
    command=WEIRD_TEXT.filter(lambda s: s.strip() != ""),
    note=WEIRD_TEXT,
    image=WEIRD_IMAGE,
    results=WEIRD_WORD.filter(lambda s: s not in (".", "..") and "/" not in s and "\\" not in s).map(
        lambda s: f"/workspace/{s}"
    ),
    label=st.sampled_from([v for v in YAML11_SCALARS if v[0].isalnum() and v[-1].isalnum()]),
    nodes=st.sampled_from([1, 2]),
    fmt=st.sampled_from(["yaml", "json"]),
)
def test_weird_but_valid_values_round_trip_exactly(
    cli: InProcess, command: str, note: str, image: str, results: str, label: str, nodes: int, fmt: str
) -> None:
    """Shell metacharacters and YAML syntax in every free-text field, and unusual but valid image references,
    come out as the same string in the same field: the manifest equals the one rendered with placeholders,
    with only the placeholders swapped."""
    weird = {"command": command, "note": note, "image": image, "results": results, "label": label}
    rendered = _delivered(_render_docs(cli, weird, nodes, fmt), fmt)
    expected = _swap(_delivered(_baseline(cli, nodes, fmt), fmt), {PLACEHOLDERS[k]: v for k, v in weird.items()})
    assert rendered == expected, "a value changed the manifest's structure or was altered on the way"
    kinds = [d["kind"] for d in rendered] if fmt == "yaml" else [i["kind"] for i in rendered[0].get("items", rendered)]
    assert kinds.count("Job") == 1 and len(kinds) == (2 if nodes > 1 else 1)
    STATS.round_trips += 1


# ------------------------------------------------------------------ the same contract through real processes

SUBPROCESS_CASES: list[tuple[list[str], bytes]] = [
    ([*SUBMIT, "--results-dir=/workspace/../etc"], b""),
    ([*SUBMIT, "--results-dir=workspace/out"], b""),
    ([*SUBMIT, "--results-dir=/workspace/a\tb"], b""),
    ([*SUBMIT, "--results-dir=/elsewhere/out"], b""),
    ([*SUBMIT, "--results-dir=gs://bucket/out"], b""),
    ([*SUBMIT, "--mount-path=/mnt/../etc"], b""),
    ([*SUBMIT, "--mount-path=/proc"], b""),
    ([*SUBMIT, "--mount-path=mnt"], b""),
    ([*SUBMIT, "--mount-path=/mnt/a\nb"], b""),
    ([*SUBMIT, "--env-file=-"], b"HF_TOKEN=abc\nHF_TOKEN=def\n"),
    ([*SUBMIT, "--env-file=-"], b"HF_TOKEN\n"),
    ([*SUBMIT, "--env-file=-"], b"1BAD=x\n"),
    ([*SUBMIT, "--env-file=-"], b"GOOD=\xff\xfe\n"),
    ([*SUBMIT, "--env-file=-"], b"GOOD=a\x00b\n"),
    ([*SUBMIT, "--env-file=/nonexistent/../x.env"], b""),
    ([*SUBMIT, "--env-file=/tmp"], b""),
    ([*SUBMIT, "--env=1BAD"], b""),
    ([*SUBMIT, "--env=TAO_RELIABILITY_UNSET_VARIABLE"], b""),
    ([*SUBMIT, "--pvc=" + "p" * 254], b""),
    ([*SUBMIT, "--namespace=" + "n" * 64], b""),
    ([*SUBMIT, "--queue=" + "q" * 64], b""),
    ([*SUBMIT, "--label=team=" + "v" * 64], b""),
    ([*SUBMIT, "--annotation=" + "k" * 64 + "=v"], b""),
    (["render", *SUBMIT[1:], "--name=" + "j" * 53], b""),
    ([*SUBMIT, "--network-arch=" + "a" * 41], b""),
    ([*SUBMIT, "--gpus=65"], b""),
    ([*SUBMIT, "--gpus=many"], b""),
    ([*SUBMIT, "--nodes=0"], b""),
    ([*SUBMIT, "--ttl-seconds=604801"], b""),
    ([*SUBMIT, "--shm-size=16GB"], b""),
    ([*SUBMIT, "--storage-tier=B"], b""),
    ([*SUBMIT, "--launcher=mpirun"], b""),
    ([*SUBMIT, "--toleration=gpu:Sometimes"], b""),
    ([*SUBMIT, "--image=busy box"], b""),
    ([*SUBMIT, "--command=   "], b""),
    ([*TIER_C, "--s3-output=s3://UPPER/out"], b""),
    ([*TIER_C, "--s3-output=s3://bucket/out", "--s3-input=s3://bucket/../x"], b""),
    ([*SUBMIT, "--action-request=/nonexistent.json"], b""),
]


def test_bad_input_through_real_processes(tmp_path: Path) -> None:
    harness = InProcess(tmp_path)
    env = {**os.environ, **harness.env}
    for key in ("TAO_K8S_CONTEXT", "KUBECTL_TAO_TRACE"):
        env.pop(key, None)
    non_utf8 = [b"submit", b"--image=busybox:1.36", b"--command=echo \xff\xfe", b"--gpus=0", b"--pvc=tao-data"]

    def one(case: tuple[list[str] | list[bytes], bytes]) -> tuple[Any, int, str, str]:
        argv, stdin = case
        proc = subprocess.run(
            [os.fsencode(TAO), *[a if isinstance(a, bytes) else os.fsencode(a) for a in argv]],
            input=stdin,
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
        return argv, proc.returncode, proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")

    cases: list[tuple[Any, bytes]] = [*SUBPROCESS_CASES, (non_utf8, b"")]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(one, cases))
    assert len(results) >= 30
    for argv, code, out, err in results:
        STATS.bad_inputs_tried += 1
        assert_rejected(code, out, err, argv)
        STATS.bad_inputs_rejected += 1
    assert harness.calls.read_text() == "", "a bad input reached kubectl"
    assert not list(harness.state.glob("jobs/**/*.json"))
