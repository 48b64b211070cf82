//go:build tools

// Package tools pins the golangci-lint main package for tools/lint/build.sh.
package tools

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
