package day2

import (
	"strings"
	"testing"
)

func TestPlanRemoval(t *testing.T) {
	t.Parallel()

	three := func(downs ...string) []Member {
		ms := []Member{{1, "cp-1", true}, {2, "cp-2", true}, {3, "cp-3", true}}
		for i := range ms {
			for _, d := range downs {
				if ms[i].Name == d {
					ms[i].Healthy = false
				}
			}
		}

		return ms
	}

	for _, tc := range []struct {
		name      string
		members   []Member
		leaving   []string
		wantOrder string
		wantErr   string
		wantWarn  bool
	}{
		{"one healthy of three", three(), []string{"cp-3"}, "cp-3", "", true},
		{"nothing", three(), nil, "", "", false},
		{"a healthy one while another is down", three("cp-2"), []string{"cp-3"}, "", "bring cp-2 back first", false},
		{"the down one", three("cp-2"), []string{"cp-2"}, "cp-2", "", true},
		{"down and healthy: down first", three("cp-2"), []string{"cp-3", "cp-2"}, "cp-2,cp-3", "", true},
		{"every member", three(), []string{"cp-1", "cp-2", "cp-3"}, "", "every etcd member", false},
		{"no quorum", three("cp-2", "cp-3"), []string{"cp-1"}, "", "no quorum", false},
		{"no quorum, remove a dead one", three("cp-2", "cp-3"), []string{"cp-3"}, "", "no quorum", false},
		{"five, two leave", append(three(), Member{4, "cp-4", true}, Member{5, "cp-5", true}), []string{"cp-4", "cp-5"}, "cp-4,cp-5", "", false},
	} {
		order, warnings, err := PlanRemoval(tc.members, tc.leaving)

		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case names(order) != strings.ReplaceAll(tc.wantOrder, ",", ", "):
			t.Errorf("%s: order %s, want %s", tc.name, names(order), tc.wantOrder)
		case (len(warnings) > 0) != tc.wantWarn:
			t.Errorf("%s: warnings %v", tc.name, warnings)
		}
	}
}
