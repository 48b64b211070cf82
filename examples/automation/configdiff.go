package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
)

// nodeConfigType is the type of the component's per-node configuration resources, whose
// redactedConfiguration (every secret value replaced by a fingerprint) is safe to print.
const nodeConfigType = "talos-proxmox:lifecycle:NodeConfig"

// printConfigChanges prints, for each node whose machine configuration a preview changes, the
// unified diff of its redacted configuration (the recorded one against the declared one), until
// the event stream closes. What the component logs about each (which documents change, live or
// with a reboot, drift) is in the preview's own output.
func printConfigChanges(w io.Writer, evs <-chan events.EngineEvent) {
	for ev := range evs {
		if ev.ResourcePreEvent == nil {
			continue
		}

		md := ev.ResourcePreEvent.Metadata
		if md.Type != nodeConfigType || md.Old == nil || md.New == nil {
			continue
		}

		before, _ := md.Old.Outputs["redactedConfiguration"].(string)
		after, _ := md.New.Inputs["redactedConfiguration"].(string)

		if before == after {
			continue
		}

		diff, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(before), B: difflib.SplitLines(after),
			FromFile: "recorded", ToFile: "declared", Context: 2,
		})
		if err == nil {
			_, _ = fmt.Fprintf(w, "configuration of %s:\n%s\n", nodeName(md.URN), diff)
		}
	}
}

// nodeName is the resource name a URN ends with ("homelab-cp-1-node-config").
func nodeName(urn string) string {
	return urn[strings.LastIndex(urn, "::")+2:]
}
