package ccmemu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Labels and annotations of the Proxmox CCM (pkg/proxmox labels.go, annotation.go).
const (
	labelRegion        = "topology.proxmox.sinextra.dev/region"
	labelZone          = "topology.proxmox.sinextra.dev/zone"
	annotationInstance = "proxmox.sinextra.dev/instance-id"
	// providedNodeIP is the kubelet's alpha.kubernetes.io/provided-node-ip.
	providedNodeIP = "alpha.kubernetes.io/provided-node-ip"
)

var (
	providerIDRE   = regexp.MustCompile(`^proxmox://([^/]*)/([^/]+)$`)
	instanceTypeRE = regexp.MustCompile(`(^[a-zA-Z0-9_.-]+)$`)
)

// metadata is k8s.io/cloud-provider's InstanceMetadata.
type metadata struct {
	ProviderID       string
	InstanceType     string
	NodeAddresses    []corev1.NodeAddress
	Zone, Region     string
	AdditionalLabels map[string]string
}

// info is the CCM's instanceInfo.
type info struct {
	ID                 int
	UUID, Name, Type   string
	Node, Region, Zone string
}

// parseProviderID is pkg/provider's ParseProviderID.
func parseProviderID(id string) (int, string, error) {
	if !strings.HasPrefix(id, "proxmox") {
		return 0, "", fmt.Errorf("foreign providerID or empty %q", id)
	}

	m := providerIDRE.FindStringSubmatch(id)
	if len(m) != 3 {
		return 0, "", fmt.Errorf("providerID %q didn't match expected format \"proxmox://region/InstanceID\"", id)
	}

	vmID, err := strconv.Atoi(m[2])
	if err != nil {
		return 0, "", fmt.Errorf("InstanceID have to be a number, but got %q", m[2])
	}

	return vmID, m[1], nil
}

// cluster is the pool's GetProxmoxCluster.
func (c *ccm) cluster(region string) (*pve, error) {
	if p := c.pool[region]; p != nil {
		return p, nil
	}

	return nil, errRegionNotFound
}

// instanceInfo is the CCM's getInstanceInfo: the VM by providerID (or the instance-id annotation
// and region label), else by the node's name, else by its system UUID; then its configuration,
// which must match the node's systemUUID and name.
func (c *ccm) instanceInfo(ctx context.Context, node *corev1.Node) (*info, error) {
	vmID, region, err := parseProviderID(node.Spec.ProviderID)
	if err != nil {
		vmID, region, _ = c.providerIDFromNode(node)
	}

	if vmID == 0 || region == "" {
		vmID, region, err = c.findVM(ctx, func(r resource) bool { return strings.HasPrefix(r.Name, node.Name) }, node.Status.NodeInfo.SystemUUID)
		if err != nil {
			vmID, region, err = c.findVM(ctx, func(resource) bool { return true }, node.Status.NodeInfo.SystemUUID)
			if err != nil {
				return nil, err
			}
		}
	}

	px, err := c.cluster(region)
	if err != nil {
		return nil, err
	}

	v, err := px.vmConfig(ctx, vmID)
	if err != nil {
		if strings.Contains(err.Error(), "not found") {
			return nil, fmt.Errorf("%w (VM %d in region %s: %v)", errInstanceNF, vmID, region, err)
		}

		if errors.Is(err, errVMUnreachable) {
			return nil, errNodeInaccess
		}

		return nil, err
	}

	in := &info{ID: vmID, UUID: v.uuid(), Name: v.Name, Node: v.Node, Region: region, Zone: v.Node}

	if !strings.EqualFold(in.UUID, node.Status.NodeInfo.SystemUUID) {
		return nil, fmt.Errorf("%w (node %s does not match SystemUUID=%s: VM %d has %s)", errInstanceNF, in.Name,
			node.Status.NodeInfo.SystemUUID, vmID, in.UUID)
	}

	if !strings.HasPrefix(in.Name, node.Name) {
		return nil, fmt.Errorf("%w (node %s does not match VM name=%s)", errInstanceNF, node.Name, in.Name)
	}

	in.Type = v.sku()
	if !instanceTypeRE.MatchString(in.Type) {
		in.Type = fmt.Sprintf("%dVCPU-%dGB", v.CPUs, v.MaxMem/1024/1024/1024)
	}

	return in, nil
}

// providerIDFromNode is parseProviderIDFromNode: the instance-id annotation and region label.
func (c *ccm) providerIDFromNode(node *corev1.Node) (int, string, error) {
	if node.Annotations[annotationInstance] == "" {
		return 0, "", errors.New("no annotation found")
	}

	region := node.Labels[labelRegion]
	if region == "" {
		region = node.Labels[corev1.LabelTopologyRegion]
	}

	id, err := strconv.Atoi(node.Annotations[annotationInstance])
	if err != nil {
		return 0, "", err
	}

	if _, err := c.cluster(region); err != nil {
		return 0, "", err
	}

	return id, region, nil
}

// findVM is the pool's FindVMByNode (match: the name has the node's as prefix) and FindVMByUUID
// (match: any): the first VM the token sees whose smbios1 uuid is uuid, in every region.
func (c *ccm) findVM(ctx context.Context, match func(resource) bool, uuid string) (int, string, error) {
	var errs []error

	for _, region := range c.regions {
		px := c.pool[region]

		r, err := px.vmByFilter(ctx, func(r resource) (bool, error) {
			if r.Type != "qemu" || !match(r) {
				return false, nil
			}

			if r.Status == "unknown" {
				errs = append(errs, fmt.Errorf("region %s node %s: %w", region, r.Node, errNodeInaccess))

				return false, nil
			}

			v, err := px.vmConfig(ctx, int(r.VMID)) //nolint:gosec // VM ids are small
			if err != nil {
				return false, err
			}

			return strings.EqualFold(v.uuid(), uuid), nil
		})
		if errors.Is(err, errVMNotFound) {
			continue
		}

		if err != nil {
			return 0, "", err
		}

		return int(r.VMID), region, nil //nolint:gosec // VM ids are small
	}

	if len(errs) > 0 {
		return 0, "", errors.Join(errs...)
	}

	return 0, "", errInstanceNF
}

// instanceMetadata is the CCM's InstanceMetadata (its side effects on initialized nodes
// included): an instance not found or on an inaccessible Proxmox node gives empty metadata.
func (c *ccm) instanceMetadata(ctx context.Context, node *corev1.Node) (*metadata, error) {
	providerID := node.Spec.ProviderID
	if providerID != "" && !strings.HasPrefix(providerID, "proxmox") {
		return &metadata{}, nil
	}

	in, err := c.instanceInfo(ctx, node)
	if err != nil {
		c.say("instances.InstanceMetadata() failed to get instance info for node %s: %v", node.Name, err)

		if errors.Is(err, errInstanceNF) || errors.Is(err, errNodeInaccess) {
			return &metadata{}, nil
		}

		return nil, err
	}

	labels := map[string]string{labelRegion: in.Region, labelZone: in.Zone}
	annotations := map[string]string{}

	if providerID == "" {
		if c.cfg.Features.Provider == "capmox" {
			providerID = "proxmox://" + in.UUID
			annotations[annotationInstance] = strconv.Itoa(in.ID)
		} else {
			providerID = fmt.Sprintf("proxmox://%s/%d", in.Region, in.ID)
		}
	}

	md := &metadata{
		ProviderID: providerID, NodeAddresses: c.addresses(node), InstanceType: in.Type, Zone: in.Zone, Region: in.Region,
		AdditionalLabels: labels,
	}

	// The lab's Proxmox has no HA groups: GetNodeHAGroups finds none.
	if c.cfg.Features.HAGroup {
		return nil, errors.New("cannot set zone as HA-Group")
	}

	if !hasTaint(node, UninitializedTaint) {
		if c.cfg.Features.ForceUpdateLabels {
			labels[corev1.LabelTopologyZone], labels[corev1.LabelFailureDomainBetaZone] = md.Zone, md.Zone
			labels[corev1.LabelTopologyRegion], labels[corev1.LabelFailureDomainBetaRegion] = md.Region, md.Region
		}

		if err := c.patchNode(ctx, node.Name, func(n *corev1.Node) { addMissing(&n.Labels, labels, true) }); err != nil {
			c.say("error updating labels for the node %s: %v", node.Name, err)
		}
	}

	if len(annotations) > 0 {
		if err := c.patchNode(ctx, node.Name, func(n *corev1.Node) { addMissing(&n.Annotations, annotations, true) }); err != nil {
			c.say("error updating annotations for the node %s: %v", node.Name, err)
		}
	}

	return md, nil
}

// addresses is the CCM's addresses in its default network mode: the hostname and the kubelet's
// provided node IPs.
func (c *ccm) addresses(node *corev1.Node) []corev1.NodeAddress {
	provided, ok := node.Annotations[providedNodeIP]
	if !ok {
		c.say("instances.InstanceMetadata() called: annotation %s missing from node %s. Was kubelet started without "+
			"--cloud-provider=external or --node-ip?", providedNodeIP, node.Name)
	}

	out := []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: node.Name}}

	for a := range strings.SplitSeq(provided, ",") {
		if ip := net.ParseIP(strings.TrimSpace(a)); ip != nil {
			out = append(out, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip.String()})
		}
	}

	return out
}

// instanceExists is the CCM's InstanceExists.
func (c *ccm) instanceExists(ctx context.Context, node *corev1.Node) (bool, error) {
	if node.Spec.ProviderID == "" || !strings.HasPrefix(node.Spec.ProviderID, "proxmox") {
		return true, nil
	}

	if _, err := c.instanceInfo(ctx, node); err != nil {
		switch {
		case errors.Is(err, errInstanceNF):
			return false, nil
		case errors.Is(err, errNodeInaccess):
			return true, nil
		}

		return false, err
	}

	return true, nil
}

// instanceShutdown is the CCM's InstanceShutdown: the VM's status is "stopped".
func (c *ccm) instanceShutdown(ctx context.Context, node *corev1.Node) (bool, error) {
	if node.Spec.ProviderID == "" || !strings.HasPrefix(node.Spec.ProviderID, "proxmox") {
		return false, nil
	}

	vmID, region, err := parseProviderID(node.Spec.ProviderID)
	if err != nil {
		if vmID, region, err = c.providerIDFromNode(node); err != nil {
			return false, nil //nolint:nilerr // the CCM logs it and answers "not shut down"
		}
	}

	px, err := c.cluster(region)
	if err != nil {
		return false, nil //nolint:nilerr // as the CCM
	}

	r, err := px.vmByID(ctx, vmID)
	if err != nil {
		return false, err
	}

	return r.Status == "stopped", nil
}

func hasTaint(node *corev1.Node, key string) bool {
	return slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == key && t.Effect == corev1.TaintEffectNoSchedule
	})
}

// addMissing sets labels (or annotations) into *m; with overwrite, also those that differ.
func addMissing(m *map[string]string, add map[string]string, overwrite bool) {
	if *m == nil {
		*m = map[string]string{}
	}

	for k, v := range add {
		if old, ok := (*m)[k]; !ok || (overwrite && old != v) {
			(*m)[k] = v
		}
	}
}
