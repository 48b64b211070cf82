package etcdbackup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"filippo.io/age"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"gocloud.dev/blob"
	"google.golang.org/grpc"
)

// Metadata keys written on every snapshot object. writerKey marks the cluster that wrote it:
// pruning deletes only objects that carry it with this cluster's name.
const (
	writerKey    = "talos-proxmox-cluster"
	takenAtKey   = "taken-at"
	revisionKey  = "revision"
	sha256Key    = "plaintext-sha256"
	sizeKey      = "plaintext-size"
	totalKeysKey = "total-keys"
)

// Source streams one etcd snapshot.
type Source interface {
	Snapshot(ctx context.Context) (io.ReadCloser, error)
}

// SourceFunc is a function that streams a snapshot.
type SourceFunc func(ctx context.Context) (io.ReadCloser, error)

// Snapshot calls f.
func (f SourceFunc) Snapshot(ctx context.Context) (io.ReadCloser, error) { return f(ctx) }

// EtcdSnapshotter is the part of the Talos machinery client (*client.Client) that streams an etcd
// snapshot from a control plane node.
type EtcdSnapshotter interface {
	EtcdSnapshot(ctx context.Context, req *machineapi.EtcdSnapshotRequest, callOptions ...grpc.CallOption) (io.ReadCloser, error)
}

// FromTalos is the Source of a Talos client that talks to one control plane node (day2.Access.Talos
// with that node's address).
func FromTalos(c EtcdSnapshotter) Source {
	return SourceFunc(func(ctx context.Context) (io.ReadCloser, error) {
		return c.EtcdSnapshot(ctx, &machineapi.EtcdSnapshotRequest{})
	})
}

// TakeOptions says how a snapshot is taken and kept.
type TakeOptions struct {
	// ClusterName names the cluster: its snapshots live under <prefix>/<ClusterName>/ and carry it
	// in their metadata.
	ClusterName string
	// Keep is how many of this cluster's snapshots remain after the new one is written (≥ 1).
	Keep int
	// Recipients, when any, encrypt the snapshot with age (binary format, as talos-backup writes).
	Recipients []age.Recipient
	// TakenAt names the snapshot; zero means now.
	TakenAt time.Time
	// TempDir holds the snapshot while it is verified; empty means os.TempDir().
	TempDir string
	// Progress, when set, is called with the bytes streamed so far, every 8 MiB and at the end.
	Progress func(streamedBytes int64)
}

// Info describes one stored snapshot.
type Info struct {
	// Location is the object's full URL (file:// or s3:// with its query); Fetch takes it back.
	Location string
	// Revision is the etcd revision the snapshot holds.
	Revision int64
	// TotalKeys is the number of keys in the snapshot.
	TotalKeys int
	// Size is the plaintext snapshot's size in bytes.
	Size int64
	// SHA256 is the hex sha256 of the plaintext snapshot.
	SHA256 string
	// TakenAt is when the snapshot was taken (RFC 3339, UTC).
	TakenAt string
	// Encrypted says the object is age ciphertext.
	Encrypted bool
	// Pruned lists the URLs of this cluster's older snapshots that Take deleted.
	Pruned []string
}

// Take streams a snapshot from src, verifies it with etcd's own code, encrypts it when
// opts.Recipients are given, writes it to dst as <prefix>/<cluster>/etcd-<UTC time>-r<revision>.snapshot[.age]
// and prunes this cluster's older snapshots to opts.Keep. A snapshot that fails verification is
// an error and nothing is written. When the snapshot was written but pruning failed, Take returns
// its Info together with the pruning error.
func Take(ctx context.Context, src Source, dst Destination, opts TakeOptions) (Info, error) {
	if err := checkTakeOptions(opts); err != nil {
		return Info{}, err
	}

	takenAt := opts.TakenAt
	if takenAt.IsZero() {
		takenAt = time.Now()
	}

	takenAt = takenAt.UTC().Truncate(time.Second)

	stream, err := src.Snapshot(ctx)
	if err != nil {
		return Info{}, fmt.Errorf("starting the etcd snapshot: %w", err)
	}

	path, sf, st, err := receive(opts.TempDir, "etcd-*.snapshot", stream, opts.Progress)
	if cerr := stream.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing the snapshot stream: %w", cerr)
	}

	if err != nil {
		return Info{}, err
	}

	defer os.Remove(path) //nolint:errcheck // a temporary file

	info := Info{
		Revision:  st.Revision,
		TotalKeys: st.TotalKeys,
		Size:      sf.size,
		SHA256:    sf.sha256Hex(),
		TakenAt:   takenAt.Format(time.RFC3339),
		Encrypted: len(opts.Recipients) > 0,
	}

	bucket, err := dst.open(ctx)
	if err != nil {
		return Info{}, err
	}
	defer bucket.Close() //nolint:errcheck // nothing is pending once Take returns

	key := dst.ClusterPrefix(opts.ClusterName) + objectName(takenAt, st.Revision, info.Encrypted)

	if err := upload(ctx, bucket, key, path, opts, info); err != nil {
		return Info{}, fmt.Errorf("writing the snapshot to %s: %w", dst.objectURL(key), err)
	}

	info.Location = dst.objectURL(key)

	pruned, err := prune(ctx, bucket, dst.ClusterPrefix(opts.ClusterName), opts.ClusterName, opts.Keep)
	for _, k := range pruned {
		info.Pruned = append(info.Pruned, dst.objectURL(k))
	}

	if err != nil {
		return info, fmt.Errorf("the snapshot was written to %s, but pruning older snapshots failed: %w", info.Location, err)
	}

	return info, nil
}

func checkTakeOptions(opts TakeOptions) error {
	var problems []error

	if err := checkClusterName(opts.ClusterName); err != nil {
		problems = append(problems, err)
	}

	if err := ValidateKeep(opts.Keep); err != nil {
		problems = append(problems, err)
	}

	return errors.Join(problems...)
}

// upload writes the verified snapshot at path to key, through age when there are recipients. A
// failed write is aborted (its context cancelled before Close), so no partial object remains.
func upload(ctx context.Context, bucket *blob.Bucket, key, path string, opts TakeOptions, info Info) (err error) {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close() //nolint:errcheck // read only

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()

	w, err := bucket.NewWriter(wctx, key, &blob.WriterOptions{
		ContentType: "application/octet-stream",
		Metadata: map[string]string{
			writerKey:    opts.ClusterName,
			takenAtKey:   info.TakenAt,
			revisionKey:  strconv.FormatInt(info.Revision, 10),
			sha256Key:    info.SHA256,
			sizeKey:      strconv.FormatInt(info.Size, 10),
			totalKeysKey: strconv.Itoa(info.TotalKeys),
		},
	})
	if err != nil {
		return err
	}

	defer func() {
		if err != nil {
			cancel()
			_ = w.Close()
		}
	}()

	var dst io.Writer = w

	var enc io.WriteCloser
	if len(opts.Recipients) > 0 {
		if enc, err = age.Encrypt(w, opts.Recipients...); err != nil {
			return fmt.Errorf("encrypting: %w", err)
		}

		dst = enc
	}

	if _, err = io.Copy(dst, f); err != nil {
		return err
	}

	if enc != nil {
		if err = enc.Close(); err != nil {
			return fmt.Errorf("encrypting: %w", err)
		}
	}

	return w.Close()
}
