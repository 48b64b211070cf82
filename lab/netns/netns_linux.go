//go:build linux

package netns

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Environment of a re-executed test binary. envMarker carries the network namespace of the
// process that started it ("net:[4026531840]"): Run refuses to set up the namespace it names.
const (
	envMarker  = "TALOS_LAB_NETNS"
	envTest    = "TALOS_LAB_NETNS_TEST"    // the full name of the test to run
	envVerdict = "TALOS_LAB_NETNS_VERDICT" // the file the test's verdict is written to
)

// runPattern returns the -test.run pattern that selects the test or subtest of this full name
// (t.Name()) and nothing else: each element of the name anchored and quoted. The testing package
// splits a pattern and a name at the same slashes (unquoted, outside brackets and parentheses),
// so a subtest name holding a slash still matches element by element.
func runPattern(name string) string {
	elems := strings.Split(name, "/")
	for i, e := range elems {
		elems[i] = "^" + regexp.QuoteMeta(e) + "$"
	}
	return strings.Join(elems, "/")
}

// capNetAdmin is CAP_NET_ADMIN (linux/capability.h), which the syscall package does not name.
const capNetAdmin = 12

// Inside reports whether this process is a test binary that [Run] re-executed in a namespace of
// its own (and everything that process started, which inherits the namespace).
func Inside() bool {
	_, ok := os.LookupEnv(envMarker)
	return ok
}

// Run runs t in a private user and network namespace where [Prefix] is local on lo. In the test's
// own process it re-executes the test binary for t alone in a new namespace, streams its output
// into t's, fails t if t failed there (skips t if it skipped there) and returns true: the caller
// returns at once. Inside the namespace ([Inside]) it sets the namespace up, once per process,
// and returns false: the caller runs the test. See the package documentation.
func Run(t *testing.T) bool {
	t.Helper()
	if Inside() {
		if err := setupOnce(); err != nil {
			t.Fatalf("netns: %v", err)
		}
		if t.Name() == os.Getenv(envTest) {
			recordVerdict(t, os.Getenv(envVerdict))
		}
		return false
	}
	runInNamespace(t)
	return true
}

// recordVerdict writes, once t and its subtests are done, whether t passed, failed or skipped to
// the file that the process outside reads: an exit status of 0 alone would not tell a test that
// passed from one that never ran.
func recordVerdict(t *testing.T, path string) {
	if path == "" {
		return
	}
	t.Cleanup(func() {
		verdict := "pass"
		switch {
		case t.Failed():
			verdict = "fail"
		case t.Skipped():
			verdict = "skip"
		}
		if err := os.WriteFile(path, []byte(verdict), 0o600); err != nil {
			t.Errorf("netns: writing the verdict for the process outside: %v", err)
		}
	})
}

// runInNamespace re-executes the test binary for t in a new user and network namespace and turns
// its outcome into t's.
func runInNamespace(t *testing.T) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("netns: finding the test binary to re-execute: %v", err)
	}
	here, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatalf("netns: reading this process's network namespace: %v", err)
	}
	verdict := filepath.Join(t.TempDir(), "verdict")
	args := childArgs(t)
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), envMarker+"="+here, envTest+"="+t.Name(), envVerdict+"="+verdict)
	cmd.SysProcAttr = namespaceAttr()
	// The child writes into a pipe of ours rather than one of exec's: Wait returns when it exits,
	// and leftovers in the namespace holding the pipe are killed before its output is drained.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatalf("netns: %v", err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw

	// Pdeathsig is sent when the thread that started the child dies: this goroutine keeps the
	// thread until the child is gone, so that no goroutine locked to it can end it earlier.
	runtime.LockOSThread()
	err = cmd.Start()
	_ = pw.Close()
	if err != nil {
		runtime.UnlockOSThread()
		_ = pr.Close()
		t.Fatal(startError(err))
	}
	out := t.Output()
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, pr)
	}()
	// An open namespace file keeps the namespace, and so its inode number, from being reused
	// before the sweep below: a parallel test's new namespace cannot be taken for this one.
	ns, nsErr := os.Open(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid))
	waitErr := cmd.Wait()
	runtime.UnlockOSThread()

	if nsErr == nil {
		if killed := sweep(ns); len(killed) > 0 {
			t.Logf("netns: killed what the test left running in its namespace: pids %v", killed)
		}
		_ = ns.Close()
	}
	select {
	case <-copied:
	case <-time.After(10 * time.Second):
		_ = pr.Close()
		<-copied
		t.Errorf("netns: the namespace's output was still open 10 s after the test ended there")
	}
	_ = pr.Close()

	if waitErr != nil {
		t.Fatalf("netns: %s failed in its network namespace (%v); its output is above; run it alone with -run '%s'",
			t.Name(), waitErr, runPattern(t.Name()))
	}
	if nsErr != nil {
		t.Fatalf("netns: the network namespace of %s was not found after it started (%v)", t.Name(), nsErr)
	}
	got, err := os.ReadFile(verdict)
	switch {
	case err == nil && string(got) == "pass":
	case err == nil && string(got) == "skip":
		t.Skipf("netns: %s skipped in its network namespace; its output is above", t.Name())
	case err == nil:
		t.Fatalf("netns: %s failed in its network namespace (verdict %q) yet exited 0; its output is above", t.Name(), got)
	default:
		t.Fatalf("netns: %s exited 0 in its network namespace without reaching its netns.Run call "+
			"(-test.run=%s ran nothing, or Run is not the test's first statement); its output is above: %v",
			t.Name(), runPattern(t.Name()), err)
	}
}

// namespaceAttr makes the child the only process of a new user and network namespace, its uid
// and gid mapped to ours, with CAP_NET_ADMIN in it (ambient, so that it survives the exec of an
// unprivileged test binary and reaches the processes the test starts), killed if we die.
func namespaceAttr() *syscall.SysProcAttr {
	uid, gid := os.Getuid(), os.Getgid()
	return &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
		AmbientCaps: []uintptr{capNetAdmin},
		Pdeathsig:   syscall.SIGKILL,
	}
}

// childArgs are the flags of the re-executed test binary: t alone, verbose if we are (plain -v,
// never test2json framing, which would be taken for this process's own), within t's deadline,
// with the flags of the test's own package, the testing flags that change how tests run and the
// coverage directory (so that `go test -cover` counts what ran in the namespace).
func childArgs(t *testing.T) []string {
	args := []string{"-test.run=" + runPattern(t.Name())}
	if testing.Verbose() {
		args = append(args, "-test.v=true")
	}
	if deadline, ok := t.Deadline(); ok {
		args = append(args, "-test.timeout="+childTimeout(time.Until(deadline)).String())
	}
	flag.Visit(func(f *flag.Flag) {
		switch {
		case !strings.HasPrefix(f.Name, "test."),
			slices.Contains([]string{"test.short", "test.failfast", "test.parallel", "test.fullpath", "test.gocoverdir"}, f.Name):
			args = append(args, "-"+f.Name+"="+f.Value.String())
		}
	})
	return args
}

// childTimeout leaves the test's process time to report after the child timed out (and printed
// its goroutines): a tenth of what is left, between 1 s and 30 s, at most half of it.
func childTimeout(left time.Duration) time.Duration {
	margin := min(max(left/10, time.Second), 30*time.Second, left/2)
	return max(left-margin, time.Millisecond)
}

// startError says why the child did not start; the kernel's refusal of a user namespace names the
// settings that decide it.
func startError(err error) string {
	refused := []syscall.Errno{syscall.EPERM, syscall.EINVAL, syscall.ENOSPC, syscall.EACCES, syscall.EUSERS}
	if !slices.ContainsFunc(refused, func(e syscall.Errno) bool { return errors.Is(err, e) }) {
		return fmt.Sprintf("netns: starting the test binary in a new user and network namespace: %v", err)
	}
	return fmt.Sprintf("netns: the kernel refused to create a user namespace (clone with "+
		"CLONE_NEWUSER|CLONE_NEWNET: %v). This test needs user namespaces, which an unprivileged "+
		"user may create: sysctl user.max_user_namespaces must be above 0 (it is %s), "+
		"kernel.unprivileged_userns_clone must be 1 where it exists (it is %s), "+
		"kernel.apparmor_restrict_unprivileged_userns must be 0 where it exists (it is %s); in a "+
		"container, its seccomp profile must allow clone and unshare with CLONE_NEWUSER",
		err, sysctl("user.max_user_namespaces"), sysctl("kernel.unprivileged_userns_clone"),
		sysctl("kernel.apparmor_restrict_unprivileged_userns"))
}

// sysctl reads a setting under /proc/sys, or says that it is absent.
func sysctl(name string) string {
	b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(name, ".", "/"))
	if errors.Is(err, os.ErrNotExist) {
		return "absent"
	}
	if err != nil {
		return "unreadable: " + err.Error()
	}
	return strings.TrimSpace(string(b))
}

// sweep kills every process in the network namespace of ns (processes of the test that outlived
// it) until none is left, and returns their pids. A process that has exited leaves its
// namespaces at once, so zombies are not found again.
func sweep(ns *os.File) []int {
	var want syscall.Stat_t
	if err := syscall.Fstat(int(ns.Fd()), &want); err != nil {
		return nil
	}
	var killed []int
	for range 100 {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return killed
		}
		found := false
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			var st syscall.Stat_t
			if syscall.Stat("/proc/"+e.Name()+"/ns/net", &st) != nil || st.Dev != want.Dev || st.Ino != want.Ino {
				continue
			}
			found = true
			if syscall.Kill(pid, syscall.SIGKILL) == nil && !slices.Contains(killed, pid) {
				killed = append(killed, pid)
			}
		}
		if !found {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return killed
}
