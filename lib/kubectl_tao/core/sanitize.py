"""Text that kubectl-tao did not write itself, made safe to show on a terminal.

Cluster objects, events, records, job logs and kubectl's stderr can hold bytes a terminal acts on instead of
showing: escape sequences that move the cursor, erase lines, set the window title, hide text or wrap it in a
hyperlink, carriage returns that let later text overwrite earlier text, and Unicode direction controls that
reorder what is shown. ``sanitize`` removes the sequences and turns every other such character into a visible
escape (``\\u0007``, ``\\u202e``), so what is printed is what the text holds:

* CSI (``ESC [``), OSC (``ESC ]``: window titles, hyperlinks), DCS, SOS, PM and APC strings and the short
  ``ESC`` sequences are removed whole (colour codes in logs go with them);
* every other C0 control, DEL, every C1 control (the 8-bit CSI 0x9b and OSC 0x9d included: escaped, their
  parameters shown as text), a lone ``ESC``, lone surrogates, U+2028/U+2029 and the invisible format
  characters (bidi embeddings, overrides and isolates, zero-width spaces, word joiners, tag characters) are
  escaped; the zero-width joiner and non-joiner stay (scripts and emoji need them). The escapes are JSON's and
  YAML's own (``\\u00NN``, surrogate pairs above U+FFFF), so JSON or YAML text that carried such a character
  raw inside a string stays valid and means the same once sanitized;
* ``multiline=True`` keeps line breaks and tabs; ``\\r\\n`` becomes ``\\n`` and a lone ``\\r`` a line break, so
  nothing can overwrite what came before it on its line; ``multiline=False`` (a table cell, one field) escapes
  ``\\n`` and ``\\r`` and turns a tab into a space.

Printable text (any script, any emoji) is returned unchanged, and so is every string that needs nothing: the
common case costs one regular-expression search. The output layer (``cli/output.py``) applies this to every
line it prints; ``logs --raw`` is the one way around it. Linear in the text's length.
"""

from __future__ import annotations

import re

# Invisible format characters (Unicode category Cf, as of Unicode 14) but the zero-width non-joiner and
# joiner (U+200C, U+200D); tests/unit/core/test_sanitize.py checks this list against unicodedata.
_FORMAT = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b\u200e\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
_ALWAYS = "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff" + _FORMAT
_NEEDS_MULTI = re.compile(f"[{_ALWAYS}\r]")
_NEEDS_SINGLE = re.compile(f"[{_ALWAYS}\t\n\r]")
_ESCAPE_MULTI = re.compile(f"[{_ALWAYS}]")
_ESCAPE_SINGLE = re.compile(f"[{_ALWAYS}\n\r]")

# Whole sequences: CSI; OSC, DCS, SOS, PM, APC strings up to their terminator (BEL, ESC \ or ST); two- and
# three-byte ESC sequences (ESC c, ESC 7, ESC ( B, ESC # 8). A string without its terminator is not matched:
# its introducer is escaped and the rest is shown as text. SEQUENCE_RE also knows the 8-bit (C1) introducers:
# what a terminal may hide, which the redactor takes out before matching (core/redact.py); the sanitizer
# removes the 7-bit ones only and escapes a C1 byte like any other control, which keeps JSON text exact.
_SEQUENCE = (
    r"(?:\x1b\[{c1_csi})[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b[\]P X^_]{c1_strings})[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
    r"|\x1b[ -/]*(?![\[\]PX^_])[0-~]"
)
SEQUENCE_RE = re.compile(_SEQUENCE.format(c1_csi="|\x9b", c1_strings="|[\x9d\x90\x98\x9e\x9f]"))
_ESC_SEQUENCE_RE = re.compile(_SEQUENCE.format(c1_csi="", c1_strings=""))
_NAMED = {"\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"  # as JSON writes it


def sanitize(text: str, *, multiline: bool = False) -> str:
    """``text`` with terminal sequences removed and every other control or invisible format character shown
    as an escape (see the module's docstring). ``multiline`` keeps line breaks and tabs."""
    if not (_NEEDS_MULTI if multiline else _NEEDS_SINGLE).search(text):
        return text
    if "\x1b" in text:
        text = _ESC_SEQUENCE_RE.sub("", text)
    if multiline:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        return _ESCAPE_MULTI.sub(_escape, text)
    return _ESCAPE_SINGLE.sub(_escape, text.replace("\t", " "))


def cap(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how many were left out (``... [1234 more characters]``).
    Cut what the redactor has already seen (a cut could split a credential and hide its format)."""
    if limit < 0:
        raise ValueError("limit must be >= 0")
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"
