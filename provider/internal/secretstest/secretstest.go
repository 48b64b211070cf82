// Package secretstest gives tests a real Talos machine secrets bundle, as `talosctl gen secrets`
// makes it, with its certificates issued at a fixed time, so that what the tests generate from it
// (configurations, golden files) is the same on every run.
package secretstest

import (
	"sync"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
)

// Bundle is the bundle, made once per test binary (it takes a second or two) and shared: a test
// that changes it changes a copy.
var Bundle = sync.OnceValue(func() *secrets.Bundle {
	b, err := secrets.NewBundle(secrets.NewFixedClock(time.Unix(1_700_000_000, 0)), config.TalosVersion1_11)
	if err != nil {
		panic(err)
	}

	return b
})
