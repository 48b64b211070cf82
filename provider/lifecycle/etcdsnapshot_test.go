package lifecycle

import (
	"encoding/base64"
	"net"
	"strings"
	"testing"

	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
)

// snapshotArgs are an EtcdSnapshot's inputs with a real Talos API CA and one control plane at an
// address where nothing answers (a closed loopback port).
func snapshotArgs(t *testing.T) EtcdSnapshotArgs {
	t.Helper()

	b, err := secrets.NewBundle(secrets.NewClock(), config.TalosVersionCurrent)
	if err != nil {
		t.Fatal(err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	addr := l.Addr().(*net.TCPAddr).IP.String()
	_ = l.Close()

	enc := base64.StdEncoding.EncodeToString

	return EtcdSnapshotArgs{
		ClusterName:   "homelab",
		TalosCA:       TalosCA{OsCaCertificate: enc(b.Certs.OS.Crt), OsCaKey: enc(b.Certs.OS.Key)},
		ControlPlanes: map[string]string{"cp-1": addr}, Destination: "file://" + t.TempDir(),
		Keep: 10, Required: true, Trigger: "talos=v1.11.6", Timeout: "1s",
	}
}

// TestFailedSnapshotStopsTheUp: a snapshot that cannot be taken fails the update, saying why and
// how to go on without one, and keeps the last snapshot's outputs; with required false the update
// passes and keeps them too. An unchanged trigger takes none.
func TestFailedSnapshotStopsTheUp(t *testing.T) {
	t.Parallel()

	in := snapshotArgs(t)
	last := EtcdSnapshotState{EtcdSnapshotArgs: in, Location: "file:///b/homelab/etcd-1-r5.snapshot", Revision: 5}
	last.Trigger = "talos=v1.11.5"

	_, err := (&EtcdSnapshot{}).Update(t.Context(), infer.UpdateRequest[EtcdSnapshotArgs, EtcdSnapshotState]{Inputs: in, State: last})
	if err == nil || !strings.Contains(err.Error(), "nothing was touched") || !strings.Contains(err.Error(), "etcdBackup.required: false") ||
		!strings.Contains(err.Error(), "cp-1") {
		t.Fatalf("error %v", err)
	}

	in.Required = false

	resp, err := (&EtcdSnapshot{}).Update(t.Context(), infer.UpdateRequest[EtcdSnapshotArgs, EtcdSnapshotState]{Inputs: in, State: last})
	if err != nil || resp.Output.Location != last.Location || resp.Output.Trigger != in.Trigger {
		t.Errorf("not required: %v, %+v", err, resp.Output)
	}

	// The same trigger: no snapshot is tried (nothing answers, so a try would fail).
	in.Required = true
	last.Trigger = in.Trigger

	if _, err := (&EtcdSnapshot{}).Update(t.Context(), infer.UpdateRequest[EtcdSnapshotArgs, EtcdSnapshotState]{Inputs: in, State: last}); err != nil {
		t.Errorf("an unchanged trigger took a snapshot: %v", err)
	}

	// A new cluster's empty trigger: none either.
	in.Trigger = ""
	if _, err := (&EtcdSnapshot{}).Create(t.Context(), infer.CreateRequest[EtcdSnapshotArgs]{Inputs: in}); err != nil {
		t.Errorf("a new cluster's record took a snapshot: %v", err)
	}
}
