//go:build linux

package netns_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/netns"
)

// The test binary doubles as the subprocess of the tests: a client that dials addresses, or a
// process that only sleeps.
const (
	envMode  = "NETNS_TEST_MODE"  // "dial" or "sleep"
	envAddrs = "NETNS_TEST_ADDRS" // comma-separated host:port to dial and expect an echo from
)

func TestMain(m *testing.M) {
	switch os.Getenv(envMode) {
	case "dial":
		for _, a := range strings.Split(os.Getenv(envAddrs), ",") {
			if err := ping(a); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		os.Exit(0)
	case "sleep":
		time.Sleep(10 * time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// In the namespace, addresses of the prefix in two subnets and 127.0.0.5 are listened on and
// reached, from this process and from a process it starts.
func TestListenDialInside(t *testing.T) {
	t.Parallel()
	if netns.Run(t) {
		return
	}
	addrs := []netip.AddrPort{
		netip.AddrPortFrom(netns.Addr(1, 0x10), 50000),
		netip.AddrPortFrom(netns.Addr(2, 0x20), 50000),
		netip.MustParseAddrPort("127.0.0.5:50000"),
	}
	if got := addrs[0].Addr().String(); got != "fd1a:b:0:1::10" {
		t.Fatalf("Addr(1, 0x10) = %s, want fd1a:b:0:1::10", got)
	}
	var list []string
	for _, a := range addrs {
		echo(t, a.String())
		if err := ping(a.String()); err != nil {
			t.Error(err)
		}
		list = append(list, a.String())
	}

	cmd := exec.Command(executable(t))
	cmd.Env = append(os.Environ(), envMode+"=dial", envAddrs+"="+strings.Join(list, ","))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("a process started in the namespace could not reach its listeners: %v\n%s", err, out)
	}

	// The test keeps its uid, mapped to itself.
	if m, want := strings.Fields(readFile(t, "/proc/self/uid_map")), strconv.Itoa(os.Getuid()); len(m) != 3 || m[0] != want || m[1] != want || m[2] != "1" {
		t.Errorf("uid_map %q, want uid %s mapped to itself", m, want)
	}
	if !strings.Contains(ipv6Routes(t), "fd1a000b000000000000000000000000 30 ") {
		t.Errorf("no route of fd1a:b::/48 in /proc/net/ipv6_route:\n%s", ipv6Routes(t))
	}
	// Nothing leaves the namespace: an address outside the prefix is unreachable.
	if c, err := net.DialTimeout("tcp", "[fd1a:c::1]:50000", time.Second); err == nil {
		_ = c.Close()
		t.Error("fd1a:c::1, outside the prefix, is reachable from the namespace")
	} else if !errors.Is(err, syscall.ENETUNREACH) {
		t.Errorf("dialing fd1a:c::1 outside the prefix: %v, want %v", err, syscall.ENETUNREACH)
	}
}

// The namespace is private: while and after a subtest (whose name needs quoting in -test.run)
// listened on an address of the prefix in it, this process cannot bind it and the machine has no
// route of the prefix, nor a changed ip_nonlocal_bind.
func TestHostUntouched(t *testing.T) {
	nonlocal := readFile(t, "/proc/sys/net/ipv6/ip_nonlocal_bind")
	addr := netip.AddrPortFrom(netns.Addr(1, 0x10), 50000).String()
	var ran bool
	t.Run("in a namespace (a|b) [x]/y", func(t *testing.T) {
		if netns.Run(t) {
			ran = true
			return
		}
		echo(t, addr)
		if err := ping(addr); err != nil {
			t.Fatal(err)
		}
	})
	if netns.Inside() {
		return
	}
	if !ran {
		t.Fatal("the subtest did not run")
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		_ = l.Close()
		if nonlocal == "0" {
			t.Errorf("%s can be bound outside the namespace", addr)
		}
	} else if !errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Errorf("binding %s outside the namespace: %v, want %v", addr, err, syscall.EADDRNOTAVAIL)
	}
	if routes := ipv6Routes(t); strings.Contains(routes, "fd1a000b") {
		t.Errorf("the machine has a route of the prefix:\n%s", routes)
	}
	if got := readFile(t, "/proc/sys/net/ipv6/ip_nonlocal_bind"); got != nonlocal {
		t.Errorf("the machine's net.ipv6.ip_nonlocal_bind changed from %s to %s", nonlocal, got)
	}
}

// A process the test started and left running in the namespace (holding its output open) is
// killed once the test ended there.
func TestLeftoversKilled(t *testing.T) {
	if !netns.Inside() {
		t.Setenv("NETNS_TEST_PIDFILE", filepath.Join(t.TempDir(), "pid"))
	}
	if netns.Run(t) {
		pid, err := strconv.Atoi(readFile(t, os.Getenv("NETNS_TEST_PIDFILE")))
		if err != nil {
			t.Fatal(err)
		}
		if alive(pid) {
			t.Errorf("process %d, left in the namespace, still runs after the test", pid)
		}
		return
	}
	cmd := exec.Command(executable(t))
	cmd.Env = append(os.Environ(), envMode+"=sleep")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(os.Getenv("NETNS_TEST_PIDFILE"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// When the test's process is killed, the test in its namespace gets SIGKILL too.
func TestDiesWithTest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(executable(t), "-test.run=^TestHelperHang$")
	cmd.Env = append(os.Environ(), "NETNS_TEST_HANG="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var pid int
	for deadline := time.Now().Add(30 * time.Second); pid == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the test in the namespace did not start within 30 s")
		}
		b, err := os.ReadFile(filepath.Join(dir, "pid"))
		if err == nil && len(b) > 0 {
			pid, _ = strconv.Atoi(string(b))
		}
	}
	here, _ := os.Readlink("/proc/self/ns/net")
	if there, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err != nil || there == here {
		t.Errorf("the test in the namespace is in network namespace %q (%v), this process in %q", there, err, here)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	for deadline := time.Now().Add(10 * time.Second); alive(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d, the test in the namespace, outlived the test's process by 10 s", pid)
		}
	}
}

// TestHelperHang is TestDiesWithTest's test in a namespace, which never ends by itself.
func TestHelperHang(t *testing.T) {
	dir := os.Getenv("NETNS_TEST_HANG")
	if dir == "" || netns.Run(t) {
		return
	}
	if err := os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Minute)
}

// The test's verdict in the namespace is its verdict: a failure fails it, a skip skips it, and a
// test that exits without reaching netns.Run in the namespace fails.
func TestVerdict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode    string
		fails   bool
		outputs []string
	}{
		{"pass", false, []string{"--- PASS: TestHelperVerdict", "inside the namespace"}},
		{"fail", true, []string{"deliberate failure", "TestHelperVerdict failed in its network namespace (exit status 1)", "run it alone with -run '^TestHelperVerdict$'"}},
		{"skip", false, []string{"--- SKIP: TestHelperVerdict", "deliberate skip", "skipped in its network namespace"}},
		{"norun", true, []string{"without reaching its netns.Run call"}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			cmd := exec.Command(executable(t), "-test.run=^TestHelperVerdict$", "-test.v")
			cmd.Env = append(os.Environ(), "NETNS_TEST_VERDICT="+tc.mode)
			out, err := cmd.CombinedOutput()
			if (err != nil) != tc.fails {
				t.Errorf("exit: %v, want a failure: %v", err, tc.fails)
			}
			for _, want := range tc.outputs {
				if !strings.Contains(string(out), want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// TestHelperVerdict is TestVerdict's test in a namespace.
func TestHelperVerdict(t *testing.T) {
	mode := os.Getenv("NETNS_TEST_VERDICT")
	if mode == "" || mode == "norun" && netns.Inside() || netns.Run(t) {
		return
	}
	t.Log("inside the namespace")
	switch mode {
	case "fail":
		t.Error("deliberate failure")
	case "skip":
		t.Skip("deliberate skip")
	}
}

// echo serves, until the test ends, connections that get back the line they send.
func echo(t *testing.T, addr string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				line, _ := bufio.NewReader(c).ReadString('\n')
				_, _ = c.Write([]byte(line))
			}()
		}
	}()
}

// ping sends a line to an echo server and expects it back.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping " + addr + "\n")); err != nil {
		return err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || got != "ping "+addr+"\n" {
		return fmt.Errorf("echo from %s: %q, %v", addr, got, err)
	}
	return nil
}

// alive reports whether a process exists and has not exited (a zombie has).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command in parentheses, which may hold anything.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || !strings.HasPrefix(s[i+1:], " Z") && !strings.HasPrefix(s[i+1:], " X")
}

func executable(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func ipv6Routes(t *testing.T) string {
	t.Helper()
	return readFile(t, "/proc/net/ipv6_route")
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
