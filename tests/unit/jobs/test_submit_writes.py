"""A submit writes its record as few times as its crash guarantees allow: open, the Kubernetes names before the
dry-run, then the Job UID together with RUNNING (one write under one lock)."""

from __future__ import annotations

from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl, review_answer

from kubectl_tao.store.records import RecordStore

SUBMIT = ["submit", "--image", "busybox", "--command", "true", "--storage-tier", "C", "--s3-output", "s3://bucket/out",
          "--gpus", "0"]


def _submitted(cli: Any, fake_kubectl: FakeKubectl) -> None:
    """One SUBMIT that the review grants and the server creates (UID 0b9b6c1e-...)."""
    review, granted = review_answer()
    fake_kubectl.on(*review, stdout=granted)
    fake_kubectl.on("create", "--dry-run=server", stdout="job.batch/x created (server dry run)\n")
    fake_kubectl.on("create", "-f", stdout="Job x 0b9b6c1e-1111-2222-3333-444455556666\n")
    code, _, err = cli(*SUBMIT)
    assert code == 0, err


def test_a_submit_writes_the_record_twice_after_opening_it(
    cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[str] = []
    for method in ("open", "mark", "update_k8s", "merge_k8s"):
        real = getattr(RecordStore, method)

        def spy(self: RecordStore, *args: Any, _real: Any = real, _name: str = method, **kwargs: Any) -> Any:
            if _name == "update_k8s":
                writes.append(str(kwargs.get("submit_phase")))
            elif _name == "merge_k8s":
                writes.append(str(args[1].submit_phase))
            elif _name == "mark" and kwargs.get("k8s"):
                writes.append(f"mark+{kwargs['k8s'].submit_phase}")
            else:
                writes.append(_name)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(RecordStore, method, spy)
    _submitted(cli, fake_kubectl)
    assert writes == ["open", "dry-run", "mark+created"]


def test_a_submits_record_files_hold_their_keys_in_the_order_the_dict_writers_wrote(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    """The typed writes keep the files' bytes: the sibling file holds the names written before the create, then
    the kept request, then the UID pin the RUNNING mark merged in (its submit_phase replaced in place)."""
    import json

    _submitted(cli, fake_kubectl)
    store = RecordStore()
    [record] = store.list()
    written = store.extra_path(record.id).read_bytes()
    extra = json.loads(written)
    order = ["schema_version", "id", "api_server", "context", "namespace", "job_name", "secret_names",
             "service_name", "gpus", "nodes", "gang", "submit_phase", "warnings", "request", "job_uid"]
    assert list(extra) == order
    assert (extra["submit_phase"], extra["job_uid"]) == ("created", "0b9b6c1e-1111-2222-3333-444455556666")
    assert written == (json.dumps(extra, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    job = json.loads(store.path(record.id).read_bytes())
    assert list(job) == ["schema_version", "id", "platform", "backend_ref", "image", "network_arch", "action",
                         "results_dir", "storage_tier", "submitted_at", "transitions", "terminal_state", "redacted",
                         "upload_excludes"]
    assert [t["state"] for t in job["transitions"]] == ["PENDING", "RUNNING"]
