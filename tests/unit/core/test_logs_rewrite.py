from __future__ import annotations

import pytest
from support.fake_kubectl import kubectl_logs

from kubectl_tao.core.errors import GateError
from kubectl_tao.core.logs import from_history, kubectl_args, rank_of, rewrite


def test_rank_comes_from_the_indexed_pod_name() -> None:
    assert rank_of("train-ab12-1-x7k2p", "train-ab12") == "1"
    assert rank_of("train-ab12-x7k2p", "train-ab12") is None


def test_multi_node_lines_get_a_rank_prefix() -> None:
    lines = ["[pod/j-0-abcde/tao] hello", "[pod/j-1-fghij/tao] world", "no prefix"]
    assert list(rewrite(lines, "j", multi=True)) == ["[rank 0] hello", "[rank 1] world", "no prefix"]


def test_single_pod_lines_lose_the_prefix() -> None:
    assert list(rewrite(["[pod/j-abcde/tao] hello"], "j", multi=False)) == ["hello"]


def test_rank_selector_and_tail() -> None:
    args = kubectl_args("ns", "j", tail=5, follow=True, rank=1, nodes=2)
    assert "tao-job=j,batch.kubernetes.io/job-completion-index=1" in args
    assert "--tail=5" in args and "--follow" in args


def test_history_is_given_per_rank() -> None:
    ranks = [(0, ["a"]), (1, ["b", "c"])]
    assert from_history(ranks, rank=1, multi=True) == ["[rank 1] b", "[rank 1] c"]


def test_no_history_after_ttl_says_so() -> None:
    with pytest.raises(GateError, match="no log tail was captured"):
        from_history([], rank=None, multi=False)


def test_logs_keeps_a_line_with_its_rank_when_a_log_ends_without_a_newline() -> None:
    texts = {"j-0-aaaaa": "progress 99%", "j-1-bbbbb": "[rank1]: RuntimeError: boom\nnext\n"}
    out = kubectl_logs(texts, ["logs", "-l", "tao-job=j", "--prefix", "--tail=200"]).stdout
    lines = out.removesuffix("\n").split("\n")
    assert list(rewrite(lines, "j", True)) == ["[rank 0] progress 99%[pod/j-1-bbbbb/tao] [rank1]: RuntimeError: boom",
                                               "[rank 1] next"]  # what kubectl printed, without the pods' names
    assert list(rewrite(lines, "j", True, set(texts))) == [
        "[rank 0] progress 99%", "[rank 1] [rank1]: RuntimeError: boom", "[rank 1] next"]
    many = "[pod/j-0-aaaaa/tao] a" + "[pod/j-1-bbbbb/tao] b[pod/j-0-aaaaa/tao] c" * 3
    assert list(rewrite([many], "j", True, set(texts))) == ["[rank 0] a"] + ["[rank 1] b", "[rank 0] c"] * 3
