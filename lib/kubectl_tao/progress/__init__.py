"""How far a running job is, read from what it already writes: TAO's `status.json` (statusjson.py) and the
progress lines of its log (logtext.py), as one Progress value (model.py) with its table cells, metrics summary
and stall warning.

Pure, as core/ is: text in, values out; no process, no cluster, no store. It may use core/ only. Every text it
is given is assumed already redacted and sanitized by the caller; the readers still bound their work per line,
so a hostile text (megabyte lines, invalid UTF-8, terminal sequences) costs time linear in its length."""
