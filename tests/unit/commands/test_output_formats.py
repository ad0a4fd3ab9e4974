"""-o json prints JSON and -o yaml prints YAML in every verb that takes -o, the same data either way, as kubectl
prints them: one object as itself; several as one v1 List (`kubectl get`), except manifests in YAML, which are
documents with `---` between them (`kubectl create --dry-run=client -o yaml`). Strings a YAML 1.1 reader would
take for booleans or numbers stay strings when read back."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import ROOT
from support.fake_kubectl import FakeKubectl, fixture_json, review_answer

from kubectl_tao.gates.gpuinventory import DRA_READ
from kubectl_tao.manifests import yamltext
from kubectl_tao.store.records import RecordStore

NO_KUEUE = 'error: the server doesn\'t have a resource type "localqueues"'
UID = "0b9b6c1e-1111-2222-3333-444455556666"
RENDER = ["--image", "busybox", "--command", "echo hi", "--gpus", "0", "--pvc", "data"]
MULTI = ["--image", "busybox", "--command", "echo hi", "--gpus", "1", "--nodes", "2", "--pvc", "data"]
LIST_KEYS = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}}


class GoYamlLoader(yaml.SafeLoader):
    """PyYAML reads YAML 1.1 as go-yaml v2 (Kubernetes) does, except y/Y/n/N: go-yaml takes them for booleans."""


GoYamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:y|Y|n|N)$"), list("yYnN")
)
GoYamlLoader.add_constructor(
    "tag:yaml.org,2002:bool", lambda loader, node: loader.construct_scalar(node) in ("y", "Y", "yes", "Yes", "YES",
                                                                                    "true", "True", "TRUE", "on",
                                                                                    "On", "ON")
)


def go_yaml(text: str) -> Any:
    return yaml.load(text, Loader=GoYamlLoader)  # noqa: S506 - a SafeLoader with go-yaml's y/n booleans


def go_yaml_all(text: str) -> list[Any]:
    return list(yaml.load_all(text, Loader=GoYamlLoader))


def _open(**_: Any) -> str:
    store = RecordStore()
    record = store.open(platform="kubernetes", image="busybox", network_arch="dino", action="train",
                        storage_tier="A", results_root="/workspace/results")
    return record.id


def _launched(message: str = "yes") -> str:
    store = RecordStore()
    rid = _open()
    store.mark(rid, "RUNNING", message=message, backend_ref="tao-jobs/gone-job")
    store.mark(rid, "COMPLETE", message="on")
    store.update_extra(rid, namespace="tao-jobs", job_name="gone-job", api_server="https://127.0.0.1:6443")
    return rid


def _listed(verb: list[str]) -> list[str]:
    """VERB over two records (one launched and finished, one only opened), made once for both formats."""
    if not RecordStore().list():
        _launched()
        _open()
    return verb


def _status(fake: FakeKubectl) -> list[str]:
    fake.on("get", "jobs,pods", data={"kind": "List", "items": []})
    return ["status", _launched()]


def _top(fake: FakeKubectl) -> list[str]:
    """A running rank read with nvidia-smi (no DCGM exporter found)."""
    store = RecordStore()
    rid = _open()
    store.mark(rid, "RUNNING", backend_ref="tao-jobs/run-job")
    store.update_extra(rid, namespace="tao-jobs", job_name="run-job", api_server="https://127.0.0.1:6443")
    pod = {"kind": "Pod", "metadata": {"name": "run-job-0-abcde", "annotations": {}}, "spec": {"nodeName": "n1"},
           "status": {"phase": "Running"}}
    job = {"kind": "Job", "metadata": {"name": "run-job", "uid": "u"}}
    fake.on("get", "jobs,pods", data={"kind": "List", "items": [job, pod]})
    fake.on("get", "services", data={"kind": "List", "items": []})
    fake.on("exec", stdout="0, GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52, 87, 40213, 143771\n")
    return ["top", rid]


def _gpus(fake: FakeKubectl) -> list[str]:
    fake.capacity(fixture_json("dra-nodes-pods.json"))
    fake.on(*DRA_READ[:2], data=fixture_json("dra-objects.json"))
    fake.on("get", "localqueues.kueue.x-k8s.io", stderr=NO_KUEUE, rc=1)
    return ["gpus"]


def _fit(fake: FakeKubectl) -> list[str]:
    fake.capacity({"kind": "List", "items": fixture_json("nodes-2x8.json")["items"]})
    fake.on(*DRA_READ[:2], data={"kind": "List", "items": []})
    fake.on("get", "localqueues.kueue.x-k8s.io", stderr=NO_KUEUE, rc=1)
    return ["fit", "--gpus", "4"]


def _explain(fake: FakeKubectl) -> list[str]:
    fake.on("get", "jobs,pods", data={"kind": "List", "items": []})
    fake.on("get", "events", data={"kind": "List", "items": []})
    return ["explain", _launched()]


def _submit(fake: FakeKubectl) -> list[str]:
    review, granted = review_answer()
    fake.on(*review, stdout=granted)
    fake.on("create", "--dry-run=server", stdout="job.batch/x created (server dry run)\n")
    fake.on("create", "-f", stdout=f"Job x {UID}\n")
    return ["submit", "--image", "busybox", "--command", "true", "--storage-tier", "C", "--s3-output",
            "s3://bucket/out", "--gpus", "0"]


def _resubmit(fake: FakeKubectl) -> list[str]:
    from kubectl_tao.jobs.flags import job_request
    from kubectl_tao.jobs.plan import stored

    _submit(fake)
    fake.on("get", "persistentvolumeclaim/data", stdout="PersistentVolumeClaim data Bound \n")
    rid = _launched()
    request = job_request(image="busybox", command="true", pvc="data", gpus=0)
    RecordStore().update_extra(rid, request=stored(request))
    return ["resubmit", rid]


def _secret(fake: FakeKubectl) -> list[str]:
    fake.on("create", stdout="secret/ngc\n")
    fake.on("get", "secret", stdout="secret/ngc\n")
    return ["secret", "image-pull", "ngc"]


def _data_push(fake: FakeKubectl, monkeypatch: pytest.MonkeyPatch, tao_env: Path) -> list[str]:
    """A push of one file onto an empty volume: the pod's end of each `exec -i` as busybox answers it."""
    import hashlib
    import io
    import tarfile

    from kubectl_tao.k8s.kubectl import Completed, Kubectl

    (tao_env / "train.yaml").write_text("x: 1\n")
    fake.on("get", "persistentvolumeclaim", data={"status": {"phase": "Bound"}})
    fake.on("create", stdout=f"Pod tao-volume-x {UID}\n")
    fake.on("get", "pod", data={"status": {"phase": "Running", "containerStatuses": [{"state": {"running": {}}}]}})
    fake.on("delete", "--raw")

    def pipe(self: Kubectl, args: list[str], *, feed: Any = None, sink: Any = None, **_: Any) -> Completed:
        if feed is not None:  # the extraction: each file's hash as it arrived
            buffer = io.BytesIO()
            feed(buffer)
            with tarfile.open(fileobj=io.BytesIO(buffer.getvalue()), mode="r|") as tar:
                for member in tar:
                    data = tar.extractfile(member).read()  # type: ignore[union-attr]
                    if sink is not None:
                        sink(f"{hashlib.sha256(data).hexdigest()}  ./{member.name}\n".encode())
        return Completed("", "", 0)

    monkeypatch.setattr(Kubectl, "pipe", pipe)
    return ["data", "push", str(tao_env / "train.yaml"), "--pvc", "tao-data"]


def _results(fake: FakeKubectl, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """`results JOB` of a launched record whose request names its claim: the helper's listing as busybox prints it."""
    from kubectl_tao.jobs.flags import job_request
    from kubectl_tao.jobs.plan import stored
    from kubectl_tao.k8s.kubectl import Completed, Kubectl

    rid = _launched()
    RecordStore().update_extra(rid, request=stored(job_request(image="busybox", command="true", pvc="data", gpus=0)))
    fake.on("get", "persistentvolumeclaim", data={"status": {"phase": "Bound"}})
    fake.on("create", stdout=f"Pod tao-volume-x {UID}\n")
    fake.on("get", "pod", data={"status": {"phase": "Running", "containerStatuses": [{"state": {"running": {}}}]}})
    fake.on("delete", "--raw")
    listing = (
        "F 12 1796583000 ./train/model_epoch_2.pth\nL 1796583001 ./train/model_latest.pth\nT model_epoch_2.pth\n"
        '@@status ./train/status.json\n{"date": "12/6/2026", "time": "18:0:1", "status": "RUNNING", '
        '"verbosity": "INFO", "epoch": 2, "max_epoch": 4, "kpi": {"loss": 0.5}}\n@@end\n'
    )

    def pipe(self: Kubectl, args: list[str], *, sink: Any = None, **_: Any) -> Completed:
        sink(listing.encode())
        return Completed("", "", 0)

    monkeypatch.setattr(Kubectl, "pipe", pipe)
    return ["results", rid]


def _preflight(fake: FakeKubectl, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from kubectl_tao.jobs import preflight

    monkeypatch.setattr(preflight, "host_runtime_check", lambda: preflight.Check("host", preflight.OK, "ok"))
    monkeypatch.setattr(preflight, "kubectl_check", lambda _binary: preflight.Check("kubectl", preflight.OK, "ok"))
    fake.on("version", stderr="The connection to the server 127.0.0.1:6443 was refused", rc=1)
    return ["preflight"]


def _probe(fake: FakeKubectl, tao_env: Path) -> list[str]:
    from kubectl_tao.jobs import probe
    from kubectl_tao.store import probecache

    fake.on("version", data=fixture_json("version-gke-1.30.json"))
    report = probe.ProbeReport(result="pass", reason="", message="ok", server="https://127.0.0.1:6443",
                               version="v1.30.5-gke.1014001", checked_at=probecache.utc_stamp(datetime.now(UTC)),
                               record_id=None, nodes=2, gpus=1, image=probe.DEFAULT_IMAGE,
                               settings={"NCCL_IB_DISABLE": "1"})
    probecache.save_result(tao_env / "state" / "probes" / "nccl.json", report)
    return ["probe", "nccl"]


# verb -> (how to set it up, exit code, stdin); each verb that takes -o json|yaml is here (see the last test)
CASES: dict[str, tuple[Callable[..., list[str]], int, str]] = {
    "version": (lambda **_: ["version"], 0, ""),
    "render": (lambda **_: ["render", *RENDER], 0, ""),
    "submit --dry-run=client": (lambda **_: ["submit", *RENDER, "--dry-run=client"], 0, ""),
    "submit": (lambda fake, **_: _submit(fake), 0, ""),
    "resubmit": (lambda fake, **_: _resubmit(fake), 0, ""),
    "status": (lambda fake, **_: _status(fake), 0, ""),
    "list": (lambda **_: _listed(["list", "--no-live"]), 0, ""),
    "cancel": (lambda **_: ["cancel", _open()], 0, ""),
    "explain": (lambda fake, **_: _explain(fake), 0, ""),
    "fit": (lambda fake, **_: _fit(fake), 0, ""),
    "gpus": (lambda fake, **_: _gpus(fake), 0, ""),
    "top": (lambda fake, **_: _top(fake), 0, ""),
    "preflight": (lambda fake, monkeypatch, **_: _preflight(fake, monkeypatch), 3, ""),
    "probe nccl": (lambda fake, tao_env, **_: _probe(fake, tao_env), 0, ""),
    "secret image-pull": (lambda fake, **_: _secret(fake), 0, "nvapi-" + "k" * 60 + "\n"),
    "results": (lambda fake, monkeypatch, **_: _results(fake, monkeypatch), 0, ""),
    "data push": (lambda fake, monkeypatch, tao_env, **_: _data_push(fake, monkeypatch, tao_env), 0, ""),
    "record open": (lambda **_: ["record", "open", "--image", "busybox", "--network-arch", "dino", "--action",
                                 "train", "--storage-tier", "A", "--results-root", "/workspace/results"], 0, ""),
    "record mark": (lambda **_: ["record", "mark", _open(), "--state", "RUNNING", "--message", "y",
                                 "--backend-ref", "tao/x"], 0, ""),
    "record show": (lambda **_: ["record", "show", _launched()], 0, ""),
    "record list": (lambda **_: _listed(["record", "list"]), 0, ""),
    "workflow render": (lambda tao_env, **_: ["workflow", "render", _workflow_file(tao_env)], 0, ""),
    "workflow list": (lambda **_: ["workflow", "list"], 0, ""),
}


MANY_DOCUMENTS = {"workflow render"}


def _workflow_file(where: Path) -> str:
    path = where / "wf.yaml"
    path.write_text("apiVersion: kubectl-tao/v1\nkind: Workflow\nmetadata: {name: wf}\nsteps:\n"
                    "- {name: a, image: 'busybox:1', pvc: data, command: x}\n"
                    "- {name: b, image: 'busybox:1', pvc: data, command: y}\n", encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("verb", sorted(CASES))
def test_json_is_json_and_yaml_is_the_same_data_in_yaml(
    verb: str, cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch, tao_env: Path
) -> None:
    setup, code, stdin = CASES[verb]
    printed: dict[str, Any] = {}
    for fmt in ("json", "yaml"):
        argv = setup(fake=fake_kubectl, monkeypatch=monkeypatch, tao_env=tao_env)
        got, out, err = cli(*argv, "-o", fmt, stdin=stdin)
        assert got == code, err
        printed[fmt] = out
    as_json = json.loads(printed["json"])
    assert not printed["yaml"].lstrip().startswith(("{", "[")), "YAML, not JSON in YAML's clothes"
    docs = go_yaml_all(printed["yaml"])
    if verb in MANY_DOCUMENTS:  # several manifests: YAML documents, as kubectl prints them; JSON: a v1 List
        assert len(docs) > 1 and as_json["kind"] == "List"
        assert _same_shape(docs, as_json["items"])
        return
    assert len(docs) == 1
    assert _same_shape(docs[0], as_json)


def _same_shape(a: Any, b: Any) -> bool:
    """Equal, except values that change between the two runs (ids, times, the order of records)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return set(a) == set(b) and all(_same_shape(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_shape(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b)


@pytest.mark.parametrize("verb", ["render", "submit --dry-run=client"])
def test_several_manifests_are_a_list_in_json_and_documents_in_yaml(verb: str, cli: Any) -> None:
    argv = [*verb.split(), *MULTI]
    code, out, err = cli(*argv, "-o", "json")
    assert code == 0, err
    listed = json.loads(out)
    assert (listed["apiVersion"], listed["kind"], [i["kind"] for i in listed["items"]]) == ("v1", "List",
                                                                                           ["Service", "Job"])
    for fmt in ("yaml", "table"):  # render's default is YAML
        code, out, err = cli(*argv, *(["-o", fmt] if fmt != "table" else []))
        assert code == 0, err
        docs = go_yaml_all(out)
        assert [d["kind"] for d in docs] == ["Service", "Job"]
        assert out.count("\n---\n") == 1 and not out.startswith("---")
        names = [d["metadata"]["name"] for d in docs]
        assert names[0] == names[1]


@pytest.mark.parametrize("verb", [["list", "--no-live"], ["record", "list"]])
def test_a_listing_is_one_v1_list_in_both_formats(verb: list[str], cli: Any) -> None:
    first, second = _launched(), _open()
    for fmt, load in (("json", json.loads), ("yaml", lambda text: go_yaml(text))):
        code, out, err = cli(*verb, "-o", fmt)
        assert code == 0, err
        data = load(out)
        assert {k: data[k] for k in LIST_KEYS} == LIST_KEYS
        assert sorted(item["id"] for item in data["items"]) == sorted([first, second])


@pytest.mark.parametrize("value", ["yes", "no", "on", "off", "y", "n", "Y", "N", "true", "False", "null", "~", "",
                                   "0123", "0x1f", "1_000", "12:30", "1e3", ".inf", "-.inf", ".nan", "2026-01-01",
                                   "<<", "=", "- x", "a: b", "#c", "@x", "`x`", "!x", "&x", "*x", "%x", "|", ">",
                                   "x\ny", "tab\there", "\u2028", "\x85", "trailing ", " leading"])
def test_what_kubernetes_reads_back_is_the_string_that_was_written(value: str) -> None:
    data = {"metadata": {"annotations": {"note": value, value or "empty": [value]}}}
    assert go_yaml(yamltext.dumps(data)) == data
    assert go_yaml(yamltext.dumps_all([data, data]).split("---\n")[1]) == data


def test_a_record_message_that_looks_like_a_boolean_stays_a_string(cli: Any) -> None:
    rid = _launched(message="yes")
    code, out, _ = cli("record", "show", rid, "-o", "yaml")
    assert code == 0
    record = go_yaml(out)
    assert [t["message"] for t in record["transitions"]][1:] == ["yes", "on"]


def test_every_verb_that_takes_an_output_format_is_pinned_here() -> None:
    """A verb module that offers json or yaml must have its case above."""
    offered = set()
    for path in sorted((ROOT / "lib" / "kubectl_tao" / "commands").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "def register(" in text and re.search(r"check_format\(|_format\(output", text) and '"json"' in text:
            offered.add(path.stem.rstrip("_"))
    verbs = {verb.split()[0].replace("-", "_") for verb in CASES}
    assert offered - verbs == set()
