//go:build tools

// Package tools pins the versitygw main package for tools/versitygw/build.sh.
package tools

import _ "github.com/versity/versitygw/cmd/versitygw"
