"""The one exception family of kubectl-tao and the exit codes it maps to.

Exit codes (documented in docs/verbs.md):
  0  success
  1  the job or a gate failed (capacity, lint, dry-run, job ended in ERROR)
  2  usage error or bad input (flags, files, names, paths)
  3  the cluster could not be reached
  4  the request can never fit this cluster (fit verdict "never")
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_NEVER_FITS = 4


class TaoError(Exception):
    """A failure with a one-line, user-facing message; the CLI prints `error: <message>`."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class UsageError(TaoError):
    """Bad flags or bad input: names the field and the fix."""

    exit_code = EXIT_USAGE


class GateError(TaoError):
    """A pre-launch gate refused the job (capacity, version, lint, dry-run, permissions)."""

    exit_code = EXIT_FAILURE


class NeverFitsError(GateError):
    """No arrangement of this cluster's nodes can ever run the request."""

    exit_code = EXIT_NEVER_FITS


class ClusterUnreachableError(TaoError):
    """kubectl could not talk to the API server. `detail`: kubectl's own line (or why there was no kubeconfig),
    without the fix the message adds; `no_config`: kubectl had no kubeconfig to use at all."""

    exit_code = EXIT_UNREACHABLE

    def __init__(self, message: str, *, detail: str = "", no_config: bool = False) -> None:
        super().__init__(message)
        self.detail = detail or message
        self.no_config = no_config


class CredentialsRefusedError(ClusterUnreachableError):
    """The API server (or the kubeconfig's auth plugin) refused or lacked credentials: nothing was asked yet."""


class KubectlError(TaoError):
    """kubectl ran and failed; the message is kubectl's own stderr, scrubbed of secrets."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, *, stderr: str = "", reason: str = "") -> None:
        super().__init__(message)
        self.stderr = stderr
        self.reason = reason  # e.g. NotFound, AlreadyExists, Forbidden, Conflict, Invalid
