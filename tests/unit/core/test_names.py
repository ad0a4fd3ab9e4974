"""names.py: DNS names, record id -> Job name, paths, env names, S3 URIs, images."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubectl_tao.core import names
from kubectl_tao.core.errors import UsageError


def _fails(func, value, field, fragment):
    with pytest.raises(UsageError) as info:
        func(value, field)
    assert fragment in str(info.value)
    assert field in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("value", ["a", "job-1", "0abc", "a" * 63])
def test_dns_label_accepts_rfc1123_labels(value):
    assert names.validate_dns_label(value, "namespace") == value


@pytest.mark.parametrize("value", ["A", "-a", "a-", "a_b", "a.b", "a" * 64, "é"])
def test_dns_label_rejects_others_naming_the_field(value):
    _fails(names.validate_dns_label, value, "namespace", "is not a valid DNS label")


def test_dns_label_rejects_empty_and_non_strings():
    _fails(names.validate_dns_label, "", "namespace", "must not be empty")
    _fails(names.validate_dns_label, 7, "namespace", "must be a string")
    _fails(names.validate_dns_label, "a\x00", "namespace", "NUL")


@pytest.mark.parametrize("value", ["data", "tao-creds.v1", "a.b.c", "a" * 63 + "." + "b" * 63])
def test_dns_subdomain_accepts_dotted_labels(value):
    assert names.validate_dns_subdomain(value, "pvc") == value


@pytest.mark.parametrize("value", ["a..b", ".a", "a.", "A.b", "a_b", "a-.b", ("a" * 63 + ".") * 4 + "a"])
def test_dns_subdomain_rejects_bad_names(value):
    _fails(names.validate_dns_subdomain, value, "pvc", "is not a valid Kubernetes name")


def test_service_name_must_start_with_a_letter():
    assert names.validate_service_name("job-1", "job name") == "job-1"
    _fails(names.validate_service_name, "1job", "job name", "must start with a letter")


def test_job_name_keeps_headroom_for_pod_hostnames():
    assert names.validate_job_name("a" * 52) == "a" * 52
    with pytest.raises(UsageError, match="use at most 52"):
        names.validate_job_name("a" * 53)


def test_kubernetes_job_name_keeps_a_safe_short_id():
    assert names.kubernetes_job_name("dino-train-1a2b3c") == "dino-train-1a2b3c"
    assert names.kubernetes_job_name("a" * 52) == "a" * 52


def test_kubernetes_job_name_slugs_and_hashes_an_unsafe_id():
    record_id = "Dino_train-1A2B3C"
    digest = hashlib.sha256(record_id.encode()).hexdigest()[:10]
    assert names.kubernetes_job_name(record_id) == f"dino-train-1a2b3c-{digest}"


def test_kubernetes_job_name_hashes_a_long_id_to_52_characters():
    name = names.kubernetes_job_name("x" * 53)
    assert len(name) == 52
    assert name.startswith("x" * 41 + "-")


def test_kubernetes_job_name_never_merges_ids_with_the_same_slug():
    assert names.kubernetes_job_name("a_b") != names.kubernetes_job_name("a.b")
    assert names.kubernetes_job_name("A-b") != names.kubernetes_job_name("a-B")


def test_kubernetes_job_name_of_an_id_without_letters_or_digits():
    assert names.kubernetes_job_name("___").startswith("tao-job-")


def test_kubernetes_job_name_rejects_empty_and_nul():
    with pytest.raises(UsageError, match="job id must not be empty"):
        names.kubernetes_job_name("")
    with pytest.raises(UsageError, match="job id must not contain a NUL"):
        names.kubernetes_job_name("a\x00b")


@given(st.text(min_size=1).filter(lambda s: "\x00" not in s))
def test_kubernetes_job_name_is_always_a_short_dns_label(record_id):
    name = names.kubernetes_job_name(record_id)
    assert names.DNS_LABEL_RE.fullmatch(name)
    assert len(name) <= names.JOB_NAME_MAX
    assert names.kubernetes_job_name(record_id) == name


@given(st.text(min_size=1).filter(lambda s: "\x00" not in s), st.text(min_size=1).filter(lambda s: "\x00" not in s))
def test_distinct_ids_get_distinct_names(first, second):
    if first != second:
        assert names.kubernetes_job_name(first) != names.kubernetes_job_name(second)


def test_secret_name_for_prefixes_the_job_name():
    assert names.secret_name_for("dino-1") == "tao-creds-dino-1"
    assert len(names.secret_name_for("a" * 52)) == 62


def test_secret_name_for_a_long_job_name_stays_a_label():
    secret = names.secret_name_for("a" * 63)
    assert len(secret) <= 63
    assert names.DNS_LABEL_RE.fullmatch(secret)
    assert secret != names.secret_name_for("a" * 62 + "b")


@pytest.mark.parametrize("value", ["/workspace", "/workspace/results/run-1", "/a b/c"])
def test_abs_path_accepts_normalized_absolute_paths(value):
    assert names.validate_abs_path(value, "results dir") == value


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("workspace", "must be an absolute path"),
        ("/", "must be an absolute path below '/'"),
        ("/a/../b", "must be a normalized path"),
        ("/a//b", "must be a normalized path"),
        ("/a/", "must be a normalized path"),
        ("/a/./b", "must be a normalized path"),
        ("/..", "must be a normalized path"),
        ("/a\nb", "control characters"),
        ("/a\\b", "backslashes"),
        ("/a\x7fb", "control characters"),
    ],
)
def test_abs_path_rejects(value, fragment):
    _fails(names.validate_abs_path, value, "results dir", fragment)


def test_abs_path_rejects_nul():
    _fails(names.validate_abs_path, "/a\x00", "results dir", "NUL")


@pytest.mark.parametrize("value", ["a", "jobs/run-1/coco", "a.b/c-d"])
def test_sub_path_accepts_relative_paths(value):
    assert names.validate_sub_path(value, "sub_path") == value


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("/a", "without a leading '/'"),
        ("..", "normalized relative path"),
        (".", "normalized relative path"),
        ("../a", "normalized relative path"),
        ("a/../b", "normalized relative path"),
        ("a//b", "normalized relative path"),
        ("a/", "normalized relative path"),
        ("a\tb", "control characters"),
    ],
)
def test_sub_path_rejects(value, fragment):
    _fails(names.validate_sub_path, value, "sub_path", fragment)


def test_is_under():
    assert names.is_under("/workspace", "/workspace")
    assert names.is_under("/workspace/r", "/workspace")
    assert not names.is_under("/workspace2", "/workspace")


@pytest.mark.parametrize("value", ["A", "_x", "HF_TOKEN", "a1"])
def test_env_name_accepts_shell_names(value):
    assert names.validate_env_name(value, "forward_env") == value


@pytest.mark.parametrize("value", ["1A", "A-B", "A B", "A=B"])
def test_env_name_rejects_others(value):
    _fails(names.validate_env_name, value, "forward_env", "is not a valid environment variable name")


@pytest.mark.parametrize("value", ["s3://bucket", "s3://bucket/", "s3://my.bucket-1/a/b.zip", "s3://bkt/prefix/"])
def test_s3_uri_accepts(value):
    assert names.validate_s3_uri(value, "s3 output") == value


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("https://bucket/a", "must be an S3 URI"),
        ("s3://Bucket/a", "invalid bucket name"),
        ("s3://ab/a", "invalid bucket name"),
        ("s3://a..b/a", "invalid bucket name"),
        ("s3://bucket/a b", "whitespace"),
        ("s3://bucket/a/../b", "'..' path segments"),
        ("s3://bucket/a//b", "empty"),
    ],
)
def test_s3_uri_rejects(value, fragment):
    _fails(names.validate_s3_uri, value, "s3 output", fragment)


def test_s3_input_name_is_the_last_segment_or_the_bucket():
    assert names.s3_input_name("s3://bkt/data/train/") == "train"
    assert names.s3_input_name("s3://bkt/data/x.zip") == "x.zip"
    assert names.s3_input_name("s3://bkt/") == "bkt"


@pytest.mark.parametrize("value", ["busybox", "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt", "repo@sha256:" + "a" * 64])
def test_image_accepts_references(value):
    assert names.validate_image(value) == value


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("busy box", "whitespace"),
        ("a\nb", "whitespace"),
        ("-rm", "is not an image reference"),
        ("", "must not be empty"),
    ],
)
def test_image_rejects(value, fragment):
    _fails(names.validate_image, value, "image", fragment)


def test_label_values_and_qualified_names():
    assert names.is_label_value("")
    assert names.is_label_value("Dino_train.1")
    assert not names.is_label_value("a_")
    assert not names.is_label_value("a" * 64)
    assert names.validate_qualified_name("example.com/key_1", "label key") == "example.com/key_1"
    _fails(names.validate_qualified_name, "Example.com/key", "label key", "invalid prefix")
    _fails(names.validate_qualified_name, "/key", "label key", "invalid prefix")
    _fails(names.validate_qualified_name, "key-", "label key", "is not a valid key")
    _fails(names.validate_label_value, "bad value", "label value", "is not a valid label value")
