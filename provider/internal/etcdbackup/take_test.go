package etcdbackup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
)

// fileDestination is a file:// destination in a fresh temporary directory.
func fileDestination(t *testing.T) (Destination, string) {
	t.Helper()

	dir := t.TempDir()

	d, err := ParseDestination("file://" + dir)
	if err != nil {
		t.Fatal(err)
	}

	return d, dir
}

// filesUnder lists the regular files under dir, relative to it.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()

	var files []string

	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}

		rel, _ := filepath.Rel(dir, p)
		files = append(files, rel)

		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	slices.Sort(files)

	return files
}

var testTakenAt = time.Date(2026, 11, 27, 14, 5, 9, 0, time.FixedZone("CET", 3600))

func TestTakeWritesAVerifiedSnapshotWithItsMetadata(t *testing.T) {
	t.Parallel()

	snap := snapshotForTest(t)
	d, dir := fileDestination(t)

	var progress []int64

	info, err := Take(t.Context(), bytesSource(snap), d, TakeOptions{
		ClusterName: "lab", Keep: 3, TakenAt: testTakenAt,
		Progress: func(n int64) { progress = append(progress, n) },
	})
	if err != nil {
		t.Fatal(err)
	}

	sum := sha256.Sum256(snap)
	wantName := "lab/etcd-20261127T130509Z-r51.snapshot"

	switch {
	case info.Location != "file://"+dir+"/"+wantName:
		t.Errorf("Location = %q, want file://%s/%s", info.Location, dir, wantName)
	case info.Revision != 51 || info.TotalKeys != 50:
		t.Errorf("revision %d with %d keys, want 51 with 50", info.Revision, info.TotalKeys)
	case info.Size != int64(len(snap)) || info.SHA256 != hex.EncodeToString(sum[:]):
		t.Errorf("size %d sha256 %s, want %d %x", info.Size, info.SHA256, len(snap), sum)
	case info.TakenAt != "2026-11-27T13:05:09Z":
		t.Errorf("TakenAt = %q, want the UTC time 2026-11-27T13:05:09Z", info.TakenAt)
	case info.Encrypted || len(info.Pruned) != 0:
		t.Errorf("Encrypted %v, Pruned %v: want neither", info.Encrypted, info.Pruned)
	case !slices.Equal(progress, []int64{int64(len(snap))}):
		t.Errorf("progress reports %v, want one at the end: %d", progress, len(snap))
	}

	stored, err := os.ReadFile(filepath.Join(dir, wantName))
	if err != nil {
		t.Fatal(err)
	}

	if !slices.Equal(stored, snap) {
		t.Error("the stored object differs from the snapshot streamed")
	}

	attrs, err := os.ReadFile(filepath.Join(dir, wantName+".attrs"))
	if err != nil {
		t.Fatal(err)
	}

	for _, want := range []string{`"talos-proxmox-cluster":"lab"`, `"revision":"51"`, `"plaintext-sha256":"` + info.SHA256 + `"`} {
		if !strings.Contains(string(attrs), want) {
			t.Errorf("the object's metadata %s lacks %s", attrs, want)
		}
	}
}

func TestEncryptedSnapshotsRoundTrip(t *testing.T) {
	t.Parallel()

	snap := snapshotForTest(t)
	d, _ := fileDestination(t)

	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}

	recipients, err := ParseRecipients([]string{id.Recipient().String()})
	if err != nil {
		t.Fatal(err)
	}

	info, err := Take(t.Context(), bytesSource(snap), d, TakeOptions{ClusterName: "lab", Keep: 1, TakenAt: testTakenAt, Recipients: recipients})
	if err != nil {
		t.Fatal(err)
	}

	if !strings.HasSuffix(info.Location, ".snapshot.age") || !info.Encrypted {
		t.Fatalf("Location %s (encrypted %v), want an .age object", info.Location, info.Encrypted)
	}

	stored, err := os.ReadFile(strings.TrimPrefix(info.Location, "file://"))
	if err != nil {
		t.Fatal(err)
	}

	if !strings.HasPrefix(string(stored), "age-encryption.org/v1\n") || strings.Contains(string(stored), "/registry/test/key-") {
		t.Fatal("the stored object is not binary age ciphertext (or its keys are readable)")
	}

	path, got, cleanup, err := Fetch(t.Context(), info.Location, "# created: today\n"+id.String()+"\n")
	if err != nil {
		t.Fatal(err)
	}

	plain, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	if !slices.Equal(plain, snap) {
		t.Error("the fetched snapshot differs from the one taken")
	}

	got.Encrypted, info.Encrypted = true, true
	info.Pruned = nil

	if !reflect.DeepEqual(got, info) {
		t.Errorf("Fetch's Info = %+v, want Take's %+v", got, info)
	}

	cleanup()

	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("cleanup left %s behind (%v)", path, err)
	}
}

// TestABadSnapshotIsRejectedAndNothingIsWritten: a stream cut short, one with a flipped byte, one
// whose integrity hash matches but whose database etcd cannot read, and one that is not a
// snapshot at all fail verification; the destination stays empty.
func TestABadSnapshotIsRejectedAndNothingIsWritten(t *testing.T) {
	t.Parallel()

	snap := snapshotForTest(t)

	flipped := slices.Clone(snap)
	flipped[len(flipped)/2] ^= 0xff

	// The database's meta pages overwritten, with an integrity hash recomputed to match: only
	// etcd's own check can tell.
	garbled := slices.Clone(snap[:len(snap)-sha256.Size])
	for i := 0; i < 2*4096 && i < len(garbled); i++ {
		garbled[i] = 0x5a
	}
	sum := sha256.Sum256(garbled)
	garbled = append(garbled, sum[:]...)

	// The newer meta page and the page below it overwritten, hash rewritten too: the older meta
	// page leads to that page, on which bbolt would panic in a goroutine of its own.
	garbledPage := slices.Clone(snap[:len(snap)-sha256.Size])
	for i := 4096; i < 3*4096 && i < len(garbledPage); i++ {
		garbledPage[i] = 0x5a
	}
	sum = sha256.Sum256(garbledPage)
	garbledPage = append(garbledPage, sum[:]...)

	for _, tc := range []struct {
		name   string
		stream []byte
		want   string
	}{
		{name: "truncated", stream: snap[:len(snap)-1000], want: "truncated"},
		{name: "cut at a 512-byte boundary plus 32", stream: snap[:512+32], want: "corrupt"},
		{name: "a flipped byte", stream: flipped, want: "corrupt"},
		{name: "unreadable meta pages", stream: garbled, want: "etcd cannot read its database"},
		{name: "a garbled page", stream: garbledPage, want: "etcd cannot read its database"},
		{name: "empty", stream: nil, want: "truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			d, dir := fileDestination(t)
			tmp := t.TempDir()

			_, err := Take(t.Context(), bytesSource(tc.stream), d, TakeOptions{ClusterName: "lab", Keep: 1, TempDir: tmp})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Take = %v, want an error saying %q", err, tc.want)
			}

			if files := append(filesUnder(t, dir), filesUnder(t, tmp)...); len(files) != 0 {
				t.Errorf("a rejected snapshot left %v", files)
			}
		})
	}
}

func TestTakeRejectsBadOptionsBeforeStreaming(t *testing.T) {
	t.Parallel()

	d, dir := fileDestination(t)
	streamed := false
	src := SourceFunc(func(ctx context.Context) (io.ReadCloser, error) { streamed = true; return nil, nil })

	_, err := Take(t.Context(), src, d, TakeOptions{ClusterName: "../other", Keep: 0})
	if err == nil || !strings.Contains(err.Error(), "cluster name") || !strings.Contains(err.Error(), "keep is 0") {
		t.Errorf("Take = %v, want errors about the cluster name and keep", err)
	}

	if streamed || len(filesUnder(t, dir)) != 0 {
		t.Error("Take streamed or wrote despite bad options")
	}
}

// TestNoDamagedPageCrashes overwrites each page of the test snapshot in turn (rewriting the
// integrity hash to match): verification reports a damaged page or accepts an unused one, and
// never panics (a panic in bbolt's goroutine would end this test binary).
func TestNoDamagedPageCrashes(t *testing.T) {
	t.Parallel()

	snap := snapshotForTest(t)
	body := snap[:len(snap)-sha256.Size]
	rejected := 0

	for page := 0; page*4096 < len(body); page++ {
		for _, fill := range []byte{0x00, 0x5a, 0xff} {
			damaged := slices.Clone(body)
			for i := page * 4096; i < (page+1)*4096 && i < len(damaged); i++ {
				damaged[i] = fill
			}

			sum := sha256.Sum256(damaged)

			path, _, _, err := receive(t.TempDir(), "*.snapshot", bytes.NewReader(append(damaged, sum[:]...)), nil)
			if err != nil {
				rejected++
				continue
			}

			_ = os.Remove(path)
		}
	}

	if rejected == 0 {
		t.Error("no damaged page was rejected")
	}
}
