package pveschema

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// UncheckedFormats lists the named formats of the vendored schemas that are not checked: any
// value passes them. Every other named format is implemented after pve-common, qemu-server,
// pve-storage and pve-access-control (TestEveryFormatIsCheckedOrListed keeps this list exact).
var UncheckedFormats = []string{
	"bridge-pair-list",
	"email-opt",
	"ldap-simple-attr",
	"ldap-simple-attr-list",
	"proxmox-remote",
	"pve-cpuset",
	"pve-dir-override-list",
	"pve-fw-addr-spec",
	"pve-fw-dport-spec",
	"pve-fw-icmp-type-spec",
	"pve-fw-protocol-spec",
	"pve-fw-sport-spec",
	"pve-hotplug-features",
	"pve-iface",
	"pve-priv-list",
	"pve-qemu-sev-fmt",
	"pve-qemu-tdx-fmt",
	"pve-qm-bootdisk",
	"pve-qm-cicustom",
	"pve-qm-ide",
	"pve-qm-rng",
	"pve-qm-smbios1",
	"pve-qm-watchdog",
	"pve-startup-order",
	"pve-storage-options",
	"pve-storage-path",
	"pve-storage-path-in-property-string",
	"pve-storage-portal-dns",
	"pve-storage-portal-dns-list",
	"pve-storage-server",
	"pve-storage-vgname",
	"pve-task-status-type-list",
	"pve-tfa-config",
	"pve-tokenid-list",
	"pve-vm-cpu-conf",
	"realm-sync-options",
	"storage-pair-list",
	"string",
	"urlencoded",
	"prune-backups",
}

// Regular expressions of pve-common, qemu-server, pve-storage and pve-access-control.
var (
	vmidRE      = regexp.MustCompile(`^[1-9][0-9]{2,8}$`)
	nodeRE      = regexp.MustCompile(`^(?i:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)$`)
	storageIDRE = regexp.MustCompile(`^(?i:[a-z][a-z0-9\-_.]*[a-z0-9])$`)
	configIDRE  = regexp.MustCompile(`^(?i:[a-z][a-z0-9_-]+)$`)
	poolIDRE    = regexp.MustCompile(`^[A-Za-z0-9_\-]+(?:/[A-Za-z0-9_\-]+){0,2}$`)
	realmRE     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9.\-_]+$`)
	userIDRE    = regexp.MustCompile(`^[^\s:/]+@[A-Za-z][A-Za-z0-9.\-_]+$`)
	roleIDRE    = regexp.MustCompile(`^[A-Za-z0-9.\-_]+$`)
	tagRE       = regexp.MustCompile(`^(?i:[a-z0-9_][a-z0-9_\-+.]*)$`)
	dnsNameRE   = regexp.MustCompile(`^(?:(?:[a-zA-Z0-9](?:[a-zA-Z0-9\-]*[a-zA-Z0-9])?)\.)*(?:[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)$`)
	macRE       = regexp.MustCompile(`^(?i:[a-f0-9][02468ace](?::[a-f0-9]{2}){5})$`)
	bridgeRE    = regexp.MustCompile(`^[-_.\w\d]+$`)
	volumeIDRE  = regexp.MustCompile(`^(?i:([a-z][a-z0-9\-_.]*[a-z0-9]):(.+))$`)
	diskSizeRE  = regexp.MustCompile(`^(\d+(\.\d+)?)([KMGT])?$`)
	contentRE   = regexp.MustCompile(`^(images|rootdir|vztmpl|iso|backup|snippets|import|none)$`)
	hexIDRE     = regexp.MustCompile(`^0x[0-9a-fA-F]{4}$`)
	pciIDRE     = regexp.MustCompile(`^(?:[a-f0-9]{4,}:)?[a-f0-9]{2}:[a-f0-9]{2}(?:\.[a-f0-9])?$`)
	bootLegacy  = regexp.MustCompile(`^[acdn]{1,4}$`)
	bootDevRE   = regexp.MustCompile(`^(?:ide|sata|scsi|virtio|net|hostpci|usb)\d+$`)
	listSplitRE = regexp.MustCompile(`[,;\s\x00]+`)
	tagSplitRE  = regexp.MustCompile(`[;, ]+`)
)

func reCheck(re *regexp.Regexp, msg string) func(string) error {
	return func(v string) error {
		if !re.MatchString(v) {
			return errors.New(msg)
		}

		return nil
	}
}

func ipCheck(want string) func(string) error {
	return func(v string) error {
		a, err := netip.ParseAddr(v)
		if err != nil || (want == "4" && !a.Is4()) || (want == "6" && !a.Is6()) {
			return fmt.Errorf("value does not look like a valid IP%s address", map[string]string{"4": "v4", "6": "v6"}[want])
		}

		return nil
	}
}

func cidrCheck(want string) func(string) error {
	return func(v string) error {
		pf, err := netip.ParsePrefix(v)
		if err != nil || (want == "4" && !pf.Addr().Is4()) || (want == "6" && !pf.Addr().Is6()) {
			return fmt.Errorf("value does not look like a valid CIDR network")
		}

		return nil
	}
}

func volumeID(v string) error {
	if !volumeIDRE.MatchString(v) {
		return fmt.Errorf("unable to parse volume ID '%s'", v)
	}

	return nil
}

// formatCheckers are the simple named formats.
var formatCheckers map[string]func(string) error

// propFormatKeys are value checks for keys of named property-string formats, beyond what
// their typetext says (key names, default key, booleans, enums, integers).
var propFormatKeys = map[string]map[string]func(string) error{
	"pve-qm-ipconfig": {
		"ip": func(v string) error {
			if v == "dhcp" {
				return nil
			}

			return cidrCheck("4")(v)
		},
		"gw": ipCheck("4"),
		"ip6": func(v string) error {
			if v == "dhcp" || v == "auto" {
				return nil
			}

			return cidrCheck("6")(v)
		},
		"gw6": ipCheck("6"),
	},
	"pve-qm-hostpci": {
		"host": func(v string) error {
			for _, id := range strings.Split(v, ";") {
				if !pciIDRE.MatchString(id) {
					return fmt.Errorf("value does not match the regex pattern")
				}
			}

			return nil
		},
		"mapping":       reCheck(configIDRE, "invalid configuration ID"),
		"device-id":     reCheck(hexIDRE, "value does not match the regex pattern"),
		"vendor-id":     reCheck(hexIDRE, "value does not match the regex pattern"),
		"sub-device-id": reCheck(hexIDRE, "value does not match the regex pattern"),
		"sub-vendor-id": reCheck(hexIDRE, "value does not match the regex pattern"),
	},
	"pve-qm-boot": {
		"legacy": reCheck(bootLegacy, "value does not match the regex pattern"),
		"order": func(v string) error {
			for _, d := range strings.Split(v, ";") {
				if !bootDevRE.MatchString(d) {
					return fmt.Errorf("invalid boot device '%s'", d)
				}
			}

			return nil
		},
	},
}

func init() {
	formatCheckers = map[string]func(string) error{
		"pve-vmid":       reCheck(vmidRE, "value does not look like a valid VM ID"),
		"pve-node":       reCheck(nodeRE, "value does not look like a valid node name"),
		"pve-storage-id": reCheck(storageIDRE, "storage ID contains illegal characters"),
		"pve-configid":   reCheck(configIDRE, "invalid configuration ID"),
		"pve-poolid":     reCheck(poolIDRE, "invalid pool ID"),
		"pve-realm":      reCheck(realmRE, "value does not look like a valid realm"),
		"pve-userid":     reCheck(userIDRE, "value does not look like a valid user name"),
		"pve-roleid":     reCheck(roleIDRE, "invalid format"),
		"pve-groupid":    reCheck(roleIDRE, "invalid format"),
		"pve-bridge-id":  reCheck(bridgeRE, "invalid bridge ID"),
		"mac-addr":       reCheck(macRE, "value does not look like a valid unicast MAC address"),
		"dns-name":       reCheck(dnsNameRE, "value does not look like a valid DNS name"),
		"disk-size":      reCheck(diskSizeRE, "unable to parse size"),
		"pve-storage-content": reCheck(contentRE,
			"invalid content type"),
		"address": ipCheck(""),
		"ip":      ipCheck(""),
		"ipv4":    ipCheck("4"),
		"ipv6":    ipCheck("6"),
		"CIDR":    cidrCheck(""),
		"IPorCIDR": func(v string) error {
			if ipCheck("")(v) == nil {
				return nil
			}

			return cidrCheck("")(v)
		},
		"IPorCIDRorAlias": func(v string) error {
			if ipCheck("")(v) == nil || cidrCheck("")(v) == nil || configIDRE.MatchString(v) {
				return nil
			}

			return errors.New("value does not look like a valid IP address, CIDR network or alias")
		},
		"pve-volume-id": volumeID,
		"pve-volume-id-or-qm-path": func(v string) error {
			if v == "none" || v == "cdrom" || strings.HasPrefix(v, "/") {
				return nil
			}

			return volumeID(v)
		},
		"pve-volume-id-or-absolute-path": func(v string) error {
			if strings.HasPrefix(v, "/") {
				return nil
			}

			return volumeID(v)
		},
		"pve-tag-list": func(v string) error {
			tags := tagSplitRE.Split(v, -1)
			n := 0

			for _, t := range tags {
				if t == "" {
					continue
				}

				n++

				if !tagRE.MatchString(t) {
					return fmt.Errorf("invalid tag '%s'", t)
				}
			}

			if n == 0 {
				return errors.New("no tags given")
			}

			return nil
		},
		"address-list": func(v string) error {
			for _, a := range listSplitRE.Split(v, -1) {
				if a == "" {
					continue
				}

				if err := ipCheck("")(a); err != nil {
					return fmt.Errorf("invalid address '%s'", a)
				}
			}

			return nil
		},
	}
}

var (
	uncheckedMu   sync.Mutex
	uncheckedSeen = map[string]bool{}
)

// SeenUncheckedFormats lists the named formats that requests or responses checked so far used
// but that no checker implements (a subset of UncheckedFormats, or formats a future schema
// brings).
func SeenUncheckedFormats() []string {
	uncheckedMu.Lock()
	defer uncheckedMu.Unlock()

	out := make([]string, 0, len(uncheckedSeen))
	for k := range uncheckedSeen {
		out = append(out, k)
	}

	sort.Strings(out)

	return out
}

// checkedFormat reports whether name is a format this package checks.
func checkedFormat(name string) bool {
	if _, ok := formatCheckers[name]; ok {
		return true
	}

	if _, ok := propFormatKeys[name]; ok {
		return true
	}

	if base, ok := strings.CutSuffix(name, "-list"); ok {
		return checkedFormat(base)
	}

	return false
}

func checkNamedFormat(p *prop, v, field string) []Violation {
	bad := func(err error) []Violation {
		return []Violation{{Field: field, Rule: "invalid format - " + err.Error()}}
	}

	name := p.format

	if f := formatCheckers[name]; f != nil {
		if err := f(v); err != nil {
			return bad(err)
		}

		return nil
	}

	if keys, ok := propFormatKeys[name]; ok {
		return checkPropertyString(typetextFormat(p.typetext, keys), v, field)
	}

	if base, ok := strings.CutSuffix(name, "-list"); ok {
		if f := formatCheckers[base]; f != nil {
			for _, el := range listSplitRE.Split(v, -1) {
				if el == "" {
					continue
				}

				if err := f(el); err != nil {
					return bad(fmt.Errorf("%s: %w", el, err))
				}
			}

			return nil
		}
	}

	uncheckedMu.Lock()
	uncheckedSeen[name] = true
	uncheckedMu.Unlock()

	return nil
}

var (
	ttKeyRE     = regexp.MustCompile(`(\[\[|\[,|,|\[|^)([A-Za-z0-9_-]+)=(\]?)`)
	ttCache     sync.Map
	boolValueRE = regexp.MustCompile(`^<1\|0>$`)
	enumValueRE = regexp.MustCompile(`^<([A-Za-z0-9_./-]+(?:\|[A-Za-z0-9_./-]+)+)>$`)
)

// typetextFormat derives a property-string format from a parameter's typetext, e.g.
// "[[host=]<HOSTPCIID[;HOSTPCIID2...]>] [,pcie=<1|0>]": keys, the default key ("[[key=]" or
// "[key=]"), optional keys ("[,key=" or "[[key"), booleans, enums and integers; extra holds value
// checks of keys.
func typetextFormat(typetext string, extra map[string]func(string) error) map[string]*prop {
	if f, ok := ttCache.Load(typetext); ok {
		return f.(map[string]*prop)
	}

	format := map[string]*prop{}
	locs := ttKeyRE.FindAllStringSubmatchIndex(typetext, -1)

	for i, l := range locs {
		open, key, closeBr := typetext[l[2]:l[3]], typetext[l[4]:l[5]], typetext[l[6]:l[7]]

		end := len(typetext)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}

		val := strings.TrimSpace(typetext[l[1]:end])
		val = strings.TrimSuffix(val, "]")
		val = strings.TrimSpace(val)

		p := &prop{typ: "string", maxIndex: -1}
		p.defaultKey = closeBr == "]"
		p.optional = open == "[[" || open == "[," || (open == "[" && !p.defaultKey)

		switch {
		case boolValueRE.MatchString(val):
			p.typ = "boolean"
		case val == "<integer>" || val == "<N>":
			p.typ = "integer"
		default:
			if m := enumValueRE.FindStringSubmatch(val); m != nil {
				p.enum = strings.Split(m[1], "|")
			}
		}

		if f := extra[key]; f != nil {
			p.format = "x-" + key
			p.check = f
		}

		format[key] = p
	}

	ttCache.Store(typetext, format)

	return format
}
