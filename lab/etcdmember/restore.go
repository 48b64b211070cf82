package etcdmember

import (
	"fmt"
	"path/filepath"

	"go.etcd.io/etcd/etcdutl/v3/snapshot"
)

// SnapshotStatus is etcdutl's verdict on a snapshot file (`etcdutl snapshot status`): it opens the
// database read-only, checks its pages and hashes its keys. A file bbolt cannot read fails here.
func SnapshotStatus(path string) (st snapshot.Status, err error) {
	defer recoverPanic(&err)

	return snapshot.NewV3(errorLogger("snapshot")).Status(path)
}

// Restore writes a new data directory for cfg (cfg.Dir/data) from a snapshot file with etcdutl's
// own restore, as Talos' etcd service does on a recovering bootstrap: a one-member cluster named
// cfg.Name with cfg's peer URL. Unless skipHashCheck, the snapshot must end with etcd's sha256
// digest of its database and the digest must match ("snapshot missing hash but
// --skip-hash-check=false", "expected sha256 …"). Restart then starts the member from it.
func Restore(cfg Config, path string, skipHashCheck bool) (err error) {
	defer recoverPanic(&err)

	return snapshot.NewV3(errorLogger(cfg.Name)).Restore(snapshot.RestoreConfig{
		SnapshotPath:   path,
		Name:           cfg.Name,
		OutputDataDir:  filepath.Join(cfg.Dir, "data"),
		PeerURLs:       []string{cfg.peerURL()},
		InitialCluster: cfg.Name + "=" + cfg.peerURL(),
		SkipHashCheck:  skipHashCheck,
	})
}

// recoverPanic turns a panic of bbolt on a damaged file into an error: in Talos that would crash
// only the etcd service's restore, here it would end the whole test process.
func recoverPanic(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("reading the snapshot: %v", r)
	}
}
