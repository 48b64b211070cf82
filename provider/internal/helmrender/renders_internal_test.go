package helmrender

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Storing a render keeps the cache at MaxCachedRenders entries, the least recently used removed.
func TestRenderCacheIsBounded(t *testing.T) {
	c := NewCache(t.TempDir())
	was := MaxCachedRenders
	MaxCachedRenders = 10

	t.Cleanup(func() { MaxCachedRenders = was })

	base := time.Now().Add(-time.Hour)

	for i := range 5 {
		key := fmt.Sprintf("k%d", i)
		if err := c.storeRender(key, &Manifest{Release: key}); err != nil {
			t.Fatal(err)
		}

		at := base.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(c.renderPath(key), at, at); err != nil {
			t.Fatal(err)
		}
	}

	MaxCachedRenders = 3

	// A hit makes k0 recent again; the next store trims k1, k2 and k3.
	if _, ok := c.loadRender("k0"); !ok {
		t.Fatal("k0 is gone before the trim")
	}

	if err := c.storeRender("k5", &Manifest{Release: "k5"}); err != nil {
		t.Fatal(err)
	}

	var kept []string

	for i := range 6 {
		if _, err := os.Stat(filepath.Join(c.Dir, "renders", fmt.Sprintf("k%d", i))); err == nil {
			kept = append(kept, fmt.Sprintf("k%d", i))
		}
	}

	if fmt.Sprint(kept) != "[k0 k4 k5]" {
		t.Errorf("kept %v, want [k0 k4 k5]", kept)
	}
}
