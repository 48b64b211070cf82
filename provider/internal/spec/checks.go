package spec

import (
	"net"
	"net/netip"
	"net/url"
	"path"
	"regexp"
	"strings"
)

var (
	dnsLabelRe     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	hostNodeRe     = regexp.MustCompile(`^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$`)
	storageIDRe    = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9\-_.]*$`)
	bridgeRe       = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_.\-]{0,14}$`)
	tagRe          = regexp.MustCompile(`^[a-z0-9_][a-z0-9_\-+.]*$`)
	cpuTypeRe      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.\-]*$`)
	machineRe      = regexp.MustCompile(`^(pc|q35|pc-i440fx-[0-9]+\.[0-9]+|pc-q35-[0-9]+\.[0-9]+)(\+pve[0-9]+)?$`)
	pciIDRe        = regexp.MustCompile(`^([0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(\.[0-9a-fA-F])?$`)
	pciMappingRe   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_\-]*$`)
	extensionRe    = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*$`)
	talosVersionRe = regexp.MustCompile(`^v?([0-9]+)\.([0-9]+)\.([0-9]+)(-[0-9A-Za-z.\-]+)?$`)
	kubeVersionRe  = regexp.MustCompile(`^v?1\.([0-9]+)\.([0-9]+)$`)
	labelNameRe    = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$`)
	dnsSubdomainRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	manifestNameRe = regexp.MustCompile(`^[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$`)
	installDiskRe  = regexp.MustCompile(`^/dev/[A-Za-z0-9/_.\-]+$`)
	hostnameOrIPRe = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?$`)
)

// isDNSLabel reports whether s is an RFC 1123 label (lower case, at most 63 characters).
func isDNSLabel(s string) bool { return len(s) <= 63 && dnsLabelRe.MatchString(s) }

// isDNSSubdomain reports whether s is an RFC 1123 subdomain.
func isDNSSubdomain(s string) bool { return len(s) <= 253 && dnsSubdomainRe.MatchString(s) }

// parseIPv4 parses a dotted IPv4 address (no zone, no IPv6).
func parseIPv4(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}, false
	}

	return a, true
}

// isHost reports whether s is a host name or an IP address usable in a URL.
func isHost(s string) bool {
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}

	return len(s) <= 253 && hostnameOrIPRe.MatchString(s)
}

// normaliseMAC parses a unicast Ethernet MAC address and returns it upper case with colons,
// the form Proxmox reports back (so no perpetual diff).
func normaliseMAC(s string) (string, string) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return "", "is not a MAC address; use the form BC:24:11:00:00:01"
	}

	if hw[0]&1 == 1 {
		return "", "is a multicast address; a NIC needs a unicast MAC (first octet even), e.g. BC:24:11:00:00:01"
	}

	return strings.ToUpper(hw.String()), ""
}

// checkLabel returns why a Kubernetes label key/value is invalid, or "".
func checkLabel(key, value string) string {
	name := key
	if i := strings.LastIndex(key, "/"); i >= 0 {
		prefix := key[:i]
		name = key[i+1:]

		if !isDNSSubdomain(prefix) {
			return "the key prefix " + quote(prefix) + " is not a DNS subdomain"
		}
	}

	if name == "" || len(name) > 63 || !labelNameRe.MatchString(name) {
		return "the key " + quote(key) + " is not a valid label name (at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric)"
	}

	if value != "" && (len(value) > 63 || !labelNameRe.MatchString(value)) {
		return "the value " + quote(value) + " is not a valid label value (at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric)"
	}

	return ""
}

// checkMountPath returns why a data disk mount path is unusable on Talos, or "".
func checkMountPath(p string) string {
	if !strings.HasPrefix(p, "/") {
		return "must be an absolute path such as /var/lib/longhorn"
	}

	if path.Clean(p) != p {
		return "must be a clean path (no '..', '.', '//' or trailing '/'); use " + quote(path.Clean(p))
	}

	if !strings.HasPrefix(p, "/var/") {
		return "must be under /var: the rest of Talos' root filesystem is read-only; use e.g. /var/lib/longhorn"
	}

	for _, reserved := range []string{"/var/lib/etcd", "/var/lib/containerd", "/var/lib/kubelet", "/var/log", "/var/system", "/var/run", "/var/lib/cni"} {
		if p == reserved || strings.HasPrefix(p, reserved+"/") {
			return "is inside " + reserved + ", which Talos itself uses; pick another path such as /var/lib/longhorn or /var/mnt/data"
		}

		if strings.HasPrefix(reserved, p+"/") {
			return "would hide " + reserved + ", which Talos itself uses; mount the disk one level deeper, e.g. /var/lib/longhorn or /var/mnt/data"
		}
	}

	return ""
}

// isHTTPURL reports whether s is an absolute http(s) URL.
func isHTTPURL(s string) bool {
	u, err := url.Parse(s)

	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}

func quote(s string) string { return "\"" + s + "\"" }
