#!/usr/bin/env bash
# Generate cluster/k8s-<K8S_VERSION>.mod (+ .sum): require k8s.io/kubernetes at K8S_VERSION and map
# each of its staging modules (replaced by ./staging/... upstream) to the published v0.<minor>.<patch>,
# then tidy it against tools.go and fakegpu. Builds select the file with `go build -modfile=`.
set -euo pipefail
usage() { echo "usage: $0 K8S_VERSION (e.g. v1.37.2)" >&2; }
[ "$#" -eq 1 ] || { usage; exit 2; }
version=$1
[[ $version =~ ^v1\.[0-9]+\.[0-9]+$ ]] || { echo "$0: K8S_VERSION must look like v1.37.2, got '$version'" >&2; exit 2; }
staging="v0.${version#v1.}"
export GOTOOLCHAIN=local
cd "$(dirname "$0")"
modfile="k8s-${version}.mod"
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
} > "$modfile"
rm -f "k8s-${version}.sum"
go mod tidy -modfile="$modfile"
