#!/usr/bin/env python3
"""A stand-in for TensorBoard's command line (`tensorboard --logdir DIR --host HOST --port PORT`), NOT TensorBoard:
the local cluster has no image with TensorBoard, so the test of `kubectl tao results tensorboard` runs this in a
locally built image (tests/support/standin_image.py) as `tensorboard` on PATH.

It takes TensorBoard's three flags the plugin passes and serves HTTP on HOST:PORT until SIGINT/SIGTERM: `GET /`
answers 200 with one line per event file under DIR (`events.out.tfevents.*`, as TensorBoard's summary writers name
them): its path relative to DIR and its size. Anything else is 404. A missing DIR is an error (exit 1).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

EVENT_FILE_PREFIX = "events.out.tfevents."


def event_files(logdir: str) -> list[tuple[str, int]]:
    found = []
    for folder, _, files in os.walk(logdir):
        for name in files:
            if name.startswith(EVENT_FILE_PREFIX):
                path = os.path.join(folder, name)
                found.append((os.path.relpath(path, logdir), os.path.getsize(path)))
    return sorted(found)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tensorboard", description="TensorBoard stand-in (test double)")
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--host", default="localhost")
    parser.add_argument("--port", type=int, default=6006)
    args = parser.parse_args(argv)
    if not os.path.isdir(args.logdir):
        print(f"tensorboard stand-in: --logdir {args.logdir}: no such directory", file=sys.stderr)
        return 1

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path not in ("/", "/index.html"):
                self.send_error(404)
                return
            body = "".join(f"{path} {size}\n" for path, size in event_files(args.logdir)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"tensorboard stand-in: serving {args.logdir} at http://{args.host}:{args.port}/", file=sys.stderr,
          flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
