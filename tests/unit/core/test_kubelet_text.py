"""The kubelet rewrites `$(VAR)` and `$$` in command, args and env values; kubectl-tao escapes what it passes
so that the container runs exactly the text the user gave."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_tao.core.errors import GateError
from kubectl_tao.jobs.submit import _lint
from kubectl_tao.manifests import kubelet_text, render

# Input / output pairs from the test table of Kubernetes' own expansion (third_party/forked/golang/expansion),
# with VAR_A=A, VAR_B=B, VAR_C=C, VAR_REF=$(VAR_A), VAR_EMPTY="".
ENV = {"VAR_A": "A", "VAR_B": "B", "VAR_C": "C", "VAR_REF": "$(VAR_A)", "VAR_EMPTY": ""}
UPSTREAM = [
    ("$(VAR_A)", "A"),
    ("$(VAR_A)-$(VAR_A)", "A-A"),
    ("$$(VAR_B)_$(VAR_A)", "$(VAR_B)_A"),
    ("f000-$$VAR_A", "f000-$VAR_A"),
    ("$(VAR_A$(VAR_B))", "$(VAR_A$(VAR_B))"),
    ("$(VAR_A$(VAR_B)", "$(VAR_A$(VAR_B)"),
    ("$(VAR_REF)", "$(VAR_A)"),
    ("foo$(VAR_EMPTY)bar", "foobar"),
    ("foo$(VAR_Awhoops!", "foo$(VAR_Awhoops!"),
    ("$?_boo_$!", "$?_boo_$!"),
    ("$VAR_A", "$VAR_A"),
    ("$(VAR_DNE)", "$(VAR_DNE)"),
    ("$$$$$$(BIG_MONEY)", "$$$(BIG_MONEY)"),
    ("$$$$$$$(VAR_A)", "$$$A"),
    ("${VAR_A}", "${VAR_A}"),
    ("$(VAR_C)_______$(", "C_______$("),
    ("$(VAR_A)foobarzab$", "Afoobarzab$"),
    ("--$($($($($--", "--$($($($($--"),
    ("$(foo$$var)", "$(foo$$var)"),
    ("$\u00a3FOO", "$\u00a3FOO"),
]


@pytest.mark.parametrize(("text", "expected"), UPSTREAM)
def test_expand_follows_the_kubelet(text: str, expected: str) -> None:
    assert kubelet_text.expand(text, ENV) == expected


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("echo $$", "echo $$$$"),
        ("echo $(VAR_A)", "echo $$(VAR_A)"),
        ("n=$((1 + 2))", "n=$$((1 + 2))"),
        ("$HOME ${X} $1 \"$@\" cost$", "$HOME ${X} $1 \"$@\" cost$"),  # the kubelet leaves these alone
        ("$$$(VAR_A)", "$$$$$$(VAR_A)"),
    ],
)
def test_escape_doubles_only_what_the_kubelet_would_touch(text: str, escaped: str) -> None:
    assert kubelet_text.escape(text) == escaped
    assert kubelet_text.expand(escaped, ENV) == text


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="$()VAR_B x\u00e9", max_size=40))
def test_escaped_text_survives_the_kubelet_unchanged(text: str) -> None:
    assert kubelet_text.expand(kubelet_text.escape(text), {**ENV, "VAR": "v", "B": "", "x": "y"}) == text


def _container_env(container: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env") or [] if "value" in e}


@pytest.mark.parametrize("nodes", [1, 2])
def test_a_rendered_command_reaches_the_shell_exactly(nodes: int) -> None:
    command = 'echo pid=$$ id=$(TAO_JOB_ID) rank=$(NODE_RANK) sum=$((1+2)) home=$HOME; kill -0 $$'
    spec = render.spec_from_options(
        image="busybox", command=command, name="dino-train-1a2b3c", record_id="dino-train-1a2b3c",
        gpus=0, nodes=nodes, pvc="data", nccl_socket_ifname="eth0",
    )
    job = render.render(spec)[-1]
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = _container_env(container)
    assert "TAO_JOB_ID" in env  # defined: the kubelet would substitute an unescaped $(TAO_JOB_ID)
    assert [kubelet_text.expand(arg, env) for arg in container["args"]][-1] == command
    escaped = "echo pid=$$$$ id=$$(TAO_JOB_ID) rank=$$(NODE_RANK) sum=$$((1+2)) home=$HOME"
    assert container["args"][-1].startswith(escaped)


def test_init_container_and_env_values_are_escaped_too() -> None:
    spec = render.spec_from_options(
        image="busybox", command="true", name="j", record_id="j", gpus=0, storage_tier="C",
        s3_output="s3://bkt/out", s3_inputs=["s3://bkt/in/$(X)/"], mount_path="/work$$", env_secret="creds",
    )
    (job,) = render.render(spec)
    pod = job["spec"]["template"]["spec"]
    assert pod["initContainers"][0]["args"][-1] == "s3://bkt/in/$$(X)/"
    assert _container_env(pod["containers"][0])["TAO_WORKSPACE"] == "/work$$$$"
    assert pod["containers"][0]["volumeMounts"][1]["mountPath"] == "/work$$"  # not expanded by the kubelet


def test_the_secret_lint_judges_the_text_the_container_receives() -> None:
    def objects(command: str) -> list[dict]:
        spec = render.spec_from_options(image="busybox", command=command, name="j", record_id="j", gpus=0, pvc="d")
        return render.render(spec)

    _lint(objects("train --hf-token $(HF_TOKEN) --api-key ${API_KEY}"))  # references pass, escaped or not
    with pytest.raises(GateError, match="inline credential"):
        _lint(objects("train --hf-token hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567$$"))
