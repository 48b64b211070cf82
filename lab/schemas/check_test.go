package schemas

import (
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

func TestCheckReportsWhatTheSchemaForbids(t *testing.T) {
	t.Parallel()

	pve, err := Proxmoxve()
	if err != nil {
		t.Fatal(err)
	}

	ok := property.NewMap(map[string]property.Value{
		"nodeName": property.New("pve1"),
		"disks": property.New([]property.Value{property.New(property.NewMap(map[string]property.Value{
			"interface": property.New("scsi0"), "size": property.New(20.0),
		}))}),
		"tags": property.New(property.Computed),
	})
	if f := pve.CheckResource("proxmoxve:VM/virtualMachine:VirtualMachine", ok); len(f) != 0 {
		t.Fatalf("valid inputs rejected: %v", f)
	}

	bad := property.NewMap(map[string]property.Value{
		"nodeNme": property.New("pve1"),
		"disks": property.New([]property.Value{property.New(property.NewMap(map[string]property.Value{
			"interface": property.New("scsi0"), "size": property.New("20G"),
		}))}),
	})

	var got []string
	for _, f := range pve.CheckResource("proxmoxve:VM/virtualMachine:VirtualMachine", bad) {
		got = append(got, f.Property+": "+f.Reason)
	}

	want := []string{`disks[0].size: expected a number, got a string`, `nodeNme: unknown property "nodeNme"`, `nodeName: missing required property "nodeName"`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("failures:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	talos, err := Talos()
	if err != nil {
		t.Fatal(err)
	}

	// A reference written "#types/…" (missing slash) in the published schema resolves.
	args := property.NewMap(map[string]property.Value{
		"clusterName": property.New("c"), "clusterEndpoint": property.New("https://x:6443"), "machineType": property.New("worker"),
		"machineSecrets": property.New(property.NewMap(map[string]property.Value{"bogus": property.New(1.0)})),
	})
	if f := talos.CheckFunction("talos:machine/getConfiguration:getConfiguration", args); len(f) == 0 {
		t.Fatal("an unknown nested property was accepted")
	}
}
