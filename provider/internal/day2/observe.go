package day2

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"github.com/siderolabs/talos/pkg/machinery/resources/block"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
)

// Installed is what a node runs: its Talos version and the Image Factory schematic of its image
// ("" when the node runs a vanilla image).
type Installed struct {
	Version   string
	Schematic string
}

func (i Installed) String() string {
	if i.Schematic == "" {
		return i.Version + " (no schematic)"
	}

	return fmt.Sprintf("%s (schematic %.12s…)", i.Version, i.Schematic)
}

// Observed is a node's running image and the id of its current boot.
type Observed struct {
	Installed
	BootID string
}

// Observe reads what a node runs: the version from the Version API, the schematic from the
// "schematic" extension Image Factory images carry (COSI ExtensionStatus), the boot id from
// /proc/sys/kernel/random/boot_id.
func Observe(ctx context.Context, c *client.Client) (Observed, error) {
	ver, err := c.Version(ctx)
	if err != nil {
		return Observed{}, fmt.Errorf("reading the Talos version: %w", err)
	}

	var o Observed

	for _, m := range ver.GetMessages() {
		o.Version = m.GetVersion().GetTag()
	}

	if o.Version == "" {
		return Observed{}, fmt.Errorf("the Version API answered no version")
	}

	if o.Schematic, err = schematicOf(ctx, c); err != nil {
		return Observed{}, err
	}

	if o.BootID, err = BootID(ctx, c); err != nil {
		return Observed{}, err
	}

	return o, nil
}

// WaitObserve waits (at most timeout) until the node's Talos API answers and reads what it runs.
func WaitObserve(ctx context.Context, c *client.Client, name string, timeout time.Duration, progress Progress) (Observed, error) {
	var o Observed

	err := poll(ctx, timeout, name+"'s Talos API", progress, func(ctx context.Context) (err error) {
		o, err = Observe(ctx, c)

		return err
	})

	return o, err
}

// BootID reads the id of the node's current boot; it changes at every boot.
func BootID(ctx context.Context, c *client.Client) (string, error) {
	r, err := c.Read(ctx, "/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("reading the boot id: %w", err)
	}
	defer r.Close() //nolint:errcheck // read-only stream

	b, err := io.ReadAll(r)
	if err != nil {
		return "", fmt.Errorf("reading the boot id: %w", err)
	}

	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("reading the boot id: the node answered nothing")
	}

	return id, nil
}

// schematicOf is the Image Factory schematic id the node's image carries: the version of its
// "schematic" extension (COSI ExtensionStatus); "" for an image the factory did not make.
func schematicOf(ctx context.Context, c *client.Client) (string, error) {
	exts, err := safe.StateListAll[*runtime.ExtensionStatus](ctx, c.COSI)
	if err != nil {
		return "", fmt.Errorf("reading the node's extensions: %w", err)
	}

	for ext := range exts.All() {
		if ext.TypedSpec().Metadata.Name == "schematic" {
			return ext.TypedSpec().Metadata.Version, nil
		}
	}

	return "", nil
}

// securityOf reads a node's SecurityState and the keys its STATE and EPHEMERAL volumes were opened
// with (VolumeStatus); not Known when the node publishes no SecurityState.
func securityOf(ctx context.Context, c *client.Client) (Security, error) {
	st, err := safe.StateGetByID[*runtime.SecurityState](ctx, c.COSI, runtime.SecurityStateID)
	if state.IsNotFoundError(err) {
		return Security{}, nil
	}

	if err != nil {
		return Security{}, err
	}

	sec := Security{Known: true, SecureBoot: st.TypedSpec().SecureBoot}

	for label, key := range map[string]*string{constants.StatePartitionLabel: &sec.StateKey, constants.EphemeralPartitionLabel: &sec.Ephemeral} {
		vs, err := safe.StateGetByID[*block.VolumeStatus](ctx, c.COSI, label)
		if err != nil {
			return Security{}, fmt.Errorf("reading volume %s: %w", label, err)
		}

		if vs.TypedSpec().EncryptionProvider != block.EncryptionProviderNone {
			*key = strings.Join(vs.TypedSpec().ConfiguredEncryptionKeys, ",")
		}
	}

	return sec, nil
}
