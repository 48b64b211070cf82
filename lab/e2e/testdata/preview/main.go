// Command preview runs the lab's Go programs through the Automation API, inline (no compile at
// every run, which the Go language host would otherwise do). BenchmarkPreview's two:
// `-program component` is the 3-control-plane cluster through the component, `-program
// handwritten` the same cluster written out with the proxmoxve and talos resources and invokes.
// The adoption tests': `-program adoptsource`, a cluster made as the Terraform modules make
// them, which a TalosProxmoxCluster then adopts (adoptsource.go). Usage:
//
//	preview -program component|handwritten|adoptsource -workdir DIR -stack NAME up|preview
//
// The work directory holds Pulumi.yaml and the stack's configuration (the lab's); the
// environment holds the Pulumi home, backend and passphrase. PREVIEW_VERBOSE=1 adds the
// engine's and plugins' logs at level 9 (timestamped JSON on stderr) to a preview, which shows
// where its time goes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/debug"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

func main() {
	program := flag.String("program", "", "component, handwritten or adoptsource")
	workdir := flag.String("workdir", ".", "the directory with Pulumi.yaml and the stack configuration")
	stack := flag.String("stack", "lab", "the stack")
	flag.Parse()

	programs := map[string]pulumi.RunFunc{"component": component, "handwritten": handwritten, "adoptsource": adoptSource}

	run, ok := programs[*program]
	if !ok || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: preview -program component|handwritten|adoptsource -workdir DIR -stack NAME up|preview")
		os.Exit(2)
	}

	if err := do(context.Background(), *workdir, *stack, run, flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func do(ctx context.Context, dir, name string, program pulumi.RunFunc, command string) error {
	ws, err := auto.NewLocalWorkspace(ctx, auto.WorkDir(dir), auto.Program(program))
	if err != nil {
		return err
	}

	stack, err := auto.SelectStack(ctx, name, ws)
	if err != nil {
		return err
	}

	switch command {
	case "up":
		_, err = stack.Up(ctx, optup.ProgressStreams(os.Stdout), optup.ErrorProgressStreams(os.Stderr))
	case "preview":
		opts := []optpreview.Option{optpreview.ExpectNoChanges(), optpreview.ProgressStreams(os.Stdout), optpreview.ErrorProgressStreams(os.Stderr)}
		if os.Getenv("PREVIEW_VERBOSE") != "" {
			lvl := uint(9)
			opts = append(opts, optpreview.DebugLogging(debug.LoggingOptions{LogLevel: &lvl, LogToStdErr: true, FlowToPlugins: true}))
		}
		_, err = stack.Preview(ctx, opts...)
	default:
		err = fmt.Errorf("unknown command %q: use up or preview", command)
	}

	return err
}
