package wire

import "testing"

func TestAgentAddress(t *testing.T) {
	t.Parallel()

	cases := []struct {
		names []string
		addrs [][]string
		want  string
	}{
		{[]string{"lo", "eth0"}, [][]string{{"127.0.0.1"}, {"10.0.0.5"}}, "10.0.0.5"},
		{[]string{"lo", "ens18"}, [][]string{{"127.0.0.1"}, {"169.254.1.1", "10.0.0.6"}}, "10.0.0.6"},
		{[]string{"lo", "eth0"}, [][]string{{"127.0.0.1"}, {"127.0.0.5"}}, "127.0.0.5"}, // the lab's loopback nodes
		{[]string{"lo"}, [][]string{{"127.0.0.1"}}, ""},
		{nil, [][]string{{"127.0.0.1", "10.1.1.1"}}, "10.1.1.1"},
		{[]string{"eth0"}, [][]string{{"fe80::1", "not-an-ip"}}, ""},
	}

	for _, tc := range cases {
		if got := agentAddress(tc.names, tc.addrs); got != tc.want {
			t.Errorf("agentAddress(%v, %v) = %q, want %q", tc.names, tc.addrs, got, tc.want)
		}
	}
}
