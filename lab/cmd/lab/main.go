// Command lab runs the local lab for your own Pulumi programs (`make lab-up`, `make lab-down`).
//
//	lab up   [-dir DIR] [-subnet N]   start the lab and keep it running until Ctrl-C or `lab down`
//	lab down [-dir DIR]               stop the lab that `lab up` started in DIR
//
// `lab up` starts the Proxmox VE API fake, the Image Factory fake, the chart repository and the
// emulated Talos nodes on loopback (127.0.N.0/24), installs the plugins a program needs on the lab
// into a Pulumi home of its own (DIR/pulumi-home: the component built from this checkout, the
// lab's talos stand-in and the bridged bpg proxmoxve provider — never into your own
// ~/.pulumi, where they would shadow the real providers), and writes:
//
//	DIR/env.sh              PULUMI_HOME, a file backend in DIR/state, the passphrase, the pinned
//	                        pulumi CLI on PATH; `source` it in the shell you run pulumi from
//	DIR/stack-config.json   the stack configuration that points a program at the lab, for
//	                        `pulumi config set-all --json "$(cat DIR/stack-config.json)"`
//
// Every lab starts empty, with an empty state backend. Stopping it removes its VMs and nodes:
// destroy your stacks first (or remove them with `pulumi stack rm --force`).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}

	var err error

	switch os.Args[1] {
	case "up":
		err = up(os.Args[2:])
	case "down":
		err = down(os.Args[2:])
	default:
		usage()
	}

	if err != nil {
		fmt.Fprintln(os.Stderr, "lab:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: lab up [-dir DIR] [-subnet N] | lab down [-dir DIR]")
	os.Exit(2)
}

// defaultDir is $TALOS_LAB_DIR, else .cache/lab.
func defaultDir() string {
	if d := os.Getenv("TALOS_LAB_DIR"); d != "" {
		return d
	}

	return filepath.Join(".cache", "lab")
}

func up(args []string) error {
	fs := flag.NewFlagSet("lab up", flag.ExitOnError)
	dir := fs.String("dir", defaultDir(), "where the lab keeps its Pulumi home, state and env.sh ($TALOS_LAB_DIR)")
	subnet := fs.Int("subnet", envInt("TALOS_LAB_SUBNET", 2), "the third octet of the lab's 127.0.N.0/24 ($TALOS_LAB_SUBNET)")
	toolchain := fs.String("toolchain", os.Getenv("PULUMI_TOOLCHAIN_BIN"), "directory with the pulumi CLI and language hosts")
	plugin := fs.String("plugin", os.Getenv("TALOS_PROXMOX_PLUGIN"), "the built pulumi-resource-talos-proxmox")
	version := fs.String("plugin-version", os.Getenv("TALOS_PROXMOX_VERSION"), "its version (provider/VERSION)")
	labBin := fs.String("lab-bin", os.Getenv("TALOS_LAB_BIN"), "directory with the lab's child provider plugins")
	_ = fs.Parse(args)

	for name, v := range map[string]string{"-toolchain": *toolchain, "-plugin": *plugin, "-plugin-version": *version, "-lab-bin": *labBin} {
		if v == "" {
			return fmt.Errorf("%s is not set; run the lab with `make lab-up`, which builds and passes everything", name)
		}
	}

	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}

	if pid, ok := running(abs); ok {
		return fmt.Errorf("a lab is already running in %s (pid %d); stop it with `make lab-down` (or `lab down -dir %s`)", abs, pid, abs)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	s := &session{dir: abs, subnet: *subnet, toolchain: *toolchain, plugins: lab.Plugins(*plugin, *version, *labBin)}

	return s.run(ctx)
}

func down(args []string) error {
	fs := flag.NewFlagSet("lab down", flag.ExitOnError)
	dir := fs.String("dir", defaultDir(), "the directory `lab up` runs in ($TALOS_LAB_DIR)")
	_ = fs.Parse(args)

	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}

	pid, ok := running(abs)
	if !ok {
		fmt.Printf("no lab is running in %s\n", abs)
		return nil
	}

	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stopping the lab (pid %d): %w", pid, err)
	}

	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, ok := running(abs); !ok {
			fmt.Printf("lab in %s stopped\n", abs)
			return nil
		}
	}

	return fmt.Errorf("the lab (pid %d) did not stop within a minute", pid)
}

// running is the pid of the lab running in dir, if its pid file names a live process.
func running(dir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "lab.pid"))
	if err != nil {
		return 0, false
	}

	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}

	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return 0, false
	}

	return pid, true
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}

	return def
}
