"""Image-pull Secrets (kubernetes.io/dockerconfigjson) made from a key read on stdin or from the environment.

The key never reaches argv, a log or a message: the Secret object travels to `kubectl create -f -` on
stdin, success is checked with `kubectl get secret NAME -o name` (the data is never read back), and every
error raised here is scrubbed of the key and its encodings before it is shown.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Mapping
from typing import Any

from kubectl_tao.core import contract
from kubectl_tao.core.errors import KubectlError, TaoError, UsageError
from kubectl_tao.core.valueclass import Value, record
from kubectl_tao.k8s.kubectl import Kubectl

DEFAULT_REGISTRY = "nvcr.io"
NGC_USERNAME = "$oauthtoken"
SECRET_TYPE = "kubernetes.io/dockerconfigjson"  # noqa: S105 - the Secret type, not a credential
DOCKER_HUB = "docker.io"
DOCKER_HUB_KEY = "https://index.docker.io/v1/"
_REGISTRY_RE = re.compile(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?")
HIDDEN = "***"


@record(frozen=True)
class Outcome(Value):
    name: str
    namespace: str
    registry: str
    username: str
    action: str  # "created" or "replaced"

    def to_dict(self) -> dict[str, str]:
        return self.as_dict()


def check_key(raw: str, origin: str) -> str:
    """The key from stdin or a variable: one trailing line break is dropped; empty, multi-line or
    whitespace-holding keys are refused (the message names the origin, never the value)."""
    key = raw[:-2] if raw.endswith("\r\n") else raw[:-1] if raw.endswith("\n") else raw
    if not key.strip():
        raise UsageError(
            f"{origin}: the key is empty; pipe it in (e.g. `printenv NGC_API_KEY | kubectl tao secret image-pull "
            "NAME`) or name a variable with --from-env"
        )
    if "\n" in key or "\r" in key:
        raise UsageError(f"{origin}: the key holds a line break; give the key alone, on one line")
    if any(ch.isspace() or not ch.isprintable() for ch in key):
        raise UsageError(f"{origin}: the key holds spaces or control characters; registry keys are one word")
    return key


def check_registry(registry: str) -> str:
    value = (registry or "").strip()
    if not _REGISTRY_RE.fullmatch(value):
        raise UsageError(  # not quoted: a key pasted in the wrong flag would be printed
            "--registry: not a registry host; give one such as nvcr.io or registry.local:5000 "
            "(lower case, no scheme, no path)"
        )
    return value


def check_username(username: str) -> str:
    if not username or ":" in username or any(ch.isspace() or not ch.isprintable() for ch in username):
        raise UsageError(  # not quoted: `--username user:key` would print the key
            "--username: give one word without ':', spaces or control characters (for nvcr.io: '$oauthtoken'); "
            "the key itself comes from stdin or --from-env"
        )
    return username


def docker_config(registry: str, username: str, key: str) -> dict[str, Any]:
    """The .dockerconfigjson document kubelet reads (docker.io is stored under its v1 index URL)."""
    server = DOCKER_HUB_KEY if registry == DOCKER_HUB else registry
    auth = base64.b64encode(f"{username}:{key}".encode()).decode("ascii")
    return {"auths": {server: {"username": username, "password": key, "auth": auth}}}


def secret_object(name: str, namespace: str, registry: str, username: str, key: str) -> dict[str, Any]:
    config = json.dumps(docker_config(registry, username, key), separators=(",", ":"))
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {contract.MANAGED_BY_LABEL: contract.MANAGED_BY, contract.COMPONENT_LABEL: "image-pull-secret"},
        },
        "type": SECRET_TYPE,
        "data": {".dockerconfigjson": base64.b64encode(config.encode()).decode("ascii")},
    }


def secret_forms(obj: Mapping[str, Any], key: str) -> list[str]:
    """Every text form of the credential that could surface in an error: the key, user:key, their base64,
    and the base64 of the whole config."""
    forms = [key, base64.b64encode(key.encode()).decode("ascii")]
    for entry in (json.loads(base64.b64decode(obj["data"][".dockerconfigjson"])).get("auths") or {}).values():
        forms.append(entry["auth"])
        forms.append(base64.b64decode(entry["auth"]).decode())
    forms.append(obj["data"][".dockerconfigjson"])
    return sorted({f for f in forms if f}, key=len, reverse=True)


def scrub(text: str, forms: list[str]) -> str:
    for form in forms:
        text = text.replace(form, HIDDEN)
    return text


def _scrubbed(exc: TaoError, forms: list[str]) -> TaoError:
    clean = copy.copy(exc)
    clean.message = scrub(exc.message, forms)
    clean.args = (clean.message,)
    if isinstance(clean, KubectlError):
        clean.stderr = scrub(clean.stderr, forms)
    return clean


def create(kc: Kubectl, obj: dict[str, Any], key: str, *, replace: bool = False) -> Outcome:
    """Create (or with replace=True, replace) the Secret from stdin, then check it exists by name."""
    meta = obj["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    auths = json.loads(base64.b64decode(obj["data"][".dockerconfigjson"]))["auths"]
    server = next(iter(auths))
    registry = DOCKER_HUB if server == DOCKER_HUB_KEY else server
    forms = secret_forms(obj, key)
    text = json.dumps(obj)
    action = "created"
    try:
        if replace:
            result = kc.run(
                ["replace", "-f", "-", "-n", namespace, "-o", "name"], stdin=text, namespaced=False, check=False
            )
            if result.returncode == 0:
                action = "replaced"
            else:
                error = kc.error_for(result.stderr)
                if not (isinstance(error, KubectlError) and error.reason == "NotFound"):
                    raise error
                kc.run(["create", "-f", "-", "-n", namespace, "-o", "name"], stdin=text, namespaced=False)
        else:
            try:
                kc.run(["create", "-f", "-", "-n", namespace, "-o", "name"], stdin=text, namespaced=False)
            except KubectlError as exc:
                if exc.reason == "AlreadyExists":
                    raise TaoError(
                        f"secret {name} already exists in namespace {namespace}; pass --replace to overwrite it "
                        "(pods that already pulled keep running)"
                    ) from None
                raise
        check = kc.run(["get", "secret", name, "-n", namespace, "-o", "name"], namespaced=False, check=False)
    except TaoError as exc:
        raise _scrubbed(exc, forms) from None
    if check.returncode != 0 or check.stdout.strip() != f"secret/{name}":
        raise TaoError(
            f"secret {name} was {action} but `kubectl get secret {name} -n {namespace}` does not show it; "
            "check your RBAC (get secrets) and the namespace"
        )
    username = next(iter(auths.values()))["username"]
    return Outcome(name, namespace, registry, username, action)
