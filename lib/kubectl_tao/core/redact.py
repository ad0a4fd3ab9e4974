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
import functools
import itertools
import re
from collections.abc import Iterable
from typing import Any, ClassVar

from kubectl_tao.core.sanitize import SEQUENCE_RE
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

    __slots__ = ("__dict__", "_args", "_compiled")

    def __init__(self, *args: Any) -> None:
        self._args = args
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        if self._compiled is None:
            self._compiled = re.compile(*self._args)
        found = getattr(self._compiled, name)
        setattr(self, name, found)  # found by plain lookup from now on
        return found


# The first word of a run of capitals (`AWS` of `AWSSecret`) starts where the run starts: an earlier start in the run
# would have taken the whole run (the third alternative), so the guard changes no split and reads each run once.
_WORD_RE = _Lazy(r"(?<![A-Z])[A-Z]+[0-9]*(?=[A-Z][a-z])|[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*|[0-9]+")


def name_words(name: str) -> list[str]:
    """Split an identifier into upper-case words: ``awsSecretAccessKey`` -> AWS SECRET ACCESS KEY."""
    return [w.upper() for w in _WORD_RE.findall(name)]


@functools.lru_cache(maxsize=4096)
def is_credential_name(name: str) -> bool:
    """True when ``name`` names a credential (whole words, any case, any separator).

    ``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_ACCESS_KEY_ID``, ``NGC_KEY``, ``apiKey``, ``DB_PASS``
    and ``SSH_KEY`` are; ``TOKENIZERS_PARALLELISM``, ``NUM_KEY_FRAMES``, ``MAX_NEW_TOKENS``,
    ``PASSWORD_FILE``, ``SECRET_NAME``, ``secretKeyRef`` and ``PARTITION_KEY`` are not.
    """
    words = name_words(name)
    if not words or words[-1] in _REFERENCE_SUFFIXES or tuple(words[-2:]) in _REFERENCE_SUFFIX_PAIRS:
        return False
    if words[0] == "EXISTING":
        return False  # existingSecret: NAME, the charts' way to name a Secret that holds the value
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
    # a Python f-string or str.format field: {password}, {quote_plus(password)}, {cfg.db.password}
    r"|\{[A-Za-z_][A-Za-z0-9_.]*(?:\([A-Za-z0-9_.]*\))?\}"
    r"|(?:%[-#0-9.]*[a-zA-Z]|\\[ntr])+|\**\s*REDACTED\s*\**",
    re.IGNORECASE,
)
_HARMLESS_WORDS = frozenset(
    {"", "-", "stdin", "/dev/stdin", "true", "false", "yes", "no", "none", "null", "nil", "on", "off",
     "0", "1", "enabled", "disabled", "enable", "disable"}
)
# Keys published in TAO's own documentation for its pretrained models (`-k nvidia_tlt`, `encryption_key:
# nvidia_tlt`; `tlt_encode` in TLT releases): a public value, never a credential to protect.
_PUBLIC_VALUES = frozenset({"nvidia_tlt", "tlt_encode"})
# The words written where a value is to be filled in (`--set auth.rootPassword=changeme`, `HF_TOKEN=your_token_here`).
_PLACEHOLDER_WORD_RE = _Lazy(
    r"(?:change|replace)[-_]?(?:me|it)|placeholder|dummy|example|todo|tbd|fixme"
    r"|your[-_][a-z0-9_-]*(?:token|key|password|passwd|secret|pass|pat|credentials?)(?:[-_]here)?",
    re.IGNORECASE,
)
_PATH_VALUE_RE = _Lazy(r"[~.]?/[\w.@/+:-]*")
# `secrets` (lower case) is also the Kubernetes resource a ResourceQuota counts: in `requested: secrets=1,
# used: secrets=12` the value is an object count (`count/secrets=` never matches: a '/' precedes the name).
_COUNT_RE = _Lazy(r"[0-9]+,?")


# ${VAR:-default}, ${VAR-default}, ${VAR:=default}, ${VAR=default}: the default is a value.
_DEFAULT_RE = _Lazy(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?[-=]((?:[^}$]|\$(?!\{))*)\}")
# A secret access key is 40 base64 characters and may start with '/' (then it is no path).
_AWS_SECRET_SHAPE_RE = _Lazy(r"[A-Za-z0-9/+]{40}")
_RANDOM_SEGMENT_RE = _Lazy(r"(?=[^/]*[A-Z])(?=[^/]*[a-z])(?=[^/]*[0-9])[A-Za-z0-9+=]{16,}")


def is_placeholder(value: str) -> bool:
    """True for values that are not literal credentials: references, placeholders, paths, booleans."""
    v = _unquote(value.strip()).strip()
    if v.lower() in _HARMLESS_WORDS or v in _PUBLIC_VALUES or _PLACEHOLDER_WORD_RE.fullmatch(v):
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

# (kind, regex); group 1 is the credential. Prefixes, lengths and alphabets are the vendors' published formats as the
# maintained scanners (gitleaks, trufflehog, detect-secrets) describe them; the rules are written here.
_B = r"(?<![A-Za-z0-9_-])"  # not inside a longer word
# A prefix no word of prose or code starts with may follow an underscore or a hyphen (`model-hf_...`,
# `run_ghp_...`): what follows it still has to have the token's length and alphabet.
_G = r"(?<![A-Za-z0-9])"
_TOKEN_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("aws-access-key-id", _Lazy(r"(?<![A-Za-z0-9])((?:AKIA|ASIA)[A-Z0-9]{16})(?![A-Za-z0-9])")),
    ("jwt", _Lazy(r"(?<![A-Za-z0-9_-])(eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})")),
    ("ngc-api-key", _Lazy(_G + r"(nvapi-[A-Za-z0-9_-]{20,})")),
    (
        "ngc-legacy-key",
        _Lazy(_B + r"([A-Za-z0-9]{26}:[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12})(?![A-Za-z0-9])"),
    ),
    ("hf-token", _Lazy(_G + r"((?:hf_|api_org_)[A-Za-z0-9]{30,})(?![A-Za-z0-9_])")),
    (
        "github-token",
        _Lazy(_G + r"(gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"),
    ),
    ("slack-token", _Lazy(_B + r"(xox[abposr]-[A-Za-z0-9-]{10,}|xapp-[0-9]-[A-Za-z0-9-]{20,})")),
    ("slack-webhook", _Lazy(r"hooks\.slack\.com/(?:services|workflows)/([A-Za-z0-9+/_-]{20,})")),
    ("discord-webhook", _Lazy(r"discord(?:app)?\.com/api/webhooks/[0-9]{17,20}/([A-Za-z0-9_-]{60,})")),
    ("gitlab-token", _Lazy(_G + r"(gl(?:pat|dt|ptt|rt|soat|oas|agent|ft|imt|ffct|cbt)-[A-Za-z0-9_.-]{20,})")),
    ("npm-token", _Lazy(_B + r"(npm_[A-Za-z0-9]{36})(?![A-Za-z0-9])")),
    ("pypi-token", _Lazy(_B + r"(pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,})")),
    ("rubygems-token", _Lazy(_B + r"(rubygems_[a-f0-9]{48})(?![A-Za-z0-9])")),
    ("google-api-key", _Lazy(_B + r"(AIza[0-9A-Za-z_-]{35})(?![A-Za-z0-9_-])")),
    ("google-oauth-token", _Lazy(_B + r"(ya29\.[A-Za-z0-9_-]{20,})")),
    ("google-client-secret", _Lazy(_B + r"(GOCSPX-[A-Za-z0-9_-]{24,})")),
    (
        "azure-ad-client-secret",
        _Lazy(r"(?<![A-Za-z0-9_~.-])([A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34})(?![A-Za-z0-9_~.-])"),
    ),
    # Vault service, batch and recovery tokens: `hvs.` and a body of 24 or more characters (longer with a namespace).
    ("vault-token", _Lazy(r"(?<![A-Za-z0-9.])(hv[sr]\.[A-Za-z0-9_-]{24,}|hvb\.[A-Za-z0-9_.-]{50,})")),
    ("docker-token", _Lazy(_G + r"(dckr_(?:pat|oat)_[A-Za-z0-9_-]{24,})")),
    # Atlassian API tokens (ATATT3, Cloud admin keys ATCTT3): the prefix, a base64url body and `=` and an 8-digit hex
    # checksum; the body's length varies with the token's version, so any 20 or more characters (the body ends where
    # its characters end, so only the checksum needs the check that no token character follows).
    ("atlassian-token", _Lazy(_G + r"(AT[AC]TT3[A-Za-z0-9_-]{20,}(?:=[0-9A-Fa-f]{8}(?![A-Za-z0-9_-]))?)")),
    ("telegram-bot-token", _Lazy(r"(?:(?<=bot)|(?<![A-Za-z0-9_:-]))([0-9]{5,16}:A[A-Za-z0-9_-]{34})(?![A-Za-z0-9_-])")),
    ("stripe-key", _Lazy(_B + r"((?:sk|rk)_(?:test|live|prod)_[0-9A-Za-z]{10,99})")),
    ("square-token", _Lazy(_B + r"(sq0(?:atp|csp)-[A-Za-z0-9_-]{22,})")),
    ("sendgrid-key", _Lazy(_B + r"(SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43})")),
    ("digitalocean-token", _Lazy(_B + r"(do[opr]_v1_[a-f0-9]{64})")),
    ("databricks-token", _Lazy(_B + r"(dapi[a-f0-9]{32}(?:-\d)?)(?![A-Za-z0-9])")),
    ("shopify-token", _Lazy(_B + r"(shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32})")),
    ("replicate-token", _Lazy(_B + r"(r8_[A-Za-z0-9]{37})(?![A-Za-z0-9])")),
    ("groq-key", _Lazy(_B + r"(gsk_[A-Za-z0-9]{52})(?![A-Za-z0-9])")),
    ("xai-key", _Lazy(_B + r"(xai-[A-Za-z0-9_]{70,})")),
    ("perplexity-key", _Lazy(_B + r"(pplx-[A-Za-z0-9]{40,})")),
    ("langsmith-key", _Lazy(_B + r"(lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10})")),
    ("pinecone-key", _Lazy(_B + r"(pcsk_[A-Za-z0-9]{5,6}_[A-Za-z0-9]{50,})")),
    ("postman-key", _Lazy(_B + r"(PMAK-[A-Za-z0-9-]{50,})")),
    ("grafana-token", _Lazy(_B + r"(glc_[A-Za-z0-9+/]{32,}={0,3}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})")),
    ("sentry-token", _Lazy(_B + r"(sntry[us]_[A-Za-z0-9+/=_]{40,})")),
    ("age-secret-key", _Lazy(r"(AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58})")),
    ("heroku-key", _Lazy(_B + r"(HRKU-AA[0-9A-Za-z_-]{58})")),
    ("doppler-token", _Lazy(_B + r"(dp\.pt\.[A-Za-z0-9]{40,})")),
    ("pulumi-token", _Lazy(_B + r"(pul-[a-f0-9]{40})(?![A-Za-z0-9])")),
    ("linear-key", _Lazy(_B + r"(lin_api_[A-Za-z0-9]{40})")),
    ("notion-token", _Lazy(_B + r"(ntn_[0-9]{11}[A-Za-z0-9]{35})")),
    ("prefect-key", _Lazy(_B + r"(pnu_[A-Za-z0-9]{36})")),
    ("readme-key", _Lazy(_B + r"(rdme_[a-z0-9]{70})")),
    ("planetscale-token", _Lazy(_B + r"(pscale_(?:tkn|oauth|pw)_[A-Za-z0-9_=.-]{32,64})")),
    ("artifactory-key", _Lazy(_B + r"(AKCp[A-Za-z0-9]{69})")),
    ("1password-token", _Lazy(_B + r"(ops_eyJ[A-Za-z0-9+/]{250,}={0,3})")),
    ("dynatrace-token", _Lazy(_B + r"(dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64})")),
    ("flyio-token", _Lazy(_B + r"(fo1_[A-Za-z0-9_-]{43})")),
    ("infracost-key", _Lazy(_B + r"(ico-[A-Za-z0-9]{32})(?![A-Za-z0-9])")),
    ("twilio-key", _Lazy(_B + r"(SK[0-9a-f]{32})(?![A-Za-z0-9])")),
    ("mailgun-key", _Lazy(_B + r"(key-[0-9a-f]{32})(?![A-Za-z0-9])")),
    (
        # OpenAI (sk-proj-, sk-svcacct-), Anthropic (sk-ant-), OpenRouter (sk-or-v1-): the vendor's prefix, or mixed
        # case and digits; DeepSeek
        # and others: 32 or more lower-case letters and digits in one run. A package name (`sk-video`,
        # `sk-learn-extra2`) is lower-case words joined by hyphens: neither.
        "sk-api-key",
        _Lazy(
            _B + r"(sk-(?:proj|svcacct|admin|ant|or)-(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{20,}"
            r"|sk-(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[a-z])[A-Za-z0-9_-]{20,}"
            r"|sk-(?:[a-z0-9]{1,12}-){0,2}(?=[a-z]*[0-9])[a-z0-9]{32,}(?![A-Za-z0-9_-]))"
        ),
    ),
)

# Every prefix a _TOKEN_RULES pattern starts with (kept in step with them; the unit tests cover each rule), grouped
# by their first character: a search tries one alternative per first character, not each prefix, at every place.
_TOKEN_HINT_RE = _Lazy(
    r"A(?:KIA|SIA|Iza|T[AC]TT3|GE-SECRET-KEY-1|KCp)|eyJ|n(?:vapi-|pm_|tn_)|:[0-9a-fA-F]{8}-|[0-9]:A"
    r"|h(?:f_|ooks\.slack\.com|v[sb]\.)|api_org_|g(?:h[pousr]_|ithub_pat_|sk_|l(?:c_|sa_|(?:pat|dt|ptt|rt|soat|oas"
    r"|agent|ft|imt|ffct|cbt)-))|x(?:ox[abposr]-|app-|ai-)|/api/webhooks/|p(?:ypi-|plx-|csk_|ul-|nu_|scale_)"
    r"|r(?:k_|ubygems_|8_|dme_)|s(?:k[-_]|q0|hp|ntry)|S(?:G\.|K[0-9a-f])|d(?:ckr_|o[opr]_v1_|api|p\.pt\.|t0c01\.)"
    r"|ya29\.|GOCSPX-|Q~|l(?:sv2_|in_api_)|PMAK-|HRKU-|ops_eyJ|fo1_|ico-|key-"
)
_PRESIGNED_RE = _Lazy(
    r"[?&;]((?:X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token|X-Goog-Signature|X-Goog-Credential|sig))"
    r"=([^&\s\"'<>]+)",
    re.IGNORECASE,
)
# The password may hold a '#' (a client sends it as typed: `https://bob:pa#ss@host` is bob's password `pa#ss`).
_URL_USERINFO_RE = _Lazy(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@?#\"']*:([^\s/@?\"']+)@")
_AUTH_HEADER_RE = _Lazy(
    r"\b((?:Proxy-)?Authorization)\s*[:=]\s*[\"']?(?:Bearer|Basic|Token|Digest|Bot)\s+([^\s\"',;]+)",
    re.IGNORECASE,
)
_BEARER_RE = _Lazy(r"\bBearer\s+([A-Za-z0-9._~+/-]{16,}=*)")
# A shell word: quoted, or a run of $(...), ${...} and plain characters.
# A substitution's body stops at the next `$(`/`${` (so a run of unclosed ones is read once, not once each).
_SUBST = r"\$\((?:[^)$\n]|\$(?!\())*\)|\$\{(?:[^}$\n]|\$(?!\{))*\}"
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
    r"|(?:secrets?/)?" + _OBJECT_NAME + r"(?:[/:][A-Za-z_][A-Za-z0-9_.-]*)?(?:," + _OBJECT_NAME + r")*"
)  # ... or secret/NAME, NAME/KEY, NAME:KEY, NAME,NAME
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
    names_an_object = words[-1] in ("SECRET", "SECRETS") and (len(words) == 1 or words[-2] not in _VALUE_SECRET_WORDS)
    return not (names_an_object and _SECRET_SPEC_RE.fullmatch(_unquote(value)))  # --secret hf-secret
_FROM_LITERAL_RE = _Lazy(r"--from-literal[= ]([A-Za-z0-9._-]+)=(\"[^\"]*\"|'[^']*'|[^\s\"']*)")
# NAME=VALUE (export X=.., docker -e X=.., sbatch --export=A=..,B=.., env-files, k=v lists).
_ASSIGN_RE = _Lazy(
    r"(?<![\w$.\-/])((?:[A-Za-z_][A-Za-z0-9_-]*\.)*[A-Za-z_][A-Za-z0-9_]*)=(?!=)"
    r"(\"[^\"\n]*\"|'[^'\n]*'|(?:" + _SUBST + r"|[^\s,;&|'\"`]|,(?![A-Za-z_][A-Za-z0-9_]*=))*)"
)
# NAME = VALUE (a blank before '='; NAME=VALUE is _ASSIGN_RE's) at the start of a line: INI files such as
# ~/.aws/credentials, .pypirc, .s3cfg or rclone.conf, often written by a heredoc. An inline `; comment` or
# `# comment` is not part of the value.
_INI_RE = _Lazy(r"(?m)^[ \t]*([A-Za-z_][A-Za-z0-9_.-]*)[ \t]+=[ \t]*([^\s#;][^\n]*)")
_INLINE_COMMENT_RE = _Lazy(r"\s[#;]")
# kaggle.json: {"username": "...", "key": "<32 hex digits>"} (the key's name alone says nothing).
_KAGGLE_KEY_RE = _Lazy(r"(\\?\")key\1\s*:\s*\1([0-9a-f]{32})\1")
# Values that are code, not literals: a call or a subscript (getpass(), os.environ["X"], os.getenv('X'),
# get_key(path)), or a setting read from an object (args.token, self.password, config.api_key).
_CALL_RE = _Lazy(
    r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:\([^()\n]*\)|\[[^\[\]\n]*\])(?:\.[A-Za-z_]\w*(?:\([^()\n]*\))?)*"
)
_VARIABLE_RE = _Lazy(r"[a-z_][a-z0-9_]*")  # a snake_case variable (a password rarely is one: MyPassword123 is not)
_OPEN_CALL_RE = _Lazy(r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*[(\[](?:[A-Za-z_]\w*=)?")  # getpass(prompt=
_SETTING_RE = _Lazy(r"(?:args|self|cfg|conf|config|opts|options|settings|params|creds|credentials)\.[A-Za-z_][\w.]*")
# "key": "value" inside JSON text (also with escaped quotes, as JSON embedded in a string).
_JSON_KEY_RE = _Lazy(r"(\\?\")([A-Za-z_][A-Za-z0-9_.-]*)\1\s*:\s*\1((?:[^\"\\]|\\[^\"])*)\1")
# 'key': 'value' in a Python dict (or a mix of quotes): a JSON key's rule with single quotes.
_DICT_KEY_RE = _Lazy(r"(['\"])([A-Za-z_][A-Za-z0-9_.-]*)\1\s*:\s*(['\"])((?:(?!\3)[^\\\n]|\\.)*)\3")
# A container's env entry written out in text (a manifest in a heredoc or a command): `- name: <credential-like>`
# and, on the next line, `value: <literal>` (the manifest walker's env-literal rule).
_ENV_PAIR_RE = _Lazy(
    r"(?m)^[ \t]*(?:-[ \t]+)?name:[ \t]*([\"']?)([A-Za-z_][A-Za-z0-9_.-]*)\1[ \t]*\r?\n[ \t]*value:[ \t]*([^\s#][^\n]*)"
)
# name: value (YAML/HTTP-header style); only for redaction, too loose for linting prose.
_COLON_RE = _Lazy(
    r"(?m)^[ \t-]*[\"']?([A-Za-z_][A-Za-z0-9_.-]*)[\"']?[ \t]*:[ \t]+([^\s#][^\n]*)"
)
# name: value anywhere in a line (an event message folded to one line): redaction only. A lookahead, so
# that `reason: password: x` is tried at every word.
_INLINE_COLON_RE = _Lazy(
    r"(?<![\w.-])(?=[\"']?([A-Za-z_][A-Za-z0-9_.-]*)[\"']?[ \t]*:[ \t]*[\"']?([^\s\"',;]))"
)
_VALUE_RUN_RE = _Lazy(r"[^\s\"',;]*")  # the value itself (read in code: see _scan_named)
_CHECKED_VALUE = 256  # a longer value is never taken for a placeholder
# curl -u user:PASS (also --user, wget/httpie-style --user=...): the part after the first ':' (docker -u
# 1000:1000 is a uid:gid, so only for HTTP clients).
_HTTP_CLIENT_RE = _Lazy(r"\b(?:curl|wget|http|https|xh|lftp|ftp)\b")
_USER_FLAG_RE = _Lazy(r"(?<![\w-])(?:-u|--user|--proxy-user|--http-user)(?:=|\s*)(" + _WORD + ")")
# -H 'X-API-Key: VALUE' / --header "Private-Token: VALUE": a credential-like header name. Quoted, the value runs
# to its last non-blank before the closing quote (on its line), and the quote ends a word; unquoted, it is one
# word up to a blank or `;&|)`. An unquoted value that runs into a quote is none (see _header_flags). Each value
# starts on a non-blank and ends where its characters end: one pass over it, however many flags it holds.
_HEADER_FLAG_RE = _Lazy(
    r"(?<![\w-])(?:-H|--header)(?:=|\s*)"
    r"(?:(?P<quote>[\"'])(?P<name>[A-Za-z][A-Za-z0-9_-]*)\s*:\s*(?P<value>[^\"'\s](?:[^\"'\n]*[^\"'\s])?)\s*(?P=quote)"
    r"(?=\s|$|[;&|)])"
    r"|(?P<bare_name>[A-Za-z][A-Za-z0-9_-]*)\s*:\s*(?P<bare_value>[^\"'\s][^\"'\s;&|)]*))"
)
_LONGEST_HEADER_FLAG = len("--header=")
# mysql -pPASS (no space: with a space mysql prompts and PASS is the database name).
_MYSQL_RE = _Lazy(r"\b(?:mysql|mysqldump|mysqladmin|mariadb)\b")
_MYSQL_FLAG_RE = _Lazy(r"\s-p(" + _WORD + ")")
# -p PASS of docker/podman/helm login and sshpass, -a PASS of redis-cli.
# The networks of TAO (TF1, TF2, PyTorch and Deploy) whose entry points take the model key as `-k`.
_TAO_NETWORKS = (
    r"detectnet_v2|faster_rcnn|yolo_v[34](?:_tiny)?|ssd|dssd|retinanet|mask_rcnn|unet|lprnet|bpnet|fpenet"
    r"|classification_(?:tf[12]|pyt)|efficientdet_tf[12]|multitask_classification|gazenet|emotionnet"
    r"|heartratenet|gesturenet|action_recognition|pose_classification|pointpillars|re_identification|segformer"
    r"|deformable_detr|dino|ocdnet|ocrnet|optical_inspection|visual_changenet|centerpose|mal|grounding_dino"
    r"|mask2former|rtdetr|mask_grounding_dino|ml_recog|metric_learning_recognition|character_recognition"
)
# A command that takes a password in a flag: (hints, command pattern, flag pattern whose group 1 is the value,
# name). The flag is looked for among the command's own arguments (up to the next line, `;`, `&` or `|`).
_COMMAND_PASSWORD_FLAGS: tuple[tuple[tuple[str, ...], Any, Any, str], ...] = (
    (
        ("login",),
        _Lazy(r"\b(?:(?:docker|podman|buildah|skopeo|nerdctl|oras)\s+login|helm\s+registry\s+login|az\s+login)\b"),
        _Lazy(r"\s(?:-p|--password)(?:=|\s+)(" + _WORD + ")"),
        "login -p",
    ),
    (("sshpass",), _Lazy(r"\bsshpass\b"), _Lazy(r"\s-p(?:=|\s*)(" + _WORD + ")"), "sshpass -p"),
    (("redis-cli",), _Lazy(r"\bredis-cli\b"), _Lazy(r"\s-a(?:=|\s+)(" + _WORD + ")"), "redis-cli -a"),
    (("zip",), _Lazy(r"\b(?:unzip|zip|zipcloak|funzip)\b"), _Lazy(r"\s-P(?:=|\s*)(" + _WORD + ")"), "zip -P"),
    # -p alone makes 7z prompt; the password is joined to it (-pPASS).
    (("7z",), _Lazy(r"\b7z[az]?\b"), _Lazy(r"\s-p(" + _WORD + ")"), "7z -p"),
    (("openssl",), _Lazy(r"\bopenssl\b"), _Lazy(r"\s-k\s+(" + _WORD + ")"), "openssl -k"),
    (("ssh-keygen",), _Lazy(r"\bssh-keygen\b"), _Lazy(r"\s-[NP]\s*(" + _WORD + ")"), "ssh-keygen -N"),
    (("sqlcmd", "bcp"), _Lazy(r"\b(?:sqlcmd|bcp)\b"), _Lazy(r"\s-P\s*(" + _WORD + ")"), "sqlcmd -P"),
    (
        ("mongo",),
        _Lazy(r"\bmongo(?:sh|dump|restore|export|import|stat|top|files)?\b"),
        _Lazy(r"\s-p\s+(" + _WORD + ")"),
        "mongo -p",
    ),
    (("smbclient", "rpcclient"), _Lazy(r"\b(?:smbclient|rpcclient)\b"), _Lazy(r"\s-U\s*[^\s%]*%(" + _WORD + ")"),
     "smbclient -U user%password"),
    # TAO's model key (`-k, --key`: the key a .tlt/.etlt/.hdf5 model is encoded with) given to the launcher, to a
    # network's entry point in the container or to the converters; the key published for NVIDIA's pretrained
    # models (nvidia_tlt, tlt_encode) is not a secret (see _PUBLIC_VALUES).
    (
        ("-k",),
        # a whole command word: not the `tao` of `--bucket tao-data --key OBJECT` (aws s3api's --key is a path)
        _Lazy(r"(?<![\w.-])(?:tao(?:-deploy|-converter)?|tlt(?:-converter)?|converter|" + _TAO_NETWORKS
              + r")(?![\w.-])"),
        _Lazy(r"\s(?:-k|--key)(?:=|\s+)(" + _WORD + ")"),
        "tao -k",
    ),
)
# A password fed to a command's standard input in the same line: `echo PASS | docker login --password-stdin`,
# `printf '%s' PASS | ...`, `... --password-stdin <<< PASS`; the flag is any --*-stdin naming a credential.
_STDIN_FLAG_RE = _Lazy(r"--(?:[a-z0-9]+-)*(?:password|passwd|token|secret|key)-stdin\b")
_ECHO_RE = _Lazy(r"(?:^|(?<=[;&|(\n`]))[ \t]*(echo|printf)(?=[ \t|])")
# A shell word or an operator, read left to right once: quoted, a command substitution, a separator, plain.
_SHELL_TOKEN_RE = _Lazy(r"\"[^\"\n]*\"|'[^'\n]*'|\$\([^()\n]*\)|[|;&\n]|[^\s\"';&|]+")
_HERESTRING_RE = _Lazy(r"<<<[ \t]*(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"';&|`]+)")
# htpasswd -b FILE USER PASSWORD (-nb USER PASSWORD): the password is the last argument; wandb login KEY.
_HTPASSWD_RE = _Lazy(r"\bhtpasswd\b")
_WANDB_LOGIN_RE = _Lazy(r"\bwandb\s+login\b")
_ARG_RE = _Lazy(_WORD)
# Where a command's arguments end: the next line, `;`, `&` or `|`.
_SEGMENT_END_RE = _Lazy(r"[\n;&|]")
# keytool/openssl: -storepass X, -keypass X, -passin pass:X, -passout pass:X.
_DASH_PASS_RE = _Lazy(
    r"(?<![\w-])-(?:src|dest)?(?:store|key)?pass(?:word)?\s+(" + _WORD + ")"
    r"|(?<![\w-])-pass(?:in|out)?\s+pass:(" + _WORD + ")"
)
# java -Dsome.keyStorePassword=VALUE
_JAVA_PROPERTY_RE = _Lazy(r"(?<![\w.-])-D((?:[A-Za-z0-9_-]+\.)*[A-Za-z0-9_-]+)=(" + _WORD + ")")
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
# A heredoc's opener (`<<EOF`, `<<-'EOF'`); its body runs from the next line to the line holding only the word.
_HEREDOC_RE = _Lazy(r"<<-?[ \t]*([\"']?)([A-Za-z_][A-Za-z0-9_]*)\1")
# A blob may follow '=' (cfg=<blob>); it may not continue a longer run of base64 characters.
_BASE64_RE = _Lazy(r"(?<![A-Za-z0-9+/_-])([A-Za-z0-9+/_-]{20,}={0,2})(?![A-Za-z0-9+/=_-])")
_HEX_RE = _Lazy(r"[0-9a-fA-F]+")
_BASE64_DEPTH = 4  # base64 of base64 of base64 of a credential is still found


def _strip_quotes_span(text: str, start: int, end: int) -> tuple[int, int]:
    if end - start >= 2 and text[start] == text[end - 1] and text[start] in "'\"":
        return start + 1, end - 1
    return start, end


_AUTH_HINT_RE = _Lazy(r"authorization", re.IGNORECASE)
_PRESIGNED_HINT_RE = _Lazy(r"x-(?:amz|goog)-|sig=", re.IGNORECASE)  # sig=: an Azure SAS signature


def _scan_format(text: str) -> Iterable[_Hit]:
    for m in _finditer(_PRIVATE_KEY_RE, text, "PRIVATE KEY"):
        yield _Hit(m.start(), m.end(), "private-key", "", "private-key-block")
    if _TOKEN_HINT_RE.search(text):  # one cheap pass first: most text holds no token prefix at all
        for kind, rx in _TOKEN_RULES:
            for m in rx.finditer(text):
                yield _Hit(m.start(1), m.end(1), kind, "", "token-format")
    for m in _PRESIGNED_RE.finditer(text) if _PRESIGNED_HINT_RE.search(text) else ():
        if not is_placeholder(m.group(2)):
            yield _Hit(m.start(2), m.end(2), "presigned-url", m.group(1), "presigned-url")
    for m in _finditer(_URL_USERINFO_RE, text, "://"):
        if not is_placeholder(m.group(1)):
            yield _Hit(m.start(1), m.end(1), "url-password", "", "url-userinfo")
    for m in _AUTH_HEADER_RE.finditer(text) if _AUTH_HINT_RE.search(text) else ():
        if not is_placeholder(m.group(2)) and not m.group(2).startswith(("$(", "`")):  # Bearer $(cat FILE)
            yield _Hit(m.start(2), m.end(2), "auth-header", m.group(1), "authorization-header")
    for m in _finditer(_BEARER_RE, text, "Bearer"):
        tok = m.group(1)
        if any(c.isdigit() for c in tok) and not is_placeholder(tok):
            yield _Hit(m.start(1), m.end(1), "auth-header", "Bearer", "bearer-token")


def _is_quota_count(m: re.Match[str]) -> bool:
    """``secrets=12`` (lower case, digits only): a ResourceQuota's object count, not a credential."""
    return m.group(1) == "secrets" and _COUNT_RE.fullmatch(m.group(2)) is not None


def _finditer(rx: re.Pattern[str], text: str, *hints: str) -> Iterable[re.Match[str]]:
    """``rx.finditer(text)`` when one of the literal ``hints`` (which every match contains) is in ``text``."""
    return rx.finditer(text) if any(hint in text for hint in hints) else ()


def _command_args(text: str, command: re.Pattern[str], *hints: str) -> Iterable[tuple[int, int]]:
    """(start, end) of the arguments after the first ``command`` of each command line (up to the next line,
    `;`, `&` or `|`): each part of the text is read once, however often the command's name repeats."""
    if not any(hint in text for hint in hints):
        return
    pos = 0
    while (m := command.search(text, pos)) is not None:
        stop = _SEGMENT_END_RE.search(text, m.end())
        end = stop.start() if stop else len(text)
        yield m.end(), end
        pos = end + 1


def _command_flags(
    text: str, command: re.Pattern[str], flag: re.Pattern[str], *hints: str
) -> Iterable[re.Match[str]]:
    """Matches of ``flag`` among the arguments of ``command`` (see _command_args)."""
    for start, end in _command_args(text, command, *hints):
        yield from flag.finditer(text, start, end)


def _header_flags(text: str) -> Iterable[tuple[re.Match[str], str]]:
    """The -H/--header flags of ``text`` (see _HEADER_FLAG_RE) and the name of their value's group. An unquoted
    value that runs into a quote is skipped, and so is every flag inside it (theirs run into the same quote),
    but one right before that quote, which may open a quoted value (`-H X-A:b,-H="X-Token: ..."`)."""
    if "-H" not in text and "--header" not in text:
        return
    pos = 0
    while (m := _HEADER_FLAG_RE.search(text, pos)) is not None:
        if m.group("quote") is None and text[m.end() : m.end() + 1] in ("'", '"'):
            pos = max(m.start() + 1, m.end() - _LONGEST_HEADER_FLAG)
            continue
        yield m, "value" if m.group("quote") else "bare_value"
        pos = m.end()


def _colon_value(m: re.Match[str]) -> tuple[int, int, str]:
    """A _COLON_RE match's value without its trailing blanks: (start, end, value)."""
    value = m.group(2).rstrip(" \t")
    return m.start(2), m.start(2) + len(value), value


def _heredoc_bodies(text: str) -> Iterable[tuple[int, int]]:
    """(start, end) of each heredoc's body (to the end of the text when its word never comes); the first opener
    of a line counts, and the search goes on after the body, so each part of the text is read once."""
    if "<<" not in text:
        return
    pos = 0
    while (m := _HEREDOC_RE.search(text, pos)) is not None:
        newline = text.find("\n", m.end())
        if newline < 0:
            return
        word = re.compile(r"^[ \t]*" + re.escape(m.group(2)) + r"[ \t]*$", re.MULTILINE)
        closing = word.search(text, newline + 1)
        yield newline + 1, closing.start() if closing else len(text)
        if closing is None:
            return
        pos = closing.end()


def _is_code(text: str, start: int, end: int, *, spaced: bool) -> bool:
    """Whether text[start:end], a value bound to a credential-like name, is code that reads the credential
    (`login(token=os.environ["HF_TOKEN"])`, `password=getpass()`, `token = args.token`) rather than a literal. A
    value that is itself a credential-like name is a variable where code names one: after `NAME = ` (`spaced`,
    `self.password = password`) or as a call's keyword argument (`login(token=token)`); `HF_TOKEN=hf_token` in a
    shell or an env-file is the literal text."""
    value = text[start:end].strip()
    closed = value.rstrip("),")  # NAME=VALUE's value runs over the comma or parenthesis after a keyword argument
    if any(_CALL_RE.fullmatch(v) or _SETTING_RE.fullmatch(v) for v in (value, closed)):
        return True
    if _OPEN_CALL_RE.fullmatch(value) and text[end : end + 1] in ("'", '"'):
        return True  # the value stopped at the quote of the call's argument
    if not (_VARIABLE_RE.fullmatch(closed) and is_credential_name(closed)):
        return False
    keyword = (closed != value or text[end : end + 1] == ",") and text[start - 2 : start - 1].islower()
    return spaced or keyword


def _is_pass_number(value: str) -> bool:
    return value.isdigit() and len(value) <= 2


def _args(text: str, start: int, end: int) -> list[re.Match[str]]:
    """The shell words of text[start:end]."""
    return list(_ARG_RE.finditer(text, start, end))


def _scan_positional(text: str) -> Iterable[_Hit]:
    """A password given as an argument of its own: `htpasswd -b FILE USER PASSWORD`, `wandb login KEY`."""
    for start, end in _command_args(text, _HTPASSWD_RE, "htpasswd"):
        words = _args(text, start, end)
        flags = "".join(w.group()[1:] for w in words if w.group().startswith("-") and not w.group().startswith("--"))
        values = [w for i, w in enumerate(words) if not w.group().startswith("-")
                  and not (i and words[i - 1].group() == "-C")]  # -C COST takes a value
        wanted = 2 if "n" in flags else 3
        if "b" in flags and len(values) >= wanted and not is_placeholder(values[-1].group()):
            s, e = _strip_quotes_span(text, values[-1].start(), values[-1].end())
            yield _Hit(s, e, "credential", "htpasswd -b", "flag-literal")
    for start, end in _command_args(text, _WANDB_LOGIN_RE, "wandb"):
        words = _args(text, start, end)
        for i, word in enumerate(words):
            if word.group().startswith("-") or (i and words[i - 1].group() == "--host"):
                continue
            if not is_placeholder(word.group()):
                s, e = _strip_quotes_span(text, word.start(), word.end())
                yield _Hit(s, e, "credential", "wandb login", "flag-literal")
            break


def _stdin_flag_in(text: str, start: int) -> bool:
    """Whether the command from ``start`` to the next line, `;`, `&` or `|` has a --*-stdin credential flag."""
    stop = _SEGMENT_END_RE.search(text, start)
    return _STDIN_FLAG_RE.search(text, start, stop.start() if stop else len(text)) is not None


def _scan_stdin(text: str) -> Iterable[_Hit]:
    """A literal password piped or here-string fed to a --password-stdin (see _STDIN_FLAG_RE); each part of the
    text is read once."""
    if "-stdin" not in text:
        return
    pos = 0
    while (m := _ECHO_RE.search(text, pos)) is not None:
        words: list[re.Match[str]] = []
        pos = m.end()
        while (token := _SHELL_TOKEN_RE.search(text, pos)) is not None and token.group() not in "|;&\n":
            words.append(token)
            pos = token.end()
        if token is None or token.group() != "|" or not _stdin_flag_in(text, token.end()):
            continue
        values = [w for w in words if not w.group().startswith("-")]
        if m.group(1) == "printf" and len(values) > 1:
            values = values[1:]  # the format
        literal = next((w for w in values if not is_placeholder(w.group())), None)
        if literal is not None:
            s, e = _strip_quotes_span(text, literal.start(), literal.end())
            yield _Hit(s, e, "credential", f"{m.group(1)} | --password-stdin", "stdin-literal")
    pos = 0
    while "<<<" in text and (m := _HERESTRING_RE.search(text, pos)) is not None:
        start = max(pos - 1, *(text.rfind(sep, pos, m.start()) for sep in ";&|\n")) + 1
        stop = _SEGMENT_END_RE.search(text, m.end())
        pos = stop.end() if stop else len(text)  # the first here-string of a command counts
        if _stdin_flag_in(text, start) and not is_placeholder(m.group(1)):
            s, e = _strip_quotes_span(text, m.start(1), m.end(1))
            yield _Hit(s, e, "credential", "<<< --password-stdin", "stdin-literal")


def _scan_commands(text: str) -> Iterable[_Hit]:
    """Credentials in common command forms: curl -u/-H, mysql -p, os.environ[...] = and heredoc bodies."""
    for m in _command_flags(text, _HTTP_CLIENT_RE, _USER_FLAG_RE, "curl", "wget", "http", "xh", "ftp"):
        s, e = _strip_quotes_span(text, m.start(1), m.end(1))
        user, sep, password = text[s:e].partition(":")
        if sep and password and not is_placeholder(password):
            yield _Hit(s + len(user) + 1, e, "credential", "-u user:password", "user-password")
    for m, group in _header_flags(text):
        name, value = m.group("name") or m.group("bare_name"), m.group(group)
        if name.lower() not in ("authorization", "proxy-authorization") and is_credential_name(name) and (
            not is_placeholder(value)
        ):
            yield _Hit(m.start(group), m.end(group), "credential", name, "header")
    flag_rules = [
        (_command_flags(text, _MYSQL_RE, _MYSQL_FLAG_RE, "mysql", "mariadb"), "mysql -p"),
        *((_command_flags(text, command, flag, *hints), name)
          for hints, command, flag, name in _COMMAND_PASSWORD_FLAGS),
        (_finditer(_DASH_PASS_RE, text, "pass"), "-*pass"),
    ]
    for matches, name in flag_rules:
        for m in matches:
            group = 1 if m.group(1) is not None else 2
            value = m.group(group)
            if value.startswith("-") or is_placeholder(value) or (name == "-*pass" and _is_pass_number(value)):
                continue  # ffmpeg -pass 2: an encoding pass, not a password
            s, e = _strip_quotes_span(text, m.start(group), m.end(group))
            yield _Hit(s, e, "credential", name, "flag-literal")
    yield from _scan_positional(text)
    yield from _scan_stdin(text)
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
    for offset, end in _heredoc_bodies(text):
        body = text[offset:end]
        for c in _COLON_RE.finditer(body):
            s, e, value = _colon_value(c)
            if is_credential_name(c.group(1)) and not is_placeholder(value):
                s, e = _strip_quotes_span(body, s, e)
                yield _Hit(offset + s, offset + e, "credential", c.group(1), "heredoc-key-value")


def _scan_named(text: str, *, loose: bool, inline: bool = False) -> Iterable[_Hit]:
    for m in _finditer(_FLAG_RE, text, "--"):
        if FLAG_ONLY_RE.fullmatch(m.group(1)) and flag_value_is_credential(m.group(1), m.group(2)):
            s, e = _strip_quotes_span(text, m.start(2), m.end(2))
            yield _Hit(s, e, "credential", m.group(1), "flag-literal")
    yield from _scan_commands(text)
    for m in _finditer(_FROM_LITERAL_RE, text, "--from-literal"):
        if not is_placeholder(m.group(2)):
            s, e = _strip_quotes_span(text, m.start(2), m.end(2))
            yield _Hit(s, e, "credential", "--from-literal", "from-literal")
    for m in _finditer(_ASSIGN_RE, text, "="):
        if _is_quota_count(m):
            continue
        value = m.group(2)
        if is_credential_name(m.group(1).rsplit(".", 1)[-1]) and not (
            is_placeholder(value) or is_placeholder(value.rstrip("),"))  # f(add_to_git_credential=False)
        ):
            s, e = _strip_quotes_span(text, m.start(2), m.end(2))
            if e > s and not _is_code(text, m.start(2), m.end(2), spaced=False):
                yield _Hit(s, e, "credential", m.group(1), "assignment")
    for m in _finditer(_INI_RE, text, "="):
        if not is_credential_name(m.group(1).rsplit(".", 1)[-1]):
            continue
        comment = _INLINE_COMMENT_RE.search(m.group(2))
        value = (m.group(2)[: comment.start()] if comment else m.group(2)).rstrip()
        s, e = m.start(2), m.start(2) + len(value)
        statement = value.split(";", 1)[0].rstrip()  # token = os.environ["HF_TOKEN"]; api = ...
        if value[:1] in "\"'" or is_placeholder(value) or _is_code(text, s, e, spaced=True):
            continue  # quoted values: quoted-assignment
        if statement == value or not _is_code(text, s, s + len(statement), spaced=True):
            yield _Hit(s, e, "credential", m.group(1), "ini-assignment")
    if "username" in text:
        for m in _finditer(_KAGGLE_KEY_RE, text, "key"):
            yield _Hit(m.start(2), m.end(2), "credential", "kaggle.json key", "json-key")
    for m in _finditer(_JSON_KEY_RE, text, '"'):
        if is_credential_name(m.group(2)) and not is_placeholder(m.group(3)):
            yield _Hit(m.start(3), m.end(3), "credential", m.group(2), "json-key")
    for m in _finditer(_DICT_KEY_RE, text, "'"):
        if is_credential_name(m.group(2)) and not is_placeholder(m.group(4)):
            yield _Hit(m.start(4), m.end(4), "credential", m.group(2), "json-key")
    for m in _finditer(_ENV_PAIR_RE, text, "value:"):
        value = m.group(3).rstrip(" \t")
        if is_credential_name(m.group(2)) and not is_placeholder(value):
            s, e = _strip_quotes_span(text, m.start(3), m.start(3) + len(value))
            yield _Hit(s, e, "credential", m.group(2), "env-literal")
    if loose:
        for m in _finditer(_COLON_RE, text, ":"):
            s, e, value = _colon_value(m)
            if is_credential_name(m.group(1)) and not is_placeholder(value):
                s, e = _strip_quotes_span(text, s, e)
                yield _Hit(s, e, "credential", m.group(1), "key-value")
    if inline:
        reach = 0  # where the last value read ends: a value is read once, however many names before it match
        for m in _finditer(_INLINE_COLON_RE, text, ":"):
            if not is_credential_name(m.group(1)):
                continue
            start = m.start(2)
            if start >= reach:
                reach = _VALUE_RUN_RE.match(text, start).end()
            if reach - start <= _CHECKED_VALUE and is_placeholder(text[start:reach]):
                continue
            yield _Hit(start, reach, "credential", m.group(1), "key-value")


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


def _merge(candidates: Iterable[_Hit]) -> list[_Hit]:
    """Hits ordered by position.  Where hits overlap, the first candidate (named rules before format rules
    before base64) names the finding and the span is the union of the spans."""
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


def _hits_in(text: str, *, loose: bool, depth: int, inline: bool, format_only: bool = False) -> list[_Hit]:
    """Every rule over ``text`` at once (a window, or a text without long lines); ``format_only``: the format
    rules alone."""
    if text.isspace():  # blanks alone (a long line blanked for the pass over the rest): no rule finds anything
        return []
    if format_only:
        return _merge(_scan_format(text))
    candidates: list[_Hit] = list(_scan_named(text, loose=loose, inline=inline))
    candidates += _scan_format(text)
    if depth < _BASE64_DEPTH:
        candidates += _scan_base64(text, depth)
    return _merge(candidates)


# --------------------------------------------------------------------------------------------------
# Bounded work: long lines are read in windows
# --------------------------------------------------------------------------------------------------

# A line longer than LONG_LINE is read in windows of WINDOW characters, each sharing OVERLAP characters with the
# next, so the work per character is bounded whatever the line holds (a pattern that would rescan a line from
# each of its words rescans one window at most). A credential shorter than OVERLAP is always inside one window;
# what the limits cost is a construct spread wider than a window (a `curl` and its `-u` 16 KiB apart, a base64
# blob longer than a window) on such a line.
WINDOW = 16384
OVERLAP = 2048
LONG_LINE = WINDOW
_LONG_LINE_RE = _Lazy(f"(?m)^[^\\n]{{{LONG_LINE + 1},}}")
_BLANK_RE = _Lazy(r"\s")


def windows(length: int, text: str = "") -> list[tuple[int, int]]:
    """The (start, end) windows a line of ``length`` characters is read in: each WINDOW long at most, each
    sharing at least OVERLAP characters with the next; a window starts after a blank when the shared part has one
    (so it starts on a word)."""
    out = []
    start = 0
    while True:
        end = min(start + WINDOW, length)
        out.append((start, end))
        if end == length:
            return out
        nxt = end - OVERLAP
        if text:  # back to a word start in the OVERLAP characters before
            blank = None
            for m in _BLANK_RE.finditer(text, nxt - OVERLAP, nxt):
                blank = m
            if blank is not None:
                nxt = blank.end()
        start = nxt


def _hits_bounded(text: str, *, loose: bool, depth: int, inline: bool, format_only: bool = False) -> list[_Hit]:
    if len(text) <= LONG_LINE:
        return _hits_in(text, loose=loose, depth=depth, inline=inline, format_only=format_only)
    long_lines = [(m.start(), m.end()) for m in _LONG_LINE_RE.finditer(text)]
    if not long_lines:
        return _hits_in(text, loose=loose, depth=depth, inline=inline, format_only=format_only)
    parts, pos = [], 0
    for start, end in long_lines:  # the rest of the text at once, each long line blanked (offsets kept)
        parts += [text[pos:start], " " * (end - start)]
        pos = end
    parts.append(text[pos:])
    candidates = _hits_in("".join(parts), loose=loose, depth=depth, inline=inline, format_only=format_only)
    for line_start, line_end in long_lines:
        line = text[line_start:line_end]
        for start, end in windows(len(line), line):
            offset = line_start + start
            candidates += [
                _Hit(h.start + offset, h.end + offset, h.kind, h.name, h.rule)
                for h in _hits_in(line[start:end], loose=loose, depth=depth, inline=inline, format_only=format_only)
            ]
    return _merge(candidates)


# --------------------------------------------------------------------------------------------------
# What a terminal shows: the rules match the text with what it hides taken out
# --------------------------------------------------------------------------------------------------

# Hidden by a terminal, so taken out before matching (a colour code glued to a token would hide it from every
# rule): escape sequences, raw (core/sanitize.py's SEQUENCE_RE) or escaped as JSON, Python or a shell writes
# them (`\u001b[32m`, `\x1b[0m`, `\033[1m`, `\e[0m`); control characters but tabs, line breaks and carriage
# returns; zero-width, direction and other default-ignorable characters (variation selectors, the combining
# grapheme joiner, Hangul fillers, tag characters), the soft hyphen and the byte-order mark; a shell's
# backslash-newline (a line continuation joins the two halves of a word). An escaped line break or tab (`\n`,
# `\t`, `\r` in a JSON log line) reads as a blank, so `...\nHF_TOKEN=...` starts a name. A separator written
# as a URL escape or a JSON/Python character escape (`%3D`, `%22`, `\u0022`, `\x3d`) reads as itself, so
# `token%3Dhf_...` is `token=hf_...`.
_ESCAPED_CSI = r"(?:\\u001[bB]|\\x1[bB]|\\033|\\e)\[[0-?]*[ -/]*[@-~]|\\u009[bB][0-?]*[ -/]*[@-~]"
_INVISIBLE = (
    "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\U000e0000-\U000e0fff"
)
_ENCODED_SEPARATOR = r"%(?:2[02367cCfF]|3[aAbBdDfF])|\\u00(?:2[027]|3[dD])|\\x(?:2[27]|3[dD])"
# A terminal string's introducer and terminator escaped (`\e]8;;`, `\u001b\\`, `\x07` in JSON or YAML text) read
# as a blank, so the address of an escaped OSC 8 link ends where the link's text starts.
_ESCAPED_ESC = r"(?:\\u001[bB]|\\x1[bB]|\\033|\\e)"
_ESCAPED_STRING_EDGE = _ESCAPED_ESC + r"(?:[\]P_^X]|\\\\?)|\\u0007|\\x07|\\007"
_HIDDEN_HINT_RE = _Lazy(f"[{_INVISIBLE}\\\\%]")
_HIDDEN_RE = _Lazy(
    f"({SEQUENCE_RE.pattern}|{_ESCAPED_CSI}|[{_INVISIBLE}]|\\\\\\r?\\n)|(\\\\[nrt]|{_ESCAPED_STRING_EDGE})"
    f"|({_ENCODED_SEPARATOR})"
)
# The payload of a terminal string (OSC, DCS, APC, PM, SOS): a terminal hides it where it stands, but it is a
# link's address (OSC 8), a window title (OSC 0/2) or a clipboard write (OSC 52), so it is read as text too.
_STRING_SEQUENCE_RE = _Lazy(r"(?:\x1b[\]P X^_]|[\x9d\x90\x98\x9e\x9f])([^\x07\x1b\x9c]+)(?:\x07|\x1b\\|\x9c)")


class _Folded(dict[int, str]):
    """A ``str.translate`` table folding a character that reads as an ASCII one to it: full-width and other
    compatibility forms (NFKC: `＝` is `=`, `Ｔ` is `T`) and the Cyrillic and Greek letters drawn like Latin ones
    (`HF_TОKEN` with a Cyrillic О). One character for one, so offsets are kept."""

    _LOOKALIKES: ClassVar[dict[str, str]] = dict(zip(
        "\u0410\u0412\u0415\u0405\u0406\u0408\u041a\u041c\u041d\u041e\u0420\u0421\u0422\u0425\u0423\u0430"
        "\u0435\u0456\u0458\u043e\u0440\u0441\u0443\u0445\u0455\u0501\u04bb\u04cf\u051b\u051c\u051d\u0391"
        "\u0392\u0395\u0396\u0397\u0399\u039a\u039c\u039d\u039f\u03a1\u03a4\u03a5\u03a7\u03b1\u03b9\u03bf"
        "\u03ba\u03bd\u03c1\u03c4\u03c5\u03c7",
        "ABESIJKMHOPCTXYaeijopcyxsdhlqWwABEZHIKMNOPTYXaiokvptux",
        strict=True,
    ))

    def __missing__(self, code: int) -> str:
        ch = chr(code)
        folded = self._LOOKALIKES.get(ch)
        if folded is None:
            import unicodedata

            compat = unicodedata.normalize("NFKC", ch)
            folded = compat if len(compat) == 1 and compat.isascii() and compat.isprintable() else ch
        if len(self) < 8192:  # the characters a text holds are few; a text of every code point is not kept
            self[code] = folded
        return folded


_FOLDED = _Folded()


def _hidden(text: str) -> Iterable[re.Match[str]]:
    """``_HIDDEN_RE.finditer(text)``, tried only where a character one of its matches starts with stands: one
    pass of _HIDDEN_HINT_RE's class finds those, where the alternation would be tried at every character."""
    pos = 0
    while (hint := _HIDDEN_HINT_RE.search(text, pos)) is not None:
        m = _HIDDEN_RE.match(text, hint.start())
        if m is None:
            pos = hint.start() + 1
            continue
        yield m
        pos = m.end()


class _View:
    """``text`` as matched: pieces taken out or replaced, and the way back to the text's offsets."""

    __slots__ = ("_pieces", "_view_starts", "text")

    def __init__(self, original: str) -> None:
        out: list[str] = []
        self._view_starts: list[int] = []  # per piece: where it starts in the view
        self._pieces: list[tuple[int, int, bool]] = []  # (start, end in the original, copied as is)
        pos = view = 0
        for m in _hidden(original):
            if m.start() > pos:
                self._add(pos, m.start(), view, True)
                out.append(original[pos : m.start()])
                view += m.start() - pos
            if m.group(2) or m.group(3):  # an escaped line break (one blank) or separator (itself)
                self._add(m.start(), m.end(), view, False)
                out.append(" " if m.group(2) else _decode_separator(m.group(3)))
                view += 1
            pos = m.end()
        if pos < len(original):
            self._add(pos, len(original), view, True)
            out.append(original[pos:])
        text = "".join(out)
        self.text = text if text.isascii() else text.translate(_FOLDED)

    def _add(self, start: int, end: int, view: int, copied: bool) -> None:
        self._view_starts.append(view)
        self._pieces.append((start, end, copied))

    def start(self, view: int) -> int:
        i = bisect.bisect_right(self._view_starts, view) - 1
        start, _, copied = self._pieces[i]
        return start + (view - self._view_starts[i]) if copied else start

    def end(self, view: int) -> int:
        i = bisect.bisect_right(self._view_starts, view - 1) - 1
        start, end, copied = self._pieces[i]
        return start + (view - self._view_starts[i]) if copied else end


def _decode_separator(escaped: str) -> str:
    """The character a ``%XX``, ``\\u00XX`` or ``\\xXX`` escape stands for."""
    return chr(int(escaped[-2:], 16))


# A token whose line breaks before its end (a log wrapped at a terminal's width, a folded YAML scalar): the line
# ends in a run of token characters that starts with a token prefix (glued to a word by '_' or '-' too) at most
# _SPLIT_TAIL characters before the break, and the next line goes on with token characters. Each run is read once
# from its first prefix, whatever prefixes are glued in it (see _split_breaks).
_SPLIT_PREFIX = (
    r"(?<![A-Za-z0-9])(?:hf_|api_org_|gh[pousr]_|github_pat_|nvapi-|sk-|gl[a-z]{1,5}-|xox[abposr]-|AKIA|ASIA|eyJ"
    r"|dckr_|hv[sb]\.|ATATT3|AIza|npm_|pypi-)"
)
_SPLIT_TAIL = 256
_SPLIT_PREFIX_RE = _Lazy(_SPLIT_PREFIX)
_SPLIT_TOKEN_START_RE = _Lazy(_SPLIT_PREFIX + f"[A-Za-z0-9_.-]{{0,{_SPLIT_TAIL}}}")  # matched whole, up to a break
_SPLIT_REACH = _SPLIT_TAIL + len("github_pat_")  # from the start of the longest prefix
_TOKEN_RUN_RE = _Lazy(r"[A-Za-z0-9_.-]*")
_SPLIT_TOKEN_RE = _Lazy(r"(\r?\n[ \t]*)(?=[A-Za-z0-9_-])")  # matched where a run ends


def _split_breaks(text: str) -> Iterable[tuple[int, int]]:
    """The (start, end) of each line break a token may be split at, with the blanks that indent the next line:
    a run of token characters holding a prefix ends there, at most _SPLIT_TAIL characters after the prefix. A
    prefix inside a run already read shares its end; only one within _SPLIT_REACH of the end is matched whole,
    and one that matches decides the run."""
    run_end = found = -1
    for prefix in _SPLIT_PREFIX_RE.finditer(text):
        if prefix.start() >= run_end:
            run_end = _TOKEN_RUN_RE.match(text, prefix.end()).end()
        if found == run_end or run_end - prefix.start() > _SPLIT_REACH:
            continue
        if _SPLIT_TOKEN_START_RE.fullmatch(text, prefix.start(), run_end):
            found = run_end  # the run's end is a break or not, whichever prefix reaches it
            if (cut := _SPLIT_TOKEN_RE.match(text, run_end)) is not None:
                yield cut.span(1)


def _split_token_hits(text: str, *, depth: int) -> list[_Hit]:
    """Format hits of tokens broken over two lines: the format rules run once more over the text with those line
    breaks taken out, and a hit that spans one is kept unless what stands before the break is a whole token of a
    format already (then the next line's first word is not its continuation)."""
    if "\n" not in text:
        return []
    parts: list[str] = []
    cuts: list[int] = []  # where a line break was taken out, as an offset in the joined text
    removed: list[int] = [0]  # characters taken out up to and including each cut
    pos = 0
    for start, end in _split_breaks(text):
        parts.append(text[pos:start])
        cuts.append(start - removed[-1])
        removed.append(removed[-1] + end - start)
        pos = end
    if not cuts:
        return []
    parts.append(text[pos:])
    joined = "".join(parts)
    out = []
    for hit in _hits_bounded(joined, loose=False, depth=depth, inline=False, format_only=True):
        first = bisect.bisect_right(cuts, hit.start)  # cuts at or before the start
        if first < len(cuts) and cuts[first] < hit.end and not _is_whole_token(joined[hit.start : cuts[first]]):
            last = bisect.bisect_left(cuts, hit.end)  # cuts before the end
            out.append(_Hit(hit.start + removed[first], hit.end + removed[last], hit.kind, hit.name, hit.rule))
    return out


def _is_whole_token(text: str) -> bool:
    return any(rx.fullmatch(text) for _, rx in _TOKEN_RULES)


def _payload_hits(text: str, *, loose: bool, depth: int, inline: bool) -> list[_Hit]:
    """Hits inside the payloads of terminal strings (see _STRING_SEQUENCE_RE), at their offsets in ``text``."""
    out = []
    for m in _finditer(_STRING_SEQUENCE_RE, text, "\x1b", "\x9d", "\x90", "\x98", "\x9e", "\x9f"):
        offset = m.start(1)
        out += [
            _Hit(h.start + offset, h.end + offset, h.kind, h.name, h.rule)
            for h in _hits(m.group(1), loose=loose, depth=depth, inline=inline)
        ]
    return out


def _hits(text: str, *, loose: bool, depth: int = 0, inline: bool = False) -> list[_Hit]:
    """All hits in ``text`` ordered by position, matched against what a terminal shows of it (see _View), in
    bounded work per character (see WINDOW); the payloads of terminal strings and tokens broken over two lines
    are read too."""
    if text.isascii() and not _HIDDEN_HINT_RE.search(text):
        return _with_split_tokens(text, _hits_bounded(text, loose=loose, depth=depth, inline=inline), depth)
    view = _View(text)
    if view.text == text:
        return _with_split_tokens(text, _hits_bounded(text, loose=loose, depth=depth, inline=inline), depth)
    found = _with_split_tokens(view.text, _hits_bounded(view.text, loose=loose, depth=depth, inline=inline), depth)
    return _merge(
        [_Hit(view.start(h.start), view.end(h.end), h.kind, h.name, h.rule) for h in found]
        + _payload_hits(text, loose=loose, depth=depth, inline=inline)
    )


def _with_split_tokens(text: str, hits: list[_Hit], depth: int) -> list[_Hit]:
    """``hits`` (merged) and the tokens broken over two lines (see _split_token_hits)."""
    split = _split_token_hits(text, depth=depth)
    return _merge(hits + split) if split else hits


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


def find_split_tokens(text: str, *, source: str = "") -> list[Finding]:
    """Tokens broken over two lines of ``text`` (a wrapped log line, a folded YAML scalar): what a manifest's
    parser joins with a blank, read in the text as written."""
    view = _View(text)
    starts = _line_starts(text)
    findings = []
    for hit in _split_token_hits(view.text, depth=0):
        line, col = _line_col(starts, view.start(hit.start))
        findings.append(Finding(line, hit.kind, f"col {col}", hit.rule, source))
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


def redact_log_line(line: str) -> str:
    """A line of a job's log with every credential replaced, by the cluster-text rules (``name: value``
    anywhere in the line too): the same for a line read live (`logs`, `logs -f`) and for the tail a record
    captured, so a token hidden in one is hidden in the other. Matched through colour codes and other
    sequences; bounded work per character, whatever the line's length (see WINDOW)."""
    return _redact(line, inline=True)


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
