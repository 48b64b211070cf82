package etcdbackup

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	"filippo.io/age"
	"filippo.io/age/armor"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// ErrNotFound is wrapped by Fetch's error when the URL names no object.
var ErrNotFound = errors.New("no such snapshot")

// ageHeader starts every binary age file; armorHeader every ASCII-armored one.
var (
	ageHeader   = []byte("age-encryption.org/v1\n")
	armorHeader = []byte(armor.Header)
)

// Exists says whether the URL (a Location from Take) names an existing object; for a preview's
// check before a recovery. It does not read the object.
func Exists(ctx context.Context, rawURL string) (bool, error) {
	d, key, err := parseObjectURL(rawURL)
	if err != nil {
		return false, err
	}

	bucket, err := d.open(ctx)
	if err != nil {
		return false, err
	}
	defer bucket.Close() //nolint:errcheck // read only

	ok, err := bucket.Exists(ctx, key)
	if err != nil {
		return false, fmt.Errorf("checking %s: %w", d.objectURL(key), err)
	}

	return ok, nil
}

// Fetch downloads the snapshot at rawURL (a Location from Take) for a disaster recovery: it
// decrypts age ciphertext with identity (AGE-SECRET-KEY-1…, needed only then), verifies the
// plaintext as Take does and returns the path of the verified plaintext snapshot with its Info.
// cleanup removes the file; call it once the snapshot is uploaded. A URL that names no object
// fails with an error that wraps ErrNotFound.
func Fetch(ctx context.Context, rawURL string, identity string) (snapshotPath string, info Info, cleanup func(), err error) {
	d, key, err := parseObjectURL(rawURL)
	if err != nil {
		return "", Info{}, nil, err
	}

	location := d.objectURL(key)

	bucket, err := d.open(ctx)
	if err != nil {
		return "", Info{}, nil, err
	}
	defer bucket.Close() //nolint:errcheck // read only

	r, err := bucket.NewReader(ctx, key, nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return "", Info{}, nil, fmt.Errorf("%s: %w: check the URL (Take's Location) and that the object was not pruned", location, ErrNotFound)
	}

	if err != nil {
		return "", Info{}, nil, fmt.Errorf("reading %s: %w", location, err)
	}
	defer r.Close() //nolint:errcheck // read only

	plain, encrypted, err := decrypting(r, identity)
	if err != nil {
		return "", Info{}, nil, fmt.Errorf("%s: %w", location, err)
	}

	dir, err := os.MkdirTemp("", "etcd-recover-")
	if err != nil {
		return "", Info{}, nil, fmt.Errorf("creating a temporary directory: %w", err)
	}

	cleanup = func() { _ = os.RemoveAll(dir) }

	p, sf, st, err := receive(dir, "*.snapshot", plain, nil)
	if err != nil {
		cleanup()

		var noMatch *age.NoIdentityMatchError
		if errors.As(err, &noMatch) {
			return "", Info{}, nil, fmt.Errorf("%s: the identity does not decrypt this snapshot: it was encrypted to other recipients", location)
		}

		return "", Info{}, nil, fmt.Errorf("%s: %w", location, err)
	}

	info = Info{
		Location:  location,
		Revision:  st.Revision,
		TotalKeys: st.TotalKeys,
		Size:      sf.size,
		SHA256:    sf.sha256Hex(),
		TakenAt:   takenAt(r, key),
		Encrypted: encrypted,
	}

	return p, info, cleanup, nil
}

// decrypting returns the plaintext of r: r itself, or age's decryption of it when it starts with
// an age header.
func decrypting(r io.Reader, identity string) (io.Reader, bool, error) {
	br := bufio.NewReader(r)

	head, err := br.Peek(len(armorHeader))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, false, fmt.Errorf("reading: %w", err)
	}

	var ciphertext io.Reader

	switch {
	case bytes.HasPrefix(head, ageHeader):
		ciphertext = br
	case bytes.HasPrefix(head, armorHeader):
		ciphertext = armor.NewReader(br)
	default:
		return br, false, nil
	}

	if identity == "" {
		return nil, true, errors.New("the snapshot is encrypted with age: give the identity (AGE-SECRET-KEY-1…) whose recipient it was encrypted to")
	}

	ids, err := ParseIdentity(identity)
	if err != nil {
		return nil, true, err
	}

	plain, err := age.Decrypt(ciphertext, ids...)
	if err != nil {
		var noMatch *age.NoIdentityMatchError
		if errors.As(err, &noMatch) {
			return nil, true, errors.New("the identity does not decrypt this snapshot: it was encrypted to other recipients")
		}

		return nil, true, fmt.Errorf("the snapshot's age encryption is damaged: %w", err)
	}

	return plain, true, nil
}

// takenAt is when a snapshot was taken: the time in its name, else the object's modification time.
func takenAt(r *blob.Reader, key string) string {
	if m := snapshotName.FindStringSubmatch(path.Base(key)); m != nil {
		if t, err := time.Parse(nameTime, m[1]); err == nil {
			return t.Format(time.RFC3339)
		}
	}

	return r.ModTime().UTC().Format(time.RFC3339)
}
