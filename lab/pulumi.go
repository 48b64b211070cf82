package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
)

// Pulumi runs the Pulumi CLI in a project directory, as the demo and the lab's end-to-end
// tests do.
type Pulumi struct {
	// Bin is the directory holding `pulumi` and the language hosts.
	Bin string
	// Dir is the project directory.
	Dir string
	// Env is the complete environment (PULUMI_HOME, PULUMI_BACKEND_URL, …).
	Env []string
	// Output, when set, also receives everything the CLI prints (progress for the demo).
	Output io.Writer
}

// Run runs `pulumi <args> --non-interactive` and returns its combined output.
func (p *Pulumi) Run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(p.Bin, "pulumi"), append(args, "--non-interactive")...)
	cmd.Dir = p.Dir
	cmd.Env = p.Env

	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if p.Output != nil {
		w := io.MultiWriter(&buf, p.Output)
		cmd.Stdout, cmd.Stderr = w, w
	}

	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("pulumi %v: %w", args, err)
	}

	return buf.String(), err
}

// Plugin is a provider plugin binary to install under a name and version.
type Plugin struct {
	Name, Version, File string
}

// Plugins are the plugins a program needs in the lab: the component (built from this
// checkout, at its version in provider/VERSION), and the two child providers' lab builds under
// the versions the component's children ask for.
func Plugins(componentPlugin, componentVersion, labBin string) []Plugin {
	return []Plugin{
		{Name: "talos-proxmox", Version: componentVersion, File: componentPlugin},
		{Name: "talos", Version: "0.7.1", File: filepath.Join(labBin, "pulumi-resource-talos")},
		{Name: "proxmoxve", Version: "7.13.0", File: filepath.Join(labBin, "pulumi-resource-proxmoxve")},
	}
}

// InstallPlugins installs plugin binaries into PULUMI_HOME, replacing earlier builds.
func (p *Pulumi) InstallPlugins(ctx context.Context, plugins []Plugin) error {
	for _, pl := range plugins {
		if out, err := p.Run(ctx, "plugin", "install", "resource", pl.Name, pl.Version, "--file", pl.File, "--reinstall"); err != nil {
			return fmt.Errorf("installing the %s plugin: %w\n%s", pl.Name, err, out)
		}
	}

	return nil
}

// SetConfig sets stack configuration in one `pulumi config set-all` (one CLI start instead of one
// per value); JSON lists become YAML lists (so typed `array` config reads them), secrets are
// encrypted.
func (p *Pulumi) SetConfig(ctx context.Context, config map[string]ConfigValue) error {
	doc, err := ConfigJSON(config)
	if err != nil {
		return err
	}

	if out, err := p.Run(ctx, "config", "set-all", "--json", doc); err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}

	return nil
}

// ConfigJSON is config as the document `pulumi config set-all --json` takes: JSON lists become
// YAML lists (so typed `array` config reads them), secrets are marked to be encrypted.
func ConfigJSON(config map[string]ConfigValue) (string, error) {
	type entry struct {
		Value       *string `json:"value"`
		ObjectValue any     `json:"objectValue,omitempty"`
		Secret      bool    `json:"secret"`
	}

	all := make(map[string]entry, len(config))

	for k, v := range config {
		e := entry{Value: &v.Value, Secret: v.Secret}

		var list []string
		if json.Unmarshal([]byte(v.Value), &list) == nil {
			e.ObjectValue = list
		}

		all[k] = e
	}

	doc, err := json.MarshalIndent(all, "", "  ")

	return string(doc), err
}
