// Package wire is the only package that registers the children of a TalosProxmoxCluster. Each
// stage is a function that takes what it needs and returns what later stages need, as typed
// results: the image and its downloads (Image), the machine secrets (Secrets), the record of the
// Kubernetes version the cluster runs (RecordKubernetes), the configuration check
// (CheckConfigs), the VMs and the nodes' addresses (VirtualMachines), the Talos side — applies,
// bootstrap, kubeconfig, client credentials (Talos) — and the day-2 resources that operate the
// running cluster (Operate). Only the component's constructor calls them, in that
// order; no stage calls another, and nothing is shared through mutable state.
//
// Everything it computes comes from the validated spec (package spec) and the pure packages
// below it; what it adds is Pulumi: resources, their options and the outputs between them.
package wire

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/plan"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// Scope is where the stages register: the Pulumi context, the component (every child's parent),
// its Pulumi resource name (children are named `<name>-<purpose>`, so two clusters can live in
// one stack) and the validated cluster.
type Scope struct {
	Ctx     *pulumi.Context
	Name    string
	Parent  pulumi.Resource
	Cluster *spec.Cluster
}

func (s Scope) child(suffix string) string { return plan.ResourceName(s.Name, suffix) }

func (s Scope) parent() pulumi.ResourceOrInvokeOption { return pulumi.Parent(s.Parent) }

// info logs a message on the component.
func (s Scope) info(msg string) { _ = s.Ctx.Log.Info(msg, &pulumi.LogArgs{Resource: s.Parent}) }

func (s Scope) warn(msg string) { _ = s.Ctx.Log.Warn(msg, &pulumi.LogArgs{Resource: s.Parent}) }

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// Lifecycle is the resource option that serves the component's own lifecycle resources: an
// explicit provider of this plugin at this version. The engine's default provider for them is
// unknown to the engine when a replaced NodeUpgrade is deleted first ("unknown provider
// …default_0_1_0…"), so every lifecycle resource names this one.
type Lifecycle struct{ option pulumi.ResourceOption }

// LifecycleProvider registers the plugin's own provider (package pkg at version), once per
// cluster.
func LifecycleProvider(s Scope, pkg, version string) (Lifecycle, error) {
	var self pulumi.ProviderResourceState
	if err := s.Ctx.RegisterResource("pulumi:providers:"+pkg, s.child("lifecycle"), pulumi.Map{}, &self,
		s.parent(), pulumi.Version(version)); err != nil {
		return Lifecycle{}, errorf("registering the %s provider: %w", pkg, err)
	}

	return Lifecycle{option: pulumi.Provider(&self)}, nil
}
