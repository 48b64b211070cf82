package spec

import (
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/errtest"
)

func TestEtcdBackupDefaults(t *testing.T) {
	t.Parallel()

	in := base()
	in.EtcdBackup = &EtcdBackupInput{Destination: "file:///var/backups/etcd"}

	c, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}

	if b := c.EtcdBackup; b == nil || b.Keep != DefaultEtcdBackupKeep || !b.Required || b.ScheduleSecret != DefaultScheduleSecret || b.Schedule != "" {
		t.Errorf("etcdBackup = %+v", c.EtcdBackup)
	}

	if c, _ := Build(base()); c.EtcdBackup != nil || c.Recovery != nil || c.AllowDataLoss {
		t.Errorf("without etcdBackup: %+v %+v %v", c.EtcdBackup, c.Recovery, c.AllowDataLoss)
	}
}

// TestBadBackupInputAllAtOnce gives every backup and recovery input a bad value: each is named
// with its problem in one error, and no secret is echoed.
func TestBadBackupInputAllAtOnce(t *testing.T) {
	t.Parallel()

	secret := "AGE-SECRET-KEY-1NOTAVALIDKEYATALLXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"

	in := base()
	in.EtcdBackup = &EtcdBackupInput{
		Destination:    "ftp://backups/etcd",
		Keep:           new(0),
		AgeRecipients:  []string{"age1notarecipient"},
		Schedule:       "every day at noon",
		ScheduleSecret: "Not_A_Name",
	}
	in.Recovery = &RecoveryInput{FromSnapshot: "gopher://x/y", AgeIdentity: KnownPatch(secret)}

	_, err := Build(in)
	if err == nil {
		t.Fatal("bad backup input was accepted")
	}

	msg := err.Error()
	for _, want := range []string{
		"etcdBackup.destination:", "etcdBackup.keep: is 0", "etcdBackup.ageRecipients:", "etcdBackup.schedule:",
		"etcdBackup.scheduleSecret:", "recovery.fromSnapshot:", "recovery.ageIdentity:",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not name %q:\n%s", want, msg)
		}
	}

	if strings.Contains(msg, secret) || strings.Contains(msg, "NOTAVALIDKEY") {
		t.Errorf("the error echoes the age identity:\n%s", msg)
	}
}

func TestScheduleNeedsOneRecipientAndAnS3RegionDestination(t *testing.T) {
	t.Parallel()

	a, _ := age.GenerateX25519Identity()
	b, _ := age.GenerateX25519Identity()

	for _, tc := range []struct {
		name, destination string
		recipients        []string
		want              string
	}{
		{"file", "file:///backups", nil, "etcdBackup.schedule: needs an s3:// destination"},
		{"no region", "s3://bucket/etcd?endpoint=http://127.0.0.1:9000", nil, "etcdBackup.destination: needs region="},
		{"two keys", "s3://bucket/etcd?region=eu-west-1", []string{a.Recipient().String(), b.Recipient().String()}, "give one"},
		{"good", "s3://bucket/etcd?region=eu-west-1", []string{a.Recipient().String()}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			in := base()
			in.EtcdBackup = &EtcdBackupInput{Destination: tc.destination, Schedule: "0 */6 * * *", AgeRecipients: tc.recipients}

			_, err := Build(in)

			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestRecoveryWithoutSnapshotNeedsABackup(t *testing.T) {
	t.Parallel()

	in := base()
	in.Recovery = &RecoveryInput{}

	if _, err := Build(in); err == nil || !strings.Contains(err.Error(), "recovery.fromSnapshot: is required without etcdBackup") {
		t.Errorf("error %v", err)
	}

	in.EtcdBackup = &EtcdBackupInput{Destination: "file:///b"}
	if _, err := Build(in); err != nil {
		t.Errorf("recovery from the up's own snapshot refused: %v", err)
	}
}

func TestDataLossIsRefusedWithTheWaysOut(t *testing.T) {
	t.Parallel()

	loss := DataLoss{Replaced: []string{"cp-1"}, Reasons: map[string]string{"cp-1": "its VM moves from Proxmox host pve1 to pve2"}}

	build := func(edit func(*Input)) *Cluster {
		in := base()
		edit(&in)

		c, err := Build(in)
		if err != nil {
			t.Fatal(err)
		}

		return c
	}

	errtest.Says(t, "replacing the only control plane", build(func(*Input) {}).CheckDataLoss(loss),
		"replaces control plane cp-1 (its VM moves from Proxmox host pve1 to pve2)", "no control plane of the running cluster would keep etcd's data",
		"configure etcdBackup", "recovery.fromSnapshot", "allowDataLoss: true")

	if err := build(func(*Input) {}).CheckDataLoss(DataLoss{Removed: []string{"cp-1", "cp-2"}}); err == nil ||
		!strings.Contains(err.Error(), "removes control plane cp-1 and removes control plane cp-2") {
		t.Errorf("removing every control plane: %v", err)
	}

	for name, edit := range map[string]func(*Input){
		"etcdBackup":    func(in *Input) { in.EtcdBackup = &EtcdBackupInput{Destination: "file:///b"} },
		"recovery":      func(in *Input) { in.Recovery = &RecoveryInput{FromSnapshot: "file:///b/x.snapshot"} },
		"allowDataLoss": func(in *Input) { in.AllowDataLoss = true },
	} {
		if err := build(edit).CheckDataLoss(loss); err != nil {
			t.Errorf("with %s: %v", name, err)
		}
	}

	if err := build(func(*Input) {}).CheckDataLoss(DataLoss{}); err != nil {
		t.Errorf("no loss: %v", err)
	}

	dhcp := build(func(in *Input) {
		in.Network.DHCP = new(true)
		in.Nodes["cp-1"] = NodeInput{HostNode: "pve1", Role: "controlplane"}
		in.EtcdBackup = &EtcdBackupInput{Destination: "file:///b"}
	})
	if err := dhcp.CheckDataLoss(loss); err == nil || !strings.Contains(err.Error(), "with DHCP addressing") {
		t.Errorf("a DHCP cluster with etcdBackup: %v", err)
	}
}
