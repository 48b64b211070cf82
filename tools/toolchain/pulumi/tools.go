//go:build tools

// Package tools pins the Pulumi CLI main package for tools/toolchain/build.sh.
package tools

import _ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
