package etcdbackup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// bbolt's on-disk format (go.etcd.io/bbolt internal/common, v1.4–v1.5): every page starts with a
// 16-byte header (id uint64, flags uint16, count uint16, overflow uint32); elements are 16 bytes.
const (
	boltPageHeader    = 16
	boltElement       = 16
	boltBranchPage    = 0x01
	boltLeafPage      = 0x02
	boltBucketLeaf    = 0x01
	boltMagic         = 0xED0CDAED
	boltVersion       = 2
	boltMetaChecksum  = boltPageHeader + 56 // the meta fields before the checksum are 56 bytes
	boltInBucketBytes = 16                  // root pgid, sequence
)

// checkBoltPages walks every page reachable from a bolt database's root and checks that it is
// where it says it is, is a branch or a leaf, and keeps its elements inside itself. bbolt trusts
// these when it opens a database whose free list is not stored (as etcd's are) and panics in a
// goroutine of its own on a page that breaks them, which no recover can catch: a damaged snapshot
// whose integrity hash was rewritten to match must fail here, before etcd's status reads it.
func checkBoltPages(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close() //nolint:errcheck // read only

	st, err := f.Stat()
	if err != nil {
		return err
	}

	w := &boltWalker{f: f, size: st.Size(), seen: map[uint64]bool{}}

	root, err := w.meta()
	if err != nil {
		return err
	}

	return w.tree(root, 0)
}

type boltWalker struct {
	f        io.ReaderAt
	size     int64
	pageSize int64
	highPage uint64 // the page count the meta records: every page id is below it
	seen     map[uint64]bool
}

// meta reads the newer valid meta page (bbolt keeps two) and returns the root bucket's page.
func (w *boltWalker) meta() (uint64, error) {
	head := make([]byte, boltMetaChecksum+8)
	if _, err := w.f.ReadAt(head, 0); err != nil {
		return 0, errors.New("it is too short to be a bolt database")
	}

	w.pageSize = int64(binary.LittleEndian.Uint32(head[boltPageHeader+8:]))
	if w.pageSize < 1024 || w.pageSize > 1<<20 || w.pageSize&(w.pageSize-1) != 0 {
		return 0, fmt.Errorf("its first meta page records an impossible page size %d", w.pageSize)
	}

	var (
		root  uint64
		txid  uint64
		found bool
	)

	for i := int64(0); i < 2; i++ {
		m := make([]byte, boltMetaChecksum+8)
		if _, err := w.f.ReadAt(m, i*w.pageSize); err != nil {
			continue
		}

		h := fnv.New64a()
		h.Write(m[boltPageHeader:boltMetaChecksum])

		valid := binary.LittleEndian.Uint32(m[boltPageHeader:]) == boltMagic &&
			binary.LittleEndian.Uint32(m[boltPageHeader+4:]) == boltVersion &&
			binary.LittleEndian.Uint64(m[boltMetaChecksum:]) == h.Sum64()
		if !valid {
			continue
		}

		if t := binary.LittleEndian.Uint64(m[boltPageHeader+48:]); !found || t > txid {
			found, txid = true, t
			root = binary.LittleEndian.Uint64(m[boltPageHeader+16:])
			w.highPage = binary.LittleEndian.Uint64(m[boltPageHeader+40:])
		}
	}

	if !found {
		return 0, errors.New("neither of its meta pages is valid")
	}

	return root, nil
}

// tree checks the page id and, below it, every page of the tree; depth bounds a cyclic tree.
func (w *boltWalker) tree(id uint64, depth int) error {
	if depth > 64 {
		return fmt.Errorf("its tree is deeper than 64 levels at page %d", id)
	}

	if id < 2 || id >= w.highPage {
		return fmt.Errorf("it refers to page %d outside its %d pages", id, w.highPage)
	}

	if w.seen[id] {
		return fmt.Errorf("page %d is reached twice", id)
	}

	w.seen[id] = true

	head := make([]byte, boltPageHeader)
	if _, err := w.f.ReadAt(head, int64(id)*w.pageSize); err != nil {
		return fmt.Errorf("page %d lies past its end", id)
	}

	overflow := uint64(binary.LittleEndian.Uint32(head[12:]))

	span := int64(overflow+1) * w.pageSize
	if int64(id)*w.pageSize+span > w.size || id+overflow >= w.highPage {
		return fmt.Errorf("page %d runs past its end", id)
	}

	if got := binary.LittleEndian.Uint64(head); got != id {
		return fmt.Errorf("page %d identifies itself as page %d", id, got)
	}

	// Only the element array and the buckets' headers are read, not the keys and values.
	count := int64(binary.LittleEndian.Uint16(head[10:]))
	if boltPageHeader+count*boltElement > span {
		return fmt.Errorf("page %d has more elements than fit in it", id)
	}

	elements := make([]byte, boltPageHeader+count*boltElement)
	if _, err := w.f.ReadAt(elements, int64(id)*w.pageSize); err != nil {
		return fmt.Errorf("reading page %d: %w", id, err)
	}

	return w.page(boltPage{elements: elements, span: int(span), at: int64(id) * w.pageSize, f: w.f}, id, depth)
}

// boltPage is a stored page (its element array read from f at offset at) or an inline bucket's
// page (all of it in elements, f nil).
type boltPage struct {
	elements []byte
	span     int
	at       int64
	f        io.ReaderAt
}

// read returns n bytes at offset off of the page.
func (p boltPage) read(off, n int) ([]byte, error) {
	if p.f == nil {
		return p.elements[off : off+n], nil
	}

	b := make([]byte, n)
	_, err := p.f.ReadAt(b, p.at+int64(off))

	return b, err
}

// page checks the elements of page p and descends into its children and sub-buckets.
func (w *boltWalker) page(p boltPage, id uint64, depth int) error {
	if len(p.elements) < boltPageHeader {
		return fmt.Errorf("an inline bucket under page %d is shorter than a page header", id)
	}

	flags := binary.LittleEndian.Uint16(p.elements[8:])
	count := int(binary.LittleEndian.Uint16(p.elements[10:]))

	if flags != boltBranchPage && flags != boltLeafPage {
		return fmt.Errorf("page %d is neither a branch nor a leaf (flags %#x)", id, flags)
	}

	if boltPageHeader+count*boltElement > min(p.span, len(p.elements)) {
		return fmt.Errorf("page %d has more elements than fit in it", id)
	}

	for i := range count {
		at := boltPageHeader + i*boltElement
		e := p.elements[at:]

		if flags == boltBranchPage {
			pos, ksize := int(binary.LittleEndian.Uint32(e)), int(binary.LittleEndian.Uint32(e[4:]))
			if at+pos+ksize > p.span {
				return fmt.Errorf("a key of page %d lies outside it", id)
			}

			if err := w.tree(binary.LittleEndian.Uint64(e[8:]), depth+1); err != nil {
				return err
			}

			continue
		}

		eflags, pos := binary.LittleEndian.Uint32(e), int(binary.LittleEndian.Uint32(e[4:]))
		ksize, vsize := int(binary.LittleEndian.Uint32(e[8:])), int(binary.LittleEndian.Uint32(e[12:]))

		if at+pos+ksize+vsize > p.span {
			return fmt.Errorf("a key or value of page %d lies outside it", id)
		}

		if eflags&boltBucketLeaf == 0 {
			continue
		}

		if vsize < boltInBucketBytes {
			return fmt.Errorf("a bucket of page %d has no header", id)
		}

		value, err := p.read(at+pos+ksize, vsize)
		if err != nil {
			return fmt.Errorf("reading a bucket of page %d: %w", id, err)
		}

		if root := binary.LittleEndian.Uint64(value); root != 0 {
			err = w.tree(root, depth+1)
		} else {
			inline := value[boltInBucketBytes:]
			err = w.page(boltPage{elements: inline, span: len(inline)}, id, depth+1)
		}

		if err != nil {
			return err
		}
	}

	return nil
}
