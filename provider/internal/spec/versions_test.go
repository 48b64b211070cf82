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

// TestRunningKubernetes: with kubernetesVersion unset a cluster runs the version its record holds
// (any the Talos minor runs), a declared version wins over the record, and a recorded version the
// Talos minor does not run is refused at talosVersion with the ways out. Build's cluster is left
// as it was.
func TestRunningKubernetes(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		talos, declared, recorded, want string
		errs                            []string
	}{
		{"v1.12.4", "", "v1.34.1", "v1.34.1", nil},
		{"v1.14.1", "", "v1.32.0", "v1.32.0", nil},
		{"v1.12.4", "", "", "v1.35.0", nil},
		{"v1.12.4", "", "v1.35.0", "v1.35.0", nil},
		{"v1.12.4", "v1.35.0", "v1.34.1", "v1.35.0", nil},
		{"v1.14.1", "", "v1.31.4", "v1.31.4", []string{
			"talosVersion: Talos v1.14 does not support Kubernetes v1.31.4, which this cluster runs (Talos v1.14 runs v1.32 to v1.37); " +
				"set kubernetesVersion to v1.32.x or newer first and run `pulumi up` on the Talos version the nodes run now " +
				"(Kubernetes moves one minor per up), then change talosVersion; or keep talosVersion on a Talos minor that runs v1.31 " +
				"(v1.10 to v1.13)",
		}},
		{"v1.10.8", "", "v1.34.1", "v1.34.1", []string{
			"talosVersion: Talos v1.10 does not support Kubernetes v1.34.1, which this cluster runs (Talos v1.10 runs v1.28 to v1.33), " +
				"and Kubernetes is never downgraded; keep talosVersion on a Talos minor that runs v1.34 (v1.11 to v1.14)",
		}},
		{"v1.14.1", "", "v1.27.0", "v1.27.0", []string{"set kubernetesVersion to v1.32.x or newer first", "then change talosVersion\n"}},
		{"v1.11.5", "", "latest", "latest", []string{"kubernetesVersion: the cluster's record holds \"latest\""}},
	} {
		in := base()
		in.TalosVersion, in.KubernetesVersion = tc.talos, tc.declared

		c, err := Build(in)
		if err != nil {
			t.Fatal(err)
		}

		before := c.KubernetesVersion

		got, err := c.RunningKubernetes(tc.recorded)
		if got.KubernetesVersion != tc.want {
			t.Errorf("Talos %s, declared %q, recorded %q: runs %s, want %s", tc.talos, tc.declared, tc.recorded, got.KubernetesVersion, tc.want)
		}

		if c.KubernetesVersion != before {
			t.Errorf("Talos %s, recorded %q: Build's cluster changed to %s", tc.talos, tc.recorded, c.KubernetesVersion)
		}

		if (err != nil) != (len(tc.errs) > 0) {
			t.Errorf("Talos %s, recorded %q: error %v, want %v", tc.talos, tc.recorded, err, tc.errs)
			continue
		}

		for _, want := range tc.errs {
			if !strings.Contains(err.Error()+"\n", want) {
				t.Errorf("Talos %s, recorded %q: the error does not say %q:\n%v", tc.talos, tc.recorded, want, err)
			}
		}
	}
}
