"""Pods on the local cluster's real nodes reach the API server as pods of any cluster do: at the `kubernetes`
Service's ClusterIP (KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT, set by the kubelet), over TLS checked with
the ServiceAccount's ca.crt, authenticated by its token. The local cluster makes that path with a relay on the
bridge gateway and one iptables nat chain (docs/local-cluster.md); anything else sent to the ClusterIP ends on
the bridge gateway.

Skipped when the cluster has no real nodes (KUBECTL_TAO_REAL_NODES=0).
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from support.cluster import LOCAL_CLUSTER, Cluster, Tao, kubectl, wait_for

from .test_real_pods import REAL_NODE_LABEL, images, real, real_images  # noqa: F401

# Run by python3 in the pod: the server's version and who the token says the pod is, through the Service's
# address with the mounted ServiceAccount credentials, exactly as an in-cluster client finds them.
READ_THE_API = """\
import json, os, ssl, urllib.request
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
token = open(sa + "/token").read().strip()
context = ssl.create_default_context(cafile=sa + "/ca.crt")
def call(path, body=None):
    request = urllib.request.Request(f"https://{host}:{port}{path}", method="POST" if body else "GET",
                                     data=json.dumps(body).encode() if body else None,
                                     headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, context=context, timeout=20) as response:
        return json.load(response)
version = call("/version")["gitVersion"]
review = call("/apis/authentication.k8s.io/v1/selfsubjectreviews",
              {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
print(json.dumps({"host": host, "port": port, "version": version, "user": review["status"]["userInfo"]["username"]}))
"""

# Run by python3 in the pod: a TCP connection to the ClusterIP on a port the Service does not have.
OTHER_PORT = """\
import os, socket
try:
    socket.create_connection((os.environ["KUBERNETES_SERVICE_HOST"], 9), timeout=20).close()
    print("connected")
except OSError as exc:
    print(type(exc).__name__)
"""


def run_pod(t: Tao, name: str, image: str, script: str) -> tuple[str, str]:
    """A pod on a real node running `python3 -c SCRIPT` with the namespace's default ServiceAccount; its phase
    (Succeeded or Failed) and its log, once it has been deleted."""
    overrides = {
        "spec": {
            "nodeSelector": {REAL_NODE_LABEL: "true"},
            "tolerations": [{"key": REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
        }
    }
    t.kubectl("run", name, "--image", image, "--image-pull-policy", "IfNotPresent", "--restart", "Never",
              "--overrides", json.dumps(overrides), "--command", "--", "python3", "-c", script)

    def ended() -> str:
        phase = t.kubectl("get", "pod", name, "-o", "jsonpath={.status.phase}").stdout
        return phase if phase in ("Succeeded", "Failed") else ""

    phase = wait_for(ended, 120, message=f"pod {name} to end")
    log = t.kubectl("logs", name, check=False).stdout
    t.kubectl("delete", "pod", name)
    return phase, log


def api_from_a_pod(t: Tao, image: str) -> tuple[bool, str]:
    """Whether a pod of namespace T reads the API server through its Service with its ServiceAccount token; what
    it printed (its answer or its error)."""
    phase, log = run_pod(t, "reads-the-api", image, READ_THE_API)
    if phase != "Succeeded":
        return False, (log.strip().splitlines() or [f"the pod ended {phase} without output"])[-1]
    seen: dict[str, Any] = json.loads(log.strip().splitlines()[-1])
    return seen["user"] == f"system:serviceaccount:{t.namespace}:default", log.strip()


def python_image(cluster: Cluster) -> str:
    """An image with python3 (the torch image is imported after `up` returns: wait for it)."""
    return str(wait_for(lambda: real_images(cluster).get("TORCH_IMAGE"), 300, message="the torch image on the nodes"))


def test_a_pod_reads_the_api_server_at_the_service_address_with_its_token(
    real: Tao, cluster: Cluster  # noqa: F811
) -> None:
    phase, log = run_pod(real, "reads-the-api", python_image(cluster), READ_THE_API)
    assert phase == "Succeeded", log
    seen = json.loads(log.strip().splitlines()[-1])
    service = json.loads(kubectl("get", "service", "kubernetes", "-n", "default", "-o", "json").stdout)["spec"]
    assert (seen["host"], seen["port"]) == (service["clusterIP"], str(service["ports"][0]["port"]))
    server = json.loads(kubectl("get", "--raw", "/version").stdout)["gitVersion"]
    assert seen["version"] == server
    assert seen["user"] == f"system:serviceaccount:{real.namespace}:default"


def test_another_port_of_the_service_address_is_refused_on_the_bridge_gateway(
    real: Tao, cluster: Cluster  # noqa: F811
) -> None:
    phase, log = run_pod(real, "other-port", python_image(cluster), OTHER_PORT)
    assert phase == "Succeeded", log
    assert log.strip() == "ConnectionRefusedError"


def test_status_shows_the_relay_on_the_bridge_gateway_and_its_nat_chain(
    cluster: Cluster, images: dict[str, str]  # noqa: F811
) -> None:
    out = subprocess.run([str(LOCAL_CLUSTER), "status"], capture_output=True, text=True, check=False, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [line for line in out.stdout.splitlines() if line.split()[:2] == ["api", "relay"]]
    assert rows and "running (pid" in rows[0] and " on 10.88.0.1:" in rows[0], out.stdout
    assert "iptables nat chain KUBECTL-TAO-API" in out.stdout
    relay_pid = (cluster.data_dir / "pids" / "api-relay.pid").read_text().strip()
    listening = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True).stdout
    mine = [line.split()[3] for line in listening.splitlines() if f"pid={relay_pid}," in line]
    assert len(mine) == 1 and mine[0].startswith("10.88.0.1:"), listening
