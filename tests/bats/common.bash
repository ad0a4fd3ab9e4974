# shellcheck shell=bash
# What the bats suites share (`load common` at the top of a suite): bats 1.5's `run` flags, bats-support and
# bats-assert, the repository's root, and the setup steps several suites repeat.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

REPO="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"

# export_exit_codes: TAO_EXIT_CODES, the table of exit codes as submit renders it into the pod (restarts/table.py)
export_exit_codes() {
  TAO_EXIT_CODES=$(PYTHONPATH="$REPO/lib" python3 -c \
    'from kubectl_tao.restarts import table; print(table.pod_text())')
  export TAO_EXIT_CODES
}

# export_retry_signs: TAO_RETRY_SIGNS, the signs as submit renders them into the pod (restarts/signs.py, from
# core/causes.py's table)
export_retry_signs() {
  TAO_RETRY_SIGNS=$(PYTHONPATH="$REPO/lib" python3 -c \
    'from kubectl_tao.restarts import signs; print(signs.signs_text())')
  export TAO_RETRY_SIGNS
}

# in_test_home: HOME is a folder of the test's own, and the test runs in its temporary folder
in_test_home() {
  export HOME="$BATS_TEST_TMPDIR/home"
  mkdir -p "$HOME"
  cd "$BATS_TEST_TMPDIR" || return
}

# query FILE EXPR: evaluate a Python expression over `docs`, the JSON documents of a rendered manifest.
query() {
  python3 -c 'import sys, yaml; docs=[d for d in yaml.safe_load_all(open(sys.argv[1])) if d is not None]; print(eval(sys.argv[2]))' "$1" "$2"
}
