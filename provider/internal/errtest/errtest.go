// Package errtest checks, in tests, that an error tells the user what it must: the property it
// is about, what is wrong and what to do.
package errtest

import (
	"strings"
	"testing"
)

// Says reports through t, each under what (the case), every one of wants that the message of
// err does not contain, or that there is no error (the input was accepted). It tells whether err
// is an error.
func Says(t testing.TB, what string, err error, wants ...string) bool {
	t.Helper()

	if err == nil {
		t.Errorf("%s: accepted", what)

		return false
	}

	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: the error does not say %q:\n%v", what, w, err)
		}
	}

	return true
}
