//go:build !linux

package netns

import (
	"runtime"
	"testing"
)

// Inside reports whether this process runs in a namespace of [Run]: never, off Linux.
func Inside() bool { return false }

// Run needs Linux's user and network namespaces: elsewhere it fails t, saying so, and returns
// true (the caller returns).
func Run(t *testing.T) bool {
	t.Helper()
	t.Fatalf("netns: a private network namespace for %s needs Linux user and network namespaces; this is %s",
		t.Name(), runtime.GOOS)
	return true
}
