"""The fields a record is opened with, checked and normalized (the format is schemas/job-record.schema.json):
platform, image, network_arch, action, storage tier, results directory, upload excludes, parent and retry ids;
and the backend_ref a mark adds."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from typing import Any

from kubectl_tao.core import contract
from kubectl_tao.core.errors import UsageError
from kubectl_tao.core.names import (
    DNS_LABEL_MAX,
    DNS_LABEL_RE,
    DNS_SUBDOMAIN_MAX,
    DNS_SUBDOMAIN_RE,
    require_ascii_name,
)
from kubectl_tao.store.recordids import validate_id

SCHEMA_VERSION = 1
STORAGE_TIERS = ("A", "B", "C")
PLATFORM_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


def text_field(value: object, flag: str, *, max_len: int = 256, spaces: bool = True) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{flag} is required and must not be empty")
    if not value.isprintable() or (not spaces and any(ch.isspace() for ch in value)):
        raise UsageError(f"{flag} must be one printable word{'' if spaces else ' without spaces'}")
    if len(value) > max_len:
        raise UsageError(f"{flag} is longer than {max_len} characters; shorten it")
    return value


def _id_word(value: object, flag: str, *, example: str) -> str:
    """network_arch / action: they make the record id, so no look-alike or direction-control characters."""
    if isinstance(value, str) and value:
        require_ascii_name(value, flag, example=example)
    return text_field(value, flag, max_len=128)


def normalize_platform(platform: str) -> str:
    """Lower case, ``_``/space/``.`` to ``-``; must then match ``^[a-z0-9][a-z0-9-]{0,31}$``."""
    text_field(platform, "--platform", max_len=64)
    value = re.sub(r"[\s_.]+", "-", platform.strip().lower())
    if not PLATFORM_RE.fullmatch(value):
        raise UsageError(
            f"--platform {platform!r} is not a platform name: use 1-32 lower-case letters, digits and '-', "
            "starting with a letter or digit (e.g. kubernetes)"
        )
    return value


def normalize_results_dir(value: str, flag: str = "--results-dir") -> str:
    """A normalized absolute POSIX path or ``s3://bucket[/prefix]`` (no ``..``, no trailing ``/``)."""
    text_field(value, flag, max_len=4096, spaces=False)
    if value.startswith("s3://"):
        bucket, _, prefix = value[5:].partition("/")
        if not _BUCKET_RE.fullmatch(bucket):
            raise UsageError(
                f"{flag}: {bucket!r} is not an S3 bucket name (3-63 lower-case letters, digits, '.', '-'); "
                "use s3://bucket/prefix"
            )
        parts = [p for p in prefix.split("/") if p]
        if any(p in (".", "..") for p in parts):
            raise UsageError(f"{flag}: '.' and '..' are not allowed in an S3 prefix")
        return "s3://" + bucket + "".join(f"/{p}" for p in parts)
    if "://" in value:
        raise UsageError(f"{flag}: only absolute paths and s3:// URLs are supported")
    if not value.startswith("/"):
        raise UsageError(
            f"{flag} must be an absolute path (a mounted volume path such as /results) or s3://bucket/prefix"
        )
    if ".." in value.split("/"):
        raise UsageError(f"{flag} must not contain '..'; give the normalized absolute path")
    normalized = "/" + posixpath.normpath(value).lstrip("/")
    if normalized == "/":
        raise UsageError(f"{flag} must not be / itself; give a directory for results")
    return normalized


def is_namespace(value: object) -> bool:
    """A DNS-1123 label (at most 63 characters), as Kubernetes requires of a namespace."""
    return isinstance(value, str) and len(value) <= DNS_LABEL_MAX and DNS_LABEL_RE.fullmatch(value) is not None


def is_object_name(value: object) -> bool:
    """A DNS-1123 subdomain (at most 253 characters), as Kubernetes requires of a Job's name."""
    return isinstance(value, str) and len(value) <= DNS_SUBDOMAIN_MAX and DNS_SUBDOMAIN_RE.fullmatch(value) is not None


def is_kubernetes_ref(ref: object) -> bool:
    """NAMESPACE/NAME: a DNS-1123 label, '/', a DNS-1123 subdomain."""
    if not isinstance(ref, str):
        return False
    namespace, slash, name = ref.partition("/")
    return bool(slash) and is_namespace(namespace) and is_object_name(name)


def validate_backend_ref(ref: str, platform: str) -> str:
    text_field(ref, "--backend-ref", max_len=512, spaces=False)
    if platform in contract.KUBERNETES_PLATFORMS and not is_kubernetes_ref(ref):
        raise UsageError(f"--backend-ref {ref!r} must be <namespace>/<job name> (lower-case DNS names) on Kubernetes")
    return ref


def open_fields(
    platform: str,
    image: str,
    network_arch: str,
    action: str,
    storage_tier: str,
    results_dir: str | None,
    results_root: str | None,
    upload_excludes: Iterable[str],
    parent_job: str | None,
    retry_of: str | None,
) -> dict[str, Any]:
    """The checked, normalized fields of `open`; UsageError naming the flag."""
    if (results_dir is None) == (results_root is None):
        raise UsageError("give exactly one of --results-dir DIR or --results-root ROOT")
    if storage_tier not in STORAGE_TIERS:
        raise UsageError(f"--storage-tier must be one of A, B, C (got {storage_tier!r})")
    excludes = []
    for pattern in upload_excludes:
        excludes.append(text_field(pattern, "--upload-exclude", max_len=1024))
    return {
        "platform": normalize_platform(platform),
        "image": text_field(image, "--image", max_len=1024, spaces=False),
        "network_arch": _id_word(network_arch, "--network-arch", example="dino"),
        "action": _id_word(action, "--action", example="train"),
        "storage_tier": storage_tier,
        "results_dir": normalize_results_dir(results_dir) if results_dir is not None else None,
        "results_root": normalize_results_dir(results_root, "--results-root") if results_root is not None else None,
        "upload_excludes": excludes,
        "parent_job": validate_id(parent_job, "--parent-job") if parent_job is not None else None,
        "retry_of": validate_id(retry_of, "--retry-of") if retry_of is not None else None,
    }


def refuse_credential_in_identity(record: Mapping[str, Any], redacted: Mapping[str, Any]) -> None:
    """UsageError when redaction changed a field that names the job (records never hold credentials)."""
    flags = {
        "id": "--network-arch/--action",
        "platform": "--platform",
        "image": "--image",
        "results_dir": "--results-dir/--results-root",
        "network_arch": "--network-arch",
        "action": "--action",
    }
    for key, flag in flags.items():
        if record.get(key) != redacted.get(key):
            raise UsageError(f"{flag} looks like it contains a credential; records never hold credentials")
