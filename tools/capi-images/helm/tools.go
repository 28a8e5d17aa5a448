//go:build tools

// Package tools pins the main packages that ../../build.sh --set capi-images
// compiles, so that `go mod tidy` keeps their dependencies in go.mod and go.sum.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
