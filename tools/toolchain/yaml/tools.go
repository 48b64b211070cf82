//go:build tools

// Package tools pins the pulumi-language-yaml main package for tools/toolchain/build.sh.
package tools

import _ "github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml"
