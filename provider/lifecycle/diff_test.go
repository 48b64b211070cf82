package lifecycle

import (
	"context"
	"strings"
	"testing"

	"github.com/pulumi/pulumi-go-provider/infer"
)

// diffCase is one change of a resource's inputs and what its Diff must answer: an update or
// not, or an error that says wantErr.
type diffCase[A any] struct {
	name    string
	change  func(*A)
	update  bool
	wantErr string
}

// testDiff runs diff for each case, on the inputs in changed by the case against state, and
// checks its answer; more checks what else a resource's answer must say. (A case that changes a
// map or slice of in replaces it.)
func testDiff[A, S any](t *testing.T, diff func(context.Context, infer.DiffRequest[A, S]) (infer.DiffResponse, error),
	state S, in A, cases []diffCase[A], more func(t *testing.T, tc diffCase[A], resp infer.DiffResponse, err error),
) {
	t.Helper()

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			inputs := in
			tc.change(&inputs)

			resp, err := diff(t.Context(), infer.DiffRequest[A, S]{Inputs: inputs, State: state})

			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case resp.HasChanges != tc.update:
				t.Fatalf("HasChanges = %v, want %v", resp.HasChanges, tc.update)
			}

			if more != nil {
				more(t, tc, resp, err)
			}
		})
	}
}
