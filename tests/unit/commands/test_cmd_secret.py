"""`kubectl tao secret image-pull`: the key travels on stdin only and never shows in argv or messages."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path
from typing import Any

import pytest
from support.fake_kubectl import FakeKubectl

KEY = "nvapi-Zk3q9W7xLr2PbT5mYc8HdJ4sVn6QaF1e"  # a made-up NGC-style key
AUTH = base64.b64encode(f"$oauthtoken:{KEY}".encode()).decode()


def created(fake: FakeKubectl) -> dict[str, Any]:
    stdin = next(call.stdin for call in fake.calls if call.argv[0] in ("create", "replace"))
    assert stdin is not None
    return json.loads(stdin)


def no_key_anywhere(fake: FakeKubectl, *texts: str) -> None:
    for call in fake.calls:
        assert not any(KEY in arg or AUTH in arg for arg in call.argv)
    for text in texts:
        assert KEY not in text and AUTH not in text


def answer_ok(fake: FakeKubectl, name: str = "ngc") -> None:
    fake.on("create", stdout=f"secret/{name}\n")
    fake.on("replace", stdout=f"secret/{name}\n")
    fake.on("get", "secret", stdout=f"secret/{name}\n")


def test_key_on_stdin_becomes_a_dockerconfigjson_secret(cli: Any, fake_kubectl: FakeKubectl) -> None:
    answer_ok(fake_kubectl)
    code, out, err = cli("secret", "image-pull", "ngc", stdin=KEY + "\n")
    assert code == 0
    assert out == "secret/ngc created in namespace tao-jobs for nvcr.io\n"
    obj = created(fake_kubectl)
    assert obj["type"] == "kubernetes.io/dockerconfigjson"
    assert obj["metadata"] == {
        "name": "ngc",
        "namespace": "tao-jobs",
        "labels": {"app.kubernetes.io/managed-by": "kubectl-tao", "app.kubernetes.io/component": "image-pull-secret"},
    }
    config = json.loads(base64.b64decode(obj["data"][".dockerconfigjson"]))
    assert config == {"auths": {"nvcr.io": {"username": "$oauthtoken", "password": KEY, "auth": AUTH}}}
    assert fake_kubectl.argvs() == [
        ["create", "-f", "-", "-n", "tao-jobs", "-o", "name"],
        ["get", "secret", "ngc", "-n", "tao-jobs", "-o", "name"],
    ]
    no_key_anywhere(fake_kubectl, out, err)


def test_key_from_a_named_variable(cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch) -> None:
    answer_ok(fake_kubectl, "mirror")
    monkeypatch.setenv("MIRROR_TOKEN", KEY)
    code, out, err = cli(
        "secret", "image-pull", "mirror", "--registry", "registry.local:5000", "--username", "ci",
        "--from-env", "MIRROR_TOKEN", "-n", "team", "-o", "json",
    )
    assert code == 0
    assert json.loads(out) == {
        "name": "mirror", "namespace": "team", "registry": "registry.local:5000", "username": "ci",
        "action": "created",
    }
    config = json.loads(base64.b64decode(created(fake_kubectl)["data"][".dockerconfigjson"]))
    assert config["auths"]["registry.local:5000"]["password"] == KEY
    no_key_anywhere(fake_kubectl, out, err)


def test_docker_hub_is_stored_under_its_index_url(cli: Any, fake_kubectl: FakeKubectl) -> None:
    answer_ok(fake_kubectl, "hub")
    code, _, _ = cli("secret", "image-pull", "hub", "--registry", "docker.io", "--username", "me", stdin=KEY)
    config = json.loads(base64.b64decode(created(fake_kubectl)["data"][".dockerconfigjson"]))
    assert code == 0 and list(config["auths"]) == ["https://index.docker.io/v1/"]


def test_existing_secret_is_refused_without_replace(cli: Any, fake_kubectl: FakeKubectl) -> None:
    fake_kubectl.on("create", rc=1, stderr='Error from server (AlreadyExists): secrets "ngc" already exists')
    code, out, err = cli("secret", "image-pull", "ngc", stdin=KEY)
    assert code == 1 and out == ""
    assert err == (
        "error: secret ngc already exists in namespace tao-jobs; pass --replace to overwrite it "
        "(pods that already pulled keep running)\n"
    )


def test_replace_overwrites_an_existing_secret(cli: Any, fake_kubectl: FakeKubectl) -> None:
    answer_ok(fake_kubectl)
    code, out, _ = cli("secret", "image-pull", "ngc", "--replace", "-o", "name", stdin=KEY)
    assert (code, out) == (0, "secret/ngc\n")
    assert fake_kubectl.argvs()[0] == ["replace", "-f", "-", "-n", "tao-jobs", "-o", "name"]


def test_replace_creates_a_missing_secret(cli: Any, fake_kubectl: FakeKubectl) -> None:
    not_found = 'Error from server (NotFound): error when replacing "STDIN": secrets "ngc" not found'
    fake_kubectl.on("replace", rc=1, stderr=not_found)
    answer_ok(fake_kubectl)
    code, out, _ = cli("secret", "image-pull", "ngc", "--replace", stdin=KEY)
    assert code == 0 and "created" in out
    assert [argv[0] for argv in fake_kubectl.argvs()] == ["replace", "create", "get"]


def test_kubectl_errors_are_shown_without_the_key(cli: Any, fake_kubectl: FakeKubectl) -> None:
    fake_kubectl.on("create", rc=1, stderr=f"error: admission webhook denied {KEY} and {AUTH}")
    code, out, err = cli("secret", "image-pull", "ngc", stdin=KEY)
    assert code == 1 and out == ""
    assert err.startswith("error: ") and "admission webhook denied" in err
    no_key_anywhere(fake_kubectl, err)


def test_secret_missing_after_create_is_an_error(cli: Any, fake_kubectl: FakeKubectl) -> None:
    fake_kubectl.on("create", stdout="secret/ngc\n")
    fake_kubectl.on("get", "secret", rc=1, stderr='Error from server (NotFound): secrets "ngc" not found')
    code, _, err = cli("secret", "image-pull", "ngc", stdin=KEY)
    assert code == 1
    assert err == (
        "error: secret ngc was created but `kubectl get secret ngc -n tao-jobs` does not show it; check your RBAC "
        "(get secrets) and the namespace\n"
    )


@pytest.mark.parametrize(
    ("argv", "stdin", "message"),
    [
        ([], "", "error: stdin: the key is empty; pipe it in"),
        ([], "\n", "error: stdin: the key is empty; pipe it in"),
        ([], f"{KEY}\n{KEY}\n", "error: stdin: the key holds a line break; give the key alone, on one line"),
        ([], f"{KEY[:8]} {KEY[8:]}", "error: stdin: the key holds spaces or control characters"),
        (["--from-env", "NOT_SET_ANYWHERE"], KEY, "error: --from-env (NOT_SET_ANYWHERE): the variable is not set"),
        (["--from-env", "1BAD"], KEY, "error: --from-env is not a valid environment variable name (it starts with"),
        (["--registry", "https://nvcr.io"], KEY, "error: --registry: not a registry host; give one such as nvcr.io"),
        (["--username", "a:b"], KEY, "error: --username: give one word without ':'"),
        (["-o", "wide"], KEY, "error: -o/--output: unknown format 'wide'"),
    ],
)
def test_bad_input_is_refused_before_kubectl(
    cli: Any, fake_kubectl: FakeKubectl, argv: list[str], stdin: str, message: str
) -> None:
    code, out, err = cli("secret", "image-pull", "ngc", *argv, stdin=stdin)
    assert code == 2 and out == ""
    assert err.startswith(message)
    assert fake_kubectl.calls == []
    assert KEY not in err and KEY[8:] not in err


def test_bad_secret_name_is_refused(cli: Any, fake_kubectl: FakeKubectl) -> None:
    code, _, err = cli("secret", "image-pull", "Bad_Name", stdin=KEY)
    assert code == 2
    assert err.startswith("error: NAME is not a valid Kubernetes name: character 1 (an upper-case letter)")


def test_empty_variable_is_refused(cli: Any, fake_kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NGC_API_KEY", "")
    code, _, err = cli("secret", "image-pull", "ngc", "--from-env", "NGC_API_KEY")
    assert code == 2
    assert err.startswith("error: --from-env (NGC_API_KEY): the key is empty")


def test_through_a_real_process_the_key_is_only_on_stdin(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real kubectl wrapper (sh) runs a stand-in kubectl that logs its argv and stdin; the trace log too."""
    log, seen_stdin, trace = tmp_path / "argv.log", tmp_path / "stdin.json", tmp_path / "trace.jsonl"
    fake = tmp_path / "kubectl"
    fake.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$*" >> "{log}"\n'
        'case "$1" in\n'
        f'  create) cat > "{seen_stdin}"; echo secret/ngc ;;\n'
        "  get) echo secret/ngc ;;\n"
        "esac\n",
        encoding="utf-8",
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("KUBECTL_TAO_KUBECTL", str(fake))
    monkeypatch.setenv("KUBECTL_TAO_TRACE", str(trace))
    code, out, err = cli("secret", "image-pull", "ngc", stdin=KEY + "\n")
    assert code == 0, err
    assert log.read_text().splitlines() == ["create -f - -n tao-jobs -o name", "get secret ngc -n tao-jobs -o name"]
    assert KEY in base64.b64decode(json.loads(seen_stdin.read_text())["data"][".dockerconfigjson"]).decode()
    for text in (log.read_text(), trace.read_text(), out, err):
        assert KEY not in text and AUTH not in text
