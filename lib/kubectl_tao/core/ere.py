"""A Python regular expression written as a POSIX extended regular expression (`grep -E`), when it can be.

Pure. ``to_ere(pattern)`` gives the ERE that finds the same lines as ``re.search`` of PATTERN (compiled with
``re.ASCII``) finds in the text `grep -E` reads in the C locale, byte for character (``LC_ALL=C``: ``.`` and a
negated bracket take any byte, an invalid one included; ``[[:space:]]`` is ASCII's six), or ``None`` when
PATTERN uses what ERE cannot say exactly: flags (but ``re.ASCII``), lookaround, backreferences, ``\\b`` (but
at the very start or end, next to a literal word character), lazy quantifiers, named or inline groups, an anchor
inside the pattern (a ``$`` may close groups at its end). What is translated: literals and escaped punctuation,
``.``, groups (``(?:...)`` becomes ``(...)``), ``|``, ``* + ? {m,n}``, a leading ``^`` and a trailing ``$``,
``\\d \\w \\s \\S \\D \\W`` (as ``[0-9]``, ``[A-Za-z0-9_]``, ``[[:space:]]``, ...) and bracket expressions
(``[^\\]]`` becomes ``[^]]``: a backslash is literal inside an ERE's brackets).
"""

from __future__ import annotations

import re

_ESCAPES = {
    "d": "[0-9]",
    "D": "[^0-9]",
    "w": "[A-Za-z0-9_]",
    "W": "[^A-Za-z0-9_]",
    "s": "[[:space:]]",
    "S": "[^[:space:]]",
}
_IN_BRACKET = {"d": "0-9", "w": "A-Za-z0-9_", "s": "[:space:]"}
_SPECIAL = set(".[](){}*+?|^$\\")
_PUNCTUATION = set("-/:'\"`,=<>#&!%@~; _")  # escaped in Python, literal in both
_QUANTIFIER = re.compile(r"\{(\d{1,3})(?:(,)(\d{0,3}))?\}")


def to_ere(pattern: str, flags: int = 0) -> str | None:
    """PATTERN (compiled with FLAGS) as an ERE that matches the same lines, or None when there is none exactly."""
    if flags & ~(re.UNICODE | re.ASCII):
        return None
    # A word boundary only at the very start or end, next to a literal word character: for "is there a match",
    # `\bX` is `(^|[^A-Za-z0-9_])X` and `X\b` is `X([^A-Za-z0-9_]|$)`.
    head = tail = ""
    if pattern.startswith("\\b") and _WORD.match(pattern[2:3]) and pattern[3:4] not in ("*", "?", "{"):
        head, pattern = "(^|[^A-Za-z0-9_])", pattern[2:]
    if pattern.endswith("\\b") and _WORD.match(pattern[-3:-2]) and pattern[-4:-3] != "\\":
        tail, pattern = "([^A-Za-z0-9_]|$)", pattern[:-2]
    body = _translate(pattern)
    return None if body is None else head + body + tail


_WORD = re.compile(r"[A-Za-z0-9_]")


def _translate(pattern: str) -> str | None:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                return None
            e = pattern[i + 1]
            if e in _ESCAPES:
                out.append(_ESCAPES[e])
            elif e in _SPECIAL:
                out.append("\\" + e)
            elif e in _PUNCTUATION:
                out.append(e)
            else:
                return None
            i += 2
        elif c == "[":
            end, text = _bracket(pattern, i)
            if text is None:
                return None
            out.append(text)
            i = end
        elif c == "(":
            if pattern.startswith("(?:", i):
                i += 3
            elif pattern.startswith("(?", i):
                return None
            else:
                i += 1
            if i < n and pattern[i] in "|)*+?{":
                return None
            out.append("(")
        elif c == "|":
            if i == 0 or i + 1 >= n or pattern[i + 1] in "|)" or pattern[i - 1] == "(":
                return None
            out.append("|")
        elif c in "*+?":
            if not out or (i + 1 < n and pattern[i + 1] in "?+*{"):
                return None
            out.append(c)
            i += 1
            continue
        elif c == "{":
            m = _QUANTIFIER.match(pattern, i)
            if m is None or not out or (m.end() < n and pattern[m.end()] in "?+*{"):
                return None
            if m.group(3) and int(m.group(3)) < int(m.group(1)):
                return None
            out.append(m.group(0))
            i = m.end()
            continue
        elif c == "}":
            return None
        elif c == "^":
            if i != 0:
                return None
            out.append("^")
        elif c == "$":
            if pattern[i + 1 :].strip(")"):
                return None  # an anchor only at the end (closing groups may follow: `(?::|$)`)
            out.append("$")
        else:
            out.append(c)
        if c not in "\\[(":
            i += 1
    return "".join(out)


def _bracket(pattern: str, start: int) -> tuple[int, str | None]:
    """The bracket expression at START: (the index after it, its ERE) or (_, None)."""
    i, n = start + 1, len(pattern)
    negate = i < n and pattern[i] == "^"
    if negate:
        i += 1
    items: list[str] = []
    close = hyphen = caret = backslash = False
    while i < n and pattern[i] != "]":
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                return i, None
            e = pattern[i + 1]
            i += 2
            if e in _IN_BRACKET:
                items.append(_IN_BRACKET[e])
                continue
            if e == "]":
                close = True
            elif e == "-":
                hyphen = True
            elif e == "^":
                caret = True
            elif e == "\\":
                backslash = True
            elif e in _SPECIAL or e in _PUNCTUATION:
                items.append(e)
            else:
                return i, None
            continue
        if c == "[":
            return i, None  # a literal '[' could open an ERE class name ([:alpha:])
        if c == "-":
            if not items or i + 1 >= n or pattern[i + 1] == "]":
                hyphen = True
                i += 1
                continue
            low, high = items[-1], pattern[i + 1]
            if len(low) != 1 or high in "\\[]" or low > high:
                return i, None
            items[-1] = f"{low}-{high}"
            i += 2
            continue
        if c == "^":
            caret = True
        else:
            items.append(c)
        i += 1
    if i >= n or (not items and not close and not hyphen and not caret and not backslash):
        return i, None
    body = ("]" if close else "") + "".join(items) + ("\\" if backslash else "") + ("^" if caret else "")
    if body.startswith("^"):
        return i, None  # only a caret: cannot be written after '[' without negating
    body += "-" if hyphen else ""
    return i + 1, "[" + ("^" if negate else "") + body + "]"
