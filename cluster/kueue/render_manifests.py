#!/usr/bin/env python3
"""Adapt Kueue's own manifests (config/components of the sigs.k8s.io/kueue module) to the local cluster.

Kueue runs here as a process on 127.0.0.1, not as a Deployment behind a Service, so the parts of its kustomize
overlay that name a Service or a ServiceAccount are rewritten (stdlib only; scripts/local-cluster-kueue.sh runs
it). stdin: the module's CRDs (crd/bases), webhook/manifests.yaml, rbac/role.yaml and
rbac/manager_secrets_role.yaml as JSON (`kubectl create --dry-run=client -o json -f ...`). stdout: one List to
apply, in this order:

- the Namespace, and the Secret Kueue's cert rotator reads (CA and serving certificate from the given files);
- the CRDs as they are, plus the conversion webhook (at URL/convert) on those the overlay enables it for
  (its uncommented patches/webhook_in_<plural>.yaml lines in crd/kustomization.yaml);
- the ClusterRole and the secrets Role, named as the overlay names them and bound to the client-certificate
  user, the Role in the namespace;
- the webhook configurations, named as the overlay names them (the cert rotator looks them up by name),
  keeping the webhooks of the kinds this Kueue manages (batch Jobs, Kueue's own kinds), each pointed at URL +
  its path with the CA as its bundle.

Every object is labelled app.kubernetes.io/name=kueue, as the overlay does. Input that is not what the Kueue
module ships: one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
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


def load_stream(text: str) -> list[Any]:
    """The JSON documents of `kubectl create --dry-run=client -o json -f A -f B` (one after the other)."""
    decoder = json.JSONDecoder()
    docs, pos = [], 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            return docs
        doc, pos = decoder.raw_decode(text, pos)
        docs.append(doc)


def _items(data: Any) -> list[dict[str, Any]]:
    if isinstance(data, list):
        return [item for doc in data for item in _items(doc)]
    if not isinstance(data, dict):
        raise InputError("expected JSON objects (from `kubectl create --dry-run=client -o json`)")
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


def _b64_file(path: str) -> str:
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def bundle(
    docs: list[Any],
    *,
    url: str,
    ca_cert: str,
    ca_key: str,
    cert: str,
    key: str,
    kustomization: str,
    user: str,
    namespace: str,
    secret: str,
) -> dict[str, Any]:
    objects = _items(docs)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        by_kind.setdefault(str(obj.get("kind")), []).append(obj)
    unknown = set(by_kind) - {
        "CustomResourceDefinition", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ClusterRole",
        "Role",
    }
    if unknown:
        raise InputError(f"unexpected kind(s) {', '.join(sorted(unknown))} in the Kueue manifests")

    def of(*kinds: str) -> list[dict[str, Any]]:
        return [obj for kind in kinds for obj in by_kind.get(kind) or []]

    crds = of("CustomResourceDefinition")
    if not crds:
        raise InputError("no CustomResourceDefinition among the Kueue manifests")
    with open(kustomization, encoding="utf-8") as f:
        converted = set(conversion_crds(f.read()))
    bundle_ca = _ca_bundle(ca_cert)
    names = {str((c.get("metadata") or {}).get("name")) for c in crds}
    if converted - names:
        raise InputError(f"crd/kustomization.yaml patches CRDs that are not in crd/bases: {sorted(converted - names)}")
    for crd in crds:
        if (crd.get("metadata") or {}).get("name") in converted:
            crd["spec"] = {**(crd.get("spec") or {}), **conversion_patch(url, bundle_ca)["spec"]}
    out: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": secret, "namespace": namespace},
            "type": "Opaque",
            "data": {"ca.crt": bundle_ca, "ca.key": _b64_file(ca_key), "tls.crt": _b64_file(cert),
                     "tls.key": _b64_file(key)},
        },
        *crds,
        *rbac(of("ClusterRole", "Role"), user, namespace)["items"],
        *webhooks(of("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"), url, bundle_ca)["items"],
    ]
    for obj in out:
        meta = obj.setdefault("metadata", {})
        meta["labels"] = {**(meta.get("labels") or {}), "app.kubernetes.io/name": "kueue"}
    return {"apiVersion": "v1", "kind": "List", "items": out}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="render_manifests.py", description="Kueue's manifests for the local cluster")
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bundle", help="everything `up` applies for Kueue, as one List")
    for flag in ("url", "ca-cert", "ca-key", "cert", "key", "kustomization", "user", "namespace", "secret"):
        b.add_argument(f"--{flag}", required=True)
    args = parser.parse_args(argv)
    try:
        result = bundle(
            load_stream(sys.stdin.read()), url=args.url, ca_cert=args.ca_cert, ca_key=args.ca_key, cert=args.cert,
            key=args.key, kustomization=args.kustomization, user=args.user, namespace=args.namespace,
            secret=args.secret,
        )
    except (InputError, OSError, json.JSONDecodeError) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    json.dump(result, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
