package provider

import (
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

const homelabJSON = `{
  "clusterName": "homelab",
  "talosVersion": "v1.11.5",
  "vip": "10.0.0.10",
  "network": {"gateway": "10.0.0.1", "nameservers": ["1.1.1.1"], "ntpServers": ["time.cloudflare.com"]},
  "image": {"extensions": ["siderolabs/qemu-guest-agent", "siderolabs/iscsi-tools"]},
  "configPatches": ["machine:\n  sysctls:\n    vm.max_map_count: \"262144\"\n"],
  "workerConfigPatches": ["machine:\n  kubelet:\n    extraArgs:\n      max-pods: \"200\"\n"],
  "inlineManifests": [{"name": "l2-policy", "contents": "apiVersion: cilium.io/v2alpha1\nkind: CiliumL2AnnouncementPolicy\nmetadata:\n  name: default\n"}],
  "nodes": {
    "cp-1": {"hostNode": "pve1", "role": "controlplane", "ip": "10.0.0.11", "vmId": 111, "tags": ["prod"]},
    "cp-2": {"hostNode": "pve2", "role": "controlplane", "ip": "10.0.0.12", "vmId": 112},
    "cp-3": {"hostNode": "pve1", "role": "controlplane", "ip": "10.0.0.13", "vmId": 113},
    "worker-1": {"hostNode": "pve1", "role": "worker", "ip": "10.0.0.21",
      "dataDisks": [{"sizeGib": 100, "mountPath": "/var/lib/longhorn"}],
      "configPatches": ["machine:\n  sysctls:\n    net.core.somaxconn: \"65535\"\n"]},
    "worker-2": {"hostNode": "pve2", "role": "worker", "ip": "10.0.0.22", "pciDevices": [{"mapping": "gpu"}]}
  }
}`

func TestConstructHomelab(t *testing.T) {
	t.Parallel()

	r := &recorder{}

	resp, err := construct(t, r, "homelab", inputsFromJSON(t, homelabJSON))
	if err != nil {
		t.Fatal(err)
	}

	counts := map[string]int{}
	for _, reg := range r.custom() {
		counts[reg.Type]++
	}

	want := map[string]int{
		"pulumi:providers:talos":                              1,
		"pulumi:providers:talos-proxmox":                      1,
		"talos:imageFactory/schematic:Schematic":              1,
		"proxmoxve:Download/file:File":                        2,
		"proxmoxve:VM/virtualMachine:VirtualMachine":          5,
		"talos:machine/secrets:Secrets":                       1,
		"talos:machine/configurationApply:ConfigurationApply": 5,
		"talos-proxmox:lifecycle:EtcdBootstrap":               1,
		"talos:cluster/kubeconfig:Kubeconfig":                 1,
		"talos-proxmox:lifecycle:NodeUpgrade":                 5,
		"talos-proxmox:lifecycle:ClusterHealth":               1,
		"talos-proxmox:lifecycle:Membership":                  1,
		"talos-proxmox:lifecycle:ManifestSync":                1,
		"talos-proxmox:lifecycle:NodeRetire":                  5,
		"talos-proxmox:lifecycle:KubernetesUpgrade":           1,
		"talos-proxmox:lifecycle:KubernetesRecord":            1,
		"talos-proxmox:lifecycle:NodeConfig":                  5,
		"talos-proxmox:lifecycle:ClientCredentials":           1,
	}
	for typ, n := range want {
		if counts[typ] != n {
			t.Errorf("%s registered %d times, want %d", typ, counts[typ], n)
		}
	}

	if len(counts) != len(want) {
		t.Errorf("unexpected resource types: %v", counts)
	}

	component := string(resp.Urn)
	for _, reg := range r.custom() {
		if !strings.HasPrefix(reg.Type, "pulumi:providers:") && !strings.HasPrefix(reg.Name, "homelab-") {
			t.Errorf("%s %s is not named <cluster>-…", reg.Type, reg.Name)
		}

		if reg.Parent != component {
			t.Errorf("%s %s has parent %q, want the component %q", reg.Type, reg.Name, reg.Parent, component)
		}
	}

	t.Run("schematic and downloads", func(t *testing.T) {
		s := r.named("homelab-schematic")
		if !strings.Contains(s.Inputs.Get("schematic").AsString(), "siderolabs/iscsi-tools") {
			t.Errorf("schematic = %q", s.Inputs.Get("schematic").AsString())
		}

		if !strings.HasPrefix(s.Provider, "urn:pulumi:stack::project::"+ClusterToken+"$pulumi:providers:talos::homelab-talos::") {
			t.Errorf("schematic provider = %q, want the component's talos provider for image.factoryUrl", s.Provider)
		}

		for _, d := range r.ofType("proxmoxve:Download/file:File") {
			if !slices.ContainsFunc(d.Dependencies, func(u string) bool { return strings.HasSuffix(u, "::homelab-schematic") }) {
				t.Errorf("%s does not wait for the schematic: %v", d.Name, d.Dependencies)
			}

			if !d.DeleteBeforeReplace || d.Inputs.Get("overwrite").AsBool() {
				t.Errorf("%s: a replaced download keeps its file name, so the old one must go first, and overwrite must be off", d.Name)
			}

			if got := d.Inputs.Get("contentType").AsString(); got != "import" {
				t.Errorf("%s contentType = %s", d.Name, got)
			}

			if url := d.Inputs.Get("url").AsString(); !strings.HasPrefix(url, "https://factory.talos.dev/image/") || !strings.HasSuffix(url, "/v1.11.5/nocloud-amd64.qcow2") {
				t.Errorf("%s url = %s", d.Name, url)
			}
		}
	})

	t.Run("vms", func(t *testing.T) {
		w1 := r.named("homelab-worker-1")
		if w1.Type != "proxmoxve:VM/virtualMachine:VirtualMachine" {
			t.Fatalf("no VM homelab-worker-1")
		}

		if !w1.DeleteBeforeReplace {
			t.Error("VMs must be deleted before they are replaced (same address, pinned id)")
		}

		if !slices.Equal(w1.IgnoreChanges, []string{"disks[0].fileId", "disks[0].importFrom", "cdrom", "initialization", "disks[0].speed", "disks[1].speed"}) {
			t.Errorf("ignoreChanges = %v, want the OS disk's source image (a new version must not re-create running VMs), "+
				"the CD-ROM (VMs made with the host's drive keep it), the cloud-init drive (a change would reboot every VM at "+
				"once) and every disk's speed block (the provider reads it back differently)", w1.IgnoreChanges)
		}

		// The host's physical drive, the proxmoxve provider's default, needs Sys.Console on /.
		if cdrom := w1.Inputs.Get("cdrom"); !cdrom.IsMap() || cdrom.AsMap().Get("fileId").AsString() != "none" {
			t.Errorf("cdrom = %v, want an empty drive (fileId none)", cdrom)
		}

		// A new VM gets an instance tag, which its node's configuration and records follow, so a VM
		// lost and created again is told from the old one.
		var instance string
		for _, tag := range w1.Inputs.Get("tags").AsArray().All {
			if strings.HasPrefix(tag.AsString(), "talos-i-") {
				instance = tag.AsString()
			}
		}

		if instance == "" {
			t.Errorf("a new VM gets no instance tag: %v", w1.Inputs.Get("tags"))
		}

		disks := w1.Inputs.Get("disks").AsArray()
		if disks.Len() != 2 {
			t.Fatalf("worker-1 disks = %v", disks)
		}

		os := disks.Get(0).AsMap()
		if got := os.Get("importFrom").AsString(); !strings.HasPrefix(got, "local:import/homelab-talos-v1.11.5-") {
			t.Errorf("OS disk importFrom = %q", got)
		}

		if os.Get("discard").AsString() != "on" || !os.Get("ssd").AsBool() || os.Get("iothread").AsBool() {
			t.Errorf("OS disk = %v", os)
		}

		if got := disks.Get(1).AsMap().Get("serial").AsString(); got != "data-3e793e00" { // from the mount path
			t.Errorf("data disk serial = %q", got)
		}

		if got := w1.Inputs.Get("scsiHardware").AsString(); got != "virtio-scsi-pci" {
			t.Errorf("scsiHardware = %s", got)
		}

		if got := w1.Inputs.Get("memory").AsMap().Get("floating").AsNumber(); got != 0 {
			t.Errorf("ballooning on: floating = %v", got)
		}

		if !w1.Inputs.Get("agent").AsMap().Get("enabled").AsBool() {
			t.Error("guest agent off although the image has qemu-guest-agent")
		}

		cp1 := r.named("homelab-cp-1")
		var tags []string
		for _, v := range cp1.Inputs.Get("tags").AsArray().All {
			tags = append(tags, v.AsString())
		}

		if len(tags) != 5 || strings.Join(tags[:4], ",") != "controlplane,homelab,prod,talos" || !strings.HasPrefix(tags[4], "talos-i-") {
			t.Errorf("tags = %v, want sorted talos, role, cluster and user tags and the instance tag", tags)
		}

		ip := cp1.Inputs.Get("initialization").AsMap().Get("ipConfigs").AsArray().Get(0).AsMap().Get("ipv4").AsMap()
		if ip.Get("address").AsString() != "10.0.0.11/24" || ip.Get("gateway").AsString() != "10.0.0.1" {
			t.Errorf("cloud-init ipv4 = %v", ip)
		}

		w2 := r.named("homelab-worker-2")
		pci := w2.Inputs.Get("hostpcis").AsArray().Get(0).AsMap()
		if pci.Get("mapping").AsString() != "gpu" || pci.Get("device").AsString() != "hostpci0" {
			t.Errorf("hostpci = %v", pci)
		}

		// Each VM imports the image downloaded to its own host.
		for _, vm := range r.ofType("proxmoxve:VM/virtualMachine:VirtualMachine") {
			host := vm.Inputs.Get("nodeName").AsString()
			if !slices.ContainsFunc(vm.Dependencies, func(u string) bool { return strings.HasSuffix(u, "::homelab-image-"+host) }) {
				t.Errorf("%s on %s does not use the image downloaded to %s: %v", vm.Name, host, host, vm.Dependencies)
			}
		}
	})

	t.Run("talos", func(t *testing.T) {
		secrets := r.named("homelab-secrets")
		if !slices.Contains(secrets.AdditionalSecrets, "machineSecrets") || !slices.Contains(secrets.AdditionalSecrets, "clientConfiguration") {
			t.Errorf("secrets additional secret outputs = %v", secrets.AdditionalSecrets)
		}

		if !slices.Contains(secrets.IgnoreChanges, "talosVersion") {
			t.Error("machine secrets must ignore talosVersion changes (new PKI would break the cluster)")
		}

		for _, node := range []string{"cp-1", "cp-2", "cp-3", "worker-1", "worker-2"} {
			apply := r.named("homelab-" + node + "-config")
			if apply.Type != "talos:machine/configurationApply:ConfigurationApply" {
				t.Fatalf("no configuration apply for %s", node)
			}

			vmURN := urnOf(r, "homelab-"+node)
			if !slices.Contains(apply.Dependencies, vmURN) {
				t.Errorf("%s apply does not depend on its VM: %v", node, apply.Dependencies)
			}

			if !slices.Equal(apply.ReplaceWith, []string{vmURN}) {
				t.Errorf("%s apply is not replaced with its VM: %v", node, apply.ReplaceWith)
			}

			if !apply.Inputs.Get("machineConfigurationInput").Secret() {
				t.Errorf("%s machine configuration is not a secret", node)
			}

			for _, s := range []string{"machineConfiguration", "machineConfigurationInput", "clientConfiguration"} {
				if !slices.Contains(apply.AdditionalSecrets, s) {
					t.Errorf("%s apply: %s is not an additional secret output", node, s)
				}
			}
		}

		if ip := r.named("homelab-worker-2-config").Inputs.Get("node").AsString(); ip != "10.0.0.22" {
			t.Errorf("worker-2 apply node = %s", ip)
		}

		boot := r.named("homelab-bootstrap")
		if boot.Type != "talos-proxmox:lifecycle:EtcdBootstrap" || boot.Inputs.Get("node").AsString() != "cp-1" ||
			boot.Inputs.Get("address").AsString() != "10.0.0.11" {
			t.Errorf("bootstrap must target cp-1's own address, not the VIP: %s %v", boot.Type, boot.Inputs)
		}

		// The bootstrap node's configuration alone: the other control planes join when ready.
		if !slices.Contains(boot.Dependencies, urnOf(r, "homelab-cp-1-config")) {
			t.Error("bootstrap does not wait for the bootstrap node's configuration")
		}

		for _, node := range []string{"cp-2", "cp-3", "worker-1"} {
			if slices.Contains(boot.Dependencies, urnOf(r, "homelab-"+node+"-config")) {
				t.Errorf("bootstrap waits for %s's configuration", node)
			}
		}

		// It is every control plane VM's: a new one for any of them creates it again, and its create
		// does nothing while another control plane runs etcd (the new VM joins it).
		cpVMs := []string{urnOf(r, "homelab-cp-1"), urnOf(r, "homelab-cp-2"), urnOf(r, "homelab-cp-3")}
		if !slices.Equal(boot.ReplaceWith, cpVMs) {
			t.Errorf("bootstrap replaceWith = %v, want the control planes' VMs %v", boot.ReplaceWith, cpVMs)
		}

		if v, ok := boot.Inputs.GetOk("recoverFrom"); ok && !v.IsNull() {
			t.Errorf("a new cluster's bootstrap restores %v", boot.Inputs.Get("recoverFrom"))
		}

		kc := r.named("homelab-kubeconfig")
		if !slices.Contains(kc.Dependencies, urnOf(r, "homelab-bootstrap")) {
			t.Errorf("kubeconfig does not wait for bootstrap: %v", kc.Dependencies)
		}
	})

	t.Run("machine configurations", func(t *testing.T) {
		configs := nodeConfigs(t, r)
		if len(configs) != 5 {
			t.Fatalf("configurations for %d nodes, want 5", len(configs))
		}

		for host, cfg := range configs {
			if got := cfg.K8sClusterConfig().ClusterEndpoint().String(); got != "https://10.0.0.10:6443" {
				t.Errorf("%s: cluster endpoint = %s", host, got)
			}

			if got := cfg.K8sKubeletConfig().Image(); !strings.HasSuffix(got, ":v1.34.1") {
				t.Errorf("%s: kubelet image %s, want Kubernetes v1.34.1", host, got)
			}

			// Contract v1.11 (the cluster's Talos minor): one v1alpha1 document.
			if n := len(cfg.Documents()); n != 1 {
				t.Errorf("%s: %d documents; contract v1.11 has one", host, n)
			}
		}

		sysctls := func(host string) map[string]string { return configs[host].Machine().Sysctls() }

		if names, _ := manifestsOf(configs["cp-2"]); !slices.Contains(names, "l2-policy") || sysctls("cp-2")["vm.max_map_count"] == "" {
			t.Errorf("cp-2 lacks the inline manifest or the cluster-wide patch: manifests %v, sysctls %v", names, sysctls("cp-2"))
		}

		w := configs["worker-1"]
		if sysctls("worker-1")["vm.max_map_count"] == "" || sysctls("worker-1")["net.core.somaxconn"] == "" ||
			w.K8sKubeletConfig().ExtraArgs()["max-pods"] == nil {
			t.Errorf("worker-1 lacks the cluster-wide, role or node patch")
		}

		if names, _ := manifestsOf(w); len(names) > 0 {
			t.Error("inline manifests on a worker")
		}

		if d := w.Machine().Disks(); len(d) != 1 || d[0].Device() != "/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_data-3e793e00" {
			t.Errorf("worker-1 data disk missing: %v", d)
		}
	})

	t.Run("outputs", func(t *testing.T) {
		st := resp.State
		for _, k := range []string{"kubeconfig", "talosconfig"} {
			if !st.Get(k).Secret() {
				t.Errorf("output %s is not a secret", k)
			}
		}

		if got := st.Get("endpoint").AsString(); got != "https://10.0.0.10:6443" {
			t.Errorf("endpoint = %s", got)
		}

		var cps []string
		for _, v := range st.Get("controlPlaneIps").AsArray().All {
			cps = append(cps, v.AsString())
		}

		if strings.Join(cps, ",") != "10.0.0.11,10.0.0.12,10.0.0.13" {
			t.Errorf("controlPlaneIps = %v", cps)
		}

		n := st.Get("nodes").AsMap().Get("cp-2").AsMap()
		if n.Get("vmId").AsNumber() != 112 || n.Get("ip").AsString() != "10.0.0.12" || n.Get("hostNode").AsString() != "pve2" || n.Get("role").AsString() != "controlplane" {
			t.Errorf("nodes.cp-2 = %v", n)
		}

		if !strings.HasPrefix(st.Get("installerImage").AsString(), "factory.talos.dev/nocloud-installer/"+st.Get("schematicId").AsString()+":v1.11.5") {
			t.Errorf("installerImage = %s", st.Get("installerImage").AsString())
		}
	})
}

func urnOf(r *recorder, name string) string {
	for _, reg := range r.custom() {
		if reg.Name == name {
			return "urn:pulumi:stack::project::" + ClusterToken + "$" + reg.Type + "::" + name
		}
	}

	return ""
}

var _ = property.Map{}
