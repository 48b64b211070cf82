package talosemu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/container"
	"github.com/siderolabs/talos/pkg/machinery/config/validation"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ApplyConfiguration loads, validates and stores a machine configuration, answering like the
// maintenance server before the first configuration and like machined after it. Every call is
// counted (Applies, DryRunApplies) before anything can refuse it.
func (s *machineService) ApplyConfiguration(_ context.Context, req *machineapi.ApplyConfigurationRequest) (*machineapi.ApplyConfigurationResponse, error) {
	s.node.countApply(req.GetDryRun())

	if s.node.snapshot().active == nil {
		return s.node.applyInMaintenance(req)
	}

	return s.node.applyConfigured(req)
}

// applyCounts are a node's ApplyConfiguration calls so far, whatever their outcome.
type applyCounts struct {
	applies, dryRuns atomic.Int64
}

func (n *Node) countApply(dryRun bool) {
	if dryRun {
		n.applyCounts.dryRuns.Add(1)
	} else {
		n.applyCounts.applies.Add(1)
	}
}

// Applies is how many ApplyConfiguration calls this node has served that were not dry runs, in
// maintenance mode or authenticated, whatever their outcome (applied, staged, refused as invalid).
// A call another node proxies here counts here, where the configuration would land. It counts
// from the node's start: a VM started again is a new node, with a new boot id.
func (n *Node) Applies() int { return int(n.applyCounts.applies.Load()) }

// DryRunApplies is how many dry-run ApplyConfiguration calls this node has served (what a
// preview asks a node about a configuration), whatever their outcome; Applies does not count them.
func (n *Node) DryRunApplies() int { return int(n.applyCounts.dryRuns.Load()) }

// applyInMaintenance is Talos' maintenance-mode apply: AUTO, REBOOT and TRY only; the reply
// carries the warnings and no mode. The node then installs and comes back with mutual TLS.
func (n *Node) applyInMaintenance(req *machineapi.ApplyConfigurationRequest) (*machineapi.ApplyConfigurationResponse, error) {
	switch req.GetMode() {
	case machineapi.ApplyConfigurationRequest_AUTO, machineapi.ApplyConfigurationRequest_REBOOT, machineapi.ApplyConfigurationRequest_TRY:
	default:
		return nil, status.Errorf(codes.Unimplemented, "apply configuration --mode='%s' is not supported in maintenance mode",
			strings.ReplaceAll(strings.ToLower(req.GetMode().String()), "_", "-"))
	}

	cfg, err := configloader.NewFromBytes(req.GetData())
	if err != nil {
		if n.opts.InvalidArgumentOnParseError {
			return nil, status.Errorf(codes.InvalidArgument, "failed to parse config: %s", err)
		}

		return nil, fmt.Errorf("failed to parse config: %w", err)
	}

	warnings, err := n.validate(cfg, n.opts.ValidationMode)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "configuration validation failed: %s", err)
	}

	reply := &machineapi.ApplyConfigurationResponse{Messages: []*machineapi.ApplyConfiguration{{Warnings: warnings}}}

	if req.GetDryRun() {
		reply.Messages[0].ModeDetails = "Dry run summary:\nNode is running in maintenance mode and does not have a config yet."

		return reply, nil
	}

	applied := &appliedConfig{raw: bytes.Clone(req.GetData()), cfg: cfg}

	n.mu.Lock()
	defer n.mu.Unlock()

	if n.active != nil {
		return nil, status.Error(codes.Unavailable, "talosemu: the node is going down")
	}

	n.joinLocked(cfg)
	n.active, n.persisted, n.formatted = applied, applied, applied
	n.takeDownLocked(StateInstalling, n.opts.InstallDelay, func() {})

	return reply, nil
}

// joinLocked moves a node getting its first configuration to the cluster Options.Join names for
// the configuration's cluster id, if that is another one than the node's.
func (n *Node) joinLocked(cfg config.Provider) {
	if n.opts.Join == nil || n.ownCluster || n.closing || cfg.DiscoveryIdentityConfig() == nil || cfg.DiscoveryIdentityConfig().ClusterID() == "" {
		return
	}

	to, from := n.opts.Join(cfg.DiscoveryIdentityConfig().ClusterID()), n.Cluster()
	if to == nil || to == from {
		return
	}

	from.unregister(n)

	if err := to.register(n, n.recordLocked()); err != nil {
		// Another node of that cluster has this address: the node stays where it was.
		_ = from.register(n, n.recordLocked())
		return
	}

	n.cluster.Store(to)
}

// applyConfigured is machined's apply on a configured node, with its modes:
// NO_REBOOT and TRY only for changes Talos applies live, AUTO picking NO_REBOOT or REBOOT, STAGED
// persisting the configuration for the next reboot, dry_run describing without applying.
func (n *Node) applyConfigured(req *machineapi.ApplyConfigurationRequest) (*machineapi.ApplyConfigurationResponse, error) {
	cfg, err := configloader.NewFromBytes(req.GetData())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}

	if cfg.RawV1Alpha1() == nil {
		return nil, status.Error(codes.InvalidArgument,
			"the applied machine configuration doesn't contain v1alpha1 config, did you mean to patch the machine config instead?")
	}

	warnings, err := n.validate(cfg, installedMode{n.opts.ValidationMode})
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}

	n.mu.Lock()
	defer n.mu.Unlock()

	if n.active == nil {
		return nil, status.Error(codes.Unavailable, "talosemu: the node is going down")
	}

	if req.GetMode() != machineapi.ApplyConfigurationRequest_TRY {
		n.stopTryTimerLocked()
	}

	if err := sameIdentity(n.active.cfg, cfg); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}

	mode, details, modeErr := req.GetMode(), "Applied configuration with a reboot", ""

	switch mode { //nolint:exhaustive // REBOOT keeps the default details
	case machineapi.ApplyConfigurationRequest_TRY, machineapi.ApplyConfigurationRequest_NO_REBOOT:
		if err := canApplyImmediate(n.active.cfg, cfg); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}

		details = "Applied configuration without a reboot"
	case machineapi.ApplyConfigurationRequest_STAGED:
		details = "Staged configuration to be applied after the next reboot"
	case machineapi.ApplyConfigurationRequest_AUTO:
		if err := canApplyImmediate(n.active.cfg, cfg); err != nil {
			mode, modeErr = machineapi.ApplyConfigurationRequest_REBOOT, ": "+err.Error()
		} else {
			mode, details = machineapi.ApplyConfigurationRequest_NO_REBOOT, "Applied configuration without a reboot"
		}
	}

	if req.GetDryRun() {
		diff, err := diffConfigs(n.active.cfg, cfg)
		if err != nil {
			return nil, fmt.Errorf("failed to generate diff: %w", err)
		}

		if diff == "" {
			diff = "No changes."
		}

		return &machineapi.ApplyConfigurationResponse{Messages: []*machineapi.ApplyConfiguration{{
			Mode:        mode,
			ModeDetails: fmt.Sprintf("Dry run summary:\n%s (skipped in dry-run).\nConfig diff:\n\n%s", details, diff),
		}}}, nil
	}

	applied := &appliedConfig{raw: bytes.Clone(req.GetData()), cfg: cfg}

	switch mode { //nolint:exhaustive // AUTO was resolved above
	case machineapi.ApplyConfigurationRequest_TRY:
		timeout := constants.ConfigTryTimeout
		if req.GetTryModeTimeout() != nil {
			timeout = req.GetTryModeTimeout().AsDuration()
		}

		details += fmt.Sprintf("\nThe config is applied in 'try' mode and will be automatically reverted back in %s", timeout)
		n.tryLocked(applied, timeout)
	case machineapi.ApplyConfigurationRequest_NO_REBOOT:
		n.persisted = applied
		n.setActiveLocked(applied)
	case machineapi.ApplyConfigurationRequest_STAGED:
		n.persisted = applied
	case machineapi.ApplyConfigurationRequest_REBOOT:
		n.persisted = applied
		n.takeDownLocked(StateRebooting, n.opts.RebootDelay, n.activatePersistedLocked)
	default:
		return nil, fmt.Errorf("incorrect mode '%s' specified for the apply config call", mode)
	}

	return &machineapi.ApplyConfigurationResponse{Messages: []*machineapi.ApplyConfiguration{{
		Mode:        mode,
		Warnings:    warnings,
		ModeDetails: details + modeErr,
	}}}, nil
}

// validate checks cfg in mode as the Talos version the node runs does. Machinery v1.14 no longer
// requires install instructions in a mode that requires an install: machine.install is deprecated
// for an UnattendedInstallConfig document, and neither is checked. Talos up to v1.13 refused a
// configuration without machine.install there, and the project always installs to disk, so the
// emulator keeps the check in the form of the node's version: machine.install, or, from the
// contract with UnattendedInstallConfig (v1.14) on, either one.
func (n *Node) validate(cfg config.Provider, mode validation.RuntimeMode) ([]string, error) {
	warnings, err := cfg.ValidateAsClient(mode)

	if !mode.RequiresInstall() {
		return warnings, err
	}

	raw := cfg.RawV1Alpha1()
	if raw != nil && raw.MachineConfig != nil && raw.MachineConfig.MachineInstall != nil { //nolint:staticcheck // the legacy section is what older versions require
		return warnings, err
	}

	vc, vcErr := config.ParseContractFromVersion(n.talosVersion())
	if vcErr == nil && vc.UnattendedInstallConfig() && cfg.UnattendedInstallConfig() != nil {
		return warnings, err
	}

	return warnings, errors.Join(err, fmt.Errorf("install instructions are required in %q mode", mode))
}

// setActiveLocked switches the running configuration live and re-issues the API certificate (new
// connections see it); the persisted configuration is left alone.
func (n *Node) setActiveLocked(applied *appliedConfig) {
	n.active = applied

	if s, err := n.servingTLSLocked(); err == nil {
		n.serving = s
	}

	n.setPhaseLocked(n.phase)
}

// tryLocked runs applied until timeout, then goes back to the configuration running before.
func (n *Node) tryLocked(applied *appliedConfig, timeout time.Duration) {
	previous := n.active
	n.setActiveLocked(applied)

	var timer *time.Timer

	timer = time.AfterFunc(timeout, func() {
		n.mu.Lock()
		defer n.mu.Unlock()

		if n.tryTimer != timer || n.closing {
			return
		}

		n.tryTimer = nil
		n.opts.Logf("talosemu %s: reverting the configuration applied in try mode", n.addr)
		n.setActiveLocked(previous)
	})
	n.tryTimer = timer
}

// sameIdentity refuses a configuration that would turn the node into another machine. Talos
// itself would take a new machine.ca live (CA rotation); the emulator only accepts that when the
// running CA stays in machine.acceptedCAs, because otherwise every current client is locked out,
// which in this project always means secrets were regenerated by mistake.
func sameIdentity(running, next config.Provider) error {
	runningCA, nextCA := running.Machine().Security().IssuingCA(), next.Machine().Security().IssuingCA()

	if runningCA != nil && (nextCA == nil || !bytes.Equal(runningCA.Crt, nextCA.Crt)) {
		accepted := false

		for _, ca := range next.Machine().Security().AcceptedCAs() {
			accepted = accepted || bytes.Equal(ca.Crt, runningCA.Crt)
		}

		if !accepted {
			return errors.New("talosemu: machine.ca differs from the running configuration's OS CA and the running CA " +
				"is not in machine.acceptedCAs: the node would stop trusting every current client; reset the node to change its secrets")
		}
	}

	if running.Machine().Type() != next.Machine().Type() {
		return fmt.Errorf("talosemu: machine.type cannot change from %s to %s on a configured node; reset it first",
			running.Machine().Type(), next.Machine().Type())
	}

	return nil
}

// canApplyImmediate is Talos' rule (machined runtime CanApplyImmediate) for what an apply can
// change without a reboot: the v1alpha1 document may differ only in the fields listed below.
func canApplyImmediate(running, next config.Provider) error {
	current, proposed := running.RawV1Alpha1(), next.RawV1Alpha1()
	if current == nil || proposed == nil {
		return errors.New("config is not v1alpha1")
	}

	proposed = proposed.DeepCopy()
	proposed.ConfigDebug = current.ConfigDebug
	proposed.ClusterConfig = current.ClusterConfig

	if pm, cm := proposed.MachineConfig, current.MachineConfig; pm != nil && cm != nil {
		pm.MachineCA = cm.MachineCA
		pm.MachineAcceptedCAs = cm.MachineAcceptedCAs
		pm.MachineTime = cm.MachineTime //nolint:staticcheck // mirrors Talos
		pm.MachineCertSANs = cm.MachineCertSANs
		pm.MachineInstall = cm.MachineInstall
		pm.MachineNetwork = cm.MachineNetwork //nolint:staticcheck // mirrors Talos
		pm.MachineSysfs = cm.MachineSysfs
		pm.MachineSysctls = cm.MachineSysctls
		pm.MachineLogging = cm.MachineLogging
		pm.MachineControlPlane = cm.MachineControlPlane
		pm.MachineKubelet = cm.MachineKubelet
		pm.MachineKernel = cm.MachineKernel
		pm.MachineRegistries = cm.MachineRegistries //nolint:staticcheck // mirrors Talos
		pm.MachinePods = cm.MachinePods
		pm.MachineSeccompProfiles = cm.MachineSeccompProfiles
		pm.MachineNodeAnnotations = cm.MachineNodeAnnotations
		pm.MachineNodeLabels = cm.MachineNodeLabels
		pm.MachineNodeTaints = cm.MachineNodeTaints

		if pf, cf := pm.MachineFeatures, cm.MachineFeatures; pf != nil && cf != nil {
			pf.KubernetesTalosAPIAccessConfig = cf.KubernetesTalosAPIAccessConfig
			pf.KubePrismSupport = cf.KubePrismSupport
			pf.HostDNSSupport = cf.HostDNSSupport
			pf.ImageCacheSupport = cf.ImageCacheSupport
			pf.FeatureNodeAddressSortAlgorithm = cf.FeatureNodeAddressSortAlgorithm
		}
	}

	if reflect.DeepEqual(current, proposed) {
		return nil
	}

	diff, err := diffConfigs(container.NewV1Alpha1(current), container.NewV1Alpha1(proposed))
	if err != nil {
		return fmt.Errorf("error calculating diff: %w", err)
	}

	return fmt.Errorf("this config change can't be applied in immediate mode\ndiff:\n%s", diff)
}
