package provider

import (
	"encoding/json"
	"fmt"
	"testing"
)

// clusterJSON is a cluster of n nodes (three control planes, the rest workers) over three hosts.
func clusterJSON(n int) string {
	nodes := map[string]any{}
	for i := range n {
		role, name := "worker", fmt.Sprintf("worker-%03d", i)
		if i < 3 {
			role, name = "controlplane", fmt.Sprintf("cp-%d", i+1)
		}

		nodes[name] = map[string]any{
			"hostNode": fmt.Sprintf("pve%d", i%3+1),
			"role":     role,
			"ip":       fmt.Sprintf("10.0.%d.%d", 1+i/200, 10+i%200),
			"vmId":     1000 + i,
		}
	}

	b, _ := json.Marshal(map[string]any{
		"clusterName":  "bench",
		"talosVersion": "v1.11.5",
		"vip":          "10.0.0.10",
		"network":      map[string]any{"gateway": "10.0.0.1", "prefixLength": 16},
		"nodes":        nodes,
	})

	return string(b)
}

// BenchmarkConstruct measures Construct of a whole cluster through pulumi-go-provider's
// in-memory engine (gRPC resource monitor, mocked children). Goal: 50 nodes ≤ 0.5 s, and
// 100 nodes ≤ 2.2 × 50 nodes.
func BenchmarkConstruct(b *testing.B) {
	for _, n := range []int{3, 50, 100} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			inputs := inputsFromJSON(b, clusterJSON(n))

			b.ReportAllocs()
			b.ResetTimer()

			for b.Loop() {
				r := &recorder{}
				if _, err := constructB(b, r, inputs); err != nil {
					b.Fatal(err)
				}

				if got := len(r.ofType("talos:machine/configurationApply:ConfigurationApply")); got != n {
					b.Fatalf("%d applies, want %d", got, n)
				}
			}
		})
	}
}
