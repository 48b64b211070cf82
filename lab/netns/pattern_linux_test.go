package netns

import (
	"regexp"
	"strings"
	"testing"
)

// runPattern's elements match their element of the name and nothing else, as the testing package
// splits them; TestHostUntouched runs a subtest whose name needs all this for real.
func TestRunPattern(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"TestA", `^TestA$`},
		{"TestA/sub", `^TestA$/^sub$`},
		{"TestA/in_a_namespace_(a|b)_[x]/y", `^TestA$/^in_a_namespace_\(a\|b\)_\[x\]$/^y$`},
		{"TestA/x#01", `^TestA$/^x#01$`},
		{"TestA/#00", `^TestA$/^#00$`},
		{`TestA/a.b*c\d`, `^TestA$/^a\.b\*c\\d$`},
	} {
		got := runPattern(tc.name)
		if got != tc.want {
			t.Errorf("runPattern(%q) = %q, want %q", tc.name, got, tc.want)
		}
		pats, names := strings.Split(got, "/"), strings.Split(tc.name, "/")
		for i := range names {
			if !regexp.MustCompile(pats[i]).MatchString(names[i]) {
				t.Errorf("element %q of %q does not match %q", pats[i], got, names[i])
			}
		}
	}
}
