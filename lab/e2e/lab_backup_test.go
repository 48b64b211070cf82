//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	etcdsnapshot "go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// singleControlPlane is one control plane on pve1 and one worker on pve2, with static addresses;
// backup is inserted under the component's properties (indented by six spaces) as it is.
func singleControlPlane(l *lab.Lab, name, backup string) string {
	return fmt.Sprintf(`name: %[1]s
runtime: yaml
config:
  factoryUrl:
    type: string
resources:
  %[1]s:
    type: talos-proxmox:index:TalosProxmoxCluster
    properties:
      clusterName: %[1]s
      talosVersion: v1.11.5
      kubernetesVersion: v1.33.5
      network:
        gateway: %[2]s
      image:
        factoryUrl: ${factoryUrl}
      nodes:
        cp-1: {hostNode: pve1, role: controlplane, ip: %[3]s}
        worker-1: {hostNode: pve2, role: worker, ip: %[4]s}
%[5]s
outputs:
  kubeconfig: ${%[1]s.kubeconfig}
  talosconfig: ${%[1]s.talosconfig}
  lastEtcdSnapshot: ${%[1]s.lastEtcdSnapshot}
`, name, l.Address(1), l.Address(11), l.Address(21), backup)
}

// keepMe writes the ConfigMap whose survival proves etcd's data survived.
func keepMe(t *testing.T, kc kubernetes.Interface) {
	t.Helper()

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	if _, err := kc.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "keep-me"},
		Data:       map[string]string{"written": "before the change"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// keptMe fails the test unless the ConfigMap keepMe wrote is there, through a kubeconfig output.
func keptMe(t *testing.T, p *lab.Pulumi) {
	t.Helper()

	kc := kubeClient(t, mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets"))

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	cm, err := kc.CoreV1().ConfigMaps("default").Get(ctx, "keep-me", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the ConfigMap written before the change is gone: %v", err)
	}

	if cm.Data["written"] != "before the change" {
		t.Errorf("the ConfigMap changed: %v", cm.Data)
	}
}

// snapshotOutput is the lastEtcdSnapshot output.
type snapshotOutput struct {
	Location string `json:"location"`
	Revision int64  `json:"revision"`
	Size     int64  `json:"size"`
	Sha256   string `json:"sha256"`
	TakenAt  string `json:"takenAt"`
}

func lastSnapshot(t *testing.T, p *lab.Pulumi) snapshotOutput {
	t.Helper()

	var out snapshotOutput
	if err := json.Unmarshal([]byte(mustRun(t, p, "stack", "output", "lastEtcdSnapshot", "--json")), &out); err != nil {
		t.Fatalf("lastEtcdSnapshot: %v", err)
	}

	return out
}

// TestReplacingTheOnlyControlPlane moves the only control plane of a running cluster to another
// Proxmox host. Without etcdBackup the preview refuses, naming the change and the three ways
// out; with etcdBackup to a directory, the up snapshots etcd before the VM goes, and the new VM
// bootstraps etcd from that snapshot: the ConfigMap written before is still there.
func TestReplacingTheOnlyControlPlane(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	e := newEnv(t)
	dir := t.TempDir()
	l, p := onLab(t, e, lab.Options{Subnet: 61}, func(l *lab.Lab) string { return singleControlPlane(l, "solo", "") })

	mustRun(t, p, "up", "--yes", "--skip-preview")
	keepMe(t, kubeClient(t, mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets")))

	editProgram(t, e, "cp-1: {hostNode: pve1", "cp-1: {hostNode: pve2")

	out, err := p.Run(t.Context(), "preview")
	if err == nil {
		t.Fatalf("the preview of replacing the only control plane without a backup passed:\n%s", out)
	}

	for _, want := range []string{
		"replaces control plane cp-1 (its VM moves from Proxmox host pve1 to pve2)",
		"no control plane of the running cluster would keep etcd's data",
		"configure etcdBackup", "recovery.fromSnapshot", "allowDataLoss: true",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}

	if strings.Contains(out, "context canceled") || !strings.Contains(out, "invalid TalosProxmoxCluster inputs (1 problem)") {
		t.Errorf("the refusal is not the only error:\n%s", out)
	}

	editProgram(t, e, "      nodes:\n", fmt.Sprintf("      etcdBackup:\n        destination: file://%s\n      nodes:\n", dir))

	start := time.Now()

	out = mustRun(t, p, "up", "--yes", "--skip-preview")
	for _, want := range []string{"etcd snapshot", "bootstrapping etcd from it"} {
		if !strings.Contains(out, want) {
			t.Errorf("the up does not say %q:\n%s", want, out)
		}
	}

	keptMe(t, p)

	snap := lastSnapshot(t, p)
	if !strings.HasPrefix(snap.Location, "file://"+dir+"/solo/etcd-") || snap.Revision == 0 || snap.Size == 0 || len(snap.Sha256) != 64 {
		t.Errorf("lastEtcdSnapshot: %+v", snap)
	}

	files, _ := filepath.Glob(filepath.Join(dir, "solo", "etcd-*.snapshot"))
	if len(files) != 1 {
		t.Errorf("snapshots in the destination: %v, want one", files)
	}

	// The snapshot came before the old VM went down, the recovering bootstrap after the new one
	// booted.
	r := eventsSince(l, t, start)
	snapshotAt, recoverAt := r.first(snapshotCompleted), r.first(func(ev talosemu.Event) bool {
		return ev.Kind == "bootstrap" && strings.HasPrefix(ev.Detail, "recover")
	})

	if snapshotAt < 0 || recoverAt < snapshotAt {
		t.Errorf("no snapshot before a recovering bootstrap:\n%s", r)
	}

	if vm := vmOf(l, "cp-1"); vm.Node != "pve2" {
		t.Errorf("cp-1's VM: %+v", vm)
	}

	mustRun(t, p, "preview", "--expect-no-changes")

	// The lab keeps nothing the product does not: moved back without a backup, with
	// allowDataLoss, the new VM starts an empty etcd and the ConfigMap is gone.
	editProgram(t, e, fmt.Sprintf("      etcdBackup:\n        destination: file://%s\n", dir), "      allowDataLoss: true\n")
	editProgram(t, e, "cp-1: {hostNode: pve2", "cp-1: {hostNode: pve1")
	mustRun(t, p, "up", "--yes", "--skip-preview")

	kc := kubeClient(t, mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets"))
	if _, err := kc.CoreV1().ConfigMaps("default").Get(t.Context(), "keep-me", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after a replacement with allowDataLoss the ConfigMap is still there (%v): the lab kept etcd's data", err)
	}
}

// TestEtcdBackupToS3AndDisasterRecovery is a cluster of three control planes and a worker whose
// snapshots go to an S3 bucket (versitygw), age-encrypted:
//   - a Talos upgrade writes exactly one snapshot, before the first node goes down; the object is
//     age ciphertext that decrypts to a snapshot of the revision lastEtcdSnapshot gives;
//   - snapshotNow takes one per change; with keep 10, after 12 snapshots 10 remain and another
//     cluster's object and a foreign object are untouched;
//   - every control plane VM is stopped and deleted through the Proxmox API; an up with a
//     corrupted snapshot as recovery.fromSnapshot fails before any VM is created or deleted; with
//     the last snapshot it brings the cluster back: the ConfigMap is there, etcd has 3 members and
//     the health gate passed.
func TestEtcdBackupToS3AndDisasterRecovery(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home, backend and S3 server

	s3 := startS3(t, "backups")

	identity, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}

	e := newEnv(t)
	l, p := onLab(t, e, lab.Options{Subnet: 62}, func(l *lab.Lab) string {
		program := haCluster(l, "vault", "v1.11.5")
		program = strings.Replace(program, "        worker-2: {hostNode: pve2, role: worker, ip: "+l.Address(22)+"}\n", "", 1)
		program = strings.Replace(program, "      nodes:\n", fmt.Sprintf(`      etcdBackup:
        destination: s3://backups/etcd?endpoint=%s&region=us-east-1&s3ForcePathStyle=true
        ageRecipients: [%s]
        keep: 10
        snapshotNow: "0"
      nodes:
`, s3.Endpoint, identity.Recipient()), 1)

		return program + "  lastEtcdSnapshot: ${vault.lastEtcdSnapshot}\n"
	})
	p.Env = append(p.Env, "AWS_ACCESS_KEY_ID="+s3.AccessKey, "AWS_SECRET_ACCESS_KEY="+s3.SecretKey, "AWS_REGION=us-east-1")

	mustRun(t, p, "up", "--yes", "--skip-preview")

	if objs := s3Objects(t, s3, "backups", "etcd/vault/"); len(objs) != 0 {
		t.Errorf("a new cluster wrote snapshots: %v", objs)
	}

	keepMe(t, kubeClient(t, mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets")))

	// A Talos upgrade: one snapshot, before the first node goes down.
	setTalosVersion(t, e, "v1.11.5", "v1.11.6")

	start := time.Now()
	mustRun(t, p, "up", "--yes", "--skip-preview")

	objs := s3Objects(t, s3, "backups", "etcd/vault/")
	if len(objs) != 1 {
		t.Fatalf("the upgrade wrote %d snapshots, want 1: %v", len(objs), objs)
	}

	r := eventsSince(l, t, start)
	snapshotAt, downAt := r.first(snapshotCompleted), r.first(func(ev talosemu.Event) bool { return ev.Kind == "down" })

	if snapshotAt < 0 || downAt < 0 || snapshotAt > downAt {
		t.Errorf("the snapshot (event %d) did not come before the first node went down (event %d):\n%s", snapshotAt, downAt, r)
	}

	snap := lastSnapshot(t, p)
	object := filepath.Join(s3.Root, "backups", objs[0])

	ciphertext, err := os.ReadFile(object)
	if err != nil {
		t.Fatal(err)
	}

	if !bytes.HasPrefix(ciphertext, []byte("age-encryption.org/v1\n")) {
		t.Fatalf("the object %s is not age ciphertext", objs[0])
	}

	decrypted, err := age.Decrypt(bytes.NewReader(ciphertext), identity)
	if err != nil {
		t.Fatalf("decrypting %s: %v", objs[0], err)
	}

	plain, err := io.ReadAll(decrypted)
	if err != nil {
		t.Fatalf("decrypting %s: %v", objs[0], err)
	}

	if rev := snapshotRevision(t, plain); rev != snap.Revision || rev == 0 {
		t.Errorf("the snapshot's revision is %d, lastEtcdSnapshot says %d", rev, snap.Revision)
	}

	if !strings.HasSuffix(strings.SplitN(snap.Location, "?", 2)[0], objs[0]) {
		t.Errorf("lastEtcdSnapshot.location %s is not the object %s", snap.Location, objs[0])
	}

	// keep: two objects that are not this cluster's stay; 12 snapshots leave 10.
	for _, foreign := range []string{"etcd/other/etcd-20200101T000000Z-r1.snapshot", "etcd/vault/notes.txt"} {
		writeS3Object(t, s3, "backups", foreign, "not ours")
	}

	for i := 1; i <= 11; i++ {
		editProgram(t, e, fmt.Sprintf("snapshotNow: \"%d\"", i-1), fmt.Sprintf("snapshotNow: \"%d\"", i))
		mustRun(t, p, "up", "--yes", "--skip-preview")
	}

	objs = s3Objects(t, s3, "backups", "etcd/vault/")
	ours := slices.DeleteFunc(slices.Clone(objs), func(o string) bool { return !strings.HasSuffix(o, ".snapshot.age") })

	if len(ours) != 10 || !slices.Contains(objs, "etcd/vault/notes.txt") ||
		!slices.Contains(s3Objects(t, s3, "backups", "etcd/other/"), "etcd/other/etcd-20200101T000000Z-r1.snapshot") {
		t.Errorf("after 12 snapshots with keep 10: %v (others: %v)", objs, s3Objects(t, s3, "backups", "etcd/other/"))
	}

	// Disaster: every control plane VM is gone.
	last := lastSnapshot(t, p)

	for _, cp := range []string{"cp-1", "cp-2", "cp-3"} {
		deleteVM(t, l, cp)
	}

	vmsBefore := vmNames(l)

	// A corrupted snapshot (the last one, truncated) fails the up before any VM is created or
	// deleted.
	u, err := url.Parse(last.Location)
	if err != nil {
		t.Fatal(err)
	}

	good, err := os.ReadFile(filepath.Join(s3.Root, "backups", u.Path))
	if err != nil {
		t.Fatal(err)
	}

	corrupt := strings.Replace(strings.TrimPrefix(u.Path, "/"), ".snapshot.age", "-corrupt.snapshot.age", 1)
	writeS3Object(t, s3, "backups", corrupt, string(good[:len(good)*2/3]))

	mustRun(t, p, "config", "set", "--secret", "ageIdentity", identity.String())
	editProgram(t, e, "config:\n", "config:\n  ageIdentity:\n    type: string\n    secret: true\n  fromSnapshot:\n    type: string\n")
	editProgram(t, e, "      nodes:\n", "      recovery:\n        fromSnapshot: ${fromSnapshot}\n        ageIdentity: ${ageIdentity}\n      nodes:\n")

	u.Path = "/" + corrupt
	mustRun(t, p, "config", "set", "fromSnapshot", u.String())

	out, err := p.Run(t.Context(), "up", "--yes", "--skip-preview", "--refresh")
	if err == nil {
		t.Fatalf("the up from a corrupted snapshot passed:\n%s", out)
	}

	if !strings.Contains(out, "recovery.fromSnapshot") {
		t.Errorf("the failure does not name recovery.fromSnapshot:\n%s", out)
	}

	if got := vmNames(l); !slices.Equal(got, vmsBefore) {
		t.Errorf("the failed up changed the VMs: %v → %v", vmsBefore, got)
	}

	mustRun(t, p, "config", "set", "fromSnapshot", last.Location)

	out = mustRun(t, p, "up", "--yes", "--skip-preview", "--refresh")
	if !strings.Contains(out, "bootstrapping etcd from it") || !strings.Contains(out, "the cluster is healthy (4 nodes") {
		t.Errorf("the recovery up does not say it restored and passed the gate:\n%s", out)
	}

	keptMe(t, p)

	if got := etcdMemberNames(t, p, l.Address(11)); !slices.Equal(got, []string{"cp-1", "cp-2", "cp-3"}) {
		t.Errorf("etcd members after the recovery: %v", got)
	}
}

// deleteVM stops and deletes a VM through the Proxmox API, as losing its host and disk would.
func deleteVM(t *testing.T, l *lab.Lab, name string) {
	t.Helper()

	stopVM(t, l, name)

	vm := vmOf(l, name)
	req := httptest.NewRequest(http.MethodDelete, fmt.Sprintf("/api2/json/nodes/%s/qemu/%d?purge=1", vm.Node, vm.VMID), nil)
	req.Header.Set("Authorization", "PVEAPIToken="+l.APIToken())

	w := httptest.NewRecorder()
	l.PVE.ServeHTTP(w, req)

	if w.Code != http.StatusOK {
		t.Fatalf("deleting %s: %d %s", name, w.Code, w.Body)
	}

	deadline := time.Now().Add(30 * time.Second)
	for slices.Contains(vmNames(l), name) {
		if time.Now().After(deadline) {
			t.Fatalf("%s's VM is still there after its delete", name)
		}

		time.Sleep(50 * time.Millisecond)
	}
}

func vmNames(l *lab.Lab) []string {
	var names []string
	for _, vm := range l.PVE.VMs() {
		names = append(names, vm.Name)
	}

	slices.Sort(names)

	return names
}

// s3Objects lists the keys under prefix in bucket, through the posix backend's directory.
func s3Objects(t *testing.T, s *s3Server, bucket, prefix string) []string {
	t.Helper()

	root := filepath.Join(s.Root, bucket)

	var keys []string

	_ = filepath.Walk(filepath.Join(root, prefix), func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			rel, _ := filepath.Rel(root, path)
			keys = append(keys, filepath.ToSlash(rel))
		}

		return nil
	})

	slices.Sort(keys)

	return keys
}

// writeS3Object puts an object (without metadata) into the posix backend's directory, where
// the gateway serves it from.
func writeS3Object(t *testing.T, s *s3Server, bucket, key, body string) {
	t.Helper()

	path := filepath.Join(s.Root, bucket, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// snapshotRevision is the revision etcd's own snapshot status reads from a snapshot.
func snapshotRevision(t *testing.T, snapshot []byte) int64 {
	t.Helper()

	path := filepath.Join(t.TempDir(), "etcd.snapshot")
	if err := os.WriteFile(path, snapshot, 0o600); err != nil {
		t.Fatal(err)
	}

	st, err := etcdsnapshot.NewV3(zap.NewNop()).Status(path)
	if err != nil {
		t.Fatalf("etcd snapshot status: %v", err)
	}

	return st.Revision
}

// snapshotCompleted is the lab's event of a snapshot streamed whole.
func snapshotCompleted(ev talosemu.Event) bool {
	return ev.Kind == "etcd-snapshot" && ev.Detail == "completed"
}

// first is the index of the first event that matches, -1 when none does.
func (r rollout) first(match func(talosemu.Event) bool) int {
	return slices.IndexFunc(r.events, match)
}
