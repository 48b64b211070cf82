package provider

import (
	"crypto/ed25519"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"golang.org/x/crypto/ssh"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender/helmtest"
)

// TestConstructProxmoxCSIAndCCM: proxmoxCsi and proxmoxCcm register, through the proxmoxve
// provider, a role with each consumer's privileges, a user, a separated token and ACLs for the user
// and the token on every node's VM (and the CSI's datastore), and the control planes' manifests
// carry the charts (the lab's stand-ins of them) with the storage class and the Secrets'
// names; the kubelets run with an external cloud provider and their VMs' provider IDs.
func TestConstructProxmoxCSIAndCCM(t *testing.T) {
	t.Parallel()

	charts := filepath.Join("..", "lab", "chartrepo", "standin")
	repo := helmtest.Repository(t, helmtest.Archive(t, filepath.Join(charts, "proxmox-csi-plugin")),
		helmtest.Archive(t, filepath.Join(charts, "proxmox-cloud-controller-manager")))

	r := &recorder{config: map[string]string{"proxmoxve:endpoint": "https://pve.example.com:8006/"}}
	_, err := construct(t, r, "lab", inputsFromJSON(t, `{
	  "clusterName": "lab", "talosVersion": "v1.11.5", "vip": "10.0.0.10",
	  "network": {"gateway": "10.0.0.1"},
	  "proxmoxCsi": {"repository": "`+repo.URL+`", "storageClasses": [{"name": "fast", "storage": "local-lvm", "default": true}]},
	  "proxmoxCcm": {"repository": "`+repo.URL+`"},
	  "nodes": {
	    "cp-1": {"hostNode": "pve1", "role": "controlplane", "ip": "10.0.0.11", "vmId": 111},
	    "w-1": {"hostNode": "pve2", "role": "worker", "ip": "10.0.0.21", "vmId": 121}
	  }
	}`))
	if err != nil {
		t.Fatal(err)
	}

	for consumer, privs := range map[string][]string{
		"csi": {"Datastore.Allocate", "Datastore.AllocateSpace", "Datastore.Audit", "VM.Audit", "VM.Config.Disk"},
		"ccm": {"VM.Audit"},
	} {
		role := r.named("lab-proxmox-" + consumer + "-role")
		if got := strings.Join(stringsOf(role.Inputs.Get("privileges")), " "); got != strings.Join(privs, " ") {
			t.Errorf("%s role privileges: %s, want %v", consumer, got, privs)
		}

		if id := role.Inputs.Get("roleId").AsString(); id != "talos-lab-"+consumer {
			t.Errorf("%s role id %q", consumer, id)
		}

		if id := r.named("lab-proxmox-" + consumer + "-user").Inputs.Get("userId").AsString(); id != "talos-lab-"+consumer+"@pve" {
			t.Errorf("%s user id %q", consumer, id)
		}

		tok := r.named("lab-proxmox-" + consumer + "-token").Inputs
		if tok.Get("tokenName").AsString() != consumer || !tok.Get("privilegesSeparation").AsBool() {
			t.Errorf("%s token: %v", consumer, tok)
		}
	}

	var acls []string
	for _, a := range r.ofType("proxmoxve:index/acl:Acl") {
		who := "user"
		if a.Inputs.Get("tokenId").IsComputed() || a.Inputs.Get("tokenId").IsString() {
			who = "token"
		}

		acls = append(acls, a.Inputs.Get("roleId").AsString()+" "+a.Inputs.Get("path").AsString()+" "+who)
	}

	slices.Sort(acls)

	want := []string{
		"talos-lab-ccm /vms/111 token", "talos-lab-ccm /vms/111 user", "talos-lab-ccm /vms/121 token", "talos-lab-ccm /vms/121 user",
		"talos-lab-csi /storage/local-lvm token", "talos-lab-csi /storage/local-lvm user",
		"talos-lab-csi /vms/111 token", "talos-lab-csi /vms/111 user", "talos-lab-csi /vms/121 token", "talos-lab-csi /vms/121 user",
	}
	if !slices.Equal(acls, want) {
		t.Errorf("ACLs:\n%s\nwant:\n%s", strings.Join(acls, "\n"), strings.Join(want, "\n"))
	}

	for node, id := range map[string]string{"cp-1": "proxmox://lab/111", "w-1": "proxmox://lab/121"} {
		cfg := appliedConfig(t, r, node)
		if !strings.Contains(cfg, "cloud-provider: external") || !strings.Contains(cfg, "provider-id: "+id) {
			t.Errorf("%s's configuration has no external cloud provider with provider ID %s", node, id)
		}
	}

	cp := appliedConfig(t, r, "cp-1")
	for _, want := range []string{
		"name: proxmox-csi-plugin", "name: proxmox-cloud-controller-manager", "provisioner: csi.proxmox.sinextra.dev",
		"storage: local-lvm", "secretName: talos-proxmox-csi", "talos-proxmox.dev/proxmox-token: talos-lab-csi@pve!csi",
		"storageclass.kubernetes.io/is-default-class: \"true\"",
	} {
		if !strings.Contains(cp, want) {
			t.Errorf("the control plane's manifests lack %q", want)
		}
	}

	// Each token's Secret, from the token resource's (secret) value.
	for _, want := range []string{`name: talos-proxmox-csi\s+namespace: csi-proxmox`, `name: talos-proxmox-ccm\s+namespace: kube-system`} {
		if !regexp.MustCompile(want).MatchString(cp) {
			t.Errorf("the control plane's manifests have no Secret %q", want)
		}
	}
}

func stringsOf(v property.Value) []string {
	var out []string
	for _, e := range v.AsArray().AsSlice() {
		out = append(out, e.AsString())
	}

	return out
}

// appliedConfig is the machine configuration the cluster "lab" applies to node.
func appliedConfig(t *testing.T, r *recorder, node string) string {
	t.Helper()

	return r.named("lab-" + node + "-config").Inputs.Get("machineConfigurationInput").AsString()
}

// TestProxmoxTokenNeedsTheEndpoint: without a Proxmox endpoint the component can read, the token's
// consumers could not reach Proxmox: refused, naming the setting.
func TestProxmoxTokenNeedsTheEndpoint(t *testing.T) {
	t.Parallel()

	repo := helmtest.Repository(t, helmtest.Archive(t, filepath.Join("..", "lab", "chartrepo", "standin", "proxmox-cloud-controller-manager")))

	_, err := construct(t, &recorder{}, "lab", inputsFromJSON(t, `{
	  "clusterName": "lab", "talosVersion": "v1.11.5", "network": {"gateway": "10.0.0.1"}, "proxmoxCcm": {"repository": "`+repo.URL+`"},
	  "nodes": {"cp-1": {"hostNode": "pve1", "role": "controlplane", "ip": "10.0.0.11"}}
	}`))
	if err == nil || !strings.Contains(err.Error(), "proxmoxCcm: the Proxmox API its token is for is unknown") || !strings.Contains(err.Error(), "proxmoxve:endpoint") {
		t.Fatalf("want the unknown endpoint refused, got %v", err)
	}
}

// TestProxmoxCSIDatastoreMustExist: a storage class on a datastore the hosts lack is refused at
// preview, on every host with nodes, before anything is registered.
func TestProxmoxCSIDatastoreMustExist(t *testing.T) {
	t.Parallel()

	r := &recorder{}
	_, err := construct(t, r, "lab", inputsFromJSON(t, `{
	  "clusterName": "lab", "talosVersion": "v1.11.5", "network": {"gateway": "10.0.0.1"},
	  "proxmoxCsi": {"storageClasses": [{"name": "fast", "storage": "local-zfs"}]},
	  "nodes": {"cp-1": {"hostNode": "pve1", "role": "controlplane", "ip": "10.0.0.11"}}
	}`))
	if err == nil || !strings.Contains(err.Error(), `proxmoxCsi.storageClasses[0].storage: datastore "local-zfs" does not exist on pve1`) {
		t.Fatalf("want the missing datastore refused, got %v", err)
	}

	if n := len(r.custom()); n != 0 {
		t.Errorf("%d resources registered before the refusal", n)
	}
}

// TestConstructFlux: flux adds Flux's controllers, the repository's Secret and the sync objects to
// the manifest sync (never to the control planes' configuration); a generated deploy key is a
// DeployKey resource whose rotation follows keyRotation; with secretRef no Secret and no key.
func TestConstructFlux(t *testing.T) {
	t.Parallel()

	flux := func(extra string) string {
		return strings.Replace(homelabJSON, "{", `{"flux": {"gitRepository": {"url": "ssh://git@git.example.com/me/fleet"}, `+extra+`},`, 1)
	}

	r := &recorder{}
	if _, err := construct(t, r, "homelab", inputsFromJSON(t, flux(`"knownHosts": "`+testKnownHosts+`", "keyRotation": "1"`))); err != nil {
		t.Fatal(err)
	}

	manifests := r.named("homelab-manifests").Inputs.Get("manifests").AsMap()
	for _, name := range []string{"flux-install", "flux-sync", "flux-deploy-key"} {
		if _, ok := manifests.GetOk(name); !ok {
			t.Errorf("the manifest sync has no %s: %v", name, slices.Collect(maps.Keys(manifests.AsMap())))
		}
	}

	if nw := stringsOf(r.named("homelab-manifests").Inputs.Get("noWait")); !slices.Equal(nw, []string{"flux-sync"}) {
		t.Errorf("the sync waits for Flux's GitRepository (noWait %v): it is ready only once the git host has the deploy key", nw)
	}

	if sync := manifests.Get("flux-sync").AsString(); !strings.Contains(sync, "path: ./clusters/homelab") ||
		!strings.Contains(sync, "url: ssh://git@git.example.com/me/fleet") || !strings.Contains(sync, "branch: main") {
		t.Errorf("flux-sync:\n%s", sync)
	}

	if install := manifests.Get("flux-install").AsString(); !strings.Contains(install, "name: source-controller") {
		t.Errorf("flux-install has no source-controller")
	}

	if key := r.named("homelab-flux-deploy-key"); key.Inputs.Get("rotation").AsString() != "1" {
		t.Errorf("the deploy key's rotation: %v", key.Inputs)
	}

	if cfg := r.named("homelab-cp-1-config").Inputs.Get("machineConfigurationInput").AsString(); strings.Contains(cfg, "flux-system") {
		t.Errorf("Flux reached the control planes' configuration")
	}

	public := &recorder{}
	in := strings.Replace(flux(""), `"url": "ssh://git@git.example.com/me/fleet"}, }`, `"url": "https://git.example.com/me/fleet"}}`, 1)
	if _, err := construct(t, public, "homelab", inputsFromJSON(t, in)); err != nil {
		t.Fatal(err)
	}

	manifests = public.named("homelab-manifests").Inputs.Get("manifests").AsMap()
	if _, ok := manifests.GetOk("flux-deploy-key"); ok || strings.Contains(manifests.Get("flux-sync").AsString(), "secretRef") {
		t.Errorf("a public repository: manifests %v, sync:\n%s", slices.Collect(maps.Keys(manifests.AsMap())), manifests.Get("flux-sync").AsString())
	}

	own := &recorder{}
	if _, err := construct(t, own, "homelab", inputsFromJSON(t, flux(`"secretRef": "fleet-creds"`))); err != nil {
		t.Fatal(err)
	}

	manifests = own.named("homelab-manifests").Inputs.Get("manifests").AsMap()
	if _, ok := manifests.GetOk("flux-deploy-key"); ok || !strings.Contains(manifests.Get("flux-sync").AsString(), "name: fleet-creds") {
		t.Errorf("with secretRef: manifests %v, sync:\n%s", slices.Collect(maps.Keys(manifests.AsMap())), manifests.Get("flux-sync").AsString())
	}

	for _, reg := range own.custom() {
		if reg.Type == "talos-proxmox:lifecycle:DeployKey" {
			t.Errorf("a deploy key was made beside secretRef")
		}
	}
}

// testKnownHosts is a known_hosts line of a host key made for the tests.
var testKnownHosts = func() string {
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		panic(err)
	}

	key, err := ssh.NewPublicKey(pub)
	if err != nil {
		panic(err)
	}

	return "git.example.com " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
}()

// withFlux gives the homelab Flux from an ssh:// repository, then makes mistake f.
func withFlux(f func(*Flux)) func(*TalosProxmoxClusterArgs) {
	return func(a *TalosProxmoxClusterArgs) {
		a.Flux = &Flux{GitRepository: FluxGitRepository{Url: "ssh://git@git.example.com/me/fleet"}, KnownHosts: testKnownHosts}
		f(a.Flux)
	}
}
