// Package redact renders machine configurations and Kubernetes objects with every secret value
// replaced by a stable fingerprint, so a preview can show what changes on a node without showing
// a key, a token or a password.
//
// A fingerprint is "<redacted sha256:1a2b3c4d>": the first 8 hex digits of the SHA-256 of the
// value as the configuration holds it (a base64 PEM for a key). The same value always shows the
// same fingerprint, so an unchanged secret makes no diff line and a rotated one shows as the old
// fingerprint against the new; 32 bits of a hash of a random key or token tell nothing about it,
// and whoever holds the value can check which one a fingerprint stands for (`printf %s "$v" |
// sha256sum`).
//
// What is secret is decided in layers, each catching what the one before might miss:
//  1. Talos' own redaction (machinery's RedactSecrets: the v1alpha1 tokens and CA keys, the
//     cluster secrets, registry credentials, WireGuard and VIP API keys, and every document
//     type that declares secrets), so a field a new Talos release marks secret is covered;
//  2. every value under a key named like a secret (key, token, secret, password, crt, …), every
//     PEM block, base64 of a PEM block and URL with a password, wherever it appears;
//  3. Secrets in inline manifests (data and stringData) and extra manifest headers;
//  4. a last pass over the rendered text that replaces any remaining occurrence of a value
//     already fingerprinted (raw, base64-decoded, or a line of its PEM body).
package redact

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	"go.yaml.in/yaml/v4"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/yamlnode"
)

// Fingerprint is how secret value v shows.
func Fingerprint(v string) string {
	sum := sha256.Sum256([]byte(v))

	return fmt.Sprintf("<redacted sha256:%x>", sum[:4])
}

// sentinel marks the values Talos' own redaction replaced; it cannot be a real value.
const sentinel = "\x00talos-redacted\x00"

// Config renders a machine configuration (all its documents) canonically — machinery's encoding
// without comments, so the same configuration always renders the same — with every secret value
// replaced by its fingerprint.
func Config(raw string) (string, error) {
	cfg, err := configloader.NewFromBytes([]byte(raw))
	if err != nil {
		return "", fmt.Errorf("reading the machine configuration: %w", err)
	}

	plain, err := cfg.EncodeBytes(encoder.WithComments(encoder.CommentsDisabled))
	if err != nil {
		return "", err
	}

	masked, err := cfg.RedactSecrets(sentinel).EncodeBytes(encoder.WithComments(encoder.CommentsDisabled))
	if err != nil {
		return "", err
	}

	docs, err := decodeAll(plain)
	if err != nil {
		return "", err
	}

	maskedDocs, err := decodeAll(masked)
	if err != nil {
		return "", err
	}

	if len(docs) != len(maskedDocs) {
		return "", errors.New("redacting the machine configuration: Talos' redaction changed its documents")
	}

	r := &redactor{}

	for i, doc := range docs {
		r.talosMasked(doc, maskedDocs[i])
		r.walk(doc, "", true)
	}

	out, err := encodeAll(docs)
	if err != nil {
		return "", err
	}

	return r.guard(out), nil
}

// Manifests renders Kubernetes manifests (YAML documents) with Secrets' data and stringData, PEM
// blocks and URL passwords replaced by fingerprints.
func Manifests(contents string) (string, error) {
	r := &redactor{}

	out, err := r.manifests(contents)
	if err != nil {
		return "", err
	}

	return r.guard(out), nil
}

// YAML renders any YAML with the values of keys named like secrets, PEM blocks and URL passwords
// replaced by fingerprints (layers 2 and 4, for text that is no whole machine configuration, e.g.
// a patch quoted in an error message).
func YAML(text string) (string, error) {
	docs, err := decodeAll([]byte(text))
	if err != nil {
		return "", err
	}

	r := &redactor{}
	for _, d := range docs {
		r.walk(d, "", true)
	}

	out, err := encodeAll(docs)
	if err != nil {
		return "", err
	}

	return r.guard(out), nil
}

// redactor replaces secret values in YAML trees and remembers them for the last pass.
type redactor struct {
	secrets []string
}

// hide replaces scalar n's value by its fingerprint.
func (r *redactor) hide(n *yaml.Node) {
	if n.Kind != yaml.ScalarNode || n.Value == "" || isFingerprint(n.Value) {
		return
	}

	r.secrets = append(r.secrets, n.Value)
	n.Value, n.Style, n.Tag = Fingerprint(n.Value), 0, "!!str"
}

func isFingerprint(v string) bool {
	return strings.HasPrefix(v, "<redacted sha256:") && strings.HasSuffix(v, ">") && len(v) == len("<redacted sha256:12345678>")
}

// talosMasked hides the values of plain that Talos' redaction replaced in masked (the same tree).
func (r *redactor) talosMasked(plain, masked *yaml.Node) {
	if plain == nil || masked == nil {
		return
	}

	if masked.Kind == yaml.ScalarNode && masked.Value == sentinel {
		r.hide(plain)
		return
	}

	if plain.Kind != masked.Kind || len(plain.Content) != len(masked.Content) {
		return // the trees only differ in values; a shape change leaves the other layers to it
	}

	for i := range plain.Content {
		r.talosMasked(plain.Content[i], masked.Content[i])
	}
}

// secretKeys are keys whose values are secret wherever they appear in a machine configuration
// (lower case).
var secretKeys = []string{
	"key", "crt", "cert", "token", "secret", "password", "auth", "identitytoken", "privatekey", "presharedkey",
	"bootstraptoken", "aescbcencryptionsecret", "secretboxencryptionsecret", "clientsecret", "apitoken", "passphrase",
}

// walk hides the secret values under n: values of secret keys (when keys, in a machine
// configuration), PEM and URL passwords everywhere, Secrets in inline manifests, extra manifest
// headers.
func (r *redactor) walk(n *yaml.Node, parentKey string, keys bool) {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			r.walk(c, parentKey, keys)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			name := strings.ToLower(k.Value)

			switch {
			case keys && slices.Contains(secretKeys, name) && v.Kind == yaml.ScalarNode:
				r.hide(v)
			case keys && name == "extramanifestheaders" && v.Kind == yaml.MappingNode:
				for j := 1; j < len(v.Content); j += 2 {
					r.hide(v.Content[j])
				}
			case keys && name == "contents" && parentKey == "inlinemanifests" && v.Kind == yaml.ScalarNode:
				if out, err := r.manifests(v.Value); err == nil {
					v.Value = out
				} else {
					r.hide(v) // not YAML Kubernetes can read either: nothing to show
				}
			default:
				r.walk(v, name, keys) // a sequence passes its key on to its items
			}
		}
	case yaml.ScalarNode:
		r.scalar(n)
	case yaml.AliasNode:
	}
}

// scalar hides a PEM block, base64 of one, or the password of a URL.
func (r *redactor) scalar(n *yaml.Node) {
	v := n.Value

	switch {
	case strings.Contains(v, "-----BEGIN"):
		r.hide(n)
	case len(v) >= 40 && isBase64PEM(v):
		r.hide(n)
	case strings.Contains(v, "://") && strings.Contains(v, "@"):
		// scheme://user:password@host…: the password as written (escaped or not) gives way to
		// its fingerprint, the rest of the URL stays readable.
		scheme, rest, _ := strings.Cut(v, "://")

		userinfo, host, ok := strings.Cut(rest, "@")
		if !ok || strings.ContainsAny(userinfo, "/ ") {
			return
		}

		user, pw, ok := strings.Cut(userinfo, ":")
		if !ok || pw == "" {
			return
		}

		r.secrets = append(r.secrets, pw)
		if unescaped, err := url.PathUnescape(pw); err == nil && unescaped != pw {
			r.secrets = append(r.secrets, unescaped)
		}

		n.Value = scheme + "://" + user + ":" + Fingerprint(pw) + "@" + host
	}
}

func isBase64PEM(v string) bool {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))

	return err == nil && bytes.Contains(b, []byte("-----BEGIN"))
}

// manifests redacts Kubernetes manifests: Secrets' data and stringData, and PEM blocks and URL
// passwords anywhere.
func (r *redactor) manifests(contents string) (string, error) {
	docs, err := decodeAll([]byte(contents))
	if err != nil {
		return "", err
	}

	for _, doc := range docs {
		if obj := root(doc); obj != nil && isSecret(obj) {
			for _, field := range []string{"data", "stringData"} {
				if m := lookup(obj, field); m != nil && m.Kind == yaml.MappingNode {
					for j := 1; j < len(m.Content); j += 2 {
						r.hide(m.Content[j])
					}
				}
			}
		}

		r.walk(doc, "", false)
	}

	return encodeAll(docs)
}

func root(doc *yaml.Node) *yaml.Node {
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		return doc.Content[0]
	}

	return nil
}

func isSecret(obj *yaml.Node) bool {
	kind, api := lookup(obj, "kind"), lookup(obj, "apiVersion")

	return kind != nil && kind.Value == "Secret" && api != nil && api.Value == "v1"
}

// lookup is mapping m's value for key, or nil.
var lookup = yamlnode.Child

// guard replaces what is left of a hidden value in the rendered text: the value itself (in
// another field), its base64 decoding, and the lines of a PEM body it holds.
func (r *redactor) guard(out string) string {
	for _, s := range r.secrets {
		fp := Fingerprint(s)

		for _, form := range forms(s) {
			out = strings.ReplaceAll(out, form, fp)
		}
	}

	return out
}

// minForm is the shortest form of a secret the last pass looks for: shorter strings (a PEM
// line's tail, a short password) would match innocent text.
const minForm = 16

func forms(s string) []string {
	out := []string{}
	add := func(f string) {
		if f = strings.TrimSpace(f); len(f) >= minForm && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}

	add(s)

	text := s
	if b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s)); err == nil {
		text = string(b)
		add(text)
	}

	for line := range strings.Lines(text) {
		if !strings.HasPrefix(line, "-----") {
			add(line)
		}
	}

	return out
}

func decodeAll(b []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))

	var docs []*yaml.Node

	for {
		var doc yaml.Node

		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}

		if err != nil {
			return nil, err
		}

		docs = append(docs, &doc)
	}
}

func encodeAll(docs []*yaml.Node) (string, error) {
	var b strings.Builder

	enc := yaml.NewEncoder(&b)
	enc.SetIndent(4)

	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			return "", err
		}
	}

	if err := enc.Close(); err != nil {
		return "", err
	}

	return b.String(), nil
}
