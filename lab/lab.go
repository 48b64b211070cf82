// Package lab runs the local lab on loopback: a Proxmox VE API fake with its hosts and
// storages, an Image Factory fake, and a host emulator (hostemu) that boots an emulated Talos node
// whenever a VM starts; each cluster's control planes run real etcd members, and once it is
// bootstrapped a real Kubernetes control plane with an emulated kubelet per node (whose Proxmox
// cloud controller manager pods do the CCM's work, lab/ccmemu). With the lab's talos stand-in plugin and the bridged bpg proxmoxve
// plugin, `pulumi up` of the example cluster runs on this machine. See docs/lab.md.
package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/ccmemu"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/chartrepo"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/factoryfake"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/hostemu"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/kubecp"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/kubeletemu"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pvefake"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pveschema"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// Options configure a lab.
type Options struct {
	// Hosts are the Proxmox host names (default pve1, pve2, pve3).
	Hosts []string
	// Subnet is the third octet of the 127.0.<Subnet>.0/24 network the cluster's nodes use
	// (default 2), so labs of parallel tests do not collide.
	Subnet int
	// PVE adjusts the Proxmox fake's options (latency, failures, …) before it starts.
	PVE func(*pvefake.Options)
	// Node adjusts every emulated Talos node's options before it starts.
	Node func(vmid int, opts *talosemu.Options)
	// KubeBin is the Kubernetes control-plane binary (default kubecp.Binary(): $TALOS_KUBE_BIN,
	// which the Makefile sets, or tools/kube/build.sh's cache).
	KubeBin string
	// Kube adjusts each cluster's Kubernetes options (grace periods, faults) before it starts.
	Kube func(*talosemu.KubeOptions)
	// Logf receives the lab's log lines.
	Logf func(format string, args ...any)
	// PVEVersion is the Proxmox VE release whose official API schema (lab/pveschema) every
	// request to the fake and every answer it gives is checked against: "9" (the default) or
	// "8.4". Violations are collected (SchemaViolations), never answered differently.
	PVEVersion string
}

// DefaultPVEVersion is the Proxmox VE release a lab checks its API traffic against by default.
const DefaultPVEVersion = "9"

// pveReleases is the release GET /version reports per PVEVersion: those of the vendored schemas.
var pveReleases = map[string]string{"9": "9.1.3", "8.4": "8.4.1"}

// Lab is a running lab.
type Lab struct {
	// Charts is a Helm chart repository serving the Cilium and NVIDIA device plugin charts (from
	// their Go modules), the Proxmox CSI plugin and cloud controller manager charts
	// (chartrepo.ProxmoxArchives) and the small test chart "hello" in two versions
	// (chartrepo.HelloArchives).
	Charts     *chartrepo.Server
	Factory    *factoryfake.Server
	PVE        *pvefake.Server
	Controller *hostemu.Controller
	opts       Options
	closeOnce  sync.Once
}

// The API token the lab's Proxmox accepts (a test credential, not a secret).
const (
	tokenID     = "root@pam!lab"
	tokenSecret = "00000000-0000-4000-8000-000000000000"
)

// Start starts the lab; it stops when ctx ends or on Close.
func Start(ctx context.Context, opts Options) (*Lab, error) {
	if len(opts.Hosts) == 0 {
		opts.Hosts = []string{"pve1", "pve2", "pve3"}
	}

	if opts.Subnet == 0 {
		opts.Subnet = 2
	}

	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}

	if opts.KubeBin == "" {
		bin, err := kubecp.Binary()
		if err != nil {
			return nil, fmt.Errorf("the lab's Kubernetes: %w", err)
		}

		opts.KubeBin = bin
	}

	crds, err := chartrepo.CiliumCRDDir()
	if err != nil {
		return nil, fmt.Errorf("the Cilium operator's CRDs: %w", err)
	}

	// Cilium's operator registers the cilium.io CRDs when it starts: the lab does too, so custom
	// resources in inline manifests (CiliumLoadBalancerIPPool) behave as on a real cluster.
	kube := &talosemu.KubeOptions{Bin: opts.KubeBin, OperatorCRDs: map[string]string{"io.cilium/app=operator": crds}}
	// The Proxmox CCM's pods do what its container does (lab/ccmemu): they initialize the Nodes
	// the kubelets register with the uninitialized taint, through the Proxmox API token of their
	// cloud config.
	kube.Containers = map[string]kubeletemu.ContainerFunc{
		ccmemu.Image: func(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, c corev1.Container) {
			ccmemu.Run(ctx, client, pod, c, opts.Logf)
		},
	}
	if opts.Kube != nil {
		opts.Kube(kube)
	}

	chartRepo, err := ciliumRepository(ctx)
	if err != nil {
		return nil, fmt.Errorf("starting the chart repository: %w", err)
	}

	factory, err := factoryfake.Start(ctx, "127.0.0.1:0")
	if err != nil {
		_ = chartRepo.Close()
		return nil, fmt.Errorf("starting the Image Factory stand-in: %w", err)
	}

	ctrl := hostemu.New(ctx, hostemu.Options{Node: opts.Node, Logf: opts.Logf, Kube: kube,
		DHCPPool: dhcpPool(opts.Subnet), Extensions: factory.Extensions})

	pveOpts := pvefake.Options{
		Addr:  "127.0.0.1:0",
		Nodes: opts.Hosts,
		// The examples pass their GPU through the mapping "gpu".
		PCIMappings: []string{"gpu"},
		Tokens:      map[string]string{tokenID: tokenSecret},
		OnEvent:     ctrl.Handle,
	}
	if opts.PVEVersion == "" {
		opts.PVEVersion = DefaultPVEVersion
	}

	schema, err := pveschema.Load(opts.PVEVersion)
	if err != nil {
		_ = factory.Close()
		_ = chartRepo.Close()

		return nil, fmt.Errorf("PVEVersion: %w", err)
	}

	pveOpts.Schema = schema
	// GET /version and the privilege names (VM.Monitor before 9, VM.GuestAgent.* from 9) follow
	// the schema's release: PVE 9's schema checks PVE 9's privileges.
	pveOpts.Version = pveReleases[opts.PVEVersion]

	if opts.PVE != nil {
		opts.PVE(&pveOpts)
	}

	pve, err := pvefake.Start(ctx, pveOpts)
	if err != nil {
		_ = factory.Close()
		_ = chartRepo.Close()
		return nil, fmt.Errorf("starting the Proxmox VE fake: %w", err)
	}

	ctrl.Attach(pve)

	return &Lab{Charts: chartRepo, Factory: factory, PVE: pve, Controller: ctrl, opts: opts}, nil
}

// ciliumRepository serves the Cilium and NVIDIA charts, packaged from their Go modules, the two
// Proxmox charts and the hello chart as a classic Helm repository: the lab's stand-in for
// https://helm.cilium.io and the charts' other homes.
func ciliumRepository(ctx context.Context) (*chartrepo.Server, error) {
	dir, err := os.MkdirTemp("", "lab-charts-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()

	archive, err := chartrepo.CiliumArchive(dir)
	if err != nil {
		return nil, err
	}

	hello, err := chartrepo.HelloArchives(dir)
	if err != nil {
		return nil, err
	}

	nvidia, err := chartrepo.NvidiaDevicePluginArchive(dir)
	if err != nil {
		return nil, err
	}

	proxmox, err := chartrepo.ProxmoxArchives(dir)
	if err != nil {
		return nil, err
	}

	return chartrepo.Repository(ctx, append(append(hello, archive, nvidia), proxmox...)...)
}

// Close stops the nodes, the fake, the factory and the chart repository. Later calls do nothing.
func (l *Lab) Close() {
	l.closeOnce.Do(func() {
		l.Controller.Close()
		_ = l.PVE.Close()
		_ = l.Factory.Close()
		_ = l.Charts.Close()
	})
}

// Hosts are the Proxmox host names the fake serves.
func (l *Lab) Hosts() []string { return slices.Clone(l.opts.Hosts) }

// APIToken is the Proxmox API token the lab's fake accepts (a test credential), as the
// Authorization header value after "PVEAPIToken=".
func (l *Lab) APIToken() string { return tokenID + "=" + tokenSecret }

// Address is the address of the i-th cluster address (10 = VIP, 11… nodes).
func (l *Lab) Address(i int) string { return fmt.Sprintf("127.0.%d.%d", l.opts.Subnet, i) }

// ConfigValue is one stack configuration value.
type ConfigValue struct {
	Value  string
	Secret bool
}

// StackConfig is the configuration that points the examples at the lab: the Proxmox endpoint
// and API token (the proxmoxve provider's own config keys), the factory, the hosts and the
// loopback addresses of the VIP and the five nodes. Only these values differ from a real site.
func (l *Lab) StackConfig() map[string]ConfigValue {
	addrs := []string{l.Address(11), l.Address(12), l.Address(13), l.Address(21), l.Address(22)}

	return map[string]ConfigValue{
		"proxmoxve:endpoint": {Value: l.PVE.URL()},
		"proxmoxve:apiToken": {Value: tokenID + "=" + tokenSecret, Secret: true},
		"proxmoxve:insecure": {Value: "true"},
		"factoryUrl":         {Value: l.Factory.URL()},
		"hosts":              {Value: jsonList(l.opts.Hosts)},
		"gateway":            {Value: l.Address(1)},
		"prefixLength":       {Value: "24"},
		"vip":                {Value: l.Address(10)},
		"addresses":          {Value: jsonList(addrs)},
		"loadBalancerPool":   {Value: fmt.Sprintf("127.0.%d.240/28", l.opts.Subnet)},
		"ciliumRepository":   {Value: l.Charts.URL},
	}
}

func jsonList(v []string) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// dhcpPool is the upper half of the lab subnet, where DHCP leases come from.
func dhcpPool(subnet int) netip.Prefix {
	return netip.MustParsePrefix(fmt.Sprintf("127.0.%d.128/25", subnet))
}

// knownSchemaDeviations are the places where Proxmox VE answers otherwise than its published
// schema says, so the fake, which answers as Proxmox does, breaks the schema there on purpose:
// each entry is a substring of the violation and the evidence.
var knownSchemaDeviations = []struct{ violation, evidence string }{
	{
		"GET /cluster/nextid", "the schema returns an integer; pve-manager's PVE/API2/Cluster.pm nextid " +
			"uses the id as a hash key and answers it as a JSON string (\"100\"), which bpg's client reads",
	},
}

// SchemaViolations are the requests to the lab's Proxmox and its answers that break the official
// API schema of Options.PVEVersion, less the known deviations of Proxmox from its own schema.
func (l *Lab) SchemaViolations() []string {
	var out []string

	for _, v := range l.PVE.SchemaViolations() {
		if !slices.ContainsFunc(knownSchemaDeviations, func(d struct{ violation, evidence string }) bool {
			return strings.Contains(v, d.violation)
		}) {
			out = append(out, v)
		}
	}

	return out
}

// PVEVersion is the Proxmox VE release the lab's API traffic is checked against.
func (l *Lab) PVEVersion() string { return l.opts.PVEVersion }
