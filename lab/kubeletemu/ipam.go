package kubeletemu

import (
	"hash/fnv"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// podIP is the pod's IP: the one it has, or the lowest free address of the node's pod CIDR
// (spec.podCIDR, which the controller manager's node IPAM allocates; 10.244.<n>.0/24, n from the
// node's name, until it has one). The network's first two addresses (the
// bridge has .1) and its broadcast address are never handed out.
func (k *Kubelet) podIP(pod *corev1.Pod) string {
	if pod.Status.PodIP != "" {
		return pod.Status.PodIP
	}

	k.mu.Lock()
	defer k.mu.Unlock()

	if ip, ok := k.track.ips[pod.UID]; ok {
		return ip
	}

	used := map[string]bool{}
	for _, ip := range k.track.ips {
		used[ip] = true
	}

	for _, obj := range k.pods.GetStore().List() {
		if p, ok := obj.(*corev1.Pod); ok && k.ours(p) && !p.Spec.HostNetwork && p.Status.PodIP != "" {
			used[p.Status.PodIP] = true
		}
	}

	prefix := k.podCIDR()
	addr := prefix.Addr().Next()

	for range 1 << 16 {
		addr = addr.Next()
		if !addr.IsValid() || !prefix.Contains(addr.Next()) { // the last is the broadcast address
			break
		}

		if !used[addr.String()] {
			k.track.ips[pod.UID] = addr.String()

			return addr.String()
		}
	}

	// The range is full: share the last address rather than fail (the lab does not route).
	return prefix.Addr().Next().Next().String()
}

// podCIDR is the node's pod CIDR (the first of spec.podCIDRs), or its fallback.
func (k *Kubelet) podCIDR() netip.Prefix {
	if obj, ok, _ := k.nodes.GetStore().GetByKey(k.opts.NodeName); ok {
		if node, ok := obj.(*corev1.Node); ok {
			for _, c := range append([]string{node.Spec.PodCIDR}, node.Spec.PodCIDRs...) {
				if p, err := netip.ParsePrefix(c); err == nil && p.Addr().Is4() && p.Bits() <= 30 {
					return p.Masked()
				}
			}
		}
	}

	h := fnv.New32a()
	_, _ = h.Write([]byte(k.opts.NodeName))

	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(h.Sum32()), 0}), 24)
}
