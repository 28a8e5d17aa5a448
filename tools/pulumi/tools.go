//go:build tools

// Package tools pins the main package that ../build.sh --set pulumi compiles,
// so that `go mod tidy` keeps its dependencies in go.mod and go.sum.
package tools

import (
	_ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
)
