"""No shell pipeline ends in a reader that can stop reading early.

Under `set -o pipefail`, `writer | grep -q x` (or `| head`, `| sed ... q`, `| awk ... exit`) returns 141 when the
reader exits before the writer has written everything: the writer dies of SIGPIPE and its status becomes the
pipeline's. Whether that happens depends on timing and output size, so a decision taken on such a pipeline is
taken by chance. The scripts capture the writer's output first and test the captured text instead
(`out=$(writer)`, then `grep -q x <<<"$out"`), or use a reader that reads all its input (`sed -n 1p`, `grep -c`).
This test finds the shape in every shell file of the tree and in the Makefile's recipes.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
from support import ROOT

SHELLS = re.compile(r"^#!\s*(?:/usr/bin/env\s+)?(?:/bin/|/usr/bin/)?(?:ba)?sh\s*$")
# grep options that make it stop at the first match (or after N): quiet, max count, list files
GREP_EARLY = {"q", "m", "l", "L"}
GREP_ARG = {"e", "f", "m", "A", "B", "C", "d", "D"}
GREP_LONG_EARLY = ("--quiet", "--silent", "--max-count", "--files-with-matches", "--files-without-match")
SED_SUBST = re.compile(r"s(.)(?:\\.|(?!\1).)*\1(?:\\.|(?!\1).)*\1[gpiImMe0-9w]*")
SED_ADDRESS = re.compile(r"/(?:\\.|[^/])*/")


def _shell_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "scripts", "templates", "cluster", ".ci", "kubectl-tao"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    files = []
    for name in sorted(filter(None, listed.split("\0"))):
        path = ROOT / name
        if not path.is_file() or path.suffix == ".py":
            continue
        with path.open("rb") as handle:
            first = handle.readline().decode("utf-8", "replace").rstrip("\n")
        if path.suffix in (".sh", ".bash") or SHELLS.match(first):
            files.append(path)
    return files


def _shell_text(path: Path) -> str:
    """The shell of a file; for an sh/Python polyglot, only the lines before Python takes over."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    if "''':'" in lines:
        start = lines.index("''':'")
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("'''")), len(lines))
        return "\n" * (start + 1) + "\n".join(lines[start + 1 : end])
    return text


def _makefile_recipes() -> str:
    lines = (ROOT / "Makefile").read_text(encoding="utf-8").split("\n")
    return "\n".join(line[1:].replace("$$", "$") for line in lines if line.startswith("\t"))


def _pipe_readers(text: str) -> list[tuple[int, str]]:
    """(line, command text) of every command that reads a pipe (`a | b`: b), outside quotes, comments and heredocs."""
    found: list[tuple[int, int]] = []  # (start of the reader, nesting depth)
    stack = ["code"]  # code | sq | dq | sub (inside $( )) | paren
    heredocs: list[tuple[str, bool]] = []  # (delimiter, quoted)
    readers: list[tuple[int, str]] = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        top = stack[-1]
        if top == "sq":
            if c == "'":
                stack.pop()
            i += 1
            continue
        if top == "dq":
            if c == "\\":
                i += 2
                continue
            if c == '"':
                stack.pop()
            elif text.startswith("$(", i):
                stack.append("sub")
                i += 2
                continue
            i += 1
            continue
        if c == "\\":
            i += 2
            continue
        if c == "'":
            stack.append("sq")
        elif c == '"':
            stack.append("dq")
        elif c == "#" and (i == 0 or text[i - 1] in " \t\n;&|("):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c == "\n" and heredocs:
            i += 1
            while heredocs and i < n:
                end = text.find("\n", i)
                end = n if end < 0 else end
                delimiter, quoted = heredocs[0]
                if text[i:end].strip() == delimiter:
                    heredocs.pop(0)
                elif not quoted:  # an unquoted heredoc runs its command substitutions
                    line = text.count("\n", 0, i)
                    for inner in _substitutions(text[i:end]):
                        readers += [(line + k, cmd) for k, cmd in _pipe_readers(inner)]
                i = end + 1
            continue
        elif text.startswith("<<<", i):
            i += 3
            continue
        elif text.startswith("<<", i):
            match = re.match(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1", text[i:])
            if match:
                heredocs.append((match.group(2), bool(match.group(1)) or "\\" in match.group(0)))
                i += match.end()
                continue
        elif text.startswith("$(", i):
            stack.append("sub")
            i += 2
            continue
        elif c == "(":
            stack.append("paren")
        elif c == ")" and top in ("sub", "paren"):
            stack.pop()
        elif c == "|":
            if text.startswith("||", i):
                i += 2
                continue
            start = i + (2 if text.startswith("|&", i) else 1)
            found.append((start, len(stack)))
        i += 1
    for start, _depth in found:
        line = text.count("\n", 0, start) + 1
        readers.append((line, _command_at(text, start)))
    return sorted(readers)


def _substitutions(line: str) -> list[str]:
    """The text inside each `$( )` of a heredoc line."""
    inner = []
    start = line.find("$(")
    while start >= 0:
        depth = 0
        for end in range(start + 1, len(line)):
            depth += {"(": 1, ")": -1}.get(line[end], 0)
            if depth == 0:
                inner.append(line[start + 2 : end])
                break
        start = line.find("$(", start + 2)
    return inner


def _command_at(text: str, start: int) -> str:
    """The words of the simple command starting at `start` (up to the next unquoted ; & | ) or newline)."""
    rest = text[start:].replace("\\\n", " ").lstrip()
    lexer = shlex.shlex(rest, posix=True, punctuation_chars=";&|()\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    words = []
    try:
        for word in lexer:
            if word and set(word) <= set(";&|()\n"):
                break
            words.append(word)
    except ValueError:
        pass
    return shlex.join(words)


def _stops_early(command: str) -> bool:
    words = shlex.split(command)
    if not words:
        return False
    name = words[0].rsplit("/", 1)[-1]
    args = words[1:]
    if name == "head":
        return True
    if name in ("grep", "egrep", "fgrep"):
        return _grep_stops_early(args)
    if name == "sed":
        return any(_sed_quits(script) for script in _sed_scripts(args))
    if name in ("awk", "gawk", "mawk"):
        return any(re.search(r"\bexit\b", arg) for arg in args)
    return False


def _grep_stops_early(args: list[str]) -> bool:
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg == "--":
            return False
        if arg.startswith("--"):
            if arg.startswith(GREP_LONG_EARLY):
                return True
            continue
        if arg.startswith("-") and len(arg) > 1:
            for k, flag in enumerate(arg[1:], start=1):
                if flag in GREP_EARLY:
                    return True
                if flag in GREP_ARG:
                    skip = k == len(arg) - 1
                    break
    return False


def _sed_scripts(args: list[str]) -> list[str]:
    scripts = []
    expect = False
    for arg in args:
        if expect:
            scripts.append(arg)
            expect = False
        elif arg in ("-e", "--expression"):
            expect = True
        elif arg.startswith("--expression="):
            scripts.append(arg.split("=", 1)[1])
        elif not arg.startswith("-") and not scripts:
            scripts.append(arg)
    return scripts


def _sed_quits(script: str) -> bool:
    bare = SED_ADDRESS.sub("", SED_SUBST.sub("", script))
    return re.search(r"(?<![A-Za-z])[qQ](?![A-Za-z])", bare) is not None


def _offenders(label: str, text: str) -> list[str]:
    return [f"{label}:{line}: | {cmd}" for line, cmd in _pipe_readers(text) if _stops_early(cmd)]


def test_the_shell_files_are_found() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in _shell_files()}
    assert {"scripts/demo", "templates/k8s/rendezvous-barrier.sh", "scripts/local-cluster-health.sh"} <= names
    assert "scripts/render_job" in names  # an sh/Python polyglot: its sh lines are read


@pytest.mark.parametrize(
    ("snippet", "stops"),
    [
        ("kubectl get nodes -o name | grep -q .", True),
        ("x --version | grep -qx 'Kubernetes v1'", True),
        ("x | grep -Eq 'a|b'", True),
        ("x | grep --quiet a", True),
        ("x | grep -m1 a", True),
        ("x |\n  head -n 1", True),
        ("x | sed -n 's/a/b/p;q'", True),
        ("x | sed 1q", True),
        ("x | awk 'NR == 1 {print; exit}'", True),
        ('v="$(x | head -n 1)"', True),
        ("x | sed -n 's/.*release \\([0-9]*\\).*/\\1/p' | head -n 1", True),
        ("x | grep -c a", False),
        ("x | grep -e -q", False),
        ("x | sed -n 1p", False),
        ("x | sed -n 's/quit/q/p'", False),
        ("x || grep -q a file", False),
        ('grep -q a <<<"$out"', False),
        ("echo 'a | head'", False),
        ("echo x  # a | head -n 1", False),
        ("cat <<'EOF'\nx | head -n 1 $(y | head)\nEOF\necho ok", False),
        ("cat <<EOF\nx | head -n 1\nEOF\necho ok", False),
        ("cat <<EOF\nversion $(x | head -n 1 || echo '?')\nEOF", True),
    ],
)
def test_the_shape_is_recognised(snippet: str, stops: bool) -> None:
    assert bool(_offenders("snippet", snippet)) is stops


def test_no_pipeline_ends_in_a_reader_that_stops_early() -> None:
    offenders = []
    for path in _shell_files():
        offenders += _offenders(path.relative_to(ROOT).as_posix(), _shell_text(path))
    offenders += _offenders("Makefile", _makefile_recipes())
    assert offenders == []
