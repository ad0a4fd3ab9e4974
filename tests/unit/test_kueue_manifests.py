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


def test_cli_reads_stdin_and_the_ca_file(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text(PEM)
    result = run("webhooks", URL, str(ca), stdin=json.dumps(configs()))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert base64.b64decode(out["items"][1]["webhooks"][0]["clientConfig"]["caBundle"]).decode() == PEM


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    not_pem = tmp_path / "ca.crt"
    not_pem.write_text("hello")
    result = run("webhooks", URL, str(not_pem), stdin=json.dumps(configs()))
    assert (result.returncode, result.stderr) == (2, f"ERROR: {not_pem} is not a PEM certificate\n")
    result = run("rbac", "u", "ns", stdin=json.dumps({"kind": "List", "items": [{"kind": "Secret"}]}))
    assert (result.returncode, result.stderr) == (2, "ERROR: unexpected kind 'Secret' among the roles\n")
    result = run("webhooks", URL)
    assert result.returncode == 2 and result.stderr.startswith("usage: render_manifests.py")
    pods_only = {"kind": "MutatingWebhookConfiguration", "webhooks": [hook("mpod.kb.io", "", "/mutate--v1-pod")]}
    ca = tmp_path / "ok.crt"
    ca.write_text(PEM)
    result = run("webhooks", URL, str(ca), stdin=json.dumps(pods_only))
    assert (result.returncode, result.stderr) == (
        2, "ERROR: MutatingWebhookConfiguration has no webhook for batch, kueue.x-k8s.io\n")
