package etcdbackup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"

	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

// progressEvery is how many streamed bytes pass between two progress reports.
const progressEvery = 8 << 20

// snapshotFile receives a snapshot stream into a file while it counts and hashes it. An etcd
// snapshot ends with the sha256 of everything before it (etcd's integrity hash): body hashes all
// but the last 32 bytes seen so far, which wait in tail.
type snapshotFile struct {
	f        *os.File
	all      hash.Hash // sha256 of the whole stream: Info.SHA256
	body     hash.Hash // sha256 of the stream without its last 32 bytes
	tail     [sha256.Size]byte
	tailLen  int
	size     int64
	reported int64
	progress func(streamedBytes int64)
}

func newSnapshotFile(f *os.File, progress func(int64)) *snapshotFile {
	return &snapshotFile{f: f, all: sha256.New(), body: sha256.New(), progress: progress}
}

// Write writes p to the file and hashes it.
func (s *snapshotFile) Write(p []byte) (int, error) {
	n, err := s.f.Write(p)
	if err != nil {
		return n, err
	}

	s.all.Write(p)
	s.size += int64(n)

	if len(p) >= sha256.Size {
		s.body.Write(s.tail[:s.tailLen])
		s.body.Write(p[:len(p)-sha256.Size])
		copy(s.tail[:], p[len(p)-sha256.Size:])
		s.tailLen = sha256.Size
	} else {
		var joined [2 * sha256.Size]byte

		m := copy(joined[:], s.tail[:s.tailLen])
		m += copy(joined[m:], p)

		if over := m - sha256.Size; over > 0 {
			s.body.Write(joined[:over])
			copy(s.tail[:], joined[over:m])
			s.tailLen = sha256.Size
		} else {
			copy(s.tail[:], joined[:m])
			s.tailLen = m
		}
	}

	if s.progress != nil && s.size-s.reported >= progressEvery {
		s.reported = s.size
		s.progress(s.size)
	}

	return n, nil
}

// finish reports the last progress and checks etcd's integrity hash: a stream that stops early
// has no hash at its end (its size is not 512·k+32) or one that does not match.
func (s *snapshotFile) finish() error {
	if s.progress != nil && s.size != s.reported {
		s.reported = s.size
		s.progress(s.size)
	}

	if s.size%512 != sha256.Size {
		return fmt.Errorf("the snapshot is truncated or not an etcd snapshot: its %d bytes do not end with etcd's integrity hash", s.size)
	}

	if !bytes.Equal(s.body.Sum(nil), s.tail[:]) {
		return fmt.Errorf("the snapshot is corrupt: its %d bytes do not match the integrity hash etcd wrote at its end", s.size)
	}

	return nil
}

// sha256Hex is the sha256 of the whole stream, in hex.
func (s *snapshotFile) sha256Hex() string { return hex.EncodeToString(s.all.Sum(nil)) }

// snapshotStatus is what etcd's own reader finds in a snapshot file.
type snapshotStatus struct {
	Revision  int64
	TotalKeys int
}

// readStatus opens a snapshot file with etcd's own code (etcdutl snapshot status): it checks the
// bolt database's integrity and reads the revision and the number of keys. checkBoltPages goes
// first, so that a damaged page is an error rather than a panic in bbolt's own goroutine.
func readStatus(path string) (st snapshotStatus, err error) {
	defer func() {
		// bbolt panics on some damaged pages rather than returning an error.
		if r := recover(); r != nil {
			err = fmt.Errorf("the snapshot is corrupt: etcd cannot read its database (%v)", r)
		}
	}()

	if err := checkBoltPages(path); err != nil {
		return snapshotStatus{}, fmt.Errorf("the snapshot is corrupt: etcd cannot read its database: %w", err)
	}

	s, err := snapshot.NewV3(zap.NewNop()).Status(path)
	if err != nil {
		return snapshotStatus{}, fmt.Errorf("the snapshot is corrupt: etcd cannot read its database: %w", err)
	}

	return snapshotStatus{Revision: s.Revision, TotalKeys: s.TotalKey}, nil
}

// receive streams r into a new file in dir and verifies it as an etcd snapshot: integrity hash,
// then etcd's own status check. On error the file is removed.
func receive(dir, pattern string, r io.Reader, progress func(int64)) (path string, sf *snapshotFile, st snapshotStatus, err error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", nil, snapshotStatus{}, fmt.Errorf("creating a temporary file for the snapshot: %w", err)
	}

	defer func() {
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()

	sf = newSnapshotFile(f, progress)

	_, err = io.Copy(sf, r)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("writing the snapshot to %s: %w", f.Name(), cerr)
	}

	if err != nil {
		return "", nil, snapshotStatus{}, fmt.Errorf("receiving the snapshot: %w", err)
	}

	if err = sf.finish(); err != nil {
		return "", nil, snapshotStatus{}, err
	}

	st, err = readStatus(f.Name())
	if err != nil {
		return "", nil, snapshotStatus{}, err
	}

	return f.Name(), sf, st, nil
}
