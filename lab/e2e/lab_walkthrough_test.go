//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLabWalkthrough runs docs/lab.md's walkthrough as written: `make lab-up` in the background
// (the first terminal), then the shell blocks in one bash session from the repository's root
// (the second terminal), from an empty project directory to `pulumi up`, a kubeconfig, a preview
// without changes, `pulumi destroy` and `make lab-down`. Its own lab directory and subnet come
// through the two variables docs/lab.md names (TALOS_LAB_DIR, TALOS_LAB_SUBNET). `make` runs with
// the toolchain, the plugin and the lab plugins taken as built (-o): `make test` built them, and
// rebuilding the plugin under tests that run it in parallel would pull it from under them.
func TestLabWalkthrough(t *testing.T) {
	t.Parallel() // its own lab directory and subnet

	doc, err := os.ReadFile(repoPath(t, "docs/lab.md"))
	if err != nil {
		t.Fatal(err)
	}

	labBlock, shell := walkthrough(t, string(doc))
	dir := t.TempDir()
	repo := repoPath(t, ".")

	env := append(os.Environ(), "TALOS_LAB_DIR="+dir, "TALOS_LAB_SUBNET=63")
	prelude := "set -euo pipefail\nmake() { command make -o toolchain -o kube -o provider -o lab \"$@\"; }\n"

	labCmd := exec.CommandContext(t.Context(), "bash", "-c", prelude+labBlock)
	labCmd.Dir, labCmd.Env = repo, env

	out := &syncBuffer{}
	labCmd.Stdout, labCmd.Stderr = out, out

	if err := labCmd.Start(); err != nil {
		t.Fatal(err)
	}

	exited := make(chan error, 1)
	go func() { exited <- labCmd.Wait() }()

	t.Cleanup(func() {
		if labCmd.ProcessState == nil {
			_ = exec.Command(filepath.Join(repo, "bin", "talos-lab"), "down", "-dir", dir).Run()
		}
	})

	// The reader waits for "== the lab is running".
	deadline := time.Now().Add(3 * time.Minute)
	for !strings.Contains(out.String(), "== the lab is running") {
		select {
		case err := <-exited:
			t.Fatalf("make lab-up exited (%v) before the lab ran:\n%s", err, out.String())
		case <-time.After(200 * time.Millisecond):
		}

		if time.Now().After(deadline) {
			t.Fatalf("the lab did not start within 3 minutes:\n%s", out.String())
		}
	}

	for _, name := range []string{"env.sh", "stack-config.json", "lab.pid"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v (want mode 0600)", name, err)
		}
	}

	sh := exec.CommandContext(t.Context(), "bash", "-c", prelude+shell+"\necho \"walkthrough-project=$PWD\"\n")
	sh.Dir, sh.Env = repo, env

	shOut, err := sh.CombinedOutput()
	if err != nil {
		t.Fatalf("the walkthrough's shell blocks failed: %v\n%s\n--- lab:\n%s", err, shOut, out.String())
	}

	text := string(shOut)
	for _, want := range []string{`\+ [1-9][0-9]* created`, `- [1-9][0-9]* deleted`, regexp.QuoteMeta("lab in " + dir + " stopped")} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("the walkthrough's output has no %q:\n%s", want, text)
		}
	}

	project := ""
	if i := strings.LastIndex(text, "walkthrough-project="); i >= 0 {
		project = strings.TrimSpace(strings.SplitN(text[i+len("walkthrough-project="):], "\n", 2)[0])
	}

	if project != "" {
		defer os.RemoveAll(project) //nolint:errcheck

		fi, err := os.Stat(filepath.Join(project, "kubeconfig"))
		if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() == 0 {
			t.Errorf("the kubeconfig the walkthrough wrote: %v %v", fi, err)
		}
	}

	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("make lab-up ended with %v:\n%s", err, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("make lab-up still runs after make lab-down:\n%s", out.String())
	}

	if _, err := os.Stat(filepath.Join(dir, "lab.pid")); !os.IsNotExist(err) {
		t.Errorf("the lab's pid file is left behind: %v", err)
	}

	if !strings.Contains(out.String(), "== stopping the lab") {
		t.Errorf("the lab did not say it stopped:\n%s", out.String())
	}
}

// walkthrough extracts the block after `<!-- walkthrough:lab -->` and the blocks after each
// `<!-- walkthrough:shell -->`, joined.
func walkthrough(t *testing.T, doc string) (lab, shell string) {
	t.Helper()

	var (
		shells []string
		target *string
		block  strings.Builder
		in     bool
	)

	sc := bufio.NewScanner(strings.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()

		switch {
		case line == "<!-- walkthrough:lab -->":
			target = &lab
		case line == "<!-- walkthrough:shell -->":
			shells = append(shells, "")
			target = &shells[len(shells)-1]
		case target != nil && !in && strings.HasPrefix(line, "```"):
			in = true
			block.Reset()
		case in && line == "```":
			*target, in, target = block.String(), false, nil
		case in:
			block.WriteString(line + "\n")
		}
	}

	if lab == "" || len(shells) == 0 {
		t.Fatal("docs/lab.md has no walkthrough blocks (<!-- walkthrough:lab --> and <!-- walkthrough:shell -->)")
	}

	return lab, strings.Join(shells, "\n")
}

// syncBuffer is a bytes.Buffer safe for a process writing while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()

	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()

	return b.buf.String()
}
