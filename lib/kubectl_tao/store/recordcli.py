"""`tao_job_record`: the reference's record tool (open, mark, show, list) over the record store.

Standalone script behaviour: `ERROR: <message>` on stderr; exit 0 ok, 1 illegal transition or missing/unreadable
record, 2 bad flags or values.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from kubectl_tao.core.errors import TaoError
from kubectl_tao.store.records import RecordStore

USAGE = """\
usage: tao_job_record open --platform P --image I --network-arch A --action X --storage-tier A|B|C
                           (--results-dir DIR | --results-root ROOT) [--upload-exclude GLOB]...
                           [--parent-job ID] [--retry-of ID]
       tao_job_record mark ID --state STATE [--message M] [--source agent|poller|backend-hook]
                           [--backend-ref NAMESPACE/NAME] [--err-class ERR_INFRA|ERR_PROGRAM]
       tao_job_record show ID
       tao_job_record list [--json]

Records live in $TAO_STATE_DIR/jobs (TAO_STATE_DIR must be absolute), else ~/.tao/jobs.
open prints the new id. States: PENDING RUNNING COMPLETE ERROR CANCELED UNKNOWN (the first three of
COMPLETE/ERROR/CANCELED are final); list shows OPEN for a record not launched yet.

exit codes: 0 ok, 1 illegal transition or missing/unreadable record, 2 bad flags or values
"""


class _ArgError(Exception):
    pass


def _parser() -> Any:
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> Any:  # one line, exit 2, no usage dump
            raise _ArgError(message)

    parser = Parser(prog="tao_job_record", add_help=False)
    sub = parser.add_subparsers(dest="verb", parser_class=Parser)
    op = sub.add_parser("open", add_help=False)
    for flag in ("--platform", "--image", "--network-arch", "--action", "--storage-tier"):
        op.add_argument(flag, required=True)
    op.add_argument("--results-dir")
    op.add_argument("--results-root")
    op.add_argument("--upload-exclude", action="append", default=[])
    op.add_argument("--parent-job")
    op.add_argument("--retry-of")
    mk = sub.add_parser("mark", add_help=False)
    mk.add_argument("id")
    mk.add_argument("--state", required=True)
    mk.add_argument("--message", default="")
    mk.add_argument("--source", default="agent")
    mk.add_argument("--backend-ref")
    mk.add_argument("--err-class")
    sh = sub.add_parser("show", add_help=False)
    sh.add_argument("id")
    ls = sub.add_parser("list", add_help=False)
    ls.add_argument("--json", action="store_true")
    return parser


def _out(text: str) -> None:
    """TEXT and its newline in one write: print() makes two when stdout is unbuffered (PYTHONUNBUFFERED), and
    concurrent `open`s appending to one file (`open >> ids &`) then interleave ids and newlines."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _shown(text: str) -> str:
    from kubectl_tao.core.sanitize import sanitize

    return sanitize(text)


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n" for r in rows)


def _run(args: Any) -> int:
    store = RecordStore()
    if args.verb == "open":
        record = store.open(
            platform=args.platform,
            image=args.image,
            network_arch=args.network_arch,
            action=args.action,
            storage_tier=args.storage_tier,
            results_dir=args.results_dir,
            results_root=args.results_root,
            upload_excludes=args.upload_exclude,
            parent_job=args.parent_job,
            retry_of=args.retry_of,
        )
        _out(record.id)
    elif args.verb == "mark":
        store.mark(args.id, args.state, args.message, args.source, args.backend_ref, args.err_class)
    elif args.verb == "show":
        _out(json.dumps(store.show(args.id), indent=2))  # ASCII: controls and direction marks escaped
    else:
        errors: list[str] = []
        records = store.list(errors)
        for problem in errors:
            print(f"WARNING: {_shown(problem)}", file=sys.stderr)
        if args.json:
            _out(json.dumps(records, indent=2))
        else:
            rows = [["ID", "PLATFORM", "STATE", "RESULTS_DIR"]]
            rows += [[r.id, str(r.get("platform")), r.effective_state, str(r.get("results_dir"))] for r in records]
            from kubectl_tao.core.sanitize import sanitize

            sys.stdout.write(_table([[sanitize(cell) for cell in row] for row in rows]))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of scripts/tao_job_record; returns the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list or args_list[0] in ("-h", "--help", "help"):
        (sys.stdout if args_list else sys.stderr).write(USAGE)
        return 0 if args_list else 2
    if args_list[0] not in ("open", "mark", "show", "list"):
        print(f"ERROR: unknown verb {args_list[0]!r}: use open, mark, show or list", file=sys.stderr)
        return 2
    try:
        args = _parser().parse_args(args_list)
        return _run(args)
    except _ArgError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    except TaoError as exc:
        from kubectl_tao.core.redact import redact_message

        print(f"ERROR: {_shown(redact_message(exc.message))}", file=sys.stderr)
        return exc.exit_code
