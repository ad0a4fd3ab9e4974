"""A workflow file (docs/workflows.md): parsed safely, checked whole, its steps in the order they run.

Pure: text in, a Workflow (or one UsageError line naming the step and field, and the fix) out. What a step's
flags mean is not decided here: the caller hands in the job flags' spellings (core/flagtable.JOB_FLAGS), and
each step's flags are then checked as `submit` checks them. Here: the file's shape (YAML without anchors,
aliases or deep nesting, at most MAX_STEPS steps), the step names, `after` (one predecessor per step: a tree,
never a cycle), `when` (STEP.KPI OP NUMBER of an ancestor step, nothing else) and `${STEP.results}` references
(the step itself or an ancestor).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from kubectl_tao.core.errors import UsageError
from kubectl_tao.core.valueclass import Factory, Value, record

API_VERSION = "kubectl-tao/v1"
KIND = "Workflow"
MAX_STEPS = 100
MAX_DEPTH = 8  # mappings and sequences inside one another; a workflow file needs 4
MAX_BYTES = 1 << 20
MAX_STEP_NAME = 20  # the step name ends up in record ids' neighbours and labels: short
MAX_WORKFLOW_NAME = 40
STEP_KEYS = ("name", "after", "when")
OPS = (">=", "<=", "==", ">", "<")

_STEP_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_WHEN = re.compile(
    r"\s*([a-z0-9][-a-z0-9]*)\.([A-Za-z_][A-Za-z0-9_]{0,63})\s*(>=|<=|==|>|<)\s*"
    r"([-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*"
)
# ${NAME.FIELD}: a dot is no shell parameter name, so ${HOME} and the like stay the shell's
_REFERENCE = re.compile(r"\$\{([A-Za-z0-9_-]+)\.([A-Za-z0-9_]+)\}")


@record(frozen=True)
class Gate(Value):
    """`when: STEP.KPI OP THRESHOLD`: the last value of KPI in STEP's status.json, compared with THRESHOLD."""

    step: str
    kpi: str
    op: str
    threshold: float

    def text(self) -> str:
        return f"{self.step}.{self.kpi} {self.op} {self.threshold:g}"

    def passes(self, value: float) -> bool:
        return {
            ">=": value >= self.threshold,
            "<=": value <= self.threshold,
            "==": value == self.threshold,
            ">": value > self.threshold,
            "<": value < self.threshold,
        }[self.op]


@record(frozen=True)
class Step(Value):
    name: str
    after: str | None  # the predecessor (None: the first step)
    when: Gate | None
    flags: dict[str, Any] = Factory(dict)  # job flag key (JOB_FLAGS' key) -> value, defaults merged in
    given: frozenset[str] = frozenset()  # the flag keys the file set (in defaults or the step)


@record(frozen=True)
class Workflow(Value):
    name: str
    steps: list[Step]  # in file order; every step after its predecessor

    def step(self, name: str) -> Step:
        return next(step for step in self.steps if step.name == name)

    def ancestors(self, name: str) -> list[str]:
        """The steps NAME runs after, nearest first."""
        found, after = [], self.step(name).after
        while after is not None:
            found.append(after)
            after = self.step(after).after
        return found

    def successors(self, name: str) -> list[str]:
        return [step.name for step in self.steps if step.after == name]

    def descendants(self, name: str) -> list[str]:
        """Every step that runs only after NAME, in file order."""
        return [step.name for step in self.steps if name in self.ancestors(step.name)]


def _where(source: str, step: str | None, field: str) -> str:
    return f"{source}: step {step!r}: {field}" if step is not None else f"{source}: {field}"


def parse_text(text: str, source: str) -> Any:
    """The YAML document of TEXT, read with the safe loader after one pass over its events refused anchors,
    aliases, tags, several documents and nesting deeper than MAX_DEPTH (so nothing expands while loading)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError
    from ruamel.yaml.events import (
        AliasEvent,
        CollectionStartEvent,
        DocumentStartEvent,
        MappingEndEvent,
        NodeEvent,
        SequenceEndEvent,
    )

    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise UsageError(f"{source}: larger than {MAX_BYTES // 1024} KiB; a workflow file is a short list of steps")
    yaml = YAML(typ="safe", pure=True)
    depth = documents = 0
    try:
        for event in yaml.parse(text):
            if isinstance(event, AliasEvent) or (isinstance(event, NodeEvent) and event.anchor is not None):
                line = event.start_mark.line + 1 if event.start_mark else "?"
                raise UsageError(
                    f"{source}: line {line}: YAML anchors and aliases are not accepted in a workflow file; "
                    "write each value out (put shared flags under `defaults`)"
                )
            if isinstance(event, CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    line = event.start_mark.line + 1 if event.start_mark else "?"
                    raise UsageError(
                        f"{source}: line {line}: nested deeper than {MAX_DEPTH} levels; a workflow file is "
                        "`steps:` holding flat steps"
                    )
                if getattr(event, "tag", None) not in (None, "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"):
                    raise UsageError(f"{source}: YAML tags ({event.tag}) are not accepted in a workflow file")
            elif isinstance(event, (MappingEndEvent, SequenceEndEvent)):
                depth -= 1
            elif isinstance(event, DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise UsageError(f"{source}: holds several YAML documents; put one workflow in a file")
            elif isinstance(event, NodeEvent) and getattr(event, "tag", None) not in (None, "!"):
                raise UsageError(f"{source}: YAML tags ({event.tag}) are not accepted in a workflow file")
        return yaml.load(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UsageError(f"{source}: {where}not valid YAML ({problem}); fix the file") from None


def _check_name(value: object, where: str, most: int) -> str:
    if not isinstance(value, str) or not _STEP_NAME_RE.fullmatch(value) or len(value) > most:
        raise UsageError(
            f"{where} is {value!r}: use lower-case letters, digits and '-' (at most {most} characters, "
            "starting and ending with a letter or digit)"
        )
    return value


def parse_gate(text: object, where: str) -> Gate:
    """`STEP.KPI OP NUMBER`, OP one of >= > <= < ==; nothing else."""
    found = _WHEN.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        raise UsageError(
            f"{where} is {text!r}: write STEP.KPI OP NUMBER, OP one of {' '.join(OPS)} (e.g. train.val_mAP >= 0.5)"
        )
    threshold = float(found.group(4))
    if not math.isfinite(threshold):
        raise UsageError(f"{where}: the threshold {found.group(4)} is not a finite number")
    return Gate(found.group(1), found.group(2), found.group(3), threshold)


def _flags(
    raw: Mapping[Any, Any], where: str, spellings: Mapping[str, str], extra_keys: tuple[str, ...]
) -> dict[str, Any]:
    """RAW's job flags by key (spellings: the long name without dashes -> key); other keys refused."""
    from kubectl_tao.core.suggest import did_you_mean

    found: dict[str, Any] = {}
    for name, value in raw.items():
        if name in extra_keys:
            continue
        if not isinstance(name, str) or name not in spellings:
            hint = did_you_mean(str(name), [*spellings, *extra_keys])
            raise UsageError(
                f"{where}: {name!r} is not a submit flag{hint or ''}; use submit's long flag names without the "
                "dashes (e.g. network-arch)"
            )
        found[spellings[name]] = value
    return found


def load(doc: Any, source: str, spellings: Mapping[str, str]) -> Workflow:
    """The workflow of DOC (parse_text's result). SPELLINGS: each job flag's long name without the dashes
    ("network-arch") -> its key ("network_arch"). UsageError (one line) for the first problem."""
    if not isinstance(doc, dict):
        raise UsageError(f"{source}: not a mapping; a workflow file starts with `apiVersion: {API_VERSION}`")
    for key in doc:
        if key not in ("apiVersion", "kind", "metadata", "defaults", "steps"):
            raise UsageError(
                f"{source}: unknown top-level key {key!r}; a workflow has apiVersion, kind, metadata, defaults "
                "and steps"
            )
    if doc.get("apiVersion") != API_VERSION:
        raise UsageError(f"{source}: apiVersion is {doc.get('apiVersion')!r}; write `apiVersion: {API_VERSION}`")
    if doc.get("kind") != KIND:
        raise UsageError(f"{source}: kind is {doc.get('kind')!r}; write `kind: {KIND}`")
    metadata = doc.get("metadata")
    if not isinstance(metadata, dict) or set(metadata) - {"name"}:
        raise UsageError(f"{source}: metadata must be a mapping holding only `name` (e.g. metadata: {{name: dino}})")
    name = _check_name(metadata.get("name"), f"{source}: metadata.name", MAX_WORKFLOW_NAME)
    defaults_raw = doc.get("defaults") or {}
    if not isinstance(defaults_raw, dict):
        raise UsageError(f"{source}: defaults must be a mapping of submit flags (e.g. defaults: {{gpus: 8}})")
    defaults = _flags(defaults_raw, f"{source}: defaults", spellings, ())
    steps_raw = doc.get("steps")
    if not isinstance(steps_raw, list) or not steps_raw:
        raise UsageError(f"{source}: steps must be a non-empty list of steps (each with a name and a command)")
    if len(steps_raw) > MAX_STEPS:
        raise UsageError(
            f"{source}: {len(steps_raw)} steps; a workflow has at most {MAX_STEPS} (split it into several workflows)"
        )
    names: list[str] = []
    raw_steps: list[tuple[str, dict[str, Any]]] = []
    for index, raw in enumerate(steps_raw):
        if not isinstance(raw, dict):
            raise UsageError(f"{source}: steps[{index}] is not a mapping; write `- name: STEP` and its flags")
        step_name = _check_name(raw.get("name"), f"{source}: steps[{index}].name", MAX_STEP_NAME)
        if step_name in names:
            raise UsageError(
                f"{source}: step {step_name!r}: the name is used by an earlier step too; give each step its own name"
            )
        names.append(step_name)
        raw_steps.append((step_name, raw))
    steps: list[Step] = []
    for index, (step_name, raw) in enumerate(raw_steps):
        after = raw.get("after", names[index - 1] if index else None)
        if after is not None:
            if not isinstance(after, str):
                raise UsageError(f"{_where(source, step_name, 'after')} must be one step name (one predecessor)")
            if after not in names:
                from kubectl_tao.core.suggest import did_you_mean

                raise UsageError(
                    f"{_where(source, step_name, 'after')} names {after!r}, which is no step of this workflow"
                    f"{did_you_mean(after, names) or ''}; name a step above"
                )
            if after == step_name:
                raise UsageError(f"{_where(source, step_name, 'after')} names the step itself; name the step before it")
        elif index:
            raise UsageError(f"{_where(source, step_name, 'after')} is empty; only the first step starts the workflow")
        when = parse_gate(raw["when"], _where(source, step_name, "when")) if raw.get("when") is not None else None
        own = _flags(raw, f"{source}: step {step_name!r}", spellings, STEP_KEYS)
        steps.append(Step(step_name, after, when, {**defaults, **own}, frozenset({*defaults, *own})))
    workflow = Workflow(name, steps)
    _check_graph(workflow, source)
    return _ordered(workflow)


def _check_graph(workflow: Workflow, source: str) -> None:
    parents = {step.name: step.after for step in workflow.steps}
    for step in workflow.steps:
        seen, at = [step.name], step.after
        while at is not None:
            if at in seen:
                loop = " -> ".join([*seen[seen.index(at):], at])
                raise UsageError(
                    f"{_where(source, step.name, 'after')}: the steps wait on each other in a cycle ({loop}); "
                    "make one of them follow a step outside the cycle"
                )
            seen.append(at)
            at = parents[at]
    for step in workflow.steps:
        ancestors = workflow.ancestors(step.name)
        if step.when is not None:
            if step.when.step not in parents:
                raise UsageError(
                    f"{_where(source, step.name, 'when')} reads {step.when.step!r}, which is no step of this "
                    "workflow; gate on a step this one runs after"
                )
            if step.when.step not in ancestors:
                raise UsageError(
                    f"{_where(source, step.name, 'when')} reads a metric of {step.when.step!r}, which has not "
                    f"finished when this step starts (not one it runs after: {', '.join(ancestors) or 'none'}); "
                    "gate on one of those, or set `after`"
                )
        for key, value in step.flags.items():
            for text in value if isinstance(value, list) else [value]:
                if isinstance(text, str):
                    _check_references(text, step.name, key, [step.name, *ancestors], parents, source)


def _check_references(
    text: str, step: str, key: str, allowed: list[str], steps: Mapping[str, Any], source: str
) -> None:
    field = key.replace("_", "-")
    for found in _REFERENCE.finditer(text):
        target, what = found.group(1), found.group(2)
        if what != "results":
            raise UsageError(
                f"{_where(source, step, field)}: {found.group(0)} is no reference a workflow resolves; the only one "
                "is ${STEP.results}"
            )
        if target not in steps:
            raise UsageError(
                f"{_where(source, step, field)}: {found.group(0)} names no step of this workflow; name a step above"
            )
        if target not in allowed:
            raise UsageError(
                f"{_where(source, step, field)}: {found.group(0)} names a step this one does not run after, so its "
                "results may not exist yet; reference this step or one it runs after"
            )


def _ordered(workflow: Workflow) -> Workflow:
    """The steps with every step after its predecessor (file order where it already is)."""
    placed: list[Step] = []
    left = list(workflow.steps)
    while left:
        done = {step.name for step in placed}
        ready = [step for step in left if step.after is None or step.after in done]
        placed.extend(ready)
        left = [step for step in left if step not in ready]
    return Workflow(workflow.name, placed)


def resolve(text: str, results: Mapping[str, str]) -> str:
    """TEXT with every ${STEP.results} replaced by RESULTS[STEP] (load() checked every reference)."""
    return _REFERENCE.sub(lambda found: results[found.group(1)], text)
