"""A command line split into words as a POSIX shell splits them, for commands that are never run by a shell
(`--launcher torchrun`: the words become torchrun's arguments).

What the shell language's token rules give (POSIX.1-2017, Shell Command Language 2.2 and 2.3) is kept:
blanks separate words; single quotes keep everything literally; double quotes keep everything but `\\`, which
there escapes only `$`, `` ` ``, `"`, `\\` and a line break; an unquoted backslash keeps the next character
(a backslash-newline joins two lines); an unquoted `#` that starts a word starts a comment to the end of its line
(`train.py # note` is one word), while a `#` inside a word is part of it (`lr#2`).

What only a shell could do is refused with ShellWordsError, saying which character and why, instead of being
passed on as a literal the user did not mean: operators (`;`, `&`, `|`, `<`, `>`, `(`, `)`), a line break
that would start a second command, expansions (`$NAME`, `${...}`, `$(...)`, backquotes; in double quotes
too), unquoted pathname patterns (`*`, `?`, `[`), a leading `~`, and a first word `NAME=VALUE` (a shell would
read it as an assignment). Quoting any of them makes it a literal.
"""

from __future__ import annotations

from collections.abc import Callable

_BLANKS = " \t"
_OPERATORS = ";&|<>()"
_PATTERNS = "*?["
_DOUBLE_QUOTE_ESCAPES = '$`"\\\n'
_PARAMETER_START = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789{(@*#?$!-"


class ShellWordsError(ValueError):
    """A command line that only a shell could run as meant; ``position`` is the 1-based character."""

    def __init__(self, what: str, position: int) -> None:
        super().__init__(f"{what} at character {position}")
        self.what, self.position = what, position


def split_words(text: str) -> list[str]:
    """The words of TEXT (see the module's docstring); ShellWordsError for what needs a shell."""
    words: list[str] = []
    word: list[str] = []
    in_word = False  # a word has started (a quoted empty string '' is a word)
    ended = False  # an unquoted line break ended the command: only blanks, comments and line breaks may follow
    i, n = 0, len(text)

    def finish() -> None:
        nonlocal in_word
        if in_word:
            words.append("".join(word))
            word.clear()
            in_word = False

    def expansion_at(j: int) -> bool:
        return text[j] == "`" or (text[j] == "$" and j + 1 < n and text[j + 1] in _PARAMETER_START)

    while i < n:
        ch = text[i]
        if ch in _BLANKS:
            finish()
            i += 1
            continue
        if ch == "\n":
            finish()
            ended = ended or bool(words)
            i += 1
            continue
        if ch == "#" and not in_word:
            newline = text.find("\n", i)
            i = n if newline < 0 else newline
            continue
        if ended:
            raise ShellWordsError("a second command after a line break (a shell would run it too)", i + 1)
        if ch == "\\":
            if i + 1 < n and text[i + 1] == "\n":  # a line continuation
                i += 2
                continue
            word.append(text[i + 1] if i + 1 < n else "\\")  # a backslash that ends the text stays
            in_word = True
            i += 2
            continue
        if ch == "'":
            close = text.find("'", i + 1)
            if close < 0:
                raise ShellWordsError("a single quote that is never closed", i + 1)
            word.append(text[i + 1 : close])
            in_word = True
            i = close + 1
            continue
        if ch == '"':
            i = _double_quoted(text, i, word, expansion_at)
            in_word = True
            continue
        if ch in _OPERATORS:
            raise ShellWordsError(f"{ch!r}, a shell operator,", i + 1)
        if expansion_at(i):
            raise ShellWordsError(f"{ch!r}, a shell expansion,", i + 1)
        if ch in _PATTERNS:
            raise ShellWordsError(f"{ch!r}, a pathname pattern a shell would expand,", i + 1)
        if ch == "~" and not in_word:
            raise ShellWordsError("'~', a home directory a shell would expand,", i + 1)
        if ch == "=" and not words and in_word and _is_name("".join(word)):
            raise ShellWordsError("'=' (a shell would read the first word as a variable assignment)", i + 1)
        word.append(ch)
        in_word = True
        i += 1
    finish()
    return words


def _double_quoted(text: str, start: int, word: list[str], expansion_at: Callable[[int], bool]) -> int:
    """Read the double-quoted part that starts at START into WORD; return the index after its closing quote."""
    i, n = start + 1, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            return i + 1
        if ch == "\\" and i + 1 < n and text[i + 1] in _DOUBLE_QUOTE_ESCAPES:
            if text[i + 1] != "\n":
                word.append(text[i + 1])
            i += 2
            continue
        if expansion_at(i):
            raise ShellWordsError(f"{ch!r}, a shell expansion inside double quotes,", i + 1)
        word.append(ch)
        i += 1
    raise ShellWordsError("a double quote that is never closed", start + 1)


def _is_name(text: str) -> bool:
    return bool(text) and not text[0].isdigit() and all(c.isascii() and (c.isalnum() or c == "_") for c in text)
