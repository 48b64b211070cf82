package pvefake

import (
	"bytes"
	"encoding/binary"
)

// qcow2Magic starts every qcow2 image ("QFI\xfb").
var qcow2Magic = []byte{'Q', 'F', 'I', 0xfb}

// imageVirtualSize is the disk size an image yields when imported: the virtual size in a qcow2
// header, else the file size (raw images, or the lab's placeholder files).
func imageVirtualSize(v *volume) int64 {
	if len(v.data) >= 32 && bytes.Equal(v.data[:4], qcow2Magic) {
		if size := int64(binary.BigEndian.Uint64(v.data[24:32])); size > 0 {
			return size
		}
	}

	return v.size
}

// QCOW2Image returns a minimal valid qcow2 (version 3) header for an empty image of the given
// virtual size, padded to 4 KiB: a stand-in image server can serve it so that importing it
// yields a disk of that size.
func QCOW2Image(virtualSize int64) []byte {
	const clusterBits = 16

	b := make([]byte, 4096)
	copy(b, qcow2Magic)
	binary.BigEndian.PutUint32(b[4:], 3)            // version
	binary.BigEndian.PutUint32(b[20:], clusterBits) // cluster_bits
	binary.BigEndian.PutUint64(b[24:], uint64(virtualSize))
	binary.BigEndian.PutUint32(b[32:], 0)              // crypt_method
	binary.BigEndian.PutUint32(b[36:], 1)              // l1_size
	binary.BigEndian.PutUint64(b[40:], 3<<clusterBits) // l1_table_offset
	binary.BigEndian.PutUint64(b[48:], 1<<clusterBits) // refcount_table_offset
	binary.BigEndian.PutUint32(b[56:], 1)              // refcount_table_clusters
	binary.BigEndian.PutUint32(b[96:], 4)              // refcount_order
	binary.BigEndian.PutUint32(b[100:], 104)           // header_length

	return b
}
