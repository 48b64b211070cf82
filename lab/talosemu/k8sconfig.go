package talosemu

import (
	"net/url"

	"github.com/siderolabs/crypto/x509"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/constants"
)

// The Kubernetes settings the emulator reads from a node's configuration. Since machinery v1.14
// they live either in the v1alpha1 document (cluster.*, machine.kubelet, machine.nodeLabels: the
// contracts up to 1.13 the lab's nodes run) or in Kube* documents (contract 1.14); the K8s*
// accessors answer for both, and answer nil for a section neither holds (a worker has no
// KubeAPIServerCAConfig, a config without cluster.controlPlane no KubeClusterConfig).

// clusterEndpoint is cluster.controlPlane.endpoint (KubeClusterConfig.endpoint), nil if unset.
func clusterEndpoint(cfg config.Config) *url.URL {
	if c := cfg.K8sClusterConfig(); c != nil {
		return c.ClusterEndpoint()
	}

	return nil
}

// clusterName is cluster.clusterName (KubeClusterConfig.clusterName).
func clusterName(cfg config.Config) string {
	if c := cfg.K8sClusterConfig(); c != nil {
		return c.ClusterName()
	}

	return ""
}

// kubernetesCA is the Kubernetes CA with its key (cluster.ca, KubeAPIServerCAConfig.issuingCA),
// nil when the configuration carries no key (a worker's), and the CAs the API server accepts
// besides it (cluster.acceptedCAs) in the order Talos v1.13 bundled them: the machinery v1.14
// accessor lists the issuing CA first, Talos v1.13 appended it after the accepted ones.
func kubernetesCA(cfg config.Config) (issuing *x509.PEMEncodedCertificateAndKey, accepted []*x509.PEMEncodedCertificate) {
	ca := cfg.K8sAPIServerCAConfig()
	if ca == nil {
		return nil, nil
	}

	issuing, accepted = ca.IssuingCA(), ca.AcceptedCAs()
	if issuing != nil && len(accepted) > 0 && string(accepted[0].Crt) == string(issuing.Crt) {
		accepted = accepted[1:]
	}

	return issuing, accepted
}

// aggregatorCA is cluster.aggregatorCA (KubeAggregatorCAConfig.issuingCA), nil if unset.
func aggregatorCA(cfg config.Config) *x509.PEMEncodedCertificateAndKey {
	if ca := cfg.K8sAggregatorCAConfig(); ca != nil {
		return ca.IssuingCA()
	}

	return nil
}

// serviceAccountKey is cluster.serviceAccount.key (KubeServiceAccountConfig.issuer.privateKey).
func serviceAccountKey(cfg config.Config) *x509.PEMEncodedKey {
	if sa := cfg.K8sServiceAccountConfig(); sa != nil {
		return sa.IssuingKey()
	}

	return nil
}

// apiServerCertSANs are cluster.apiServer.certSANs (KubeAPIServerConfig.certExtraSANs).
func apiServerCertSANs(cfg config.Config) []string {
	if a := cfg.K8sAPIServerConfig(); a != nil {
		return a.CertSANs()
	}

	return nil
}

// kubeletImage is machine.kubelet.image (KubeletConfig.image).
func kubeletImage(cfg config.Config) string {
	if k := cfg.K8sKubeletConfig(); k != nil {
		return k.Image()
	}

	return ""
}

// nodeLabels are the labels the node registers with: machine.nodeLabels, to which machinery
// v1.14 adds the control-plane role label on control planes (as the KubeNodeConfig document
// lists it); the emulated kubelet sets that label on control planes anyway.
func nodeLabels(cfg config.Config) map[string]string {
	if n := cfg.K8sNodeConfig(); n != nil {
		return n.Labels()
	}

	return nil
}

// allowSchedulingOnControlPlanes is cluster.allowSchedulingOnControlPlanes. Machinery v1.14
// expresses it as the absence of the control-plane NoSchedule taint from the node's taints
// (machine.nodeTaints plus that taint, or the KubeNodeConfig document's), so it only says
// something about a control plane.
func allowSchedulingOnControlPlanes(cfg config.Config) bool {
	n := cfg.K8sNodeConfig()
	if n == nil {
		return false
	}

	_, tainted := n.Taints()[constants.LabelNodeRoleControlPlane]

	return !tainted
}

// controlPlaneImages are the images of kube-apiserver, kube-controller-manager and
// kube-scheduler (cluster.apiServer.image etc., or the KubeAPIServerConfig,
// KubeControllerManagerConfig and KubeSchedulerConfig documents).
func controlPlaneImages(cfg config.Config) (apiServer, controllerManager, scheduler string) {
	if a := cfg.K8sAPIServerConfig(); a != nil {
		apiServer = a.Image()
	}

	if c := cfg.K8sControllerManagerConfig(); c != nil {
		controllerManager = c.Image()
	}

	if s := cfg.K8sSchedulerConfig(); s != nil {
		scheduler = s.Image()
	}

	return apiServer, controllerManager, scheduler
}

// kubeletArg is the value the kubelet gets for the flag name from machine.kubelet.extraArgs
// (KubeletConfig.extraArgs): the last one given, as the flag parser keeps it; ok is false when
// the configuration does not pass the flag.
func kubeletArg(cfg config.Config, name string) (value string, ok bool) {
	k := cfg.K8sKubeletConfig()
	if k == nil {
		return "", false
	}

	values, ok := k.ExtraArgs()[name]
	if !ok || len(values) == 0 {
		return "", ok
	}

	return values[len(values)-1], true
}

// kubeletProviderID is the kubelet's provider ID: extraArgs provider-id, else providerID of
// machine.kubelet.extraConfig (KubeletConfig.config); a flag wins over the configuration file.
func kubeletProviderID(cfg config.Config) string {
	if v, ok := kubeletArg(cfg, "provider-id"); ok {
		return v
	}

	if k := cfg.K8sKubeletConfig(); k != nil {
		id, _ := k.ExtraConfig()["providerID"].(string)

		return id
	}

	return ""
}

// kubeletExternalCloudProvider says whether the kubelet runs with --cloud-provider=external:
// Talos passes it when cluster.externalCloudProvider.enabled (KubeletSpecController), and
// extraArgs cloud-provider overrides that.
func kubeletExternalCloudProvider(cfg config.Config) bool {
	if v, ok := kubeletArg(cfg, "cloud-provider"); ok {
		return v == "external"
	}

	if c := cfg.Cluster(); c != nil {
		return c.ExternalCloudProvider().Enabled()
	}

	return false
}
