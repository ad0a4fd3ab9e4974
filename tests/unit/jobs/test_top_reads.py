"""jobs/top.py's pieces: which exporter Service and port are read, and how a failed nvidia-smi call is told."""

from __future__ import annotations

import json
from typing import Any

from kubectl_tao.core.errors import ClusterUnreachableError, TaoError
from kubectl_tao.jobs.top import Exporter, _from_exec, exporter_of
from kubectl_tao.k8s.kubectl import Completed
from kubectl_tao.progress.gpuuse import MAX_REASON, shorten


def services(*items: dict[str, Any]) -> Completed:
    return Completed(json.dumps({"kind": "List", "items": list(items)}), "", 0)


def service(namespace: str, name: str, *ports: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {"ports": list(ports)}}


def test_the_metrics_port_is_found_by_name_then_number_then_as_the_only_port() -> None:
    named = service("gpu-operator", "nvidia-dcgm-exporter", {"name": "web", "port": 80},
                    {"name": "gpu-metrics", "port": 9400})
    assert exporter_of([services(named)]) == Exporter("gpu-operator", "nvidia-dcgm-exporter", "gpu-metrics")
    numbered = service("monitoring", "dcgm", {"port": 8080}, {"port": 9400})
    assert exporter_of([services(numbered)]) == Exporter("monitoring", "dcgm", "9400")
    only = service("monitoring", "dcgm", {"port": 9500})
    assert exporter_of([services(only)]).path == "/api/v1/namespaces/monitoring/services/dcgm:9500/proxy/metrics"
    assert exporter_of([services(service("m", "x", {"port": 1}, {"port": 2}))]) is None


def test_the_gpu_operators_service_wins_and_unreadable_answers_are_passed_over() -> None:
    refused = Completed("", "Error from server (Forbidden): services is forbidden", 1)
    chart = services(service("monitoring", "dcgm-exporter", {"name": "metrics", "port": 9400}))
    operator = services(service("gpu-operator", "nvidia-dcgm-exporter", {"name": "gpu-metrics", "port": 9400}))
    assert exporter_of([operator, chart]) == Exporter("gpu-operator", "nvidia-dcgm-exporter", "gpu-metrics")
    assert exporter_of([refused, chart]) == Exporter("monitoring", "dcgm-exporter", "metrics")
    assert exporter_of([TaoError("x"), Completed("not json", "", 0)]) is None


def test_an_exec_that_timed_out_says_how_long_it_was_given() -> None:
    timed_out = ClusterUnreachableError("kubectl exec timed out after 10.0s; check the API server")
    assert _from_exec(timed_out, 10.0) == ([], "nvidia-smi did not answer within 10s")


def test_a_long_reason_keeps_its_start_and_its_end() -> None:
    text = "start " + "x" * 1000 + " executable file not found in $PATH: unknown"
    short = shorten(text)
    assert len(short) == MAX_REASON and short.startswith("start ") and short.endswith("in $PATH: unknown")
    assert " ... " in short
    assert shorten("short") == "short"


def test_nvidia_smi_runs_in_the_tao_container_else_in_the_pods_first() -> None:
    from kubectl_tao.jobs.top import container_of

    assert container_of({"spec": {"containers": [{"name": "sidecar"}, {"name": "tao"}]}}) == "tao"
    assert container_of({"spec": {"containers": [{"name": "trainer"}, {"name": "sidecar"}]}}) == "trainer"
    assert container_of({"spec": {}}) == "tao"
