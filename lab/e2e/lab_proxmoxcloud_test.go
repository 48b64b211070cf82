//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// cloudProgram is haCluster with the Proxmox CSI plugin (one default class on local-lvm) and the
// Proxmox CCM, both from the lab's chart repository.
func cloudProgram(l *lab.Lab) string {
	program := haCluster(l, "cloud", "v1.11.5")
	program = strings.Replace(program, "  factoryUrl:\n    type: string\n",
		"  factoryUrl:\n    type: string\n  ciliumRepository:\n    type: string\n", 1)

	return strings.Replace(program, "      network:\n", `      proxmoxCsi:
        repository: ${ciliumRepository}
        storageClasses:
          - {name: proxmox-data, storage: local-lvm, default: true, fsType: xfs}
      proxmoxCcm:
        repository: ${ciliumRepository}
      network:
`, 1)
}

// pveAPI calls the lab's Proxmox API with the token "user!name=secret".
func pveAPI(t *testing.T, l *lab.Lab, token, method, path string, form url.Values) (int, map[string]any) {
	t.Helper()

	req := httptest.NewRequest(method, "/api2/json"+path, strings.NewReader(form.Encode()))
	req.Header.Set("Authorization", "PVEAPIToken="+token)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")

	w := httptest.NewRecorder()
	l.PVE.ServeHTTP(w, req)

	var body map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &body)

	return w.Code, body
}

// cloudConfig is a consumer's cloud config, read from its Secret.
type cloudConfig struct {
	Clusters []struct {
		URL         string `json:"url"`
		TokenID     string `json:"token_id"`
		TokenSecret string `json:"token_secret"`
		Region      string `json:"region"`
	} `json:"clusters"`
}

func readCloudConfig(t *testing.T, kc kubernetes.Interface, namespace, name string) cloudConfig {
	t.Helper()

	s, err := kc.CoreV1().Secrets(namespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Secret %s/%s: %v", namespace, name, err)
	}

	var cfg cloudConfig
	if err := yaml.Unmarshal(s.Data["config.yaml"], &cfg); err != nil || len(cfg.Clusters) != 1 {
		t.Fatalf("the Secret %s/%s's config.yaml: %v %q", namespace, name, err, s.Data["config.yaml"])
	}

	return cfg
}

// rolePrivileges are a role's privileges, read as root.
func rolePrivileges(t *testing.T, l *lab.Lab, role string) []string {
	t.Helper()

	code, body := pveAPI(t, l, l.APIToken(), http.MethodGet, "/access/roles/"+role, nil)
	if code != http.StatusOK {
		return nil
	}

	data, _ := body["data"].(map[string]any)

	var privs []string
	for p, v := range data {
		if fmt.Sprint(v) == "1" {
			privs = append(privs, p)
		}
	}

	slices.Sort(privs)

	return privs
}

// accessEntries are the users (with their tokens) and the ACL entries whose user or token id has
// prefix, read as root.
func accessEntries(t *testing.T, l *lab.Lab, prefix string) (users []string, acls []string) {
	t.Helper()

	_, body := pveAPI(t, l, l.APIToken(), http.MethodGet, "/access/users?full=1", nil)
	list, _ := body["data"].([]any)

	for _, u := range list {
		m, _ := u.(map[string]any)
		if id, _ := m["userid"].(string); strings.HasPrefix(id, prefix) {
			users = append(users, id)

			toks, _ := m["tokens"].([]any)
			for _, tk := range toks {
				tm, _ := tk.(map[string]any)
				users = append(users, fmt.Sprintf("%s!%v", id, tm["tokenid"]))
			}
		}
	}

	_, body = pveAPI(t, l, l.APIToken(), http.MethodGet, "/access/acl", nil)
	list, _ = body["data"].([]any)

	for _, a := range list {
		m, _ := a.(map[string]any)
		if id, _ := m["ugid"].(string); strings.HasPrefix(id, prefix) {
			acls = append(acls, fmt.Sprintf("%v %s %v", m["path"], id, m["roleid"]))
		}
	}

	slices.Sort(users)
	slices.Sort(acls)

	return users, acls
}

// TestProxmoxCSIAndCCM: proxmoxCsi and proxmoxCcm make, through the bridged proxmoxve provider
// against the lab's Proxmox API (which enforces roles, separated tokens and ACLs as PVE does),
// a role per consumer with exactly its documented privileges, a user and a separated token with
// ACLs on each node's VM and the class's datastore; the CSI's token, read back from its Secret in
// the cluster, allocates a disk on the datastore as the plugin does for a new volume and attaches
// it to a node's VM, and is refused on a datastore it was not given. The StorageClass and the
// charts' workloads are in the API server; every Node carries the topology labels and the provider
// ID of its VM, and the CCM (the lab's stand-in of its container, which reaches the lab's Proxmox
// API with the token from its Secret) initialized it: the uninitialized taint is gone. A
// new tokenRotation replaces the CSI's token (the Secret follows; the old token is gone), and
// destroy removes every role, user, token and ACL.
func TestProxmoxCSIAndCCM(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	e := newEnv(t)
	l, p := onLab(t, e, lab.Options{Subnet: 71}, cloudProgram)

	mustRun(t, p, "up", "--yes", "--skip-preview")

	if got, want := rolePrivileges(t, l, "talos-cloud-csi"),
		[]string{"Datastore.Allocate", "Datastore.AllocateSpace", "Datastore.Audit", "VM.Audit", "VM.Config.Disk"}; !slices.Equal(got, want) {
		t.Errorf("the CSI role's privileges: %v, want %v", got, want)
	}

	if got := rolePrivileges(t, l, "talos-cloud-ccm"); !slices.Equal(got, []string{"VM.Audit"}) {
		t.Errorf("the CCM role's privileges: %v, want [VM.Audit]", got)
	}

	vmIDs := map[string]int{}
	for _, vm := range l.PVE.VMs() {
		vmIDs[vm.Name] = vm.VMID
	}

	users, acls := accessEntries(t, l, "talos-cloud-")
	if want := []string{"talos-cloud-ccm@pve", "talos-cloud-ccm@pve!ccm", "talos-cloud-csi@pve", "talos-cloud-csi@pve!csi"}; !slices.Equal(users, want) {
		t.Errorf("users and tokens: %v, want %v", users, want)
	}

	var wantACLs []string
	for _, id := range vmIDs {
		for _, who := range []string{"talos-cloud-csi@pve", "talos-cloud-csi@pve!csi"} {
			wantACLs = append(wantACLs, fmt.Sprintf("/vms/%d %s talos-cloud-csi", id, who))
		}

		for _, who := range []string{"talos-cloud-ccm@pve", "talos-cloud-ccm@pve!ccm"} {
			wantACLs = append(wantACLs, fmt.Sprintf("/vms/%d %s talos-cloud-ccm", id, who))
		}
	}

	wantACLs = append(wantACLs, "/storage/local-lvm talos-cloud-csi@pve talos-cloud-csi", "/storage/local-lvm talos-cloud-csi@pve!csi talos-cloud-csi")
	slices.Sort(wantACLs)

	if !slices.Equal(acls, wantACLs) {
		t.Errorf("ACLs:\n%s\nwant:\n%s", strings.Join(acls, "\n"), strings.Join(wantACLs, "\n"))
	}

	kc := kubeClient(t, mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets"))

	csi := readCloudConfig(t, kc, "csi-proxmox", "talos-proxmox-csi").Clusters[0]
	if csi.TokenID != "talos-cloud-csi@pve!csi" || csi.Region != "cloud" || !strings.HasSuffix(csi.URL, "/api2/json") {
		t.Errorf("the CSI's cloud config: %+v", csi)
	}

	ccm := readCloudConfig(t, kc, "kube-system", "talos-proxmox-ccm").Clusters[0]
	if ccm.TokenID != "talos-cloud-ccm@pve!ccm" || ccm.Region != "cloud" {
		t.Errorf("the CCM's cloud config: %+v", ccm)
	}

	wantCSIToken(t, l, csi.TokenID+"="+csi.TokenSecret, vmIDs["worker-1"])

	if code, _ := pveAPI(t, l, ccm.TokenID+"="+ccm.TokenSecret, http.MethodPost, "/nodes/pve1/storage/local-lvm/content",
		url.Values{"vmid": {"9999"}, "filename": {"vm-9999-ccm"}, "size": {"1G"}}); code != http.StatusForbidden {
		t.Errorf("the CCM's token allocated a disk (%d): it holds no datastore privilege", code)
	}

	wantCloudObjects(t, kc, vmIDs)

	// A new rotation value: a new CSI token, in the Secret; the old one is gone.
	editProgram(t, e, "      proxmoxCsi:\n", "      proxmoxCsi:\n        tokenRotation: \"2026-11\"\n")
	mustRun(t, p, "up", "--yes", "--skip-preview")

	rotated := readCloudConfig(t, kc, "csi-proxmox", "talos-proxmox-csi").Clusters[0]
	if rotated.TokenID == csi.TokenID || !strings.HasPrefix(rotated.TokenID, "talos-cloud-csi@pve!csi-") {
		t.Errorf("after the rotation the Secret names the token %q (before: %q)", rotated.TokenID, csi.TokenID)
	}

	if code, _ := pveAPI(t, l, csi.TokenID+"="+csi.TokenSecret, http.MethodGet, "/version", nil); code != http.StatusUnauthorized {
		t.Errorf("the rotated-out token still authenticates (%d)", code)
	}

	wantCSIToken(t, l, rotated.TokenID+"="+rotated.TokenSecret, vmIDs["worker-2"])

	mustRun(t, p, "preview", "--expect-no-changes")
	mustRun(t, p, "destroy", "--yes")

	if users, acls := accessEntries(t, l, "talos-cloud-"); len(users)+len(acls) > 0 {
		t.Errorf("after destroy: users %v, ACLs %v", users, acls)
	}

	for _, role := range []string{"talos-cloud-csi", "talos-cloud-ccm"} {
		if privs := rolePrivileges(t, l, role); privs != nil {
			t.Errorf("after destroy the role %s is there (%v)", role, privs)
		}
	}
}

// wantCSIToken: the token allocates a volume on local-lvm of VM vmid's host for vmid 9999 (the
// plugin's id for a volume not attached yet), attaches it to that VM as the plugin attaches a volume,
// and is refused a disk on a datastore it was not given (local).
func wantCSIToken(t *testing.T, l *lab.Lab, token string, vmid int) {
	t.Helper()

	name := fmt.Sprintf("vm-9999-pvc-%d", vmid)

	vm, ok := l.PVE.VM(vmid)
	if !ok {
		t.Fatalf("no VM %d", vmid)
	}

	code, body := pveAPI(t, l, token, http.MethodPost, "/nodes/"+vm.Node+"/storage/local-lvm/content",
		url.Values{"vmid": {"9999"}, "filename": {name}, "size": {"1G"}})
	if code != http.StatusOK {
		t.Fatalf("the CSI's token could not allocate a volume: %d %v", code, body)
	}

	volid, _ := body["data"].(string)

	if code, body := pveAPI(t, l, token, http.MethodPut, fmt.Sprintf("/nodes/%s/qemu/%d/config", vm.Node, vmid),
		url.Values{"scsi9": {volid + ",backup=0,iothread=0,wwn=0x5056432d49443031"}}); code != http.StatusOK {
		t.Errorf("the CSI's token could not attach %s to VM %d: %d %v", volid, vmid, code, body)
	}

	if code, _ := pveAPI(t, l, token, http.MethodPost, "/nodes/"+vm.Node+"/storage/local/content",
		url.Values{"vmid": {"9999"}, "filename": {name + "-local"}, "size": {"1G"}}); code != http.StatusForbidden {
		t.Errorf("the CSI's token allocated a disk on local (%d), a datastore it was not given", code)
	}
}

// wantCloudObjects: the StorageClass, the charts' workloads and Secrets are in the API server, and
// every Node carries the topology labels and its VM's provider ID, initialized by the CCM.
func wantCloudObjects(t *testing.T, kc kubernetes.Interface, vmIDs map[string]int) {
	t.Helper()

	ctx := t.Context()

	sc, err := kc.StorageV1().StorageClasses().Get(ctx, "proxmox-data", metav1.GetOptions{})
	switch {
	case err != nil:
		t.Errorf("the StorageClass: %v", err)
	case sc.Provisioner != "csi.proxmox.sinextra.dev" || sc.Parameters["storage"] != "local-lvm" ||
		sc.Parameters["csi.storage.k8s.io/fstype"] != "xfs" || sc.Annotations["storageclass.kubernetes.io/is-default-class"] != "true":
		t.Errorf("the StorageClass: provisioner %s, parameters %v, annotations %v", sc.Provisioner, sc.Parameters, sc.Annotations)
	}

	if _, err := kc.AppsV1().Deployments("csi-proxmox").Get(ctx, "proxmox-csi-plugin-controller", metav1.GetOptions{}); err != nil {
		t.Errorf("the CSI controller: %v", err)
	}

	if _, err := kc.AppsV1().DaemonSets("csi-proxmox").Get(ctx, "proxmox-csi-plugin-node", metav1.GetOptions{}); err != nil {
		t.Errorf("the CSI node plugin: %v", err)
	}

	if _, err := kc.AppsV1().Deployments("kube-system").Get(ctx, "proxmox-cloud-controller-manager", metav1.GetOptions{}); err != nil {
		t.Errorf("the CCM: %v", err)
	}

	nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}

	if len(nodes.Items) != len(vmIDs) {
		t.Errorf("%d Nodes, want %d", len(nodes.Items), len(vmIDs))
	}

	hosts := map[string]string{"cp-1": "pve1", "cp-2": "pve2", "cp-3": "pve3", "worker-1": "pve1", "worker-2": "pve2"}

	for _, n := range nodes.Items {
		if n.Labels["topology.kubernetes.io/region"] != "cloud" || n.Labels["topology.kubernetes.io/zone"] != hosts[n.Name] {
			t.Errorf("Node %s: topology labels %v", n.Name, n.Labels)
		}

		if want := fmt.Sprintf("proxmox://cloud/%d", vmIDs[n.Name]); n.Spec.ProviderID != want {
			t.Errorf("Node %s: provider ID %q, want %q", n.Name, n.Spec.ProviderID, want)
		}

		// The CCM (the lab's stand-in of its container, with the token of its Secret) initialized
		// the Node the kubelet registered uninitialized.
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "node.cloudprovider.kubernetes.io/uninitialized" }) ||
			n.Labels["node.kubernetes.io/instance-type"] == "" {
			t.Errorf("Node %s: not initialized by the CCM: taints %v, labels %v", n.Name, n.Spec.Taints, n.Labels)
		}
	}
}
