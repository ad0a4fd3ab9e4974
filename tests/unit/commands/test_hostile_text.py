"""Hostile text through the public verbs (issue 26): what a pod, an event, a record or a job's log holds never
drives the terminal, and a token hidden behind a colour code is redacted, live or captured, in `status`,
`explain`, `list` and `logs`; `-o json|yaml` stay valid and hold the values as read. kubectl is scripted."""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest
from ruamel.yaml import YAML
from support.fake_kubectl import FakeKubectl, fixture_json

from kubectl_tao.core import redact
from kubectl_tao.core.redact import REDACTED
from kubectl_tao.k8s.kubectl import Kubectl
from kubectl_tao.store.records import RecordStore

SERVER = "https://127.0.0.1:6443"
TOKEN = "hf_FakeCanaryHf0123456789abcdefghijkl"
# Window title, hidden hyperlink, erase the line above and fake a result, invisible text, C1 CSI, a bidi override.
HOSTILE = (
    "pull failed \x1b]0;pwned\x07 see \x1b]8;;https://evil.example/\x1b\\docs\x1b]8;;\x1b\\ "
    "\x1b[1A\x1b[2K\rkubectl-tao: job COMPLETE \x1b[8mhidden\x1b[0m \x9b31mred\u202eexe.txt"
)
# What must never reach the terminal: ESC, C1 controls, a carriage return, a direction override.
ACTS_ON_TERMINAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def store() -> RecordStore:
    return RecordStore(os.environ["TAO_STATE_DIR"])


def launched(name: str, **extra: Any) -> str:
    records = store()
    record = records.open(platform="kubernetes", image="nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt",
                          network_arch="dino", action="train", storage_tier="A", results_root="/workspace/results")
    records.mark(record.id, "RUNNING", backend_ref=f"tao-jobs/{name}")
    records.update_extra(record.id, namespace="tao-jobs", job_name=name, api_server=SERVER, **extra)
    return record.id


def serve_pull_failure(fake: FakeKubectl, message: str = HOSTILE) -> str:
    """A Job whose pod cannot pull its image, the kubelet's message and every event message replaced."""
    job, pods, events = (fixture_json(f"imagepull.{part}.json") for part in ("job", "pods", "events"))
    for pod in pods["items"]:
        for status in pod["status"]["containerStatuses"]:
            status["state"]["waiting"]["message"] = message
    for event in events["items"]:
        event["message"] = message
    fake.on("get", "jobs,pods", data={"kind": "List", "items": [job, *pods["items"]]})
    fake.on("get", "events", data=events)
    return str(job["metadata"]["name"])


def assert_inert(text: str) -> None:
    found = ACTS_ON_TERMINAL.findall(text)
    assert found == [], f"reaches the terminal: {found!r} in {text!r}"


def test_status_shows_a_hostile_pod_message_inert(cli: Any, fake_kubectl: FakeKubectl) -> None:
    rid = launched(serve_pull_failure(fake_kubectl))
    code, out, err = cli("status", rid)
    assert code == 0, err
    assert_inert(out + err)
    assert "pull failed" in out and "docs" in out and "hidden" in out  # the text is shown, the sequences are not
    assert not any(line.startswith("kubectl-tao") for line in out.splitlines())  # no line of its own


def test_explain_evidence_is_inert(cli: Any, fake_kubectl: FakeKubectl) -> None:
    rid = launched(serve_pull_failure(fake_kubectl))
    code, out, err = cli("explain", rid)
    assert code == 1
    assert_inert(out + err)
    evidence = [line for line in out.splitlines() if line.startswith("   evidence: ")]
    assert evidence and all("pull failed" in line for line in evidence)
    assert all(line.startswith(("job ", "   ", "gang: ", "nothing")) or line[:1].isdigit() for line in out.splitlines())


@pytest.mark.parametrize("verb", ["status", "explain"])
def test_json_and_yaml_output_stay_valid_and_hold_the_message_as_read(
    cli: Any, fake_kubectl: FakeKubectl, verb: str
) -> None:
    rid = launched(serve_pull_failure(fake_kubectl))
    _, as_json, _ = cli(verb, rid, "-o", "json")
    _, as_yaml, _ = cli(verb, rid, "-o", "yaml")
    assert_inert(as_json)
    assert_inert(as_yaml)
    from_json, from_yaml = json.loads(as_json), YAML(typ="safe", pure=True).load(as_yaml)
    quoted = [from_json["message"], from_yaml["message"]] if verb == "status" else [
        from_json["findings"][0]["evidence"], from_yaml["findings"][0]["evidence"]]
    assert quoted[0] == quoted[1]
    for part in HOSTILE.split("\r"):  # every byte kubectl gave is there, escaped by JSON and YAML, not removed
        assert part in quoted[0]


def test_list_escapes_a_carriage_return_in_a_record_message(cli: Any, fake_kubectl: FakeKubectl) -> None:
    rid = launched("dino-train-gone")
    store().mark(rid, "ERROR", message="boom\r\x1b[2Kkubectl-tao: job COMPLETE", err_class="ERR_PROGRAM")
    for argv in (["list", "--no-live"], ["list", "--no-live", "-o", "wide"]):
        code, out, err = cli(*argv)
        assert code == 0, err
        assert_inert(out + err)
        [row] = [line for line in out.splitlines() if line.startswith(rid)]
        assert "boom\\rkubectl-tao: job COMPLETE" in row


def test_logs_redact_a_token_behind_a_colour_code_and_show_no_sequence(cli: Any, fake_kubectl: FakeKubectl) -> None:
    name = serve_pull_failure(fake_kubectl, "pulling")
    rid = launched(name)
    fake_kubectl.on("logs", stdout=(
        f"[pod/{name}-abcde/tao] step 1 \x1b[32m{TOKEN}\x1b[0m\n"
        f"[pod/{name}-abcde/tao] {HOSTILE}\n"
        f'[pod/{name}-abcde/tao] {{"msg": "\\u001b[32m{TOKEN}\\u001b[0m"}}\n'
    ))
    code, out, err = cli("logs", rid)
    assert code == 0, err
    assert_inert(out + err)
    assert TOKEN not in out and out.count(REDACTED) == 2
    assert out.splitlines()[0] == f"step 1 {REDACTED}"


def test_logs_raw_prints_what_kubectl_printed(cli: Any, fake_kubectl: FakeKubectl) -> None:
    name = serve_pull_failure(fake_kubectl, "pulling")
    rid = launched(name)
    fake_kubectl.on("logs", stdout=f"[pod/{name}-abcde/tao] step 1 \x1b[32mok\x1b[0m\r\n")
    code, out, _ = cli("logs", rid, "--raw")
    assert code == 0
    assert out == "step 1 \x1b[32mok\x1b[0m\r\n"


def test_live_logs_and_the_captured_tail_show_a_line_the_same_way(cli: Any, fake_kubectl: FakeKubectl,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`logs -f` (streamed) and `logs` once the Job is gone (the tail the record captured) print one line alike."""
    line = f"auth ok \x1b[1m{TOKEN}\x1b[0m token: FakeCanaryPlainTok42"
    fake_kubectl.on("get", "jobs,pods", "-n", "tao-jobs", "-l", "tao-job=dino-train-gone",
                    data={"kind": "List", "items": []})
    name = serve_pull_failure(fake_kubectl, "pulling")
    rid = launched(name)
    streamed = [f"[pod/{name}-abcde/tao] {line}\n"]
    monkeypatch.setattr(Kubectl, "stream", lambda self, args, namespaced=True: iter(streamed))
    monkeypatch.setattr(Kubectl, "exec", lambda self, args, namespaced=True: pytest.fail("kubectl got the terminal"))
    code, live, err = cli("logs", rid, "-f")
    assert code == 0, err

    gone = launched("dino-train-gone", history={"state": "ERROR", "ranks": [{"rank": 0, "log_tail": [line]}]})
    code, captured, err = cli("logs", gone)
    assert code == 0, err
    assert live == captured
    assert TOKEN not in live and "FakeCanaryPlainTok42" not in live and live.count(REDACTED) == 2


def test_status_of_a_failed_job_with_a_400_kb_log_line_does_bounded_work(
    cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The capture of a failed job's log tail (which took 113 s with a 400 KB line) reads each long line in
    windows: no pass of the rules sees more than a window of it, and all passes together about twice the line."""
    job, pods = fixture_json("exit-code.job.json"), fixture_json("exit-code.pods.json")
    name = job["metadata"]["name"]
    fake_kubectl.on("get", "jobs,pods", data={"kind": "List", "items": [job, *pods["items"]]})
    long_line = "curl -H a: password: x " * (400_000 // 23)
    fake_kubectl.on("logs", stdout=f"[pod/{pods['items'][0]['metadata']['name']}/tao] {long_line}{TOKEN}\n")
    rid = launched(name)
    seen: list[int] = []
    real = redact._hits_in

    def counting(text: str, **kwargs: Any) -> Any:
        seen.append(len(text))
        return real(text, **kwargs)

    monkeypatch.setattr(redact, "_hits_in", counting)
    code, _, err = cli("status", rid)
    assert code == 0, err
    tail = store().get_extra(rid)["history"]["ranks"][0]["log_tail"]
    assert tail and TOKEN not in json.dumps(tail)
    passes = sum(1 for size in seen if size > redact.WINDOW)  # each redaction of the line: one blanked pass
    assert passes and sum(seen) <= 2.5 * passes * len(long_line)


# A presigned S3 link printed as an OSC 8 hyperlink (the terminal shows "model.bin") and a token in a window title.
AWS_KEY_ID = "AKIAFAKECANARY012345"
SIGNATURE = "fakecanarysig0123456789abcdef0123456789abcdef0123456789abcdef0123"
OSC_LINE = (
    f"saved \x1b]8;;https://b.s3.amazonaws.com/k/model.bin?X-Amz-Credential={AWS_KEY_ID}%2F20250101%2Fus-east-1"
    f"&X-Amz-Signature={SIGNATURE}\x1b\\model.bin\x1b]8;;\x1b\\ \x1b]0;HF_TOKEN={TOKEN}\x07 Traceback: boom"
)


def test_a_credential_inside_a_terminal_string_is_redacted_on_every_surface(
    cli: Any, fake_kubectl: FakeKubectl
) -> None:
    """The address of an OSC 8 link and a window title are hidden by a terminal but kept in a record's log tail
    and in -o json/yaml: the redactor reads them as text."""
    job, pods = fixture_json("exit-code.job.json"), fixture_json("exit-code.pods.json")
    fake_kubectl.on("get", "jobs,pods", data={"kind": "List", "items": [job, *pods["items"]]})
    fake_kubectl.on("logs", stdout=f"[pod/{pods['items'][0]['metadata']['name']}/tao] {OSC_LINE}\n")
    rid = launched(job["metadata"]["name"])
    outputs = [cli("status", rid), cli("status", rid, "-o", "json"), cli("status", rid, "-o", "yaml"),
               cli("logs", rid)]
    for code, out, err in outputs:
        assert code in (0, 1), err
        assert_inert(out + err)
    record = json.dumps(store().get_extra(rid))
    tail = store().get_extra(rid)["history"]["ranks"][0]["log_tail"]
    assert any(REDACTED in line and "\x1b]8;;https://b.s3.amazonaws.com/" in line for line in tail)
    for canary in (AWS_KEY_ID, SIGNATURE, TOKEN):
        assert canary not in record
        for _, out, err in outputs:
            assert canary not in out + err
