"""The redactor and the linter on the forms an attack pass found them missing: a credential inside a
terminal string (an OSC 8 link's address, a window title), written with encoded separators, look-alike or
ignorable characters, glued to a word or broken over two lines; and the honest forms they refused. One set of
rules serves both: each credential is found by the linter and gone from the redacted text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_tao.core import redact
from kubectl_tao.core.lint import lint_manifest_text, redact_manifest_text
from kubectl_tao.core.redact import REDACTED, find_in_text, redact_log_line, redact_text

HF = "hf_FakeCanaryHf0123456789abcdefghijkl"
AWS_KEY_ID = "AKIAFAKECANARY012345"
SIGNATURE = "fakecanarysig0123456789abcdef"
ESC = "\x1b"

# (form, text, the canary that must be gone after redaction)
CREDENTIALS = [
    ("OSC 8 link to a presigned URL",
     f"{ESC}]8;;https://b.s3.amazonaws.com/k?X-Amz-Credential={AWS_KEY_ID}%2F20250101&X-Amz-Signature={SIGNATURE}"
     f"{ESC}\\model.bin{ESC}]8;;{ESC}\\", SIGNATURE),
    ("OSC 8 link, its key id", f"{ESC}]8;;https://b.s3.amazonaws.com/k?X-Amz-Credential={AWS_KEY_ID}{ESC}\\x{ESC}]8;;{ESC}\\",
     AWS_KEY_ID),
    ("OSC 8 link ended by BEL", f"{ESC}]8;;https://bob:FakeCanaryPw42@git.example.com/\x07repo{ESC}]8;;\x07",
     "FakeCanaryPw42"),
    ("C1 OSC title", f"\x9d0;HF_TOKEN={HF}\x9c epoch 1", HF),
    ("window title", f"{ESC}]0;HF_TOKEN={HF}\x07 training", HF),
    ("OSC 52 clipboard write", f"{ESC}]52;c;{HF}\x07", HF),
    ("JSON-escaped OSC 8", f"\\u001b]8;;https://x.example/?X-Amz-Signature={SIGNATURE}\\u001b\\\\link", SIGNATURE),
    ("URL-encoded '='", f"https://x.example/cb?token%3D{HF}", HF),
    ("URL-encoded quote", f"data=%7B%22{HF}%22%7D", HF),
    ("URL-encoded password", "https://x.example/login?user=bob&password%3DFakeCanaryPct42", "FakeCanaryPct42"),
    ("glued after a hyphen", f"MODEL=model-{HF}", HF),
    ("glued after an underscore", f"run_name=exp_{HF}", HF),
    ("JSON \\u0022 quote", f'{{\\u0022auth\\u0022: \\u0022{HF}\\u0022}}', HF),
    ("variation selector inside", f"{HF[:10]}\ufe0f{HF[10:]}", HF[10:]),
    ("combining grapheme joiner inside", f"{HF[:10]}\u034f{HF[10:]}", HF[10:]),
    ("token broken over two lines", f"{HF[:12]}\n{HF[12:]}", HF[12:]),
    ("token broken with an indent", f"note:\n  {HF[:12]}\n  {HF[12:]} more", HF[12:]),
    ("shell line continuation", f"export X={HF[:12]}\\\n{HF[12:]}", HF[12:]),
    ("Cyrillic letter in the name", "HF_T\u041eKEN=FakeCanaryCyr42", "FakeCanaryCyr42"),
    ("Greek letter in the name", "NGC_API_\u039aEY=FakeCanaryGreek42", "FakeCanaryGreek42"),
    ("full-width '='", "HF_TOKEN\uff1dFakeCanaryWide42", "FakeCanaryWide42"),
    ("Vault service token", "VLT=hvs.FakeCanaryVault0123456789ab", "hvs.FakeCanaryVault0123456789ab"),
    ("Atlassian API token", "curl --data ATATT3xFfGF0FakeCanaryAtl0123456789=0A1B2C3D x",
     "ATATT3xFfGF0FakeCanaryAtl0123456789"),
    ("TAO model key", "tao model detectnet_v2 train -e spec.txt -r /results -k FakeCanaryKey42", "FakeCanaryKey42"),
    ("TAO model key, long flag", "detectnet_v2 export -m m.tlt --key=FakeCanaryKey43 -o m.etlt", "FakeCanaryKey43"),
    ("printf into --password-stdin", "printf '%s' 'FakeCanary&Pf42' | docker login -u bob --password-stdin r.example",
     "FakeCanary&Pf42"),
    ("echo into --password-stdin", "echo FakeCanaryEcho42 | docker login -u bob --password-stdin", "FakeCanaryEcho42"),
    ("here-string into --password-stdin", "docker login -u bob --password-stdin <<< 'FakeCanaryHere42'",
     "FakeCanaryHere42"),
    ("URL password holding '#'", "git clone https://bob:FakeCanary#42@git.example.com/r.git", "FakeCanary#42"),
    ("single-quoted dict key", "cfg = {'project': 'tao', 'api_key': 'FakeCanaryDict42'}", "FakeCanaryDict42"),
    ("env pair in text", "- name: MLFLOW_TRACKING_PASSWORD\n  value: \"FakeCanaryEnv42\"", "FakeCanaryEnv42"),
]

HONEST = [
    "login(token=args.token)",
    "hub.login(token=args.token, add_to_git_credential=False)",
    "password=getpass()",
    "conn = connect(user=u, password=getpass(prompt='db: '))",
    'token = os.environ["HF_TOKEN"]; api = HfApi(token=token)',
    "tao-run --hf-token-secret hf-token/HF_TOKEN --image-pull-secrets ngc-secret,quay-secret",
    "pip install sk-video-tools2024-extension sk-learn-contrib-metric-learning0 tiktoken==0.7.0",
    "helm install minio bitnami/minio --set auth.rootPassword=changeme",
    "tao model detectnet_v2 train -e spec.txt -r /results -k nvidia_tlt",
    "tao model detectnet_v2 train -e spec.txt -k $KEY",
    "kubectl apply -k overlays/prod; sort -k 2 file.txt",
    'echo "$REGISTRY_PASSWORD" | docker login -u bob --password-stdin r.example',
    'curl -H "Authorization: Bearer $(cat /var/run/secrets/kubernetes.io/serviceaccount/token)" https://k8s/api',
    f"{ESC}]8;;https://docs.nvidia.com/tao{ESC}\\docs{ESC}]8;;{ESC}\\ {ESC}]0;epoch 3/90\x07",
    "curl 'https://x.example/search?q=a%20b%3Dc'",
    "\u041f\u0430\u0440\u043e\u043b\u044c: \u0441\u043c. Secret tao-creds",  # Russian prose
    f"{HF[:3]}\nlast line",
]


@pytest.mark.parametrize(("form", "text", "canary"), CREDENTIALS, ids=[c[0] for c in CREDENTIALS])
def test_the_linter_finds_it_and_the_redactor_hides_it(form: str, text: str, canary: str) -> None:
    assert find_in_text(text), form
    assert lint_manifest_text(text, "t"), form
    for redactor in (redact_text, redact_log_line):
        out = redactor(text)
        assert canary not in out and REDACTED in out, (form, out)


@pytest.mark.parametrize("text", HONEST)
def test_an_honest_form_is_neither_refused_nor_changed(text: str) -> None:
    assert find_in_text(text) == []
    assert lint_manifest_text(text, "t") == []
    assert redact_log_line(text) == text


def test_a_terminal_string_keeps_its_sequence_around_the_redacted_address() -> None:
    line = f"saved {ESC}]8;;https://b.s3.amazonaws.com/k?X-Amz-Signature={SIGNATURE}{ESC}\\model.bin{ESC}]8;;{ESC}\\ ok"
    assert redact_log_line(line) == (
        f"saved {ESC}]8;;https://b.s3.amazonaws.com/k?X-Amz-Signature={REDACTED}{ESC}\\model.bin{ESC}]8;;{ESC}\\ ok"
    )


def test_an_encoded_separator_stays_encoded_in_the_redacted_text() -> None:
    assert redact_text(f"cb?token%3D{HF}&x=1") == f"cb?token%3D{REDACTED}&x=1"


def test_a_line_ending_in_a_whole_token_is_not_joined_to_the_next() -> None:
    out = redact_text(f"HF_TOKEN={HF}\napiVersion: v1")
    assert out == f"HF_TOKEN={REDACTED}\napiVersion: v1"


def test_a_manifest_with_a_token_folded_over_two_lines_is_refused() -> None:
    manifest = (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  note: copied\n    {HF[:12]}\n    {HF[12:]}\n"
    )
    findings = lint_manifest_text(manifest, "cm.yaml")
    assert [(f.line, f.kind) for f in findings] == [(7, "hf-token")]


def test_a_manifest_with_a_presigned_url_in_an_osc_8_link_is_refused_and_redacted() -> None:
    manifest = (
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  annotations:\n"
        f'    note: "\\e]8;;https://b.s3.amazonaws.com/k?X-Amz-Credential={AWS_KEY_ID}&X-Amz-Signature={SIGNATURE}'
        '\\e\\\\model.bin\\e]8;;\\e\\\\"\n'
    )
    findings = lint_manifest_text(manifest, "job.yaml")
    assert {(f.line, f.kind) for f in findings} == {(6, "aws-access-key-id"), (6, "presigned-url")}
    redacted = redact_manifest_text(manifest)
    assert AWS_KEY_ID not in redacted and SIGNATURE not in redacted and "model.bin" in redacted


@pytest.mark.parametrize("esc", ["\\u001b", "\\x1b", "\\033", "\\e"])
def test_an_escaped_terminal_string_ends_its_address_at_the_escaped_terminator(esc: str) -> None:
    line = f"{esc}]8;;https://x.example/?X-Amz-Signature={SIGNATURE}{esc}\\\\model.bin{esc}]8;;{esc}\\\\"
    assert redact_log_line(line) == (
        f"{esc}]8;;https://x.example/?X-Amz-Signature={REDACTED}{esc}\\\\model.bin{esc}]8;;{esc}\\\\"
    )


_WRAPS = {
    "plain": "{}",
    "window title": "\x1b]0;{}\x07",
    "OSC 8 address": "\x1b]8;;https://x.example/run?{}\x1b\\link\x1b]8;;\x1b\\",
    "escaped OSC 8 address": "\\u001b]8;;https://x.example/run?{}\\u001b\\\\link\\u001b]8;;\\u001b\\\\",
}
_SAFE = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789 .,"), max_size=30)


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from(["HF_TOKEN", "NGC_API_KEY", "DB_PASSWORD", "token", "password"]),
    separator=st.sampled_from(["=", "%3D", "%3d", "\\u003d", "\\x3d", "\uff1d"]),
    look_alike=st.booleans(),
    wrap=st.sampled_from(sorted(_WRAPS)),
    before=_SAFE,
    after=_SAFE,
)
def test_a_named_value_is_found_however_its_name_and_separator_are_written(
    name: str, separator: str, look_alike: bool, wrap: str, before: str, after: str
) -> None:
    value = "FakeCanaryProp0123"
    if look_alike:
        name = name.replace("O", "\u041e").replace("o", "\u043e")  # Cyrillic O / o
    line = f"{before} " + _WRAPS[wrap].format(f"{name}{separator}{value}") + f" {after}"
    assert find_in_text(line), line
    assert value not in redact_log_line(line)


@settings(max_examples=300, deadline=None)
@given(
    cut=st.integers(1, len(HF) - 1),
    inside=st.sampled_from(["\ufe0f", "\u034f", "\U000e0101", "\u3164", "\\\n", "\n", "\n    "]),
    glue=st.sampled_from(["", "model-", "exp_", "%22", "\\u0022", "token%3D"]),
    wrap=st.sampled_from(sorted(_WRAPS)),
    before=_SAFE,
)
def test_a_token_is_found_whatever_is_inside_it_or_glued_to_it(
    cut: int, inside: str, glue: str, wrap: str, before: str
) -> None:
    if "\n" in inside and wrap != "plain":
        return  # a terminal string holds no line break
    if "\n" in inside and cut < 3:
        return  # a line that ends before the prefix does not start a token
    line = f"{before} " + _WRAPS[wrap].format(glue + HF[:cut] + inside + HF[cut:]) + " done"
    assert find_in_text(line), line
    out = redact_log_line(line)
    assert REDACTED in out and HF not in out.replace(inside, "")
    for part in (HF[:cut], HF[cut:]):
        assert len(part) < 8 or part not in out, out  # neither half is left ("l" may be in "link")


# The patterns these forms added, read by shape like every module-level pattern (tests/unit/core/
# test_regex_shapes.py); the redactor's patterns are compiled on first use, so they are named here.
NEW_PATTERNS = ["_STDIN_FLAG_RE", "_ECHO_RE", "_SHELL_TOKEN_RE", "_HERESTRING_RE", "_DICT_KEY_RE", "_ENV_PAIR_RE",
                "_SPLIT_TOKEN_RE", "_STRING_SEQUENCE_RE", "_HIDDEN_RE", "_PLACEHOLDER_WORD_RE", "_URL_USERINFO_RE",
                "_SECRET_SPEC_RE", "_OPEN_CALL_RE"]


@pytest.mark.parametrize("name", NEW_PATTERNS)
def test_a_pattern_the_new_forms_added_nests_no_unbounded_repetition(name: str) -> None:
    from re import _parser as sre_parse  # type: ignore[attr-defined]

    from test_regex_shapes import nested_repetition

    pattern = getattr(redact, name)
    assert not nested_repetition(sre_parse.parse(pattern.pattern, pattern.flags))


@pytest.mark.parametrize("kind", ["vault-token", "atlassian-token", "sk-api-key", "hf-token", "github-token"])
def test_a_token_rule_the_new_forms_changed_nests_no_unbounded_repetition(kind: str) -> None:
    from re import _parser as sre_parse  # type: ignore[attr-defined]

    from test_regex_shapes import nested_repetition

    [pattern] = [rx for rule, rx in redact._TOKEN_RULES if rule == kind]
    assert not nested_repetition(sre_parse.parse(pattern.pattern, pattern.flags))
