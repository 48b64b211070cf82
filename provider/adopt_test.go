package provider

import "testing"

func TestContractOf(t *testing.T) {
	t.Parallel()

	for in, want := range map[string]string{"v1.11.5": "v1.11", "v1.14.0-beta.1": "v1.14", "1.10.3": "v1.10", "": ""} {
		if got := contractOf(in); got != want {
			t.Errorf("contractOf(%q) = %q, want %q", in, got, want)
		}
	}
}
