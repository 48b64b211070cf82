package ccmemu_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/ccmemu"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pvefake"
)

const (
	ccmToken  = "talos-cloud-ccm@pve!ccm"
	ccmSecret = "0b7f6c1e-4a5d-4e8f-9c2b-1d3e5f7a9b0c"
	region    = "cloud"
)

// proxmox is a fake PVE whose token ccmToken (privilege separated) has VM.Audit on the VMs
// auditVMs, and VMs created through root's token.
type proxmox struct {
	t      *testing.T
	srv    *pvefake.Server
	events chan pvefake.Event
	http   *http.Client
}

func startProxmox(t *testing.T, auditVMs ...int) *proxmox {
	t.Helper()

	acc := &pvefake.Access{
		Users:  []pvefake.User{{ID: "talos-cloud-ccm@pve"}},
		Tokens: []pvefake.Token{{ID: ccmToken, Secret: ccmSecret, Privsep: true}},
		Roles:  []pvefake.Role{{ID: "TalosCCM", Privs: []string{"VM.Audit"}}},
	}

	for _, id := range auditVMs {
		for _, ugid := range []string{"talos-cloud-ccm@pve", ccmToken} {
			acc.ACL = append(acc.ACL, pvefake.ACL{Path: fmt.Sprintf("/vms/%d", id), Role: "TalosCCM", UGID: ugid, Propagate: true})
		}
	}

	p := &proxmox{t: t, events: make(chan pvefake.Event, 64), http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}, //nolint:gosec // the fake's self-signed certificate
	}}}

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	srv, err := pvefake.Start(ctx, pvefake.Options{
		Nodes: []string{"pve1", "pve2"}, Version: "9.1.3", Access: acc,
		Tokens:  map[string]string{pvefake.DefaultTokenID: pvefake.DefaultTokenSecret},
		OnEvent: func(e pvefake.Event) { p.events <- e },
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = srv.Close() })
	p.srv = srv

	return p
}

// root calls the API with root's token and returns the data.
func (p *proxmox) root(method, path string, form url.Values) any {
	p.t.Helper()

	req, err := http.NewRequest(method, p.srv.URL()+"/api2/json/"+path, strings.NewReader(form.Encode()))
	if err != nil {
		p.t.Fatal(err)
	}

	req.Header.Set("Authorization", "PVEAPIToken="+p.srv.APIToken())
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")

	res, err := p.http.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()

	var body struct{ Data any }
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != http.StatusOK {
		p.t.Fatalf("%s %s: %s %v", method, path, res.Status, err)
	}

	return body.Data
}

// waitEvent waits for the fake's event of typ for vmid.
func (p *proxmox) waitEvent(typ pvefake.EventType, vmid int) {
	p.t.Helper()

	timeout := time.After(10 * time.Second)

	for {
		select {
		case e := <-p.events:
			if e.Type == typ && e.VMID == vmid {
				return
			}
		case <-timeout:
			p.t.Fatalf("no %s event for VM %d", typ, vmid)
		}
	}
}

// createVM creates (and starts) a VM and returns its smbios1 uuid.
func (p *proxmox) createVM(node string, vmid int, name string, extra ...string) string {
	p.t.Helper()

	form := url.Values{"vmid": {fmt.Sprint(vmid)}, "name": {name}, "cores": {"2"}, "memory": {"4096"}, "start": {"1"}}
	for i := 0; i+1 < len(extra); i += 2 {
		form.Set(extra[i], extra[i+1])
	}

	p.root(http.MethodPost, "nodes/"+node+"/qemu", form)
	p.waitEvent(pvefake.EventStarted, vmid)

	vm, _ := p.srv.VM(vmid)
	for kv := range strings.SplitSeq(vm.Config["smbios1"], ",") {
		if v, ok := strings.CutPrefix(kv, "uuid="); ok {
			return v
		}
	}

	p.t.Fatalf("VM %d has no smbios1 uuid: %q", vmid, vm.Config["smbios1"])

	return ""
}

// cloudConfig is the CCM's config.yaml for the fake and token.
func (p *proxmox) cloudConfig(secret string) string {
	return fmt.Sprintf("clusters:\n- url: %s/api2/json\n  insecure: true\n  token_id: %s\n  token_secret: %s\n  region: %s\n",
		p.srv.URL(), ccmToken, secret, region)
}

// ccmPod is the chart's pod (useDaemonSet, existingConfigSecret proxmox-ccm) on node.
func ccmPod(node string, extraArgs ...string) *corev1.Pod {
	args := append([]string{
		"--v=2", "--cloud-provider=proxmox", "--cloud-config=/etc/proxmox/config.yaml",
		"--controllers=cloud-node,cloud-node-lifecycle", "--leader-elect-resource-name=cloud-controller-manager-proxmox",
		"--use-service-account-credentials", "--secure-port=10258",
	}, extraArgs...)

	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "proxmox-cloud-controller-manager-x1", Namespace: "kube-system", UID: "ccm-pod-1"},
		Spec: corev1.PodSpec{
			NodeName: node, HostNetwork: true,
			Containers: []corev1.Container{{
				Name: "proxmox-cloud-controller-manager", Image: ccmemu.Image + ":v0.13.1", Args: args,
				VolumeMounts: []corev1.VolumeMount{{Name: "cloud-config", MountPath: "/etc/proxmox", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "cloud-config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: "proxmox-ccm", Items: []corev1.KeyToPath{{Key: "config.yaml", Path: "config.yaml"}},
			}}}},
			Tolerations: []corev1.Toleration{{Key: ccmemu.UninitializedTaint, Operator: corev1.TolerationOpExists}},
		},
	}
}

func configSecret(content string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "proxmox-ccm", Namespace: "kube-system"},
		Data:       map[string][]byte{"config.yaml": []byte(content)},
	}
}

// kubeletNode is a Node as a kubelet with --cloud-provider=external registers it: the
// uninitialized taint, its node IP announced, its system UUID; Ready.
func kubeletNode(name, providerID, systemUUID, ip string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"alpha.kubernetes.io/provided-node-ip": ip}},
		Spec: corev1.NodeSpec{ProviderID: providerID, Taints: []corev1.Taint{
			{Key: ccmemu.UninitializedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		}},
		Status: corev1.NodeStatus{
			NodeInfo:   corev1.NodeSystemInfo{SystemUUID: systemUUID},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

func initialized(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == ccmemu.UninitializedTaint {
			return false
		}
	}

	return true
}

// waitNode waits until the Node satisfies cond (nil node: deleted).
func waitNode(t *testing.T, client kubernetes.Interface, name string, cond func(*corev1.Node) bool) *corev1.Node {
	t.Helper()

	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()

	w, err := client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		n = nil
	} else if err != nil {
		t.Fatal(err)
	}

	for !cond(n) {
		select {
		case e := <-w.ResultChan():
			switch obj, _ := e.Object.(*corev1.Node); {
			case e.Type == watch.Deleted:
				n = nil
			case obj != nil && obj.Name == name:
				n = obj
			}
		case <-ctx.Done():
			t.Fatalf("node %s: condition not met; last %+v", name, n)
		}
	}

	return n
}

// logs collects log lines and tells who waits for one.
type logs struct {
	t     *testing.T
	mu    sync.Mutex
	lines []string
	added chan struct{}
}

func newLogs(t *testing.T) *logs { return &logs{t: t, added: make(chan struct{}, 1)} }

func (l *logs) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)

	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()

	l.t.Log(line)

	select {
	case l.added <- struct{}{}:
	default:
	}
}

// wait waits for a line containing every part.
func (l *logs) wait(parts ...string) string {
	l.t.Helper()

	timeout := time.After(15 * time.Second)

	for {
		l.mu.Lock()
		for _, line := range l.lines {
			if containsAll(line, parts) {
				l.mu.Unlock()

				return line
			}
		}
		l.mu.Unlock()

		select {
		case <-l.added:
		case <-timeout:
			l.t.Fatalf("no log line with %q", parts)
		}
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}

	return true
}

// run runs the CCM's container for pod until the test ends (or the returned stop is called,
// which waits for it to return).
func run(t *testing.T, client kubernetes.Interface, pod *corev1.Pod, l *logs) (stop func()) {
	t.Helper()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})

	go func() {
		defer close(done)
		ccmemu.Run(ctx, client, pod, pod.Spec.Containers[0], l.logf)
	}()

	stop = func() {
		cancel()

		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the CCM did not stop")
		}
	}
	t.Cleanup(stop)

	return stop
}
