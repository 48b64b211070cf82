package imagefactory

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
)

// Unpublished reads the factory's catalogue once per factory and version, through its client.
func TestUnpublishedAsksTheCatalogueOnce(t *testing.T) {
	t.Parallel()

	var calls atomic.Int32

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)

		if r.URL.Path != "/version/v1.11.5/extensions/official" {
			http.NotFound(w, r)
			return
		}

		_ = json.NewEncoder(w).Encode([]map[string]string{
			{"name": "siderolabs/qemu-guest-agent", "ref": "ghcr.io/siderolabs/qemu-guest-agent:9.2.0"},
			{"name": "siderolabs/iscsi-tools", "ref": "ghcr.io/siderolabs/iscsi-tools:v0.2.0"},
		})
	}))
	defer srv.Close()

	for range 2 {
		got, err := Unpublished(t.Context(), srv.URL, "v1.11.5", []string{"siderolabs/iscsi-tools", "siderolabs/zfs", "siderolabs/zfs"})
		if err != nil || !slices.Equal(got, []string{"siderolabs/zfs"}) {
			t.Fatalf("Unpublished = %v, %v", got, err)
		}
	}

	if n := calls.Load(); n != 1 {
		t.Errorf("%d requests to the factory, want 1", n)
	}

	if _, err := Unpublished(t.Context(), srv.URL, "v1.99.0", []string{"siderolabs/zfs"}); err == nil {
		t.Error("a factory that does not know the version: no error")
	}
}
