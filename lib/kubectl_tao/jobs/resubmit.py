"""`resubmit`'s request: the job request a record kept, read back and checked (jobs/flags.JOB_FLAGS), bound to
the record's results directory so the new job resumes from its checkpoints."""

from __future__ import annotations

from typing import Any

from kubectl_tao.core.errors import UsageError
from kubectl_tao.core.flagtable import JOB_FLAGS
from kubectl_tao.core.redact import REDACTED
from kubectl_tao.jobs.flags import job_request, kept_value_problem
from kubectl_tao.jobs.plan import flags_stored


def request_from_record(
    record_id: str, record: dict[str, Any], extra: dict[str, Any], max_restarts: int | None,
    files: tuple[str, str] = ("its record", "its record's additions"),
) -> Any:
    """The job request a record kept, bound to the record's results directory; MAX_RESTARTS (not None) replaces
    the kept one. UsageError (one line) when the record keeps no request, one this version cannot read, or a
    value of another type than `submit`'s parser gives the flag (a hand-edited record): each names the field,
    in FILES (the record's file, the file of its additions), and the fix. Then `submit`'s own checks follow."""

    kept = extra.get("request")
    flags = kept.get("flags") if isinstance(kept, dict) else None
    if not isinstance(flags, dict):
        raise UsageError(
            f"job {record_id}: its record keeps no job request (submitted by another tool or an older kubectl-tao), "
            "so it cannot be resubmitted; run `kubectl tao submit` with its flags"
        )
    flags = flags_stored(flags)
    unknown = sorted(set(flags) - set(JOB_FLAGS))
    if unknown:
        raise UsageError(
            f"job {record_id}: its record's request has flags this kubectl-tao does not know ({', '.join(unknown)}); "
            "resubmit it with the kubectl-tao that submitted it"
        )
    record_file, extra_file = files
    fix = "correct it there, or run `kubectl tao submit` with the job's flags"
    for key, value in flags.items():
        problem = kept_value_problem(key, value)
        if problem is not None:
            raise UsageError(
                f"job {record_id}: request.flags.{key} in {extra_file} is {problem} (what {JOB_FLAGS[key].names[0]} "
                f"takes); {fix}"
            )
    kept_given = kept.get("given")
    if kept_given is not None and not (
        isinstance(kept_given, list) and all(isinstance(name, str) for name in kept_given)
    ):
        raise UsageError(f"job {record_id}: request.given in {extra_file} is not a list of flag names; {fix}")
    for key, value in flags.items():
        texts = value if isinstance(value, list) else [value]
        if any(isinstance(text, str) and REDACTED in text for text in texts):
            flag = JOB_FLAGS[key].names[0]
            raise UsageError(
                f"job {record_id}: its record keeps {flag} with a credential redacted, so the job cannot be rebuilt "
                f"from it; submit it again with the credential in a Secret (--env NAME, --env-file or --env-secret)"
            )
    given = set(kept_given or []) & set(JOB_FLAGS)
    flags = dict(flags)
    results = record.get("results_dir")
    if not isinstance(results, str) or not results:
        raise UsageError(f"job {record_id}: its record names no results directory to resume from")
    if REDACTED in results:
        raise UsageError(
            f"job {record_id}: results_dir in {record_file} had a credential redacted, so it names no directory to "
            "resume from; run `kubectl tao submit` with the job's flags and --results-dir set to the directory"
        )
    if not flags.get("action_request"):  # an action request's results dir is a flag of its own, kept as given
        flags["results_dir"] = results
        given.add("results_dir")
        if str(flags.get("storage_tier") or "A").upper() == "C":
            flags["s3_output"] = None  # the old upload destination is the results dir now
            given.discard("s3_output")
    if max_restarts is not None:
        flags["max_restarts"] = max_restarts
        given.add("max_restarts")
    return job_request(frozenset(given), **flags)
