//go:build tools

// Package tools pins the v3.66.0 language host main packages for tools/toolchain/build.sh.
package tools

import (
	_ "github.com/pulumi/pulumi/sdk/v3/go/pulumi-language-go"
	_ "github.com/pulumi/pulumi/sdk/v3/nodejs/cmd/pulumi-language-nodejs"
	_ "github.com/pulumi/pulumi/sdk/v3/python/cmd/pulumi-language-python"
)
