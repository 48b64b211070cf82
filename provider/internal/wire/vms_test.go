package wire

import (
	"net/netip"
	"testing"
)

func TestAgentAddress(t *testing.T) {
	t.Parallel()

	cases := []struct {
		names  []string
		addrs  [][]string
		subnet string
		want   string
	}{
		{[]string{"lo", "eth0"}, [][]string{{"127.0.0.1"}, {"10.0.0.5"}}, "10.0.0.0/24", "10.0.0.5"},
		{[]string{"lo", "ens18"}, [][]string{{"127.0.0.1"}, {"169.254.1.1", "10.0.0.6"}}, "10.0.0.0/24", "10.0.0.6"},
		{[]string{"lo", "eth0"}, [][]string{{"127.0.0.1"}, {"127.0.0.5"}}, "127.0.0.0/24", "127.0.0.5"}, // the lab's loopback nodes
		{[]string{"lo"}, [][]string{{"127.0.0.1"}}, "127.0.0.0/8", ""},
		{nil, [][]string{{"127.0.0.1", "10.1.1.1"}}, "10.1.1.0/24", "10.1.1.1"},
		{[]string{"eth0"}, [][]string{{"fe80::1", "not-an-ip"}}, "10.0.0.0/24", ""},
		// A storage network reported first: its address is not in the node subnet.
		{[]string{"lo", "bond0", "eth0"}, [][]string{{"127.0.0.1"}, {"10.50.0.7"}, {"10.0.0.7"}}, "10.0.0.0/24", "10.0.0.7"},
	}

	for _, tc := range cases {
		if got := agentAddress(tc.names, tc.addrs, netip.MustParsePrefix(tc.subnet)); got != tc.want {
			t.Errorf("agentAddress(%v, %v, %s) = %q, want %q", tc.names, tc.addrs, tc.subnet, got, tc.want)
		}
	}
}
