package provider

import (
	"slices"
	"strings"
	"testing"
)

func TestConstructDHCP(t *testing.T) {
	t.Parallel()

	r := &recorder{}
	resp, err := construct(t, r, "lab", inputsFromJSON(t, `{
	  "clusterName": "lab", "talosVersion": "v1.10.6",
	  "network": {"dhcp": true, "gateway": "192.168.50.1"},
	  "image": {"sharedDatastore": true, "contentType": "iso", "datastoreId": "nfs"},
	  "nodes": {
	    "cp-1": {"hostNode": "pve1", "role": "controlplane"},
	    "w-1": {"hostNode": "pve2", "role": "worker"}
	  }
	}`))
	if err != nil {
		t.Fatal(err)
	}

	downloads := r.ofType("proxmoxve:Download/file:File")
	if len(downloads) != 1 || downloads[0].Name != "lab-image" {
		t.Fatalf("a shared datastore needs one download, got %d", len(downloads))
	}

	d := downloads[0].Inputs
	if d.Get("decompressionAlgorithm").AsString() != "gz" || !strings.HasSuffix(d.Get("url").AsString(), ".raw.gz") {
		t.Errorf("iso download = %v", d)
	}

	if !slices.Equal(downloads[0].IgnoreChanges, []string{"nodeName"}) {
		t.Errorf("the shared download must not move when the first host changes: ignoreChanges = %v", downloads[0].IgnoreChanges)
	}

	vm := r.named("lab-cp-1")
	agent := vm.Inputs.Get("agent").AsMap()
	if agent.Get("waitForIp").IsMap() || agent.Get("timeout").AsString() != "1s" {
		t.Errorf("the provider must not wait for the guest agent, which does not run in maintenance mode (siderolabs/talos#11651): agent = %v", agent)
	}

	// The address comes from the search by MAC on the gateway's subnet.
	search := r.named("lab-cp-1-address")
	if search.Type != "talos-proxmox:lifecycle:NodeAddress" || search.Inputs.Get("subnet").AsString() != "192.168.50.0/24" ||
		search.Inputs.Get("macAddress").AsString() == "" {
		t.Errorf("cp-1's address search = %+v", search)
	}

	os := vm.Inputs.Get("disks").AsArray().Get(0).AsMap()
	if got := os.Get("fileId").AsString(); !strings.HasPrefix(got, "nfs:iso/lab-talos-v1.10.6-") {
		t.Errorf("iso OS disk fileId = %q", got)
	}

	if got := vm.Inputs.Get("initialization").AsMap().Get("ipConfigs").AsArray().Get(0).AsMap().Get("ipv4").AsMap().Get("address").AsString(); got != "dhcp" {
		t.Errorf("cloud-init address = %q", got)
	}

	// The mock guest agent reports lo = 127.0.0.1 and eth0 = 192.168.50.x.
	cpIP := r.named("lab-cp-1-config").Inputs.Get("node").AsString()
	if !strings.HasPrefix(cpIP, "192.168.50.") {
		t.Fatalf("cp-1 address from the guest agent = %q", cpIP)
	}

	boot := r.named("lab-bootstrap")
	if got := boot.Inputs.Get("address").AsString(); got != cpIP {
		t.Errorf("bootstrap address = %s, want %s", got, cpIP)
	}

	if !slices.Equal(boot.ReplaceWith, []string{urnOf(r, "lab-cp-1")}) {
		t.Errorf("with a single control plane, a new VM for it needs a new bootstrap: replaceWith = %v", boot.ReplaceWith)
	}

	if got := resp.State.Get("endpoint").AsString(); got != "https://"+cpIP+":6443" {
		t.Errorf("endpoint = %s", got)
	}

	if resp.State.Get("nodes").AsMap().Get("w-1").AsMap().Get("ip").AsString() == "" {
		t.Error("worker address missing from outputs")
	}
}

func TestTwoClustersInOneStack(t *testing.T) {
	t.Parallel()

	m := &mockMonitor{}
	files := map[string]bool{}

	names, err := func() ([]string, error) {
		err := runWith(m, func(ctxRun func(string, TalosProxmoxClusterArgs) error) error {
			a := homelabArgs()
			if err := ctxRun("blue", a); err != nil {
				return err
			}

			b := homelabArgs()
			b.ClusterName = "green"
			for k, n := range b.Nodes {
				n.VmId = nil
				n.MacAddress = ""
				n.Ip = strings.Replace(n.Ip, "10.0.0.", "10.0.0.1", 1)
				b.Nodes[k] = n
			}
			b.Vip = "10.0.0.100"

			return ctxRun("green", b)
		})

		return m.names, err
	}()
	if err != nil {
		t.Fatal(err)
	}

	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("two resources named %s", n)
		}
		seen[n] = true
	}

	for _, f := range m.fileNames() {
		if files[f] {
			t.Errorf("two clusters download to the same file %s", f)
		}
		files[f] = true
	}

	if len(files) != 4 {
		t.Errorf("want 4 distinct image files (2 clusters × 2 hosts), got %v", files)
	}
}
