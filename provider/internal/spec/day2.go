package spec

import (
	"regexp"
	"time"
)

// HealthInput configures the health gate.
type HealthInput struct {
	Timeout           string
	RequireNodesReady *bool
}

// CredentialsInput configures the client credentials' lifetime.
type CredentialsInput struct {
	Validity    string
	RenewBefore string
}

// Credentials is the validated lifetime of the talosconfig's and kubeconfig's certificates.
type Credentials struct {
	Validity    time.Duration
	RenewBefore time.Duration
}

// Credential defaults: a year, as Talos issues them, renewed in the last 30 days.
const (
	DefaultCredentialsValidity    = 365 * 24 * time.Hour
	DefaultCredentialsRenewBefore = 30 * 24 * time.Hour
	minCredentialsValidity        = time.Minute
)

func buildCredentials(p *problems, in CredentialsInput) Credentials {
	c := Credentials{
		Validity:    duration(p, "credentials.validity", in.Validity, DefaultCredentialsValidity),
		RenewBefore: duration(p, "credentials.renewBefore", in.RenewBefore, DefaultCredentialsRenewBefore),
	}

	switch {
	case c.Validity < minCredentialsValidity:
		p.errorf("credentials.validity", "%s is shorter than a minute; use e.g. \"8760h\" (a year)", c.Validity)
	case c.RenewBefore >= c.Validity:
		p.errorf("credentials.renewBefore", "%s is not shorter than credentials.validity (%s): every up would renew; use e.g. \"720h\"", c.RenewBefore, c.Validity)
	}

	return c
}

// UpgradeInput configures rolling Talos OS upgrades.
type UpgradeInput struct {
	Drain          *bool
	DrainTimeout   string
	Timeout        string
	MaxParallel    *int
	AllowDowngrade *bool
}

// ManifestSyncInput configures the sync of the cluster's manifests after bootstrap.
type ManifestSyncInput struct {
	Enabled                *bool
	PruneCrdsAndNamespaces *bool
	Force                  *bool
	Timeout                string
}

// ManifestSync is the validated manifest sync policy.
type ManifestSync struct {
	Enabled                bool
	PruneCrdsAndNamespaces bool
	Force                  bool
	Timeout                time.Duration
}

// Health is the validated health gate.
type Health struct {
	Timeout time.Duration
	// RequireNodesReady adds the all-nodes-Ready check: a CNI runs (Talos' default flannel, or
	// Cilium from the `cilium` input), or the user asked for it.
	RequireNodesReady bool
}

// Upgrade is the validated upgrade policy.
type Upgrade struct {
	Drain          bool
	DrainTimeout   time.Duration
	Timeout        time.Duration
	MaxParallel    int
	AllowDowngrade bool
}

// Day-2 defaults.
const (
	DefaultHealthTimeout       = 10 * time.Minute
	DefaultUpgradeTimeout      = 10 * time.Minute
	DefaultUpgradeDrainTimeout = 5 * time.Minute
	DefaultManifestSyncTimeout = 5 * time.Minute
)

// cniNone finds `cni: {name: none}` in a patch (YAML or JSON).
var cniNone = regexp.MustCompile(`(?s)"?cni"?\s*:\s*\{?\s*"?name"?\s*:\s*"?none"?`)

func buildDay2(p *problems, in Input, c *Cluster) {
	c.Health = Health{Timeout: DefaultHealthTimeout, RequireNodesReady: true}
	c.Health.Timeout = duration(p, "health.timeout", in.Health.Timeout, DefaultHealthTimeout)
	c.Credentials = buildCredentials(p, in.Credentials)

	if !c.Cilium && patchesSetCNINone(in) {
		c.Health.RequireNodesReady = false
	}

	if in.Health.RequireNodesReady != nil {
		c.Health.RequireNodesReady = *in.Health.RequireNodesReady
	}

	m := in.ManifestSync
	c.ManifestSync = ManifestSync{
		Enabled:                m.Enabled == nil || *m.Enabled,
		PruneCrdsAndNamespaces: m.PruneCrdsAndNamespaces != nil && *m.PruneCrdsAndNamespaces,
		Force:                  m.Force != nil && *m.Force,
		Timeout:                duration(p, "manifestSync.timeout", m.Timeout, DefaultManifestSyncTimeout),
	}

	u := in.Upgrade
	c.Upgrade = Upgrade{
		Drain:          u.Drain == nil || *u.Drain,
		DrainTimeout:   duration(p, "upgrade.drainTimeout", u.DrainTimeout, DefaultUpgradeDrainTimeout),
		Timeout:        duration(p, "upgrade.timeout", u.Timeout, DefaultUpgradeTimeout),
		MaxParallel:    1,
		AllowDowngrade: u.AllowDowngrade != nil && *u.AllowDowngrade,
	}

	if u.MaxParallel != nil {
		if *u.MaxParallel < 1 {
			p.errorf("upgrade.maxParallel", "is %d; give how many workers may reboot at once, at least 1 (default 1)", *u.MaxParallel)
		} else {
			c.Upgrade.MaxParallel = *u.MaxParallel
		}
	}
}

func patchesSetCNINone(in Input) bool {
	lists := [][]Patch{in.ConfigPatches, in.ControlPlaneConfigPatches, in.WorkerConfigPatches}
	for _, n := range in.Nodes {
		lists = append(lists, n.ConfigPatches)
	}

	for _, l := range lists {
		for _, pt := range l {
			if pt.Known && cniNone.MatchString(pt.Text) {
				return true
			}
		}
	}

	return false
}

// duration parses a Go duration such as "10m" or "90s"; empty means def.
func duration(p *problems, path, v string, def time.Duration) time.Duration {
	if v == "" {
		return def
	}

	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		p.errorf(path, "%q is not a positive duration; use a form such as \"10m\" or \"90s\" (default %s)", v, def)

		return def
	}

	return d
}
