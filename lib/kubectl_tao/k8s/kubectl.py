"""The only place kubectl-tao starts a process: every cluster call is a `kubectl` subprocess.

It adds the global flags (--context, --namespace, --kubeconfig, --request-timeout) to each call, feeds
secrets through stdin only, classifies failures from kubectl's stderr, scrubs every message it raises,
and counts (optionally traces) its invocations so the benchmarks can report kubectl calls per verb.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from kubectl_tao.core.errors import ClusterUnreachableError, CredentialsRefusedError, KubectlError, TaoError, UsageError
from kubectl_tao.core.valueclass import Value, record

# Checked before the unreachable markers: "Unable to connect to the server: getting credentials: exec: ..." is a
# credential failure, not a network one.
_CREDENTIAL_MARKERS = (
    "(unauthorized)",
    "you must be logged in",
    "provide credentials",
    "getting credentials",
    "invalid bearer token",
    "token has expired",
    "token is expired",
    "refresh token",
    "no valid credentials",
)

CREDENTIALS_FIX = (
    "point kubectl at a working kubeconfig (--kubeconfig, $KUBECONFIG or ~/.kube/config; --context) and refresh "
    "it: EKS `aws eks update-kubeconfig --name <cluster> --region <region>`, GKE `gcloud container clusters "
    "get-credentials <cluster> --region <region>`, AKS `az aks get-credentials --resource-group <rg> --name "
    "<cluster>`; check with `kubectl get nodes`"
)

_UNREACHABLE_MARKERS = (
    "unable to connect to the server",
    "connection refused",
    "was refused",
    "connection reset by peer",
    "no such host",
    "i/o timeout",
    "tls handshake timeout",
    "client.timeout exceeded",
    "context deadline exceeded",
    "the server is currently unable to handle the request",
    "no configuration has been provided",
    "couldn't get current server api group list",
    "server misbehaving",
    # No answer in time: the request may or may not have been carried out (a create may have happened).
    "may still be processing the request",
    "timeout awaiting response headers",
    "net/http: request canceled",
    "http2: client connection lost",
    "eof",
)

_REASONS = (
    ("(notfound)", "NotFound"),
    ("(alreadyexists)", "AlreadyExists"),
    ("(forbidden)", "Forbidden"),
    ("(conflict)", "Conflict"),
    ("(invalid)", "Invalid"),
    ("(badrequest)", "BadRequest"),
    (" not found", "NotFound"),
    ("already exists", "AlreadyExists"),
    ("forbidden", "Forbidden"),
)


@record(frozen=True)
class ClusterOptions(Value):
    """Where kubectl talks to; None means kubectl's own default (kubeconfig, then in-cluster)."""

    context: str | None = None
    namespace: str | None = None
    kubeconfig: str | None = None
    request_timeout: str | None = None

    def flags(self, *, namespaced: bool = True) -> list[str]:
        out: list[str] = []
        if self.kubeconfig:
            out.append(f"--kubeconfig={self.kubeconfig}")
        if self.context:
            out.append(f"--context={self.context}")
        if namespaced and self.namespace:
            out.append(f"--namespace={self.namespace}")
        if self.request_timeout:
            out.append(f"--request-timeout={self.request_timeout}")
        return out


@record(frozen=True)
class Completed(Value):
    """What a kubectl process printed and how it exited; for a call read with a reader (`Kubectl.run`), stdout
    is empty and `value` is what the reader made of it."""

    stdout: str
    stderr: str
    returncode: int
    value: Any = None


def kubectl_error_kind(stderr: str) -> str:
    """Name the kind of failure kubectl reported: Unreachable, NotFound, Forbidden, ... or ''."""
    low = stderr.lower()
    if any(marker in low for marker in _CREDENTIAL_MARKERS):
        return "Unauthorized"
    if "failed calling webhook" in low:
        return ""  # the API server answered: an admission webhook it calls is down (its "connection refused")
    for marker in _UNREACHABLE_MARKERS:
        if marker == "eof":
            if low.rstrip().endswith(": eof") or " eof\n" in low:
                return "Unreachable"
            continue
        if marker in low:
            return "Unreachable"
    if "context" in low and "does not exist" in low:
        return "NoContext"
    for marker, reason in _REASONS:
        if marker in low:
            return reason
    return ""


# What kubectl prints when a port-forward or exec stream it had established fails at the pod's end (client-go's
# tools/portforward: "an error occurred forwarding L -> R: ...", ErrLostConnectionToPod): the API server answered,
# so its "connection refused" (nothing listening in the pod yet) is no unreachable cluster.
_STREAM_SIDE_MARKERS = ("an error occurred forwarding", "lost connection to pod")


def stream_side_failure(stderr: str) -> bool:
    """Whether STDERR tells of a stream that failed inside the pod (never a credentials refusal)."""
    low = stderr.lower()
    return any(m in low for m in _STREAM_SIDE_MARKERS) and kubectl_error_kind(stderr) != "Unauthorized"


def _scrub(text: str) -> str:
    from kubectl_tao.core.redact import redact_text

    return redact_text(text)


def first_error_line(stderr: str) -> str:
    """kubectl's own message, one line, scrubbed (no credential can surface through it)."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    picked = next((ln for ln in lines if ln.lower().startswith("error")), lines[-1] if lines else "")
    return _scrub(picked)[:500]


# Go's garbage collector, tuned for a kubectl call that lives well under a second: no collection until the heap
# reaches GOMEMLIMIT, instead of one at every 4 MiB of growth while kubectl initialises. About a third less CPU
# per call, a few MiB more memory (BENCHMARKS.md); a big read still collects once it nears the limit. Long calls
# (`logs -f`: stream, exec) keep Go's defaults, and so does a user who set either variable.
SHORT_CALL_GO_ENV = {"GOGC": "off", "GOMEMLIMIT": "256MiB"}


def short_call_environment() -> dict[str, str]:
    """The environment of a short kubectl call: this one, with SHORT_CALL_GO_ENV unless GOGC or GOMEMLIMIT is set."""
    if any(name in os.environ for name in SHORT_CALL_GO_ENV):
        return dict(os.environ)
    return {**os.environ, **SHORT_CALL_GO_ENV}


class Kubectl:
    """Runs kubectl with the global flags; raises TaoError subclasses with scrubbed one-line messages."""

    def __init__(self, options: ClusterOptions | None = None, binary: str | None = None) -> None:
        self.options = options or ClusterOptions()
        self.binary = binary or os.environ.get("KUBECTL_TAO_KUBECTL", "kubectl")
        self.calls = 0
        self._command: Any = None

    def _resolve(self) -> Any:
        if self._command is None:
            import sh

            try:
                self._command = sh.Command(self.binary).bake(_tty_out=False, _err_to_out=False, _return_cmd=True)
            except sh.CommandNotFound as exc:
                raise self._not_found() from exc
        return self._command

    def _not_found(self) -> ClusterUnreachableError:
        return ClusterUnreachableError(
            f"kubectl not found on PATH ({self.binary}); install kubectl or set KUBECTL_TAO_KUBECTL"
        )

    def argv(self, args: list[str], *, namespaced: bool = True) -> list[str]:
        return [*self.options.flags(namespaced=namespaced), *args]

    def run(
        self,
        args: list[str],
        *,
        stdin: str | None = None,
        namespaced: bool = True,
        timeout: float | None = None,
        check: bool = True,
        best_effort: bool = False,
        reader: Callable[[Iterator[bytes]], Any] | None = None,
    ) -> Completed:
        """Run `kubectl <global flags> <args>`. Secrets may only travel in `stdin`, never in `args`.
        `check`/`best_effort`: see `settle`. `reader`: stdout is handed to it as it arrives (`Running.read_with`;
        no `timeout` then: --request-timeout bounds the call)."""
        running = self.start(args, stdin=stdin, namespaced=namespaced)
        if reader is not None:
            return running.read_with(reader, check=check, best_effort=best_effort)
        return running.wait(timeout=timeout, check=check, best_effort=best_effort)

    def start(self, args: list[str], *, stdin: str | None = None, namespaced: bool = True) -> Running:
        """Start `kubectl <global flags> <args>` and return at once; `wait()` on the result for its answer.
        A verb starts its read first and imports what reads the answer while kubectl runs. The same command
        line prestarted earlier (`prestart`) is taken over instead of started again."""
        full = self.argv(args, namespaced=namespaced)
        self.calls += 1
        early = _take_prestarted([self.binary, *full], stdin)
        if early is not None:
            early.adopt(self)
            return early
        return self._spawn(args, full, (stdin or "").encode("utf-8"))

    def _spawn(self, args: list[str], full: list[str], stdin: bytes) -> Running:
        """The kubectl process itself (the unit tests' fake kubectl replaces this one method).

        Started with `subprocess`, not sh: importing sh (asyncio, logging, importlib.metadata) cost more than
        the rest of `kubectl tao status` together (BENCHMARKS.md); `stream` and `run_host_check` keep sh."""
        import subprocess

        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                [self.binary, *full],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=short_call_environment(),
            )
        except (FileNotFoundError, PermissionError) as exc:  # as sh's lookup: no executable of that name
            self._trace(full, started, -1)
            raise self._not_found() from exc
        except OSError as exc:  # exec failed (bad binary)
            self._trace(full, started, -1)
            raise TaoError(f"could not run kubectl: {_scrub(type(exc).__name__)}") from None
        if len(stdin) <= _PIPE_BUF:
            _hand_over(proc, stdin)
            stdin = b""
        return Running(self, proc, full, started, stdin, args[0] if args else "")

    def run_many(self, calls: dict[str, tuple[list[str], dict[str, Any]]]) -> dict[str, Completed | TaoError]:
        """Run independent read-only calls at once (each still one kubectl process): the gates before a
        submit cost one round trip instead of several. Each result is a Completed or the TaoError it raised."""
        return self.start_many(calls).results()

    def start_many(self, calls: dict[str, tuple[list[str], dict[str, Any]]]) -> Batch:
        """`run_many` started, not waited for: the caller may read one answer while the others still run."""
        return Batch(self, calls)

    def json(self, args: list[str], **kwargs: Any) -> Any:
        result = self.run([*args, "-o", "json"], **kwargs)
        try:
            return json.loads(result.stdout) if result.stdout.strip() else None
        except json.JSONDecodeError as exc:
            raise TaoError(f"kubectl {args[0]} returned output that is not JSON: {exc.msg}") from None

    def error_for(self, stderr: str) -> TaoError:
        reason = kubectl_error_kind(stderr)
        message = first_error_line(stderr) or "kubectl failed without a message"
        # Quoted inside a sentence of ours, kubectl's line goes without its own "error: ".
        said = message[len("error: "):] if message.lower().startswith("error: ") else message
        if reason == "Unauthorized":
            return CredentialsRefusedError(
                f"the API server refused your credentials: {said}; {CREDENTIALS_FIX}", detail=message
            )
        missing = self._missing_kubeconfig(stderr, reason)
        if missing:
            return CredentialsRefusedError(f"no credentials: {missing}; {CREDENTIALS_FIX}", detail=missing,
                                           no_config=True)
        if reason == "Unreachable":
            return ClusterUnreachableError(
                f"cluster unreachable: {said} (check --kubeconfig/$KUBECONFIG, --context, and that the "
                "API server is up)",
                detail=message,
            )
        if reason == "NoContext":
            return UsageError(f"--context: {said}; list contexts with `kubectl config get-contexts`")
        return KubectlError(message, stderr=_scrub(stderr), reason=reason)

    def _missing_kubeconfig(self, stderr: str, reason: str) -> str:
        """Why kubectl had no kubeconfig to use, or '' (an explicit file that does not exist, or none at all,
        which makes kubectl fall back to http://localhost:8080)."""
        low = stderr.lower()
        explicit = self.options.kubeconfig
        if explicit and "no such file or directory" in low and "stat " in low:
            return f"--kubeconfig {explicit} does not exist"
        if reason == "Unreachable" and "localhost:8080" in low:
            listed = os.environ.get("KUBECONFIG")
            where = f"$KUBECONFIG={listed}" if listed else "~/.kube/config"
            return f"kubectl found no kubeconfig ({where} does not exist) and fell back to localhost:8080"
        return ""

    def settle(self, result: Completed, *, check: bool, best_effort: bool = False) -> Completed:
        """Raise for a failed call when `check`; without it kubectl's answer is returned whatever its exit code,
        except when there is no answer to read (the server could not be reached or refused the credentials):
        that still raises unless `best_effort` (cleanup that must not stop on it)."""
        if result.returncode == 0:
            return result
        error = self.error_for(result.stderr)
        if check or (isinstance(error, ClusterUnreachableError) and not best_effort):
            raise error
        return result

    def stream(self, args: list[str], *, namespaced: bool = True) -> Iterator[str]:
        """Yield kubectl's stdout line by line as it arrives (for `logs -f` across ranks)."""
        import sh

        command = self._resolve()
        full = self.argv(args, namespaced=namespaced)
        started = time.monotonic()
        self.calls += 1
        proc = command(*full, _iter=True, _ok_code=list(range(256)), _bg_exc=False)
        try:
            for line in proc:
                yield line if isinstance(line, str) else line.decode("utf-8", errors="replace")
        except sh.ErrorReturnCode:  # pragma: no cover - _ok_code accepts every status
            pass
        finally:
            if proc.process.is_alive()[0]:
                proc.terminate()
        self._trace(full, started, proc.exit_code or 0)
        if proc.exit_code:
            raise self.error_for(_decode(proc.stderr))

    def pipe(
        self,
        args: list[str],
        *,
        feed: Callable[[Any], None] | None = None,
        sink: Callable[[bytes], None] | None = None,
        reader: Callable[[Any], None] | None = None,
        namespaced: bool = True,
        check: bool = True,
    ) -> Completed:
        """Run a long kubectl call (`exec -i`) with both ends streamed, memory flat whatever the size: FEED writes
        the call's stdin into the binary file it is handed (on a thread of its own; the pipe is closed after it),
        SINK gets stdout in chunks as they arrive, or READER the binary stdout itself to read at its own pace (a tar
        stream read member by member; what it leaves is drained). A FEED that raises stops kubectl and its
        exception is raised; so is anything that interrupts the caller (Ctrl-C): the process is killed and reaped
        first, never left.
        Go's defaults are kept (a long call)."""
        import subprocess
        import threading

        full = self.argv(args, namespaced=namespaced)
        self.calls += 1
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                [self.binary, *full],
                stdin=subprocess.PIPE if feed is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except (FileNotFoundError, PermissionError) as exc:
            self._trace(full, started, -1)
            raise self._not_found() from exc
        errors: list[bytes] = []
        fed: list[BaseException] = []
        drain = threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)
        drain.start()

        def writer() -> None:
            try:
                assert feed is not None and proc.stdin is not None
                feed(proc.stdin)
            except BrokenPipeError:
                pass  # kubectl ended without reading it all: its exit code says why
            except BaseException as exc:  # raised in the caller once kubectl is stopped
                fed.append(exc)
                proc.kill()
            finally:
                with contextlib.suppress(BrokenPipeError, OSError):
                    proc.stdin.close()

        feeder = threading.Thread(target=writer, daemon=True) if feed is not None else None
        try:
            if feeder is not None:
                feeder.start()
            _widen(proc.stdout)
            if reader is not None:
                reader(proc.stdout)
            while data := proc.stdout.read1(_CHUNK_BYTES):
                if sink is not None:
                    sink(data)
            if feeder is not None:
                feeder.join()
            returncode = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            self._trace(full, started, -9)
            raise
        finally:
            proc.stdout.close()
        drain.join()
        self._trace(full, started, returncode)
        if fed:
            raise fed[0]
        done = Completed("", _decode(b"".join(errors)), returncode)
        if returncode != 0 and not check and stream_side_failure(done.stderr):
            return done  # the far end of an established stream failed, not the API server
        return self.settle(done, check=check)

    def exec(self, args: list[str], *, namespaced: bool = True) -> None:
        """Replace this process with kubectl (for `logs -f`: kubectl then owns the terminal and signals)."""
        import shutil

        path = shutil.which(self.binary) or self.binary
        full = self.argv(args, namespaced=namespaced)
        self.calls += 1
        self._trace(full, time.monotonic(), 0)
        os.execvp(path, [path, *full])  # noqa: S606 - deliberate exec of kubectl with a list argv

    def _trace(self, argv: list[str], started: float, rc: int) -> None:
        target = os.environ.get("KUBECTL_TAO_TRACE")
        if not target:
            return
        elapsed = time.monotonic() - started
        entry = {
            "argv": argv,
            "ms": round(elapsed * 1000, 1),
            "rc": rc,
            "pid": os.getpid(),
            "start": round(time.time() - elapsed, 4),  # epoch seconds: lets the benchmark find the critical path
        }
        try:  # tracing is for benchmarks and tests: it must never break a verb
            os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
            with open(target, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(entry) + "\n")
        except OSError:
            pass


class Batch:
    """Calls run at once, each on a thread of its own (not concurrent.futures: it imports logging, a few ms of
    every submit). `result(key)` waits for one of them; a crash (a bug, not a TaoError) is raised there."""

    def __init__(self, kc: Kubectl, calls: dict[str, tuple[list[str], dict[str, Any]]]) -> None:
        import threading

        self._answers: dict[str, Completed | TaoError | BaseException] = {}
        self._threads = {key: threading.Thread(target=self._one, args=(kc, key, *item)) for key, item in calls.items()}
        for thread in self._threads.values():
            thread.start()

    def _one(self, kc: Kubectl, key: str, args: list[str], kwargs: dict[str, Any]) -> None:
        try:
            self._answers[key] = kc.run(args, **kwargs)
        except BaseException as exc:  # a TaoError is an answer; anything else is raised by result()
            self._answers[key] = exc

    def result(self, key: str) -> Completed | TaoError:
        self._threads[key].join()
        answer = self._answers[key]
        if isinstance(answer, BaseException) and not isinstance(answer, TaoError):
            raise answer
        return answer

    def results(self) -> dict[str, Completed | TaoError]:
        for thread in self._threads.values():
            thread.join()
        return {key: self.result(key) for key in self._threads}


class Running:
    """A kubectl process started by `Kubectl.start`; `wait` collects its answer once."""

    def __init__(self, kc: Kubectl, proc: Any, argv: list[str], started: float, stdin: bytes, verb: str) -> None:
        self._kc, self._proc, self._argv, self._started, self._stdin, self._verb = kc, proc, argv, started, stdin, verb
        self._done = False

    def command_line(self) -> list[str]:
        return [self._kc.binary, *self._argv]

    def adopt(self, kc: Kubectl) -> None:
        """From now on KC traces and settles this call (a prestarted read taken over by the verb's own)."""
        self._kc = kc

    def kill(self) -> None:
        """Stop a call nobody will read, and reap it."""
        self._done = True
        self._proc.kill()
        self._proc.communicate()
        self._kc._trace(self._argv, self._started, -9)

    def stop(self) -> None:
        """`kill` unless the answer was read already."""
        if not self._done:
            self.kill()

    def wait(self, *, timeout: float | None = None, check: bool = True, best_effort: bool = False) -> Completed:
        """kubectl's answer (`check`/`best_effort`: see `Kubectl.settle`); TIMEOUT seconds from now at most."""
        import subprocess

        self._done = True
        try:
            out, err = self._proc.communicate(self._stdin, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            self._proc.kill()
            self._proc.communicate()
            self._kc._trace(self._argv, self._started, 124)
            raise ClusterUnreachableError(
                f"kubectl {self._verb} timed out after {timeout}s; check the API server or raise --request-timeout"
            ) from exc
        result = Completed(_decode(out), _decode(err), self._proc.returncode)
        self._kc._trace(self._argv, self._started, result.returncode)
        return self._kc.settle(result, check=check, best_effort=best_effort)

    def read_with(
        self, reader: Callable[[Iterator[bytes]], Any], *, check: bool = True, best_effort: bool = False
    ) -> Completed:
        """kubectl's answer with its stdout handed to READER in chunks as they arrive, never held whole (a big
        list is reduced while the server still sends it): the Completed's `value` is what READER returned, its
        stdout empty. When kubectl fails, its error wins over any TaoError READER raised (a failed call's
        stdout is not an answer); `check`/`best_effort` as for `wait`."""
        import threading

        self._done = True
        proc = self._proc
        errors: list[bytes] = []
        drain = threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)
        drain.start()
        if proc.stdin is not None:
            _hand_over(proc, self._stdin)

        _widen(proc.stdout)

        def chunks() -> Iterator[bytes]:
            while data := proc.stdout.read1(_CHUNK_BYTES):
                yield data

        value, failure = None, None
        try:
            value = reader(chunks())
        except TaoError as exc:
            failure = exc
        except BaseException:
            proc.kill()
            proc.wait()
            proc.stdout.close()
            self._kc._trace(self._argv, self._started, -9)
            raise
        for _ in chunks():  # what READER left unread, so that kubectl ends and says whether it failed
            pass
        proc.stdout.close()
        returncode = proc.wait()
        drain.join()
        result = Completed("", _decode(b"".join(errors)), returncode, value)
        self._kc._trace(self._argv, self._started, returncode)
        settled = self._kc.settle(result, check=check, best_effort=best_effort)
        if failure is not None and returncode == 0:
            raise failure
        return settled


_CHUNK_BYTES = 1 << 20
# What a fresh pipe always takes without blocking (POSIX PIPE_BUF; Linux gives a pipe at least one page).
_PIPE_BUF = 4096


def _widen(pipe: Any) -> None:
    """A pipe of _CHUNK_BYTES where the system allows it (Linux: F_SETPIPE_SZ up to fs/pipe-max-size, 1 MiB by
    default): kubectl keeps writing while the reader reduces a piece, where a 64 KiB pipe would fill in a
    millisecond of a big answer and hold kubectl, and through it the server, until the reader comes back."""
    try:
        import fcntl

        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, _CHUNK_BYTES)
    except (ImportError, AttributeError, OSError, ValueError):
        pass  # not Linux, over the user's pipe quota, or closed: the default size works, in more reads


def _hand_over(proc: Any, stdin: bytes) -> None:
    """STDIN written to a fresh process and closed at once: a call started now and waited for later (a dry run
    started early) must not wait for its input till then. `proc.stdin` is None afterwards, as if it had none."""
    try:
        if stdin:
            proc.stdin.write(stdin)
        proc.stdin.close()
    except BrokenPipeError:  # kubectl exited without reading it: its exit code says why
        pass
    proc.stdin = None


# Prestarted calls by command line; dict.pop is atomic, so run_many's threads may take them over at once.
_prestarted: dict[tuple[str, ...], Running] = {}


def prestart(options: ClusterOptions, args: list[str], *, namespaced: bool = True, binary: str | None = None) -> None:
    """Start a read-only call now, before the verb knows it needs it: the first `Kubectl.start` of the very same
    command line (binary, flags, arguments, no stdin) takes it over instead of starting its own, and
    `discard_prestarted` kills it if none does. Nothing is decided on a guess: the verb validates what it
    read as before and asks for the call itself. A call that cannot be started is simply not prestarted."""
    import contextlib

    with contextlib.suppress(TaoError):
        running = Kubectl(options, binary).start(args, namespaced=namespaced)
        if tuple(running.command_line()) in _prestarted:
            running.kill()  # the same read is already on its way
        else:
            _prestarted[tuple(running.command_line())] = running


def _take_prestarted(command_line: list[str], stdin: str | None) -> Running | None:
    return None if stdin or not _prestarted else _prestarted.pop(tuple(command_line), None)


def discard_prestarted() -> None:
    """Kill and reap every prestarted call that no verb took over."""
    while _prestarted:
        _prestarted.popitem()[1].kill()


def run_host_check(script: str, args: list[str], timeout: float = 60.0) -> tuple[int, str]:
    """Run the node host runtime check script (the one non-kubectl process preflight needs).

    Returns (exit code, combined output); a missing script is exit 127.
    """
    import sh

    try:
        bash = sh.Command("bash").bake(_tty_out=False, _return_cmd=True, _err_to_out=True)
        proc = bash(script, *args, _ok_code=list(range(256)), _timeout=timeout)
    except sh.TimeoutException:
        return 124, f"{script} timed out after {timeout:.0f}s"
    except sh.CommandNotFound:
        return 127, "bash not found"
    return proc.exit_code, _decode(proc.stdout)


def _decode(raw: bytes | str) -> str:
    if isinstance(raw, str):
        return raw
    return raw.decode("utf-8", errors="replace")
