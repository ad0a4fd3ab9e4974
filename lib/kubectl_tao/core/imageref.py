"""Container image references, read as the container runtime reads them (the distribution/reference grammar
that containerd, CRI-O and the kubelet share): an optional registry host[:port], lower-case path components,
an optional tag and an optional digest. A reference without a tag or digest is pulled as `:latest`.

The grammar is checked piece by piece (each piece a pattern without nested repetition), not as one pattern."""

from __future__ import annotations

import re

from kubectl_tao.core.errors import UsageError

_PATH_RUN_RE = re.compile(r"(?<![a-z0-9])[a-z0-9]+")  # a path component: such runs joined by one separator each
_SEPARATOR_RE = re.compile(r"[._]|__|-+")
_DOMAIN_PART_RE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?")
_IPV6_RE = re.compile(r"\[[a-fA-F0-9:]+\]")
_PORT_RE = re.compile(r"[0-9]+")
_TAG_RE = re.compile(r"[\w][\w.-]{0,127}", re.ASCII)
_DIGEST_WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_DIGEST_JOIN_RE = re.compile(r"[-_+.]")
_HEX_RE = re.compile(r"[0-9a-fA-F]{32,}")
NAME_MAX = 255  # the repository name's length limit (registry host included)
EXAMPLE = "nvcr.io/nvidia/pytorch:25.01-py3"


def _path_component(text: str) -> bool:
    """`[a-z0-9]+` runs joined by `.`, `_`, `__` or dashes, starting and ending with a run."""
    separators = _PATH_RUN_RE.split(text)
    if len(separators) < 2 or separators[0] or separators[-1]:
        return False
    return all(_SEPARATOR_RE.fullmatch(separator) for separator in separators[1:-1])


def _domain(text: str) -> bool:
    """host[:port]: DNS-like labels (any case) or a bracketed IPv6 address."""
    host, colon, port = text.rpartition(":") if not text.endswith("]") else (text, "", "")
    if not colon:
        host = text
    elif not _PORT_RE.fullmatch(port):
        return False
    if host.startswith("["):
        return _IPV6_RE.fullmatch(host) is not None
    return all(_DOMAIN_PART_RE.fullmatch(label) for label in host.split("."))


def _name(text: str) -> bool:
    """[domain/]component[/component...]: the first part is a registry only when the rest is a path."""
    parts = text.split("/")
    if all(_path_component(part) for part in parts):
        return True
    return len(parts) > 1 and _domain(parts[0]) and all(_path_component(part) for part in parts[1:])


def _digest(text: str) -> bool:
    algorithm, colon, encoded = text.partition(":")
    if not colon or not _HEX_RE.fullmatch(encoded):
        return False
    words = _DIGEST_JOIN_RE.split(algorithm)
    return all(_DIGEST_WORD_RE.fullmatch(word) for word in words)


def split(image: str) -> tuple[str, str | None, str | None] | None:
    """(name, tag, digest) of IMAGE, or None when the runtime would refuse it."""
    rest, at, digest = image.partition("@")
    if at and not _digest(digest):
        return None
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    name, tag = (rest[:colon], rest[colon + 1:]) if colon > slash else (rest, None)
    if tag is not None and not _TAG_RE.fullmatch(tag):
        return None
    if not _name(name):
        return None
    return name, tag, digest if at else None


def check(image: str, flag: str = "--image") -> str | None:
    """IMAGE checked; UsageError naming FLAG when the runtime would refuse it. Returns a warning when it has
    neither tag nor digest (the runtime pulls `:latest`, which can change under a running job), else None.
    The messages name a position, never the value (a credential pasted into the flag stays out of them)."""
    parts = split(image)
    if parts is None:
        if split(image.lower()) is not None:
            at = _first_upper_in_path(image)
            raise UsageError(
                f"{flag}: the repository path must be lower-case (character {at} is an upper-case letter), as "
                "the container runtime reads it; write the path in lower case (the registry host and the tag "
                "may keep theirs)"
            )
        raise UsageError(
            f"{flag} is not an image reference the container runtime reads: use [REGISTRY[:PORT]/]PATH[:TAG]"
            f"[@DIGEST] with a lower-case PATH, e.g. {EXAMPLE}"
        )
    name, tag, digest = parts
    if len(name) > NAME_MAX:
        raise UsageError(f"{flag}: the repository name is longer than {NAME_MAX} characters; use a shorter one")
    if tag is None and digest is None:
        return (
            f"{flag} has no tag: the container runtime pulls it as :latest, which can change between ranks and "
            "restarts; pin a tag or a digest"
        )
    return None


def _first_upper_in_path(image: str) -> int:
    """1-based position of the first upper-case letter of IMAGE's path (its registry host and tag left out)."""
    rest = image.partition("@")[0]
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    name = rest[:colon] if colon > slash else rest
    first, sep, _ = name.partition("/")
    start = len(first) + 1 if sep and ("." in first or ":" in first or first == "localhost") else 0
    return next((i + 1 for i in range(start, len(name)) if name[i].isupper()), start + 1)
