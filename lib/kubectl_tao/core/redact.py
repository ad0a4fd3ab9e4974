"""Credential detection and redaction of free text and JSON-like data.

Two families of rules:

* **named** rules: a credential-like *name* (``HF_TOKEN``, ``--password``, ``"secret":``) bound to a
  literal value.  A value that is only a reference (``$VAR``, ``${VAR}``, ``$(VAR)``, ``stdin``,
  ``/dev/stdin``, an empty string, a ``<placeholder>``, ``***REDACTED***``) is not a credential.
* **format** rules: a value that is a credential whatever it is called (AWS access key ids, private
  key blocks, JWTs, vendor token prefixes, presigned-URL signatures, URL passwords, Authorization
  headers, and base64 blobs whose decoded text holds any of these).

``find_in_text`` reports where (line, kind, name, rule) and never the value; ``redact_text`` replaces
each value with ``***REDACTED***`` and keeps the name.  Only the standard library (and the package's
valueclass) is imported.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import itertools
import re
from collections.abc import Iterable
from typing import Any

from kubectl_tao.core.valueclass import Value, record

REDACTED = "***REDACTED***"

# --------------------------------------------------------------------------------------------------
# Credential-like names
# --------------------------------------------------------------------------------------------------

# A name containing one of these words (whole words, any case) is credential-like.
_CRED_WORDS = frozenset(
    {
        "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "PASSPHRASE", "TOKEN", "CREDENTIAL",
        "CREDENTIALS", "APIKEY", "ACCESSKEY", "SECRETKEY", "PRIVATEKEY", "NGCKEY",
    }
)
# ... or one of these word pairs, anywhere in the name (so AWS_ACCESS_KEY_ID is credential-like).
_CRED_PAIRS = frozenset({("API", "KEY"), ("ACCESS", "KEY"), ("NGC", "KEY"), ("PRIVATE", "KEY")})
# ... or ends with one of these words (DB_PASS, BASIC_AUTH, SSH_KEY, MYSQL_PWD).
_CRED_LAST_WORDS = frozenset({"PASS", "KEY", "PWD"})
# A word that runs a credential word onto a prefix without a separator: PGPASSWORD, ADMINPASSWORD, HFTOKEN.
_CRED_WORD_ENDINGS = ("PASSWORD", "PASSWD", "PASSPHRASE", "TOKEN", "SECRET", "APIKEY", "CREDENTIALS")
# TOKEN after one of these words is a tokenizer's special token (UNK_TOKEN=[UNK], pad_token_id=0).
_SPECIAL_TOKEN_WORDS = frozenset({"UNK", "SEP", "MASK", "CLS", "PAD", "BOS", "EOS", "SPECIAL", "START", "END",
                                  "STOP", "EOT", "SOS", "NEWLINE", "IMAGE", "AUDIO", "VIDEO", "DECODER", "ADDED"})
# ... and one of these after a credential word makes it a quantity or a setting (TOKEN_BUDGET=1000).
_AMOUNT_WORDS = frozenset({"BUDGET", "BUDGETS", "MAX", "MIN", "PER", "NUM", "RATE", "LEN", "IDS"})
# Two-word endings that refer to a credential without holding it (SECRET_VERSION_ID=v3).
_REFERENCE_SUFFIX_PAIRS = frozenset({("VERSION", "ID"), ("VERSION", "STAGE"), ("KEY", "ALIAS")})
# A trailing KEY after one of these words names a lookup key, not a credential (PARTITION_KEY).
_NOT_SECRET_KEY_PREFIX = frozenset(
    {
        "PUBLIC", "PARTITION", "SORT", "CACHE", "PRIMARY", "FOREIGN", "ROUTING", "LOOKUP", "SHARD",
        "HASH", "GROUP", "MAP", "DICT", "METRIC", "LABEL", "TARGET", "INPUT", "OUTPUT", "OBJECT", "S3",
        "BUCKET", "PREFIX", "IDEMPOTENCY", "DEDUP", "SPEC", "CONFIG", "SEARCH", "INDEX", "HOT", "TOPOLOGY",
        "NUM", "NUMBER", "MODEL", "SORTING", "DATASET", "FEATURE", "IMAGE", "VALUE", "REGISTRY", "RESULT",
    }
)
# A name ending with one of these words refers to a credential without holding it
# (PASSWORD_FILE=/run/secrets/pw, SECRET_NAME=tao-creds, secretKeyRef, MAX_TOKEN_LENGTH).
_REFERENCE_SUFFIXES = frozenset(
    {
        "FILE", "FILES", "PATH", "DIR", "NAME", "NAMES", "REF", "MOUNT", "TYPE", "LENGTH", "LEN", "SIZE",
        "COUNT", "LIMIT", "TTL", "EXPIRY", "EXPIRES", "ENABLED", "DISABLED", "MODE", "ENV", "VAR", "URL",
        "URI", "ENDPOINT", "HOST", "PORT", "REGION", "HEADER", "PROVIDER", "SOURCE", "KIND", "FORMAT",
        "SCOPE", "SCOPES", "AUDIENCE", "ISSUER", "ALGORITHM", "VERSION", "STDIN", "ARN", "BUDGET", "BUDGETS",
        "SCANNING", "ROTATION", "POLICY", "MANAGER", "STORE", "BACKEND", "ENGINE",
    }
)
class _Lazy:
    """A pattern compiled on its first use. Every pattern here is one, so a process compiles only those its text
    reaches (`status` reaches about a third of them); the command-form and token-format rules only run when a
    cheap hint is in the text (see _finditer, _TOKEN_HINT_RE)."""

    __slots__ = ("_args", "_compiled")

    def __init__(self, *args: Any) -> None:
        self._args = args
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        if self._compiled is None:
            self._compiled = re.compile(*self._args)
        return getattr(self._compiled, name)


_WORD_RE = _Lazy(r"[A-Z]+[0-9]*(?=[A-Z][a-z])|[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*|[0-9]+")


def name_words(name: str) -> list[str]:
    """Split an identifier into upper-case words: ``awsSecretAccessKey`` -> AWS SECRET ACCESS KEY."""
    return [w.upper() for w in _WORD_RE.findall(name)]


def is_credential_name(name: str) -> bool:
    """True when ``name`` names a credential (whole words, any case, any separator).

    ``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_ACCESS_KEY_ID``, ``NGC_KEY``, ``apiKey``, ``DB_PASS``
    and ``SSH_KEY`` are; ``TOKENIZERS_PARALLELISM``, ``NUM_KEY_FRAMES``, ``MAX_NEW_TOKENS``,
    ``PASSWORD_FILE``, ``SECRET_NAME``, ``secretKeyRef`` and ``PARTITION_KEY`` are not.
    """
    words = name_words(name)
    if not words or words[-1] in _REFERENCE_SUFFIXES or tuple(words[-2:]) in _REFERENCE_SUFFIX_PAIRS:
        return False
    words = _drop_special_tokens(words)
    if any(w in _CRED_WORDS for w in words):
        return True
    if any(len(w) > len(end) and w.endswith(end) for w in words for end in _CRED_WORD_ENDINGS):
        return True  # PGPASSWORD, ADMINPASSWORD, HFTOKEN (not TOKENS: MAXTOKENS counts them)
    if any(pair in _CRED_PAIRS for pair in itertools.pairwise(words)):
        return True
    last = words[-1]
    if last == "AUTH":
        return True  # "auth" (docker config), BASIC_AUTH
    if last in _CRED_LAST_WORDS and len(words) > 1:  # DB_PASS, SSH_KEY; not a bare KEY or PASS
        return last != "KEY" or words[-2] not in _NOT_SECRET_KEY_PREFIX
    return False


def _drop_special_tokens(words: list[str]) -> list[str]:
    """``words`` without the TOKEN of a tokenizer's special token (UNK_TOKEN) or of an amount
    (TOKEN_BUDGET, MAX_TOKEN_...): neither names a credential."""
    out = []
    for i, word in enumerate(words):
        before = words[i - 1] if i else ""
        after = words[i + 1] if i + 1 < len(words) else ""
        if word == "TOKEN" and (before in _SPECIAL_TOKEN_WORDS or before in _AMOUNT_WORDS or after in _AMOUNT_WORDS):
            continue
        out.append(word)
    return out


# --------------------------------------------------------------------------------------------------
# Values that are references or placeholders, not credentials
# --------------------------------------------------------------------------------------------------

_REFERENCE_RE = _Lazy(r"(?:\$\{[^}]*\}|\$\([^)]*\)|\$[A-Za-z_][A-Za-z0-9_]*)+")
_PLACEHOLDER_RE = _Lazy(
    r"<[^<>]*>|\[[^\[\]]*\]|\*+|x{3,}|X{3,}|\.{3}|…|@@[A-Z0-9_]+@@|\{\{.*\}\}"
    r"|(?:%[-#0-9.]*[a-zA-Z]|\\[ntr])+|\**\s*REDACTED\s*\**",
    re.IGNORECASE,
)
_HARMLESS_WORDS = frozenset(
    {"", "-", "stdin", "/dev/stdin", "true", "false", "yes", "no", "none", "null", "nil", "on", "off",
     "0", "1"}
)
_PATH_VALUE_RE = _Lazy(r"[~.]?/[\w.@/+:-]*")
# `secrets` (lower case) is also the Kubernetes resource a ResourceQuota counts: in `requested: secrets=1,
# used: secrets=12` the value is an object count (`count/secrets=` never matches: a '/' precedes the name).
_COUNT_RE = _Lazy(r"[0-9]+,?")


# ${VAR:-default}, ${VAR-default}, ${VAR:=default}, ${VAR=default}: the default is a value.
_DEFAULT_RE = _Lazy(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?[-=]([^}]*)\}")
# A secret access key is 40 base64 characters and may start with '/' (then it is no path).
_AWS_SECRET_SHAPE_RE = _Lazy(r"[A-Za-z0-9/+]{40}")
_RANDOM_SEGMENT_RE = _Lazy(r"(?=[^/]*[A-Z])(?=[^/]*[a-z])(?=[^/]*[0-9])[A-Za-z0-9+=]{16,}")


def is_placeholder(value: str) -> bool:
    """True for values that are not literal credentials: references, placeholders, paths, booleans."""
    v = _unquote(value.strip()).strip()
    if v.lower() in _HARMLESS_WORDS:
        return True
    if any(not is_placeholder(m.group(1)) for m in _DEFAULT_RE.finditer(v)):
        return False  # ${UNSET:-hunter2} is hunter2 whenever UNSET is unset
    if _PATH_VALUE_RE.fullmatch(v) and not _looks_like_key(v):
        return True
    return bool(_REFERENCE_RE.fullmatch(v) or _PLACEHOLDER_RE.fullmatch(v))


def _looks_like_key(value: str) -> bool:
    """A '/'-leading value that is a key, not a path: the shape of an AWS secret key, or a segment of 16+
    characters mixing upper case, lower case and digits."""
    return bool(_AWS_SECRET_SHAPE_RE.fullmatch(value) or any(
        _RANDOM_SEGMENT_RE.fullmatch(segment) for segment in value.split("/")
    ))


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    if value.startswith("\\\"") and value.endswith("\\\""):  # an escaped quote inside a JSON string
        return value[2:-2]
    return value


# --------------------------------------------------------------------------------------------------
# Findings and hits
# --------------------------------------------------------------------------------------------------


@record(frozen=True)
class Finding(Value):
    """One credential found: where and what kind; never the value.

    ``line`` is 1-based (0 when the input carried no line information); ``name`` is the variable,
    flag or key name when the rule has one, ``col N`` otherwise, or ``<doc#>/<field.path>`` for
    manifests; ``rule`` names the rule that fired.
    """

    line: int
    kind: str
    name: str
    rule: str
    source: str = ""

    def format(self, source: str | None = None) -> str:
        src = source if source is not None else (self.source or "-")
        return f"{src}:{self.line}: {self.kind}: {self.name} ({self.rule})"

    def __str__(self) -> str:
        return self.format()


@record(frozen=True)
class _Hit(Value):
    start: int  # span of the value to redact
    end: int
    kind: str
    name: str  # "" when the rule has no name: reported as the column
    rule: str


# --------------------------------------------------------------------------------------------------
# Rules
# --------------------------------------------------------------------------------------------------

_PRIVATE_KEY_RE = _Lazy(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)

# (kind, regex); group 1 (or the whole match) is the credential.
_TOKEN_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("aws-access-key-id", _Lazy(r"(?<![A-Za-z0-9])((?:AKIA|ASIA)[A-Z0-9]{16})(?![A-Za-z0-9])")),
    ("jwt", _Lazy(r"(?<![A-Za-z0-9_-])(eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})")),
    ("ngc-api-key", _Lazy(r"(?<![A-Za-z0-9_-])(nvapi-[A-Za-z0-9_-]{20,})")),
    ("hf-token", _Lazy(r"(?<![A-Za-z0-9_-])(hf_[A-Za-z0-9]{30,})(?![A-Za-z0-9_])")),
    (
        "github-token",
        _Lazy(r"(?<![A-Za-z0-9_-])(gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"),
    ),
    ("slack-token", _Lazy(r"(?<![A-Za-z0-9_-])(xox[abposr]-[A-Za-z0-9-]{10,})")),
    ("slack-webhook", _Lazy(r"hooks\.slack\.com/(?:services|workflows)/([A-Za-z0-9+/_-]{20,})")),
    ("gitlab-token", _Lazy(r"(?<![A-Za-z0-9_-])(gl(?:pat|dt|ptt|rt)-[A-Za-z0-9_-]{20,})")),
    ("npm-token", _Lazy(r"(?<![A-Za-z0-9_-])(npm_[A-Za-z0-9]{36})(?![A-Za-z0-9])")),
    ("pypi-token", _Lazy(r"(?<![A-Za-z0-9_-])(pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,})")),
    ("google-api-key", _Lazy(r"(?<![A-Za-z0-9_-])(AIza[0-9A-Za-z_-]{35})(?![A-Za-z0-9_-])")),
    ("stripe-key", _Lazy(r"(?<![A-Za-z0-9_-])((?:sk|rk)_(?:test|live|prod)_[0-9A-Za-z]{10,99})")),
    ("sendgrid-key", _Lazy(r"(?<![A-Za-z0-9_-])(SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43})")),
    ("digitalocean-token", _Lazy(r"(?<![A-Za-z0-9_-])(do[opr]_v1_[a-f0-9]{64})")),
    ("databricks-token", _Lazy(r"(?<![A-Za-z0-9_-])(dapi[a-f0-9]{32}(?:-\d)?)(?![A-Za-z0-9])")),
    ("shopify-token", _Lazy(r"(?<![A-Za-z0-9_-])(shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32})")),
    ("replicate-token", _Lazy(r"(?<![A-Za-z0-9_-])(r8_[A-Za-z0-9]{37})(?![A-Za-z0-9])")),
    ("groq-key", _Lazy(r"(?<![A-Za-z0-9_-])(gsk_[A-Za-z0-9]{52})(?![A-Za-z0-9])")),
    ("twilio-key", _Lazy(r"(?<![A-Za-z0-9_-])(SK[0-9a-f]{32})(?![A-Za-z0-9])")),
    ("mailgun-key", _Lazy(r"(?<![A-Za-z0-9_-])(key-[0-9a-f]{32})(?![A-Za-z0-9])")),
    (
        "sk-api-key",
        _Lazy(r"(?<![A-Za-z0-9_-])(sk-(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{20,})"),
    ),
)

# Every prefix a _TOKEN_RULES pattern starts with (kept in step with them; the unit tests cover each rule).
_TOKEN_HINT_RE = _Lazy(
    r"AKIA|ASIA|eyJ|nvapi-|hf_|gh[pousr]_|github_pat_|xox[abposr]-|hooks\.slack\.com|gl(?:pat|dt|ptt|rt)-|npm_|pypi-"
    r"|AIza|[sr]k_|SG\.|do[opr]_v1_|dapi|shp|r8_|gsk_|SK[0-9a-f]|key-|sk-"
)
_PRESIGNED_RE = _Lazy(
    r"[?&]((?:X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token|X-Goog-Signature|X-Goog-Credential))"
    r"=([^&\s\"'<>]+)",
    re.IGNORECASE,
)
_URL_USERINFO_RE = _Lazy(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@?#\"']*:([^\s/@?#\"']+)@")
_AUTH_HEADER_RE = _Lazy(
    r"\b((?:Proxy-)?Authorization)\s*[:=]\s*[\"']?(?:Bearer|Basic|Token|Digest|Bot)\s+([^\s\"',;]+)",
    re.IGNORECASE,
)
_BEARER_RE = _Lazy(r"\bBearer\s+([A-Za-z0-9._~+/-]{16,}=*)")
# A shell word: quoted, or a run of $(...), ${...} and plain characters.
_SUBST = r"\$\([^)\n]*\)|\$\{[^}\n]*\}"
_WORD = r"\"[^\"\n]*\"|'[^'\n]*'|(?:" + _SUBST + r"|[^\s\"';&|`])+"
_FLAG_WORDS = (
    r"password|passwd|passphrase|pwd|token|api[-_]key|apikey|secret|access[-_]key|secret[-_]key|client[-_]secret"
)
_FLAG_RE = _Lazy(
    r"(?<![\w-])(--(?:[a-z0-9]+[-_])*(?:" + _FLAG_WORDS + r"))(?:=|\s+)(" + _WORD + ")",
    re.IGNORECASE,
)
_FLAG_SHAPE_RE = _Lazy(r"--(?:[a-z0-9]+[-_])*(?:" + _FLAG_WORDS + r")", re.IGNORECASE)
# `--secret NAME` / `--env-secret NAME` name a Secret object (kubectl, docker and podman style) when NAME is a
# Kubernetes name, optionally with options (`id=hf,src=/run/secrets/hf`, `ngc,type=env,target=NGC_API_KEY`).
_OBJECT_NAME = r"[a-z0-9](?:[-a-z0-9_]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9_]*[a-z0-9])?)*"
_SECRET_SPEC_RE = _Lazy(
    r"(?:id=)?" + _OBJECT_NAME + r"(?:,(?:id|src|source|type|target|env|mode|uid|gid|required)=[^,\s]*)*"
)
# A --*-secret flag whose value is a credential, not a name (--client-secret abc).
_VALUE_SECRET_WORDS = frozenset({"CLIENT", "APP", "SHARED", "JWT", "API", "WEBHOOK", "SIGNING", "HMAC", "COOKIE",
                                 "SESSION", "OAUTH", "CONSUMER"})


class _FlagOnly:
    """``fullmatch(word)``: is ``word`` a flag that takes a credential (``--hf_token``, ``--api-key``; not
    ``--unk-token``, a tokenizer's special token)."""

    @staticmethod
    def fullmatch(word: str) -> bool:
        return bool(_FLAG_SHAPE_RE.fullmatch(word)) and is_credential_name(word.lstrip("-"))


FLAG_ONLY_RE = _FlagOnly()


def flag_value_is_credential(flag: str, value: str) -> bool:
    """Whether ``value`` after a credential flag is a literal credential."""
    if value.startswith("-") or is_placeholder(value):
        return False
    words = name_words(flag.lstrip("-"))
    names_an_object = words[-1] == "SECRET" and (len(words) == 1 or words[-2] not in _VALUE_SECRET_WORDS)
    return not (names_an_object and _SECRET_SPEC_RE.fullmatch(_unquote(value)))  # --secret hf-secret
_FROM_LITERAL_RE = _Lazy(r"--from-literal[= ]([A-Za-z0-9._-]+)=(\"[^\"]*\"|'[^']*'|[^\s\"']*)")
# NAME=VALUE (export X=.., docker -e X=.., sbatch --export=A=..,B=.., env-files, k=v lists).
_ASSIGN_RE = _Lazy(
    r"(?<![\w$.\-/])((?:[A-Za-z_][A-Za-z0-9_-]*\.)*[A-Za-z_][A-Za-z0-9_]*)="
    r"(\"[^\"\n]*\"|'[^'\n]*'|(?:" + _SUBST + r"|[^\s,;&|'\"`]|,(?![A-Za-z_][A-Za-z0-9_]*=))*)"
)
# "key": "value" inside JSON text (also with escaped quotes, as JSON embedded in a string).
_JSON_KEY_RE = _Lazy(r"(\\?\")([A-Za-z_][A-Za-z0-9_.-]*)\1\s*:\s*\1((?:[^\"\\]|\\[^\"])*)\1")
# name: value (YAML/HTTP-header style); only for redaction, too loose for linting prose.
_COLON_RE = _Lazy(
    r"(?m)^[ \t-]*[\"']?([A-Za-z_][A-Za-z0-9_.-]*)[\"']?[ \t]*:[ \t]+([^\s#][^\n]*?)[ \t]*$"
)
# name: value anywhere in a line (an event message folded to one line): redaction only. A lookahead, so
# that `reason: password: x` is tried at every word.
_INLINE_COLON_RE = _Lazy(
    r"(?<![\w.-])(?=[\"']?([A-Za-z_][A-Za-z0-9_.-]*)[\"']?[ \t]*:[ \t]*[\"']?([^\s\"',;]+))"
)
# curl -u user:PASS (also --user, wget/httpie-style --user=...): the part after the first ':' (docker -u
# 1000:1000 is a uid:gid, so only for HTTP clients).
_USER_FLAG_RE = _Lazy(
    r"\b(?:curl|wget|http|https|xh|lftp|ftp)\b[^\n;&|]*?(?<![\w-])(?:-u|--user|--proxy-user|--http-user)(?:=|\s*)("
    + _WORD + ")"
)
# -H 'X-API-Key: VALUE' / --header "Private-Token: VALUE": a credential-like header name.
_HEADER_FLAG_RE = _Lazy(
    r"(?<![\w-])(?:-H|--header)(?:=|\s*)([\"']?)([A-Za-z][A-Za-z0-9_-]*)\s*:\s*([^\"'\n]+?)\s*\1(?=\s|$|[;&|)])"
)
# mysql -pPASS (no space: with a space mysql prompts and PASS is the database name).
_MYSQL_RE = _Lazy(r"\b(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n;&|]*?\s-p(" + _WORD + ")")
# -p PASS of docker/podman/helm login and sshpass, -a PASS of redis-cli.
_SHORT_PASSWORD_RE = _Lazy(
    r"\b(?:(?:docker|podman|buildah|skopeo|nerdctl|oras)\s+login|helm\s+registry\s+login|sshpass|redis-cli)\b"
    r"[^\n;&|]*?\s(?:-p|-a)(?:=|\s+)(" + _WORD + ")"
)
# keytool/openssl: -storepass X, -keypass X, -passin pass:X, -passout pass:X.
_DASH_PASS_RE = _Lazy(
    r"(?<![\w-])-(?:src|dest)?(?:store|key)?pass(?:word)?\s+(" + _WORD + ")"
    r"|(?<![\w-])-pass(?:in|out)?\s+pass:(" + _WORD + ")"
)
# java -Dsome.keyStorePassword=VALUE
_JAVA_PROPERTY_RE = _Lazy(r"(?<![\w-])-D((?:[A-Za-z0-9_-]+\.)*[A-Za-z0-9_-]+)=(" + _WORD + ")")
# .netrc: machine HOST [login USER] password VALUE
_NETRC_RE = _Lazy(r"\bmachine\s+\S+(?:\s+login\s+\S+)?\s+password\s+([^\s\"']+)")
# aws configure set aws_secret_access_key VALUE
_AWS_CONFIGURE_RE = _Lazy(r"\baws\s+configure\s+set\s+([A-Za-z_.]+)\s+(" + _WORD + ")")
# NAME = "VALUE", NAME: 'VALUE', NAME := "VALUE" (Python, JS, Go, TOML, HCL): quoted, with spaces allowed.
_QUOTED_ASSIGN_RE = _Lazy(
    r"(?<![\w$.\-/\[\\\"'])([A-Za-z_][A-Za-z0-9_.-]*)\s*(?::=|=|:)\s*([\"'])((?:(?!\2)[^\\\n]|\\.)+)\2"
)
# os.environ["HF_TOKEN"] = "VALUE", env["X"] = '...', os.environ.setdefault("X", "VALUE"), os.putenv(...).
_SUBSCRIPT_RE = _Lazy(
    r"\[\s*([\"'])([A-Za-z_][A-Za-z0-9_.-]*)\1\s*\]\s*=\s*([\"'])((?:(?!\3)[^\\\n]|\\.)*)\3"
)
_SETENV_RE = _Lazy(
    r"\b(?:setdefault|putenv|setenv|Setenv)\(\s*([\"'])([A-Za-z_][A-Za-z0-9_.-]*)\1\s*,\s*([\"'])"
    r"((?:(?!\3)[^\\\n]|\\.)*)\3"
)
_HEREDOC_RE = _Lazy(r"<<-?\s*([\"']?)([A-Za-z_][A-Za-z0-9_]*)\1[^\n]*\n(.*?)(?:^\s*\2\s*$|\Z)",
                         re.DOTALL | re.MULTILINE)
# A blob may follow '=' (cfg=<blob>); it may not continue a longer run of base64 characters.
_BASE64_RE = _Lazy(r"(?<![A-Za-z0-9+/_-])([A-Za-z0-9+/_-]{20,}={0,2})(?![A-Za-z0-9+/=_-])")
_HEX_RE = _Lazy(r"[0-9a-fA-F]+")
_BASE64_DEPTH = 4  # base64 of base64 of base64 of a credential is still found


def _strip_quotes_span(text: str, start: int, end: int) -> tuple[int, int]:
    if end - start >= 2 and text[start] == text[end - 1] and text[start] in "'\"":
        return start + 1, end - 1
    return start, end


def _scan_format(text: str) -> Iterable[_Hit]:
    for m in _PRIVATE_KEY_RE.finditer(text):
        yield _Hit(m.start(), m.end(), "private-key", "", "private-key-block")
    if _TOKEN_HINT_RE.search(text):  # one cheap pass first: most text holds no token prefix at all
        for kind, rx in _TOKEN_RULES:
            for m in rx.finditer(text):
                yield _Hit(m.start(1), m.end(1), kind, "", "token-format")
    for m in _PRESIGNED_RE.finditer(text):
        if not is_placeholder(m.group(2)):
            yield _Hit(m.start(2), m.end(2), "presigned-url", m.group(1), "presigned-url")
    for m in _URL_USERINFO_RE.finditer(text):
        if not is_placeholder(m.group(1)):
            yield _Hit(m.start(1), m.end(1), "url-password", "", "url-userinfo")
    for m in _AUTH_HEADER_RE.finditer(text):
        if not is_placeholder(m.group(2)):
            yield _Hit(m.start(2), m.end(2), "auth-header", m.group(1), "authorization-header")
    for m in _BEARER_RE.finditer(text):
        tok = m.group(1)
        if any(c.isdigit() for c in tok) and not is_placeholder(tok):
            yield _Hit(m.start(1), m.end(1), "auth-header", "Bearer", "bearer-token")


def _is_quota_count(m: re.Match[str]) -> bool:
    """``secrets=12`` (lower case, digits only): a ResourceQuota's object count, not a credential."""
    return m.group(1) == "secrets" and _COUNT_RE.fullmatch(m.group(2)) is not None


def _finditer(rx: re.Pattern[str], text: str, *hints: str) -> Iterable[re.Match[str]]:
    """``rx.finditer(text)`` when one of the literal ``hints`` (which every match contains) is in ``text``."""
    return rx.finditer(text) if any(hint in text for hint in hints) else ()


def _scan_commands(text: str) -> Iterable[_Hit]:
    """Credentials in common command forms: curl -u/-H, mysql -p, os.environ[...] = and heredoc bodies."""
    for m in _finditer(_USER_FLAG_RE, text, "curl", "wget", "http", "xh", "ftp"):
        s, e = _strip_quotes_span(text, m.start(1), m.end(1))
        user, sep, password = text[s:e].partition(":")
        if sep and password and not is_placeholder(password):
            yield _Hit(s + len(user) + 1, e, "credential", "-u user:password", "user-password")
    for m in _finditer(_HEADER_FLAG_RE, text, "-H", "--header"):
        name, value = m.group(2), m.group(3)
        if name.lower() not in ("authorization", "proxy-authorization") and is_credential_name(name) and (
            not is_placeholder(value)
        ):
            yield _Hit(m.start(3), m.end(3), "credential", name, "header")
    for rx, name, hints in (
        (_MYSQL_RE, "mysql -p", ("mysql", "mariadb")),
        (_SHORT_PASSWORD_RE, "-p/-a", ("login", "sshpass", "redis-cli")),
        (_DASH_PASS_RE, "-*pass", ("pass",)),
    ):
        for m in _finditer(rx, text, *hints):
            group = 1 if m.group(1) is not None else 2
            if not m.group(group).startswith("-") and not is_placeholder(m.group(group)):
                s, e = _strip_quotes_span(text, m.start(group), m.end(group))
                yield _Hit(s, e, "credential", name, "flag-literal")
    for m in _finditer(_NETRC_RE, text, "machine"):
        if not is_placeholder(m.group(1)):
            yield _Hit(m.start(1), m.end(1), "credential", "netrc password", "netrc")
    for m in (*_finditer(_AWS_CONFIGURE_RE, text, "configure"), *_finditer(_JAVA_PROPERTY_RE, text, "-D")):
        if is_credential_name(m.group(1).rsplit(".", 1)[-1]) and not is_placeholder(m.group(2)):
            s, e = _strip_quotes_span(text, m.start(2), m.end(2))
            yield _Hit(s, e, "credential", m.group(1), "assignment")
    for m in _finditer(_QUOTED_ASSIGN_RE, text, '"', "'"):
        if is_credential_name(m.group(1).rsplit(".", 1)[-1]) and not is_placeholder(m.group(3)):
            yield _Hit(m.start(3), m.end(3), "credential", m.group(1), "quoted-assignment")
    for rx, *hints in ((_SUBSCRIPT_RE, "["), (_SETENV_RE, "env(", "setdefault(")):
        for m in _finditer(rx, text, *hints):
            if is_credential_name(m.group(2)) and m.group(4) and not is_placeholder(m.group(4)):
                yield _Hit(m.start(4), m.end(4), "credential", m.group(2), "assignment")
    for m in _finditer(_HEREDOC_RE, text, "<<"):
        offset = m.start(3)
        for c in _COLON_RE.finditer(m.group(3)):
            if is_credential_name(c.group(1)) and not is_placeholder(c.group(2)):
                s, e = _strip_quotes_span(m.group(3), c.start(2), c.end(2))
                yield _Hit(offset + s, offset + e, "credential", c.group(1), "heredoc-key-value")


def _scan_named(text: str, *, loose: bool, inline: bool = False) -> Iterable[_Hit]:
    for m in _FLAG_RE.finditer(text):
        if FLAG_ONLY_RE.fullmatch(m.group(1)) and flag_value_is_credential(m.group(1), m.group(2)):
            s, e = _strip_quotes_span(text, m.start(2), m.end(2))
            yield _Hit(s, e, "credential", m.group(1), "flag-literal")
    yield from _scan_commands(text)
    for m in _FROM_LITERAL_RE.finditer(text):
        if not is_placeholder(m.group(2)):
            s, e = _strip_quotes_span(text, m.start(2), m.end(2))
            yield _Hit(s, e, "credential", "--from-literal", "from-literal")
    for m in _ASSIGN_RE.finditer(text):
        if _is_quota_count(m):
            continue
        if is_credential_name(m.group(1).rsplit(".", 1)[-1]) and not is_placeholder(m.group(2)):
            s, e = _strip_quotes_span(text, m.start(2), m.end(2))
            if e > s:
                yield _Hit(s, e, "credential", m.group(1), "assignment")
    for m in _JSON_KEY_RE.finditer(text):
        if is_credential_name(m.group(2)) and not is_placeholder(m.group(3)):
            yield _Hit(m.start(3), m.end(3), "credential", m.group(2), "json-key")
    if loose:
        for m in _COLON_RE.finditer(text):
            if is_credential_name(m.group(1)) and not is_placeholder(m.group(2)):
                s, e = _strip_quotes_span(text, m.start(2), m.end(2))
                yield _Hit(s, e, "credential", m.group(1), "key-value")
    if inline:
        for m in _INLINE_COLON_RE.finditer(text):
            if is_credential_name(m.group(1)) and not is_placeholder(m.group(2)):
                yield _Hit(m.start(2), m.end(2), "credential", m.group(1), "key-value")


def _decode_base64(blob: str) -> str | None:
    """The decoded text of a base64 / base64url blob when it is mostly printable text, else None."""
    if _HEX_RE.fullmatch(blob):
        return None  # digests (sha256 hex) are never credentials by format
    padded = blob.rstrip("=")
    padded += "=" * (-len(padded) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        decoded = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    if not decoded:
        return None
    printable = sum(ch.isprintable() or ch in "\n\r\t" for ch in decoded)
    return decoded if printable / len(decoded) >= 0.95 else None


def _scan_base64(text: str, depth: int) -> Iterable[_Hit]:
    for m in _BASE64_RE.finditer(text):
        decoded = _decode_base64(m.group(1))
        if decoded is not None and _hits(decoded, loose=False, depth=depth + 1):
            yield _Hit(m.start(1), m.end(1), "base64-credential", "", "base64")


def _hits(text: str, *, loose: bool, depth: int = 0, inline: bool = False) -> list[_Hit]:
    """All hits ordered by position.  Where hits overlap, the first rule (named rules before format
    rules before base64) names the finding and the redacted span is the union of the spans."""
    candidates: list[_Hit] = list(_scan_named(text, loose=loose, inline=inline))
    candidates += _scan_format(text)
    if depth < _BASE64_DEPTH:
        candidates += _scan_base64(text, depth)
    order = sorted(
        (h.start, priority, h) for priority, h in enumerate(candidates) if h.end > h.start
    )
    merged: list[tuple[int, _Hit]] = []  # (priority of the hit that names the group, group)
    for _, priority, hit in order:
        if merged and hit.start < merged[-1][1].end:
            best, group = merged[-1]
            named = group if best <= priority else hit
            merged[-1] = (
                min(best, priority),
                _Hit(group.start, max(group.end, hit.end), named.kind, named.name, named.rule),
            )
        else:
            merged.append((priority, hit))
    return [hit for _, hit in merged]


def _line_starts(text: str) -> list[int]:
    return [0] + [m.end() for m in re.finditer("\n", text)]


def _line_col(starts: list[int], offset: int) -> tuple[int, int]:
    line = bisect.bisect_right(starts, offset)
    return line, offset - starts[line - 1] + 1


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def find_in_text(text: str, *, source: str = "") -> list[Finding]:
    """Credentials in ``text``: one Finding per value, with line and kind, never the value."""
    findings = []
    starts = _line_starts(text)
    for hit in _hits(text, loose=False):
        line, col = _line_col(starts, hit.start)
        findings.append(Finding(line, hit.kind, hit.name or f"col {col}", hit.rule, source))
    return findings


def redact_text(text: str) -> str:
    """``text`` with every credential value replaced by ``***REDACTED***`` (names are kept).

    Redaction is looser than linting: ``name: value`` lines with a credential-like name are also
    redacted, because hiding a harmless value costs nothing.
    """
    return _redact(text, inline=False)


def redact_cluster_text(text: str) -> str:
    """``redact_text`` plus ``name: value`` anywhere in a line: what the cluster says (events, conditions,
    container messages) arrives folded to one line, so ``... password: X`` is not at a line start.  Not
    used for kubectl-tao's own messages, which say ``--env HF_TOKEN: the variable is not set``."""
    return _redact(text, inline=True)


def redact_message(text: str) -> str:
    """``text`` with every value the linter would flag replaced: for kubectl-tao's own one-line messages,
    where ``--image-pull-secret: the Secret ...`` is a field and its complaint, not a key and a value (text
    quoted from kubectl or the cluster was redacted with the looser rules when it was read)."""
    return _redact(text, inline=False, loose=False)


def _redact(text: str, *, inline: bool, loose: bool = True) -> str:
    if not text:
        return text
    out: list[str] = []
    pos = 0
    for hit in _hits(text, loose=loose, inline=inline):
        out.append(text[pos : hit.start])
        out.append(REDACTED)
        pos = hit.end
    out.append(text[pos:])
    return "".join(out)


def redact_obj(obj: object) -> object:
    """A copy of JSON-like ``obj`` with credentials redacted.

    Strings go through ``redact_text``; a literal string under a credential-like key, the ``value`` of
    a ``{name: <credential-like>, value: ...}`` pair, and every value under ``data``/``stringData`` of
    a ``kind: Secret`` object are replaced whole.
    """
    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, list | tuple):
        return [redact_obj(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    secret = obj.get("kind") == "Secret"
    pair_name = obj.get("name") if isinstance(obj.get("value"), str) else None
    out: dict[object, object] = {}
    for key, value in obj.items():
        if secret and key in ("data", "stringData") and isinstance(value, dict):
            out[key] = {k: REDACTED for k in value}
        elif isinstance(value, str) and not is_placeholder(value) and (
            (isinstance(key, str) and is_credential_name(key))
            or (key == "value" and isinstance(pair_name, str) and is_credential_name(pair_name))
        ):
            out[key] = REDACTED
        else:
            out[key] = redact_obj(value)
    return out


_SHOWABLE_NAME_RE = _Lazy(r"[A-Za-z0-9_.-]{1,64}")
_RANDOM_RUN_RE = _Lazy(r"[A-Za-z0-9]{24,}")


def safe_to_show(name: str) -> bool:
    """Whether a rejected *name* typed by the user (an env-file key, an ``--env`` argument) may be quoted
    in an error: a short word of name characters that holds no credential.  Anything with a separator
    (``HF_TOKEN:<value>``, ``NAME=<value>``), a long random run or a recognisable token is not shown, since
    the user may have pasted a value where the name belongs."""
    core = name.strip()
    if not _SHOWABLE_NAME_RE.fullmatch(core) or _RANDOM_RUN_RE.search(core):
        return False
    bare = core.lstrip("._-")  # a leading '-' hides a token from the word-boundary rules
    return redact_text(core) == core and redact_text(bare) == bare and not _hits(bare, loose=False)


def scrub_argv(argv: Iterable[str]) -> list[str]:
    """``argv`` safe to show: each word redacted, and the word after a bare credential flag
    (``--password VALUE``, ``--token VALUE``) replaced when it is a literal."""
    words = list(argv)
    out: list[str] = []
    for i, word in enumerate(words):
        prev = words[i - 1] if i else ""
        if (
            i
            and FLAG_ONLY_RE.fullmatch(prev)
            and not word.startswith("-")
            and not is_placeholder(word)
        ):
            out.append(REDACTED)
        else:
            out.append(redact_text(word))
    return out
