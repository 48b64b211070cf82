package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
)

// project is the Pulumi project of every cluster's stack.
const project = "talos-fleet"

// stackReconciler runs one action on a cluster's stack through the Automation API. Each cluster
// has a project directory of its own below workdir (<workdir>/<cluster>/, holding
// Pulumi.<cluster>.yaml), so that clusters running side by side never share a file.
type stackReconciler struct {
	workdir string
	// action is up, preview or destroy.
	action string
	// expectNoChanges makes a preview fail when anything would change.
	expectNoChanges bool
}

// reconcile selects (or creates) the cluster's stack, points it at its Proxmox API and runs the
// action, streaming the CLI's progress to progress.
func (r stackReconciler) reconcile(ctx context.Context, c Cluster, progress io.Writer) Result {
	dir := filepath.Join(r.workdir, c.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Result{Err: err}
	}

	stack, err := auto.UpsertStackInlineSource(ctx, c.Name, project, program(c),
		auto.WorkDir(dir),
		auto.Project(workspace.Project{Name: project, Runtime: workspace.NewProjectRuntimeInfo("go", nil)}),
	)
	if err != nil {
		return Result{Err: fmt.Errorf("selecting the stack: %w", err)}
	}

	if err := setProxmoxConfig(ctx, stack, c.Proxmox); err != nil {
		return Result{Err: err}
	}

	switch r.action {
	case "up":
		res, err := stack.Up(ctx, optup.ProgressStreams(progress), optup.ErrorProgressStreams(progress))
		if err != nil {
			return Result{Err: err}
		}

		return Result{Endpoint: outputString(res.Outputs, "endpoint"), Changes: changes(*res.Summary.ResourceChanges)}
	case "preview":
		opts := []optpreview.Option{optpreview.ProgressStreams(progress), optpreview.ErrorProgressStreams(progress)}
		if r.expectNoChanges {
			opts = append(opts, optpreview.ExpectNoChanges())
		}

		res, err := stack.Preview(ctx, opts...)
		if err != nil {
			return Result{Err: err}
		}

		outs, err := stack.Outputs(ctx)
		if err != nil {
			return Result{Err: err}
		}

		summary := make(map[string]int, len(res.ChangeSummary))
		for op, n := range res.ChangeSummary {
			summary[string(op)] = n
		}

		return Result{Endpoint: outputString(outs, "endpoint"), Changes: changes(summary)}
	case "destroy":
		res, err := stack.Destroy(ctx, optdestroy.ProgressStreams(progress), optdestroy.ErrorProgressStreams(progress))
		if err != nil {
			return Result{Err: err}
		}

		return Result{Changes: changes(*res.Summary.ResourceChanges)}
	default:
		return Result{Err: fmt.Errorf("unknown action %q: use up, preview or destroy", r.action)}
	}
}

// setProxmoxConfig stores the cluster's Proxmox endpoint and API token as the proxmoxve
// provider's stack config (the token as a secret), taken from the inventory and the environment
// the way a CI job or an ESC environment would inject them. Nothing is set for what neither gives:
// the stack's existing config applies.
func setProxmoxConfig(ctx context.Context, stack auto.Stack, p Proxmox) error {
	cfg := auto.ConfigMap{}

	if endpoint := or(p.Endpoint, os.Getenv("PROXMOX_VE_ENDPOINT")); endpoint != "" {
		cfg["proxmoxve:endpoint"] = auto.ConfigValue{Value: endpoint}
	}

	tokenEnv := or(p.APITokenEnv, "PROXMOX_VE_API_TOKEN")
	switch token, ok := os.LookupEnv(tokenEnv); {
	case ok && token != "":
		cfg["proxmoxve:apiToken"] = auto.ConfigValue{Value: token, Secret: true}
	case p.APITokenEnv != "":
		return fmt.Errorf("proxmox.apiTokenEnv: %s is not set; export the Proxmox API token there", p.APITokenEnv)
	}

	if p.Insecure != nil {
		cfg["proxmoxve:insecure"] = auto.ConfigValue{Value: strconv.FormatBool(*p.Insecure)}
	} else if v := os.Getenv("PROXMOX_VE_INSECURE"); v != "" {
		cfg["proxmoxve:insecure"] = auto.ConfigValue{Value: v}
	}

	if len(cfg) == 0 {
		return nil
	}

	if err := stack.SetAllConfig(ctx, cfg); err != nil {
		return fmt.Errorf("setting the proxmoxve provider's config: %w", err)
	}

	return nil
}

func outputString(outs auto.OutputMap, name string) string {
	if v, ok := outs[name].Value.(string); ok {
		return v
	}

	return ""
}

// changes renders resource operation counts as "create=3 same=1", sorted by operation.
func changes(counts map[string]int) string {
	parts := make([]string, 0, len(counts))
	for _, op := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s=%d", op, counts[op]))
	}

	return strings.Join(parts, " ")
}

// shortError is the line of err that says what went wrong. Automation API errors carry the CLI's
// output, where an error is often a heading over a list ("error: an unhandled error occurred: 1
// error occurred:", "* invalid … inputs (2 problems):", "- nodes.cp-1.hostNode: …"): the first
// item that is not itself a heading is the answer; else the first "error:" message that is not a
// heading; else err's first line.
func shortError(err error) string {
	text := err.Error()
	fallback, heading := "", false

	for line := range strings.Lines(text) {
		t := strings.TrimSpace(line)

		if heading {
			if item, ok := bullet(t); ok {
				if !strings.HasSuffix(item, ":") {
					return item
				}

				continue // a heading within the list
			}

			heading = false
		}

		if _, msg, ok := strings.Cut(t, "error: "); ok {
			msg = strings.TrimSpace(msg)

			switch {
			case strings.HasSuffix(msg, ":"):
				heading = true
			case fallback == "" && msg != "":
				fallback = msg
			}
		}
	}

	if fallback != "" {
		return fallback
	}

	first, _, _ := strings.Cut(text, "\n")

	return strings.TrimSpace(first)
}

// bullet is the text of a list item ("* …" or "- …").
func bullet(line string) (string, bool) {
	for _, mark := range []string{"* ", "- "} {
		if item, ok := strings.CutPrefix(line, mark); ok {
			return strings.TrimSpace(item), true
		}
	}

	return "", false
}
