package secretsbundle

import (
	"crypto"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"regexp"
	"strings"

	"github.com/siderolabs/crypto/x509"
)

// bootstrapToken is Kubernetes' bootstrap token format (what Talos generates).
var bootstrapToken = regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)

type certPair struct{ crt, key []byte }

// values are a bundle's fields, decoded.
type values struct {
	clusterID, clusterSecret, trustdToken string
	bootstrapToken, secretbox, aescbc     string
	etcd, k8s, k8sAggregator, os          certPair
	serviceAccountKey                     []byte
}

// checker walks a decoded bundle, collecting every problem (by field name only, never a value).
type checker struct {
	tree     map[string]any
	n        names
	problems []string
	reported map[string]bool
}

func (c *checker) problem(path, format string, args ...any) {
	if c.reported[path] {
		return
	}

	c.reported[path] = true
	c.problems = append(c.problems, path+" "+fmt.Sprintf(format, args...))
}

// str is the string at path. A missing or null field is reported when required; a missing or
// malformed parent is reported once, for all its fields.
func (c *checker) str(required bool, path ...string) (string, bool) {
	var v any = c.tree

	for i, p := range path {
		m, ok := asMap(v)
		if !ok {
			c.problem(strings.Join(path[:i], "."), "is not a mapping")
			return "", false
		}

		v = m[p]
		if v == nil && (i < len(path)-1 || required) {
			c.problem(strings.Join(path[:i+1], "."), "is missing")
			return "", false
		}

		if v == nil {
			return "", false
		}
	}

	name := strings.Join(path, ".")

	s, ok := v.(string)
	switch {
	case !ok:
		c.problem(name, "is not a string")
	case s == x509.Redacted:
		c.problem(name, "is redacted: the bundle was exported without its secrets")
	case s == "" && required:
		c.problem(name, "is empty")
	case s == "":
	default:
		return s, true
	}

	return "", false
}

// check checks every field and returns the bundle they make (meaningful without problems).
func (c *checker) check() values {
	var v values

	v.clusterID, _ = c.str(true, "cluster", "id")
	v.clusterSecret, _ = c.str(true, "cluster", "secret")
	v.trustdToken, _ = c.str(true, "trustdinfo", "token")

	if s, ok := c.str(true, "secrets", c.n.bootstrap); ok {
		if bootstrapToken.MatchString(s) {
			v.bootstrapToken = s
		} else {
			c.problem("secrets."+c.n.bootstrap, "is not a Kubernetes bootstrap token ([a-z0-9]{6}.[a-z0-9]{16})")
		}
	}

	v.secretbox = c.encryptionSecret(c.n.secretbox)
	v.aescbc = c.encryptionSecret(c.n.aescbc)

	sb, ac := "secrets."+c.n.secretbox, "secrets."+c.n.aescbc
	if !c.reported["secrets"] && !c.reported[sb] && !c.reported[ac] {
		switch {
		case v.secretbox == "" && v.aescbc == "":
			c.problems = append(c.problems, fmt.Sprintf("one of %s and %s is required", sb, ac))
		case v.secretbox != "" && v.aescbc != "":
			c.problems = append(c.problems, fmt.Sprintf("%s and %s are both set: Talos allows only one", sb, ac))
		}
	}

	v.etcd = c.pair("etcd")
	v.k8s = c.pair("k8s")
	v.k8sAggregator = c.pair(c.n.aggregator)
	v.os = c.pair("os")

	if b, ok := c.base64(notKey, "certs", c.n.serviceAccount, "key"); ok {
		if _, err := (&x509.PEMEncodedKey{Key: b}).GetKey(); err != nil {
			c.problem("certs."+c.n.serviceAccount+".key", notKey)
		} else {
			v.serviceAccountKey = b
		}
	}

	return v
}

// encryptionSecret is an optional etcd encryption secret: base64 of 32 bytes.
func (c *checker) encryptionSecret(name string) string {
	s, ok := c.str(false, "secrets", name)
	if !ok {
		return ""
	}

	if b, err := base64.StdEncoding.DecodeString(s); err != nil || len(b) != 32 {
		c.problem("secrets."+name, "is not base64 of 32 bytes")
		return ""
	}

	return s
}

const (
	notCert = "is not a base64 PEM certificate"
	notKey  = "is not a base64 PEM private key"
)

// base64 is the decoded base64 of the required field at path; what describes it when it is not
// base64.
func (c *checker) base64(what string, path ...string) ([]byte, bool) {
	s, ok := c.str(true, path...)
	if !ok {
		return nil, false
	}

	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) == 0 {
		c.problem(strings.Join(path, "."), "%s", what)
		return nil, false
	}

	return b, true
}

// pair checks a CA: its certificate, its key, and that they belong together.
func (c *checker) pair(name string) certPair {
	crtPath, keyPath := "certs."+name+"."+c.n.crt, "certs."+name+".key"

	var (
		p   certPair
		pub crypto.PublicKey
		key crypto.Signer
	)

	if b, ok := c.base64(notCert, "certs", name, c.n.crt); ok {
		block, _ := pem.Decode(b)
		cert, err := (&x509.PEMEncodedCertificateAndKey{Crt: b}).GetCert()

		switch {
		case block == nil || block.Type != "CERTIFICATE" || err != nil:
			c.problem(crtPath, notCert)
		case !cert.IsCA:
			c.problem(crtPath, "is not a CA certificate")
		default:
			p.crt, pub = b, cert.PublicKey
		}
	}

	if b, ok := c.base64(notKey, "certs", name, "key"); ok {
		k, err := (&x509.PEMEncodedCertificateAndKey{Key: b}).GetKey()
		s, signer := k.(crypto.Signer)

		if err != nil || !signer {
			c.problem(keyPath, notKey)
		} else {
			p.key, key = b, s
		}
	}

	if pub != nil && key != nil {
		eq, ok := pub.(interface{ Equal(crypto.PublicKey) bool })
		if !ok || !eq.Equal(key.Public()) {
			c.problem(keyPath, "does not match %s (their public keys differ)", crtPath)
		}
	}

	return p
}
