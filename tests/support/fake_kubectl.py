"""The fake kubectl of the unit tests and the recorded answers they share.

`FakeKubectl` replaces the kubectl process (`Kubectl._spawn`, which every call goes through; see the
`fake_kubectl` fixture in tests/unit/conftest.py): `.on(*prefix, ...)` says what kubectl answers to a call whose
arguments start with `prefix`; `.calls` records each call's full argv and stdin when it starts, so tests can
assert what was (and what was never) put on a command line. A call prestarted and never taken over is recorded
too, with `killed` set.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

from kubectl_tao.core.errors import TaoError
from kubectl_tao.gates.capacity import NODES_READ, PODS_READ
from kubectl_tao.k8s.kubectl import Completed, Kubectl
from support import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "k8s"
CHUNK_BYTES = 1000  # what a read_with reader is handed at a time

KUBECONFIG = """\
apiVersion: v1
kind: Config
current-context: lab
clusters:
- name: lab
  cluster: {server: "https://127.0.0.1:6443"}
contexts:
- name: lab
  context: {cluster: lab, user: lab, namespace: tao-jobs}
- name: other
  context: {cluster: lab, user: lab, namespace: other-ns}
users:
- name: lab
  user: {token: placeholder}
"""


def fixture_json(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


@dataclass
class Call:
    argv: list[str]
    stdin: str | None
    killed: bool = False


RECORD_FIELDS = {
    "platform": "kubernetes",
    "image": "busybox",
    "network_arch": "dino",
    "action": "train",
    "storage_tier": "A",
    "results_dir": "/workspace/results/x",
}


def open_kubernetes_record(store: Any, **fields: Any) -> Any:
    """A kubernetes record opened in STORE as submit opens it (busybox, dino train, tier A); FIELDS (store.open's
    keywords) replace any of RECORD_FIELDS: another platform, image or results directory."""
    return store.open(**{**RECORD_FIELDS, **fields})


def review_answer(*, deny: tuple[str, ...] = ()) -> tuple[tuple[str, ...], str]:
    """The argv prefix of submit's one SelfSubjectAccessReview call, and an answer granting every permission
    submit can need, preflight's optional ones and `workflow run`'s own, except those in DENY (their text, e.g.
    "create jobs.batch", "create pods/exec")."""
    from kubectl_tao.gates import permissions

    rows = "".join(
        f"{p.verb} {p.resource} {p.group or '-'} {'false' if p.text in deny else 'true'}\n"
        for p in [*permissions.needed(credentials=True, service=True, patch_job=True), *permissions.optional(),
                  *permissions.workflow_needed(release=True, workloads=True)]
    )
    return ("create", "-o", permissions.REVIEW_TEMPLATE), rows


class FakeRunning:
    """A started fake call: answered when waited on (as `k8s.kubectl.Running`)."""

    def __init__(self, fake: FakeKubectl, kc: Kubectl, args: list[str], call: Call) -> None:
        self.fake, self.kc, self.args, self.call = fake, kc, args, call
        self.done = False

    def command_line(self) -> list[str]:
        return [self.kc.binary, *self.call.argv]

    def adopt(self, kc: Kubectl) -> None:
        self.kc = kc

    def kill(self) -> None:
        self.done = self.call.killed = True

    def stop(self) -> None:
        if not self.done:
            self.kill()

    def wait(self, *, timeout: float | None = None, check: bool = True, best_effort: bool = False) -> Completed:
        self.done = True
        return self.fake.settled(self.kc, self.args, check=check, best_effort=best_effort)

    def read_with(self, reader: Any, *, check: bool = True, best_effort: bool = False) -> Completed:
        """As `Running.read_with`: the answer's stdout handed to READER in small chunks (so that a reader that
        cuts an answer into pieces meets its boundaries mid-chunk), kubectl's error first."""
        self.done = True
        answer = self.fake.settled(self.kc, self.args, check=False, best_effort=True)
        data = answer.stdout.encode("utf-8")
        value, failure = None, None
        try:
            value = reader(iter([data[i:i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES)]))
        except TaoError as exc:
            failure = exc
        settled = self.kc.settle(Completed("", answer.stderr, answer.returncode, value), check=check,
                                 best_effort=best_effort)
        if failure is not None and answer.returncode == 0:
            raise failure
        return settled


ENTRY_BYTES = 16 * 1024  # containerd's default max_container_log_line_size: a longer line is kept in pieces


def kubelet_log(text: str, *, tail: int | None, limit: int | None, entry: int | None = ENTRY_BYTES) -> bytes:
    """What the kubelet answers for a container whose output was TEXT (cri-client's ReadLogs): the log file holds
    one entry per line, a line longer than ENTRY bytes in several entries (None: never split); `--tail` starts at
    the last TAIL entries, `--limit-bytes` stops after LIMIT bytes of what follows, mid-line if it falls there."""
    data = text.encode("utf-8", errors="surrogateescape")
    entries: list[bytes] = []
    for line in data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n"):
        entries += [line[i : i + entry] for i in range(0, len(line), entry)] if entry and line else [line]
        entries[-1] += b"\n"
    if not data.endswith(b"\n") and entries:
        entries[-1] = entries[-1][:-1]  # the last line never ended: a partial entry, printed as it is
    if tail is not None and tail >= 0:
        entries = entries[len(entries) - tail :] if tail < len(entries) else entries
    out = b"".join(entries)
    return out[:limit] if limit is not None else out


def kubectl_logs(texts: dict[str, str], args: list[str], *, container: str = "tao") -> Completed:
    """`kubectl logs` over pods whose output is TEXTS (pod -> text), as kubectl prints it (kubectl's logs.go):
    a pod named in ARGS alone, else every pod of TEXTS one after another; `--prefix` writes
    `[pod/NAME/CONTAINER] ` before each piece up to a newline (a pod's answer cut mid-line runs into the next
    pod's prefix); a pod TEXTS lacks is kubectl's `error: ...` line with `--ignore-errors`."""
    flags = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in args if a.startswith("--") and "=" in a}
    tail = int(flags["--tail"]) if "--tail" in flags else None
    limit = int(flags["--limit-bytes"]) if "--limit-bytes" in flags else None
    taking = {"-n", "-l", "-c", "--namespace", "--selector", "--container"}
    named = [a for i, a in enumerate(args[1:], 1) if not a.startswith("-") and args[i - 1] not in taking]
    pods = named[:1] if named else list(texts)
    out = b""
    for pod in pods:
        if pod not in texts:
            if "--ignore-errors" not in args:
                return Completed("", f'Error from server (NotFound): pods "{pod}" not found\n', 1)
            out += f'error: pods "{pod}" not found\n'.encode()
            continue
        answer = kubelet_log(texts[pod], tail=tail, limit=limit)
        if "--prefix" in args:
            prefix = f"[pod/{pod}/{container}] ".encode()
            out += b"".join(prefix + piece for piece in re.findall(rb"[^\n]*\n|[^\n]+$", answer))
        else:
            out += answer
    return Completed(out.decode("utf-8", errors="replace"), "", 0)


class FakeKubectl:
    def __init__(self) -> None:
        self.rules: list[tuple[tuple[str, ...], Completed]] = []
        self.calls: list[Call] = []
        self.log_texts: dict[str, str] | None = None

    def logs(self, texts: dict[str, str]) -> None:
        """Answer every `kubectl logs` call from TEXTS (pod -> what its container printed) as the API server
        and kubectl do: `--tail`, `--limit-bytes`, `--prefix`, one pod by name or all of them (kubectl_logs)."""
        self.log_texts = texts

    def on(self, *prefix: str, stdout: str = "", stderr: str = "", rc: int = 0, data: Any = None) -> None:
        """Answer calls whose arguments (after the global flags) start with `prefix`; first match wins."""
        if data is not None:
            stdout = json.dumps(data)
        self.rules.append((prefix, Completed(stdout, stderr, rc)))

    def capacity(self, data: Any) -> None:
        """Answer the fit gate's two `get --raw` reads from a `get nodes,pods -o json`-style list, as the API
        server would: the nodes and the pods apart, items without `kind`, finished pods left out by the field
        selector."""

        def raw(items: list[dict[str, Any]]) -> dict[str, Any]:
            return {"kind": "List", "items": [{k: v for k, v in i.items() if k != "kind"} for i in items]}

        items = data.get("items") or []
        nodes = [i for i in items if i.get("kind") == "Node"]
        pods = [i for i in items if i.get("kind") == "Pod"
                and (i.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        self.on(*NODES_READ, data=raw(nodes))
        self.on(*PODS_READ, data=raw(pods))

    def capacity_refused(self, *, nodes: str | None = None, pods: str | None = None) -> None:
        """Make the nodes and/or the pods read fail with kubectl's stderr `nodes`/`pods` (exit 1)."""
        if nodes is not None:
            self.on(*NODES_READ, stderr=nodes, rc=1)
        if pods is not None:
            self.on(*PODS_READ, stderr=pods, rc=1)

    def answer(self, args: list[str]) -> Completed:
        if self.log_texts is not None and args[:1] == ["logs"]:
            return kubectl_logs(self.log_texts, list(args))
        missing = Completed("", f"error: the fake kubectl has no answer for {' '.join(args)}", 1)
        return next((answer for prefix, answer in self.rules if tuple(args[: len(prefix)]) == prefix), missing)

    def spawn(self, kc: Kubectl, args: list[str], full: list[str], stdin: bytes) -> FakeRunning:
        call = Call(list(full), stdin.decode("utf-8") or None)
        self.calls.append(call)
        return FakeRunning(self, kc, list(args), call)

    def run(self, kc: Kubectl, args: list[str], **kwargs: Any) -> Completed:
        """A call answered at once (for tests that replace `Kubectl.run` with their own)."""
        self.calls.append(Call(kc.argv(list(args), namespaced=kwargs.get("namespaced", True)), kwargs.get("stdin")))
        kc.calls += 1
        return self.settled(kc, args, check=kwargs.get("check", True), best_effort=kwargs.get("best_effort", False))

    def settled(self, kc: Kubectl, args: list[str], *, check: bool, best_effort: bool) -> Completed:
        from kubectl_tao.gates import permissions

        result = self.answer(list(args))
        if permissions.COMBINED_TEMPLATE in args:
            # The permission reviews ride in submit's server dry run: kubectl prints each review's answer (as
            # the review call would), then each dry-run object; a failed review call is a failed call.
            review = self.answer(permissions.review_call([], "")[0])
            if review.returncode != 0:
                result = review
            else:
                result = Completed(review.stdout + result.stdout, result.stderr, result.returncode)
        return kc.settle(result, check=check, best_effort=best_effort)

    def argvs(self) -> list[list[str]]:
        """The command lines of the calls a verb made and read (not the prestarted ones it killed unread)."""
        return [call.argv for call in self.calls if not call.killed]

    def killed(self) -> list[list[str]]:
        return [call.argv for call in self.calls if call.killed]


def answer_pvc_submit(fake: FakeKubectl) -> None:
    """Answers for a submit's gates on a GKE 1.30 server with two 8-GPU nodes: every permission granted, PVC
    `data` Bound, and the server dry run accepted. Registered after a test's own rules, which win."""
    review, granted = review_answer()
    fake.on(*review, stdout=granted)
    fake.on("version", data=fixture_json("version-gke-1.30.json"))
    fake.capacity({"kind": "List", "items": fixture_json("nodes-2x8.json")["items"]})
    fake.on("get", "persistentvolumeclaim/data", stdout="PersistentVolumeClaim data Bound \n")
    fake.on("create", "--dry-run=server", stdout="job.batch/x\n")


def nccl_info(host: str, n: int) -> str:
    """N lines of NCCL_DEBUG=INFO tree setup, about 320 bytes each."""
    trees = " ".join(f"[{c}] 1/-1/-1->0->-1" for c in range(16))
    return "".join(f"{host}:77:91 [0] NCCL INFO Trees {trees} comm 0x55d0c7a3e6b0 step {i}\n" for i in range(n))


def failed_job(ranks: int = 2) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """An Indexed Job of RANKS pods, every one failed with exit code 1."""
    job = fixture_json("multi-partial.job.json")
    job["spec"]["completions"] = job["spec"]["parallelism"] = ranks
    job["status"] = copy.deepcopy(fixture_json("exit-code.job.json")["status"])
    template = fixture_json("exit-code.pods.json")["items"][0]
    name = job["metadata"]["name"]
    pods = []
    for rank in range(ranks):
        pod = copy.deepcopy(template)
        pod["metadata"]["name"] = f"{name}-{rank}-{'abcde'[rank % 5] * 5}"
        pod["metadata"]["labels"] = {**job["spec"]["template"]["metadata"].get("labels", {}), "tao-job": name,
                                     "job-name": name}
        pod["metadata"]["annotations"] = {"batch.kubernetes.io/job-completion-index": str(rank)}
        pod["metadata"].setdefault("ownerReferences", template["metadata"].get("ownerReferences", []))
        for status in pod["status"]["containerStatuses"]:
            status["name"] = "tao"
            status["state"]["terminated"].pop("message", None)
        pod["spec"]["nodeName"] = f"gpu-node-{rank}"
        pods.append(pod)
    return job, pods
