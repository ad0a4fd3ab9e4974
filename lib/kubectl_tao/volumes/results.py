"""`results JOB` and `results pull JOB`: a job's results directory read from its record, through the volume
helper pod (the claim mounted read-only), while the job runs and after its Job is gone.

The record keeps the claim, the mount path and the placement of the job's request, and the results directory.
`pull` lists the directory, takes the SHA-256 in the pod of the files this side has at the same size, skips each
that has the same hash, and streams the rest as one tar over `kubectl exec` (no archive on either side), writing
each to `<name>.kubectl-tao-part` and hashing it as it arrives, while a second exec hashes the same files in the
pod; a file is renamed only when the two hashes agree. Ctrl-C (SIGTERM, SIGHUP) renames the parts that agree by
then and removes the others, so an interrupted pull resumes from what was verified.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubectl_tao.core import contract, names
from kubectl_tao.core.atomicwrite import fsync_file, publish_synced
from kubectl_tao.core.errors import TaoError, UsageError
from kubectl_tao.core.valueclass import Value, record
from kubectl_tao.k8s.kubectl import Kubectl
from kubectl_tao.volumes import resultsview, volume_helper, volumecopy

_PART = ".kubectl-tao-part"
# Both read the names (`./<path>`, one a line) from stdin: thousands of files never make a long command line
# (xargs; not `tar -T`, which some busybox builds leave out). The tar stream is one archive per _TAR_FILES names,
# one after the other: the reader reads across their end-of-archive blocks (ignore_zeros).
_TAR_FILES = 1000
_HASH_SCRIPT = 'cd -- "$1" && tr \'\\n\' \'\\000\' | xargs -0 sha256sum'
_TAR_SCRIPT = f'cd -- "$1" && tr \'\\n\' \'\\000\' | xargs -0 -n {_TAR_FILES} tar -cf - --'
# The hashes of the files a pull streams, read while it streams: one `sha256sum` per batch of names (an empty line
# ends one), so the lines of a batch come when it is hashed (sha256sum's stdout to a pipe is written when it ends),
# not when the last file is: a big file is a batch of its own, small ones go together (few processes).
_HASH_STREAM_SCRIPT = (
    'cd -- "$1" || exit 1; rc=0; set --; '
    'while IFS= read -r n; do '
    'if [ -n "$n" ]; then set -- "$@" "$n"; elif [ "$#" -gt 0 ]; then sha256sum "$@" || rc=1; set --; fi; done; '
    'if [ "$#" -gt 0 ]; then sha256sum "$@" || rc=1; fi; exit "$rc"'
)
_HASH_BATCH_BYTES = 32 << 20
_HASH_BATCH_FILES = 256


@record(frozen=True)
class ResultsSource(Value):
    record_id: str
    namespace: str
    pvc: str
    mount_path: str
    results_dir: str
    node_selector: dict[str, str]
    tolerations: list[dict[str, Any]]
    s3: str | None = None  # storage tier C: the job's S3 prefix (`results_dir` is then the pod's local copy)
    secret: str | None = None  # tier C: the job's credential Secret (its name; the values never leave the pod)
    tools_image: str | None = None  # tier C: the job's S3 client image (--s3-tools-image)
    secret_of_job: bool = True  # tier C: `secret` is the job's per-job Secret (gone with its Job), not a user's

    @property
    def shown(self) -> str:
        """Where the results are, as the user knows it: the S3 prefix, else the directory on the claim."""
        return self.s3 or self.results_dir

    @property
    def where(self) -> str:
        return f"{self.s3} (storage tier C)" if self.s3 else f"{self.results_dir} on pvc/{self.pvc}"


# Tier C: the helper pod's two containers share an emptyDir at S3_DIR: the S3 container (the job's S3 client
# image, the job's credential Secret as its environment) downloads into it; the helper container (busybox) reads it
# (read-only) with the scripts of the claim path.
S3_CONTAINER = "s3"
S3_DIR = "/kubectl-tao-s3"
S3_PULL_DIR = f"{S3_DIR}/pull"
S3_STATUS_DIR = f"{S3_DIR}/status"
# The names older TAO tooling uses for the credentials, as the job's own tier C steps read them.
_S3_ENV = "".join(
    f'if [ -z "${{{new}:-}}" ] && [ -n "${{{old}:-}}" ]; then export {new}="${old}"; fi; '
    for new, old in (("AWS_ACCESS_KEY_ID", "ACCESS_KEY"), ("AWS_SECRET_ACCESS_KEY", "SECRET_KEY"),
                     ("AWS_ENDPOINT_URL", "S3_ENDPOINT_URL"), ("AWS_DEFAULT_REGION", "CLOUD_REGION"))
)
# $1 bucket, $2 prefix (ends in /): every object under it, as JSON (the CLI joins the pages).
_S3_LIST_SCRIPT = _S3_ENV + 'exec aws s3api list-objects-v2 --bucket "$1" --prefix "$2" --output json'
# $1 bucket, $2 prefix, $3 local directory: the objects named on stdin (`./<name>`, one a line), one by one.
_S3_FETCH_SCRIPT = _S3_ENV + (
    'while IFS= read -r n; do n=${n#./}; '
    'aws s3 cp --only-show-errors "s3://$1/$2$n" "$3/$n" || exit 1; done'
)
# $1 bucket, $2 prefix, $3 local directory: every object under the prefix, in one call.
_S3_FETCH_ALL_SCRIPT = _S3_ENV + 'exec aws s3 cp --recursive --only-show-errors "s3://$1/$2" "$3/"'


def source_of(
    tracked: Any,
    *,
    node_selector: list[str] | None = None,
    tolerations: list[str] | None = None,
    s3_tools_image: str | None = None,
    env_secret: str | None = None,
    env_file: str | None = None,
) -> ResultsSource:
    """Where a job's results are, from its record; the job's own placement unless flags are given. For storage
    tier C, S3_TOOLS_IMAGE replaces the job's S3 client image and ENV_SECRET (an existing Secret) its credential
    Secret; ENV_FILE (the flag's value, only named here) says credentials are given for this run."""
    record_id = tracked.id
    results_dir = tracked.job.results_dir
    flags = tracked.k8s.flags
    if results_dir.startswith("s3://"):
        # No claim to follow and no GPU to use: the job's node selector and tolerations (the nodes its S3 access
        # came from), without its GPU product selector and GPU toleration.
        placed = {key: value for key, value in flags.items() if key not in ("gpu_product", "gpus")}
        selector, tolerating = _placement(placed, node_selector, tolerations)
        source = _s3_source(tracked, results_dir, flags, selector, tolerating)
        if s3_tools_image:
            from kubectl_tao.core.names import validate_image

            source = source.replaced(tools_image=validate_image(s3_tools_image, "--s3-tools-image"))
        if env_secret:
            source = source.replaced(secret=names.validate_dns_subdomain(env_secret, "--env-secret"),
                                     secret_of_job=False)
        return source
    selector, tolerating = _placement(flags, node_selector, tolerations)
    for given, flag in ((s3_tools_image, "--s3-tools-image"), (env_secret, "--env-secret"), (env_file, "--env-file")):
        if given:
            raise UsageError(
                f"{flag}: job {record_id} keeps its results on a volume, not in S3 (storage tier C); leave {flag} out"
            )
    pvc, mount_path = flags.get("pvc"), flags.get("mount_path") or "/workspace"
    if not pvc or not tracked.namespace:
        raise UsageError(
            f"job {record_id}: its record names no volume (a record of another tool, or written before kubectl-tao "
            "kept the request); mount the claim yourself"
        )
    if not names.is_under(results_dir, mount_path):
        raise UsageError(f"job {record_id}: its results directory {results_dir} is not on its volume ({mount_path})")
    return ResultsSource(record_id, tracked.namespace, pvc, mount_path, results_dir, selector, tolerating)


def _placement(
    flags: dict[str, Any], node_selector: list[str] | None, tolerations: list[str] | None
) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The helper pod's placement: the flags given, else the job's own (its GPU toleration included)."""
    from kubectl_tao.core.flagvalues import parse_key_values, parse_toleration

    if node_selector or tolerations:
        return (parse_key_values(list(node_selector or []), "node selector"),
                [parse_toleration(t) for t in tolerations or []])
    selector = parse_key_values(list(flags.get("node_selector") or []), "node selector")
    if flags.get("gpu_product"):
        selector.update(parse_key_values([contract.gpu_product_selector(flags["gpu_product"])], "gpu product"))
    tolerating = [parse_toleration(t) for t in flags.get("toleration") or []]
    if int(flags.get("gpus") or 0) > 0:
        tolerating.append(dict(contract.GPU_TOLERATION))  # it may be placed where the job ran
    return selector, tolerating


def _s3_source(
    tracked: Any, uri: str, flags: dict[str, Any], selector: dict[str, str], tolerating: list[dict[str, Any]]
) -> ResultsSource:
    """A tier C job's results: its S3 prefix, read with its credential Secret and its S3 client image."""
    from kubectl_tao.manifests.render import DEFAULT_S3_TOOLS_IMAGE

    bucket, _, _ = uri[len("s3://"):].partition("/")
    if not bucket or not tracked.namespace or tracked.k8s.request is None:
        raise UsageError(
            f"job {tracked.id}: its record does not say where and how its S3 results ({uri}) are read (a record of "
            "another tool, or written before kubectl-tao kept the request); read them with your S3 client"
        )
    secrets = list(tracked.k8s.secret_names)
    users = flags.get("env_secret_name")  # a job submitted with --env-secret NAME: that Secret, kept by its user
    image = str(flags.get("s3_tools_image") or DEFAULT_S3_TOOLS_IMAGE)
    return ResultsSource(tracked.id, tracked.namespace, "", S3_DIR, S3_PULL_DIR, selector, tolerating,
                         s3=uri.rstrip("/") + "/", secret=secrets[0] if secrets else (str(users) if users else None),
                         tools_image=image, secret_of_job=bool(secrets))


def _s3_parts(source: ResultsSource) -> tuple[str, str]:
    """The bucket and the key prefix (ending in /) of a tier C source."""
    bucket, _, prefix = str(source.s3)[len("s3://"):].partition("/")
    return bucket, prefix


def _manifest(source: ResultsSource, image: str) -> dict[str, Any]:
    if source.s3:
        return s3_manifest(source, image)
    return volume_helper.helper_pod_manifest(
        volume_helper.helper_name(), source.namespace, source.pvc, image=image, mount_path=source.mount_path,
        read_only=True, node_selector=source.node_selector, tolerations=source.tolerations,
    )


def s3_manifest(source: ResultsSource, image: str) -> dict[str, Any]:
    """The tier C helper pod: the volume helper (IMAGE, least privilege, the same labels and lifetime) with an
    emptyDir instead of the claim, read-only in its container, and a second container in the job's S3 client image
    with the job's credential Secret as its environment (`envFrom`: never in argv, the manifest or a log), which
    downloads into the emptyDir."""
    import copy

    pod = volume_helper.helper_pod_manifest(
        volume_helper.helper_name(), source.namespace, "unused", image=image, mount_path=S3_DIR, read_only=True,
        node_selector=source.node_selector, tolerations=source.tolerations,
    )
    spec = pod["spec"]
    spec["volumes"] = [{"name": "volume", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}]
    helper = spec["containers"][0]
    s3 = copy.deepcopy(helper)
    s3.update(
        name=S3_CONTAINER,
        image=str(source.tools_image),
        volumeMounts=[{"name": "volume", "mountPath": S3_DIR}, {"name": "tmp", "mountPath": "/tmp"}],
        env=[{"name": "HOME", "value": "/tmp"}],  # the AWS CLI's own files; the root filesystem is read-only
    )
    if source.secret:
        s3["envFrom"] = [{"secretRef": {"name": source.secret, "optional": False}}]
    spec["containers"].append(s3)
    return pod


def run_secret(pod: dict[str, Any], credentials: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The tier C pod reading CREDENTIALS (an env-file given for this run) instead of the job's Secret: a Secret of
    its own (named after the pod, labelled as the helper's; `HelperPod` creates it from stdin as the pod's child,
    before the pod may start, and deletes it with the pod) as the S3 container's environment. The Secret object
    carries the values: it only ever travels on kubectl's stdin."""
    import copy

    name = f"{pod['metadata']['name']}-s3"
    namespace = pod["metadata"]["namespace"]
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": contract.volume_helper_labels()},
        "type": "Opaque",
        "stringData": dict(credentials),
    }
    pod = copy.deepcopy(pod)
    for container in pod["spec"]["containers"]:
        if container["name"] == S3_CONTAINER:
            container["envFrom"] = [{"secretRef": {"name": name, "optional": False}}]
    return pod, secret


def _check_secret(kc: Kubectl, source: ResultsSource, given: bool) -> None:
    """The credential Secret (the job's, or GIVEN with --env-secret) must exist (the job's per-job Secret is removed
    with its Job): its name only, never its data."""
    if not source.secret:
        return
    found = kc.run(["get", "secret", source.secret, "-n", source.namespace, "-o", "name"], namespaced=False,
                   check=False)
    if found.returncode == 0:
        return
    error = kc.error_for(found.stderr)
    if getattr(error, "reason", None) == "NotFound":
        if given:
            raise UsageError(
                f"--env-secret {source.secret}: no Secret of that name in namespace {source.namespace}; name an "
                "existing one, or give the credentials with --env-file FILE"
            )
        why = "it is removed with the job's Job" if source.secret_of_job else "the job's --env-secret"
        raise UsageError(
            f"job {source.record_id}: its credential Secret {source.namespace}/{source.secret} is gone ({why}); "
            f"give the S3 credentials for {source.s3} again with --env-file FILE ('-' = stdin), or name an "
            "existing Secret with --env-secret NAME"
        )
    if getattr(error, "reason", None) != "Forbidden":  # not allowed to read Secrets: the pod may still use it
        raise error


def _s3_exec(pod: volume_helper.HelperPod, script: str, *args: str, stdin: bytes | None = None) -> Any:
    """`sh -c SCRIPT sh ARGS...` in the tier C pod's S3 container, stdout kept (a listing, never file data)."""
    from kubectl_tao.k8s.kubectl import Completed

    chunks: list[bytes] = []
    feed = None if stdin is None else (lambda pipe: pipe.write(stdin))
    done = pod.kc.pipe(
        ["exec", "-i", pod.name, "-n", pod.namespace, "-c", S3_CONTAINER, "--", "sh", "-c", script, "sh", *args],
        feed=feed, sink=chunks.append, namespaced=False, check=False,
    )
    return Completed(b"".join(chunks).decode("utf-8", errors="replace"), done.stderr, done.returncode)


def _wait_both(pod: volume_helper.HelperPod, source: ResultsSource, timeout: float) -> None:
    """Until both containers of the tier C pod run (the helper's start waits for one)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        seen = pod.kc.json(["get", "pod", pod.name, "-n", pod.namespace], namespaced=False) or {}
        statuses = (seen.get("status") or {}).get("containerStatuses") or []
        if len(statuses) >= 2 and all((c.get("state") or {}).get("running") is not None for c in statuses):
            return
        problem = volume_helper.start_problem(seen, [])
        ended = [c for c in statuses if (c.get("state") or {}).get("terminated")]
        if problem is None and ended:  # one container ended while the other runs (no `sleep` in its image?)
            gone = ended[0]["state"]["terminated"]
            said = " ".join(str(x) for x in (gone.get("reason"), gone.get("message")) if x) or "no reason given"
            problem = f"its {ended[0].get('name') or 'container'} container ended: {' '.join(said.split())[:300]}"
        if problem is None and time.monotonic() >= deadline:
            problem = f"it did not start within {timeout:g}s"
        if problem is not None:
            raise TaoError(
                f"the tier C helper pod {pod.namespace}/{pod.name} could not start: {problem}; its S3 client runs "
                f"in the job's --s3-tools-image ({source.tools_image}), the reader in --helper-image: fix it and "
                "run again"
            )
        time.sleep(0.5)


def _list_s3(pod: volume_helper.HelperPod, source: ResultsSource) -> Listing:
    bucket, prefix = _s3_parts(source)
    listed = _s3_exec(pod, _S3_LIST_SCRIPT, bucket, prefix)
    if listed.returncode != 0:
        raise TaoError(f"listing {source.s3} failed: {_said(listed.stderr)}")
    try:
        entries = resultsview.parse_s3_listing(listed.stdout, prefix)
    except ValueError as exc:
        raise TaoError(f"listing {source.s3} failed: {exc}") from None
    if not entries:
        raise TaoError(
            f"job {source.record_id}: nothing under its S3 results prefix {source.s3} (yet): a tier C job uploads "
            "its results when its command ends"
        )
    statuses: dict[str, str] = {}
    wanted = resultsview.status_paths(entries)
    if wanted:
        fetched = _s3_exec(pod, _S3_FETCH_SCRIPT, bucket, prefix, S3_STATUS_DIR, stdin=volumecopy.names_stdin(wanted))
        if fetched.returncode != 0:
            raise TaoError(f"reading {source.s3}{wanted[0]} failed: {_said(fetched.stderr)}")
        tails = pod.script(resultsview.status_tails_script(), S3_STATUS_DIR)
        statuses = resultsview.parse_results_listing(tails.stdout)[1] if tails.returncode == 0 else {}
    return Listing(source, resultsview.arrange(entries), statuses, resultsview.folders_of(entries))


def _fetch_s3(pod: volume_helper.HelperPod, source: ResultsSource, wanted: list[resultsview.Entry],
              everything: bool) -> None:
    """The chosen objects into the pod's emptyDir (S3_PULL_DIR), where the claim path's hashing and tar read them."""
    bucket, prefix = _s3_parts(source)
    if everything:
        fetched = _s3_exec(pod, _S3_FETCH_ALL_SCRIPT, bucket, prefix, S3_PULL_DIR)
    else:
        fetched = _s3_exec(pod, _S3_FETCH_SCRIPT, bucket, prefix, S3_PULL_DIR,
                           stdin=volumecopy.names_stdin(e.path for e in wanted))
    if fetched.returncode != 0:
        raise TaoError(f"downloading {source.s3} in the helper pod failed: {_said(fetched.stderr)}; pull again")


@record(frozen=True)
class Listing(Value):
    source: ResultsSource
    entries: list[resultsview.Entry]
    statuses: dict[str, str]
    folders: list[resultsview.Folder]


def _list(pod: volume_helper.HelperPod, source: ResultsSource) -> Listing:
    listed = pod.script(resultsview.results_listing_script(), source.results_dir)
    if listed.returncode == 3:
        raise TaoError(
            f"job {source.record_id}: its results directory {source.results_dir} does not exist on pvc/{source.pvc} "
            "(yet): the job has not written anything there"
        )
    if listed.returncode != 0:
        raise TaoError(f"listing {source.results_dir} failed: {_said(listed.stderr)}")
    listed_folders: list[str] = []
    entries, statuses = resultsview.parse_results_listing(listed.stdout, listed_folders)
    return Listing(source, resultsview.arrange(entries), statuses, resultsview.folders_of(entries, listed_folders))


def _image_flag(source: ResultsSource) -> str:
    """What picks the images a helper pod that cannot start names."""
    return f"--helper-image, or the job's --s3-tools-image {source.tools_image}" if source.s3 else "--helper-image"


def _check(kc: Kubectl, source: ResultsSource, credentials: dict[str, str] | None, env_secret: bool) -> None:
    if source.s3:
        if not credentials:  # given credentials replace the job's Secret, whether it is there or not
            _check_secret(kc, source, env_secret)
    else:
        volume_helper.check_claim(kc, source.namespace, source.pvc)


def _pod(kc: Kubectl, source: ResultsSource, image: str, timeout: float,
         credentials: dict[str, str] | None) -> Any:
    """The helper pod's context manager: with a Secret of its own when CREDENTIALS are given (tier C)."""
    manifest, secrets = _manifest(source, image), []
    if source.s3 and credentials:
        manifest, secret = run_secret(manifest, credentials)
        secrets.append(secret)
    return volume_helper.helper_pod(kc, manifest, timeout=timeout, image_flag=_image_flag(source), secrets=secrets)


def _listing(pod: volume_helper.HelperPod, source: ResultsSource, timeout: float) -> Listing:
    if source.s3:
        _wait_both(pod, source, timeout)
        return _list_s3(pod, source)
    return _list(pod, source)


def list_results(kc: Kubectl, source: ResultsSource, *, image: str, timeout: float,
                 credentials: dict[str, str] | None = None, env_secret: bool = False) -> Listing:
    """The results listing; a tier C job's read with CREDENTIALS (an env-file's) when given, else with its
    credential Secret (ENV_SECRET: the one named with --env-secret)."""
    _check(kc, source, credentials, env_secret)
    with _pod(kc, source, image, timeout, credentials) as pod:
        return _listing(pod, source, timeout)


@record(frozen=True)
class PullResult(Value):
    job: str
    dest: str
    pulled: int
    pulled_bytes: int
    skipped: int
    skipped_bytes: int
    verified: int

    def summary(self) -> str:
        return (
            f"pulled {self.pulled} file(s) ({volumecopy.human_bytes(self.pulled_bytes)}) of job {self.job} into "
            f"{self.dest}, {self.skipped} unchanged skipped ({volumecopy.human_bytes(self.skipped_bytes)}), "
            f"{self.verified} verified"
        )


def wanted_files(entries: list[resultsview.Entry], paths: list[str], latest: bool) -> list[resultsview.Entry]:
    """The regular files a pull takes: all, those under PATHS, or with LATEST the ones `*_latest.pth` stands for."""
    files = {e.path: e for e in entries if e.link is None}
    if latest:
        chosen = resultsview.latest_files(entries)
        if not chosen:
            raise UsageError("--latest: the results directory has no *_latest.pth checkpoint; name PATHs instead")
        return [files[p] for p in chosen if p in files]
    if not paths:
        return list(files.values())
    out: dict[str, resultsview.Entry] = {}
    for given in paths:
        path = volumecopy.member_name(given, "PATH")
        hits = [e for p, e in files.items() if p == path or p.startswith(path + "/")]
        if not hits:
            raise UsageError(f"PATH {given}: nothing of that name in the results directory; see `kubectl tao results`")
        out.update((e.path, e) for e in hits)
    return list(out.values())


def _local_path(dest: str, name: str) -> str:
    path = os.path.join(dest, *name.split("/"))
    real_dest = os.path.realpath(dest)
    parent = os.path.realpath(os.path.dirname(path))
    if parent != real_dest and not parent.startswith(real_dest.rstrip(os.sep) + os.sep):
        raise UsageError(f"--dest {dest}: {name} would be written through a link out of it; remove the link")
    if os.path.islink(path):
        raise UsageError(f"--dest {dest}: {name} is a link; remove it, a pull never writes through one")
    return path


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def pull(
    kc: Kubectl,
    source: ResultsSource,
    *,
    paths: list[str],
    dest: str,
    latest: bool,
    image: str,
    timeout: float,
    on_plan: Callable[[int, int], None] | None = None,
    on_bytes: Callable[[int], None] | None = None,
    credentials: dict[str, str] | None = None,
    env_secret: bool = False,
) -> PullResult:
    if os.path.exists(dest) and not os.path.isdir(dest):
        raise UsageError(f"--dest {dest}: not a directory; name a directory (it is created when missing)")
    for given in paths:
        volumecopy.member_name(given, "PATH")
    _check(kc, source, credentials, env_secret)
    with _pod(kc, source, image, timeout, credentials) as pod:
        listing = _listing(pod, source, timeout)
        wanted = wanted_files(listing.entries, paths, latest)
        if wanted and source.s3:
            _fetch_s3(pod, source, wanted, everything=not paths and not latest)
        # Only a file this side already has at the same size may be skipped: only those are hashed before the
        # copy; the others are hashed in the pod while they travel (verified before their rename).
        present = [e for e in wanted if _same_size(_local_path(dest, e.path), e.size)]
        hashes = _hashes(pod, source, present)
        send, skip = [], []
        for entry in wanted:
            local = _local_path(dest, entry.path)
            same = entry in present and hashes.get(entry.path) == _sha256(local)
            (skip if same else send).append(entry)
        total = sum(e.size or 0 for e in send)
        if on_plan is not None:
            on_plan(len(send), total)
        verified = _receive(pod, source, send, dest, on_bytes) if send else 0
    return PullResult(source.record_id, dest, len(send), total, len(skip), sum(e.size or 0 for e in skip), verified)


def _same_size(path: str, size: int | None) -> bool:
    return os.path.isfile(path) and os.path.getsize(path) == size


def _hashes(pod: volume_helper.HelperPod, source: ResultsSource, entries: list[resultsview.Entry]) -> dict[str, str]:
    """The SHA-256 of ENTRIES in the pod (names on stdin), by name."""
    if not entries:
        return {}
    hashed = pod.script(_HASH_SCRIPT, source.results_dir, stdin=volumecopy.names_stdin(e.path for e in entries))
    if hashed.returncode != 0:
        raise TaoError(f"hashing the results failed: {_said(hashed.stderr)}")
    return {n: f.sha256 for n, f in volumecopy.parse_listing(hashed.stdout).items() if f.sha256}


def _receive(
    pod: volume_helper.HelperPod,
    source: ResultsSource,
    send: list[resultsview.Entry],
    dest: str,
    on_bytes: Callable[[int], None] | None,
) -> int:
    """SEND as one tar stream, each file written to its part name and hashed as it arrives, while a second exec
    hashes the same files in the pod (its lines read as they come), and a thread puts each part on disk (fsync) as
    soon as it is written; a file is renamed to its final name only when both hashes agree (each directory fsynced
    once after). Ctrl-C (SIGTERM, SIGHUP) still renames the parts verified by then (`_keep_verified`) and raises
    PullInterrupted; every other part is removed on the way out (an error, Ctrl-C)."""
    import queue
    import threading

    wanted = {e.path for e in send}
    arrived: dict[str, tuple[str, str, str]] = {}  # name -> (part, final, SHA-256 of what arrived)
    hashed: dict[str, str] = {}  # the pod's hashes so far (a line at a time, from the hashing thread)
    failed: list[BaseException] = []
    stop = threading.Event()

    def hash_there() -> None:
        try:
            hashed_lines = _HashLines(hashed, stop)
            there = pod.exec(["sh", "-c", _HASH_STREAM_SCRIPT, "sh", source.results_dir],
                             feed=lambda pipe: pipe.write(_hash_batches(send)), sink=hashed_lines)
            hashed_lines.end()
            if there.returncode != 0:
                raise TaoError(f"hashing the results failed: {_said(there.stderr)}")
        except BaseException as exc:  # raised in the caller once the stream is read
            failed.append(exc)

    written: queue.Queue[str | None] = queue.Queue()

    synced: set[str] = set()

    def sync() -> None:
        while (part := written.get()) is not None:
            try:
                fsync_file(Path(part))
            except BaseException as exc:  # raised in the caller once the stream is read
                failed.append(exc)
                return
            synced.add(part)

    def read(stream: Any) -> None:
        # a stream cut mid-file: that file stays unverified; kubectl's exit code says why the stream ended
        with contextlib.suppress(volumecopy.StreamCut):
            read_all(stream)

    def read_all(stream: Any) -> None:
        buffer = memoryview(bytearray(1 << 20))
        for member, chunks in volumecopy.tar_entries(stream, buffer):
            name = volumecopy.member_name(member.name, "member")
            if not member.isfile() or name not in wanted:
                continue  # only the regular files asked for; never a link, device or other name
            final = _local_path(dest, name)
            os.makedirs(os.path.dirname(final), exist_ok=True)
            part = final + _PART
            digest = hashlib.sha256()
            arrived[name] = (part, final, "")
            with open(part, "wb", buffering=0) as out:
                for chunk in chunks:
                    digest.update(chunk)
                    out.write(chunk)
                    if on_bytes is not None:
                        on_bytes(len(chunk))
            arrived[name] = (part, final, digest.hexdigest())
            written.put(part)

    os.makedirs(dest, exist_ok=True)
    names = volumecopy.names_stdin(e.path for e in send)
    hasher = threading.Thread(target=hash_there, daemon=True)
    syncer = threading.Thread(target=sync, daemon=True)
    done: list[str] = []
    problems: list[str] = []
    try:
        hasher.start()
        syncer.start()
        try:
            sent = pod.exec(["sh", "-c", _TAR_SCRIPT, "sh", source.results_dir],
                            feed=lambda pipe: pipe.write(names), reader=read)
        finally:
            written.put(None)  # an interrupt does not wait for it: the verified parts are fsynced as they are kept
        syncer.join()
        hasher.join()  # a cut stream too: the files that arrived whole and match are kept for the next pull
        # Only a part on disk (fsynced) whose two hashes agree is published, also when the pod's hashing or an
        # fsync failed: what was verified is kept for the next pull, and the failure is raised after.
        verified: list[tuple[Path, Path]] = []
        for name in sorted(arrived):
            part, final, digest = arrived[name]
            if digest and digest == hashed.get(name) and part in synced:
                verified.append((Path(part), Path(final)))
                done.append(name)
            elif digest and sent.returncode == 0 and not failed:
                problems.append(f"{name}: its SHA-256 changed while it was pulled (the job still writes it?)")
        publish_synced(verified)
        if failed and sent.returncode == 0:
            raise failed[0]
        if sent.returncode != 0:
            raise TaoError(f"the copy from the volume stopped: {_said(sent.stderr)}; {len(done)} file(s) that "
                           "arrived whole and verified are kept, pull again to resume")
    except KeyboardInterrupt as exc:
        stop.set()  # the pod's hashing ends at its next line; the helper pod's removal ends it in any case
        raise PullInterrupted(_keep_verified(arrived, dict(hashed))) from exc
    finally:
        with volume_helper.signals_held():  # no half or unverified file left, not even as a part
            for part, _final, _digest in arrived.values():
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(part)
    missing = sorted(wanted - set(done) - {p.split(":")[0] for p in problems})
    problems += [f"{name}: missing from the stream" for name in missing]
    if problems:
        raise TaoError(f"verification failed for {len(problems)} file(s): {problems[0]}; pull again")
    return len(done)


def _hash_batches(entries: list[resultsview.Entry]) -> bytes:
    """ENTRIES' names for _HASH_STREAM_SCRIPT: `./<name>` a line, an empty line after each batch (up to
    _HASH_BATCH_FILES names or _HASH_BATCH_BYTES, a bigger file alone)."""
    lines: list[str] = []
    count = size = 0
    for entry in entries:
        if count and (entry.size or 0) >= _HASH_BATCH_BYTES:
            lines.append("\n")
            count = size = 0
        lines.append(f"./{entry.path}\n")
        count, size = count + 1, size + (entry.size or 0)
        if count >= _HASH_BATCH_FILES or size >= _HASH_BATCH_BYTES:
            lines.append("\n")
            count = size = 0
    return "".join(lines).encode("utf-8", "surrogateescape")


class PullInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGTERM, SIGHUP) during a pull's stream, once the files verified by then are kept: KEPT of them."""

    def __init__(self, kept: int) -> None:
        super().__init__(kept)
        self.kept = kept


def _keep_verified(arrived: dict[str, tuple[str, str, str]], hashed: dict[str, str]) -> int:
    """On an interrupt: the parts that arrived whole and whose hash the pod has already sent, the same, put on disk
    and renamed to their names as the normal end does (fsync, replace, each directory fsynced); how many. A
    second interrupt meanwhile stops it (the caller removes the parts left): nothing waits on the cluster here."""
    agreed = [
        (Path(part), Path(final)) for name, (part, final, digest) in sorted(arrived.items())
        if digest and digest == hashed.get(name)
    ]
    with contextlib.suppress(KeyboardInterrupt):
        waiting = [(part, final) for part, final in agreed if part.exists()]  # not renamed by the normal end
        for part, _final in waiting:
            fsync_file(part)
        publish_synced(waiting)
    return sum(1 for part, _final in agreed if not part.exists())  # renamed (the parts left are removed after)


class _Stopped(Exception):
    """Ends the pod's hashing exec once an interrupted pull no longer reads it."""


class _HashLines:
    """A sink for `sha256sum`'s output: each whole line, as it arrives, into HASHED (name -> SHA-256); raises once
    STOP is set, which ends the exec (an interrupted pull no longer needs it)."""

    def __init__(self, hashed: dict[str, str], stop: Any) -> None:
        self.hashed, self.stop, self.rest = hashed, stop, b""

    def __call__(self, data: bytes) -> None:
        if self.stop.is_set():
            raise _Stopped
        whole, newline, self.rest = (self.rest + data).rpartition(b"\n")
        if newline:
            self._take(whole)

    def end(self) -> None:
        self._take(self.rest)
        self.rest = b""

    def _take(self, lines: bytes) -> None:
        text = lines.decode("utf-8", errors="replace")
        self.hashed.update((n, f.sha256) for n, f in volumecopy.parse_listing(text).items() if f.sha256)


def _said(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip() and not ln.startswith("command terminated")]
    return (lines[-1] if lines else "no message")[:300]


TENSORBOARD_PORT = 6006


def tensorboard_manifest(source: ResultsSource, image: str) -> dict[str, Any]:
    """A helper pod running TensorBoard over the results directory (claim read-only) in IMAGE (the job's own by
    default: TAO images ship it). It listens on the pod's loopback only: nothing in the cluster reaches it, the
    port-forward does (kubectl's port-forward connects inside the pod's network namespace)."""
    command = ["tensorboard", "--logdir", source.results_dir, "--host", "127.0.0.1", "--port", str(TENSORBOARD_PORT)]
    return volume_helper.helper_pod_manifest(
        volume_helper.helper_name(), source.namespace, source.pvc, image=image, mount_path=source.mount_path,
        read_only=True, node_selector=source.node_selector, tolerations=source.tolerations, command=command,
        port=TENSORBOARD_PORT,
    )


def tensorboard(
    kc: Kubectl,
    source: ResultsSource,
    *,
    image: str,
    port: int,
    timeout: float,
    on_ready: Callable[[str], None],
    on_output: Callable[[bytes], None],
) -> None:
    """TensorBoard over the job's results until interrupted (Ctrl-C): the pod, then `kubectl port-forward` on
    127.0.0.1:PORT; the pod is removed on every way out. A port-forward that ends by itself is a failure."""
    if source.s3:
        raise UsageError(
            f"job {source.record_id}: its results are in S3 ({source.s3}, storage tier C); TensorBoard here reads a "
            f"claim: `kubectl tao results pull {source.record_id}`, then run `tensorboard --logdir {source.record_id}`"
        )
    volume_helper.check_claim(kc, source.namespace, source.pvc)
    with volume_helper.helper_pod(kc, tensorboard_manifest(source, image), timeout=timeout,
                                  image_flag="--image") as pod:
        _wait_listening(pod, timeout)
        ended = kc.pipe(
            ["port-forward", "--address", "127.0.0.1", "-n", pod.namespace, f"pod/{pod.name}",
             f"{port}:{TENSORBOARD_PORT}"],
            sink=_when_forwarding(port, lambda: on_ready(f"http://127.0.0.1:{port}/"), on_output), namespaced=False,
            check=False,
        )
        raise TaoError(f"the port-forward to {pod.name} ended: {_said(ended.stderr)}; run again (another --port?)")


def _when_forwarding(
    port: int, ready: Callable[[], None], on_output: Callable[[bytes], None]
) -> Callable[[bytes], None]:
    """A sink for kubectl port-forward's stdout that hands it on and calls READY once, at its line
    `Forwarding from 127.0.0.1:PORT -> 6006` (client-go's portforward writes it once the local port listens), so
    the URL is printed only when a browser can connect."""
    seen = bytearray()
    said = f"Forwarding from 127.0.0.1:{port} -> ".encode()
    done = False

    def sink(data: bytes) -> None:
        nonlocal done
        on_output(data)
        if not done:
            seen.extend(data)
            if said in seen:
                done = True
                ready()
            else:
                del seen[:max(0, len(seen) - len(said))]

    return sink


# Connects to TensorBoard's port on the pod's loopback (argv[1]); exits 1 while nothing listens there, silently:
# python's "Connection refused" on kubectl's stderr would read as an unreachable cluster.
_LISTENING_PY = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection(('127.0.0.1', int(sys.argv[1])), 2).close()\n"
    "except OSError:\n"
    "    sys.exit(1)\n"
)
# The image's python (TensorBoard is a Python program) runs it; 127 when it has none.
_LISTENING_SCRIPT = (
    'for py in python3 python; do if command -v "$py" >/dev/null 2>&1; then exec "$py" -c "$1" "$2"; fi; done; '
    "exit 127"
)
_NO_PYTHON = 127


def _wait_listening(pod: volume_helper.HelperPod, timeout: float) -> None:
    """Until TensorBoard accepts a connection inside the pod (an early browser connect would end the
    port-forward): a TaoError when its container ends first, or nothing listens within TIMEOUT seconds. An image
    without python cannot be asked: the port-forward starts at once."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        probe = pod.exec(["sh", "-c", _LISTENING_SCRIPT, "sh", _LISTENING_PY, str(TENSORBOARD_PORT)])
        if probe.returncode in (0, _NO_PYTHON):
            return
        seen = pod.kc.json(["get", "pod", pod.name, "-n", pod.namespace], namespaced=False) or {}
        problem = None if volume_helper.is_running(seen) else volume_helper.start_problem(seen, [])
        if problem is not None:
            raise TaoError(f"TensorBoard in {pod.namespace}/{pod.name} stopped before it listened: {problem}; fix "
                           "it (--image) and run again")
        if time.monotonic() >= deadline:
            raise TaoError(f"TensorBoard in {pod.namespace}/{pod.name} did not listen on port {TENSORBOARD_PORT} "
                           f"within {timeout:g}s; run again with a longer --timeout")
        time.sleep(1.0)
