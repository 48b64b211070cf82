package kubecp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartProcessUpstreamBinaries: given an upstream release's kube-apiserver (one binary per
// component), each component runs from its own binary beside it, with its flags and no
// component argument; this repository's kube binary gets the component as its first argument.
func TestStartProcessUpstreamBinaries(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()
	for _, name := range []string{"kube-apiserver", "kube-scheduler", "kube"} {
		script := "#!/bin/sh\necho " + name + " \"$@\"\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	cases := []struct{ bin, want string }{
		{bin: filepath.Join(dir, "kube-apiserver"), want: "kube-scheduler --leader-elect=false"},
		{bin: filepath.Join(dir, "kube"), want: "kube scheduler --leader-elect=false"},
	}

	for i, c := range cases {
		logPath := filepath.Join(dir, "log"+string(rune('0'+i)))

		p, err := startProcess(c.bin, "scheduler", logPath, []string{"--leader-elect=false"})
		if err != nil {
			t.Fatal(err)
		}
		<-p.done

		out, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}

		if got := strings.TrimSpace(string(out)); got != c.want || p.err != nil {
			t.Errorf("%s: ran %q (%v), want %q", c.bin, got, p.err, c.want)
		}
	}
}
