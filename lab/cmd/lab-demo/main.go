// Command lab-demo is what `make demo` runs: it starts the local lab on loopback, runs
// `pulumi up` of examples/yaml against it with the real Pulumi CLI, our plugin, the bridged
// bpg Proxmox provider and the talos stand-in, prints the outputs, writes the kubeconfig with
// mode 0600 and stops the lab. Each run starts from a fresh lab and a fresh stack.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

func main() {
	toolchain := flag.String("toolchain", os.Getenv("PULUMI_TOOLCHAIN_BIN"), "directory with the pulumi CLI and language hosts")
	plugin := flag.String("plugin", os.Getenv("TALOS_PROXMOX_PLUGIN"), "the built pulumi-resource-talos-proxmox")
	version := flag.String("plugin-version", os.Getenv("TALOS_PROXMOX_VERSION"), "its version (provider/VERSION)")
	labBin := flag.String("lab-bin", os.Getenv("TALOS_LAB_BIN"), "directory with the lab's child provider plugins")
	example := flag.String("example", "examples/yaml", "the example program to deploy")
	workdir := flag.String("workdir", ".cache/demo", "where the project copy, its state and the kubeconfig go")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	if err := run(ctx, *toolchain, *plugin, *version, *labBin, *example, *workdir); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, toolchain, plugin, version, labBin, example, workdir string) error {
	start := time.Now()

	dir, err := filepath.Abs(workdir)
	if err != nil {
		return err
	}

	if err := os.RemoveAll(dir); err != nil {
		return err
	}

	if err := os.MkdirAll(filepath.Join(dir, "backend"), 0o755); err != nil {
		return err
	}

	program, err := os.ReadFile(filepath.Join(example, "Pulumi.yaml"))
	if err != nil {
		return err
	}

	if err := os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), program, 0o644); err != nil {
		return err
	}

	fmt.Println("== starting the lab on loopback (Proxmox VE API fake, Image Factory fake, emulated Talos nodes)")

	l, err := lab.Start(ctx, lab.Options{Logf: func(format string, args ...any) {
		if strings.HasPrefix(format, "lab:") {
			fmt.Printf("   "+format+"\n", args...)
		}
	}})
	if err != nil {
		return err
	}
	defer l.Close()

	fmt.Printf("   Proxmox VE API %s (hosts %s), Image Factory %s\n", l.PVE.URL(), strings.Join(l.Hosts(), ", "), l.Factory.URL())

	p := &lab.Pulumi{
		Bin: toolchain,
		Dir: dir,
		Env: append(os.Environ(),
			"PATH="+toolchain+string(os.PathListSeparator)+os.Getenv("PATH"),
			"PULUMI_BACKEND_URL=file://"+filepath.Join(dir, "backend"),
			"PULUMI_TALOS_LAB_TIMEOUT=2m",
		),
	}

	if err := p.InstallPlugins(ctx, lab.Plugins(plugin, version, labBin)); err != nil {
		return err
	}

	if out, err := p.Run(ctx, "stack", "init", "demo"); err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}

	if err := p.SetConfig(ctx, l.StackConfig()); err != nil {
		return err
	}

	fmt.Println("== pulumi up of", example)

	p.Output = os.Stdout
	if _, err := p.Run(ctx, "up", "--yes", "--skip-preview"); err != nil {
		return err
	}
	p.Output = nil

	out, err := p.Run(ctx, "stack", "output", "--json", "--show-secrets")
	if err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}

	var outputs struct {
		Endpoint   string         `json:"endpoint"`
		Kubeconfig string         `json:"kubeconfig"`
		Nodes      map[string]any `json:"nodes"`
		Helm       map[string]any `json:"helmReleases"`
	}
	if err := json.Unmarshal([]byte(out), &outputs); err != nil {
		return err
	}

	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(outputs.Kubeconfig), 0o600); err != nil {
		return err
	}

	nodes, _ := json.MarshalIndent(outputs.Nodes, "   ", "  ")
	helm, _ := json.MarshalIndent(outputs.Helm, "   ", "  ")

	fmt.Println("== outputs")
	fmt.Println("   endpoint:  ", outputs.Endpoint)
	fmt.Println("   nodes:     ", string(nodes))
	fmt.Println("   helmReleases:", string(helm))
	fmt.Printf("   kubeconfig: written to %s (mode 0600)\n", kubeconfig)
	fmt.Printf("== done in %s; stopping the lab (the stack's state stays in %s)\n", time.Since(start).Round(time.Second), dir)

	return nil
}
