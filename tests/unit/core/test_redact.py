"""Credential detection and redaction of free text (kubectl_tao.core.redact)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kubectl_tao.core import redact
from kubectl_tao.core.redact import (
    REDACTED,
    Finding,
    find_in_text,
    is_credential_name,
    is_placeholder,
    redact_cluster_text,
    redact_obj,
    redact_text,
    scrub_argv,
)

HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
NVAPI = "nvapi-" + "Zx9" * 10
GHP = "ghp_" + "a1B2c3D4e5" * 4
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
AKIA = "AKIAIOSFODNN7EXAMPLE"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAvalue\nmorekeymaterial==\n-----END RSA PRIVATE KEY-----"
DIGEST = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN", "hf_token", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID", "NGC_KEY",
        "NGC_API_KEY", "API_KEY", "APIKEY", "apiKey", "ACCESS_KEY", "SECRET_KEY", "PASSWORD", "db_passwd",
        "MYSQL_PASS", "client_secret", "GITHUB_TOKEN", "PRIVATE_KEY", "SSH_KEY", "WANDB_API_KEY", "auth",
        "BASIC_AUTH", "CREDENTIALS", "awsSecretAccessKey", "password",
    ],
)
def test_credential_like_names_are_recognized(name: str) -> None:
    assert is_credential_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "TOKENIZERS_PARALLELISM", "NUM_KEY_FRAMES", "MAX_NEW_TOKENS", "MAX_TOKEN_LENGTH", "PASSWORD_FILE",
        "SECRET_NAME", "secretName", "secretKeyRef", "secretRef", "PARTITION_KEY", "S3_KEY", "PUBLIC_KEY",
        "KEY", "PASS", "AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION", "S3_BUCKET_NAME", "TOKEN_URL", "PWD",
        "AWS_WEB_IDENTITY_TOKEN_FILE", "KEYBOARD", "MONKEY", "BYPASS", "name", "value",
    ],
)
def test_ordinary_names_are_not_credentials(name: str) -> None:
    assert not is_credential_name(name)


@pytest.mark.parametrize(
    "value",
    [
        "", "$HF_TOKEN", "${HF_TOKEN}", "$(HF_TOKEN)", "$(cat /run/secrets/hf)", "${A}${B}", "stdin",
        "/dev/stdin", "-", "<your-token>", "<redacted>", "***", REDACTED, "[REDACTED]", "xxxx", "%s", "%s\\n",
        "@@NGC_KEY@@", "{{ .Values.token }}", "true", "/run/secrets/token", "'$X'", '"${X}"',
    ],
)
def test_references_and_placeholders_are_not_literals(value: str) -> None:
    assert is_placeholder(value)


@pytest.mark.parametrize("value", ["hunter2", "abc123", "s3cr3t!", "$3cret", "a$B"])
def test_literal_values_are_literals(value: str) -> None:
    assert not is_placeholder(value)


@pytest.mark.parametrize(
    ("text", "kind", "name", "rule"),
    [
        ("export HF_TOKEN=abc123", "credential", "HF_TOKEN", "assignment"),
        ("docker run -e AWS_SECRET_ACCESS_KEY=wJalr/K7MDENG img", "credential", "AWS_SECRET_ACCESS_KEY", "assignment"),
        ("sbatch --export=ALL,NGC_KEY=xyz987,OTHER=1 job.sh", "credential", "NGC_KEY", "assignment"),
        ("tool --password hunter2", "credential", "--password", "flag-literal"),
        ("tool --api-key=abc123", "credential", "--api-key", "flag-literal"),
        ("tool --hub-token 'q w e'", "credential", "--hub-token", "flag-literal"),
        ("kubectl create secret generic s --from-literal=pw=abc", "credential", "--from-literal", "from-literal"),
        ('{"password": "s3cr3t"}', "credential", "password", "json-key"),
        ('"{\\"token\\": \\"abc\\"}"', "credential", "token", "json-key"),
        (f"id {AKIA} here", "aws-access-key-id", "col 4", "token-format"),
        (f"ASIA{'A1' * 8}", "aws-access-key-id", "col 1", "token-format"),
        (f"t={JWT}", "jwt", "col 3", "token-format"),
        (f"key {NVAPI}", "ngc-api-key", "col 5", "token-format"),
        (f"use {HF}", "hf-token", "col 5", "token-format"),
        (f"gh {GHP}", "github-token", "col 4", "token-format"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github-token", "col 1", "token-format"),
        ("slack xoxb-1234567890-abcdefghij", "slack-token", "col 7", "token-format"),
        ("openai sk-proj-abc123def456ghi789jkl", "sk-api-key", "col 8", "token-format"),
        (PEM, "private-key", "col 1", "private-key-block"),
        ("https://b.s3.amazonaws.com/k?X-Amz-Signature=deadbeef", "presigned-url", "X-Amz-Signature", "presigned-url"),
        ("u?X-Amz-Security-Token=FwoGZXIvYXdz", "presigned-url", "X-Amz-Security-Token", "presigned-url"),
        ("git clone https://user:pa55w0rd@example.com/r.git", "url-password", "col 24", "url-userinfo"),
        ("curl -H 'Authorization: Basic dXNlcjpwYXNz'", "auth-header", "Authorization", "authorization-header"),
        ("sent Bearer abcdef0123456789abcdef", "auth-header", "Bearer", "bearer-token"),
        ("?api_key=abc123&x=1", "credential", "api_key", "assignment"),
    ],
)
def test_each_rule_reports_kind_name_and_rule(text: str, kind: str, name: str, rule: str) -> None:
    findings = find_in_text(text)
    assert [(f.kind, f.name, f.rule) for f in findings] == [(kind, name, rule)]


@pytest.mark.parametrize(
    "text",
    [
        "TOKENIZERS_PARALLELISM=false",
        "export HF_TOKEN=$HF_TOKEN NGC_KEY=${NGC_KEY} X_TOKEN=\"$(cat /run/secrets/x)\"",
        "env: HF_TOKEN=$(HF_TOKEN)",
        "docker login nvcr.io --username '$oauthtoken' --password-stdin",
        "kubectl create secret generic s --from-env-file=/dev/stdin",
        "printf 'AWS_ACCESS_KEY_ID=%s\\n' \"$AWS_ACCESS_KEY_ID\"",
        f"image: nvcr.io/nvidia/tao/tao-toolkit@{DIGEST}",
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  model.onnx",
        "export HF_HOME=/cache hf_transfer=1 HF_HUB_ENABLE_HF_TRANSFER=1",
        "results in /workspace/results/experiment_specs/train_config_long_name",
        "Bearer tokens authenticate callers",
        "pip install scikit-learn; sk-learn-is-not-a-key-at-all",
        '{"auths": {"nvcr.io": {"username": "$oauthtoken", "password": "${NGC_KEY}"}}}',
        "--token-file /run/token --api-key-file=/k --tokenizer bert",
        "PASSWORD_FILE=/run/secrets/pw SECRET_NAME=tao-creds-x",
        "ssh://git@github.com/org/repo.git http://[::1]:8080/x",
        "HF_TOKEN= AWS_SECRET_ACCESS_KEY=",
        "password: <redacted> token=***REDACTED***",
    ],
)
def test_text_without_credentials_passes(text: str) -> None:
    assert find_in_text(text) == []


def test_findings_carry_line_numbers_and_never_the_value() -> None:
    text = "#!/bin/sh\necho start\nexport HF_TOKEN=abc123xyz\n\ncurl https://u:topsecret@h/\n"
    findings = find_in_text(text, source="run.sh")
    assert [(f.line, f.name) for f in findings] == [(3, "HF_TOKEN"), (5, "col 16")]
    rendered = " ".join(f.format() for f in findings) + repr(findings)
    assert "abc123xyz" not in rendered and "topsecret" not in rendered
    assert findings[0].format() == "run.sh:3: credential: HF_TOKEN (assignment)"
    assert str(findings[0]) == findings[0].format()


def test_multiline_private_key_reports_its_first_line() -> None:
    findings = find_in_text("a: 1\nkey: |\n  " + PEM.replace("\n", "\n  ") + "\n")
    assert [(f.line, f.kind) for f in findings] == [(3, "private-key")]


def test_base64_blobs_that_decode_to_credentials_are_found() -> None:
    blob = base64.b64encode(f"HF_TOKEN={HF}".encode()).decode()
    pem_blob = base64.b64encode(PEM.encode()).decode()
    docker = base64.b64encode(b'{"auths":{"nvcr.io":{"password":"abc123"}}}').decode()
    double = base64.b64encode(blob.encode()).decode()
    for text in (blob, pem_blob, docker, double, base64.urlsafe_b64encode(f"t={JWT}".encode()).decode()):
        assert [f.kind for f in find_in_text(f"data: {text}")] == ["base64-credential"]


def test_base64_blobs_of_harmless_text_pass() -> None:
    cert = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIBdata\n-----END CERTIFICATE-----\n").decode()
    config = base64.b64encode(b'{"epochs": 10, "batch_size": 4}').decode()
    assert find_in_text(f"ca: {cert}\ncfg: {config}") == []


def test_redact_text_keeps_names_and_hides_values() -> None:
    text = (
        f"export HF_TOKEN=abc123xyz\ncurl -H 'Authorization: Bearer {JWT}' https://u:pw9@h/\n"
        f"id={AKIA} --password 'hunter 2' {PEM}\n"
    )
    out = redact_text(text)
    for secret in ("abc123xyz", JWT, "pw9", AKIA, "hunter 2", "keymaterial"):
        assert secret not in out
    assert "export HF_TOKEN=***REDACTED***" in out
    assert "Authorization: Bearer ***REDACTED***" in out
    assert "https://u:***REDACTED***@h/" in out
    assert "--password '***REDACTED***'" in out


def test_redact_text_also_hides_colon_style_values() -> None:
    out = redact_text("error: bad config\n  password: hunter2\n  user: bob\n")
    assert out == "error: bad config\n  password: ***REDACTED***\n  user: bob\n"


def test_redact_text_leaves_clean_text_alone() -> None:
    text = f"image {DIGEST} pulled; TOKENIZERS_PARALLELISM=false; Error from server (NotFound): jobs.batch"
    assert redact_text(text) == text
    assert redact_text("") == ""


def test_redact_obj_handles_env_pairs_secret_data_and_keys() -> None:
    obj = {
        "kind": "Secret",
        "data": {"a": "YWJj"},
        "stringData": {"b": "plain"},
        "env": [
            {"name": "HF_TOKEN", "value": "abc123"},
            {"name": "MODE", "value": "fast"},
            {"name": "NGC_KEY", "value": "$(NGC_KEY)"},
        ],
        "api_key": "k-123",
        "nested": [{"msg": "export X_TOKEN=zzz999"}, 7, None, True],
    }
    out = redact_obj(obj)
    assert out == {
        "kind": "Secret",
        "data": {"a": REDACTED},
        "stringData": {"b": REDACTED},
        "env": [
            {"name": "HF_TOKEN", "value": REDACTED},
            {"name": "MODE", "value": "fast"},
            {"name": "NGC_KEY", "value": "$(NGC_KEY)"},
        ],
        "api_key": REDACTED,
        "nested": [{"msg": f"export X_TOKEN={REDACTED}"}, 7, None, True],
    }
    assert obj["api_key"] == "k-123"  # a copy: the input is untouched


def test_scrub_argv_redacts_separate_flag_values() -> None:
    argv = ["kubectl", "create", "secret", "--password", "hunter2", "--token=abc", "--token", "$T"]
    argv.append("--from-literal=k=v")
    assert scrub_argv(argv) == [
        "kubectl", "create", "secret", "--password", REDACTED, f"--token={REDACTED}", "--token", "$T",
        f"--from-literal=k={REDACTED}",
    ]


def test_finding_format_uses_its_source_by_default() -> None:
    finding = Finding(4, "credential", "HF_TOKEN", "assignment", "x.sh")
    assert finding.format() == "x.sh:4: credential: HF_TOKEN (assignment)"
    assert finding.format("other") == "other:4: credential: HF_TOKEN (assignment)"


_SECRETISH = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/_.!@%", min_size=8,
                     max_size=40).filter(lambda v: not is_placeholder(v))


@settings(max_examples=200, deadline=None)
@given(value=_SECRETISH, name=st.sampled_from(["HF_TOKEN", "NGC_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD"]))
def test_assigned_literals_never_survive_redaction(value: str, name: str) -> None:
    assume(value.lower() not in f"export {name} --password".lower())  # e.g. 'password' is also in the flag name
    for text in (f"export {name}={value}", f'{name}="{value}"', f"--password {value}", f'{{"{name}": "{value}"}}'):
        out = redact_text(text)
        assert value not in out
        assert find_in_text(text)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200))
def test_redaction_is_idempotent(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


def test_quota_object_counts_are_not_redacted() -> None:
    message = "exceeded quota: objects, requested: secrets=1, used: secrets=12, limited: secrets=12"
    assert redact_text(message) == message


@pytest.mark.parametrize(
    "text", ["SECRETS=12345678", "secrets=abc123xyz", "PASSWORD=12345678", "db_secrets=4242", "secrets=12a"]
)
def test_numbers_under_other_credential_names_stay_redacted(text: str) -> None:
    assert redact_text(text).endswith(REDACTED)


def test_cluster_text_redacts_name_colon_value_anywhere_in_a_line() -> None:
    folded = "MountVolume failed: reason: bad login, password: hunter2x; Token: 'abc123def'"
    assert redact_cluster_text(folded) == (
        f"MountVolume failed: reason: bad login, password: {REDACTED}; Token: '{REDACTED}'"
    )


def test_own_messages_keep_the_word_after_a_name_and_colon() -> None:
    message = "--from-env NGC_API_KEY: the key is empty"
    assert redact_text(message) == message


# The command-form patterns, each run only when one of its literal hints is in the text (redact._finditer).
HINT_GATED = (
    "_USER_FLAG_RE", "_HEADER_FLAG_RE", "_MYSQL_RE", "_DASH_PASS_RE", "_JAVA_PROPERTY_RE", "_HTPASSWD_RE",
    "_WANDB_LOGIN_RE", "_NETRC_RE", "_AWS_CONFIGURE_RE", "_QUOTED_ASSIGN_RE", "_SUBSCRIPT_RE", "_SETENV_RE",
    "_HEREDOC_RE", "_KAGGLE_KEY_RE", "_URL_USERINFO_RE", "_AUTH_HEADER_RE", "_BEARER_RE", "_PRESIGNED_RE",
    "_PRIVATE_KEY_RE",
)


def test_the_hint_gated_patterns_compile_only_when_text_needs_them() -> None:
    """A status table's cells reach none of them (start-up time), and once compiled they find what they did."""
    import subprocess
    import sys

    from support import ROOT

    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); from kubectl_tao.core import redact as r\n"
        "every = [v for v in vars(r).values() if isinstance(v, r._Lazy)] + [rx for _, rx in r._TOKEN_RULES]\n"
        "print(sum(v._compiled is not None for v in every))\n"
        f"gated = [getattr(r, name) for name in {HINT_GATED!r}] + [rx for _, rx in r._TOKEN_RULES]\n"
        "gated += [rx for _, command, flag, _ in r._COMMAND_PASSWORD_FLAGS for rx in (command, flag)]\n"
        "r.redact_cluster_text('dino-train-3f9a1c   RUNNING   8   1   5m   ranks running 1/1')\n"
        "print(len(gated), sum(v._compiled is not None for v in gated))\n"
        "print(r.redact_text('curl -u admin:S3cretPassw0rd https://x ghp_' + 'a' * 36))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, str(ROOT / "lib")], capture_output=True, text=True,
                         check=True, timeout=60).stdout.splitlines()
    assert out[0] == "0"  # importing the redactor compiles no pattern: each compiles on its first use
    gated = len(HINT_GATED) + len(redact._TOKEN_RULES) + 2 * len(redact._COMMAND_PASSWORD_FLAGS)
    assert out[1] == f"{gated} 0"
    assert "S3cretPassw0rd" not in out[2] and "ghp_" not in out[2].replace("***REDACTED***", "")
