package etcdbackup

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"filippo.io/age"
)

func TestFetchAndExistsOfAMissingObject(t *testing.T) {
	t.Parallel()

	_, dir := fileDestination(t)
	missing := "file://" + dir + "/lab/etcd-20261127T130509Z-r51.snapshot"

	_, _, _, err := Fetch(t.Context(), missing, "")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), missing) {
		t.Errorf("Fetch = %v, want ErrNotFound naming %s", err, missing)
	}

	ok, err := Exists(t.Context(), missing)
	if ok || err != nil {
		t.Errorf("Exists = %v, %v; want false, nil", ok, err)
	}
}

func TestFetchOfAPlainSnapshotNeedsNoIdentity(t *testing.T) {
	t.Parallel()

	snap := snapshotForTest(t)
	d, _ := fileDestination(t)

	info, err := Take(t.Context(), bytesSource(snap), d, TakeOptions{ClusterName: "lab", Keep: 1, TakenAt: testTakenAt})
	if err != nil {
		t.Fatal(err)
	}

	ok, err := Exists(t.Context(), info.Location)
	if !ok || err != nil {
		t.Errorf("Exists = %v, %v; want true, nil", ok, err)
	}

	path, got, cleanup, err := Fetch(t.Context(), info.Location, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()

	if !reflect.DeepEqual(got, info) {
		t.Errorf("Fetch's Info = %+v, want Take's %+v", got, info)
	}

	if b, err := os.ReadFile(path); err != nil || string(b) != string(snap) {
		t.Errorf("the fetched file differs from the snapshot (%v)", err)
	}
}

// TestFetchOfAnEncryptedSnapshot: without an identity, with another key pair's identity, with a
// malformed one, and with a damaged ciphertext, Fetch fails saying why, never echoing the key.
func TestFetchOfAnEncryptedSnapshot(t *testing.T) {
	t.Parallel()

	snap := snapshotForTest(t)
	d, _ := fileDestination(t)

	owner, _ := age.GenerateX25519Identity()
	stranger, _ := age.GenerateX25519Identity()

	info, err := Take(t.Context(), bytesSource(snap), d, TakeOptions{
		ClusterName: "lab", Keep: 1, TakenAt: testTakenAt, Recipients: []age.Recipient{owner.Recipient()},
	})
	if err != nil {
		t.Fatal(err)
	}

	object := strings.TrimPrefix(info.Location, "file://")
	ciphertext, err := os.ReadFile(object)
	if err != nil {
		t.Fatal(err)
	}

	cutDir := t.TempDir()
	cut := cutDir + "/etcd-20261127T130509Z-r51.snapshot.age"
	if err := os.WriteFile(cut, ciphertext[:len(ciphertext)-100], 0o600); err != nil {
		t.Fatal(err)
	}

	malformed := owner.String()[:30] + "x" + owner.String()[31:]

	for _, tc := range []struct {
		name, url, identity, want string
	}{
		{name: "no identity", url: info.Location, want: "encrypted with age: give the identity"},
		{name: "another key pair", url: info.Location, identity: stranger.String(), want: "does not decrypt this snapshot"},
		{name: "a malformed identity", url: info.Location, identity: malformed, want: "line 1 is not a valid age secret key"},
		{name: "a public key as identity", url: info.Location, identity: owner.Recipient().String(), want: "is an age public key"},
		{name: "truncated ciphertext", url: "file://" + cut, identity: owner.String(), want: "receiving the snapshot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			_, _, _, err := Fetch(t.Context(), tc.url, tc.identity)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Fetch = %v, want an error saying %q", err, tc.want)
			}

			for _, secret := range []string{owner.String(), stranger.String(), malformed, owner.String()[len("AGE-SECRET-KEY-1"):][:20]} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the error %q repeats a secret key", err)
				}
			}
		})
	}
}

func TestFetchOfACorruptObjectFails(t *testing.T) {
	t.Parallel()

	snap := snapshotForTest(t)
	dir := t.TempDir()

	object := dir + "/etcd-20261127T130509Z-r51.snapshot"
	if err := os.WriteFile(object, snap[:len(snap)/2], 0o600); err != nil {
		t.Fatal(err)
	}

	_, _, _, err := Fetch(t.Context(), "file://"+object, "")
	if err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("Fetch = %v, want an error saying the snapshot is truncated", err)
	}
}

func TestFetchRejectsURLsThatNameNoObject(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct{ url, want string }{
		{url: "s3://bucket", want: "names a bucket, not a snapshot object"},
		{url: "file:///", want: "names a directory"},
		{url: "gs://bucket/x", want: `scheme "gs" is not supported`},
		{url: "s3://KEYID:SECRET@bucket/x", want: "contains a user name or password"},
	} {
		_, _, _, err := Fetch(t.Context(), tc.url, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Fetch(%q) = %v, want an error saying %q", tc.url, err, tc.want)
		}
	}
}
