"""Each gate's judge (gates/verdicts.py): what a gate saw -> OK / WARN / REFUSE, the text submit prints, and the
error (exit code) a refusal raises."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import FIXTURES as FIXTURES_ROOT

from kubectl_tao.core.errors import (
    EXIT_NEVER_FITS,
    EXIT_UNREACHABLE,
    ClusterUnreachableError,
    GateError,
    KubectlError,
    NeverFitsError,
)
from kubectl_tao.core.serverversion import ServerVersion, parse_server_version
from kubectl_tao.gates import gatefacts, verdicts
from kubectl_tao.gates.gatefacts import FitSeen
from kubectl_tao.gates.gaterequest import PREFLIGHT, SUBMIT, GateRequest
from kubectl_tao.gates.gpufit import NodeGpus, fit
from kubectl_tao.gates.quota import QueueQuota
from kubectl_tao.gates.verdicts import OK, REFUSE, WARN

FIXTURES = FIXTURES_ROOT / "k8s"


def ask(verb: str = SUBMIT, **over: Any) -> GateRequest:
    return GateRequest(verb, "ns", **over)


def refusal(found: list[verdicts.Verdict]) -> verdicts.Verdict:
    [verdict] = [v for v in found if v.status == REFUSE]
    assert verdict.error is not None and verdict.error.message == verdict.text
    return verdict


def two_by_eight(used: tuple[int, int] = (0, 0)) -> list[NodeGpus]:
    return [NodeGpus(f"gpu-node-{i}", 8, used[i], 8 - used[i]) for i in range(2)]


# ------------------------------------------------------------------------------------------- verdicts


def test_text_is_the_message_and_the_fix_as_one_line() -> None:
    verdict = verdicts.refuse("it is broken", "mend it")
    assert verdict.text == "it is broken; mend it"
    assert isinstance(verdict.error, GateError) and verdict.error.message == "it is broken; mend it"
    assert verdicts.warn("careful").text == "careful"


def test_a_read_error_refuses_as_it_is() -> None:
    error = ClusterUnreachableError("cluster unreachable: connection refused")
    verdict = verdicts.refused(error)
    assert verdict.status == REFUSE and verdict.error is error and verdict.message == error.message


# ------------------------------------------------------------------------------------------- permissions


def test_denied_verbs_are_named_with_the_fix() -> None:
    seen = gatefacts.PermissionsSeen(("create jobs.batch", "delete jobs.batch"), ("delete jobs.batch",))
    verdict = refusal(verdicts.permissions(ask(), seen))
    assert verdict.text == (
        "permission denied: you may not delete jobs.batch in namespace ns; submit needs them to launch the job, "
        "to remove it if a later step fails, and to follow or cancel it (check with `kubectl auth can-i delete "
        "jobs.batch -n ns`); ask a cluster admin for a Role that grants them, or use -n"
    )
    assert verdict.fix == "ask a cluster admin for a Role that grants them, or use -n"


def test_unanswered_reviews_could_not_check() -> None:
    seen = gatefacts.PermissionsSeen(("create jobs.batch",), unchecked="the server said no")
    verdict = refusal(verdicts.permissions(ask(), seen))
    assert verdict.message.startswith("could not check your permissions in namespace ns (the server said no)")


def test_granted_verbs_are_listed_by_resource() -> None:
    seen = gatefacts.PermissionsSeen(("create jobs.batch", "get jobs.batch", "delete jobs.batch", "list pods"))
    [verdict] = verdicts.permissions(ask(PREFLIGHT), seen)
    assert (verdict.status, verdict.message) == (OK, "you may create, get and delete jobs.batch; list pods in "
                                                     "namespace ns")


# ------------------------------------------------------------------------------------------- references


@pytest.mark.parametrize(
    ("asked", "found", "text"),
    [
        pytest.param(
            {"pvc": "data"},
            {},
            "--pvc: PersistentVolumeClaim 'data' not found in namespace ns; create it (storage tier A mounts a Bound "
            "claim holding the data) or choose --storage-tier C",
            id="missing pvc is refused before launch",
        ),
        pytest.param(
            {"pvc": "data"},
            {("PersistentVolumeClaim", "data"): ("Pending", set())},
            "--pvc: PersistentVolumeClaim 'data' is Pending, not Bound; the pod would stay Pending until it binds "
            "(check its StorageClass / PersistentVolume)",
            id="unbound pvc",
        ),
        pytest.param(
            {"secret_refs": {"creds": ["HF_TOKEN", "NGC_KEY"]}},
            {("Secret", "creds"): ("-", {"HF_TOKEN"})},
            "Secret 'creds' lacks key(s) NGC_KEY; add them or drop them",
            id="missing secret key",
        ),
        pytest.param(
            {"image_pull_secret": "ngc"},
            {},
            "--image-pull-secret: Secret 'ngc' not found in namespace ns; create it with `kubectl tao secret "
            "image-pull ngc --registry <host>`",
            id="missing image pull secret",
        ),
    ],
)
def test_a_missing_or_unready_reference_is_refused(asked: dict[str, Any], found: dict[Any, Any], text: str) -> None:
    assert refusal(verdicts.references(ask(**asked), found)).text == text


def test_missing_secret_is_refused_naming_how_to_create_it_from_stdin() -> None:
    verdict = refusal(verdicts.references(ask(secret_refs={"creds": ["HF_TOKEN"]}), {}))
    assert verdict.text.startswith("Secret 'creds' not found in namespace ns; create it first (values from stdin")


def test_what_was_found_is_ok() -> None:
    found = {("PersistentVolumeClaim", "data"): ("Bound", set()), ("Secret", "creds"): ("-", {"HF_TOKEN", "X"}),
             ("Secret", "ngc"): ("-", {".dockerconfigjson"})}
    request = ask(PREFLIGHT, pvc="data", secret_refs={"creds": ["HF_TOKEN"]}, image_pull_secret="ngc")
    assert [(v.status, v.message) for v in verdicts.references(request, found)] == [
        (OK, "PersistentVolumeClaim data is Bound"),
        (OK, "Secret creds has key(s) HF_TOKEN"),
        (OK, "image-pull Secret ngc exists"),
    ]


# ------------------------------------------------------------------------------------------- image pull


@pytest.mark.parametrize(
    ("image", "registry"),
    [("nvcr.io/nvidia/tao:6", "nvcr.io"), ("busybox", "docker.io"), ("library/busybox", "docker.io"),
     ("localhost:5000/x", "localhost:5000")],
)
def test_registry_of_image(image: str, registry: str) -> None:
    assert verdicts.registry_of(image) == registry


def test_nvcr_image_without_pull_secret_warns() -> None:
    [verdict] = verdicts.image_pull(ask(image="nvcr.io/nvidia/tao:6"))
    assert verdict.status == WARN and "nvcr.io" in verdict.text
    assert verdicts.image_pull(ask(image="nvcr.io/nvidia/tao:6", image_pull_secret="ngc")) == []


# ------------------------------------------------------------------------------------------- version


def test_an_old_server_refuses_multi_node_and_a_new_one_names_why_it_is_enough() -> None:
    old = parse_server_version(json.loads((FIXTURES / "version-1.27.json").read_text()))
    request = ask(nodes=2, min_version=(1, 28), min_version_feature="multi-node jobs")
    verdict = refusal(verdicts.version(request, old))
    assert isinstance(verdict.error, GateError) and verdict.error.exit_code == 1
    assert verdict.text.startswith("multi-node jobs need Kubernetes >= 1.28 (stable Indexed Job pod hostnames")
    [fine] = verdicts.version(request, ServerVersion(1, 30, 5, "v1.30.5"))
    assert (fine.status, fine.message) == (OK, "Kubernetes v1.30.5 >= 1.28 (stable Indexed Job pod hostnames "
                                                "<job>-<index> for MASTER_ADDR)")
    [probe] = verdicts.nccl_probe(request, "the last NCCL probe hung")
    assert (probe.status, probe.text) == (WARN, "the last NCCL probe hung")
    assert verdicts.nccl_probe(request, None)[0].status == OK


# ------------------------------------------------------------------------------------------- capacity


def test_never_refuses_with_exit_4() -> None:
    verdict = refusal(verdicts.capacity(ask(gpus=12), FitSeen(fit(two_by_eight(), 12, 1))))
    assert isinstance(verdict.error, NeverFitsError) and verdict.error.exit_code == EXIT_NEVER_FITS
    assert "gpu-node-0: 8" in verdict.text


def test_queue_warns_and_fits_is_ok() -> None:
    [queued] = verdicts.capacity(ask(gpus=8), FitSeen(fit(two_by_eight((8, 8)), 8, 1)))
    assert queued.status == WARN and queued.text.startswith("queue: ")
    [fits] = verdicts.capacity(ask(gpus=8), FitSeen(fit(two_by_eight(), 8, 1)))
    assert fits.status == OK and fits.text.startswith("fits: ")


def test_require_fit_now_refuses_a_queue_and_an_unknown_usage() -> None:
    request = ask(gpus=8, require_fit_now=True)
    queued = refusal(verdicts.capacity(request, FitSeen(fit(two_by_eight((8, 8)), 8, 1))))
    assert queued.text.startswith("queue: ") and queued.text.endswith(" (--require-fit-now)")
    unknown = refusal(verdicts.capacity(request, FitSeen(fit(two_by_eight(), 8, 1), usage_known=False)))
    assert unknown.text == (
        "--require-fit-now: cannot tell whether the GPUs are free now, as listing pods in all namespaces is "
        "forbidden; ask for `list pods` cluster-wide, or drop --require-fit-now"
    )


def test_why_dra_gpus_were_not_counted_goes_on_the_verdict() -> None:
    seen = FitSeen(fit(two_by_eight(), 12, 1), "DRA GPUs not counted: forbidden")
    assert refusal(verdicts.capacity(ask(gpus=12), seen)).text.endswith(" (DRA GPUs not counted: forbidden)")
    assert seen.noted.to_dict()["message"].endswith(" (DRA GPUs not counted: forbidden)")


def test_no_capacity_read_or_a_verdict_still_to_settle_says_nothing() -> None:
    assert verdicts.capacity(ask(gpus=8), None) == []
    assert verdicts.capacity(ask(gpus=8), FitSeen(None)) == []


# ------------------------------------------------------------------------------------------- queue


def test_an_inactive_queue_never_fits_when_no_capacity_was_read() -> None:
    quota = QueueQuota("team-cq", 16, inactive="Stopped: by an admin")
    seen = gatefacts.QueueSeen(quota, "team", ("a note",), capacity_known=False)
    found = verdicts.queue(ask(queue="team"), seen)
    assert [v.status for v in found] == [WARN, REFUSE]
    assert isinstance(found[1].error, NeverFitsError)
    assert found[1].text == ("never (until the queue is fixed): ClusterQueue team-cq admits no workload: Stopped: by "
                             "an admin")
    # with the nodes read, the capacity gate says it (its verdict counts the quota)
    assert [v.status for v in verdicts.queue(ask(queue="team"), seen.replaced(capacity_known=True))] == [WARN]


# ------------------------------------------------------------------------------------------- dry run


def test_a_refused_dry_run_names_kubectls_message_and_unreachable_stays_exit_3() -> None:
    [verdict] = verdicts.dry_run(ask(), KubectlError("admission webhook said no"))
    assert verdict.text == ("server dry run refused the job: admission webhook said no; fix that and submit again "
                            "(nothing was created, no record opened)")
    gone = ClusterUnreachableError("cluster unreachable")
    assert verdicts.dry_run_refused(gone) is gone and gone.exit_code == EXIT_UNREACHABLE
    assert verdicts.dry_run(ask(), None) == []
