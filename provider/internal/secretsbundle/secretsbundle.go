// Package secretsbundle reads an existing Talos secrets bundle, the PKI and tokens of a cluster
// made by talosctl or Terraform, into the generator's form (machineconfig.Secrets), so the
// component can adopt that cluster and configure its nodes without new secrets.
//
// It accepts the shapes users have:
//   - the YAML `talosctl gen secrets` writes (Talos machinery's secrets.Bundle, read with
//     machinery's own types);
//   - the JSON of the Terraform talos provider's talos_machine_secrets.machine_secrets attribute
//     (`terraform output -json`), snake_case;
//   - the same object as the Pulumi talos provider outputs it (machine.Secrets' machineSecrets,
//     `pulumi stack output --json`), camelCase.
//
// Every problem is reported at once, named by its field in the shape detected, and no error
// ever holds a secret value: only field names and what is wrong with them.
package secretsbundle

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"go.yaml.in/yaml/v4"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/machineconfig"
)

// Field is how errors name the bundle (the component's argument it will come from).
const Field = "secrets.bundle"

// Shape is the form a bundle was written in.
type Shape int

// The shapes Parse reads.
const (
	Unknown Shape = iota
	// Talosctl is the YAML of `talosctl gen secrets` (machinery's secrets.Bundle).
	Talosctl
	// Terraform is the JSON of talos_machine_secrets.machine_secrets (snake_case).
	Terraform
	// Pulumi is the talos provider's machine.Secrets machineSecrets output (camelCase).
	Pulumi
)

func (s Shape) String() string {
	switch s {
	case Talosctl:
		return "the talosctl gen secrets YAML"
	case Terraform:
		return "the Terraform talos_machine_secrets.machine_secrets JSON"
	case Pulumi:
		return "the Pulumi talos machine.Secrets machineSecrets output"
	default:
		return "an unknown shape"
	}
}

// names are a shape's field names where the shapes differ.
type names struct {
	bootstrap, secretbox, aescbc string
	aggregator, serviceAccount   string
	crt                          string
}

var shapeNames = map[Shape]names{
	Talosctl: {"bootstraptoken", "secretboxencryptionsecret", "aescbcencryptionsecret", "k8saggregator", "k8sserviceaccount", "crt"},
	// siderolabs/terraform-provider-talos pkg/talos/talos_machine_secrets_resource.go.
	Terraform: {"bootstrap_token", "secretbox_encryption_secret", "aescbc_encryption_secret", "k8s_aggregator", "k8s_serviceaccount", "cert"},
	// The talos provider's schema: talos:machine/generated:MachineSecrets.
	Pulumi: {"bootstrapToken", "secretboxEncryptionSecret", "aescbcEncryptionSecret", "k8sAggregator", "k8sServiceaccount", "cert"},
}

// Error is a bundle that cannot be used: every problem found, in the detected shape's terms.
type Error struct {
	Shape    Shape
	Problems []string
}

func (e *Error) Error() string {
	var b strings.Builder

	if e.Shape != Unknown {
		fmt.Fprintf(&b, "%s: read as %s; %d problem(s)", Field, e.Shape, len(e.Problems))
	}

	for i, p := range e.Problems {
		if i > 0 || e.Shape != Unknown {
			b.WriteByte('\n')
		}

		fmt.Fprintf(&b, "%s: %s", Field, p)
	}

	return b.String()
}

// Parse reads a secrets bundle in any of the shapes (see the package comment) and checks it.
func Parse(text string) (machineconfig.Secrets, error) {
	s, _, err := ParseShape(text)

	return s, err
}

// ParseShape is Parse that also says which shape the bundle was read as.
func ParseShape(text string) (machineconfig.Secrets, Shape, error) {
	text = unquoted(text)

	tree, err := decode(text)
	if err != nil {
		return machineconfig.Secrets{}, Unknown, err
	}

	shape := detect(tree, isJSON(text))
	c := &checker{tree: tree, n: shapeNames[shape], reported: map[string]bool{}}
	s := secretsOf(c.check())

	if len(c.problems) == 0 && shape == Talosctl {
		// The talosctl form is machinery's own: read it the way secrets.LoadBundle does.
		b := &secrets.Bundle{Clock: secrets.NewClock()}
		if err := yaml.Unmarshal([]byte(text), b); err != nil {
			c.problems = append(c.problems, "cannot be read as a Talos secrets bundle")
		} else {
			s = machineconfig.SecretsFrom(b)
		}
	}

	if len(c.problems) == 0 {
		// Machinery's own check, after ours: nothing it finds should be left.
		if _, err := s.Bundle(config.TalosVersionCurrent); err != nil {
			c.problems = append(c.problems, "is refused by Talos: "+err.Error())
		}
	}

	if len(c.problems) > 0 {
		return machineconfig.Secrets{}, shape, &Error{Shape: shape, Problems: c.problems}
	}

	return s, shape, nil
}

func isJSON(text string) bool {
	return strings.HasPrefix(strings.TrimSpace(text), "{")
}

var lineOf = regexp.MustCompile(`line (\d+)`)

// decode is the bundle as a tree of maps and scalars. Syntax errors give a position only: the
// parsers' messages may quote the text.
func decode(text string) (map[string]any, error) {
	if strings.TrimSpace(text) == "" {
		return nil, &Error{Problems: []string{"is empty"}}
	}

	var v any

	if isJSON(text) {
		d := json.NewDecoder(bytes.NewReader([]byte(text)))
		if err := d.Decode(&v); err != nil {
			var se *json.SyntaxError
			if errors.As(err, &se) {
				return nil, &Error{Problems: []string{fmt.Sprintf("is not valid JSON (at byte %d)", se.Offset)}}
			}

			return nil, &Error{Problems: []string{"is not valid JSON"}}
		}
	} else if err := yaml.Unmarshal([]byte(text), &v); err != nil {
		where := ""
		if m := lineOf.FindStringSubmatch(err.Error()); m != nil {
			where = " (line " + m[1] + ")"
		}

		return nil, &Error{Problems: []string{"is not valid YAML" + where}}
	}

	m, ok := asMap(v)
	if !ok {
		return nil, &Error{Problems: []string{"is not a mapping: expected the talosctl gen secrets YAML " +
			"or the machine secrets object of the Terraform or Pulumi talos provider"}}
	}

	return m, nil
}

// asMap is v as a map with string keys (YAML may give keys of other types).
func asMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, v := range m {
			out[fmt.Sprint(k)] = v
		}

		return out, true
	default:
		return nil, false
	}
}

// detect is the shape whose distinctive field names the tree uses most. With none, a JSON
// object is taken for Terraform's and YAML for talosctl's.
func detect(tree map[string]any, jsonText bool) Shape {
	has := func(path ...string) bool {
		var v any = tree
		for _, p := range path {
			m, ok := asMap(v)
			if !ok {
				return false
			}

			if v, ok = m[p]; !ok {
				return false
			}
		}

		return true
	}

	order := []Shape{Talosctl, Terraform, Pulumi}
	if jsonText {
		order = []Shape{Terraform, Pulumi, Talosctl}
	}

	best, bestScore := order[0], -1

	for _, s := range order {
		n := shapeNames[s]
		score := 0

		for _, k := range []string{n.bootstrap, n.secretbox, n.aescbc} {
			if has("secrets", k) {
				score++
			}
		}

		for _, k := range []string{n.aggregator, n.serviceAccount} {
			if has("certs", k) {
				score++
			}
		}

		for _, k := range []string{"etcd", "k8s", "os", n.aggregator} {
			if has("certs", k, n.crt) {
				score++
			}
		}

		if score > bestScore { // ties keep the earlier, the text's likelier shape
			best, bestScore = s, score
		}
	}

	return best
}

// secretsOf is a checked bundle's decoded values in the generator's form.
func secretsOf(v values) machineconfig.Secrets {
	enc := base64.StdEncoding.EncodeToString
	pair := func(p certPair) machineconfig.CertAndKey {
		return machineconfig.CertAndKey{Cert: enc(p.crt), Key: enc(p.key)}
	}

	return machineconfig.Secrets{
		ClusterID: v.clusterID, ClusterSecret: v.clusterSecret, TrustdToken: v.trustdToken,
		BootstrapToken: v.bootstrapToken, SecretboxEncryptionSecret: v.secretbox, AESCBCEncryptionSecret: v.aescbc,
		Certs: map[string]machineconfig.CertAndKey{
			"etcd": pair(v.etcd), "k8s": pair(v.k8s), "k8sAggregator": pair(v.k8sAggregator), "os": pair(v.os),
		},
		ServiceAccountKey: enc(v.serviceAccountKey),
	}
}

// unquoted is text without one layer of JSON string quoting: a bundle passed through a JSON
// encoder once more (Pulumi YAML's fn::toJSON of the talosctl YAML, which a YAML program needs
// for the JSON shapes, since it reads a JSON config value as an object) is read as the bundle.
func unquoted(text string) string {
	var s string
	if t := strings.TrimSpace(text); strings.HasPrefix(t, `"`) && json.Unmarshal([]byte(t), &s) == nil {
		return s
	}

	return text
}
