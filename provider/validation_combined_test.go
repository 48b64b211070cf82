package provider

import (
	"fmt"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// Validation must report every problem of an input at once: no check may stop at the first
// problem, and no check may run only when an unrelated earlier one passed. These tests combine
// independent faults of the bad-input table — every pair, then as many as fit in one input —
// and require every expected property path in the one error.

// readsOf lists the inputs a case's check depends on besides those its mutation changes (Go
// field paths of TalosProxmoxClusterArgs, `*` matching one map key). Two faults are independent
// when neither changes what the other changes or reads.
func readsOf(tc badInput) []string {
	var reads []string

	switch {
	case strings.HasPrefix(tc.path, "nodes.") && (strings.Contains(tc.path, ".ip:") || strings.Contains(tc.path, ".ip6:")),
		strings.HasPrefix(tc.path, "vip:"), strings.Contains(tc.path, "6:"):
		// Addresses are checked against the subnet, the gateway and each other; the nodes'
		// ip and ip6 decide the families.
		reads = append(reads, "Network", "Nodes.*.Ip", "Nodes.*.Ip6", "Vip", "Nodes.*.Networks")
	case strings.Contains(tc.path, "networks") || strings.Contains(tc.path, ".mtu:") || strings.Contains(tc.path, ".bridge:"):
		// A node's networks replace its single-NIC fields; their addresses and MACs are unique
		// across nodes; the IPv6 minimum MTU depends on the families.
		reads = append(reads, "Network", "Nodes.*.Ip", "Nodes.*.Ip6", "Nodes.*.Networks", "Nodes.*.Bridge", "Nodes.*.MacAddress",
			"Nodes.*.VlanId", "Nodes.*.Mtu", "NodeDefaults")
	case strings.HasPrefix(tc.path, "kubernetesVersion:"):
		reads = append(reads, "TalosVersion") // the range depends on the Talos minor
	case strings.Contains(tc.path, ".memoryMib:") || strings.Contains(tc.path, ".cpu:"):
		// Minimums depend on the role and fall back to the node defaults.
		reads = append(reads, "Nodes.*.Role", "Nodes.*.MemoryMib", "Nodes.*.Cpu", "NodeDefaults")
	case strings.Contains(tc.path, ".vmId:"):
		reads = append(reads, "Nodes.*.VmId")
	case strings.Contains(tc.path, ".macAddress:"):
		reads = append(reads, "Nodes.*.MacAddress", "Nodes.*.Networks")
	case strings.Contains(tc.path, ".pcie:"):
		reads = append(reads, "NodeDefaults")
	case strings.HasPrefix(tc.path, "network.dhcp:"):
		reads = append(reads, "Image", "Network")
	case strings.HasPrefix(tc.path, "image.platform:"):
		reads = append(reads, "Network")
	case strings.HasPrefix(tc.path, "network.podSubnets") || strings.HasPrefix(tc.path, "network.serviceSubnets"):
		reads = append(reads, "Network", "Nodes.*.Ip", "Nodes.*.Ip6") // the families
	case strings.HasPrefix(tc.path, "helmCharts[") || strings.HasPrefix(tc.path, "cilium."):
		reads = append(reads, "Cilium", "HelmCharts")
	case tc.path == "nodes:":
		reads = append(reads, "Nodes")
	case strings.Contains(tc.path, ".labels:"):
		reads = append(reads, "Nodes.*.Role") // a worker may set fewer labels
	case strings.HasPrefix(tc.path, "flux"):
		reads = append(reads, "Flux", "ManifestSync", "ClusterName")
	case strings.HasPrefix(tc.path, "proxmoxCsi") || strings.HasPrefix(tc.path, "proxmoxCcm"):
		reads = append(reads, "ProxmoxCsi", "ProxmoxCcm", "ClusterName") // the release names; the user names
	case strings.HasPrefix(tc.path, "nvidiaDevicePlugin"):
		reads = append(reads, "Nodes.*.Gpu", "Nodes.*.PciDevices", "Nodes.*.Image", "Image", "NvidiaDevicePlugin")
	case strings.Contains(tc.path, "image.extensions["):
		reads = append(reads, "TalosVersion", "Image", "Nodes.*.Image")
	case strings.Contains(tc.path, "image.secureBoot:"):
		reads = append(reads, "TalosVersion", "Image")
	case strings.HasPrefix(tc.path, "nodeDefaults.bios:"), strings.Contains(tc.path, "diskEncryption"),
		strings.HasPrefix(tc.path, "nodeDefaults.vmMachine:"), strings.HasPrefix(tc.path, "image.arch:"):
		// Secure Boot decides the firmware and whether a TPM key can be sealed.
		reads = append(reads, "Image", "Nodes.*.Image", "NodeDefaults", "DiskEncryption", "Nodes.*.DiskEncryption", "TalosVersion")
	case strings.Contains(tc.path, ".gpu:"):
		// The preset needs a PCI device and extends the node's (or the cluster's) image.
		reads = append(reads, "Nodes.*.PciDevices", "Nodes.*.Image", "Image", "NodeDefaults")
	}

	return reads
}

// fault is a bad-input case with the inputs its mutation changes.
type fault struct {
	badInput
	changes, reads []string
}

func faults(t *testing.T) []fault {
	t.Helper()

	base := homelabArgs()

	var out []fault

	for _, tc := range badInputs {
		a := homelabArgs()
		tc.mutate(&a)

		changes := changedPaths("", reflect.ValueOf(base), reflect.ValueOf(a))
		if len(changes) == 0 {
			t.Fatalf("case %q changes nothing", tc.name)
		}

		out = append(out, fault{badInput: tc, changes: changes, reads: readsOf(tc)})
	}

	return out
}

// independent reports whether two faults can be combined without one hiding the other.
func independent(a, b fault) bool {
	return !overlap(a.changes, b.changes) && !overlap(a.changes, b.reads) && !overlap(b.changes, a.reads)
}

func overlap(xs, ys []string) bool {
	for _, x := range xs {
		for _, y := range ys {
			if pathPrefix(x, y) || pathPrefix(y, x) {
				return true
			}
		}
	}

	return false
}

// pathPrefix reports whether pattern p (with `*` segments) is a prefix of path q.
func pathPrefix(p, q string) bool {
	ps, qs := strings.Split(p, "."), strings.Split(q, ".")
	if len(ps) > len(qs) {
		return false
	}

	for i := range ps {
		if ok, _ := path.Match(ps[i], qs[i]); !ok && ps[i] != qs[i] {
			if ok, _ := path.Match(qs[i], ps[i]); !ok {
				return false
			}
		}
	}

	return true
}

// changedPaths lists the field paths where a and b differ: structs and maps are walked,
// anything else (slices, Pulumi inputs, scalars) is compared whole.
func changedPaths(at string, a, b reflect.Value) []string {
	join := func(k string) string {
		if at == "" {
			return k
		}

		return at + "." + k
	}

	if a.Kind() == reflect.Pointer && b.Kind() == reflect.Pointer && !a.IsNil() && !b.IsNil() &&
		a.Elem().Kind() == reflect.Struct {
		return changedPaths(at, a.Elem(), b.Elem())
	}

	switch a.Kind() {
	case reflect.Struct:
		var out []string
		for i := range a.NumField() {
			out = append(out, changedPaths(join(a.Type().Field(i).Name), a.Field(i), b.Field(i))...)
		}

		return out
	case reflect.Map:
		if a.IsNil() != b.IsNil() {
			return []string{at}
		}

		keys := map[string]reflect.Value{}
		for _, k := range append(a.MapKeys(), b.MapKeys()...) {
			keys[k.String()] = k
		}

		var out []string
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for k := range keys {
				if !yield(k) {
					return
				}
			}
		}) {
			av, bv := a.MapIndex(keys[name]), b.MapIndex(keys[name])
			switch {
			case !av.IsValid() || !bv.IsValid():
				out = append(out, join(name))
			default:
				out = append(out, changedPaths(join(name), av, bv)...)
			}
		}

		return out
	}

	if !reflect.DeepEqual(a.Interface(), b.Interface()) {
		return []string{at}
	}

	return nil
}

// reported reports whether err lists a problem at path (path ends with ':' or is a prefix such
// as `controlPlaneConfigPatches[`): the problem's line must start with it, so `configPatches[0]:`
// is not found in `nodes.worker-1.configPatches[0]:`.
func reported(err error, path string) bool {
	return strings.Contains(err.Error(), "\n  - "+path)
}

// validateEach constructs each input in one in-memory Pulumi program and returns each error.
func validateEach(t *testing.T, inputs []TalosProxmoxClusterArgs) []error {
	t.Helper()

	errs := make([]error, len(inputs))
	m := &mockMonitor{}

	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		for i, a := range inputs {
			_, errs[i] = NewTalosProxmoxCluster(ctx, fmt.Sprintf("c%d", i), a)
		}

		return nil
	}, pulumi.WithMocks("project", "stack", m))
	if err != nil {
		t.Fatal(err)
	}

	if len(m.names) != 0 {
		t.Errorf("resources were registered although every input is invalid: %v", m.names[:min(5, len(m.names))])
	}

	return errs
}

func TestEveryPairOfIndependentFaultsIsReported(t *testing.T) {
	t.Parallel()

	fs := faults(t)

	type pair struct{ a, b fault }

	var (
		pairs  []pair
		inputs []TalosProxmoxClusterArgs
	)

	for i := range fs {
		for j := i + 1; j < len(fs); j++ {
			if !independent(fs[i], fs[j]) {
				continue
			}

			a := homelabArgs()
			fs[i].mutate(&a)
			fs[j].mutate(&a)

			pairs = append(pairs, pair{fs[i], fs[j]})
			inputs = append(inputs, a)
		}
	}

	if len(pairs) < len(fs)*(len(fs)-1)/4 {
		t.Fatalf("only %d independent pairs of %d faults; the reads table is too coarse", len(pairs), len(fs))
	}

	errs := validateEach(t, inputs)

	failed := 0

	for i, p := range pairs {
		if errs[i] == nil {
			t.Errorf("%q + %q: no error", p.a.name, p.b.name)
			continue
		}

		for _, f := range []fault{p.a, p.b} {
			if !reported(errs[i], f.path) {
				failed++
				if failed <= 20 {
					t.Errorf("%q + %q: %s is not reported:\n%s", p.a.name, p.b.name, f.path, errs[i])
				}
			}
		}
	}

	t.Logf("%d independent pairs of %d faults checked", len(pairs), len(fs))
}

func TestAllIndependentFaultsInOneInput(t *testing.T) {
	t.Parallel()

	// Greedy: faults that conflict with few others first, so that e.g. "no nodes" does not
	// crowd out every fault of a node.
	fs := faults(t)
	conflicts := map[string]int{}

	for _, a := range fs {
		for _, b := range fs {
			if a.name != b.name && !independent(a, b) {
				conflicts[a.name]++
			}
		}
	}

	slices.SortStableFunc(fs, func(a, b fault) int { return conflicts[a.name] - conflicts[b.name] })

	var chosen []fault

	for _, f := range fs {
		if !slices.ContainsFunc(chosen, func(c fault) bool { return !independent(c, f) }) {
			chosen = append(chosen, f)
		}
	}

	if len(chosen) < 30 {
		t.Fatalf("only %d faults combine; want at least 30", len(chosen))
	}

	a := homelabArgs()
	for _, f := range chosen {
		f.mutate(&a)
	}

	err := validateEach(t, []TalosProxmoxClusterArgs{a})[0]
	if err == nil {
		t.Fatal("no error")
	}

	for _, f := range chosen {
		if !reported(err, f.path) {
			t.Errorf("%q: %s is not reported", f.name, f.path)
		}
	}

	t.Logf("%d faults in one input, all reported:\n%s", len(chosen), err)
}

// TestNewUsersThreeMistakes is the report that found the early stop: a bad cluster name, a
// control plane with too little memory and a VIP equal to that node's address are three
// problems, all reported.
func TestNewUsersThreeMistakes(t *testing.T) {
	t.Parallel()

	a := homelabArgs()
	a.ClusterName = "Bad_Name"
	node(&a, "cp-1", func(n *Node) { n.MemoryMib = new(512) })
	a.Vip = a.Nodes["cp-1"].Ip

	err := validateEach(t, []TalosProxmoxClusterArgs{a})[0]
	if err == nil {
		t.Fatal("no error")
	}

	for _, want := range []string{"clusterName:", "nodes.cp-1.memoryMib:", "vip: 10.0.0.11 is also the address of nodes.cp-1", "(3 problems)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%s", want, err)
		}
	}
}
