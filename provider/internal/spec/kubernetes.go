package spec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// buildKubernetesVersion checks kubernetesVersion: its form always, its range when the Talos
// minor is known. Unset, the cluster gets the default of its Talos minor, which is what a new
// cluster records; a running cluster keeps the version it recorded (Cluster.RunningKubernetes).
func buildKubernetesVersion(p *problems, v, talosMinor string, talosKnown bool, c *Cluster) {
	t := SupportedTalos[talosMinor]
	if v == "" {
		c.KubernetesVersion = t.DefaultKubernetes
		return
	}

	c.KubernetesVersion = v
	c.KubernetesDeclared = true

	unset := "leave it unset to keep the version the cluster runs (a new cluster gets the default of its Talos minor)"
	if talosKnown {
		unset = fmt.Sprintf("leave it unset to keep the version the cluster runs (a new cluster gets %s, the default of Talos %s)",
			t.DefaultKubernetes, talosMinor)
	}

	m := kubeVersionRe.FindStringSubmatch(v)
	if m == nil {
		p.errorf("kubernetesVersion", "%q is not a Kubernetes version; use the form v1.34.1, or %s", v, unset)
		return
	}

	if !talosKnown {
		return
	}

	minor, _ := strconv.Atoi(m[1])
	if minor < t.OldestKubernetesMinor || minor > t.NewestKubernetesMinor {
		p.errorf("kubernetesVersion", "%s is outside what Talos %s runs (v1.%d to v1.%d); pick a version in that range, or %s",
			v, talosMinor, t.OldestKubernetesMinor, t.NewestKubernetesMinor, unset)
		return
	}

	c.KubernetesVersion = "v" + strings.TrimPrefix(v, "v")
}

// RunningKubernetes is the cluster as it runs the Kubernetes version its record holds (recorded):
// with kubernetesVersion unset a cluster keeps the version it was created with — the default of
// its Talos minor then — or was last given, whatever talosVersion says now, so a Talos upgrade
// never upgrades Kubernetes. With kubernetesVersion set, or a record that holds the version Build
// chose (a new cluster's), it is c itself.
//
// A recorded version the Talos minor does not run is a problem of talosVersion, reported with
// the ways out: upgrade Kubernetes first, or stay on a Talos minor that runs it.
func (c *Cluster) RunningKubernetes(recorded string) (*Cluster, error) {
	if c.KubernetesDeclared || recorded == "" || recorded == c.KubernetesVersion {
		return c, nil
	}

	var p problems

	out := *c
	out.KubernetesVersion = recorded

	m := kubeVersionRe.FindStringSubmatch(recorded)
	if m == nil || !strings.HasPrefix(recorded, "v") {
		p.errorf("kubernetesVersion", "the cluster's record holds %q, which is not a Kubernetes version; set kubernetesVersion "+
			"to the version the cluster runs", recorded)

		return &out, p.err()
	}

	t, ok := SupportedTalos[c.TalosContract]
	if !ok {
		return &out, nil // talosVersion is invalid, which Build reported
	}

	minor, _ := strconv.Atoi(m[1])
	runs := fmt.Sprintf("Talos %s does not support Kubernetes %s, which this cluster runs (Talos %s runs v1.%d to v1.%d)",
		c.TalosContract, recorded, c.TalosContract, t.OldestKubernetesMinor, t.NewestKubernetesMinor)
	// The way out that keeps the version: a Talos minor that runs it (one that ran it recorded it,
	// but a later release may no longer support that minor).
	stay := ""

	if minors := talosMinorsRunning(minor); len(minors) > 0 {
		on := minors[0]
		if len(minors) > 1 {
			on += " to " + minors[len(minors)-1]
		}

		stay = fmt.Sprintf("keep talosVersion on a Talos minor that runs v1.%d (%s)", minor, on)
	}

	switch {
	case minor < t.OldestKubernetesMinor:
		first := fmt.Sprintf("set kubernetesVersion to v1.%d.x or newer first and run `pulumi up` on the Talos version the "+
			"nodes run now (Kubernetes moves one minor per up), then change talosVersion", t.OldestKubernetesMinor)
		if stay != "" {
			first += "; or " + stay
		}

		p.errorf("talosVersion", "%s; %s", runs, first)
	case minor > t.NewestKubernetesMinor:
		if stay == "" {
			stay = "set kubernetesVersion to the version the cluster runs and pick a Talos version that runs it"
		}

		p.errorf("talosVersion", "%s, and Kubernetes is never downgraded; %s", runs, stay)
	}

	return &out, p.err()
}

// talosMinorsRunning are the supported Talos minors that run Kubernetes minor 1.<minor>, oldest
// first.
func talosMinorsRunning(minor int) []string {
	var out []string

	for m, t := range SupportedTalos {
		if minor >= t.OldestKubernetesMinor && minor <= t.NewestKubernetesMinor {
			out = append(out, m)
		}
	}

	slices.SortFunc(out, func(a, b string) int { return MinorNumber(a) - MinorNumber(b) })

	return out
}
