package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// The passphrase of the lab's stacks: a lab credential (its state holds only lab secrets), never
// one to use with a real backend.
const passphrase = "talos-proxmox-lab"

// session is one `lab up`.
type session struct {
	dir       string
	subnet    int
	toolchain string
	plugins   []lab.Plugin
}

func (s *session) run(ctx context.Context) error {
	if s.subnet < 1 || s.subnet > 254 {
		return fmt.Errorf("-subnet %d: pick the third octet of a free 127.0.N.0/24, 1 to 254", s.subnet)
	}

	home, state := filepath.Join(s.dir, "pulumi-home"), filepath.Join(s.dir, "state")

	// A fresh lab has no VMs: state from an earlier lab would describe VMs that are gone.
	if err := os.RemoveAll(state); err != nil {
		return err
	}

	for _, d := range []string{home, state} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}

	fmt.Printf("== starting the lab on 127.0.%d.0/24 (Proxmox VE API fake, Image Factory fake, chart repository, emulated Talos nodes)\n", s.subnet)

	l, err := lab.Start(ctx, lab.Options{Subnet: s.subnet, Logf: func(format string, args ...any) {
		if strings.HasPrefix(format, "lab:") {
			fmt.Printf("   "+format+"\n", args...)
		}
	}})
	if err != nil {
		return err
	}
	defer l.Close()

	env := s.environment(home, state)

	p := &lab.Pulumi{Bin: s.toolchain, Dir: s.dir, Env: append(os.Environ(), env...)}
	if err := p.InstallPlugins(ctx, s.plugins); err != nil {
		return err
	}

	config := l.StackConfig()

	doc, err := lab.ConfigJSON(config)
	if err != nil {
		return err
	}

	if err := s.write("stack-config.json", doc+"\n"); err != nil {
		return err
	}

	if err := s.write("env.sh", envScript(env, s.toolchain)); err != nil {
		return err
	}

	if err := s.write("lab.pid", strconv.Itoa(os.Getpid())+"\n"); err != nil {
		return err
	}
	defer os.Remove(filepath.Join(s.dir, "lab.pid")) //nolint:errcheck

	s.describe(l, config)

	<-ctx.Done()

	if n := len(l.PVE.VMs()); n > 0 {
		fmt.Printf("== stopping the lab: its %d VMs go with it; stacks that still list them: `pulumi stack rm --force`\n", n)
	} else {
		fmt.Println("== stopping the lab")
	}

	return nil
}

// environment is what a shell needs to run pulumi against the lab.
func (s *session) environment(home, state string) []string {
	return []string{
		"TALOS_LAB_DIR=" + s.dir,
		"PULUMI_HOME=" + home,
		"PULUMI_BACKEND_URL=file://" + state,
		"PULUMI_CONFIG_PASSPHRASE=" + passphrase,
		"PULUMI_SKIP_UPDATE_CHECK=1",
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true",
		// The talos stand-in gives up on an unreachable lab node after 2 minutes, not Talos' 10.
		"PULUMI_TALOS_LAB_TIMEOUT=2m",
	}
}

// envScript is env.sh: the environment, and the pinned pulumi CLI first on PATH.
func envScript(env []string, toolchain string) string {
	var b strings.Builder

	b.WriteString("# Written by `lab up`: source it to run pulumi against the running lab.\n")

	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(v))
	}

	fmt.Fprintf(&b, "export PATH=%s:\"$PATH\"\n", shellQuote(toolchain))

	return b.String()
}

func (s *session) write(name, contents string) error {
	f := filepath.Join(s.dir, name)
	tmp := f + ".tmp"

	if err := os.WriteFile(tmp, []byte(contents), 0o600); err != nil {
		return err
	}

	return os.Rename(tmp, f)
}

// describe prints what the lab serves and how to use it.
func (s *session) describe(l *lab.Lab, config map[string]lab.ConfigValue) {
	env := filepath.Join(s.dir, "env.sh")
	cfg := filepath.Join(s.dir, "stack-config.json")

	fmt.Printf(`== the lab is running (stop it with Ctrl-C or `+"`make lab-down`"+`)
   Proxmox VE API  %s  (API token %s; TLS not verified: proxmoxve:insecure true)
   hosts           %s
   datastores      local (import, iso, snippets) and local-lvm (images) on every host
   bridges         any name (vmbr0 is what the component uses by default)
   Image Factory   %s
   charts          %s (Cilium 1.18.0, hello 1.0.0 and 1.1.0)
   addresses       VIP %s, nodes %s … (gateway %s, /24); DHCP leases from 127.0.%d.128/25

   In the shell you run pulumi from:
     source %s
     pulumi config set-all --json "$(cat %s)"    # in your stack: the values above, as stack config
`, l.PVE.URL(), l.APIToken(), strings.Join(l.Hosts(), ", "), l.Factory.URL(), l.Charts.URL,
		l.Address(10), strings.Join([]string{l.Address(11), l.Address(12), l.Address(13), l.Address(21), l.Address(22)}, ", "),
		l.Address(1), s.subnet, shellQuote(env), shellQuote(cfg))

	fmt.Println("   The stack configuration keys (examples/yaml's; use the ones your program reads):")

	for _, k := range sortedKeys(config) {
		v := config[k].Value
		if config[k].Secret {
			v = "[secret]"
		}

		fmt.Printf("     %-22s %s\n", k, v)
	}
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func sortedKeys(m map[string]lab.ConfigValue) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}

	slices.Sort(keys)

	return keys
}
