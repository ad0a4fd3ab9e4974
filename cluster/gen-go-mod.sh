#!/usr/bin/env bash
# Regenerate cluster/go.mod: require k8s.io/kubernetes at K8S_VERSION and map each of its
# staging modules (replaced by ./staging/... upstream) to the published v0.<minor>.<patch>.
set -euo pipefail
usage() { echo "usage: $0 K8S_VERSION (e.g. v1.36.3)" >&2; }
[ "$#" -eq 1 ] || { usage; exit 2; }
version=$1
staging="v0.${version#v1.}"
export GOTOOLCHAIN=local
cd "$(dirname "$0")"
upstream=$(go mod download -json "k8s.io/kubernetes@${version}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
{
  echo "module github.com/kubectl-tao/local-cluster"
  echo
  echo "go 1.26.0"
  echo
  echo "require k8s.io/kubernetes ${version}"
  echo
  echo "replace ("
  sed -n 's#^[[:space:]]*\(k8s.io/[A-Za-z0-9._/-]*\) => ./staging/src/.*#\1#p' "$upstream" | sort -u |
    while read -r mod; do printf '\t%s => %s %s\n' "$mod" "$mod" "$staging"; done
  echo ")"
} > go.mod
