"""The manifest secret linter and the redact_secrets command (kubectl_tao.core.lint)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from kubectl_tao.core.lint import (
    lint_documents,
    lint_manifest_text,
    lint_text,
    load_manifest_documents,
    main,
    redact_manifest_text,
)
from kubectl_tao.core.redact import REDACTED

HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"

DIRTY = textwrap.dedent(
    f"""\
    # leftover: HF_TOKEN={HF}
    apiVersion: batch/v1
    kind: Job
    metadata:
      name: j
      annotations:
        tao.nvidia.com/record-id: dino-train-abc123
        api_key: literal-key-value
    spec:
      template:
        spec:
          containers:
          - name: tao
            image: nvcr.io/nvidia/tao@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
            command: ["/bin/sh", "-c"]
            args:
            - |
              echo start
              export NGC_KEY=abc123xyz
              tool --token "$TOKEN"
            - --password
            - hunter2
            env:
            - name: HF_TOKEN
              value: plainvalue99
            - name: TOKENIZERS_PARALLELISM
              value: "false"
            - name: AWS_SECRET_ACCESS_KEY
              valueFrom: {{secretKeyRef: {{name: s, key: AWS_SECRET_ACCESS_KEY}}}}
            - name: NGC_KEY
              value: "$(NGC_KEY)"
            envFrom:
            - secretRef: {{name: tao-creds-x}}
    ---
    apiVersion: v1
    kind: Secret
    metadata: {{name: s}}
    stringData:
      AWS_SECRET_ACCESS_KEY: abc
    """
)

CLEAN = textwrap.dedent(
    """\
    apiVersion: v1
    kind: Service
    metadata: {name: dino-train-abc123}
    spec: {clusterIP: None, publishNotReadyAddresses: true, selector: {job-name: dino-train-abc123}}
    ---
    apiVersion: batch/v1
    kind: Job
    metadata:
      name: dino-train-abc123
      labels: {tao-job: dino-train-abc123}
    spec:
      backoffLimit: 0
      template:
        spec:
          restartPolicy: Never
          imagePullSecrets: [{name: ngc-pull-secret}]
          containers:
          - name: tao
            image: nvcr.io/nvidia/tao/tao-toolkit:5.5.0-pyt
            command: ["/bin/sh", "-c", 'export NODE_RANK="$JOB_COMPLETION_INDEX"; exec "$@"', "tao"]
            args: ["dino", "train", "-e", "/specs/train.yaml", "--password-stdin"]
            envFrom: [{secretRef: {name: tao-creds-dino-train-abc123}}]
            env:
            - {name: TAO_RESULTS_ROOT, value: /results/dino-train-abc123}
            - {name: TOKENIZERS_PARALLELISM, value: "false"}
            - {name: HF_TOKEN, valueFrom: {secretKeyRef: {name: creds, key: HF_TOKEN}}}
            - {name: PASSWORD_FILE, value: /run/secrets/pw}
            - {name: NGC_KEY, value: ""}
            volumeMounts: [{name: shm, mountPath: /dev/shm}]
          volumes:
          - {name: shm, emptyDir: {medium: Memory, sizeLimit: 16Gi}}
          - {name: creds, secret: {secretName: tao-creds-dino-train-abc123}}
    ---
    apiVersion: v1
    kind: Secret
    metadata: {name: empty}
    data: {}
    """
)


def _triples(findings: list) -> list[tuple[int, str, str, str]]:
    return [(f.line, f.kind, f.name, f.rule) for f in findings]


def test_manifest_findings_name_document_field_line_and_rule() -> None:
    assert _triples(lint_manifest_text(DIRTY, "m.yaml")) == [
        (8, "credential", "0/metadata.annotations.api_key", "named-key api_key"),
        (19, "credential", "0/spec.template.spec.containers[0].args[0]", "assignment NGC_KEY"),
        (22, "credential", "0/spec.template.spec.containers[0].args[2]", "flag-literal --password"),
        (25, "credential", "0/spec.template.spec.containers[0].env[0].value", "env-literal HF_TOKEN"),
        (39, "secret-data", "1/stringData.AWS_SECRET_ACCESS_KEY", "inline-secret"),
        (1, "credential", "HF_TOKEN", "assignment"),
    ]


def test_findings_never_contain_the_values() -> None:
    text = " ".join(f.format() for f in lint_manifest_text(DIRTY, "m.yaml"))
    for secret in ("literal-key-value", "abc123xyz", "hunter2", "plainvalue99", HF):
        assert secret not in text


def test_a_rendered_style_manifest_is_clean() -> None:
    assert lint_manifest_text(CLEAN, "clean.yaml") == []


def test_json_manifests_are_linted_field_by_field() -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "annotations": {"tao.nvidia.com/note": "Bearer abcdef0123456789abcdef"}},
        "spec": {"containers": [{"name": "c", "env": [{"name": "DB_PASSWORD", "value": "pw"}]}]},
    }
    findings = lint_manifest_text(json.dumps(doc, indent=2), "p.json")
    assert [(f.kind, f.name, f.rule) for f in findings] == [
        ("auth-header", '0/metadata.annotations["tao.nvidia.com/note"]', "bearer-token Bearer"),
        ("credential", "0/spec.containers[0].env[0].value", "env-literal DB_PASSWORD"),
    ]
    assert all(f.line > 0 for f in findings)


def test_strings_holding_json_are_walked_as_documents() -> None:
    applied = json.dumps({"spec": {"containers": [{"env": [{"name": "HF_TOKEN", "value": "abc"}]}]}})
    doc = {"kind": "Job", "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": applied}}}
    findings = lint_documents([doc], "live")
    assert [(f.line, f.name, f.rule) for f in findings] == [
        (
            0,
            '0/metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"].(json)'
            ".spec.containers[0].env[0].value",
            "env-literal HF_TOKEN",
        )
    ]


def test_lint_documents_of_python_objects_reports_line_zero() -> None:
    docs = [{"kind": "ConfigMap", "data": {"HF_TOKEN": "abc", "MODE": "fast"}}, None, [{"token": "t0k"}]]
    assert _triples(lint_documents(docs, "rendered")) == [
        (0, "credential", "0/data.HF_TOKEN", "named-key HF_TOKEN"),
        (0, "credential", "2/[0].token", "named-key token"),
    ]
    assert str(lint_documents(docs, "rendered")[0]) == "rendered:0: credential: 0/data.HF_TOKEN (named-key HF_TOKEN)"


def test_any_secret_data_is_refused_whatever_it_holds() -> None:
    doc = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
           "data": {".dockerconfigjson": "e30=", "other": ""}}
    assert [f.name for f in lint_documents([doc])] == ["0/data[\".dockerconfigjson\"]", "0/data.other"]


def test_items_of_a_list_kind_are_linted() -> None:
    doc = {"kind": "List", "items": [{"kind": "Secret", "stringData": {"k": "v"}}]}
    assert [f.name for f in lint_documents([doc])] == ["0/items[0].stringData.k"]


def test_text_files_fall_back_to_line_rules() -> None:
    script = "#!/bin/sh\nset -eu\nexport HF_TOKEN=abc123\ndocker run -e NGC_KEY=$NGC_KEY img\n"
    assert _triples(lint_manifest_text(script, "run.sh")) == [(3, "credential", "HF_TOKEN", "assignment")]
    assert lint_text(script, "run.sh") == lint_manifest_text(script, "run.sh")


def test_env_files_are_text() -> None:
    assert _triples(lint_manifest_text("A=1\nAWS_SECRET_ACCESS_KEY=zz\n", ".env")) == [
        (2, "credential", "AWS_SECRET_ACCESS_KEY", "assignment")
    ]


def test_scalar_yaml_documents_are_treated_as_text() -> None:
    assert load_manifest_documents("just some words\nexport X=1\n") is None
    assert load_manifest_documents("") is None
    assert load_manifest_documents("# only a comment\n") is None
    assert load_manifest_documents("a: 1\n---\nb: 2\n") is not None


def test_redact_manifest_text_keeps_layout_and_comments() -> None:
    out = redact_manifest_text(DIRTY)
    for secret in ("literal-key-value", "abc123xyz", "hunter2", "plainvalue99", HF):
        assert secret not in out
    before, after = DIRTY.splitlines(), out.splitlines()
    assert len(before) == len(after)
    changed = [i + 1 for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert changed == [1, 8, 19, 22, 25, 39]
    assert after[24].strip() == f"value: '{REDACTED}'"
    assert after[14].strip() == 'command: ["/bin/sh", "-c"]'


def test_redact_manifest_text_of_json_stays_json() -> None:
    text = json.dumps({"kind": "Secret", "data": {"a": "YWJj"}})
    assert json.loads(redact_manifest_text(text)) == {"kind": "Secret", "data": {"a": REDACTED}}


def test_redact_of_plain_text() -> None:
    assert redact_manifest_text("export HF_TOKEN=abc\n") == f"export HF_TOKEN={REDACTED}\n"


# ------------------------------------------------------------------------------------------------
# redact_secrets (main)
# ------------------------------------------------------------------------------------------------


def test_lint_exit_1_prints_findings_to_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(DIRTY)
    assert main(["lint", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert lines[0] == f"{path}:8: credential: 0/metadata.annotations.api_key (named-key api_key)"
    assert lines[-1].startswith("redact_secrets: 6 inline credential(s) found; move each credential into a Secret")
    assert "hunter2" not in err


def test_lint_exit_0_when_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "clean.yaml"
    path.write_text(CLEAN)
    assert main(["lint", str(path), str(path)]) == 0
    assert capsys.readouterr() == ("", "")


def test_lint_reads_stdin(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "-"], stdin_text="export API_KEY=k1\n") == 1
    assert capsys.readouterr().err.startswith("<stdin>:1: credential: API_KEY (assignment)")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["scan", "x"], "ERROR: unknown verb 'scan': use 'lint FILE...' or 'redact [FILE]'"),
        (["lint"], "ERROR: lint needs at least one FILE ('-' for stdin)"),
        (["lint", "-", "-"], "ERROR: '-' (stdin) may be given only once"),
        (["lint", "/nonexistent/file.yaml"], "ERROR: cannot read /nonexistent/file.yaml: No such file or directory"),
        (["redact", "a", "b"], "ERROR: redact takes one FILE (or '-' / nothing for stdin)"),
    ],
)
def test_usage_errors_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv, stdin_text="") == 2
    assert capsys.readouterr().err.strip() == message


def test_unreadable_file_among_others_is_exit_2_before_any_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dirty = tmp_path / "d.sh"
    dirty.write_text("export HF_TOKEN=x1\n")
    assert main(["lint", str(dirty), str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.startswith("ERROR: cannot read")


def test_no_arguments_prints_usage_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert capsys.readouterr().err.startswith("usage: redact_secrets lint FILE...")
    assert main(["--help"]) == 0
    assert "exit codes: 0 clean" in capsys.readouterr().out


def test_redact_prints_redacted_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run.sh"
    path.write_text("curl -u bob:x https://bob:pw77@h/\n")
    assert main(["redact", str(path)]) == 0
    assert capsys.readouterr().out == f"curl -u bob:{REDACTED} https://bob:{REDACTED}@h/\n"
    assert main(["redact"], stdin_text="HF_TOKEN=abc\n") == 0
    assert capsys.readouterr().out == f"HF_TOKEN={REDACTED}\n"


def test_kubernetes_topology_key_is_not_a_credential() -> None:
    affinity = {
        "kind": "Job",
        "spec": {
            "template": {
                "spec": {
                    "affinity": {
                        "podAntiAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": [
                                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"a": "b"}}}
                            ]
                        }
                    }
                }
            }
        },
    }
    assert lint_documents([affinity], "job.yaml") == []
