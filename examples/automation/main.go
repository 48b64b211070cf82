// Command automation manages Talos clusters on Proxmox from a Go program with the Pulumi
// Automation API. The TalosProxmoxCluster component runs in-process (its constructor used as a
// library); its day-2 resources (health gate, upgrades, membership, manifest sync) are served by
// the talos-proxmox plugin, which must be installed at the component's version. One stack is one
// cluster; pass several -stack flags to manage several clusters in one run.
//
//	automation [-workdir DIR] -stack homelab [-stack lab] up|preview|refresh|destroy|kubeconfig
//
// Each stack's site-specific values are ordinary stack configuration in DIR (Pulumi.<stack>.yaml;
// see docs/languages.md): hosts, addresses, gateway, vip, … . Proxmox credentials never appear in code:
// set them as secret stack config (pulumi config set --secret proxmoxve:apiToken …) or export
// PROXMOX_VE_ENDPOINT and PROXMOX_VE_API_TOKEN, which this program stores as (secret) stack config.
//
// The Pulumi CLI must be on PATH; the state backend and passphrase come from the usual
// PULUMI_BACKEND_URL and PULUMI_CONFIG_PASSPHRASE variables.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
)

const project = "talos-homelab-automation"

type stackNames []string

func (s *stackNames) String() string     { return strings.Join(*s, ",") }
func (s *stackNames) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var stacks stackNames

	workdir := flag.String("workdir", ".", "directory holding Pulumi.<stack>.yaml config files and written kubeconfigs")
	expectNoChanges := flag.Bool("expect-no-changes", false, "with preview or refresh: fail if anything would change")
	flag.Var(&stacks, "stack", "stack (cluster) to manage; repeat for several")
	flag.Usage = func() {
		_, _ = fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [-workdir DIR] -stack NAME [-stack NAME…] up|preview|refresh|destroy|kubeconfig\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()

	if flag.NArg() != 1 || len(stacks) == 0 {
		flag.Usage()
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	var failed []string
	for _, name := range stacks {
		if err := run(ctx, *workdir, name, flag.Arg(0), *expectNoChanges); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
			failed = append(failed, name)
		}
	}

	if len(failed) > 0 {
		fmt.Fprintf(os.Stderr, "failed: %s\n", strings.Join(failed, ", "))
		os.Exit(1)
	}
}

func run(ctx context.Context, workdir, name, command string, expectNoChanges bool) error {
	dir, err := filepath.Abs(workdir)
	if err != nil {
		return err
	}

	stack, err := auto.UpsertStackInlineSource(ctx, name, project, program,
		auto.WorkDir(dir),
		auto.Project(workspace.Project{Name: project, Runtime: workspace.NewProjectRuntimeInfo("go", nil)}),
	)
	if err != nil {
		return fmt.Errorf("selecting the stack: %w", err)
	}

	if err := credentialsFromEnvironment(ctx, stack); err != nil {
		return err
	}

	switch command {
	case "preview":
		opts := []optpreview.Option{optpreview.ProgressStreams(os.Stdout), optpreview.ErrorProgressStreams(os.Stderr)}
		if expectNoChanges {
			opts = append(opts, optpreview.ExpectNoChanges())
		}

		// The preview's events carry each node's redacted configuration, before and after: print
		// what changes on each node.
		evs := make(chan events.EngineEvent)
		printed := make(chan struct{})

		go func() {
			printConfigChanges(os.Stdout, evs)
			close(printed)
		}()

		_, err = stack.Preview(ctx, append(opts, optpreview.EventStreams(evs))...)
		<-printed

		return err
	case "up":
		res, err := stack.Up(ctx, optup.ProgressStreams(os.Stdout), optup.ErrorProgressStreams(os.Stderr))
		if err != nil {
			return err
		}

		return writeKubeconfig(dir, name, res.Outputs)
	case "refresh":
		opts := []optrefresh.Option{optrefresh.ProgressStreams(os.Stdout), optrefresh.ErrorProgressStreams(os.Stderr)}
		if expectNoChanges {
			opts = append(opts, optrefresh.ExpectNoChanges())
		}

		_, err = stack.Refresh(ctx, opts...)

		return err
	case "destroy":
		_, err = stack.Destroy(ctx, optdestroy.ProgressStreams(os.Stdout), optdestroy.ErrorProgressStreams(os.Stderr))
		return err
	case "kubeconfig":
		outs, err := stack.Outputs(ctx)
		if err != nil {
			return err
		}

		return writeKubeconfig(dir, name, outs)
	default:
		return fmt.Errorf("unknown command %q: use up, preview, refresh, destroy or kubeconfig", command)
	}
}

// credentialsFromEnvironment stores PROXMOX_VE_ENDPOINT and PROXMOX_VE_API_TOKEN, when set, as
// the proxmoxve provider's stack config (the token as a secret), the way an ESC environment
// would inject them.
func credentialsFromEnvironment(ctx context.Context, stack auto.Stack) error {
	for env, key := range map[string]struct {
		name   string
		secret bool
	}{
		"PROXMOX_VE_ENDPOINT":  {"proxmoxve:endpoint", false},
		"PROXMOX_VE_API_TOKEN": {"proxmoxve:apiToken", true},
		"PROXMOX_VE_INSECURE":  {"proxmoxve:insecure", false},
	} {
		if v, ok := os.LookupEnv(env); ok && v != "" {
			if err := stack.SetConfig(ctx, key.name, auto.ConfigValue{Value: v, Secret: key.secret}); err != nil {
				return fmt.Errorf("setting %s from %s: %w", key.name, env, err)
			}
		}
	}

	return nil
}

// writeKubeconfig writes the stack's kubeconfig to <dir>/<stack>.kubeconfig, readable by the
// owner only.
func writeKubeconfig(dir, stack string, outputs auto.OutputMap) error {
	out, ok := outputs["kubeconfig"]
	if !ok {
		return errors.New("the stack has no kubeconfig output yet: run up first")
	}

	text, ok := out.Value.(string)
	if !ok || text == "" {
		return errors.New("the kubeconfig output is empty")
	}

	path := filepath.Join(dir, stack+".kubeconfig")
	if err := writePrivate(path, []byte(text)); err != nil {
		return err
	}

	fmt.Printf("%s: kubeconfig written to %s (mode 0600); endpoint %v\n", stack, path, outputs["endpoint"].Value)

	return nil
}

// writePrivate writes a file with mode 0600, replacing any existing file atomically and fixing
// the mode of one that was more open.
func writePrivate(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kubeconfig-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // after the rename: nothing left to remove

	if err := tmp.Chmod(0o600); err != nil {
		return errors.Join(err, tmp.Close())
	}

	if _, err := tmp.Write(data); err != nil {
		return errors.Join(err, tmp.Close())
	}

	if err := tmp.Close(); err != nil {
		return err
	}

	return os.Rename(tmp.Name(), path)
}
