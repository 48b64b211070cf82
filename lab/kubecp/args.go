package kubecp

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"time"
)

// apiserverArgs are Talos' kube-apiserver flags (control_plane_static_pod.go) with the lab's
// files and addresses, minus audit logging, encryption at rest and profiling; API priority and
// fairness is off (it only costs start time and memory here).
func (cp *ControlPlane) apiserverArgs() []string {
	o := &cp.opts
	host, port, _ := net.SplitHostPort(cp.endpoint)
	issuer := "https://" + cp.endpoint
	evict := fmt.Sprint(int64(o.PodEvictionTimeout.Round(time.Second) / time.Second))

	args := []string{
		"--bind-address=" + host,
		"--secure-port=" + port,
		"--advertise-address=" + o.AdvertiseIP.String(),
		"--tls-cert-file=" + cp.path(fileAPIServerCrt),
		"--tls-private-key-file=" + cp.path(fileAPIServerKey),
		"--tls-min-version=VersionTLS12",
		"--client-ca-file=" + cp.path(fileCA),
		"--anonymous-auth=false",
		"--enable-bootstrap-token-auth=true",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--api-audiences=" + issuer,
		"--service-account-issuer=" + issuer,
		"--service-account-key-file=" + cp.path(fileServiceAccountPub),
		"--service-account-signing-key-file=" + cp.path(fileServiceAccountKey),
		"--service-cluster-ip-range=" + o.ServiceCIDR,
		"--etcd-servers=" + strings.Join(o.EtcdEndpoints, ","),
		"--etcd-cafile=" + cp.path(fileEtcdCA),
		"--etcd-certfile=" + cp.path(fileEtcdClientCrt),
		"--etcd-keyfile=" + cp.path(fileEtcdClientKey),
		"--kubelet-client-certificate=" + cp.path(fileKubeletClientCrt),
		"--kubelet-client-key=" + cp.path(fileKubeletClientKey),
		"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
		"--default-not-ready-toleration-seconds=" + evict,
		"--default-unreachable-toleration-seconds=" + evict,
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--cert-dir=" + cp.path("pki"),
	}

	// The `kubernetes` service's endpoints point at the advertised address; Kubernetes refuses
	// loopback endpoints (and the apiserver then refuses to start), so with the default
	// advertised address (the endpoint's, on 127/8) nothing maintains them.
	if o.AdvertiseIP.IsLoopback() {
		args = append(args, "--endpoint-reconciler-type=none")
	}

	if o.AggregatorCA != nil {
		args = append(args,
			"--requestheader-client-ca-file="+cp.path(fileAggregatorCA),
			"--requestheader-allowed-names="+frontProxyCN,
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-username-headers=X-Remote-User",
			"--proxy-client-cert-file="+cp.path(fileFrontProxyCrt),
			"--proxy-client-key-file="+cp.path(fileFrontProxyKey),
		)
	}

	return args
}

// controllerManagerArgs are Talos' kube-controller-manager flags without leader election (one
// instance per cluster, and a restarted one must not wait for its predecessor's lease) and
// without serving (--secure-port=0: nothing to collide between clusters), with the lab's
// node monitoring periods.
func (cp *ControlPlane) controllerManagerArgs() []string {
	o := &cp.opts
	grace := o.NodeMonitorGracePeriod
	// The node lifecycle controller checks nodes every period; several checks per grace period
	// keep the time to NotReady close to the grace period.
	period := max(grace/4, time.Second)

	args := []string{
		"--kubeconfig=" + cp.path(fileControllerKubeconfig),
		"--secure-port=0",
		"--leader-elect=false",
		"--controllers=*,tokencleaner",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + cp.path(fileServiceAccountKey),
		"--root-ca-file=" + cp.path(fileCA),
		"--cluster-signing-cert-file=" + cp.path(fileCA),
		"--cluster-signing-key-file=" + cp.path(fileCAKey),
		"--allocate-node-cidrs=true",
		"--cluster-cidr=" + o.PodCIDR,
		"--service-cluster-ip-range=" + o.ServiceCIDR,
		"--configure-cloud-routes=false",
		"--node-monitor-grace-period=" + grace.String(),
		"--node-monitor-period=" + period.String(),
		"--node-startup-grace-period=" + (2 * grace).String(),
		// Starting ~40 controllers makes hundreds of discovery and list calls; at the default
		// client budget (20/s) that alone takes seconds before the first DaemonSet pod exists.
		"--kube-api-qps=200",
		"--kube-api-burst=400",
		"--profiling=false",
	}

	// As Talos passes them: only for the families the pod CIDRs have (the controller-manager
	// refuses a family's flag without it).
	v4, v6 := false, false

	for _, c := range strings.Split(o.PodCIDR, ",") {
		if p, err := netip.ParsePrefix(strings.TrimSpace(c)); err == nil {
			v4, v6 = v4 || p.Addr().Is4(), v6 || p.Addr().Is6()
		}
	}

	if v4 && o.NodeCIDRMaskSizeIPv4 > 0 {
		args = append(args, fmt.Sprintf("--node-cidr-mask-size-ipv4=%d", o.NodeCIDRMaskSizeIPv4))
	}

	if v6 && o.NodeCIDRMaskSizeIPv6 > 0 {
		args = append(args, fmt.Sprintf("--node-cidr-mask-size-ipv6=%d", o.NodeCIDRMaskSizeIPv6))
	}

	return args
}

// schedulerArgs: the scheduler with its default profile, without leader election and serving.
func (cp *ControlPlane) schedulerArgs() []string {
	return []string{
		"--kubeconfig=" + cp.path(fileSchedulerKubeconfig),
		"--secure-port=0",
		"--leader-elect=false",
		"--profiling=false",
	}
}

// path is the absolute path of one of the control plane's files (Dir is absolute).
func (cp *ControlPlane) path(name string) string {
	return filepath.Join(cp.opts.Dir, filepath.FromSlash(name))
}
