// Package checks holds the repository-wide checks: the generated reference page
// (docs/configuration.md) is current, the README links every page of docs/, the YAML example
// matches the schema, the schema names where releases are downloaded, and no Go file grows into
// a monster. They read the repository as files and the provider through its public face only.
package checks
