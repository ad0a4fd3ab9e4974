"""A submit writes its record as few times as its crash guarantees allow: open, the Kubernetes names before the
dry-run, the Job UID once it exists, RUNNING."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import FakeKubectl, review_answer

from kubectl_tao.store.records import RecordStore

SUBMIT = ["submit", "--image", "busybox", "--command", "true", "--storage-tier", "C", "--s3-output", "s3://bucket/out",
          "--gpus", "0"]


def test_a_submit_writes_the_record_four_times(
    cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[str] = []
    for method in ("open", "mark", "update_extra"):
        real = getattr(RecordStore, method)

        def spy(self: RecordStore, *args: Any, _real: Any = real, _name: str = method, **kwargs: Any) -> Any:
            writes.append(_name if _name != "update_extra" else str(kwargs.get("submit_phase")))
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(RecordStore, method, spy)
    review, granted = review_answer()
    fake_kubectl.on(*review, stdout=granted)
    fake_kubectl.on("create", "--dry-run=server", stdout="job.batch/x created (server dry run)\n")
    fake_kubectl.on("create", "-f", stdout="Job x 0b9b6c1e-1111-2222-3333-444455556666\n")
    code, _, err = cli(*SUBMIT)
    assert code == 0, err
    assert writes == ["open", "dry-run", "created", "mark"]
