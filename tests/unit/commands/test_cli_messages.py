"""The command line's own words: -o help generated per verb from the formats it takes, suggestions for a mistyped
verb or flag (closest first), the exit code and one-line message of each bad global flag, and the messages that
name the next command to run."""

from __future__ import annotations

import re
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl

from kubectl_tao.core import errors
from kubectl_tao.store.records import RecordStore

REFUSED = "The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?"
RENDER = ["render", "--image", "busybox:1.36", "--command", "true", "--gpus", "0", "--pvc", "data"]


def _help_output_line(cli: Any, *verb: str) -> str:
    code, out, _ = cli(*verb, "--help")
    assert code == 0
    text = " ".join(out.split())
    found = re.search(r"Output format: [^.]*\.", text)
    assert found, text
    return found.group(0)


@pytest.mark.parametrize(
    ("verb", "line"),
    [
        (["render"], "Output format: yaml (default) or json."),
        (["version"], "Output format: json or yaml (default: text)."),
        (["explain"], "Output format: json or yaml (default: text)."),
        (["preflight"], "Output format: json or yaml (default: OK/WARN/MISSING lines)."),
        (["fit"], "Output format: json or yaml (default: text)."),
        (["cancel"], "Output format: json, yaml or name (default: text)."),
        (["resubmit"], "Output format: json, yaml or name (default: the new record id)."),
        (["submit"], "Output format: json, yaml or name (default: the record id)."),
        (["gpus"], "Output format: wide, json or yaml (default: a table)."),
        (["list"], "Output format: wide, json, yaml or name (default: a table)."),
        (["status"], "Output format: wide, json, yaml or name (default: a table)."),
        (["record", "list"], "Output format: json, yaml or name (default: a table)."),
        (["probe", "nccl"], "Output format: json or yaml (default: a table)."),
        (["record", "show"], "Output format: json (default) or yaml."),
        (["record", "mark"], "Output format: none (default), json or yaml: the record after the mark."),
    ],
)
def test_output_help_lists_the_formats_the_verb_takes(cli: Any, verb: list[str], line: str) -> None:
    assert _help_output_line(cli, *verb) == line


@pytest.mark.parametrize(
    ("verb", "bad", "named"),
    [
        (["version"], "wide", "json, yaml"),
        (["cancel", "x"], "wide", "json, yaml, name"),
        (["gpus"], "name", "wide, json, yaml"),
    ],
)
def test_a_format_the_help_does_not_list_is_refused(cli: Any, verb: list[str], bad: str, named: str) -> None:
    code, out, err = cli(*verb, "-o", bad)
    assert (code, out) == (errors.EXIT_USAGE, "")
    assert err == f"error: -o/--output: unknown format '{bad}'; use one of {named}\n"


def test_render_refuses_o_table_instead_of_printing_yaml(cli: Any, fake_kubectl: FakeKubectl) -> None:
    code, out, err = cli(*RENDER, "-o", "table")
    assert (code, out) == (errors.EXIT_USAGE, "")
    assert err == "error: -o/--output: unknown format 'table'; use one of yaml, json\n"
    assert fake_kubectl.calls == []


def test_a_mistyped_verb_gets_a_suggestion(cli: Any) -> None:
    code, out, err = cli("rendr")
    assert (code, out) == (errors.EXIT_USAGE, "")
    assert err == "error: No such command 'rendr'. Did you mean 'render'? (see 'kubectl tao --help')\n"


def test_a_word_close_to_no_verb_gets_no_suggestion(cli: Any) -> None:
    code, _, err = cli("xyzzy")
    assert code == errors.EXIT_USAGE
    assert err == "error: No such command 'xyzzy'. (see 'kubectl tao --help')\n"


def test_option_suggestions_come_closest_first(cli: Any) -> None:
    code, _, err = cli("render", "--imgae", "x")
    assert code == errors.EXIT_USAGE
    assert err.startswith("error: No such option '--imgae'. Did you mean '--image'")
    assert err.count("\n") == 1


def test_a_mistyped_sub_verb_still_gets_its_suggestion(cli: Any) -> None:
    code, _, err = cli("record", "shw")
    assert code == errors.EXIT_USAGE
    assert err == "error: No such command 'shw'. Did you mean 'show'? (see 'kubectl tao record --help')\n"


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_request_timeout_kubectl_cannot_read_is_bad_input(
    cli: Any, fake_kubectl: FakeKubectl, where: str
) -> None:
    flags = ["--request-timeout", "abc"]
    code, out, err = cli(*flags, "gpus") if where == "before" else cli("gpus", *flags)
    assert (code, out) == (errors.EXIT_USAGE, "")
    assert err == (
        "error: --request-timeout is not a timeout kubectl reads: give whole seconds (0 = no limit) or a "
        "duration such as 30s, 2m or 1h\n"
    )
    assert fake_kubectl.calls == []


@pytest.mark.parametrize("value", ["0", "30", "30s", "1h30m", "1.5m", "300ms"])
def test_request_timeouts_kubectl_reads_pass_through(cli: Any, fake_kubectl: FakeKubectl, value: str) -> None:
    fake_kubectl.on("version", data={"serverVersion": {"major": "1", "minor": "31", "gitVersion": "v1.31.0"}})
    code, _, err = cli("version", "--server", "--request-timeout", value)
    assert (code, err) == (0, "")
    assert f"--request-timeout={value}" in fake_kubectl.argvs()[0]


def test_an_unknown_context_is_named_once(cli: Any, fake_kubectl: FakeKubectl) -> None:
    fake_kubectl.on("version", stderr='error: context "nope" does not exist', rc=1)
    code, _, err = cli("version", "--server", "--context", "nope")
    assert code == errors.EXIT_USAGE
    assert err == 'error: --context: context "nope" does not exist; list contexts with `kubectl config get-contexts`\n'


def test_kubectl_own_error_prefix_is_printed_once(cli: Any, fake_kubectl: FakeKubectl) -> None:
    fake_kubectl.on("version", stderr="error: something kubectl refused", rc=1)
    code, _, err = cli("version", "--server")
    assert code == errors.EXIT_FAILURE
    assert err == "error: something kubectl refused\n"


def test_a_missing_record_names_the_plugin_list_verb(cli: Any, tao_env: Any) -> None:
    code, out, err = cli("status", "nosuch")
    assert (code, out) == (errors.EXIT_FAILURE, "")
    assert err.startswith("error: no job record nosuch at ")
    assert err.endswith("; `kubectl tao list` shows the records\n")
    assert "tao_job_record" not in err


@pytest.mark.parametrize("verb", ["status", "cancel", "explain", "logs"])
def test_a_malformed_record_id_names_the_plugin_list_verb(cli: Any, tao_env: Any, verb: str) -> None:
    code, out, err = cli(verb, "bad!id")
    assert (code, out) == (errors.EXIT_USAGE, "")
    assert err == (
        "error: record id 'bad!id' is not a record id: use letters, digits, '.', '_' and '-', starting with a "
        "letter or digit (`kubectl tao list` shows the ids)\n"
    )


def test_the_record_script_keeps_naming_itself(tao_env: Any) -> None:
    with pytest.raises(errors.TaoError, match=r"; `tao_job_record list` shows the records$"):
        RecordStore().show("nosuch")


def test_list_with_a_running_record_and_no_cluster_points_at_no_live(
    cli: Any, fake_kubectl: FakeKubectl, tao_env: Any
) -> None:
    store = RecordStore()
    record = store.open(platform="kubernetes", image="busybox:1.36", network_arch="dino", action="train",
                        storage_tier="A", results_root="/workspace/results")
    store.mark(record.id, "RUNNING", backend_ref="tao-jobs/job-1")
    store.update_extra(record.id, namespace="tao-jobs", job_name="job-1", api_server="https://127.0.0.1:6443")
    fake_kubectl.on(stderr=REFUSED, rc=1)
    code, out, err = cli("list")
    assert (code, out) == (errors.EXIT_UNREACHABLE, "")
    assert err.count("\n") == 1
    assert err.startswith("error: cluster unreachable: ")
    assert err.endswith("; `kubectl tao list --no-live` shows the recorded states\n")
    code, out, err = cli("list", "--no-live")
    assert code == 0 and record.id in out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--wait", "--timeout", "-1"], "error: --timeout -1: give a positive number of seconds (leave --timeout out "
                                        "for no limit)\n"),
        (["--wait", "--pending-timeout", "0"], "error: --pending-timeout 0: give a positive number of seconds "
                                               "(leave --pending-timeout out for no limit)\n"),
        (["--wait", "--image-pull-timeout", "nan"], "error: --image-pull-timeout nan: give a positive number of "
                                                    "seconds (leave --image-pull-timeout out for no limit)\n"),
    ],
)
def test_submit_refuses_a_wait_limit_that_is_not_positive_before_the_cluster(
    cli: Any, fake_kubectl: FakeKubectl, flags: list[str], message: str
) -> None:
    code, out, err = cli("submit", *RENDER[1:], *flags)
    assert (code, out, err) == (errors.EXIT_USAGE, "", message)
    assert fake_kubectl.calls == []


def test_status_watch_refuses_a_negative_timeout(cli: Any, fake_kubectl: FakeKubectl) -> None:
    code, _, err = cli("status", "x", "--watch", "--timeout", "-5")
    assert (code, err) == (errors.EXIT_USAGE, "error: --timeout -5: give a positive number of seconds (leave "
                                              "--timeout out for no limit)\n")
    assert fake_kubectl.calls == []


def test_render_names_the_line_of_an_inline_token_in_what_it_would_print(cli: Any) -> None:
    token = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789"
    command = f"curl -H 'Authorization: Bearer {token}' https://example.com"
    code, out, err = cli(*RENDER[:4], command, *RENDER[5:])
    assert (code, out) == (errors.EXIT_FAILURE, "")
    found = re.search(r"\(rendered manifest:(\d+): ", err)
    assert found, err
    # The same job without the token: the line named is the line of the command in what render prints.
    code, printed, _ = cli(*RENDER[:4], "curl -H 'X-Note: hello' https://example.com", *RENDER[5:])
    assert code == 0
    lines = printed.splitlines()
    assert "curl -H 'X-Note: hello'" in lines[int(found.group(1)) - 1]
    assert token not in err


def test_lint_help_suggests_no_file_it_always_refuses(cli: Any) -> None:
    code, out, _ = cli("lint", "--help")
    assert code == 0
    assert not re.search(r"kubectl tao lint [^\n]*\.env\b", out)
    assert "leave it out of the files you lint" in " ".join(out.split())


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--gpus", "65"], "error: --gpus must be a whole number from 0 to 64, got 65\n"),
        (["--gpus", "-1"], "error: --gpus must be a whole number from 0 to 64, got -1\n"),
        (["--gpus", "1", "--nodes", "1025"], "error: --nodes must be a whole number from 1 to 1024, got 1025\n"),
        (["--gpus", "1", "--nodes", "0"], "error: --nodes must be a whole number from 1 to 1024, got 0\n"),
    ],
)
def test_fit_applies_the_bounds_submit_applies(
    cli: Any, fake_kubectl: FakeKubectl, flags: list[str], message: str
) -> None:
    assert cli("fit", *flags) == (errors.EXIT_USAGE, "", message)
    assert fake_kubectl.calls == []


@pytest.mark.parametrize("verb", ["render", "submit"])
@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--gpus", "65"], "error: --gpus must be a whole number from 0 to 64, got 65\n"),
        (["--nodes", "1025"], "error: --nodes must be a whole number from 1 to 1024, got 1025\n"),
    ],
)
def test_render_and_submit_name_the_flag_out_of_bounds(
    cli: Any, fake_kubectl: FakeKubectl, verb: str, flags: list[str], message: str
) -> None:
    base = ["--image", "busybox:1.36", "--command", "true", "--pvc", "data"]
    assert cli(verb, *base, *flags) == (errors.EXIT_USAGE, "", message)
    assert fake_kubectl.calls == []


def test_every_job_flag_a_cause_fix_names_is_spelled_as_submit_takes_it() -> None:
    from kubectl_tao.core.flagtable import JOB_FLAGS
    from kubectl_tao.diagnosis import causes

    spellings = {name for flag in JOB_FLAGS.values() for name in flag.names}
    named = {flag for cause in causes.CAUSES for flag in re.findall(r"--[a-z][a-z-]*[a-z]", cause.fix)}
    # A flag that is not a job flag must not be a shortened one either (`--mount` for `--mount-path`).
    shortened = {flag for flag in named - spellings if any(s.startswith(flag + "-") for s in spellings)}
    assert shortened == set()
    missing_file = next(cause for cause in causes.CAUSES if cause.name == "MissingFile")
    assert "--mount-path" in missing_file.fix


def test_a_kubectl_that_cannot_be_found_exits_3_naming_the_variable(
    cli: Any, tao_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = str(tao_env / "no-such-kubectl")
    monkeypatch.setenv("KUBECTL_TAO_KUBECTL", missing)
    code, out, err = cli("gpus")
    assert (code, out) == (errors.EXIT_UNREACHABLE, "")
    assert err == f"error: kubectl not found on PATH ({missing}); install kubectl or set KUBECTL_TAO_KUBECTL\n"


@pytest.mark.parametrize(
    ("stderr", "head"),
    [
        ("error: You must be logged in to the server (Unauthorized)",
         "error: the API server refused your credentials: You must be logged in to the server (Unauthorized); "),
        ('error: context "nope" does not exist', 'error: --context: context "nope" does not exist; '),
    ],
)
def test_kubectl_words_inside_a_message_of_ours_say_error_once(
    cli: Any, fake_kubectl: FakeKubectl, stderr: str, head: str
) -> None:
    fake_kubectl.on("version", stderr=stderr, rc=1)
    code, _, err = cli("version", "--server")
    assert code in (errors.EXIT_USAGE, errors.EXIT_UNREACHABLE)
    assert err.startswith(head)
    assert err.count("error:") == 1 and err.count("\n") == 1
