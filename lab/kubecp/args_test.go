package kubecp

import (
	"net"
	"slices"
	"testing"
)

// The flags of an IPv6 and of a dual-stack control plane: the IPv6 endpoint bracketed in URLs and
// bare in addresses, the service networks in order, the advertised address's own family, the
// per-family node CIDR sizes only for the pod networks' families (as Talos passes them).
func TestArgsIPv6AndDualStack(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name string
		o    Options
		want []string
		not  []string
	}{
		{
			name: "IPv6 only",
			o: Options{
				Endpoint: "[fd1a:b:0:67::10]:6443", ServiceCIDR: "fd00:10:96::/112", PodCIDR: "fd00:10:244::/56",
				NodeCIDRMaskSizeIPv4: 24, NodeCIDRMaskSizeIPv6: 64,
			},
			want: []string{
				"--bind-address=fd1a:b:0:67::10", "--secure-port=6443", "--advertise-address=fd1a:b:0:67::10",
				"--service-account-issuer=https://[fd1a:b:0:67::10]:6443", "--service-cluster-ip-range=fd00:10:96::/112",
				"--cluster-cidr=fd00:10:244::/56", "--node-cidr-mask-size-ipv6=64",
			},
			not: []string{"--node-cidr-mask-size-ipv4=24", "--endpoint-reconciler-type=none"},
		},
		{
			name: "dual stack, IPv4 first",
			o: Options{
				Endpoint: "127.0.67.10:6443", ServiceCIDR: "10.96.0.0/12,fd00:10:96::/112", PodCIDR: "10.244.0.0/16,fd00:10:244::/56",
				NodeCIDRMaskSizeIPv4: 24, NodeCIDRMaskSizeIPv6: 64,
			},
			want: []string{
				"--bind-address=127.0.67.10", "--advertise-address=127.0.67.10", "--endpoint-reconciler-type=none",
				"--service-cluster-ip-range=10.96.0.0/12,fd00:10:96::/112", "--cluster-cidr=10.244.0.0/16,fd00:10:244::/56",
				"--node-cidr-mask-size-ipv4=24", "--node-cidr-mask-size-ipv6=64",
			},
		},
		{
			name: "IPv4 only",
			o:    Options{Endpoint: "127.0.67.10:6443", PodCIDR: "10.244.0.0/16", NodeCIDRMaskSizeIPv4: 24, NodeCIDRMaskSizeIPv6: 64},
			want: []string{"--node-cidr-mask-size-ipv4=24"},
			not:  []string{"--node-cidr-mask-size-ipv6=64"},
		},
	} {
		o := tc.o
		o.Dir = t.TempDir()

		host, _, err := net.SplitHostPort(o.Endpoint)
		if err != nil {
			t.Fatal(err)
		}

		o.AdvertiseIP = net.ParseIP(host) // setDefaults' default

		cp := &ControlPlane{opts: o, endpoint: o.Endpoint}

		args := slices.Concat(cp.apiserverArgs(), cp.controllerManagerArgs())
		for _, w := range tc.want {
			if !slices.Contains(args, w) {
				t.Errorf("%s: no %s in %q", tc.name, w, args)
			}
		}

		for _, n := range tc.not {
			if slices.Contains(args, n) {
				t.Errorf("%s: %s in %q", tc.name, n, args)
			}
		}
	}
}
