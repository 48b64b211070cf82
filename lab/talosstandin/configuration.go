package talosstandin

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"github.com/siderolabs/crypto/x509"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/config/bundle"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	"github.com/siderolabs/talos/pkg/machinery/config/generate"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/constants"
)

// machineConfiguration implements machine.getConfiguration the way the upstream data source
// does: Talos' generation for the version contract, the given patches, no docs or examples
// unless asked.
func machineConfiguration(args property.Map) (property.Map, error) {
	talosVersion := str(args, "talosVersion")

	vc, err := contract(talosVersion)
	if err != nil {
		return property.Map{}, err
	}

	// The secrets are checked against the contract the configuration is generated for.
	b, err := bundleFromValue(args.Get("machineSecrets"), vc)
	if err != nil {
		return property.Map{}, err
	}

	typ, err := machine.ParseType(str(args, "machineType"))
	if err != nil || (typ != machine.TypeControlPlane && typ != machine.TypeWorker) {
		return property.Map{}, fmt.Errorf("machineType %q: must be controlplane or worker", str(args, "machineType"))
	}

	kube := strings.TrimPrefix(str(args, "kubernetesVersion"), "v")
	if kube == "" {
		kube = constants.DefaultKubernetesVersion
	}

	installer := "ghcr.io/siderolabs/installer:" + firstNonEmpty(talosVersion, "v1.12.0")

	patches := strings_(args.Get("configPatches"))

	loaded, err := configpatcher.LoadPatches(patches)
	if err != nil {
		return property.Map{}, fmt.Errorf("error parsing config patch: %w", err)
	}

	patchOpt := bundle.WithPatchWorker(loaded)
	if typ == machine.TypeControlPlane {
		patchOpt = bundle.WithPatchControlPlane(loaded)
	}

	cb, err := bundle.NewBundle(
		bundle.WithInputOptions(&bundle.InputOptions{
			ClusterName: str(args, "clusterName"),
			Endpoint:    str(args, "clusterEndpoint"),
			KubeVersion: kube,
			GenOptions: []generate.Option{
				generate.WithClusterDiscovery(true),
				generate.WithDNSDomain(constants.DefaultDNSDomain),
				generate.WithInstallDisk("/dev/sda"),
				generate.WithInstallImage(installer),
				generate.WithSecretsBundle(b),
				generate.WithVersionContract(vc),
			},
		}),
		bundle.WithVerbose(false),
		patchOpt,
	)
	if err != nil {
		return property.Map{}, err
	}

	flags := encoder.CommentsDisabled
	if boolean(args, "docs") {
		flags |= encoder.CommentsDocs
	}

	if boolean(args, "examples") {
		flags |= encoder.CommentsExamples
	}

	out, err := cb.Serialize(flags, typ)
	if err != nil {
		return property.Map{}, err
	}

	ret := map[string]property.Value{}
	for k, v := range args.All {
		ret[k] = v
	}

	ret["id"] = property.New(str(args, "clusterName"))
	ret["machineConfiguration"] = property.New(string(out)).WithSecret(true)

	return property.NewMap(ret), nil
}

// talosConfiguration implements client.getConfiguration: a talosconfig with the given
// endpoints and nodes and the admin client certificate.
func talosConfiguration(args property.Map) (property.Map, error) {
	cc := args.Get("clientConfiguration")
	if !cc.IsMap() {
		return property.Map{}, fmt.Errorf("clientConfiguration: expected an object")
	}

	dec := func(k string) ([]byte, error) {
		b, err := base64.StdEncoding.DecodeString(str(cc.AsMap(), k))
		if err != nil {
			return nil, fmt.Errorf("clientConfiguration.%s: not base64: %w", k, err)
		}

		return b, nil
	}

	ca, err := dec("caCertificate")
	if err != nil {
		return property.Map{}, err
	}

	crt, err := dec("clientCertificate")
	if err != nil {
		return property.Map{}, err
	}

	key, err := dec("clientKey")
	if err != nil {
		return property.Map{}, err
	}

	name := str(args, "clusterName")
	tc := clientconfig.NewConfig(name, strings_(args.Get("endpoints")), ca, &x509.PEMEncodedCertificateAndKey{Crt: crt, Key: key})
	tc.Contexts[name].Nodes = strings_(args.Get("nodes"))

	out, err := tc.Bytes()
	if err != nil {
		return property.Map{}, err
	}

	ret := map[string]property.Value{}
	for k, v := range args.All {
		ret[k] = v
	}

	ret["id"] = property.New(name)
	ret["talosConfig"] = property.New(string(out)).WithSecret(true)

	return property.NewMap(ret), nil
}

func strings_(v property.Value) []string {
	var out []string
	if !v.IsArray() {
		return out
	}

	for _, e := range v.AsArray().All {
		if e.IsString() {
			out = append(out, e.AsString())
		}
	}

	return out
}

func boolean(m property.Map, k string) bool {
	v := m.Get(k)

	return v.IsBool() && v.AsBool()
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}

	return ""
}
