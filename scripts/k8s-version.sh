#!/usr/bin/env bash
# Sourced by build-local-cluster and local-cluster: read cluster/versions.env and settle K8S_VERSION,
# the Kubernetes version of the local cluster. KUBECTL_TAO_K8S_VERSION picks one of K8S_VERSIONS;
# unset, the default K8S_VERSION applies. Needs from the caller: repo. Sets K8S_VERSION, k8s_minor.
# shellcheck disable=SC2154 # repo is set by the caller
set -euo pipefail # as in the callers

# shellcheck source-path=SCRIPTDIR source=../cluster/versions.env
. "$repo/cluster/versions.env"
if [ -n "${KUBECTL_TAO_K8S_VERSION:-}" ]; then
  case ",$K8S_VERSIONS," in
    *",$KUBECTL_TAO_K8S_VERSION,"*) K8S_VERSION=$KUBECTL_TAO_K8S_VERSION ;;
    *)
      echo "$(basename "$0"): KUBECTL_TAO_K8S_VERSION must be one of ${K8S_VERSIONS//,/, }, got '${KUBECTL_TAO_K8S_VERSION}'" >&2
      exit 2 ;;
  esac
fi
k8s_minor=${K8S_VERSION#v1.}
k8s_minor=${k8s_minor%%.*}

# The device plugin of the real nodes (cluster/fakegpu) is cached by a hash of its sources, so that a
# change to it rebuilds only it: $cache/fakegpu-<K8S_VERSION>-<hash>/bin/fakegpu. Its tests are not part of it.
fakegpu_hash() {
  local f
  for f in "$repo"/cluster/fakegpu/*.go; do
    case "$f" in *_test.go) ;; *) cat "$f" ;; esac
  done | grep -v '^$' | sha256sum | cut -c1-12
}
