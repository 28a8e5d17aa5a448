//go:build tools

// Package tools pins the main packages that ../build-set.sh compiles, so that `go mod tidy`
// keeps their dependencies in go.mod and go.sum.
package tools

import (
	_ "github.com/coredns/coredns"
)
