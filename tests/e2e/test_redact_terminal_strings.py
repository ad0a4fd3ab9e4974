"""A credential inside a terminal string, printed by a real container on the local cluster's real nodes: a
presigned URL as an OSC 8 hyperlink's address and a token in a window title. A terminal shows neither, but the
record's log tail and `status -o json/yaml` keep the sequence whole: the key id, the signature and the token are
redacted there, in `logs` and in the table. The container builds the values at run time (the command `submit`
lints holds none of them). Skipped when the cluster has no real nodes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.cluster import Tao

from .test_real_pods import images, real, status_json, submit  # noqa: F401  (fixtures)

pytestmark = pytest.mark.e2e

REDACTED = "***REDACTED***"
KEY_ID = "AKIA" + "FAKECANARYE2E012"
SIGNATURE = "fakecanarysig" + "e2e0123456789abcdef"
TOKEN = "hf_" + "FakeCanaryOscE2E0123456789abcdefgh"
# printf joins the halves: the command text holds no credential of any format.
COMMAND = (
    r"printf 'saved \033]8;;https://b.s3.amazonaws.com/k/model.bin?X-Amz-%s=%s%s&X-Amz-%s=%s%s\033\\model.bin"
    r"\033]8;;\033\\ \033]0;%s=%s%s\007 done\n' Credential AKIA FAKECANARYE2E012 Signature fakecanarysig "
    r"e2e0123456789abcdef HF_TOKEN hf_ FakeCanaryOscE2E0123456789abcdefgh; echo 'Traceback: boom' >&2; exit 1"
)


def test_a_credential_in_a_terminal_string_is_redacted_in_the_record_status_and_logs(
    real: Tao, images: dict[str, str]  # noqa: F811
) -> None:
    result = submit(real, images["BUSYBOX_IMAGE"], COMMAND, "--wait", "--timeout", "180", gpus=0)
    assert result.returncode == 1, result.stderr
    record_id = result.stdout.strip().splitlines()[-1]
    seen: dict[str, Any] = status_json(real, record_id)
    assert seen["state"] == "ERROR", seen
    tail = real.extra(record_id)["history"]["ranks"][0]["log_tail"]
    [line] = [entry for entry in tail if "model.bin" in entry]
    assert line.startswith("saved \x1b]8;;https://b.s3.amazonaws.com/k/model.bin?X-Amz-Credential=" + REDACTED)
    assert f"X-Amz-Signature={REDACTED}" in line and f"HF_TOKEN={REDACTED}" in line
    shown = [json.dumps(real.extra(record_id)), json.dumps(real.record(record_id)), result.stdout + result.stderr]
    for argv in (["status", record_id], ["status", record_id, "-o", "json"], ["status", record_id, "-o", "yaml"],
                 ["logs", record_id]):
        out = real(*argv)
        assert out.returncode in (0, 1), out.stderr
        shown.append(out.stdout + out.stderr)
    for text in shown:
        for canary in (KEY_ID, SIGNATURE, TOKEN):
            assert canary not in text
