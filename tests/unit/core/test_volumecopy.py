from __future__ import annotations

import pytest

from kubectl_tao.core.errors import EXIT_USAGE, UsageError
from kubectl_tao.volumes import volumecopy
from kubectl_tao.volumes.volumecopy import LocalFile, RemoteFile

A_HASH = "a" * 64
B_HASH = "b" * 64


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("/etc/passwd", "an absolute name would escape the target directory"),
        ("specs/../../etc", "'..' would escape the target directory"),
        ("..", "'..' would escape the target directory"),
        ("a\nb", "a name with a newline, carriage return or NUL cannot be copied"),
        ("a\x00b", "a name with a newline, carriage return or NUL cannot be copied"),
        ("./.", "names no file"),
    ],
)
def test_a_name_that_escapes_or_breaks_the_listing_is_refused_with_exit_2(name: str, said: str) -> None:
    with pytest.raises(UsageError, match=said) as raised:
        volumecopy.member_name(name)
    assert raised.value.exit_code == EXIT_USAGE
    assert "\n" not in raised.value.message.replace(repr(name), "")


def test_a_confined_name_is_normalized() -> None:
    assert volumecopy.member_name("specs/./nested//train.yaml") == "specs/nested/train.yaml"
    assert volumecopy.member_name("..hidden/x") == "..hidden/x"  # a name that only starts with dots stays


@pytest.mark.parametrize(
    ("to", "target"),
    [
        (None, "/workspace"),
        (".", "/workspace"),
        ("specs", "/workspace/specs"),
        ("specs/./a/", "/workspace/specs/a"),
        ("/workspace/data", "/workspace/data"),
        ("/workspace", "/workspace"),
    ],
)
def test_the_target_is_under_the_mount_path(to: str | None, target: str) -> None:
    assert volumecopy.target_dir("/workspace", to) == target


@pytest.mark.parametrize(
    ("to", "said"),
    [
        ("../outside", "must stay under the volume's mount path /workspace"),
        ("/workspace/../etc", "must stay under the volume's mount path"),
        ("/etc", "not under the volume's mount path /workspace"),
        ("/workspacex/a", "not under the volume's mount path /workspace"),
    ],
)
def test_a_target_out_of_the_mount_path_is_refused(to: str, said: str) -> None:
    with pytest.raises(UsageError, match=said) as raised:
        volumecopy.target_dir("/workspace", to)
    assert raised.value.message.startswith(f"--to {to!r}: ")


def test_the_listing_pairs_sizes_and_hashes_by_name() -> None:
    text = (
        "S 12 ./specs/train.yaml\n"
        "S 0 ./empty name.txt\n"
        "S 5 ./only-size\n"
        f"{A_HASH}  ./specs/train.yaml\n"
        f"{B_HASH}  ./empty name.txt\n"
        "find: ./unreadable: Permission denied\n"
        "garbage\n"
    )
    assert volumecopy.parse_listing(text) == {
        "specs/train.yaml": RemoteFile(12, A_HASH),
        "empty name.txt": RemoteFile(0, B_HASH),
        "only-size": RemoteFile(5, None),
    }
    assert volumecopy.parse_listing("") == {}


def test_the_listing_of_the_pushed_names_marks_directories() -> None:
    text = "D ./specs\nD ./specs/sub\nS 3 ./specs/a\n"
    assert volumecopy.parse_listing(text) == {
        "specs": RemoteFile(is_dir=True), "specs/sub": RemoteFile(is_dir=True), "specs/a": RemoteFile(3, None)
    }
    local = [LocalFile("specs/a", "/l/a", 3), LocalFile("specs/b", "/l/b", 3), LocalFile("specs/sub", "/l/s", 0)]
    assert volumecopy.to_hash(local, volumecopy.parse_listing(text)) == [local[0]]


def test_a_file_is_skipped_only_with_the_same_size_and_hash_and_hashed_only_when_the_size_matches() -> None:
    same = LocalFile("a", "/l/a", 3)
    other_hash = LocalFile("b", "/l/b", 3)
    other_size = LocalFile("c", "/l/c", 4)
    new = LocalFile("d", "/l/d", 1)
    no_hash = LocalFile("e", "/l/e", 2)
    remote = {"a": RemoteFile(3, A_HASH), "b": RemoteFile(3, A_HASH), "c": RemoteFile(9, A_HASH),
              "e": RemoteFile(2, None)}
    hashed: list[str] = []

    def sha(item: LocalFile) -> str:
        hashed.append(item.name)
        return A_HASH if item.name == "a" else B_HASH

    plan = volumecopy.plan_push([same, other_hash, other_size, new, no_hash], remote, sha)
    assert plan.skip == [same]
    assert plan.send == [other_hash, other_size, new, no_hash]
    assert hashed == ["a", "b"]  # c differs in size, d is not there, e has no hash: never read


def test_verify_names_what_is_missing_or_differs() -> None:
    arrived = {"a": RemoteFile(1, A_HASH), "b": RemoteFile(1, A_HASH)}
    assert volumecopy.verify({"a": A_HASH}, arrived) == []
    assert volumecopy.verify({"a": A_HASH, "b": B_HASH, "c": A_HASH}, arrived) == [
        "b: SHA-256 aaaaaaaaaaaa... differs from the bbbbbbbbbbbb... sent",
        "c: missing after the copy",
    ]


def test_human_bytes() -> None:
    assert [volumecopy.human_bytes(n) for n in (0, 1023, 1536, 5 * 1024**2, 3 * 1024**4)] == [
        "0 B", "1023 B", "1.5 KiB", "5.0 MiB", "3072.0 GiB"
    ]


def test_a_record_line_gives_a_hash_only_to_a_file_listed_with_the_same_stat() -> None:
    stat = "12 3 1700000000 2023-11-14 22:13:20.000000000 +0000|2026-12-06 22:16:19.748449767 +0000"
    moved = "12 3 1700000000 2023-11-14 22:13:20.000000000 +0000|2026-12-06 22:20:00.000000001 +0000"
    text = (
        f"F {stat}|./same\n"
        f"F {moved}|./touched\n"
        "D ./dir\n"
        + volumecopy.record_line("same", A_HASH, stat)
        + volumecopy.record_line("touched", B_HASH, stat)
        + volumecopy.record_line("gone", B_HASH, stat)
    )
    listed = volumecopy.parse_listing(text)
    assert listed["same"] == RemoteFile(3, A_HASH, stat=stat)
    assert listed["touched"] == RemoteFile(3, None, stat=moved)  # its change time moved on: hashed again
    assert "gone" not in listed and listed["dir"] == RemoteFile(is_dir=True)
    assert sorted(volumecopy.parse_record(text)) == ["gone", "same", "touched"]


def test_a_name_with_a_bar_or_spaces_survives_the_stat_line() -> None:
    stat = "7 5 1700000000 2023-11-14 22:13:20.000000000 +0000|2023-11-14 22:13:21.5 +0000"
    listed = volumecopy.parse_listing(f"F {stat}|./a |b c.txt\n")
    assert listed == {"a |b c.txt": RemoteFile(5, None, stat=stat)}
    assert volumecopy.stat_mtime(stat) == (1_700_000_000, True)
    assert volumecopy.stat_mtime("7 5 1700000000 2023-11-14 22:13:20.25 +0000|x") == (1_700_000_000, False)


def test_the_record_of_a_target_is_named_after_its_path_under_the_mount() -> None:
    one = volumecopy.record_path("/workspace", "/workspace/data")
    assert one.startswith(f"/workspace/{volumecopy.RECORD_DIR}/")
    assert volumecopy.record_path("/mnt", "/mnt/data").rsplit("/", 1)[1] == one.rsplit("/", 1)[1]
    assert volumecopy.record_path("/workspace", "/workspace") != one


def _archive(fmt: int, files: dict[str, bytes]) -> bytes:
    import io
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
        folder = tarfile.TarInfo("dir")
        folder.type = tarfile.DIRTYPE
        tar.addfile(folder)
        link = tarfile.TarInfo("dir/link")
        link.type, link.linkname = tarfile.SYMTYPE, "../" + "x" * (120 if fmt != tarfile.USTAR_FORMAT else 20)
        tar.addfile(link)
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["gnu", "pax", "ustar"])
def test_tar_entries_reads_members_of_archives_back_to_back_with_long_names(fmt: str) -> None:
    import io
    import tarfile

    form = {"gnu": tarfile.GNU_FORMAT, "pax": tarfile.PAX_FORMAT, "ustar": tarfile.USTAR_FORMAT}[fmt]
    long = "d" * 80 + "/" + "f" * 90 + ".pth"
    first = {long: b"w" * 1500, "empty": b"", "a": b"a" * 512}
    second = {"later/b.bin": bytes(range(256)) * 9}
    stream = io.BytesIO(_archive(form, first) + _archive(form, second))
    got: dict[str, bytes] = {}
    kinds: list[str] = []
    for member, chunks in volumecopy.tar_entries(stream, memoryview(bytearray(1000))):
        kinds.append(member.name if member.isfile() else f"({member.name})")
        if member.isfile() and member.name != "empty":
            got[member.name] = b"".join(bytes(c) for c in chunks)  # "empty" left unread: skipped all the same
    assert got == {long: first[long], "a": first["a"], "later/b.bin": second["later/b.bin"]}
    assert kinds == ["(dir)", "(dir/link)", long, "empty", "a", "(dir)", "(dir/link)", "later/b.bin"]


def test_tar_entries_refuses_a_cut_stream_and_one_that_is_not_tar() -> None:
    import io

    from kubectl_tao.core.errors import TaoError

    whole = _archive(0, {"a": b"a" * 3000})
    with pytest.raises(TaoError, match="ended in the middle of a file; pull again"):
        for _member, chunks in volumecopy.tar_entries(io.BytesIO(whole[:2048]), memoryview(bytearray(512))):
            list(chunks)
    with pytest.raises(TaoError, match="is not a tar archive"):
        list(volumecopy.tar_entries(io.BytesIO(b"<html>" + bytes(506)), memoryview(bytearray(512))))
