"""core/shellwords.py: `--launcher torchrun --command` split the way a POSIX shell splits words, comments
included, or refused naming the character (issue 26, item 6). Accepted texts are checked against /bin/sh."""

from __future__ import annotations

import re
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_tao.core.shellwords import ShellWordsError, split_words


def shell_words(text: str) -> list[str]:
    """What /bin/sh makes of TEXT as a command line: its words (no globbing: `set -f`). Leading blank and comment
    lines are empty commands to a shell, so they are left out of the `set --` line that collects the words."""
    while True:  # a leading line of blanks and line continuations, or a comment, is an empty command
        blank = re.match(r"(?:[ \t]|\\\n)*(?:#[^\n]*)?\n", text)
        if not blank:
            break
        text = text[blank.end() :]
    script = "set -f\ntrap 'for a; do printf \"%s\\0\" \"$a\"; done' EXIT\nset -- " + text
    out = subprocess.run(["/bin/sh", "-c", script], capture_output=True, check=True, timeout=30).stdout
    return out.decode().split("\0")[:-1]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("train.py # note", ["train.py"]),
        ("train.py --lr 1e-3 # a comment with 'quotes' and $VARS", ["train.py", "--lr", "1e-3"]),
        ("train.py --tag lr#2", ["train.py", "--tag", "lr#2"]),
        ("train.py '#not-a-comment'", ["train.py", "#not-a-comment"]),
        ("train.py \\#x", ["train.py", "#x"]),
        ("train.py --name 'two words' --data \"/my data\"", ["train.py", "--name", "two words", "--data", "/my data"]),
        ("train.py --msg \"say \\\"hi\\\" \\$5 \\x\"", ["train.py", "--msg", 'say "hi" $5 \\x']),
        ("train.py --empty ''", ["train.py", "--empty", ""]),
        ("train.py \\\n  --epochs 3", ["train.py", "--epochs", "3"]),
        ("train.py --epochs 3  # note\n", ["train.py", "--epochs", "3"]),
        ("\n  train.py\t--x=1\n# trailing comment\n", ["train.py", "--x=1"]),
        ("train.py --price $ 5", ["train.py", "--price", "$", "5"]),
        ("train.py --opt a=b", ["train.py", "--opt", "a=b"]),
    ],
)
def test_words_are_what_a_shell_makes_of_them(text: str, words: list[str]) -> None:
    assert split_words(text) == words
    assert shell_words(text) == words


@pytest.mark.parametrize(
    ("text", "what", "position"),
    [
        ("train.py; rm -rf /", "';', a shell operator,", 9),
        ("train.py && echo done", "'&', a shell operator,", 10),
        ("train.py | tee log", "'|', a shell operator,", 10),
        ("train.py > out.txt", "'>', a shell operator,", 10),
        ("train.py --out $RESULTS", "'$', a shell expansion,", 16),
        ("train.py --out ${RESULTS}/x", "'$', a shell expansion,", 16),
        ("train.py --host $(hostname)", "'$', a shell expansion,", 17),
        ("train.py --id `id -u`", "'`', a shell expansion,", 15),
        ('train.py --out "$RESULTS"', "'$', a shell expansion inside double quotes,", 17),
        ("train.py --files *.jpg", "'*', a pathname pattern a shell would expand,", 18),
        ("train.py --cfg ~/cfg.yaml", "'~', a home directory a shell would expand,", 16),
        ("CUDA_VISIBLE_DEVICES=0 train.py", "'=' (a shell would read the first word as a variable assignment)", 21),
        ("train.py\n--epochs 3", "a second command after a line break (a shell would run it too)", 10),
        ("train.py 'open", "a single quote that is never closed", 10),
        ('train.py "open', "a double quote that is never closed", 10),
    ],
)
def test_what_only_a_shell_could_do_is_refused_naming_the_character(text: str, what: str, position: int) -> None:
    with pytest.raises(ShellWordsError) as info:
        split_words(text)
    assert (info.value.what, info.value.position) == (what, position)
    assert str(info.value) == f"{what} at character {position}"


def test_quoting_makes_each_of_them_a_literal() -> None:
    text = "train.py ';' '&&' '$HOME' '*.jpg' '~/x' '`id`' \"a;b|c\" 'A=1'"
    literal = ["train.py", ";", "&&", "$HOME", "*.jpg", "~/x", "`id`", "a;b|c", "A=1"]
    assert split_words(text) == shell_words(text) == literal


WORDISH = st.text(st.sampled_from(list("ab-_.=/:,@%+#'\"\\ \t\n")), max_size=30)


@settings(max_examples=200, deadline=None)
@given(WORDISH)
def test_whatever_is_accepted_splits_as_the_shell_splits_it(text: str) -> None:
    try:
        words = split_words(text)
    except ShellWordsError:
        return
    assert words == shell_words(text)
