#!/usr/bin/env bash
# Sourced by scripts/local-cluster: the feature gates of kube-apiserver, kube-controller-manager and
# kube-scheduler. KUBECTL_TAO_FEATURE_GATES (NAME=true|false,...) is merged over the version's defaults; `up`
# checks each name against the apiserver binary's own list before starting anything and records the result
# in $dir/feature-gates, which every later start of a component reuses.
# Sourced into a shell that runs with set -euo pipefail (scripts/local-cluster).

# DEFAULTS OVERRIDES -> the merged NAME=VALUE list on stdout (an override replaces a default of the same
# name, in place); a malformed override is a one-line error on stderr and status 2.
merge_gates() {
  local defaults=$1 overrides=$2 item name out=() i found
  local -a wanted=()
  if [ -n "$overrides" ]; then
    IFS=, read -r -a wanted <<<"$overrides"
    [[ $overrides != *, ]] || wanted+=("")
  fi
  for item in "${wanted[@]}"; do
    if ! [[ $item =~ ^[A-Z][A-Za-z0-9]*=(true|false)$ ]]; then
      echo "local-cluster: KUBECTL_TAO_FEATURE_GATES: '$item' is not NAME=true|false; use e.g. KUBECTL_TAO_FEATURE_GATES=WorkloadWithJob=false (comma-separated)" >&2
      return 2
    fi
  done
  if [ -n "$defaults" ]; then IFS=, read -r -a out <<<"$defaults"; fi
  for item in "${wanted[@]}"; do
    name=${item%%=*}
    found=
    for i in "${!out[@]}"; do
      if [ "${out[$i]%%=*}" = "$name" ]; then out[i]=$item; found=1; fi
    done
    [ -n "$found" ] || out+=("$item")
  done
  (IFS=,; echo "${out[*]}")
}

# APISERVER_BINARY: refuse (status 2, one line) a gate of KUBECTL_TAO_FEATURE_GATES that this kube-apiserver
# does not know, before anything starts: the apiserver would otherwise exit at start with "unrecognized
# feature gate".
check_gate_names() {
  local apiserver=$1 known item name unknown=() items=()
  [ -n "${KUBECTL_TAO_FEATURE_GATES:-}" ] || return 0
  known=$("$apiserver" --help 2>&1 | grep -oE 'kube:[A-Za-z0-9]+=true\|false' | sed 's/^kube://; s/=.*//')
  IFS=, read -r -a items <<<"$KUBECTL_TAO_FEATURE_GATES"
  for item in "${items[@]}"; do
    name=${item%%=*}
    grep -qxF "$name" <<<"$known" || unknown+=("$name")
  done
  if [ "${#unknown[@]}" -gt 0 ]; then
    echo "local-cluster: KUBECTL_TAO_FEATURE_GATES: Kubernetes $K8S_VERSION has no feature gate ${unknown[*]}; \`$apiserver --help\` lists them under --feature-gates" >&2
    return 2
  fi
}
