//go:build e2e

package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// s3Server is a versitygw S3 gateway on loopback, serving a temporary directory through its posix
// backend: each top-level directory is a bucket, each object a file below it.
type s3Server struct {
	// Endpoint is the gateway's http://127.0.0.1:<port> address.
	Endpoint string
	// AccessKey and SecretKey are the root credentials, generated for this server.
	AccessKey, SecretKey string
	// Root is the posix backend's directory.
	Root string
}

// startS3 starts versitygw ($TALOS_S3_BIN, which the Makefile sets, or tools/versitygw's cache)
// with fresh credentials and an empty bucket; the test stops it.
func startS3(t *testing.T, bucket string) *s3Server {
	t.Helper()

	bin := os.Getenv("TALOS_S3_BIN")
	if bin == "" {
		out, err := exec.Command(repoPath(t, "tools/versitygw/build.sh"), "--print-dir").Output()
		if err != nil {
			t.Fatalf("tools/versitygw/build.sh --print-dir: %v", err)
		}

		bin = filepath.Join(strings.TrimSpace(string(out)), "versitygw")
	}

	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("versitygw: %v; run `make versitygw` (or `make e2e`)", err)
	}

	s := &s3Server{AccessKey: randomHex(t, 10), SecretKey: randomHex(t, 20), Root: t.TempDir()}
	// The posix backend serves a directory as a bucket: an empty one is an empty bucket.
	if err := os.Mkdir(filepath.Join(s.Root, bucket), 0o755); err != nil {
		t.Fatal(err)
	}

	addr := freeLoopbackAddr(t)
	s.Endpoint = "http://" + addr

	cmd := exec.Command(bin, "--port", addr, "--quiet", "posix", s.Root)
	// The credentials go through the environment, not the command line other users can read.
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log

	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	var waitErr error
	done := make(chan struct{}) // closed when versitygw has ended, after waitErr is set
	go func() { waitErr = cmd.Wait(); close(done) }()

	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})

	for deadline := time.Now().Add(30 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			return s
		}

		select {
		case <-done:
			t.Fatalf("versitygw ended before it listened: %v\n%s", waitErr, log.String())
		case <-time.After(50 * time.Millisecond):
		}

		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("versitygw does not listen on %s after 30s:\n%s", addr, log.String())
		}
	}
}

// BackendURL is the `pulumi login` URL of bucket on this server: gocloud.dev's s3blob takes the
// endpoint, path-style addressing (the bucket in the path, not in the host name) and the region
// as query parameters.
func (s *s3Server) BackendURL(bucket string) string {
	q := url.Values{"endpoint": {s.Endpoint}, "use_path_style": {"true"}, "region": {"us-east-1"}}
	return "s3://" + bucket + "?" + q.Encode()
}

// Environ is the environment Pulumi's S3 client reads the credentials from.
func (s *s3Server) Environ() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_EC2_METADATA_DISABLED=true"}
}

// Objects lists the keys below prefix in bucket, as the posix backend stores them.
func (s *s3Server) Objects(t *testing.T, bucket, prefix string) []string {
	t.Helper()

	var keys []string
	root := filepath.Join(s.Root, bucket)
	err := filepath.WalkDir(filepath.Join(root, prefix), func(path string, d os.DirEntry, err error) error {
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}

		rel, _ := filepath.Rel(root, path)
		keys = append(keys, filepath.ToSlash(rel))

		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	return keys
}

func randomHex(t *testing.T, n int) string {
	t.Helper()

	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}

	return hex.EncodeToString(b)
}

func freeLoopbackAddr(t *testing.T) string {
	t.Helper()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()

	return l.Addr().String()
}

// TestS3StateAndLockOnTheLab keeps a cluster's state in an S3 bucket (versitygw on loopback):
// `pulumi login s3://…`, `up`, and while that `up` runs a second `up` of the same stack is
// refused with Pulumi's lock error; afterwards the state is intact (one update in the history,
// the same resources, no changes to preview, no lock left) and `destroy` empties it.
func TestS3StateAndLockOnTheLab(t *testing.T) {
	t.Parallel() // its own lab (subnet), S3 server, Pulumi home and project

	const bucket = "talos-state"

	s3 := startS3(t, bucket)
	e := newEnv(t)
	// Only `pulumi login` decides where the state lives: no PULUMI_BACKEND_URL from make or newEnv.
	e.environ = append(slices.DeleteFunc(e.environ, func(kv string) bool {
		return strings.HasPrefix(kv, "PULUMI_BACKEND_URL=")
	}), s3.Environ()...)

	if out, err := e.pulumi("login", s3.BackendURL(bucket)); err != nil {
		t.Fatalf("login: %v\n%s", err, out)
	}

	l, p := onLab(t, e, lab.Options{Subnet: 57}, func(l *lab.Lab) string { return smallCluster(l, "s3lock") })

	if whoami := mustRun(t, p, "whoami", "--verbose"); !strings.Contains(whoami, "s3://"+bucket) {
		t.Fatalf("the CLI is not logged in to the bucket:\n%s", whoami)
	}

	// Each VM create takes 4 s in the fake: the first `up` holds the lock long enough for the
	// second to be tried while it runs.
	const slowCreate = "POST /nodes/{node}/qemu"
	l.PVE.SetRouteLatency(slowCreate, 4*time.Second)

	first := exec.Command(filepath.Join(p.Bin, "pulumi"), "up", "--yes", "--skip-preview", "--non-interactive")
	first.Dir, first.Env = p.Dir, p.Env
	var firstOut strings.Builder
	first.Stdout, first.Stderr = &firstOut, &firstOut

	start := time.Now()
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}

	firstDone := make(chan error, 1)
	go func() { firstDone <- first.Wait() }()
	t.Cleanup(func() { _ = first.Process.Kill() }) // when the test ends early; no-op once it has ended

	locks := ".pulumi/locks/"
	for len(s3.Objects(t, bucket, locks)) == 0 || l.PVE.CallCount(slowCreate) == 0 {
		select {
		case err := <-firstDone:
			t.Fatalf("the first up ended before it was seen holding the lock: %v\n%s", err, firstOut.String())
		case <-time.After(20 * time.Millisecond):
		}

		if time.Since(start) > 2*time.Minute {
			_ = first.Process.Kill()
			err := <-firstDone
			t.Fatalf("no lock in the bucket and no VM created 2 minutes into the first up (%v):\n%s", err, firstOut.String())
		}
	}

	t.Logf("the first up holds %v after %s", s3.Objects(t, bucket, locks), time.Since(start).Round(time.Millisecond))

	second, err := p.Run(t.Context(), "up", "--yes", "--skip-preview")
	if err == nil {
		t.Fatalf("a second up of the locked stack succeeded:\n%s", second)
	}

	select {
	case err := <-firstDone:
		t.Fatalf("the first up (%v) ended before the second was refused: the lock was not tested\n%s", err, second)
	default:
	}

	for _, want := range []string{
		"the stack is currently locked by 1 lock(s)",
		fmt.Sprintf("(pid %d)", first.Process.Pid),
	} {
		if !strings.Contains(second, want) {
			t.Errorf("the refused up does not say %q:\n%s", want, second)
		}
	}

	if err := <-firstDone; err != nil {
		t.Fatalf("the first up: %v\n%s", err, firstOut.String())
	}

	t.Logf("the first up took %s", time.Since(start).Round(time.Millisecond))
	l.PVE.SetRouteLatency(slowCreate, -1)

	assertS3StateIntact(t, s3, bucket, l, p)

	if out, err := p.Run(t.Context(), "destroy", "--yes", "--skip-preview"); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}

	if n := len(l.PVE.VMs()); n != 0 {
		t.Errorf("the fake has %d VMs after destroy", n)
	}

	if n := len(exportResources(t, p)); n != 0 {
		t.Errorf("the stack in the bucket holds %d resources after destroy", n)
	}
}

// assertS3StateIntact checks the state after the concurrent ups: the stack's checkpoint is in the
// bucket with every resource the cluster has, exactly one update is recorded (the refused one left
// nothing), no lock is left, and a preview finds nothing to change.
func assertS3StateIntact(t *testing.T, s3 *s3Server, bucket string, l *lab.Lab, p *lab.Pulumi) {
	t.Helper()

	if left := s3.Objects(t, bucket, ".pulumi/locks/"); len(left) != 0 {
		t.Errorf("locks left in the bucket: %v", left)
	}

	if keys := s3.Objects(t, bucket, ".pulumi/stacks/"); !slices.ContainsFunc(keys, func(k string) bool {
		return strings.HasSuffix(k, "/lab.json")
	}) {
		t.Errorf("no checkpoint of stack lab in the bucket: %v", keys)
	}

	var history []struct {
		Kind   string `json:"kind"`
		Result string `json:"result"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, p, "stack", "history", "--json")), &history); err != nil {
		t.Fatal(err)
	}

	if len(history) != 1 || history[0].Kind != "update" || history[0].Result != "succeeded" {
		t.Errorf("the stack's history is %+v, want one succeeded update", history)
	}

	types := map[string]int{}
	for _, r := range exportResources(t, p) {
		types[r]++
	}

	if types[componentType] != 1 || types[vmType] != 2 || types[fileType] != 2 {
		t.Errorf("the stack holds %v; want the component, 2 VMs and 2 image downloads", types)
	}

	if n := len(l.PVE.VMs()); n != 2 {
		t.Errorf("the fake has %d VMs, want 2", n)
	}

	if !strings.Contains(mustRun(t, p, "stack", "output", "endpoint"), l.Address(11)) {
		t.Error("the endpoint output is not the control plane's address")
	}

	if out, err := p.Run(t.Context(), "preview", "--expect-no-changes", "--diff"); err != nil {
		t.Errorf("preview after up shows changes: %v\n%s", err, out)
	}
}

// exportResources are the types of the stack's resources, from `pulumi stack export`.
func exportResources(t *testing.T, p *lab.Pulumi) []string {
	t.Helper()

	var st stackState
	if err := json.Unmarshal([]byte(mustRun(t, p, "stack", "export")), &st); err != nil {
		t.Fatal(err)
	}

	types := make([]string, 0, len(st.Deployment.Resources))
	for _, r := range st.Deployment.Resources {
		types = append(types, r.Type)
	}

	return types
}
