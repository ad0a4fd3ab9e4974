"""Validation of the names, paths and URIs that end up in Kubernetes manifests.

Every function takes the value and the name of the field it came from, returns the value unchanged
when it is acceptable, and raises UsageError naming the field and the fix otherwise. A rejected value is
never quoted (a credential pasted where a name belongs would land on the terminal and in logs): the message
says where it breaks the rule, as a character position and the kind of character (`where_bad`).
"""

from __future__ import annotations

import posixpath
import re

from kubectl_tao.core import imageref
from kubectl_tao.core.errors import UsageError

# RFC 1123 label as Kubernetes checks it (IsDNS1123Label), and the subdomain built from such labels.
_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
DNS_LABEL_RE = re.compile(_DNS_LABEL)
DNS_SUBDOMAIN_RE = re.compile(rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})*")
# RFC 1035 label (Service names): must start with a letter.
DNS1035_LABEL_RE = re.compile(r"[a-z](?:[-a-z0-9]*[a-z0-9])?")
LABEL_VALUE_RE = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
QUALIFIED_NAME_RE = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?")
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
S3_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")

DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253
# Indexed Job pods are named and host-named `<job>-<index>`, and the Job controller derives label
# values from the name, so a Job name keeps 11 characters of headroom below the 63 of a label.
JOB_NAME_MAX = 52
SECRET_PREFIX = "tao-creds-"  # noqa: S105 - a name prefix, not a credential
_DIGEST_LEN = 10


def _has_control(value: str) -> bool:
    return any(ord(ch) < 32 or ord(ch) == 127 for ch in value)


_SHOWN_PUNCTUATION = frozenset("!#$%&()*+,-./:;<=>?@[]^_{|}~'\"`")


def char_kind(ch: str) -> str:
    """What kind of character CH is, in words, without showing a letter or a digit of it."""
    if ch == " ":
        return "a space"
    if ord(ch) < 32 or 0x7F <= ord(ch) <= 0x9F:
        return "a control character"
    if ch.isspace():
        return "whitespace"
    if not ch.isascii():
        return f"U+{ord(ch):04X}, not plain ASCII"
    if ch.isupper():
        return "an upper-case letter"
    if ch in _SHOWN_PUNCTUATION or ch == "\\":
        return repr(ch)
    if ch.isdigit():
        return "a digit"
    return "a letter" if ch.isalpha() else "a symbol"


def where_bad(text: str, allowed: str) -> str:
    """`character N (its kind)` for the first character of TEXT outside ALLOWED (a str of characters), or
    the empty string: where a rejected value breaks the rule, never the value."""
    for position, ch in enumerate(text, start=1):
        if ch not in allowed:
            return f"character {position} ({char_kind(ch)})"
    return ""


_LOWER_DIGITS = "abcdefghijklmnopqrstuvwxyz0123456789"
_LETTERS_DIGITS = _LOWER_DIGITS + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _why(text: str, allowed: str, *, most: int, ends: str = _LOWER_DIGITS) -> str:
    """Why TEXT is not a name made of ALLOWED, at most MOST long, with a character of ENDS at each end:
    `: character 4 (an upper-case letter)`, `: it is 70 characters`, `: it ends with '-'`."""
    if len(text) > most:
        return f": it is {len(text)} characters"
    bad = where_bad(text, allowed)
    if bad:
        return f": {bad}"
    if text and text[0] not in ends:
        return f": it starts with {char_kind(text[0])}"
    if text and text[-1] not in ends:
        return f": it ends with {char_kind(text[-1])}"
    return ""


def require_string(value: object, field: str, *, allow_empty: bool = False) -> str:
    """A str without NUL; non-empty unless allow_empty."""
    if not isinstance(value, str):
        raise UsageError(f"{field} must be a string")
    if "\x00" in value:
        raise UsageError(f"{field} must not contain a NUL character")
    if not value and not allow_empty:
        raise UsageError(f"{field} must not be empty")
    return value


def validate_dns_label(value: object, field: str) -> str:
    """An RFC 1123 label: lower-case letters, digits and '-', alphanumeric at both ends, <= 63."""
    text = require_string(value, field)
    if len(text) > DNS_LABEL_MAX or DNS_LABEL_RE.fullmatch(text) is None:
        raise UsageError(
            f"{field} is not a valid DNS label{_why(text, _LOWER_DIGITS + '-', most=DNS_LABEL_MAX)}: use at most "
            "63 lower-case letters, digits and '-', starting and ending with a letter or digit"
        )
    return text


def validate_dns_subdomain(value: object, field: str) -> str:
    """An RFC 1123 subdomain: dot-separated labels, <= 253 characters (most object names)."""
    text = require_string(value, field)
    if len(text) > DNS_SUBDOMAIN_MAX or DNS_SUBDOMAIN_RE.fullmatch(text) is None:
        why = _why(text, _LOWER_DIGITS + "-.", most=DNS_SUBDOMAIN_MAX) or ": a '.' is next to '.' or '-'"
        raise UsageError(
            f"{field} is not a valid Kubernetes name{why}: use lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit, at most 253 characters"
        )
    return text


def validate_service_name(value: object, field: str) -> str:
    """An RFC 1035 label, which Service names must be (a letter first)."""
    text = validate_dns_label(value, field)
    if DNS1035_LABEL_RE.fullmatch(text) is None:
        raise UsageError(
            f"{field} must start with a letter: the headless Service of a multi-node job "
            "is named after the job, and Service names are RFC 1035 labels"
        )
    return text


def validate_job_name(value: object, field: str = "job name") -> str:
    """A Job name: a DNS label of at most 52 characters (room for `-<index>` pod hostnames)."""
    text = validate_dns_label(value, field)
    if len(text) > JOB_NAME_MAX:
        raise UsageError(
            f"{field} is {len(text)} characters; use at most {JOB_NAME_MAX} so pod "
            "hostnames '<job>-<index>' stay valid DNS labels"
        )
    return text


def is_label_value(value: str) -> bool:
    return len(value) <= DNS_LABEL_MAX and LABEL_VALUE_RE.fullmatch(value) is not None


def validate_label_value(value: object, field: str) -> str:
    text = require_string(value, field, allow_empty=True)
    if not is_label_value(text):
        why = _why(text, _LETTERS_DIGITS + "-_.", most=DNS_LABEL_MAX, ends=_LETTERS_DIGITS)
        raise UsageError(
            f"{field} is not a valid label value{why}: use at most 63 letters, digits, '-', '_' "
            "and '.', starting and ending with a letter or digit"
        )
    return text


def validate_qualified_name(value: object, field: str) -> str:
    """A label or annotation key: `[prefix/]name`, prefix a DNS subdomain, name <= 63."""
    text = require_string(value, field)
    prefix, slash, name = text.rpartition("/")
    if slash and (not prefix or len(prefix) > DNS_SUBDOMAIN_MAX or not DNS_SUBDOMAIN_RE.fullmatch(prefix)):
        why = _why(prefix, _LOWER_DIGITS + "-.", most=DNS_SUBDOMAIN_MAX) if prefix else ": it is empty"
        raise UsageError(f"{field} has an invalid prefix{why}: the part before '/' must be a DNS subdomain")
    if len(name) > DNS_LABEL_MAX or QUALIFIED_NAME_RE.fullmatch(name) is None:
        where = f" after the '/' (character {len(prefix) + 2} on)" if slash else ""
        why = _why(name, _LETTERS_DIGITS + "-_.", most=DNS_LABEL_MAX, ends=_LETTERS_DIGITS) or ": it is empty"
        raise UsageError(
            f"{field} is not a valid key{why}{where}: the name part must be 1-63 letters, digits, '-', '_' "
            "and '.', starting and ending with a letter or digit"
        )
    return text


def _digest(text: str) -> str:
    """The first hex digits of the SHA-256 of `text` (hashlib is imported here: most runs never need it)."""
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:_DIGEST_LEN]


def kubernetes_job_name(record_id: object) -> str:
    """The Kubernetes Job name for a job-record id.

    An id that is already a DNS label of at most 52 characters is used as it is. Anything else
    (upper case, '_', '.', too long) becomes a lower-case slug of at most 41 characters plus '-' and
    the first 10 hex digits of the id's SHA-256, so two different ids never share a name.
    """
    text = require_string(record_id, "job id")
    if len(text) <= JOB_NAME_MAX and DNS_LABEL_RE.fullmatch(text):
        return text
    digest = _digest(text)
    slug = "-".join(part for part in re.split(r"[^a-z0-9]+", text.lower()) if part)
    room = JOB_NAME_MAX - _DIGEST_LEN - 1
    slug = slug[:room].rstrip("-") or "tao-job"
    return f"{slug}-{digest}"


def secret_name_for(job_name: str) -> str:
    """The per-job credential Secret name, `tao-creds-<job>`, shortened with a digest if needed."""
    name = validate_dns_label(job_name, "job name")
    candidate = SECRET_PREFIX + name
    if len(candidate) <= DNS_LABEL_MAX:
        return candidate
    digest = _digest(name)
    room = DNS_LABEL_MAX - len(SECRET_PREFIX) - _DIGEST_LEN - 1
    return f"{SECRET_PREFIX}{name[:room].rstrip('-')}-{digest}"


def validate_abs_path(value: object, field: str) -> str:
    """A normalized absolute POSIX path other than '/': no '..', '.', '//', backslash or control chars."""
    text = require_string(value, field)
    if _has_control(text) or "\\" in text:
        raise UsageError(f"{field} must not contain control characters or backslashes ({_first_control(text)})")
    if not text.startswith("/") or text == "/":
        raise UsageError(f"{field} must be an absolute path below '/' (for example /workspace/results)")
    if "//" in text or posixpath.normpath(text) != text:
        raise UsageError(f"{field} must be a normalized path: no '//', '.', '..' segments or trailing '/'")
    return text


def validate_sub_path(value: object, field: str) -> str:
    """A normalized relative POSIX path (a volume subPath): no leading '/', no '..' or '.'."""
    text = require_string(value, field)
    if _has_control(text) or "\\" in text:
        raise UsageError(f"{field} must not contain control characters or backslashes ({_first_control(text)})")
    if text.startswith("/"):
        raise UsageError(f"{field} must be a relative path inside the volume, without a leading '/'")
    if text in {".", ".."} or "//" in text or posixpath.normpath(text) != text or text.startswith("../"):
        raise UsageError(f"{field} must be a normalized relative path without '.', '..' or '//'")
    return text


def _first_control(text: str) -> str:
    """Where the first control character or backslash of TEXT is."""
    for position, ch in enumerate(text, start=1):
        if ord(ch) < 32 or ord(ch) == 127 or ch == "\\":
            return f"character {position} is {char_kind(ch)}"
    return "none found"


def is_under(path: str, root: str) -> bool:
    """Whether normalized absolute `path` equals `root` or lies below it."""
    return path == root or path.startswith(root.rstrip("/") + "/")


# Where the kubelet puts the pod's own API credentials (the service-account token, and the projected
# tokens of IRSA / workload identity); a volume mounted on, above or inside them replaces them.
TOKEN_DIRS = ("/var/run/secrets", "/run/secrets")


def covers_token_dir(path: str) -> bool:
    """Whether a volume mounted at normalized absolute `path` would cover or replace a token directory."""
    return any(is_under(path, root) or is_under(root, path) for root in TOKEN_DIRS)


def require_ascii_name(value: object, field: str, *, example: str) -> str:
    """Plain ASCII only: no look-alike letters or direction controls that would make an id
    or a name read like another one. The message shows the first offending character as a code point."""
    text = require_string(value, field)
    bad = next((i for i, ch in enumerate(text, 1) if not ch.isascii()), None)
    if bad is not None:
        raise UsageError(
            f"{field}: character {bad} (U+{ord(text[bad - 1]):04X}) is not plain ASCII (look-alike letters and "
            f"direction controls make ids that read like another job's); type the name in ASCII, e.g. {example}"
        )
    return text


def validate_env_name(value: object, field: str) -> str:
    """An environment variable name usable from a POSIX shell: [A-Za-z_][A-Za-z0-9_]*.

    A rejected name is never quoted (it may be a value pasted where the name belongs): FIELD should say which
    argument it was (``--env #2``), and the message says which character breaks the rule."""
    text = require_string(value, field)
    if ENV_NAME_RE.fullmatch(text) is None:
        if "=" in text:
            raise UsageError(
                f"{field} is not a valid environment variable name (it holds '=' at character "
                f"{text.index('=') + 1}; not shown): give the NAME only; the value is read from your environment, "
                "never from the command line"
            )
        why = f"it starts with {char_kind(text[0])}" if text[0].isdigit() else where_bad(text, _ENV_CHARS)
        raise UsageError(
            f"{field} is not a valid environment variable name ({why}; not shown): use letters, digits and "
            "'_', not starting with a digit"
        )
    return text


_ENV_CHARS = _LETTERS_DIGITS + "_"


_CONVENTIONAL_ENV_NAME_RE = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")


def shown_env_name(name: str, flag: str, position: int | None = None) -> str:
    """``--env #2 (HF_TOKEN)`` in an error: the flag and its position, and the name when it reads as a variable's
    (a credential-like name, or UPPER_CASE words joined by '_'); anything else may be a pasted value."""
    from kubectl_tao.core.redact import is_credential_name, safe_to_show

    where = f"{flag} #{position}" if position is not None else flag
    if safe_to_show(name) and (is_credential_name(name) or (_CONVENTIONAL_ENV_NAME_RE.fullmatch(name) and "_" in name)):
        return f"{where} ({name})"
    return f"{where} (name not shown: it does not look like a variable name and may be a value)"


def split_s3_uri(value: object, field: str) -> tuple[str, str]:
    """Validate `s3://bucket[/key]` and return (bucket, key)."""
    text = require_string(value, field)
    if not text.startswith("s3://"):
        raise UsageError(f"{field} must be an S3 URI of the form s3://bucket/prefix")
    if _has_control(text) or any(ch.isspace() for ch in text) or "\\" in text:
        bad = next(i for i, ch in enumerate(text, 1) if ord(ch) < 32 or ord(ch) == 127 or ch.isspace() or ch == "\\")
        raise UsageError(
            f"{field} must not contain whitespace, control characters or backslashes (character {bad} is "
            f"{char_kind(text[bad - 1])})"
        )
    bucket, _, key = text[len("s3://") :].partition("/")
    if S3_BUCKET_RE.fullmatch(bucket) is None or ".." in bucket:
        why = _why(bucket, _LOWER_DIGITS + ".-", most=63) or f": it is {len(bucket)} characters or holds '..'"
        raise UsageError(
            f"{field} has an invalid bucket name{why}: use 3-63 lower-case letters, digits, '.' and '-'"
        )
    segments = key.rstrip("/").split("/") if key.rstrip("/") else []
    if "//" in key or any(segment in {".", ".."} for segment in segments):
        raise UsageError(f"{field} must not contain empty, '.' or '..' path segments")
    return bucket, key


def validate_s3_uri(value: object, field: str) -> str:
    split_s3_uri(value, field)
    return str(value)


def s3_input_name(uri: str, field: str = "s3 input") -> str:
    """The name an S3 input gets under the inputs directory: its last key segment, or the bucket."""
    bucket, key = split_s3_uri(uri, field)
    trimmed = key.rstrip("/")
    return trimmed.rsplit("/", 1)[-1] if trimmed else bucket


def validate_image(value: object, field: str = "image") -> str:
    """A container image reference: non-empty, no whitespace or control characters, and as the container
    runtime parses it (core/imageref.py)."""
    text = require_string(value, field)
    if _has_control(text) or any(ch.isspace() for ch in text):
        bad = next(i for i, ch in enumerate(text, 1) if ord(ch) < 32 or ord(ch) == 127 or ch.isspace())
        raise UsageError(
            f"{field} must not contain whitespace or control characters (character {bad} is "
            f"{char_kind(text[bad - 1])})"
        )
    if len(text) > 4096 or text.startswith(("-", "/", ":", "@")):
        raise UsageError(f"{field} is not an image reference such as nvcr.io/nvidia/tao/tao-toolkit:TAG")
    imageref.check(text, field)  # the runtime's grammar (a missing tag is the caller's warning to give)
    return text
