"""The volume helper pod played by this machine's shell (the unit tests of `data push` and `results pull`)."""

from __future__ import annotations

import io
import signal
import subprocess
from typing import Any

from kubectl_tao.k8s.kubectl import Completed


class ShellPod:
    """The volume helper pod's `exec` (Kubectl.pipe) run by this machine's sh, tar, find, stat and sha256sum: the
    volume is a local folder mounted at its own path (the request's mount path), so each script runs as it runs in
    the pod. Install it with `monkeypatch.setattr(Kubectl, "pipe", lambda _kc, args, **kw: pod.pipe(args, **kw))`.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], bytes]] = []  # (script, positional arguments, stdin)
        self.interrupt_at: tuple[str, int] | None = None  # (script, which call of it): Ctrl-C once it has run
        self.sigterm_ignored: list[bool] = []  # per call: was SIGTERM held while it ran

    def pipe(self, args: list[str], *, feed: Any = None, sink: Any = None, reader: Any = None,
             **_: Any) -> Completed:
        """`kubectl exec -i POD -- COMMAND...`: COMMAND run here, stdin what FEED writes, stdout to READER or
        SINK."""
        command = args[args.index("--") + 1:]
        stdin = b""
        if feed is not None:
            buffer = io.BytesIO()
            feed(buffer)
            stdin = buffer.getvalue()
        self.calls.append((command[2], command[4:], stdin))
        self.sigterm_ignored.append(signal.getsignal(signal.SIGTERM) == signal.SIG_IGN)
        done = subprocess.run(command, input=stdin, capture_output=True, check=False)
        if self.interrupt_at is not None and self.interrupt_at == (command[2], self.scripts().count(command[2])):
            raise KeyboardInterrupt  # as kubectl.pipe raises it: the process stopped, the caller interrupted
        if reader is not None:
            reader(io.BytesIO(done.stdout))
        elif sink is not None:
            sink(done.stdout)
        return Completed("", done.stderr.decode(), done.returncode)

    def scripts(self) -> list[str]:
        return [script for script, _, _ in self.calls]
