//go:build tools

// Package tools pins the etcd server command built for the local cluster.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
