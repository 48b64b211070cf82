package etcdbackup

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
)

// TestPruneKeepsTheNewestAndLeavesForeignObjects: four snapshots taken with keep 2 leave the
// newest two; objects under the cluster's folder that Take did not write for this cluster (other
// names, no metadata, another cluster's metadata) and other clusters' folders stay.
func TestPruneKeepsTheNewestAndLeavesForeignObjects(t *testing.T) {
	t.Parallel()

	snap := snapshotForTest(t)
	d, dir := fileDestination(t)

	bucket, err := fileblob.OpenBucket(dir, &fileblob.Options{CreateDir: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close() //nolint:errcheck // test

	foreign := map[string]map[string]string{
		"lab/notes.txt":                                nil,
		"lab/lab-2026-11-01T00:00:00Z.snap.age":        nil,                  // talos-backup's name
		"lab/etcd-20200101T000000Z-r1.snapshot":        nil,                  // our name, no metadata
		"lab/etcd-20200101T000001Z-r1.snapshot":        {writerKey: "lab-2"}, // another cluster's metadata
		"lab/nested/etcd-20200101T000002Z-r1.snapshot": {writerKey: "lab"},   // not directly under the folder
		"other/etcd-20200101T000003Z-r1.snapshot":      {writerKey: "lab"},   // another folder
	}
	for key, meta := range foreign {
		if err := bucket.WriteAll(t.Context(), key, []byte("not ours"), &blob.WriterOptions{Metadata: meta}); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := Take(t.Context(), bytesSource(snap), d, TakeOptions{ClusterName: "other", Keep: 1, TakenAt: testTakenAt}); err != nil {
		t.Fatal(err)
	}

	base := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)

	var last Info

	// Taken out of order: the newest are 03:00 and 02:00, whatever the order of the calls.
	for _, hour := range []int{2, 0, 3, 1} {
		last, err = Take(t.Context(), bytesSource(snap), d, TakeOptions{ClusterName: "lab", Keep: 2, TakenAt: base.Add(time.Duration(hour) * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
	}

	if want := []string{"file://" + dir + "/lab/etcd-20261127T010000Z-r51.snapshot"}; !slices.Equal(last.Pruned, want) {
		t.Errorf("the last Take pruned %v, want %v", last.Pruned, want)
	}

	want := []string{
		"lab/etcd-20200101T000000Z-r1.snapshot",
		"lab/etcd-20200101T000001Z-r1.snapshot",
		"lab/etcd-20261127T020000Z-r51.snapshot",
		"lab/etcd-20261127T030000Z-r51.snapshot",
		"lab/lab-2026-11-01T00:00:00Z.snap.age",
		"lab/nested/etcd-20200101T000002Z-r1.snapshot",
		"lab/notes.txt",
		"other/etcd-20200101T000003Z-r1.snapshot",
		"other/etcd-20261127T130509Z-r51.snapshot",
	}

	var got []string

	for _, f := range filesUnder(t, dir) {
		if filepath.Ext(f) != ".attrs" {
			got = append(got, f)
		}
	}

	if !slices.Equal(got, want) {
		t.Errorf("after pruning to 2:\n got %v\nwant %v", got, want)
	}

	if _, err := os.Stat(filepath.Join(dir, "lab/etcd-20261127T000000Z-r51.snapshot.attrs")); !os.IsNotExist(err) {
		t.Errorf("a pruned snapshot's metadata file remains (%v)", err)
	}
}
