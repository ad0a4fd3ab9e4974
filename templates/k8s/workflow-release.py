# kubectl-tao workflow release (docs/workflows.md), run by python3 in a step's rank 0 after the user's command.
# argv[1]: the command's exit status. KUBECTL_TAO_WF_PLAN: this step's Job and, for each successor, its Job, the
# Jobs after it, its gate (the KPI, the comparison, the results directory whose status.json holds the KPI) and,
# for a step held in a Kueue queue, its Workload.
# Exit 0 (the release passed), else the command's status, so the pod ends as the user's command did.
# The only calls: PATCH a successor's spec.suspend to false (or its Kueue Workload's spec.active to true), DELETE
# held Jobs, PATCH this Job's gate annotation, all with the pod's ServiceAccount token, whose Role names exactly
# these Jobs and Workloads.
import json
import os
import ssl
import sys
import urllib.error
import urllib.request

# Where the pod's ServiceAccount token, CA and namespace are mounted (KUBECTL_TAO_WF_SA_DIR: elsewhere, e.g. a
# release run by hand with a token from `kubectl create token`).
SA = os.environ.get("KUBECTL_TAO_WF_SA_DIR") or "/var/run/secrets/kubernetes.io/serviceaccount"
GATE_ANNOTATION = "kubectl-tao.io/workflow-gate"


def say(text):
    print("kubectl-tao workflow: " + text, flush=True)


JOBS = "/apis/batch/v1"
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2"


def api(method, job, body, patch="application/merge-patch+json", group=JOBS, resource="jobs"):
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if ":" in host:
        host = "[" + host + "]"
    with open(SA + "/namespace") as f:
        namespace = f.read().strip()
    with open(SA + "/token") as f:
        token = f.read().strip()
    url = f"https://{host}:{port}{group}/namespaces/{namespace}/{resource}/{job}"
    data = None
    headers = {"Authorization": "Bearer " + token, "Accept": "application/json"}
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = patch
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    context = ssl.create_default_context(cafile=SA + "/ca.crt")
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:  # noqa: S310 (https only)
            return response.status
    except urllib.error.HTTPError as exc:
        if exc.code == 404:  # the Job is gone already (a `workflow cancel`, an earlier release): the caller says so
            return 404
        raise


def last_kpi(results, kpi):
    """The last value of KPI in a status.json under RESULTS (TAO writes <results>/<task>/status.json)."""
    value = None
    for root, _dirs, files in sorted(os.walk(results)):
        if "status.json" not in files:
            continue
        with open(os.path.join(root, "status.json"), errors="replace") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                found = entry.get("kpi") if isinstance(entry, dict) else None
                if isinstance(found, dict) and isinstance(found.get(kpi), (int, float)):
                    value = float(found[kpi])
    return value


def passes(value, op, threshold):
    return {">=": value >= threshold, ">": value > threshold, "<=": value <= threshold,
            "<": value < threshold, "==": value == threshold}[op]


def remove(jobs, why):
    for job in jobs:
        if api("DELETE", job, {"propagationPolicy": "Background"}, patch="application/json") == 404:
            say(f"held Job {job} was already removed")
            continue
        say(f"removed held Job {job} ({why})")


def main():
    status = int(sys.argv[1])
    if os.environ.get("JOB_COMPLETION_INDEX", "0") not in ("", "0"):
        return status
    plan = json.loads(os.environ["KUBECTL_TAO_WF_PLAN"])
    outcomes = []
    for step in plan["next"]:
        held = [step["job"], *step["after"]]
        if status != 0:
            remove(held, f"step {plan['step']} ended with exit status {status}")
            continue
        gate = step.get("gate")
        if gate:
            value = last_kpi(gate["results"], gate["kpi"])
            shown = "{}.{} {} {:g}".format(gate["step"], gate["kpi"], gate["op"], gate["threshold"])
            ok = value is not None and passes(value, gate["op"], gate["threshold"])
            outcomes.append({"step": step["name"], "gate": shown, "value": value, "passed": ok})
            if not ok:
                seen = f"no status.json KPI {gate['kpi']}" if value is None else f"{gate['kpi']} is {value:g}"
                api("PATCH", plan["job"], {"metadata": {"annotations": {GATE_ANNOTATION: json.dumps(outcomes)}}})
                remove(held, f"gate {shown} failed: {seen}")
                continue
        if step.get("workload"):  # held in a Kueue queue: activate its Workload, Kueue admits it
            if api("PATCH", step["workload"], {"spec": {"active": True}}, group=WORKLOADS,
                   resource="workloads") == 404:
                say("step {} (Workload {}) was already removed; nothing to release".format(
                    step["name"], step["workload"]))
                continue
            say("released step {} (Workload {} active: Kueue admits it through its queue)".format(
                step["name"], step["workload"]))
            continue
        if api("PATCH", step["job"], {"spec": {"suspend": False}}) == 404:
            say("step {} (Job {}) was already removed; nothing to release".format(step["name"], step["job"]))
            continue
        say("released step {} (Job {})".format(step["name"], step["job"]))
    if outcomes:
        api("PATCH", plan["job"], {"metadata": {"annotations": {GATE_ANNOTATION: json.dumps(outcomes)}}})
    return status


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:  # the release failed: say why, and fail the step so status shows it
        say(f"release failed: {type(exc).__name__}: {exc}")
        sys.exit(int(sys.argv[1]) or 1)
