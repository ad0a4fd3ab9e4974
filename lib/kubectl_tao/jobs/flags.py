"""The job flags' values (core/flagtable.JOB_FLAGS) typed into a request (jobs/plan.JobRequest), the checks a
kept request's values get (`resubmit`), and the refusals that name a flag before any other work."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubectl_tao.core.flagtable import JOB_FLAGS

if TYPE_CHECKING:
    from kubectl_tao.jobs.plan import JobRequest


def job_request(given: frozenset[str] | None = None, **values: Any) -> JobRequest:
    """The request of VALUES (job flag -> value; every other flag at its default). GIVEN: the flags set on the
    command line; without it, those whose value differs from the default."""
    from kubectl_tao.jobs.plan import JobRequest  # here: --help lists the verbs without the lifecycle modules

    unknown = values.keys() - JOB_FLAGS.keys()
    if unknown:
        raise TypeError(f"not job flags: {sorted(unknown)}")
    fields: dict[str, Any] = {}
    for key, flag in JOB_FLAGS.items():
        value = values.get(key, flag.default)
        fields[key] = tuple(value or ()) if flag.kind == "many" else value
    if given is None:
        given = frozenset(key for key, value in fields.items() if value not in (JOB_FLAGS[key].default, ()))
    return JobRequest(**fields, given=given)


# What each kind of flag holds in a kept request (jobs/plan.stored), as the command line's parser types it.
_KEPT_AS = {
    "int": ((int,), "a whole number (e.g. 8)"),
    "optint": ((int, type(None)), "a whole number or null"),
    "switch": ((bool,), "true or false"),
    "many": ((list, type(None)), "a list of strings"),
    "text": ((str, type(None)), "a string or null"),
    "word": ((str,), "a string"),
}


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    names = {str: "a string", int: "a whole number", float: "a number with a fraction", list: "a list",
             dict: "an object"}
    return next((name for kind, name in names.items() if isinstance(value, kind)), "a value of another kind")


def kept_value_problem(key: str, value: Any) -> str | None:
    """What is wrong with VALUE as the kept value of job flag KEY (the type `submit`'s parser gives that flag:
    a whole number is never the string "8", a switch is true or false), or None when it is that type."""
    kinds, wanted = _KEPT_AS[JOB_FLAGS[key].kind]
    good = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if good and isinstance(value, list):
        good = all(isinstance(item, str) for item in value)
        if not good:
            return f"a list holding {_json_kind(next(i for i in value if not isinstance(i, str)))}, not {wanted}"
    return None if good else f"{_json_kind(value)}, not {wanted}"


def checked_warnings(job: JobRequest) -> list[str]:
    """The flags checked before any other work, each refusal naming its flag: --gpus and --nodes within the
    bounds fit applies too, the image references as the container runtime parses them. Returns a warning for
    each image without a tag (pulled as `:latest`)."""
    from kubectl_tao.core import imageref, names
    from kubectl_tao.core.flagvalues import check_shape

    if not job.action_request:
        check_shape(job.gpus, job.nodes)
    warnings = []
    for image, flag in ((job.image, "--image"), (job.s3_tools_image, "--s3-tools-image")):
        if image:
            names.validate_image(str(image), flag)  # whitespace and control characters first, then the grammar
            warning = imageref.check(str(image), flag)
            if warning:
                warnings.append(warning)
    return warnings
