package machineconfig

import (
	"fmt"
	"sync"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
)

// placeholders are the placeholder secrets made so far, by contract.
var placeholders sync.Map // contract → func() (Secrets, error)

// Placeholder returns secrets for checking configurations before a cluster's own secrets exist:
// a bundle Talos generates for the contract, except that the service account key is ECDSA (about
// a millisecond) rather than the RSA key the contract selects (hundreds of milliseconds to
// seconds, and that wait would hold every VM of a new cluster). A configuration generated from
// them differs from the cluster's only in keys, certificates and tokens, which Talos' validation
// reads for form, not value; it is never applied anywhere. Made once per contract and process.
func Placeholder(contract string) (Secrets, error) {
	gen := func() (Secrets, error) {
		vc, err := config.ParseContractFromVersion(contract)
		if err != nil {
			return Secrets{}, fmt.Errorf("configuration contract %q: %w", contract, err)
		}

		b, err := secrets.NewBundle(secrets.NewFixedClock(time.Unix(0, 0)), vc, secrets.WithECDSAServiceAccountKey())
		if err != nil {
			return Secrets{}, fmt.Errorf("generating placeholder secrets: %w", err)
		}

		return SecretsFrom(b), nil
	}

	once, _ := placeholders.LoadOrStore(contract, sync.OnceValues(gen))

	return once.(func() (Secrets, error))()
}
