package etcdbackup

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// onceRoot holds the directories of what the package's tests and benchmarks set up once (the
// embedded etcd members); TestMain removes it.
var onceRoot = sync.OnceValues(func() (string, error) { return os.MkdirTemp("", "etcdbackup-test-") })

func tempDirForOnce() (string, error) {
	root, err := onceRoot()
	if err != nil {
		return "", err
	}

	return os.MkdirTemp(root, "member-")
}

// closers stop what was set up once (embedded etcd members) when the tests end.
var (
	closersMu sync.Mutex
	closers   []func()
)

func closeAfterTests(f func()) {
	closersMu.Lock()
	defer closersMu.Unlock()

	closers = append(closers, f)
}

func TestMain(m *testing.M) {
	code := m.Run()

	for _, f := range closers {
		f()
	}

	if root, err := onceRoot(); err == nil {
		if err := os.RemoveAll(root); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}

	os.Exit(code)
}
