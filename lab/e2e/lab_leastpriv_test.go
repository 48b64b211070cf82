//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pvefake"
)

// The role docs/install.md documents, per PVE major version, and the paths it is granted on for
// the lab's cluster: hosts pve1 to pve3, VM disks on local-lvm, the image on local, bridge vmbr0,
// the PCI mapping gpu.
const leastPrivRole = "TalosProxmox"

// leastPrivileges is the TalosProxmox role of docs/install.md (with PCI mappings).
func leastPrivileges(pve9 bool) []string {
	agent := "VM.GuestAgent.Audit"
	if !pve9 {
		agent = "VM.Monitor"
	}

	return []string{
		"VM.Allocate", "VM.Audit", "VM.Config.CPU", "VM.Config.Memory", "VM.Config.Disk", "VM.Config.Network",
		"VM.Config.HWType", "VM.Config.Options", "VM.PowerMgmt", agent,
		"Datastore.AllocateSpace", "Datastore.AllocateTemplate", "Datastore.Allocate",
		"Sys.AccessNetwork", "SDN.Use", "Mapping.Use",
	}
}

const (
	leastPrivUser   = "talos@pve"
	leastPrivToken  = "talos@pve!pulumi"
	leastPrivSecret = "7c0a5d52-31b4-4b38-9a3b-least-priv"
)

// leastPrivAccess seeds the fake with the user talos@pve and its privilege separated token
// talos@pve!pulumi, both holding privs (the role) on every path of leastPrivPaths: a token's
// privileges are the intersection of its own ACLs and its user's.
func leastPrivAccess(hosts []string, privs []string) func(*pvefake.Options) {
	return func(o *pvefake.Options) {
		paths := []string{"/vms", "/storage/local", "/storage/local-lvm", "/sdn/zones/localnetwork/vmbr0", "/mapping/pci/gpu"}
		for _, h := range hosts {
			paths = append(paths, "/nodes/"+h)
		}

		a := &pvefake.Access{
			Users:  []pvefake.User{{ID: leastPrivUser}},
			Tokens: []pvefake.Token{{ID: leastPrivToken, Secret: leastPrivSecret, Privsep: true}},
			Roles:  []pvefake.Role{{ID: leastPrivRole, Privs: privs}},
		}

		for _, p := range paths {
			for _, who := range []string{leastPrivUser, leastPrivToken} {
				a.ACL = append(a.ACL, pvefake.ACL{Path: p, Role: leastPrivRole, UGID: who, Propagate: true})
			}
		}

		o.Access = a
	}
}

// leastPrivCluster is haCluster with the guest agent in the image and the GPU mapping on
// worker-2: every privilege of the role is used.
func leastPrivCluster(l *lab.Lab, name, version string) string {
	program := haCluster(l, name, version)
	program = strings.Replace(program, "        factoryUrl: ${factoryUrl}\n",
		"        factoryUrl: ${factoryUrl}\n        extensions: [siderolabs/qemu-guest-agent]\n", 1)

	return strings.Replace(program, fmt.Sprintf("worker-2: {hostNode: pve2, role: worker, ip: %s}", l.Address(22)),
		fmt.Sprintf("worker-2: {hostNode: pve2, role: worker, ip: %s, pciDevices: [{mapping: gpu}]}", l.Address(22)), 1)
}

func leastPrivConfig() map[string]lab.ConfigValue {
	return map[string]lab.ConfigValue{"proxmoxve:apiToken": {Value: leastPrivToken + "=" + leastPrivSecret, Secret: true}}
}

// TestLeastPrivilegeLifecycle: a privilege separated token holding exactly the documented role on
// exactly the documented paths creates the cluster, upgrades Talos, removes a worker (with its
// PCI device) and destroys it all, and Proxmox refuses none of its calls.
func TestLeastPrivilegeLifecycle(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	e := newEnv(t)

	hosts := []string{"pve1", "pve2", "pve3"}
	l, p := onLab(t, e, lab.Options{Subnet: 83, PVE: leastPrivAccess(hosts, leastPrivileges(true))}, func(l *lab.Lab) string {
		return leastPrivCluster(l, "leastpriv", "v1.11.5")
	})

	if err := p.SetConfig(t.Context(), leastPrivConfig()); err != nil {
		t.Fatal(err)
	}

	denied := func(step string) {
		t.Helper()

		if d := l.PVE.Denied(); len(d) > 0 {
			t.Fatalf("%s: Proxmox refused %d calls of the least-privilege token:\n%s", step, len(d), strings.Join(d, "\n"))
		}
	}

	mustRun(t, p, "preview")
	mustRun(t, p, "up", "--yes", "--skip-preview")
	denied("up")

	setTalosVersion(t, e, "v1.11.5", "v1.11.6")
	mustRun(t, p, "up", "--yes")
	denied("the Talos upgrade")

	editProgram(t, e, fmt.Sprintf("        worker-2: {hostNode: pve2, role: worker, ip: %s, pciDevices: [{mapping: gpu}]}\n", l.Address(22)), "")
	mustRun(t, p, "up", "--yes")
	denied("removing worker-2")

	if n := len(l.PVE.VMs()); n != 4 {
		t.Errorf("%d VMs after removing worker-2, want 4", n)
	}

	mustRun(t, p, "destroy", "--yes")
	denied("destroy")

	if vms := l.PVE.VMs(); len(vms) != 0 {
		t.Errorf("after destroy: VMs %v", vms)
	}

	for _, h := range hosts {
		for _, st := range []string{"local", "local-lvm"} {
			if vols := l.PVE.Volumes(h, st); len(vols) != 0 {
				t.Errorf("after destroy: volumes on %s/%s: %v", h, st, vols)
			}
		}
	}

}

// setRole rewrites the TalosProxmox role's privileges through the API, as root.
func setRole(t *testing.T, l *lab.Lab, privs []string) {
	t.Helper()

	body := url.Values{"privs": {strings.Join(privs, ",")}}
	req := httptest.NewRequest(http.MethodPut, "/api2/json/access/roles/"+leastPrivRole, strings.NewReader(body.Encode()))
	req.Header.Set("Authorization", "PVEAPIToken="+l.APIToken())
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")

	w := httptest.NewRecorder()
	l.PVE.ServeHTTP(w, req)

	if w.Code != http.StatusOK {
		t.Fatalf("setting the role: %d %s", w.Code, w.Body)
	}
}

// TestEachPrivilegeIsNeeded: with any one privilege taken out of the role, the preview fails
// before anything is created, naming that privilege and every path it is missing on; with the
// whole role it passes. One lab and one stack for every privilege, on PVE 9 and PVE 8.4.
func TestEachPrivilegeIsNeeded(t *testing.T) {
	t.Parallel() // its own labs (subnets), Pulumi home and backend

	for _, tc := range []struct {
		version string
		subnet  int
	}{{"9", 84}, {"8.4", 85}} {
		t.Run("PVE "+tc.version, func(t *testing.T) {
			e := newEnv(t)

			hosts := []string{"pve1", "pve2", "pve3"}
			role := leastPrivileges(tc.version == "9")
			l, p := onLab(t, e, lab.Options{Subnet: tc.subnet, PVEVersion: tc.version, PVE: leastPrivAccess(hosts, role)},
				func(l *lab.Lab) string { return leastPrivCluster(l, "eachpriv", "v1.11.5") })

			if err := p.SetConfig(t.Context(), leastPrivConfig()); err != nil {
				t.Fatal(err)
			}

			mustRun(t, p, "preview")

			for _, priv := range role {
				t.Run(priv, func(t *testing.T) {
					setRole(t, l, slices.DeleteFunc(slices.Clone(role), func(p string) bool { return p == priv }))
					defer setRole(t, l, role)

					out, err := p.Run(t.Context(), "preview")
					if err == nil {
						t.Fatalf("the preview passed without %s:\n%s", priv, out)
					}

					re := regexp.MustCompile(`proxmoxve:apiToken: the token ` + regexp.QuoteMeta(leastPrivToken) + ` lacks [^;]*\b` +
						regexp.QuoteMeta(priv) + ` \([^)]*\)[^;]* on (/\S+);`)
					if re.FindStringSubmatch(out) == nil {
						t.Errorf("the preview without %s does not name it with a path:\n%s", priv, out)
					}

					if len(l.PVE.VMs()) != 0 {
						t.Errorf("a VM exists after the preview without %s", priv)
					}
				})
			}

			if d := l.PVE.Denied(); len(d) > 0 {
				t.Errorf("the previews made calls Proxmox refused (the check must come first):\n%s", strings.Join(d, "\n"))
			}
		})
	}
}
