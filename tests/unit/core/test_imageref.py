"""Image references read as the container runtime reads them (distribution/reference's grammar): what it refuses
is refused with exit 2 naming --image, a reference without a tag is accepted with a warning naming `:latest`."""

from __future__ import annotations

from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl

from kubectl_tao.core import errors, imageref

DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize(
    "image",
    [
        "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt",
        "busybox:1.36",
        "library/ubuntu:22.04",
        "localhost:5000/team/train:v1",
        "registry.example.com:443/a__b/c--d/e.f_g:TAG_1.0-rc",
        "[::1]:5000/x:1",
        f"nvcr.io/nvidia/pytorch@{DIGEST}",
        f"nvcr.io/nvidia/pytorch:25.01-py3@{DIGEST}",
        "Registry.Example.com/x/y:1",  # the registry host is not case-sensitive
        "x:" + "t" * 128,
    ],
)
def test_references_the_runtime_pulls_are_accepted(image: str) -> None:
    assert imageref.check(image) is None


@pytest.mark.parametrize(
    "image",
    [
        "a..b:1",  # two dots in a row
        "a/-b:1",  # a component starts with a separator
        "a/b-:1",  # ... or ends with one
        "a/b:",  # an empty tag
        "a/b:-x",  # a tag starts with a word character
        "x:" + "t" * 129,  # a tag is at most 128 characters
        "a:b:c",
        "a/b@sha256:abc",  # a digest has at least 32 hex digits
        "a/b@:" + "0" * 32,
        "host:port/x:1",
        "a//b:1",
    ],
)
def test_references_the_runtime_refuses_are_refused_naming_the_flag(image: str) -> None:
    with pytest.raises(errors.UsageError) as caught:
        imageref.check(image)
    assert caught.value.message == (
        "--image is not an image reference the container runtime reads: use [REGISTRY[:PORT]/]PATH[:TAG][@DIGEST] "
        "with a lower-case PATH, e.g. nvcr.io/nvidia/pytorch:25.01-py3"
    )


UPPER = (
    "the repository path must be lower-case (character {at} is an upper-case letter), as the container runtime "
    "reads it; write the path in lower case (the registry host and the tag may keep theirs)"
)


@pytest.mark.parametrize(
    ("image", "at"),
    [
        ("nvcr.io/NVIDIA/PyTorch:25.01-py3", 9),
        ("Ubuntu:22.04", 1),
        ("localhost:5000/Team/x:V1", 16),
        ("Registry.Example.com/x/Y:1", 24),  # the host's capitals are fine: the first one in the path counts
    ],
)
def test_upper_case_path_letters_are_refused_naming_the_first(image: str, at: int) -> None:
    with pytest.raises(errors.UsageError) as caught:
        imageref.check(image)
    assert caught.value.message == "--image: " + UPPER.format(at=at)
    assert image not in caught.value.message


def test_a_name_over_255_characters_is_refused() -> None:
    with pytest.raises(errors.UsageError, match="longer than 255 characters"):
        imageref.check("a/" + "b" * 254 + ":1")


def test_no_tag_is_a_warning_naming_latest() -> None:
    assert imageref.check("nvcr.io/nvidia/pytorch") == (
        "--image has no tag: the container runtime pulls it as :latest, which can change between ranks and "
        "restarts; pin a tag or a digest"
    )
    assert imageref.check(f"nvcr.io/nvidia/pytorch@{DIGEST}") is None


RENDER = ["render", "--command", "true", "--gpus", "0", "--pvc", "data"]


def test_render_refuses_an_upper_case_image_in_one_line(cli: Any, fake_kubectl: FakeKubectl) -> None:
    code, out, err = cli(*RENDER, "--image", "nvcr.io/NVIDIA/pytorch:25.01-py3")
    assert (code, out) == (errors.EXIT_USAGE, "")
    assert err == "error: --image: " + UPPER.format(at=9) + "\n"
    assert fake_kubectl.calls == []


def test_submit_refuses_an_upper_case_image_before_the_cluster(cli: Any, fake_kubectl: FakeKubectl) -> None:
    code, _, err = cli("submit", *RENDER[1:], "--image", "Busybox:1.36")
    assert code == errors.EXIT_USAGE
    assert err == "error: --image: " + UPPER.format(at=1) + "\n"
    assert fake_kubectl.calls == []


def test_render_warns_of_an_image_without_a_tag_and_renders_it(cli: Any) -> None:
    code, out, err = cli(*RENDER, "--image", "busybox")
    assert code == 0
    assert "image: busybox\n" in out
    assert err.splitlines()[0] == (
        "warning: --image has no tag: the container runtime pulls it as :latest, which can change between ranks "
        "and restarts; pin a tag or a digest"
    )


def test_an_action_request_image_follows_the_same_grammar() -> None:
    from kubectl_tao.core import names

    with pytest.raises(errors.UsageError) as caught:
        names.validate_image("Nvcr.io/X:1", "spec_bundle.image")
    assert caught.value.message == "spec_bundle.image: " + UPPER.format(at=9)


@pytest.mark.parametrize("verb", ["render", "submit"])
def test_bad_input_beside_an_untagged_image_is_one_line_without_the_warning(
    cli: Any, fake_kubectl: FakeKubectl, verb: str
) -> None:
    code, out, err = cli(verb, "--image", "busybox", "--command", "true", "--storage-tier", "Z")
    assert (code, out) == (errors.EXIT_USAGE, "")
    assert err == "error: --storage-tier 'Z': use A (a bound PVC) or C (S3 in the pod)\n"
    assert fake_kubectl.calls == []
