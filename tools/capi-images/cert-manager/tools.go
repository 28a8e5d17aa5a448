//go:build tools

// Package tools pins the main packages that ../../build.sh --set capi-images
// compiles, so that `go mod tidy` keeps their dependencies in go.mod and go.sum.
package tools

import (
	_ "github.com/cert-manager/cert-manager/cmd/controller"
	_ "github.com/cert-manager/cert-manager/cmd/webhook"
	_ "github.com/cert-manager/cert-manager/cmd/cainjector"
)
