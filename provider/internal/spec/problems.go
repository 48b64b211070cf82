package spec

import (
	"fmt"
)

// problems collects every error and warning found while building a cluster.
type problems struct {
	errs     []error
	warnings []string
}

// errorf records an error at a property path, e.g. `nodes.cp-1.memoryMib: ...`.
func (p *problems) errorf(path, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
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

	return &ValidationError{Errors: p.errs}
}

// ValidationError lists every invalid input at once.
type ValidationError struct {
	Errors []error
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
