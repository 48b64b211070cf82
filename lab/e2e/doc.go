// Package e2e holds end-to-end tests run by `make e2e` with the e2e build tag: the real
// Pulumi CLI and language hosts driving the built plugin.
package e2e
