package talosemu

import (
	"bytes"
	"fmt"
	"os"
	"sync"

	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
)

// SystemDisk stands for a VM's system disk across power cycles: the installed configuration and
// Talos version, and (under Dir) the etcd data of a control plane. A node started with a disk
// that holds a configuration boots configured, as an installed Talos does; without a disk, a
// stopped node is gone for good. The lab's host emulator keeps one disk per VM and drops it when
// the VM is deleted.
type SystemDisk struct {
	// Dir holds the etcd data directory (Dir/etcd).
	Dir string

	mu        sync.Mutex
	config    []byte
	installed Installed
	// formatted is the configuration the system volumes were created with (their encryption).
	formatted []byte
}

// NewSystemDisk returns an empty disk whose files live under dir.
func NewSystemDisk(dir string) (*SystemDisk, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("system disk: %w", err)
	}

	return &SystemDisk{Dir: dir}, nil
}

// Installed reports whether the disk holds a configuration.
func (d *SystemDisk) Installed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()

	return len(d.config) > 0
}

// Wipe empties the disk.
func (d *SystemDisk) Wipe() error {
	d.mu.Lock()
	d.config, d.installed, d.formatted = nil, Installed{}, nil
	d.mu.Unlock()

	return os.RemoveAll(d.Dir)
}

func (d *SystemDisk) save(config []byte, installed Installed, formatted []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()

	d.config, d.installed, d.formatted = bytes.Clone(config), installed, bytes.Clone(formatted)
}

// formattedWith is the configuration the disk's system volumes were created with (nil: none).
func (d *SystemDisk) formattedWith() *appliedConfig {
	d.mu.Lock()
	raw := bytes.Clone(d.formatted)
	d.mu.Unlock()

	cfg, err := configloader.NewFromBytes(raw)
	if len(raw) == 0 || err != nil {
		return nil
	}

	return &appliedConfig{raw: raw, cfg: cfg}
}

func (d *SystemDisk) load() (*appliedConfig, Installed, error) {
	d.mu.Lock()
	raw, installed := bytes.Clone(d.config), d.installed
	d.mu.Unlock()

	if len(raw) == 0 {
		return nil, installed, nil
	}

	cfg, err := configloader.NewFromBytes(raw)
	if err != nil {
		return nil, installed, fmt.Errorf("the configuration on the system disk does not load: %w", err)
	}

	return &appliedConfig{raw: raw, cfg: cfg}, installed, nil
}
