"""`kubectl tao lint` and `kubectl tao record`: the linter and the record store behind the plugin's verbs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from kubectl_tao.store.records import RecordStore

CLEAN = """\
apiVersion: batch/v1
kind: Job
metadata: {name: j}
spec:
  template:
    spec:
      containers:
      - name: tao
        image: busybox
        envFrom:
        - secretRef: {name: tao-creds-j}
"""
LEAKY = CLEAN + """\
        env:
        - name: HF_TOKEN
          value: hf_abcdefghijklmnopqrstuvwxyz012345
"""


def test_clean_manifest_exits_0_silently(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(CLEAN)
    assert cli("lint", str(path)) == (0, "", "")


def test_inline_credential_is_reported_on_stderr_with_exit_1(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(LEAKY)
    code, out, err = cli("lint", str(path))
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert lines[0].startswith(f"{path}:14: credential: 0/spec.template.spec.containers[0].env[0].value (")
    assert lines[-1].startswith("error: 1 inline credential(s) found; move each credential into a Secret")
    assert "hf_abcdefghijklmnopqrstuvwxyz012345" not in err


def test_stdin_is_read_for_dash(cli: Any) -> None:
    code, _, err = cli("lint", "-", stdin=LEAKY)
    assert code == 1
    assert err.startswith("<stdin>:14: credential:")


def test_several_files_are_all_checked(cli: Any, tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(CLEAN)
    (tmp_path / "b.env").write_text("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n")
    code, _, err = cli("lint", str(tmp_path / "a.yaml"), str(tmp_path / "b.env"))
    assert code == 1
    assert err.startswith(f"{tmp_path / 'b.env'}:1: ")


def test_unreadable_file_is_exit_2_before_any_finding(cli: Any, tmp_path: Path) -> None:
    (tmp_path / "leaky.yaml").write_text(LEAKY)
    code, _, err = cli("lint", str(tmp_path / "leaky.yaml"), str(tmp_path / "missing.yaml"))
    assert code == 2
    assert err == f"error: FILE: cannot read {tmp_path / 'missing.yaml'}: No such file or directory; check the path\n"


def test_stdin_given_twice_is_a_usage_error(cli: Any) -> None:
    code, _, err = cli("lint", "-", "-")
    assert code == 2
    assert err == "error: FILE: '-' (stdin) may be given only once\n"


def test_lint_without_files_is_a_usage_error(cli: Any) -> None:
    code, _, err = cli("lint")
    assert code == 2 and "Missing argument 'FILE...'" in err


# ----------------------------------------------------------------------------------------------- record

OPEN = ["record", "open", "--image", "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt", "--network-arch", "dino",
        "--action", "train", "--storage-tier", "A", "--results-root", "/workspace/results"]


def test_record_open_prints_the_new_id_and_writes_the_reference_format(cli: Any) -> None:
    code, out, _ = cli(*OPEN)
    rid = out.strip()
    assert code == 0 and rid.startswith("dino-train-")
    record = json.loads((Path(os.environ["TAO_STATE_DIR"]) / "jobs" / f"{rid}.json").read_text())
    assert record["platform"] == "kubernetes" and record["results_dir"] == f"/workspace/results/{rid}"


def test_record_mark_show_and_list(cli: Any) -> None:
    rid = cli(*OPEN)[1].strip()
    assert cli("record", "mark", rid, "--state", "RUNNING", "--backend-ref", f"tao/{rid}") == (0, "", "")
    code, out, _ = cli("record", "show", rid)
    assert code == 0 and json.loads(out)["backend_ref"] == f"tao/{rid}"
    code, out, _ = cli("record", "show", rid, "-o", "yaml")
    assert code == 0 and f"backend_ref: tao/{rid}" in out
    code, out, _ = cli("record", "list")
    assert out.splitlines()[0].split() == ["ID", "PLATFORM", "STATE", "RESULTS_DIR"]
    assert out.splitlines()[1].split() == [rid, "kubernetes", "RUNNING", f"/workspace/results/{rid}"]
    assert cli("record", "list", "--no-headers")[1].split()[0] == rid
    assert cli("record", "list", "-o", "name")[1] == f"{rid}\n"
    listed = json.loads(cli("record", "list", "-o", "json")[1])
    assert (listed["apiVersion"], listed["kind"], [r["id"] for r in listed["items"]]) == ("v1", "List", [rid])


def test_record_mark_can_print_the_record(cli: Any) -> None:
    rid = cli(*OPEN)[1].strip()
    code, out, _ = cli("record", "mark", rid, "--state", "ERROR", "--err-class", "ERR_PROGRAM", "-o", "json")
    assert code == 0 and json.loads(out)["terminal_state"] == "ERROR"


def test_record_open_json_prints_the_record(cli: Any) -> None:
    code, out, _ = cli(*OPEN, "-o", "json")
    assert code == 0 and json.loads(out)["transitions"][0]["state"] == "PENDING"


def test_record_verbs_share_the_store_with_tao_job_record(cli: Any) -> None:
    record = RecordStore(os.environ["TAO_STATE_DIR"]).open(
        platform="kubernetes", image="busybox", network_arch="dino", action="train", storage_tier="A",
        results_root="/r",
    )
    code, out, _ = cli("record", "list", "-o", "name")
    assert code == 0 and out == f"{record.id}\n"


def test_illegal_transition_exits_1(cli: Any) -> None:
    rid = cli(*OPEN)[1].strip()
    cli("record", "mark", rid, "--state", "COMPLETE")
    code, out, err = cli("record", "mark", rid, "--state", "RUNNING")
    assert code == 1 and out == ""
    assert err.startswith(f"error: illegal transition COMPLETE -> RUNNING: job record {rid} is final")


def test_unknown_state_is_a_usage_error(cli: Any) -> None:
    rid = cli(*OPEN)[1].strip()
    code, _, err = cli("record", "mark", rid, "--state", "DONE")
    assert code == 2
    assert err.startswith("error: --state must be one of PENDING, RUNNING")


def test_missing_record_exits_1(cli: Any) -> None:
    code, _, err = cli("record", "show", "nope-abc123")
    assert code == 1 and err.startswith("error: ") and "nope-abc123" in err


def test_relative_state_dir_is_a_usage_error(cli: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("TAO_STATE_DIR", "relative/dir")
    code, _, err = cli("record", "list")
    assert code == 2
    assert err.startswith("error: TAO_STATE_DIR must be an absolute path (got 'relative/dir')")


def test_record_output_formats_are_checked(cli: Any) -> None:
    code, _, err = cli("record", "show", "x", "-o", "table")
    assert code == 2
    assert err == "error: -o/--output: unknown format 'table'; use one of json, yaml\n"
    code, _, err = cli(*OPEN, "-o", "wide")
    assert code == 2 and err == "error: -o/--output: unknown format 'wide'; use one of name, json, yaml\n"


def test_record_without_a_verb_prints_help(cli: Any) -> None:
    code, out, _ = cli("record")
    assert code == 0
    assert "open" in out and "mark" in out and "show" in out and "list" in out
