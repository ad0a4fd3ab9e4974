"""cluster/kueue/render_manifests.py: Kueue's own manifests adapted to a Kueue process on 127.0.0.1."""

from __future__ import annotations

import base64
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "cluster" / "kueue" / "render_manifests.py"
URL = "https://127.0.0.1:40443"
PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("render_manifests", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def hook(name: str, group: str, path: str) -> dict[str, Any]:
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": path}},
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "rules": [{"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["x"]}],
    }


def configs() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": "mutating-webhook-configuration"},
                "webhooks": [
                    hook("mjob.kb.io", "batch", "/mutate-batch-v1-job"),
                    hook("mpod.kb.io", "", "/mutate--v1-pod"),
                    hook("mrayjob.kb.io", "ray.io", "/mutate-ray-io-v1-rayjob"),
                    hook("mworkload.kb.io", "kueue.x-k8s.io", "/mutate-kueue-x-k8s-io-v1beta2-workload"),
                ],
            },
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "validating-webhook-configuration"},
                "webhooks": [hook("vjob.kb.io", "batch", "/validate-batch-v1-job")],
            },
        ],
    }


def test_webhooks_keep_jobs_and_kueue_kinds_and_call_the_loopback_url() -> None:
    bundle = base64.b64encode(PEM.encode()).decode()
    out = module().webhooks(configs(), URL, bundle)
    names = [c["metadata"]["name"] for c in out["items"]]
    assert names == ["kueue-mutating-webhook-configuration", "kueue-validating-webhook-configuration"]
    mutating = out["items"][0]["webhooks"]
    assert [h["name"] for h in mutating] == ["mjob.kb.io", "mworkload.kb.io"]  # no pods, no Ray: not managed here
    assert mutating[0]["clientConfig"] == {"url": f"{URL}/mutate-batch-v1-job", "caBundle": bundle}
    assert mutating[0]["failurePolicy"] == "Fail" and mutating[0]["rules"][0]["apiGroups"] == ["batch"]


def test_conversion_crds_are_the_patches_the_overlay_enables() -> None:
    text = """patches:
- path: patches/webhook_in_localqueues.yaml
- path: patches/webhook_in_workloads.yaml
#- path: patches/webhook_in_resourceflavors.yaml
#- path: patches/cainjection_in_clusterqueues.yaml
"""
    mod = module()
    assert mod.conversion_crds(text) == ["localqueues.kueue.x-k8s.io", "workloads.kueue.x-k8s.io"]
    with pytest.raises(mod.InputError, match="enables no conversion webhook"):
        mod.conversion_crds("resources: []\n")


def test_conversion_patch_points_at_convert() -> None:
    patch = module().conversion_patch(URL + "/", "Q0E=")
    conversion = patch["spec"]["conversion"]
    assert conversion["strategy"] == "Webhook"
    assert conversion["webhook"] == {"clientConfig": {"url": f"{URL}/convert", "caBundle": "Q0E="},
                                     "conversionReviewVersions": ["v1"]}


def test_rbac_binds_the_module_roles_to_the_client_certificate_user() -> None:
    roles = {"kind": "List", "items": [
        {"kind": "ClusterRole", "metadata": {"name": "manager-role"}, "rules": [{"verbs": ["get"]}]},
        {"kind": "Role", "metadata": {"name": "manager-secrets-role", "namespace": "system"}, "rules": []},
    ]}
    items = module().rbac(roles, "kueue-controller", "kueue-system")["items"]
    assert [(i["kind"], i["metadata"]["name"], i["metadata"].get("namespace")) for i in items] == [
        ("ClusterRole", "kueue-manager-role", None),
        ("ClusterRoleBinding", "kueue-manager-role-binding", None),
        ("Role", "kueue-manager-secrets-role", "kueue-system"),
        ("RoleBinding", "kueue-manager-secrets-role-binding", "kueue-system"),
    ]
    assert items[0]["rules"] == [{"verbs": ["get"]}]
    assert items[1]["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                     "name": "kueue-controller"}]


def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], input=stdin, capture_output=True, text=True,
                          check=False)


def crd(plural: str) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.kueue.x-k8s.io"}, "spec": {"group": "kueue.x-k8s.io", "versions": []}}


ROLES = [
    {"kind": "ClusterRole", "metadata": {"name": "manager-role"}, "rules": []},
    {"kind": "Role", "metadata": {"name": "manager-secrets-role", "namespace": "system"}, "rules": []},
]


def bundle_args(tmp_path: Path) -> list[str]:
    for name, text in (("ca.crt", PEM), ("ca.key", "CA KEY"), ("tls.crt", PEM), ("tls.key", "TLS KEY"),
                       ("kustomization.yaml", "- path: patches/webhook_in_workloads.yaml\n")):
        (tmp_path / name).write_text(text)
    return ["bundle", "--url", URL, "--ca-cert", str(tmp_path / "ca.crt"), "--ca-key", str(tmp_path / "ca.key"),
            "--cert", str(tmp_path / "tls.crt"), "--key", str(tmp_path / "tls.key"),
            "--kustomization", str(tmp_path / "kustomization.yaml"), "--user", "kueue-controller",
            "--namespace", "kueue-system", "--secret", "kueue-webhook-server-cert"]


def test_bundle_reads_kubectls_json_stream_and_orders_what_up_applies(tmp_path: Path) -> None:
    # `kubectl create --dry-run=client -o json -f A -f B` prints one document after the other
    stream = "\n".join(json.dumps(doc) for doc in [crd("workloads"), crd("topologies"), configs(), *ROLES])
    result = run(*bundle_args(tmp_path), stdin=stream)
    assert result.returncode == 0, result.stderr
    items = json.loads(result.stdout)["items"]
    assert [(i["kind"], i["metadata"]["name"]) for i in items] == [
        ("Namespace", "kueue-system"),
        ("Secret", "kueue-webhook-server-cert"),
        ("CustomResourceDefinition", "workloads.kueue.x-k8s.io"),
        ("CustomResourceDefinition", "topologies.kueue.x-k8s.io"),
        ("ClusterRole", "kueue-manager-role"),
        ("ClusterRoleBinding", "kueue-manager-role-binding"),
        ("Role", "kueue-manager-secrets-role"),
        ("RoleBinding", "kueue-manager-secrets-role-binding"),
        ("MutatingWebhookConfiguration", "kueue-mutating-webhook-configuration"),
        ("ValidatingWebhookConfiguration", "kueue-validating-webhook-configuration"),
    ]
    assert all(i["metadata"]["labels"]["app.kubernetes.io/name"] == "kueue" for i in items)
    secret = items[1]["data"]
    assert base64.b64decode(secret["ca.key"]) == b"CA KEY" and base64.b64decode(secret["tls.crt"]).decode() == PEM
    assert items[2]["spec"]["conversion"]["webhook"]["clientConfig"]["url"] == f"{URL}/convert"
    assert "conversion" not in items[3]["spec"]  # the overlay gives topologies no conversion webhook


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    args = bundle_args(tmp_path)
    (tmp_path / "ca.crt").write_text("hello")
    result = run(*args, stdin=json.dumps(crd("workloads")))
    assert (result.returncode, result.stderr) == (2, f"ERROR: {tmp_path / 'ca.crt'} is not a PEM certificate\n")
    (tmp_path / "ca.crt").write_text(PEM)
    result = run(*args, stdin=json.dumps({"kind": "Secret", "metadata": {"name": "x"}}))
    assert (result.returncode, result.stderr) == (2, "ERROR: unexpected kind(s) Secret in the Kueue manifests\n")
    result = run(*args, stdin=json.dumps(crd("topologies")))
    assert result.returncode == 2 and "patches CRDs that are not in crd/bases" in result.stderr
    result = run(*args, stdin="{not json")
    assert result.returncode == 2 and result.stderr.startswith("ERROR: ")
    result = run("webhooks", URL)
    assert result.returncode == 2 and "usage: render_manifests.py" in result.stderr
    pods_only = {"kind": "MutatingWebhookConfiguration", "metadata": {"name": "m"},
                 "webhooks": [hook("mpod.kb.io", "", "/mutate--v1-pod")]}
    result = run(*args, stdin="\n".join(json.dumps(d) for d in (crd("workloads"), pods_only)))
    assert (result.returncode, result.stderr) == (
        2, "ERROR: MutatingWebhookConfiguration has no webhook for batch, kueue.x-k8s.io\n")
