"""`list` over a long history: the newest 100 by default (`--all`, `--limit N`), finished records served from
the list index without opening their files, and an index that follows every writer and survives damage."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubectl_tao.store.index import INDEX_NAME, VERSION
from kubectl_tao.store.records import RecordStore


def finished(store: RecordStore, count: int, state: str = "COMPLETE") -> list[str]:
    ids = []
    for _ in range(count):
        record = store.open(platform="kubernetes", image="busybox", network_arch="dino", action="train",
                            storage_tier="A", results_dir="/results/x")
        store.mark(record.id, "RUNNING", message="applied", backend_ref=f"tao-jobs/{record.id}")
        store.mark(record.id, state, message="done")
        ids.append(record.id)
    return ids


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record ids whose record file `list` opens (RecordStore.show is how it reads one)."""
    opened: list[str] = []
    real = RecordStore.show

    def show(self: RecordStore, record_id: str) -> Any:
        opened.append(record_id)
        return real(self, record_id)

    monkeypatch.setattr(RecordStore, "show", show)
    return opened


def names(out: str) -> list[str]:
    return out.split()


def test_second_list_opens_no_finished_record(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    store = RecordStore()
    ids = finished(store, 5)
    opened = count_reads(monkeypatch)
    first = cli("list", "--no-live", "-o", "name")
    assert first[0] == 0 and sorted(opened) == sorted(ids)
    opened.clear()
    second = cli("list", "--no-live", "-o", "name")
    assert second == first and opened == []
    assert (store.extras_dir / INDEX_NAME).is_file()


def test_a_record_written_since_is_read_again(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    store = RecordStore()
    ids = finished(store, 3, state="ERROR")
    cli("list", "--no-live")
    store.mark(ids[1], "ERROR", message="done", err_class="ERR_PROGRAM")  # another writer fills err_class
    store.update_extra(ids[2], gpus=4)
    opened = count_reads(monkeypatch)
    code, out, _ = cli("list", "--no-live", "-o", "wide")
    assert code == 0 and sorted(opened) == sorted(ids[1:])
    assert [line.split()[2] for line in out.splitlines()[1:] if line.startswith(ids[2])] == ["4"]


def test_a_damaged_or_foreign_index_is_rebuilt(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    store = RecordStore()
    ids = finished(store, 3)
    expected = cli("list", "--no-live", "-o", "name")[1]  # names: the table's AGE column moves with the clock
    index = store.extras_dir / INDEX_NAME
    for damage in ('{"version": 1, "records": {"x": ', '{"version": 99, "records": {}}', "[]"):
        index.write_text(damage)
        opened = count_reads(monkeypatch)
        assert cli("list", "--no-live", "-o", "name")[1] == expected
        assert sorted(opened) == sorted(ids)
        assert json.loads(index.read_text())["version"] == VERSION


def test_a_deleted_record_leaves_the_list_and_the_index(cli: Any) -> None:
    store = RecordStore()
    ids = finished(store, 2)
    cli("list", "--no-live")
    store.path(ids[0]).unlink()
    assert names(cli("list", "--no-live", "-o", "name")[1]) == [f"job/{ids[1]}"]
    assert list(json.loads((store.extras_dir / INDEX_NAME).read_text())["records"]) == [ids[1]]


def test_a_record_damaged_after_it_was_indexed_is_warned_about_and_skipped(cli: Any) -> None:
    """The index never vouches for a file written since: a finished record that another writer broke is read
    again, fails its schema, is named in one warning, and leaves the list and the index."""
    store = RecordStore()
    good, bad = finished(store, 2)
    cli("list", "--no-live")
    path = store.path(bad)
    record = json.loads(path.read_text(encoding="utf-8"))
    record["terminal_state"] = "DONE"
    path.write_text(json.dumps(record), encoding="utf-8")
    for _ in range(2):  # and again next time: a bad record is never cached
        code, out, err = cli("list", "--no-live", "-o", "name")
        assert code == 0 and names(out) == [f"job/{good}"]
        assert err.startswith(f"warning: job record {path} does not match job-record.schema.json at $.")
        assert err.count("\n") == 1 and "skipped" in err
        assert list(json.loads((store.extras_dir / INDEX_NAME).read_text())["records"]) == [good]


def test_json_still_shows_the_captured_history(cli: Any) -> None:
    store = RecordStore()
    [rid] = finished(store, 1)
    store.update_extra(rid, history={"captured_at": "2026-01-01T00:00:00Z", "ranks": []})
    cli("list", "--no-live")
    data = json.loads(cli("list", "--no-live", "-o", "json")[1])
    assert data["items"][0]["history"] == {"captured_at": "2026-01-01T00:00:00Z", "ranks": []}


def test_newest_hundred_by_default_all_and_limit(cli: Any) -> None:
    store = RecordStore()
    finished(store, 103)
    code, out, err = cli("list", "--no-live", "-o", "name")
    assert code == 0 and len(out.splitlines()) == 100
    assert err == "note: showing the newest 100 of 103 records; --all shows every one\n"
    code, out, err = cli("list", "--no-live", "-o", "name", "--all")
    assert code == 0 and len(out.splitlines()) == 103 and err == ""
    newest = cli("list", "--no-live", "-o", "name", "--limit", "2")[1].splitlines()
    assert newest == out.splitlines()[:2]


def test_limit_below_one_is_a_usage_error(cli: Any) -> None:
    code, out, err = cli("list", "--no-live", "--limit", "0")
    assert (code, out) == (2, "")
    assert err == "error: --limit must be at least 1 (got 0); use --all to show every record\n"


def test_list_never_compares_whole_records(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Record membership goes by id: comparing records made list quadratic (50 million at 10,000 records)."""
    from kubectl_tao.jobs.track import Tracked

    finished(RecordStore(), 3)
    compared: list[int] = []
    monkeypatch.setattr(Tracked, "__eq__", lambda self, other: compared.append(1) or self is other)
    code, out, _ = cli("list", "--no-live", "-o", "name")
    assert code == 0 and len(out.splitlines()) == 3 and compared == []


def _running_record(store: RecordStore) -> dict[str, Any]:
    from support.fake_kubectl import fixture_json

    job = fixture_json("running.job.json")
    record = store.open(platform="kubernetes", image="busybox", network_arch="dino", action="train",
                        storage_tier="A", results_dir="/results/x")
    name = job["metadata"]["name"]
    store.update_extra(record.id, api_server="https://127.0.0.1:6443", namespace="tao-jobs", job_name=name,
                       job_uid=job["metadata"]["uid"], nodes=1, submit_phase="created")
    store.mark(record.id, "RUNNING", message="applied", backend_ref=f"tao-jobs/{name}")
    return job


def _raw(items: list[dict[str, Any]]) -> dict[str, Any]:
    """A list as `kubectl get --raw` returns it: the items carry no kind."""
    return {"kind": "JobList", "items": [{k: v for k, v in i.items() if k != "kind"} for i in items]}


def test_live_state_comes_from_two_raw_reads(cli: Any, fake_kubectl: Any) -> None:
    from support.fake_kubectl import fixture_json

    from kubectl_tao.jobs.listing import raw_reads

    job = _running_record(RecordStore())
    jobs, pods = (argv for argv, _ in raw_reads().values())
    fake_kubectl.on(*jobs, data=_raw([job]))
    fake_kubectl.on(*pods, data=_raw(fixture_json("running.pods.json")["items"]))
    code, out, err = cli("list")
    assert code == 0, err
    assert out.splitlines()[1].split()[1] == "RUNNING"
    assert sorted(fake_kubectl.argvs()) == sorted([jobs, pods])
    assert jobs[-1] == "/apis/batch/v1/jobs?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dkubectl-tao"


def test_without_cluster_wide_list_the_raw_reads_go_per_namespace(cli: Any, fake_kubectl: Any) -> None:
    from support.fake_kubectl import fixture_json

    from kubectl_tao.jobs.listing import raw_reads

    job = _running_record(RecordStore())
    forbidden = 'Error from server (Forbidden): jobs.batch is forbidden: User "u" cannot list resource "jobs"'
    jobs, pods = (argv for argv, _ in raw_reads("/namespaces/tao-jobs").values())
    fake_kubectl.on(*jobs, data=_raw([job]))
    fake_kubectl.on(*pods, data=_raw(fixture_json("running.pods.json")["items"]))
    for argv, _ in raw_reads().values():
        fake_kubectl.on(*argv, stderr=forbidden, rc=1)
    code, out, err = cli("list")
    assert code == 0, err
    assert out.splitlines()[1].split()[1] == "RUNNING"
    assert sorted([jobs, pods]) == sorted(a for a in fake_kubectl.argvs() if "/namespaces/" in a[-1])


def _list_running(cli: Any, fake_kubectl: Any, job: dict[str, Any]) -> tuple[int, str, str]:
    from support.fake_kubectl import fixture_json

    from kubectl_tao.jobs.listing import raw_reads

    jobs, pods = (argv for argv, _ in raw_reads().values())
    fake_kubectl.rules.clear()
    fake_kubectl.on(*jobs, data=_raw([job]))
    fake_kubectl.on(*pods, data=_raw(fixture_json("running.pods.json")["items"]))
    return cli("list", "-o", "wide")


def test_an_unchanged_running_record_is_not_parsed_again(
    cli: Any, fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Running records come from the index by the digest of their files' bytes: no parse, schema check or
    redaction while nothing wrote them; the live state is still read and shown."""
    store = RecordStore()
    job = _running_record(store)
    _list_running(cli, fake_kubectl, job)  # writes what it saw ("running on ..."), then indexes it
    first = _list_running(cli, fake_kubectl, job)
    opened = count_reads(monkeypatch)
    second = _list_running(cli, fake_kubectl, job)
    assert second == first and second[0] == 0 and opened == []
    assert second[1].splitlines()[1].split()[1] == "RUNNING"
    [entry] = json.loads((store.extras_dir / INDEX_NAME).read_text())["records"].values()
    assert set(entry) == {"digest", "record", "extra"} and entry["extra"]["namespace"] == "tao-jobs"


def test_a_running_record_changed_in_place_is_read_again(
    cli: Any, fake_kubectl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same inode, size and mtime, other bytes (a writer in place, a coarse clock): the digest sees it."""
    import os

    store = RecordStore()
    job = _running_record(store)
    _list_running(cli, fake_kubectl, job)
    _list_running(cli, fake_kubectl, job)
    path = store.extra_path(next(iter(json.loads((store.extras_dir / INDEX_NAME).read_text())["records"])))
    before = os.stat(path)
    body = path.read_text()
    with open(path, "r+", encoding="utf-8") as handle:  # "nodes": 1 -> 7, in place
        handle.write(body.replace('"nodes": 1', '"nodes": 7'))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    opened = count_reads(monkeypatch)
    code, out, _ = _list_running(cli, fake_kubectl, job)
    assert code == 0 and len(opened) == 1
    assert out.splitlines()[1].split()[3] == "7"  # the NODES column


def test_a_running_record_that_ends_moves_to_the_slim_entry(cli: Any, fake_kubectl: Any) -> None:
    store = RecordStore()
    job = _running_record(store)
    _list_running(cli, fake_kubectl, job)
    [record_id] = json.loads((store.extras_dir / INDEX_NAME).read_text())["records"]
    store.mark(record_id, "CANCELED", message="canceled by hand")
    assert cli("list", "--no-live")[0] == 0
    entry = json.loads((store.extras_dir / INDEX_NAME).read_text())["records"][record_id]
    assert "record_stamp" in entry and "digest" not in entry and entry["record"]["terminal_state"] == "CANCELED"
