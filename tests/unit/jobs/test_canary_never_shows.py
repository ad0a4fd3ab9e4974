"""A credential a job prints never shows, whatever is derived from the line that holds it: explain (text, -o json,
-o yaml: the evidence, the cause's facts and detail), status (text, -o json, -o yaml), logs, logs --errors (live,
and from the record once the Job is gone), the record's files (log tail, first errors, diagnosis, message) and
submit --wait's progress and last line. Hypothesis draws the credential, its form, the failure line it sits in
(each a line whose facts quote it: a path, a module, a kernel assertion, an exception's words), the rank that
prints it and the terminal sequences around it; the fake kubectl answers the logs as the kubelet does."""

from __future__ import annotations

import io
import os
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from support.fake_kubectl import FakeKubectl, failed_job, nccl_info

from kubectl_tao.core.redact import redact_log_line
from kubectl_tao.store.records import RecordStore

SERVER = "https://127.0.0.1:6443"
ALNUM = string.ascii_letters + string.digits

# Credential forms the redactor knows (core/redact.py's rules); each takes the canary, the value to hide.
FORMS = {
    "url password": lambda c: f"https://bob:{c}@data.example.com/train",
    "hf token": lambda c: f"hf_{c}",
    "github token": lambda c: f"ghp_{c}",
    "password=": lambda c: f"password={c}",
    "token:": lambda c: f"token: {c}",
}
# Failure lines whose facts quote what they hold (diagnosis/causes.py): S is where the credential goes.
LINES = {
    "path": "FileNotFoundError: [Errno 2] No such file or directory: '{s}/train.json'",
    "module": "ModuleNotFoundError: No module named 'plugins.{s}'",
    "kernel assert": "/src/k.cu:12: loss_kernel: block: [0,0,0], thread: [3,0,0] Assertion `{s} >= 0` failed.",
    "exception": "ValueError: cannot open {s}",
}
WRAPS = ("{}", "\x1b[31m{}\x1b[0m", "\x1b]0;title\x07{}", "'{}'")


def store() -> RecordStore:
    return RecordStore(os.environ["TAO_STATE_DIR"])


def launched(job: dict[str, Any]) -> str:
    records = store()
    record = records.open(platform="kubernetes", image="busybox", network_arch="dino", action="train",
                          storage_tier="A", results_dir="/workspace/results/x")
    name = job["metadata"]["name"]
    records.update_extra(record.id, api_server=SERVER, namespace="tao-jobs", job_name=name,
                         job_uid=job["metadata"]["uid"], nodes=2, gpus=1, submit_phase="created")
    records.mark(record.id, "RUNNING", message="applied", backend_ref=f"tao-jobs/{name}")
    return record.id


def serve(fake: FakeKubectl, job: dict[str, Any] | None, pods: list[dict[str, Any]], texts: dict[str, str]) -> None:
    fake.rules.clear()
    fake.on("get", "jobs,pods", data={"kind": "List", "items": [*([job] if job else []), *pods]})
    fake.on("get", "events", data={"kind": "List", "items": []})
    fake.on("get", "nodes", data={"kind": "List", "items": []})
    fake.on("patch", stdout="job.batch/patched\n")
    fake.logs(texts)


def shown(cli: Any, record_id: str) -> list[tuple[str, str]]:
    """What each surface printed (stdout and stderr)."""
    out = []
    for argv in (
        ["explain", record_id], ["explain", record_id, "-o", "json"], ["explain", record_id, "-o", "yaml"],
        ["logs", record_id], ["logs", record_id, "--errors"],
        ["status", record_id], ["status", record_id, "-o", "json"], ["status", record_id, "-o", "yaml"],
    ):
        code, stdout, stderr = cli(*argv)
        assert code in (0, 1), (argv, stderr)
        out.append((" ".join(argv[:1] + argv[2:]), stdout + stderr))
    return out


def record_files(record_id: str) -> list[tuple[str, str]]:
    state = Path(os.environ["TAO_STATE_DIR"]) / "jobs"
    return [(f"record {path.name}", path.read_text(encoding="utf-8"))
            for path in (state / f"{record_id}.json", state / ".kubectl-tao" / f"{record_id}.json")]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          phases=[Phase.explicit, Phase.reuse, Phase.generate])  # the message names the example: no shrinking
@given(
    core=st.text(ALNUM, min_size=8, max_size=24),
    form=st.sampled_from(sorted(FORMS)),
    line=st.sampled_from(sorted(LINES)),
    wrap=st.sampled_from(WRAPS),
    rank=st.integers(0, 1),
    chatty=st.booleans(),
)
def test_the_canary_never_shows_on_any_surface(
    cli: Any, fake_kubectl: FakeKubectl, core: str, form: str, line: str, wrap: str, rank: int, chatty: bool
) -> None:
    canary = f"Cnry{core}Zq9x7Wv3Lm5Tb8Rk2Pd4"  # long enough for every token form, unique in the output
    secret = wrap.format(FORMS[form](canary))
    failing = LINES[line].format(s=secret)
    job, pods = failed_job(2)
    names = [p["metadata"]["name"] for p in pods]
    lead = nccl_info(f"node-{rank}", 400) if chatty else "step 1 loss 0.03\n"
    texts = {
        names[rank]: f"{lead}Traceback (most recent call last):\n  File \"/workspace/train.py\", line 9, in <module>\n"
                     f"    main('{secret}')\n{failing}\n",
        names[1 - rank]: f"step 1 loss 0.03\nconnecting with {secret}\n",
    }
    for text in texts.values():  # forms the redactor knows, in each line that holds them
        assert all(canary not in redact_log_line(one) for one in text.splitlines()), "a form the redactor knows"
    record_id = launched(job)
    serve(fake_kubectl, job, pods, texts)
    seen = shown(cli, record_id)  # status captures the ending into the record

    # submit --wait: the same watch loop and last line, on a second record of the same failed job
    from kubectl_tao.commands.submit import ended_line
    from kubectl_tao.jobs import track as tracking
    from kubectl_tao.jobs.wait import Watchdogs, watch
    from kubectl_tao.k8s.kubectl import Kubectl

    waited = launched(job)
    progress = io.StringIO()
    obs = watch(Kubectl(), store(), tracking.load(store(), waited), server=SERVER, dogs=Watchdogs(interval=0),
                out=progress, tty=False, sleep=lambda _: None)
    seen += [("submit --wait", progress.getvalue() + ended_line(waited, obs))]
    assert obs.state == "ERROR"

    serve(fake_kubectl, None, [], texts)  # the Job is gone: from what the records kept
    seen += [(f"{name} (Job gone)", text) for name, text in shown(cli, record_id)]
    seen += record_files(record_id) + record_files(waited)
    leaked = [name for name, text in seen if canary in text]
    assert not leaked, f"{form} in a {line} line (rank {rank}, wrapped {wrap!r}) shows on: {leaked}"


@pytest.mark.parametrize("line", sorted(LINES))
def test_the_facts_a_line_gives_are_read_from_its_redacted_form(line: str) -> None:
    from kubectl_tao.diagnosis import ranklogs

    canary = "Cnry0a1b2c3d4e5f6g7h8i9j0kZq9x"
    failing = LINES[line].format(s=FORMS["url password"](canary))
    read = ranklogs.from_result(_completed(f"[pod/p-0-aaaaa/tao] {failing}\n"))
    found = ranklogs.diagnose(read, {"ranks": [{"rank": 0, "pod": "p-0-aaaaa", "exit_code": 1}]})
    assert found is not None and found.facts, line
    assert canary not in repr(found.to_dict()) and "***REDACTED***" in repr(found.to_dict())
    assert canary not in ranklogs.message(found)


def _completed(stdout: str) -> Any:
    from kubectl_tao.k8s.kubectl import Completed

    return Completed(stdout, "", 0)
