package etcdbackup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gocloud.dev/blob"
)

// nameTime is the UTC timestamp format in snapshot names.
const nameTime = "20060102T150405Z"

// snapshotName matches the names Take gives: etcd-<UTC time>-r<revision>.snapshot[.age].
var snapshotName = regexp.MustCompile(`^etcd-(\d{8}T\d{6}Z)-r(\d+)\.snapshot(\.age)?$`)

// clusterNamePattern is what a cluster name may be here: it becomes one path segment of object keys.
var clusterNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

func checkClusterName(name string) error {
	if !clusterNamePattern.MatchString(name) {
		return fmt.Errorf("cluster name %q cannot name a snapshot folder: use 1–63 letters, digits, dots, hyphens or underscores, starting with a letter or digit", name)
	}

	return nil
}

// objectName is the name of a snapshot taken at t of revision rev.
func objectName(t time.Time, rev int64, encrypted bool) string {
	name := "etcd-" + t.UTC().Format(nameTime) + "-r" + strconv.FormatInt(rev, 10) + ".snapshot"
	if encrypted {
		name += ".age"
	}

	return name
}

// storedSnapshot is one of this cluster's snapshot objects.
type storedSnapshot struct {
	key      string
	takenAt  time.Time
	revision int64
}

// prune deletes this cluster's snapshots under prefix beyond the keep newest, newest by the time
// and revision in their names. An object is this cluster's when its name is one Take gives and its
// metadata names the cluster as writer: anything else under the prefix is left alone. It returns
// the keys it deleted.
func prune(ctx context.Context, bucket *blob.Bucket, prefix, cluster string, keep int) ([]string, error) {
	ours, err := listOurs(ctx, bucket, prefix, cluster)
	if err != nil {
		return nil, err
	}

	sort.Slice(ours, func(i, j int) bool {
		a, b := ours[i], ours[j]
		if !a.takenAt.Equal(b.takenAt) {
			return a.takenAt.After(b.takenAt)
		}

		if a.revision != b.revision {
			return a.revision > b.revision
		}

		return a.key > b.key
	})

	var deleted []string

	var problems []error

	for _, s := range ours[min(keep, len(ours)):] {
		if err := bucket.Delete(ctx, s.key); err != nil {
			problems = append(problems, fmt.Errorf("deleting %s: %w", s.key, err))
			continue
		}

		deleted = append(deleted, s.key)
	}

	return deleted, errors.Join(problems...)
}

// listOurs lists the objects directly under prefix that this cluster's Take wrote.
func listOurs(ctx context.Context, bucket *blob.Bucket, prefix, cluster string) ([]storedSnapshot, error) {
	var ours []storedSnapshot

	it := bucket.List(&blob.ListOptions{Prefix: prefix, Delimiter: "/"})

	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}

		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", prefix, err)
		}

		if obj.IsDir {
			continue
		}

		m := snapshotName.FindStringSubmatch(strings.TrimPrefix(obj.Key, prefix))
		if m == nil {
			continue
		}

		attrs, err := bucket.Attributes(ctx, obj.Key)
		if err != nil {
			return nil, fmt.Errorf("reading the metadata of %s: %w", obj.Key, err)
		}

		if attrs.Metadata[writerKey] != cluster {
			continue
		}

		t, err := time.Parse(nameTime, m[1])
		if err != nil {
			continue
		}

		rev, err := strconv.ParseInt(m[2], 10, 64)
		if err != nil {
			continue
		}

		ours = append(ours, storedSnapshot{key: obj.Key, takenAt: t, revision: rev})
	}

	return ours, nil
}
