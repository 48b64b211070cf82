package spec

import (
	"strconv"
	"strings"
)

// Build validates in, applies every default and returns the cluster. The error, if any, is a
// *ValidationError listing every problem with its property path; the cluster is returned with
// it, defaults applied, so checks that need more than the input (rendering Helm charts) can still
// run on its valid parts and add their problems to the same report. An invalid cluster must
// never be deployed.
func Build(in Input) (*Cluster, error) {
	var p problems

	c := &Cluster{}
	buildCluster(&p, in, c)
	buildNetwork(&p, in, c)
	buildImage(&p, in.Image, c)
	buildNodes(&p, in, c)
	buildAddresses(&p, in, c)
	checkVMIDRoom(&p, c)
	buildManifests(&p, in, c)
	buildHelm(&p, in, c)
	buildDay2(&p, in, c)
	buildFlux(&p, in, c)

	for _, t := range c.ProxmoxTokens {
		requireManifestSync(&p, c, t.Input, "a new or rotated token reaches the running cluster only through the manifest sync")
	}
	buildBackup(&p, in, c)
	buildSecrets(&p, in, c)
	checkPatches(&p, "configPatches", in.ConfigPatches)
	checkPatches(&p, "controlPlaneConfigPatches", in.ControlPlaneConfigPatches)
	checkPatches(&p, "workerConfigPatches", in.WorkerConfigPatches)

	c.Warnings = p.warnings

	return c, p.err()
}

func buildCluster(p *problems, in Input, c *Cluster) {
	c.Name = in.ClusterName
	switch {
	case in.ClusterName == "":
		p.errorf("clusterName", "is required; use a DNS label such as \"homelab\"")
	case !isDNSLabel(in.ClusterName):
		p.errorf("clusterName", "%q is not a DNS label; use at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit", in.ClusterName)
	}

	minor, ok := talosMinorOf(p, in.TalosVersion)
	if ok {
		c.TalosVersion = "v" + strings.TrimPrefix(in.TalosVersion, "v")
		c.TalosContract = minor
	}

	c.ConfigContract = buildContract(p, in.ConfigContract, minor)
	c.ContractDeclared = in.ConfigContract != ""

	// The Kubernetes version's form is checked whatever the Talos version; its range only
	// when the Talos minor is known.
	buildKubernetesVersion(p, in.KubernetesVersion, minor, ok, c)

	c.ProxmoxClusterName = in.ProxmoxClusterName
	if c.ProxmoxClusterName == "" {
		c.ProxmoxClusterName = in.ClusterName
	} else if why := checkLabel("x", c.ProxmoxClusterName); why != "" {
		p.errorf("proxmoxClusterName", "%q becomes the topology.kubernetes.io/region label and must be a valid label value (at most 63 alphanumerics, '-', '_' or '.')", c.ProxmoxClusterName)
	}

	c.VMIDs = buildVMIDRange(p, in.VMIDStart, in.VMIDEnd)

	if in.Endpoint != "" && !isHost(in.Endpoint) {
		p.errorf("endpoint", "%q is not a host name or IP address; give the host only, e.g. \"10.0.0.10\" or \"k8s.example.com\" (the component adds https:// and :6443)", in.Endpoint)
	}
}

func talosMinorOf(p *problems, v string) (string, bool) {
	if v == "" {
		p.errorf("talosVersion", "is required; use a Talos release such as \"v1.11.5\" (supported: %s)", SupportedTalosRange)
		return "", false
	}

	m := talosVersionRe.FindStringSubmatch(v)
	if m == nil {
		p.errorf("talosVersion", "%q is not a Talos version; use the form v1.11.5 (supported: %s)", v, SupportedTalosRange)
		return "", false
	}

	minor := "v" + m[1] + "." + m[2]
	if _, ok := SupportedTalos[minor]; !ok {
		p.errorf("talosVersion", "%s is not supported; use %s (the Talos minors whose configuration the component generates and tests)", v, SupportedTalosRange)
		return "", false
	}

	return minor, true
}

// buildContract is the configuration contract a new cluster gets: the one asked for, if it is a
// contract the component writes and not newer than the Talos minor, else the default.
func buildContract(p *problems, asked, talosMinor string) string {
	if asked == "" {
		if talosMinor == "" {
			return ""
		}

		return ContractFor(talosMinor)
	}

	n := MinorNumber(asked)

	switch {
	case n == 0 || "v1."+strconv.Itoa(n) != asked:
		p.errorf("configContract", "%q is not a configuration contract; use a Talos minor such as \"v1.13\", or leave it unset for the minor of talosVersion", asked)
	case !supported(asked) || n > MinorNumber(NewestContract):
		p.errorf("configContract", "%s is not a contract the component writes; use v1.10 to %s", asked, NewestContract)
	case talosMinor != "" && n > MinorNumber(talosMinor):
		p.errorf("configContract", "%s is newer than Talos %s, which would not understand it; use at most %s", asked, talosMinor, talosMinor)
	}

	return asked
}

func supported(minor string) bool {
	_, ok := SupportedTalos[minor]

	return ok
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
