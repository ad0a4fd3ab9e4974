"""Start-up checks that run before any third-party import: put a release archive's bundled packages on
sys.path, and when a dependency is still missing, say how to fix it for the way kubectl-tao was installed.

Standard library only, and no syntax newer than Python 3.7, so an old python3 still gets a readable error.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

MIN_PYTHON = (3, 11)
# Import names of the runtime dependencies (pyproject.toml's [project].dependencies), and rpds (rpds-py, what
# jsonschema needs compiled): a release archive without a build of it for this Python must say so up front.
DEPENDENCIES = ("typer", "click", "sh", "ruamel.yaml", "jsonschema", "rpds")
# A release archive keeps pure-Python packages in vendor/common and compiled ones per CPython minor version in
# vendor/cp3XY (see scripts/package-release).
VENDOR = "vendor"


def python_tag(version: Sequence[int] = tuple(sys.version_info)) -> str:
    return f"cp{version[0]}{version[1]}"


def bundled_tags(root: Path) -> list[str]:
    """The CPython versions a release archive under ROOT carries compiled packages for, oldest first."""
    vendor = root / VENDOR
    if not vendor.is_dir():
        return []
    tags = [p.name for p in vendor.iterdir() if p.is_dir() and p.name.startswith("cp")]
    return sorted(tags, key=lambda tag: int(tag[3:] or 0))


def add_bundled_packages(root: Path) -> None:
    """Put ROOT/vendor/common and ROOT/vendor/<this python's tag> first on sys.path (after lib/), so the
    archive's pinned packages win over whatever the system python3 has installed."""
    vendor = root / VENDOR
    if not vendor.is_dir():
        return
    paths = [str(vendor / "common")]
    compiled = vendor / python_tag()
    if compiled.is_dir():
        paths.append(str(compiled))
    lib = str(root / "lib")
    at = sys.path.index(lib) + 1 if lib in sys.path else 0
    sys.path[at:at] = [p for p in paths if p not in sys.path]


def missing_dependencies(names: Sequence[str] = DEPENDENCIES) -> list[str]:
    """Dependencies that cannot be found (without importing them: start-up time counts)."""
    missing = []
    for name in names:
        if sys.modules.get(name) is not None:  # imported already (sh replaces its module: no __spec__ to find)
            continue
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def install_method(root: Path | None, prefix: str) -> str:
    """krew | archive | checkout | pipx | pip: how this copy was installed.

    ROOT is the directory of the `kubectl-tao` script (None for the pip console script); PREFIX is sys.prefix.
    krew unpacks the archive into $KREW_ROOT/store/<plugin>/<version>/, next to $KREW_ROOT/receipts/.
    """
    if root is not None and (root / VENDOR).is_dir():
        store = root.parent.parent
        if store.name == "store" and (store.parent / "receipts").is_dir():
            return "krew"
        return "archive"
    if root is not None and (root / "pyproject.toml").is_file():
        return "checkout"
    if "pipx" in Path(prefix).parts:
        return "pipx"
    return "pip"


def missing_message(method: str, missing: Sequence[str], root: Path | None = None,
                    version: Sequence[int] = tuple(sys.version_info), python: str = sys.executable) -> str:
    """The one-line error for missing dependencies, naming the fix for METHOD (see install_method)."""
    names = ", ".join(missing)
    running = f"Python {version[0]}.{version[1]}"
    if method in ("krew", "archive"):
        tags = bundled_tags(root) if root is not None else []
        supported = ", ".join(f"{t[2]}.{t[3:]}" for t in tags) or "none"
        if tags and python_tag(version) not in tags:
            cause = f"it bundles compiled packages for Python {supported}, and python3 on PATH is {running}"
        else:
            cause = f"its bundled packages could not be found ({names})"
        if method == "krew":
            fix = ("put a python3 of a supported version first on PATH, or reinstall: `kubectl krew uninstall tao && "
                   "kubectl krew install --manifest=tao.yaml --archive=kubectl-tao-vVERSION-OS-ARCH.tar.gz` (both "
                   "from the release)")
        else:
            fix = ("put a python3 of a supported version first on PATH, or unpack this platform's release "
                   "archive (kubectl-tao-vVERSION-OS-ARCH.tar.gz) again")
        return f"kubectl-tao: {cause}; {fix}"
    if method == "checkout":
        where = f" in {root}" if root is not None else ""
        return (f"kubectl-tao needs its Python packages ({names} missing for {python}); "
                f"run `make venv`{where} (or `make install`), or `{python} -m pip install .`")
    if method == "pipx":
        return f"kubectl-tao's pipx environment lacks {names}; run `pipx reinstall kubectl-tao`"
    return (f"kubectl-tao was installed without its dependencies ({names} missing for {python}); run "
            f"`{python} -m pip install --force-reinstall kubectl-tao` (air-gapped: add "
            "`--no-index --find-links WHEELHOUSE`)")


def too_old_message(version: Sequence[int] = tuple(sys.version_info), python: str = sys.executable) -> str:
    return (f"kubectl-tao needs Python >= {MIN_PYTHON[0]}.{MIN_PYTHON[1]}, but {python} is "
            f"{version[0]}.{version[1]}; put a newer python3 first on PATH")


def console_main() -> int:
    """Entry point of the pip/pipx console script: check the dependencies, then run the CLI; the exit code."""
    if tuple(sys.version_info[:2]) < MIN_PYTHON:
        sys.stderr.write(f"error: {too_old_message()}\n")
        return 2
    missing = missing_dependencies()
    if missing:
        sys.stderr.write(f"error: {missing_message(install_method(None, sys.prefix), missing)}\n")
        return 2
    from kubectl_tao.cli.main import main

    return main()
