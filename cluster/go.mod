// Module root of the local cluster's Kubernetes build. Its requirements live in one file per
// Kubernetes version, k8s-<version>.mod (+ .sum), which scripts/build-local-cluster passes as
// `go build -modfile=...`; this file only marks the root and is never read for dependencies.
module github.com/kubectl-tao/local-cluster

go 1.26.0
