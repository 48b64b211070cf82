package talosemu

import (
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
)

// diffConfigs renders the difference of two configurations as removed (-) and added (+) YAML
// lines, in the spirit of machinery's configdiff (which this module cannot import without adding
// a diff library): "" when they encode the same.
func diffConfigs(oldCfg, newCfg config.Encoder) (string, error) {
	a, err := oldCfg.EncodeString(encoder.WithComments(encoder.CommentsDisabled))
	if err != nil {
		return "", err
	}

	b, err := newCfg.EncodeString(encoder.WithComments(encoder.CommentsDisabled))
	if err != nil {
		return "", err
	}

	if a == b {
		return "", nil
	}

	return "--- a\n+++ b\n" + lineDiff(strings.Split(a, "\n"), strings.Split(b, "\n")), nil
}

// lineDiff lists the lines only in a (prefixed "-") and only in b ("+"), in order, along a longest
// common subsequence; common lines are left out.
func lineDiff(a, b []string) string {
	// lcs[i][j] is the length of the longest common subsequence of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}

	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}

	var out strings.Builder

	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			i, j = i+1, j+1
		case j < len(b) && (i == len(a) || lcs[i][j+1] >= lcs[i+1][j]):
			out.WriteString("+" + b[j] + "\n")
			j++
		default:
			out.WriteString("-" + a[i] + "\n")
			i++
		}
	}

	return out.String()
}
