package pvefake

import (
	"crypto/sha1" //nolint:gosec // PVE's config digest is SHA-1
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// kind is the JSON type PVE gives a configuration key (integer and boolean keys come back as
// JSON numbers, everything else as strings, exactly as bpg's decoders expect).
type kind int

const (
	kString kind = iota
	kInt
	kBool
	kNumber
	kDrive
	kNet
)

// configKeys are the qemu-server options the fake accepts (PVE 8.4's json_config_properties).
var configKeys = map[string]kind{
	"acpi": kBool, "affinity": kString, "agent": kString, "amd-sev": kString, "arch": kString,
	"args": kString, "audio0": kString, "autostart": kBool, "balloon": kInt, "bios": kString,
	"boot": kString, "bootdisk": kString, "cdrom": kDrive, "cicustom": kString, "cipassword": kString,
	"citype": kString, "ciupgrade": kBool, "ciuser": kString, "cores": kInt, "cpu": kString,
	"cpulimit": kNumber, "cpuunits": kInt, "description": kString, "efidisk0": kDrive, "freeze": kBool,
	"hookscript": kString, "hotplug": kString, "hugepages": kString, "ivshmem": kString,
	"keephugepages": kBool, "keyboard": kString, "kvm": kBool, "localtime": kBool, "lock": kString,
	"machine": kString, "memory": kString, "meta": kString, "migrate_downtime": kNumber,
	"migrate_speed": kInt, "name": kString, "nameserver": kString, "numa": kBool, "onboot": kBool,
	"ostype": kString, "protection": kBool, "reboot": kBool, "rng0": kString, "scsihw": kString,
	"searchdomain": kString, "shares": kInt, "smbios1": kString, "smp": kInt, "sockets": kInt,
	"spice_enhancements": kString, "sshkeys": kString, "startdate": kString, "startup": kString,
	"tablet": kBool, "tags": kString, "tdf": kBool, "template": kBool, "tpmstate0": kDrive,
	"vcpus": kInt, "vga": kString, "vmgenid": kString, "vmstatestorage": kString, "watchdog": kString,
}

var indexedKeys = []struct {
	re   *regexp.Regexp
	kind kind
}{
	{regexp.MustCompile(`^(ide[0-3]|sata[0-5]|scsi([0-9]|[12][0-9]|30)|virtio([0-9]|1[0-5]))$`), kDrive},
	{regexp.MustCompile(`^net([0-9]|[12][0-9]|3[01])$`), kNet},
	{regexp.MustCompile(`^(hostpci([0-9]|1[0-5])|ipconfig([0-9]|[12][0-9]|3[01])|numa[0-7]|serial[0-3]|parallel[0-2]|usb([0-9]|[12][0-9])|unused([0-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-5])|virtiofs[0-9])$`), kString},
}

// createOnly and updateOnly are method parameters that are not configuration keys.
var (
	createOnly = []string{"vmid", "archive", "storage", "force", "unique", "pool", "bwlimit", "start", "live-restore", "import-working-storage"}
	updateOnly = []string{"delete", "revert", "digest", "skiplock", "force", "background_delay"}
	enums      = map[string][]string{
		"bios":   {"seabios", "ovmf"},
		"ostype": {"other", "wxp", "w2k", "w2k3", "w2k8", "wvista", "win7", "win8", "win10", "win11", "l24", "l26", "solaris"},
		"scsihw": {"lsi", "lsi53c810", "virtio-scsi-pci", "virtio-scsi-single", "megasas", "pvscsi"},
		"citype": {"configdrive2", "nocloud", "opennebula"},
		"arch":   {"x86_64", "aarch64"},
	}
	dnsNameRE   = regexp.MustCompile(`^(?:[a-zA-Z0-9](?:[a-zA-Z0-9\-]*[a-zA-Z0-9])?\.)*[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?$`)
	driveOpts   = toSet("file", "aio", "backup", "bps", "bps_max_length", "bps_rd", "bps_rd_max_length", "bps_wr", "bps_wr_max_length", "cache", "cyls", "detect_zeroes", "discard", "efitype", "format", "heads", "import-from", "iops", "iops_max", "iops_max_length", "iops_rd", "iops_rd_max", "iops_rd_max_length", "iops_wr", "iops_wr_max", "iops_wr_max_length", "iothread", "mbps", "mbps_max", "mbps_rd", "mbps_rd_max", "mbps_wr", "mbps_wr_max", "media", "model", "ms-cert", "pre-enrolled-keys", "product", "queues", "replicate", "rerror", "ro", "secs", "serial", "shared", "size", "snapshot", "ssd", "trans", "vendor", "version", "werror", "wwn")
	netModels   = toSet("e1000", "e1000-82540em", "e1000-82544gc", "e1000-82545em", "e1000e", "i82551", "i82557b", "i82559er", "ne2k_isa", "ne2k_pci", "pcnet", "rtl8139", "virtio", "vmxnet3")
	netOpts     = toSet("model", "macaddr", "bridge", "firewall", "link_down", "mtu", "queues", "rate", "tag", "trunks")
	tagSplitRE  = regexp.MustCompile(`[;,\s]+`)
	driveNameRE = indexedKeys[0].re
)

func toSet(items ...string) map[string]bool {
	m := make(map[string]bool, len(items))
	for _, i := range items {
		m[i] = true
	}

	return m
}

// keyKind returns the kind of a configuration key.
func keyKind(key string) (kind, bool) {
	if k, ok := configKeys[key]; ok {
		return k, true
	}

	for _, ik := range indexedKeys {
		if ik.re.MatchString(key) {
			return ik.kind, true
		}
	}

	return 0, false
}

func isDriveKey(key string) bool {
	return driveNameRE.MatchString(key) || key == "efidisk0" || key == "tpmstate0"
}

// driveOrder is PVE's valid_drive_names order, in which disks are allocated.
func driveOrder(key string) int {
	prefixes := []struct {
		p    string
		base int
	}{{"ide", 0}, {"sata", 100}, {"scsi", 200}, {"virtio", 300}, {"efidisk", 400}, {"tpmstate", 500}}

	for _, pr := range prefixes {
		if n, ok := strings.CutPrefix(key, pr.p); ok {
			i, _ := strconv.Atoi(n)
			return pr.base + i
		}
	}

	return 1000
}

func parseBool(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on":
		return true, true
	case "0", "false", "no", "off":
		return false, true
	}

	return false, false
}

// checkValue type-checks one configuration value, with PVE's wording.
func checkValue(key, v string) string {
	k, _ := keyKind(key)

	switch k {
	case kInt:
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return "type check ('integer') failed - got '" + v + "'"
		}
	case kBool:
		if _, ok := parseBool(v); !ok {
			return "type check ('boolean') failed - got '" + v + "'"
		}
	case kNumber:
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return "type check ('number') failed - got '" + v + "'"
		}
	case kDrive:
		props := parsePropertyString(v, "file")
		for opt := range props {
			if !driveOpts[opt] {
				return "invalid format - format error\n" + key + "." + opt + ": property is not defined in schema and the schema does not allow additional properties"
			}
		}

		if props["file"] == "" {
			return "invalid format - format error\n" + key + ".file: property is missing and it is not optional"
		}
	case kNet:
		if _, err := normalizeNet(v, ""); err != "" {
			return "invalid format - format error\n" + key + "." + err
		}
	case kString:
		if allowed, ok := enums[key]; ok && !slices.Contains(allowed, v) {
			return "value '" + v + "' does not have a value in the enumeration '" + strings.Join(allowed, ", ") + "'"
		}

		if key == "name" && !dnsNameRE.MatchString(v) {
			return "invalid format - value does not look like a valid DNS name"
		}
	}

	return ""
}

// checkConfigParams verifies parameter names and values of a create or update call.
func checkConfigParams(params map[string]string, extra []string) *apiError {
	errs := map[string]string{}

	for key, v := range params {
		if slices.Contains(extra, key) {
			continue
		}

		if _, ok := keyKind(key); !ok {
			errs[key] = "property is not defined in schema and the schema does not allow additional properties"
			continue
		}

		if msg := checkValue(key, v); msg != "" {
			errs[key] = msg
		}
	}

	if len(errs) > 0 {
		return paramErr(errs)
	}

	return nil
}

// parsePropertyString splits "a=1,b=2" (a bare first item belongs to defaultKey).
func parsePropertyString(v, defaultKey string) map[string]string {
	out := map[string]string{}

	for i, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}

		k, val, ok := strings.Cut(part, "=")
		if !ok {
			if i == 0 && defaultKey != "" {
				out[defaultKey] = part
			}

			continue
		}

		out[k] = val
	}

	return out
}

// printPropertyString prints first (bare) followed by the other keys sorted, like PVE's
// print_property_string for drives and NICs.
func printPropertyString(first string, props map[string]string) string {
	parts := []string{first}

	for _, k := range slices.Sorted(maps.Keys(props)) {
		parts = append(parts, k+"="+props[k])
	}

	return strings.Join(parts, ",")
}

// normalizeNet turns "model=virtio,bridge=vmbr0,macaddr=…" or "virtio=MAC,bridge=vmbr0" into
// PVE's stored form "virtio=MAC,bridge=vmbr0,…"; mac fills in a missing address. The error is
// "<option>: <message>".
func normalizeNet(v, mac string) (string, string) {
	props := map[string]string{}
	model := ""

	for _, part := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}

		switch {
		case netModels[k]:
			model, props["macaddr"] = k, val
		case k == "model":
			model = val
		case netOpts[k]:
			props[k] = val
		default:
			return "", k + ": property is not defined in schema and the schema does not allow additional properties"
		}
	}

	if model == "" {
		return "", "model: property is missing and it is not optional"
	}

	if !netModels[model] {
		return "", "model: value '" + model + "' does not have a value in the enumeration"
	}

	if props["macaddr"] == "" {
		props["macaddr"] = mac
	}

	first := model + "=" + strings.ToUpper(props["macaddr"])
	delete(props, "macaddr")

	return printPropertyString(first, props), ""
}

// normalizeTags is PVE's tag handling: split on ; , and spaces, drop duplicates, sort, join with ;.
func normalizeTags(v string) string {
	seen := map[string]bool{}
	var tags []string

	for _, t := range tagSplitRE.Split(v, -1) {
		if t != "" && !seen[strings.ToLower(t)] {
			seen[strings.ToLower(t)] = true
			tags = append(tags, t)
		}
	}

	sort.Strings(tags)

	return strings.Join(tags, ";")
}

// formatSize is PVE's format_size: the largest unit that divides the size exactly.
func formatSize(b int64) string {
	units := []string{"", "K", "M", "G", "T"}
	i := 0

	for i < len(units)-1 && b != 0 && b%1024 == 0 {
		b /= 1024
		i++
	}

	return strconv.FormatInt(b, 10) + units[i]
}

// parseSize parses PVE disk sizes ("32G", "512M", "1.5G", bytes without unit).
func parseSize(v string) (int64, bool) {
	m := regexp.MustCompile(`^(\d+(?:\.\d+)?)([KMGT])?$`).FindStringSubmatch(v)
	if m == nil {
		return 0, false
	}

	f, _ := strconv.ParseFloat(m[1], 64)
	mult := map[string]float64{"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[m[2]]

	return int64(f * mult), true
}

// configJSON renders a configuration with PVE's JSON types plus its digest.
func configJSON(conf map[string]string) map[string]any {
	out := make(map[string]any, len(conf)+1)

	for k, v := range conf {
		kd, _ := keyKind(k)

		switch kd {
		case kInt:
			n, _ := strconv.ParseInt(v, 10, 64)
			out[k] = n
		case kBool:
			b, _ := parseBool(v)
			out[k] = boolInt(b)
		case kNumber:
			f, _ := strconv.ParseFloat(v, 64)
			out[k] = f
		default:
			out[k] = v
		}
	}

	out["digest"] = configDigest(conf)

	return out
}

func configDigest(conf map[string]string) string {
	h := sha1.New() //nolint:gosec // PVE's digest
	for _, k := range slices.Sorted(maps.Keys(conf)) {
		_, _ = fmt.Fprintf(h, "%s: %s\n", k, conf[k])
	}

	return hex.EncodeToString(h.Sum(nil))
}

func cloneConfig(c map[string]string) map[string]string { return maps.Clone(c) }

// generated derives deterministic identifiers (MACs, UUIDs) from the seed and a counter.
func (s *Server) generated(purpose string) []byte {
	var buf [16]byte
	binary.BigEndian.PutUint64(buf[:8], s.opts.Seed)
	binary.BigEndian.PutUint64(buf[8:], s.nextCounter())
	sum := sha256.Sum256(append(buf[:], purpose...))

	return sum[:]
}

// generateMAC returns a MAC in Proxmox' OUI BC:24:11, like PVE's random_ether_addr.
func (s *Server) generateMAC() string {
	b := s.generated("mac")
	return fmt.Sprintf("BC:24:11:%02X:%02X:%02X", b[0], b[1], b[2])
}

func (s *Server) generateUUID() string {
	b := s.generated("uuid")
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80

	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
