// Package ccmemu is the lab's stand-in for the process of the Proxmox cloud controller manager's
// container (sergelogvinov/proxmox-cloud-controller-manager v0.13.1, image Image): an emulated
// kubelet (lab/kubeletemu, Options.Containers) runs Run while a pod of that image runs on its
// node, and Run does what the container does, with only what the pod has.
//
//   - Its flags (the container's command and args): --cloud-config, --controllers (cloud-node and
//     cloud-node-lifecycle are emulated; the chart enables these two), --leader-elect and its
//     resource name, namespace and durations, --node-monitor-period and
//     --node-status-update-frequency.
//   - Its cloud config, the file --cloud-config names, read from the Secret the pod's volume
//     mounted there projects (items key, or the file's name), through the API server as the
//     kubelet mounts it. Without the Secret, or with a config the CCM refuses (ReadCloudConfig's
//     checks), the process does not start ("crash-looping"): it says why and starts once the
//     Secret changes.
//   - Its Proxmox API clients, one per configured cluster (region), as go-proxmox makes them:
//     Authorization PVEAPIToken=<token_id>=<token_secret>, the url as the base, insecure skipping
//     TLS verification; GET /cluster/resources?type=vm cached 5 s, as go-proxmox does.
//   - Leader election on the Lease --leader-elect-resource-name in kube-system (the chart's
//     cloud-controller-manager-proxmox), identity <hostname>_<uuid>, never released: a new
//     pod waits for a dead leader's lease to expire, as the real one does.
//   - Once leading, Initialize: GET /version and GET /cluster/resources?type=vm per cluster
//     (failures only logged), then the controllers.
//   - cloud-node: every Node with the uninitialized taint is initialized as k8s.io/cloud-provider's
//     cloud node controller does with the Proxmox CCM's InstanceMetadata (pkg/proxmox
//     instances.go): the VM is found by the Node's providerID proxmox://<region>/<vmid> (the
//     region must be a configured cluster's) or else by name among the VMs the token sees
//     (whose SMBIOS uuid must be the Node's systemUUID), then GET status/current and config of the
//     VM (its smbios1 uuid must be the Node's systemUUID, its name must start with the Node's);
//     then providerID, labels (instance type from the smbios1 sku or <cpus>VCPU-<GiB>GB, zone =
//     the Proxmox node, region, the beta labels and topology.proxmox.sinextra.dev/*), the
//     kubelet's provided node IPs as addresses, and the taint removed. A VM the token cannot see
//     (no VM.Audit) is "not found": the Node keeps its taint (the provided node IP matches no
//     address), and the reason is logged; errors are retried with the workqueue's backoff and at
//     every update of the Node.
//   - cloud-node-lifecycle: every --node-monitor-period, a NotReady Node whose VM is not found is
//     deleted, one whose VM is stopped gets the shutdown taint, which a Ready one loses.
//
// Not emulated: user/password and *_file credentials (the process refuses to start, logged),
// network modes qemu and auto (addresses as in the default mode), HA groups (features.ha_group
// fails as with no groups), events, metrics, the periodic label reconciliation of the beta labels.
package ccmemu

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// Image is the repository of the Proxmox CCM's container image.
const Image = "ghcr.io/sergelogvinov/proxmox-cloud-controller-manager"

// Taints of k8s.io/cloud-provider's api package.
const (
	// UninitializedTaint is TaintExternalCloudProvider, which the kubelet registers with.
	UninitializedTaint = "node.cloudprovider.kubernetes.io/uninitialized"
	// ShutdownTaint is TaintNodeShutdown, which cloud-node-lifecycle puts on a stopped VM's Node.
	ShutdownTaint = "node.cloudprovider.kubernetes.io/shutdown"
)

// Run does what the CCM's container does while the pod runs, until ctx ends. client acts for
// the CCM (the lab gives the kubelet's, which may do what the chart's RBAC allows), logf gets the
// CCM's log lines.
func Run(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, container corev1.Container, logf func(string, ...any)) {
	if logf == nil {
		logf = func(string, ...any) {}
	}

	name := pod.Namespace + "/" + pod.Name
	say := func(format string, args ...any) { logf("ccmemu "+name+": "+format, args...) }
	f := parseFlags(append(append([]string{}, container.Command...), container.Args...))

	cfg, ok := waitConfig(ctx, client, pod, container, f.cloudConfig, say)
	if !ok {
		return
	}

	c, err := newCCM(client, cfg, f, say)
	if err != nil {
		say("%v", err)
		<-ctx.Done()

		return
	}

	host := pod.Name
	if pod.Spec.HostNetwork {
		host = pod.Spec.NodeName
	}

	c.run(ctx, host)
}

// flags are the CCM's command-line flags the emulation follows, with their defaults.
type flags struct {
	cloudConfig        string
	controllers        []string
	leaderElect        bool
	leaseName          string
	leaseNamespace     string
	leaseDuration      time.Duration
	renewDeadline      time.Duration
	retryPeriod        time.Duration
	nodeMonitorPeriod  time.Duration
	nodeStatusInterval time.Duration
}

var boolFlags = map[string]bool{"leader-elect": true, "use-service-account-credentials": true, "allow-untagged-cloud": true,
	"configure-cloud-routes": true, "allocate-node-cidrs": true}

func parseFlags(argv []string) flags {
	f := flags{
		controllers: []string{"*"}, leaderElect: true, leaseName: "cloud-controller-manager", leaseNamespace: "kube-system",
		leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: 2 * time.Second,
		nodeMonitorPeriod: 5 * time.Second, nodeStatusInterval: 5 * time.Minute,
	}

	values := map[string]string{}

	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}

		a = strings.TrimLeft(a, "-")
		if k, v, ok := strings.Cut(a, "="); ok {
			values[k] = v
		} else if boolFlags[a] || i+1 >= len(argv) {
			values[a] = "true"
		} else {
			values[a] = argv[i+1]
			i++
		}
	}

	duration := func(key string, d *time.Duration) {
		if v, ok := values[key]; ok {
			if p, err := time.ParseDuration(v); err == nil {
				*d = p
			}
		}
	}

	f.cloudConfig = values["cloud-config"]

	if v, ok := values["controllers"]; ok {
		f.controllers = strings.Split(v, ",")
	}

	if v, ok := values["leader-elect"]; ok {
		f.leaderElect = v != "false" && v != "0"
	}

	if v := values["leader-elect-resource-name"]; v != "" {
		f.leaseName = v
	}

	if v := values["leader-elect-resource-namespace"]; v != "" {
		f.leaseNamespace = v
	}

	duration("leader-elect-lease-duration", &f.leaseDuration)
	duration("leader-elect-renew-deadline", &f.renewDeadline)
	duration("leader-elect-retry-period", &f.retryPeriod)
	duration("node-monitor-period", &f.nodeMonitorPeriod)
	duration("node-status-update-frequency", &f.nodeStatusInterval)

	return f
}

// enabled is whether --controllers runs a controller that is on by default: named, or "*"
// without "-name".
func (f flags) enabled(name string) bool {
	all := false

	for _, c := range f.controllers {
		switch strings.TrimSpace(c) {
		case name:
			return true
		case "-" + name:
			return false
		case "*":
			all = true
		}
	}

	return all
}
