"""workflows/spec.py: a workflow file is read safely and refused whole, in one line naming the step and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from kubectl_tao.core.errors import UsageError
from kubectl_tao.workflows.spec import MAX_STEPS, Gate, load, parse_gate, parse_text, resolve

SPELLINGS = {"image": "image", "command": "command", "gpus": "gpus", "network-arch": "network_arch",
             "action": "action", "pvc": "pvc", "results-dir": "results_dir"}
HEAD = "apiVersion: kubectl-tao/v1\nkind: Workflow\nmetadata: {name: dino}\n"


def read(text: str) -> Any:
    return load(parse_text(text, "wf.yaml"), "wf.yaml", SPELLINGS)


def refused(text: str) -> str:
    with pytest.raises(UsageError) as caught:
        read(text)
    message = caught.value.message
    assert "\n" not in message and message.startswith("wf.yaml")
    return message


def test_a_chain_defaults_each_step_after_the_one_before_and_merges_defaults() -> None:
    wf = read(HEAD + "defaults: {image: img, gpus: 8}\nsteps:\n- {name: train, command: a}\n"
              "- {name: evaluate, when: train.val_mAP >= 0.5, command: b, gpus: 1}\n- {name: export, command: c}\n")
    assert [(s.name, s.after) for s in wf.steps] == [("train", None), ("evaluate", "train"), ("export", "evaluate")]
    assert wf.step("evaluate").flags == {"image": "img", "gpus": 1, "command": "b"}
    assert wf.step("evaluate").when == Gate("train", "val_mAP", ">=", 0.5)
    assert wf.step("export").given == frozenset({"image", "gpus", "command"})
    assert wf.descendants("train") == ["evaluate", "export"]
    assert wf.ancestors("export") == ["evaluate", "train"]


def test_steps_are_ordered_so_each_runs_after_its_predecessor() -> None:
    wf = read(HEAD + "steps:\n- {name: a, command: x}\n- {name: c, after: b, command: x}\n"
              "- {name: b, after: a, command: x}\n")
    assert [s.name for s in wf.steps] == ["a", "b", "c"]


def test_a_cycle_is_refused_naming_its_steps() -> None:
    message = refused(HEAD + "steps:\n- {name: a, command: x}\n- {name: b, after: c, command: x}\n"
                      "- {name: c, after: b, command: x}\n")
    assert "cycle" in message and "b -> c -> b" in message


def test_an_unknown_after_is_refused_with_a_suggestion() -> None:
    message = refused(HEAD + "steps:\n- {name: train, command: x}\n- {name: eval, after: trian, command: x}\n")
    assert "step 'eval': after names 'trian'" in message and "train" in message


def test_duplicate_step_names_are_refused() -> None:
    assert "used by an earlier step" in refused(HEAD + "steps:\n- {name: a, command: x}\n- {name: a, command: y}\n")


def test_a_gate_on_a_step_that_is_not_an_ancestor_is_refused() -> None:
    message = refused(HEAD + "steps:\n- {name: a, command: x}\n- {name: b, after: a, command: x}\n"
                      "- {name: c, after: a, when: b.acc > 1, command: x}\n")
    assert "step 'c': when reads a metric of 'b'" in message and "not one it runs after" in message


def test_a_gate_on_an_unknown_step_is_refused() -> None:
    assert "no step of this workflow" in refused(
        HEAD + "steps:\n- {name: a, command: x}\n- {name: b, when: z.acc > 1, command: x}\n")


@pytest.mark.parametrize("when", ["a.acc", "a.acc >= high", "a.acc != 1", "__import__('os') > 1", "a.acc >= 1 or 1",
                                  "a.acc => 1", "a.acc >= nan"])
def test_a_gate_is_only_step_kpi_op_number(when: str) -> None:
    with pytest.raises(UsageError, match=r"write STEP\.KPI OP NUMBER"):
        parse_gate(when, "when")


def test_gate_comparisons() -> None:
    assert parse_gate("a.x < 2", "w").passes(1.5) and not parse_gate("a.x == 2", "w").passes(2.5)
    assert parse_gate(" a.loss <= 1e-2 ", "w").threshold == 0.01


def test_references_resolve_to_the_results_directory_and_leave_shell_parameters_alone() -> None:
    text = "run ${train.results}/model.pth ${HOME} $HOME ${x:-y}"
    assert resolve(text, {"train": "/w/r/t1"}) == "run /w/r/t1/model.pth ${HOME} $HOME ${x:-y}"


def test_an_unknown_reference_is_refused() -> None:
    message = refused(HEAD + "steps:\n- {name: a, command: 'x ${b.results}'}\n")
    assert "step 'a': command: ${b.results} names no step" in message


def test_a_reference_to_a_step_not_run_before_is_refused() -> None:
    message = refused(HEAD + "steps:\n- {name: a, command: 'x ${b.results}'}\n- {name: b, command: y}\n")
    assert "does not run after" in message


def test_a_reference_to_another_field_is_refused() -> None:
    assert "the only one is ${STEP.results}" in refused(HEAD + "steps:\n- {name: a, command: 'x ${a.checkpoint}'}\n")


def test_an_unknown_key_is_refused_as_not_a_submit_flag() -> None:
    message = refused(HEAD + "steps:\n- {name: a, command: x, gpu: 2}\n")
    assert "step 'a': 'gpu' is not a submit flag" in message and "gpus" in message


def test_too_many_steps_are_refused() -> None:
    steps = "".join(f"- {{name: s{i}, command: x}}\n" for i in range(10_000))
    assert f"at most {MAX_STEPS}" in refused(HEAD + "steps:\n" + steps)


def test_anchors_and_aliases_are_refused_before_loading() -> None:
    text = HEAD + "defaults: &d {gpus: 1}\nsteps:\n- {name: a, command: x}\n- {name: b, command: *d}\n"
    assert "anchors and aliases are not accepted" in refused(text)


def test_deep_nesting_is_refused_before_loading() -> None:
    assert "nested deeper" in refused(HEAD + "steps: " + "[" * 5000 + "]" * 5000 + "\n")


def test_tags_and_several_documents_are_refused() -> None:
    assert "tags" in refused(HEAD + "steps:\n- !!python/object:os.system {name: a}\n")
    assert "several YAML documents" in refused(HEAD + "steps:\n- {name: a, command: x}\n---\n" + HEAD)


def test_a_wrong_api_version_kind_or_name_is_refused() -> None:
    assert "write `apiVersion: kubectl-tao/v1`" in refused("apiVersion: v1\nkind: Workflow\n")
    assert "write `kind: Workflow`" in refused("apiVersion: kubectl-tao/v1\nkind: Job\n")
    assert "metadata.name is 'Dino'" in refused("apiVersion: kubectl-tao/v1\nkind: Workflow\nmetadata: {name: Dino}\n"
                                                "steps: [{name: a}]\n")


def test_bad_yaml_names_its_line() -> None:
    assert "line 4: not valid YAML (mapping values are not allowed here)" in refused(HEAD + "steps: x: y\n")
