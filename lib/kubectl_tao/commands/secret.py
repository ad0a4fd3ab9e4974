"""`kubectl tao secret image-pull NAME`: an image-pull Secret from a key on stdin or in the environment."""

from __future__ import annotations

import typer

from kubectl_tao.commands.common import VerbCommand, output_option, session, verb_group

SECRET_FORMATS = ("table", "name", "json", "yaml")

EPILOG = """\b
Examples:
  # NGC (nvcr.io): the user is the literal $oauthtoken, the key your NGC API key
  printenv NGC_API_KEY | kubectl tao secret image-pull ngc -n tao
  kubectl tao secret image-pull ngc -n tao --from-env NGC_API_KEY
  # Another registry, replacing an existing Secret
  kubectl tao secret image-pull mirror --registry registry.local:5000 --username ci --replace < key.txt
  # Then
  kubectl tao submit --image-pull-secret ngc ...

\b
The key is read from stdin (a hidden prompt on a terminal) or from the variable --from-env names, never
from the command line. The Secret (type kubernetes.io/dockerconfigjson, label
app.kubernetes.io/managed-by=kubectl-tao) goes to `kubectl create -f -` on stdin; success is checked by
name, the data is never read back. An existing Secret is refused unless --replace.
Exit codes: 0 created or replaced, 1 kubectl refused it or it exists, 2 bad flags or key, 3 unreachable."""

secret_app = verb_group(
    "secret", "Create the Secrets jobs use (image-pull credentials) from stdin, never argv.", EPILOG
)


def _read_key(from_env: str | None) -> str:
    import os
    import sys

    from kubectl_tao.core.errors import UsageError
    from kubectl_tao.core.names import shown_env_name, validate_env_name
    from kubectl_tao.k8s.pullsecret import check_key

    if from_env:
        name = validate_env_name(from_env, "--from-env")
        if name not in os.environ:
            raise UsageError(
                f"{shown_env_name(name, '--from-env')}: the variable is not set; export it, or pipe the key on stdin"
            )
        return check_key(os.environ[name], shown_env_name(name, "--from-env"))
    if sys.stdin is None or sys.stdin.closed:
        raise UsageError("stdin: no input; pipe the key in or use --from-env NAME")
    if sys.stdin.isatty():
        import getpass

        return check_key(getpass.getpass("registry key (input hidden): "), "prompt")
    return check_key(sys.stdin.read(), "stdin")


@secret_app.command("image-pull", epilog=EPILOG, cls=VerbCommand)
def image_pull(
    name: str = typer.Argument(..., help="Name of the Secret (a DNS subdomain)."),
    registry: str = typer.Option("nvcr.io", "--registry", help="Registry host, e.g. nvcr.io or registry.local:5000."),
    username: str = typer.Option("$oauthtoken", "--username", help="Registry user (nvcr.io: $oauthtoken)."),
    from_env: str = typer.Option(None, "--from-env", help="Read the key from this environment variable."),
    replace: bool = typer.Option(False, "--replace", help="Overwrite the Secret when it exists."),
    output: str = output_option(SECRET_FORMATS),
) -> int:
    """Create an image-pull Secret (dockerconfigjson) with the key read from stdin."""
    from kubectl_tao.cli.output import check_format, emit, emit_data
    from kubectl_tao.core.names import validate_dns_subdomain
    from kubectl_tao.k8s.pullsecret import check_registry, check_username, create, secret_object

    fmt = check_format(output, SECRET_FORMATS)
    name = validate_dns_subdomain(name, "NAME")
    registry = check_registry(registry)
    username = check_username(username)
    key = _read_key(from_env)
    sess = session()
    namespace = sess.namespace()
    outcome = create(sess.kubectl(), secret_object(name, namespace, registry, username, key), key, replace=replace)
    if fmt == "name":
        emit(f"secret/{outcome.name}\n")
    elif not emit_data(fmt, outcome.to_dict()):
        emit(f"secret/{outcome.name} {outcome.action} in namespace {outcome.namespace} for {outcome.registry}\n")
    return 0


def register(app: typer.Typer) -> None:
    app.add_typer(secret_app, name="secret")
