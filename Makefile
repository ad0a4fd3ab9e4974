# kubectl-tao: the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
PREFIX ?= $(HOME)/.local
export KUBECTL_TAO_CACHE ?= $(HOME)/.cache/kubectl-tao
PROVIDER ?= local

.PHONY: help venv test-deps cluster-deps lint unit bats e2e install-tests test demo cluster cluster-build cluster-down bench install release clean gpu-bundle go-test

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

venv: $(VENV)/.installed ## Create the virtualenv with the package and its test tools

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e '.[test]'
	touch $@

test-deps: venv ## Install bats and its helpers (Debian packages) when missing
	scripts/install-test-deps

cluster-deps: ## Install the Debian packages of the real nodes (containerd, runc, CNI, busybox) when missing
	scripts/install-cluster-deps

lint: venv ## ruff and shellcheck
	$(BIN)/ruff check .
	$(BIN)/shellcheck -x $$(grep -lE '^#!/usr/bin/env (ba)?sh' scripts/* templates/k8s/*.sh 2>/dev/null)

unit: venv ## Unit tests only (no cluster)
	$(BIN)/pytest tests/unit -q

# bats over tests/bats; in CI (CI=true) a skipped test fails the run, naming why it could not run
BATS_RUN = tap=$$(mktemp) && trap 'rm -f "$$tap"' EXIT && \
	{ PATH="$(CURDIR)/$(BIN):$$PATH" bats tests/bats | tee "$$tap"; [ "$${PIPESTATUS[0]}" = 0 ]; } && \
	if [ "$${CI:-}" = true ] && skipped=$$(grep -E '^ok [0-9]+ .* \# skip' "$$tap"); then \
	  printf 'CI=true: a bats test may not skip; these could not run:\n%s\n' "$$skipped" >&2; exit 1; fi

bats: test-deps ## Shell-level tests of the scripts and the plugin
	@$(BATS_RUN)

cluster-build: ## Build (or reuse) the local control plane binaries
	scripts/build-local-cluster

cluster: venv cluster-deps ## Start the local control plane (PROVIDER=kind for kind)
	scripts/local-cluster up --provider $(PROVIDER)

cluster-down: ## Stop the local control plane and remove its data
	scripts/local-cluster down

e2e: venv cluster-deps cluster-build ## End-to-end tests against the local control plane
	$(BIN)/pytest tests/e2e -q

install-tests: venv ## Release archives through krew (built from its Go module), and the air-gapped wheelhouse
	$(BIN)/pytest tests/install -q

test: test-deps cluster-deps lint cluster-build go-test ## Everything: ruff, shellcheck, bats, Go (device plugin), unit, install, e2e and reliability tests
	@$(BATS_RUN)
	$(BIN)/pytest tests

demo: venv cluster-deps cluster-build ## Start the local cluster and run a job end to end
	scripts/demo

bench: venv ## Benchmarks against the running local cluster (run `make cluster` first)
	$(PY) bench/run.py

install: venv ## Put kubectl-tao (and its completion helper) on PATH under $(PREFIX)/bin
	mkdir -p $(PREFIX)/bin
	ln -sf $(CURDIR)/kubectl-tao $(PREFIX)/bin/kubectl-tao
	@if [ -e scripts/kubectl_complete-tao ]; then ln -sf $(CURDIR)/scripts/kubectl_complete-tao $(PREFIX)/bin/kubectl_complete-tao; fi
	@echo "installed $(PREFIX)/bin/kubectl-tao; make sure $(PREFIX)/bin is on PATH, then run: kubectl tao --help"

gpu-bundle: ## Write the GPU bundle (GPU_BUNDLE_DIR, default dist/gpu-bundle): <= 60 MiB, runs gpu-smoke on a GPU host
	scripts/build-gpu-bundle $(GPU_BUNDLE_DIR)

go-test: ## Go unit tests of the local cluster's device plugin (cluster/fakegpu)
	cd cluster && go test -modfile=k8s-$$(sed -n 's/^K8S_VERSION=//p' versions.env).mod ./fakegpu

release: ## Build the self-contained release archives and the krew manifest into dist/
	scripts/package-release

clean: ## Remove the virtualenv and caches of this checkout (not the Go build cache)
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
