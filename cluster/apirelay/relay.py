#!/usr/bin/env python3
"""A TCP relay from one local address to another (stdlib only; scripts/local-cluster-apirelay.sh runs it).

The local cluster's real nodes use it so that their pods reach the API server as pods of any cluster do, at the
`kubernetes` Service's ClusterIP: the API server listens on 127.0.0.1 only, the relay listens on the pod bridge's
gateway address and copies bytes both ways to it, and one iptables nat chain sends the pods' connections for the
ClusterIP to the relay. TLS passes through untouched: the client checks the API server's own certificate.

    relay.py --listen ADDR:PORT --to ADDR:PORT [--port-file FILE]

--listen takes port 0 for a free port; once it listens, the port is written to --port-file (written whole, then
renamed into place, so a reader never sees half a number). Each connection gets its own connection to --to; when
that fails, the client's connection is closed and one line says why on stderr. Each side's end of stream is
passed on to the other (half-close), and a connection ends when both directions have. Bad arguments or an
address it cannot listen on: one line on stderr, exit 2. It runs until it is stopped by a signal.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import os
import sys
from collections.abc import Awaitable, Callable

CHUNK = 64 * 1024


def address(text: str) -> tuple[str, int]:
    """ADDR:PORT with an IPv4 literal and a port 0-65535."""
    host, sep, port = text.rpartition(":")
    try:
        ipaddress.IPv4Address(host)
        number = int(port)
    except ValueError:
        number = -1
    if not sep or not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not IPV4:PORT (e.g. 10.88.0.1:0)")
    return host, number


async def copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Bytes from READER to WRITER until READER's end of stream, which is passed on."""
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.transport.abort()


async def close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(ConnectionError, OSError):
        await writer.wait_closed()


def handler(upstream: tuple[str, int]) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    async def relay(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection(*upstream)
        except OSError as exc:
            why = os.strerror(exc.errno) if exc.errno else str(exc)
            print(f"relay: cannot connect to {upstream[0]}:{upstream[1]}: {why}", file=sys.stderr, flush=True)
            await close(client_writer)
            return
        await asyncio.gather(copy(client_reader, server_writer), copy(server_reader, client_writer))
        await asyncio.gather(close(server_writer), close(client_writer))

    return relay


def write_port(path: str, port: int) -> None:
    temporary = f"{path}.tmp"
    with open(temporary, "w") as f:
        f.write(f"{port}\n")
    os.replace(temporary, path)


async def serve(listen: tuple[str, int], upstream: tuple[str, int], port_file: str | None) -> None:
    server = await asyncio.start_server(handler(upstream), listen[0], listen[1], reuse_address=True)
    port = server.sockets[0].getsockname()[1]
    if port_file:
        write_port(port_file, port)
    print(f"relay: listening on {listen[0]}:{port}, forwarding to {upstream[0]}:{upstream[1]}", file=sys.stderr,
          flush=True)
    async with server:
        await server.serve_forever()


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        """One line, exit 2 (argparse would print its usage first)."""
        print(f"relay: {message}", file=sys.stderr)
        sys.exit(2)


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="relay.py", description="TCP relay from one local address to another")
    parser.add_argument("--listen", type=address, required=True, help="ADDR:PORT to listen on (port 0: any free)")
    parser.add_argument("--to", type=address, required=True, help="ADDR:PORT each connection is relayed to")
    parser.add_argument("--port-file", help="where to write the port it listens on, once it listens")
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve(args.listen, args.to, args.port_file))
    except OSError as exc:
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        print(f"relay: cannot listen on {args.listen[0]}:{args.listen[1]}: {why}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
