//go:build tools

// Package tools pins the main packages that ../build.sh compiles, so that
// `go mod tidy` keeps their dependencies in go.mod and go.sum.
package tools

import (
	_ "sigs.k8s.io/cluster-api"
	_ "sigs.k8s.io/cluster-api/bootstrap/kubeadm"
	_ "sigs.k8s.io/cluster-api/controlplane/kubeadm"
	_ "sigs.k8s.io/cluster-api/test/infrastructure/docker"
)
