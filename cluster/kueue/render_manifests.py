#!/usr/bin/env python3
"""Adapt Kueue's own manifests (config/components of the sigs.k8s.io/kueue module) to the local cluster.

Kueue runs here as a process on 127.0.0.1, not as a Deployment behind a Service, so the few parts of its
kustomize overlay that name a Service are rewritten (stdlib only; scripts/local-cluster-kueue.sh runs it):

  webhooks URL CA_FILE         stdin: the MutatingWebhookConfiguration and ValidatingWebhookConfiguration of
                               webhook/manifests.yaml as a JSON List (`kubectl create --dry-run=client -o json`).
                               Keeps the webhooks of the kinds this Kueue manages (batch Jobs, Kueue's own
                               kinds), names the configurations as the overlay does (kueue-...; the cert
                               rotator looks them up by those names) and points them at URL + path with
                               CA_FILE as the CA bundle.
  conversion-crds              stdin: crd/kustomization.yaml. Prints the CRDs whose conversion webhook the
                               overlay enables (its uncommented patches/webhook_in_<plural>.yaml lines).
  conversion-patch URL CA_FILE prints the merge patch that enables that conversion webhook at URL/convert.
  rbac USER NAMESPACE          stdin: rbac/role.yaml and rbac/manager_secrets_role.yaml as a JSON List.
                               Prints them named as the overlay names them, bound to the client-certificate
                               user USER, the Role in NAMESPACE.

Exit 2 with one line on stderr for input that is not what the Kueue module ships.
"""

from __future__ import annotations

import base64
import json
import re
import sys
from typing import Any

PREFIX = "kueue-"
# The API groups of the webhooks kept: Kueue's own kinds and the one integration enabled (batch/job).
KEPT_GROUPS = frozenset({"kueue.x-k8s.io", "batch"})
_CONVERSION_LINE = re.compile(r"^\s*-\s*path:\s*patches/webhook_in_([a-z0-9]+)\.yaml\s*$")


class InputError(Exception):
    pass


def _items(data: Any) -> list[dict[str, Any]]:
    if not isinstance(data, dict):
        raise InputError("expected a JSON object (a List from `kubectl create --dry-run=client -o json`)")
    if data.get("kind") == "List":
        items = data.get("items")
        if not isinstance(items, list):
            raise InputError("the List has no items")
        return [i for i in items if isinstance(i, dict)]
    return [data]


def _ca_bundle(ca_file: str) -> str:
    with open(ca_file, "rb") as f:
        pem = f.read()
    if b"BEGIN CERTIFICATE" not in pem:
        raise InputError(f"{ca_file} is not a PEM certificate")
    return base64.b64encode(pem).decode()


def _groups(webhook: dict[str, Any]) -> set[str]:
    return {g for rule in webhook.get("rules") or [] for g in rule.get("apiGroups") or []}


def webhooks(data: Any, url: str, ca_bundle: str) -> dict[str, Any]:
    out = []
    for config in _items(data):
        kind = config.get("kind")
        if kind not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            raise InputError(f"unexpected kind {kind!r} among the webhook configurations")
        kept = []
        for hook in config.get("webhooks") or []:
            groups = _groups(hook)
            if not groups or not groups <= KEPT_GROUPS:
                continue
            service = (hook.get("clientConfig") or {}).get("service") or {}
            path = service.get("path")
            if not isinstance(path, str) or not path.startswith("/"):
                raise InputError(f"webhook {hook.get('name')!r} has no service path")
            hook = dict(hook)
            hook["clientConfig"] = {"url": url.rstrip("/") + path, "caBundle": ca_bundle}
            kept.append(hook)
        if not kept:
            raise InputError(f"{kind} has no webhook for {', '.join(sorted(KEPT_GROUPS))}")
        name = str((config.get("metadata") or {}).get("name") or "")
        out.append(
            {
                "apiVersion": config.get("apiVersion"),
                "kind": kind,
                "metadata": {"name": PREFIX + name, "labels": {"app.kubernetes.io/name": "kueue"}},
                "webhooks": kept,
            }
        )
    return {"apiVersion": "v1", "kind": "List", "items": out}


def conversion_crds(kustomization: str) -> list[str]:
    names = []
    for line in kustomization.splitlines():
        match = _CONVERSION_LINE.match(line)
        if match:
            names.append(f"{match.group(1)}.kueue.x-k8s.io")
    if not names:
        raise InputError("crd/kustomization.yaml enables no conversion webhook patch")
    return names


def conversion_patch(url: str, ca_bundle: str) -> dict[str, Any]:
    return {
        "spec": {
            "conversion": {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {"url": url.rstrip("/") + "/convert", "caBundle": ca_bundle},
                    "conversionReviewVersions": ["v1"],
                },
            }
        }
    }


def rbac(data: Any, user: str, namespace: str) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    subject = {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}
    for role in _items(data):
        kind = role.get("kind")
        if kind not in ("ClusterRole", "Role"):
            raise InputError(f"unexpected kind {kind!r} among the roles")
        name = PREFIX + str((role.get("metadata") or {}).get("name") or "")
        meta: dict[str, Any] = {"name": name}
        if kind == "Role":
            meta["namespace"] = namespace
        out.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
                    "rules": role.get("rules") or []})
        out.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": f"{kind}Binding",
                "metadata": {**meta, "name": f"{name}-binding"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
                "subjects": [subject],
            }
        )
    return {"apiVersion": "v1", "kind": "List", "items": out}


def main(argv: list[str]) -> int:
    try:
        cmd, args = (argv[0], argv[1:]) if argv else ("", [])
        if cmd == "webhooks" and len(args) == 2:
            result: Any = webhooks(json.load(sys.stdin), args[0], _ca_bundle(args[1]))
        elif cmd == "conversion-crds" and not args:
            print("\n".join(conversion_crds(sys.stdin.read())))
            return 0
        elif cmd == "conversion-patch" and len(args) == 2:
            result = conversion_patch(args[0], _ca_bundle(args[1]))
        elif cmd == "rbac" and len(args) == 2:
            result = rbac(json.load(sys.stdin), args[0], args[1])
        else:
            print("usage: render_manifests.py webhooks URL CA_FILE | conversion-crds | conversion-patch URL "
                  "CA_FILE | rbac USER NAMESPACE", file=sys.stderr)
            return 2
    except (InputError, OSError, json.JSONDecodeError) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    json.dump(result, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
