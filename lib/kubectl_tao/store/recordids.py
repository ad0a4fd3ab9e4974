"""Record ids: `<network_arch>-<action>-<6 hex>`, minted when a record is opened and checked wherever an id
comes in (a flag, a file name)."""

from __future__ import annotations

import os
import re

from kubectl_tao.core.errors import UsageError

ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
ID_MAX = 200
_ID_PART_MAX = 64


def _clean_id_part(value: str, flag: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", value).strip("-")[:_ID_PART_MAX]
    if not re.search(r"[A-Za-z0-9]", cleaned):
        raise UsageError(f"{flag} {value!r} has no letters or digits to build a record id from")
    return cleaned


def _new_suffix() -> str:
    # os.urandom is what secrets.token_hex reads, without importing secrets (hmac, hashlib, random: a few ms)
    return os.urandom(3).hex()


def make_id(network_arch: str, action: str, suffix: str | None = None) -> str:
    """``<network_arch>-<action>-<6 hex>``, each part cleaned to ``[A-Za-z0-9._-]``."""
    arch = _clean_id_part(network_arch, "--network-arch")
    act = _clean_id_part(action, "--action")
    record_id = f"{arch}-{act}-{suffix or _new_suffix()}".lstrip("._-")
    return validate_id(record_id)


def preview_id(network_arch: str, action: str) -> str:
    """An id of the shape ``open`` would mint, for dry runs (nothing is reserved)."""
    return make_id(network_arch, action)


def is_id(value: str) -> bool:
    return len(value) <= ID_MAX and ID_RE.fullmatch(value) is not None


def validate_id(record_id: str, flag: str = "record id", lister: str = "`tao_job_record list`") -> str:
    """RECORD_ID when it is one, else UsageError naming FLAG and LISTER, the command that shows the ids."""
    if not isinstance(record_id, str) or not is_id(record_id):
        raise UsageError(
            f"{flag} {record_id!r} is not a record id: use letters, digits, '.', '_' and '-', starting "
            f"with a letter or digit ({lister} shows the ids)"
        )
    return record_id
