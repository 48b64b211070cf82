package spec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/compatibility"
	"github.com/siderolabs/talos/pkg/machinery/constants"
)

// TestSupportedTalosMatchesMachinery checks the table against Talos' own compatibility rules
// (machinery pinned in go.mod): every Kubernetes minor the table allows runs on that Talos minor,
// the ones just outside do not, and the newest minor's default is machinery's default.
func TestSupportedTalosMatchesMachinery(t *testing.T) {
	t.Parallel()

	newest := ""

	for minor, tm := range SupportedTalos {
		talos, err := compatibility.ParseTalosVersion(&machine.VersionInfo{Tag: minor + ".0"})
		if err != nil {
			t.Fatal(err)
		}

		for k := tm.OldestKubernetesMinor - 1; k <= tm.NewestKubernetesMinor+1; k++ {
			kv, err := compatibility.ParseKubernetesVersion(fmt.Sprintf("1.%d.0", k))
			if err != nil {
				t.Fatal(err)
			}

			inRange := k >= tm.OldestKubernetesMinor && k <= tm.NewestKubernetesMinor
			if err := kv.SupportedWith(talos); (err == nil) != inRange {
				t.Errorf("Talos %s with Kubernetes 1.%d: table says %v, machinery says %v", minor, k, inRange, err)
			}
		}

		if MinorNumber(minor) > MinorNumber(newest) {
			newest = minor
		}
	}

	if got, want := SupportedTalos[newest].DefaultKubernetes, "v"+constants.DefaultKubernetesVersion; got != want {
		t.Errorf("Talos %s default Kubernetes %s, machinery says %s", newest, got, want)
	}
}

func TestContracts(t *testing.T) {
	t.Parallel()

	for talos, want := range map[string]string{
		"v1.10.6": "v1.10", "v1.11.5": "v1.11", "v1.12.4": "v1.12", "v1.13.9": "v1.13", "v1.14.1": "v1.14",
	} {
		in := base()
		in.TalosVersion = talos
		in.KubernetesVersion = ""

		c, err := Build(in)
		if err != nil {
			t.Fatalf("talosVersion %s: %v", talos, err)
		}

		if c.ConfigContract != want || !strings.HasPrefix(talos, c.TalosContract) {
			t.Errorf("talosVersion %s: contract %s (Talos minor %s), want %s", talos, c.ConfigContract, c.TalosContract, want)
		}

		if c.KubernetesVersion != SupportedTalos[c.TalosContract].DefaultKubernetes {
			t.Errorf("talosVersion %s: default Kubernetes %s", talos, c.KubernetesVersion)
		}
	}
}
