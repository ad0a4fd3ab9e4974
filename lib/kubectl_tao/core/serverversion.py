"""The Kubernetes server version and the minimum a feature needs (`kubectl version -o json`, pure)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from kubectl_tao.core.errors import TaoError
from kubectl_tao.core.valueclass import Value, plain, record

MULTI_NODE_MIN_VERSION = (1, 28)
RETRIES_PER_INDEX_MIN_VERSION = (1, 29)

# Why a feature needs a given minimum; used by too_old when the caller gives no reason of its own.
_VERSION_WHY = {
    "multi-node jobs": "stable Indexed Job pod hostnames <job>-<index> for MASTER_ADDR",
    "--retries-per-index": "backoffLimitPerIndex on Indexed Jobs is on by default from 1.29",
}


@record(frozen=True)
class ServerVersion(Value):
    major: int
    minor: int
    patch: int
    text: str  # what the server reported, e.g. "v1.28.3-eks-4f4795d"

    def at_least(self, minimum: Sequence[int]) -> bool:
        return (self.major, self.minor, self.patch) >= tuple(minimum) + (0,) * (3 - len(minimum))

    def to_dict(self) -> dict[str, Any]:
        return plain(self)


_GIT_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")
_LEADING_DIGITS = re.compile(r"^(\d+)")


def parse_server_version(raw: Any) -> ServerVersion:
    """Read `serverVersion` from `kubectl version -o json`.

    gitVersion ("v1.28.3-eks-4f4795d", "v1.30.5-gke.1014001") is preferred when it parses, because it also
    carries the patch level; otherwise major/minor are used, with vendor suffixes such as "28+" stripped.
    """

    def fail(what: str) -> TaoError:
        return TaoError(f"cannot read the server version from `kubectl version -o json`: {what}")

    if not isinstance(raw, Mapping):
        raise fail("the output is not a JSON object")
    server = raw.get("serverVersion")
    if not isinstance(server, Mapping):
        raise fail("no serverVersion in the output (could kubectl reach the API server?)")
    git_version = server.get("gitVersion")
    if isinstance(git_version, str):
        match = _GIT_VERSION.match(git_version.strip())
        if match:
            major, minor, patch = match.groups()
            return ServerVersion(int(major), int(minor), int(patch or 0), git_version.strip())
    major_m = _LEADING_DIGITS.match(str(server.get("major", "")).strip())
    minor_m = _LEADING_DIGITS.match(str(server.get("minor", "")).strip())
    if not major_m or not minor_m:
        shown = {k: server.get(k) for k in ("major", "minor", "gitVersion")}
        raise fail(f"unrecognised version fields {shown}")
    major_i, minor_i = int(major_m.group(1)), int(minor_m.group(1))
    return ServerVersion(major_i, minor_i, 0, str(git_version or f"v{major_i}.{minor_i}"))


def why_needed(feature: str) -> str:
    """Why FEATURE needs its minimum version ('' when nothing is on record)."""
    return _VERSION_WHY.get(feature, "")


def too_old(
    version: ServerVersion,
    minimum: Sequence[int] = MULTI_NODE_MIN_VERSION,
    feature: str = "multi-node jobs",
    why: str | None = None,
) -> str:
    """Why the server is too old for FEATURE (one line naming the fix), or '' when it is new enough."""
    if version.at_least(minimum):
        return ""
    need = ".".join(str(part) for part in minimum)
    reason = why if why is not None else why_needed(feature)
    because = f" ({reason})" if reason else ""
    return (
        f"{feature} need Kubernetes >= {need}{because}; this cluster runs {version.text}: "
        f"upgrade the cluster or run without {feature}"
    )
