// Command fleet reconciles a fleet of Talos clusters on Proxmox with the Pulumi Automation API:
// an inventory file lists the clusters, each cluster is a stack of its own, and the
// TalosProxmoxCluster component runs in-process. Its lifecycle resources (node upgrades, the
// health gate, …) are served by the talos-proxmox plugin, which must be installed with the
// proxmoxve and talos plugins.
//
//	fleet [-inventory fleet.yaml] [-workdir DIR] [-parallel 2] [-action up|preview|destroy] [-expect-no-changes]
//
// At most -parallel clusters run at a time. Each cluster's progress is printed as it comes,
// every line prefixed with "[cluster] "; a cluster that fails does not stop the others. At the
// end a summary lists every cluster with its result, duration, resource changes and endpoint, and
// the exit status is 1 when any cluster failed.
//
// The Pulumi CLI must be on PATH; the state backend and the secrets passphrase come from the usual
// PULUMI_BACKEND_URL (or `pulumi login`) and PULUMI_CONFIG_PASSPHRASE. Proxmox credentials never
// appear in the inventory: see Proxmox.APITokenEnv.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"text/tabwriter"
	"time"
)

func main() {
	inventory := flag.String("inventory", "fleet.yaml", "inventory file listing the clusters")
	workdir := flag.String("workdir", ".", "directory holding one project directory per cluster (<workdir>/<cluster>/Pulumi.<cluster>.yaml)")
	parallel := flag.Int("parallel", 2, "clusters reconciled at the same time")
	action := flag.String("action", "up", "what to do with every cluster: up, preview or destroy")
	expectNoChanges := flag.Bool("expect-no-changes", false, "with -action preview: a cluster fails if anything would change")
	flag.Parse()

	if flag.NArg() != 0 || *parallel < 1 {
		flag.Usage()
		os.Exit(2)
	}

	switch *action {
	case "up", "preview", "destroy":
	default:
		fmt.Fprintf(os.Stderr, "fleet: unknown -action %q: use up, preview or destroy\n", *action)
		os.Exit(2)
	}

	clusters, err := LoadInventory(*inventory)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleet: %v\n", err)
		os.Exit(1)
	}

	dir, err := filepath.Abs(*workdir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleet: %v\n", err)
		os.Exit(1)
	}

	// Ctrl-C: running clusters are cancelled through the CLI (their state stays consistent), the
	// others are not started.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	fmt.Printf("fleet: %s of %d clusters, %d at a time\n", *action, len(clusters), *parallel)

	r := stackReconciler{workdir: dir, action: *action, expectNoChanges: *expectNoChanges}
	results := runFleet(ctx, clusters, *parallel, os.Stdout, r.reconcile)

	if failed := printSummary(os.Stdout, results); failed > 0 {
		os.Exit(1)
	}
}

// printSummary writes one row per cluster and returns how many failed.
func printSummary(w io.Writer, results []Result) int {
	failed := 0

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "\nCLUSTER\tRESULT\tDURATION\tCHANGES\tENDPOINT\tERROR")

	for _, r := range results {
		result, duration, errText := "ok", r.Duration.Round(100*time.Millisecond).String(), ""

		switch {
		case r.Err != nil && !r.Started:
			result, duration, errText = "skipped", "-", shortError(r.Err)
			failed++
		case r.Err != nil:
			result, errText = "failed", shortError(r.Err)
			failed++
		}

		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Cluster, result, duration, dash(r.Changes), dash(r.Endpoint), errText)
	}

	_ = tw.Flush()
	_, _ = fmt.Fprintf(w, "%d of %d clusters failed\n", failed, len(results))

	return failed
}

func dash(s string) string {
	if s == "" {
		return "-"
	}

	return s
}
