package spec

import (
	"fmt"
	"strings"
)

// problems collects every error and warning found while building a cluster.
type problems struct {
	errs     []error
	paths    []string
	warnings []string
}

// errorf records an error at a property path, e.g. `nodes.cp-1.memoryMib: ...`.
func (p *problems) errorf(path, format string, args ...any) {
	err := fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...))

	// A value every node inherits (nodeDefaults.networks) is checked with each node: say it once.
	for _, e := range p.errs {
		if e.Error() == err.Error() {
			return
		}
	}

	p.errs = append(p.errs, err)
	p.paths = append(p.paths, path)
}

// warnf records a warning at a property path.
func (p *problems) warnf(path, format string, args ...any) {
	p.warnings = append(p.warnings, fmt.Sprintf("%s: %s", path, fmt.Sprintf(format, args...)))
}

// err joins every error, or returns nil.
func (p *problems) err() error {
	if len(p.errs) == 0 {
		return nil
	}

	return &ValidationError{Errors: p.errs, Paths: p.paths}
}

// ValidationError lists every invalid input at once.
type ValidationError struct {
	Errors []error
	// Paths are the property paths of Errors, in the same order (checks made after Build,
	// such as Helm renders, may add errors without a path).
	Paths []string
}

// Has reports whether a problem was found at path or inside it (`helmCharts[0]` has
// `helmCharts[0].name`).
func (e *ValidationError) Has(path string) bool {
	for _, p := range e.Paths {
		if p == path || strings.HasPrefix(p, path+".") || strings.HasPrefix(p, path+"[") {
			return true
		}
	}

	return false
}

// Add appends problems found after Build, keeping one error for every problem of the input.
func (e *ValidationError) Add(errs ...error) {
	e.Errors = append(e.Errors, errs...)
}

func (e *ValidationError) Error() string {
	msg := fmt.Sprintf("invalid TalosProxmoxCluster inputs (%d problem", len(e.Errors))
	if len(e.Errors) != 1 {
		msg += "s"
	}

	msg += "):"
	for _, err := range e.Errors {
		msg += "\n  - " + err.Error()
	}

	return msg
}

// Unwrap lets errors.Is and errors.As see each problem.
func (e *ValidationError) Unwrap() []error { return e.Errors }
