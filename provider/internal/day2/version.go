package day2

import (
	"fmt"

	"github.com/blang/semver/v4"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/compatibility"
)

// CheckUpgradePath says whether a node running from can move to to: Talos' own compatibility
// table (machinery's compatibility package: each minor upgrades only from the minors it supports)
// and no downgrade unless allowDowngrade. The error says what to do.
func CheckUpgradePath(from, to string, allowDowngrade bool) error {
	fv, err := semver.ParseTolerant(from)
	if err != nil {
		return fmt.Errorf("the node reports version %q, which is not a Talos version", from)
	}

	tv, err := semver.ParseTolerant(to)
	if err != nil {
		return fmt.Errorf("%q is not a Talos version", to)
	}

	if tv.LT(fv) && !allowDowngrade {
		return fmt.Errorf("%s is older than the %s the node runs: downgrades are refused unless upgrade.allowDowngrade is true", to, from)
	}

	host, err := compatibility.ParseTalosVersion(&machineapi.VersionInfo{Tag: from})
	if err != nil {
		return fmt.Errorf("the node's version %s: %w", from, err)
	}

	target, err := compatibility.ParseTalosVersion(&machineapi.VersionInfo{Tag: to})
	if err != nil {
		return fmt.Errorf("version %s: %w", to, err)
	}

	if err := upgradeableFrom(target, tv, host, fv); err != nil {
		return fmt.Errorf("Talos %s cannot be installed on a node running %s (%w): upgrade through an intermediate minor first, "+
			"one `pulumi up` per step", to, from, err)
	}

	return nil
}

// newerMinimums extends machinery v1.13.9's table with the minors released after it: the oldest
// host version each one upgrades from (Talos' release notes: 1.14 upgrades from 1.12 on).
var newerMinimums = map[[2]uint64]semver.Version{
	{1, 14}: semver.MustParse("1.12.0"),
}

func upgradeableFrom(target *compatibility.TalosVersion, tv semver.Version, host *compatibility.TalosVersion, hv semver.Version) error {
	minimum, ok := newerMinimums[[2]uint64{tv.Major, tv.Minor}]
	if !ok {
		return target.UpgradeableFrom(host)
	}

	core := semver.Version{Major: hv.Major, Minor: hv.Minor, Patch: hv.Patch}
	if core.LT(minimum) {
		return fmt.Errorf("host version %s is too old to upgrade to Talos %s", hv, tv)
	}

	return nil
}

// CheckKubernetesStep says whether a cluster on Kubernetes from may move to to: Kubernetes
// upgrades one minor at a time and does not go back. An empty from (unknown) allows anything.
func CheckKubernetesStep(from, to string) error {
	if from == "" || to == "" || from == to {
		return nil
	}

	fv, err := semver.ParseTolerant(from)
	if err != nil {
		return nil //nolint:nilerr // an unreadable old value cannot constrain the new one
	}

	tv, err := semver.ParseTolerant(to)
	if err != nil {
		return fmt.Errorf("%q is not a Kubernetes version", to)
	}

	switch {
	case tv.Major != fv.Major || tv.Minor < fv.Minor:
		return fmt.Errorf("%s → %s goes back a minor: Kubernetes does not support downgrades; keep %s", from, to, from)
	case tv.Minor > fv.Minor+1:
		return fmt.Errorf("%s → %s skips v%d.%d: Kubernetes upgrades one minor at a time; set v%d.%d.x, run `pulumi up`, then %s",
			from, to, fv.Major, fv.Minor+1, fv.Major, fv.Minor+1, to)
	}

	return nil
}
